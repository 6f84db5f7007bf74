//go:build ofi && linux

package main

import (
	"fmt"
	"net"
	"os/exec"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() { binaryTags = "ofi" }

// The tests run libfabric's sockets provider on loopback: every endpoint binds 127.0.0.1.
var ofiEnv = []string{"FI_SOCKETS_IFACE=lo"}

// TestRunOFI runs two plans with every rank in one process: the offload engine on
// triggered-sockets, and the poll engine on generic.
func TestRunOFI(t *testing.T) {
	for _, f := range []string{"plans/ring_allreduce.dag", "plans/notify_scatter.dag"} {
		for _, target := range []string{"triggered-sockets", "generic"} {
			code, stdout, stderr := coredagEnv(t, ofiEnv, "", "run", "--provider", "ofi", "--ofi-provider", "sockets",
				"--target", target, "--iters", "3", "-p", "ranks=4", f)
			require.Equal(t, exitOK, code, "%s on %s:\n%s%s", f, target, stdout, stderr)
			assert.Contains(t, stdout, "PASS "+f)
			assert.Contains(t, stdout, "target "+target+", ofi")
		}
	}
}

// freePort is a free TCP port on 127.0.0.1 for the bootstrap.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// TestRunOFITwoProcesses runs a plan with one process per rank, the ranks exchanging endpoint
// addresses and keys through the bootstrap on 127.0.0.1.
func TestRunOFITwoProcesses(t *testing.T) {
	addr := freePort(t)
	type out struct {
		code           int
		stdout, stderr string
	}
	var res [2]out
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(binary, "run", "--provider", "ofi", "--ofi-provider", "sockets", "--target", "triggered-sockets",
				"--iters", "3", "--rank", fmt.Sprint(r), "--ranks", "2", "--bootstrap", addr, "plans/ring_allreduce.dag")
			res[r].code, res[r].stdout, res[r].stderr = runBounded(t, cmd, ofiEnv, "")
		}()
	}
	wg.Wait()
	for r := range 2 {
		require.Equal(t, exitOK, res[r].code, "rank %d:\n%s%s", r, res[r].stdout, res[r].stderr)
	}
	assert.Contains(t, res[0].stdout, "PASS plans/ring_allreduce.dag: memory matches the reference on every rank (2 ranks, one process each)")
	assert.Contains(t, res[0].stdout, "ofi on ofi(sockets)")
}

// TestRunOFIBootstrapLoopbackOnly: the bootstrap of an ofi run listens on loopback only.
func TestRunOFIBootstrapLoopbackOnly(t *testing.T) {
	code, _, stderr := coredagEnv(t, ofiEnv, "", "run", "--provider", "ofi", "--rank", "0", "--ranks", "2",
		"--bootstrap", "0.0.0.0:1", "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "loopback only")
}

// TestRunOFIFault: a write that fails only at run time (rank 1 registers its buffer with 8 bytes,
// rank 0 writes 64), with one process per rank on the offload engine: rank 0 exits 1 naming the
// op, its rank, queue and file:line, and so does rank 1, told through the bootstrap. runBounded's
// timeout bounds how long that takes.
func TestRunOFIFault(t *testing.T) {
	addr := freePort(t)
	const f = "testdata/ofi/fault_size.dag"
	var res [2]struct {
		code           int
		stdout, stderr string
	}
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := []string{"run", "--provider", "ofi", "--ofi-provider", "sockets", "--target", "triggered-sockets",
				"--rank", fmt.Sprint(r), "--ranks", "2", "--bootstrap", addr, f}
			if r == 1 {
				args = append(args, "-p", "n=8")
			}
			res[r].code, res[r].stdout, res[r].stderr = runBounded(t, exec.Command(binary, args...), ofiEnv, "")
		}()
	}
	wg.Wait()
	want := `testdata/ofi/fault_size.dag:11:6: op w on rank 0, queue q.sq: RDMA_WRITE entry #0: completed with status remote access error`
	for r := range 2 {
		assert.Equal(t, exitFail, res[r].code, "rank %d:\n%s%s", r, res[r].stdout, res[r].stderr)
		assert.Contains(t, res[r].stdout+res[r].stderr, want, "rank %d", r)
	}
}
