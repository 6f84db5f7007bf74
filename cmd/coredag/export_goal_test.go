package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExportGOAL(t *testing.T) {
	t.Parallel()
	code, out, errOut := coredag(t, "", "export", "goal", "-p", "ranks=4", "plans/recursive_doubling_allreduce.dag")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "num_ranks 4\n\nrank 0 {\n")
	assert.Regexp(t, `(?m)^o\d+: send 2048b to 1 tag \d+$`, out) // 256 i64
	f := filepath.Join(t.TempDir(), "x.goal")
	code, _, errOut = coredag(t, "", "export", "goal", "-o", f, "plans/ring_allreduce.dag")
	require.Equal(t, 0, code, errOut)
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	assert.Contains(t, string(b), "irequires")
	code, _, errOut = coredag(t, "", "export", "goal", "--params", "/nonexistent.json", "plans/ring_allreduce.dag")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--params")
}
