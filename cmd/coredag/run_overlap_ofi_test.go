//go:build ofi && linux

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunOverlapOFI: run --overlap on libfabric's sockets provider, both engines, every rank in
// this process: the overlap lines follow a PASS verdict. One rank per process is refused.
func TestRunOverlapOFI(t *testing.T) {
	t.Parallel()
	const plan = "plans/ring_allreduce.dag"
	for _, target := range []string{"triggered-sockets", "generic"} {
		code, stdout, stderr := coredagEnv(t, ofiEnv, "", "run", "--overlap", "--provider", "ofi", "--ofi-provider", "sockets",
			"--target", target, "--iters", "2", "-p", "n=64", plan)
		require.Equal(t, exitOK, code, "%s:\n%s%s", target, stdout, stderr)
		assert.Contains(t, stdout, "PASS "+plan)
		assert.Contains(t, stdout, "target "+target+", ofi")
		assert.Regexp(t, `\n  overlap \d+\.\d% \(middle half of the rounds \d+\.\d% to \d+\.\d%\): communication alone `, stdout)
		assert.Contains(t, stdout, "\n  CPU time per iteration: ")
	}
	code, _, stderr := coredagEnv(t, ofiEnv, "", "run", "--overlap", "--provider", "ofi", "--rank", "0", "--ranks", "2",
		"--bootstrap", "127.0.0.1:1", plan)
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "--overlap runs every rank in this process")
}
