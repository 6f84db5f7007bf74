package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/chunktest"
)

// TestCheckErrorFiles runs `coredag check` on every chunk of every chunked error file, as a
// user would (in this process, and through the binary under CI): each broken input must exit 1
// with its diagnostics at the right line and column, a clean chunk must exit 0, and nothing may
// panic or hang (coredagIn bounds each run).
func TestCheckErrorFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "errors", "*.dag"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	broken := 0
	for _, path := range files {
		cases, err := chunktest.Read(path)
		require.NoError(t, err)
		for _, c := range cases {
			if len(c.Want) > 0 {
				broken++
			}
			t.Run(c.Name(), func(t *testing.T) {
				t.Parallel() // each case in a directory of its own, under the file's name
				f := filepath.Join(t.TempDir(), filepath.Base(path))
				require.NoError(t, os.WriteFile(f, c.Src, 0o644))
				code, _, stderr := coredagIn(t, "", "check", f)
				assert.NotContains(t, stderr, "panic")
				if len(c.Want) == 0 {
					assert.Equal(t, exitOK, code, stderr)
					return
				}
				assert.Equal(t, exitFail, code, stderr)
				for _, m := range chunktest.Mismatches(chunktest.ParseOutput(stderr), c) {
					t.Error(m)
				}
			})
		}
	}
	assert.GreaterOrEqual(t, broken, 30+20+12, "front-end, verification and syntax error cases")
}
