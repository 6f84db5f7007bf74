//go:build ofi && linux

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunOFIMSCCL runs an MSCCL-IR algorithm on libfabric's triggered operations (every rank in
// one process) and checks its postcondition on the values.
func TestRunOFIMSCCL(t *testing.T) {
	t.Parallel()
	const xml = "testdata/msccl/ring_allreduce_4.xml"
	code, stdout, stderr := coredagEnv(t, ofiEnv, "", "run", "--provider", "ofi", "--ofi-provider", "sockets",
		"--target", "triggered-sockets", "--iters", "3", xml)
	require.Equal(t, exitOK, code, "%s%s", stdout, stderr)
	assert.Contains(t, stdout, "PASS "+xml)
	assert.Contains(t, stdout, "target triggered-sockets, ofi")
	assert.Contains(t, stdout, "held: expect allreduce sum data")
}
