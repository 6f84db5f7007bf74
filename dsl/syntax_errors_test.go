package dsl_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/chunktest"
)

// TestSyntaxErrors parses every chunk of testdata/errors/syntax.dag and checks that the
// diagnostics are exactly the ones its markers expect, at their lines and columns.
func TestSyntaxErrors(t *testing.T) {
	cases, err := chunktest.Read(filepath.Join("..", "testdata", "errors", "syntax.dag"))
	require.NoError(t, err)
	bad := 0
	for _, c := range cases {
		if len(c.Want) > 0 {
			bad++
		}
		t.Run(c.Name(), func(t *testing.T) {
			_, err := dsl.Parse(c.File, c.Src)
			chunktest.Check(t, err, c)
		})
	}
	require.GreaterOrEqual(t, bad, 12, "syntax.dag should keep at least a dozen broken inputs")
}
