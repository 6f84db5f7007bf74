package planner

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/chunktest"
)

// TestErrorFiles runs every chunked error file of the planner's phases (names, shapes,
// matching, expressions, queues, cycles, FIFO deadlocks, races, postconditions): each chunk must give exactly
// the diagnostics its ### markers expect, at their lines and columns. Syntax errors are the
// dsl package's test.
func TestErrorFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "errors", "*.dag"))
	require.NoError(t, err)
	perFile := map[string]int{}
	for _, path := range files {
		name := filepath.Base(path)
		if name == "syntax.dag" {
			continue
		}
		cases, err := chunktest.Read(path)
		require.NoError(t, err)
		for _, c := range cases {
			t.Run(c.Name(), func(t *testing.T) {
				_, err := dsl.Parse(path, c.Src)
				require.NoError(t, err, "a planner error case must parse")
				_, err = Load(t.Context(), path, c.Src, nil, Options{})
				chunktest.Check(t, err, c)
			})
			if len(c.Want) > 0 {
				perFile[name]++
			}
		}
	}
	total := 0
	for _, n := range perFile {
		total += n
	}
	assert.GreaterOrEqual(t, total, 30+20, "front-end and verification error cases")
	for _, family := range []string{"names.dag", "shapes.dag", "matching.dag", "exprs.dag", "queues.dag", "cycles.dag", "fifo.dag", "races.dag", "expects.dag"} {
		assert.Positive(t, perFile[family], "no cases for %s", family)
	}
}
