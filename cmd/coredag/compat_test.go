package main

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/compat holds plans as they were before the language had `assert`: they guard their
// params with `let ok = 1 / (cond)`. They still check and run, and elaborate to as many ops as
// the library's versions of them.
func TestCompatPlans(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(repoRoot, "testdata", "compat", "*.dag"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	ops := regexp.MustCompile(`, (\d+) ops`)
	for _, f := range files {
		old, now := f, filepath.Join(repoRoot, "plans", filepath.Base(f))
		for _, ranks := range []string{"ranks=2", "ranks=5", "ranks=8"} {
			code, stdout, stderr := coredagIn(t, "", "check", "-p", ranks, old)
			require.Equal(t, exitOK, code, "%s %s:\n%s", old, ranks, stderr)
			_, want, _ := coredagIn(t, "", "check", "-p", ranks, now)
			assert.Equal(t, ops.FindStringSubmatch(want), ops.FindStringSubmatch(stdout), "%s %s", old, ranks)
			code, _, stderr = coredagIn(t, "", "run", "--iters", "2", "-p", ranks, old)
			assert.Equal(t, exitOK, code, "%s %s:\n%s", old, ranks, stderr)
		}
	}
}
