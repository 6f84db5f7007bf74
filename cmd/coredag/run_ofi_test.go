//go:build ofi && linux

package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coredag/coredag/internal/netnstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() { binaryTags = "ofi" }

// The tests run libfabric's sockets provider on loopback: every endpoint binds 127.0.0.1.
var ofiEnv = []string{"FI_SOCKETS_IFACE=lo"}

// jobEnv is ofiEnv with a job secret, for the runs of one process per rank.
var jobEnv = append([]string{"COREDAG_JOB_SECRET=cmd-coredag-test-job-secret"}, ofiEnv...)

// procOut is what one rank process did.
type procOut struct {
	code           int
	stdout, stderr string
}

// runRanks runs one `coredag run --provider ofi` process per element of args, each with its own
// arguments (the plan last), and waits for all of them.
func runRanks(t *testing.T, env []string, args ...[]string) []procOut {
	t.Helper()
	res := make([]procOut, len(args))
	var wg sync.WaitGroup
	for r, a := range args {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(binary, append([]string{"run", "--provider", "ofi", "--ofi-provider", "sockets", "--target", "triggered-sockets"}, a...)...)
			res[r].code, res[r].stdout, res[r].stderr = runBounded(t, cmd, env, "")
		}()
	}
	wg.Wait()
	return res
}

// TestRunOFI runs two plans with every rank in one process: the offload engine on
// triggered-sockets, and the poll engine on generic.
func TestRunOFI(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	addr := freePort(t)
	res := runRanks(t, jobEnv,
		[]string{"--iters", "3", "--rank", "0", "--ranks", "2", "--bootstrap", addr, "plans/ring_allreduce.dag"},
		[]string{"--iters", "3", "--rank", "1", "--ranks", "2", "--bootstrap", addr, "plans/ring_allreduce.dag"})
	for r := range 2 {
		require.Equal(t, exitOK, res[r].code, "rank %d:\n%s%s", r, res[r].stdout, res[r].stderr)
	}
	assert.Contains(t, res[0].stdout, "PASS plans/ring_allreduce.dag: memory matches the reference on every rank (2 ranks, one process each)")
	assert.Contains(t, res[0].stdout, "ofi on ofi(sockets)")
}

// TestRunOFIStranger: a process started with another secret as rank 1 of a running job (another
// user's, say) is told it did not reach its job's rank 0 and exits; the job's own rank 1 joins and
// the run passes.
func TestRunOFIStranger(t *testing.T) {
	t.Parallel()
	addr := freePort(t)
	rank := func(r string) []string {
		return []string{"--rank", r, "--ranks", "2", "--bootstrap", addr, "plans/ring_allreduce.dag"}
	}
	var root []procOut
	done := make(chan struct{})
	go func() {
		defer close(done)
		root = runRanks(t, jobEnv, rank("0"))
	}()
	// Rank 0 is up once the port takes connections (the stranger retries until then, too).
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, time.Minute, 20*time.Millisecond)
	stranger := runRanks(t, append([]string{"COREDAG_JOB_SECRET=another-users-secret-0123456789"}, ofiEnv...), rank("1"))[0]
	assert.Equal(t, exitFail, stranger.code, stranger.stderr)
	assert.Contains(t, stranger.stderr, "is not this job's rank 0: it does not know the job secret")
	own := runRanks(t, jobEnv, rank("1"))[0]
	<-done
	require.Equal(t, exitOK, own.code, "%s%s", own.stdout, own.stderr)
	require.Equal(t, exitOK, root[0].code, "%s%s", root[0].stdout, root[0].stderr)
	assert.Contains(t, root[0].stdout, "PASS plans/ring_allreduce.dag")
	assert.Regexp(t, `rank 0: bootstrap: rank 0 dropped a connection from 127\.0\.0\.1:\d+: it did not prove it knows the job secret`, root[0].stderr)
}

// TestRunOFIJobMismatch: processes started with different params or --iters are refused while
// they connect, each naming the difference, instead of failing in the run (with a remote access
// error for fault_size.dag, whose rank 1 then registers 8 bytes where rank 0 writes 64).
func TestRunOFIJobMismatch(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, plan string
		rank1      []string
		difference string
	}{
		{"param", "plans/ring_allreduce.dag", []string{"-p", "n=2048"}, "rank 1 runs n=2048, rank 0 n=1024"},
		{"iters", "plans/ring_allreduce.dag", []string{"--iters", "5"}, "rank 1 runs --iters 5, rank 0 --iters 3"},
		{"buffer size", "testdata/ofi/fault_size.dag", []string{"-p", "n=8"}, "rank 1 runs n=8, rank 0 n=64"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := freePort(t)
			start := time.Now()
			rank := func(r string) []string { // with the plan's n: 1024 in ring_allreduce, 64 in fault_size
				return []string{"--iters", "3", "--rank", r, "--ranks", "2", "--bootstrap", addr, tt.plan}
			}
			res := runRanks(t, jobEnv, rank("0"), append(rank("1"), tt.rank1...))
			for r := range 2 {
				assert.Equal(t, exitFail, res[r].code, "rank %d:\n%s%s", r, res[r].stdout, res[r].stderr)
				assert.Contains(t, res[r].stderr, "rank 1 does not run the same job as rank 0: "+tt.difference, "rank %d", r)
			}
			assert.Less(t, time.Since(start), 30*time.Second)
		})
	}
}

// TestRunOFIPerProcessUsage: the flags of a run of one process per rank are checked before
// anything starts, each error naming the value and its source.
func TestRunOFIPerProcessUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	loose := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(loose, []byte("a-secret-long-enough-for-a-job\n"), 0o644))
	for _, tt := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"port 0", jobEnv, []string{"--rank", "0", "--ranks", "2", "--bootstrap", "127.0.0.1:0"},
			"bootstrap address 127.0.0.1:0 has port 0: rank 0 would listen on a port the system picks, which the other ranks cannot know"},
		{"negative rank", jobEnv, []string{"--rank=-2", "--ranks", "2", "--bootstrap", "127.0.0.1:1"}, "--rank -2 is negative"},
		{"negative ranks", jobEnv, []string{"--rank", "0", "--ranks=-3", "--bootstrap", "127.0.0.1:1"}, "--ranks -3: a run needs at least 1 process"},
		{"negative launcher rank", append([]string{"OMPI_COMM_WORLD_RANK=-1", "OMPI_COMM_WORLD_SIZE=2"}, jobEnv...), []string{"--bootstrap", "127.0.0.1:1"},
			"launcher variable OMPI_COMM_WORLD_RANK=-1 is a negative rank"},
		{"negative launcher size", append([]string{"SLURM_PROCID=0", "SLURM_NTASKS=-2"}, jobEnv...), []string{"--bootstrap", "127.0.0.1:1"},
			"launcher variable SLURM_NTASKS=-2: a run needs at least 1 process"},
		{"no secret", append([]string{"COREDAG_JOB_SECRET="}, ofiEnv...), []string{"--rank", "1", "--ranks", "2", "--bootstrap", "127.0.0.1:1"},
			"--provider ofi with 2 ranks needs a job secret that every rank holds and other users cannot read: generate one per job"},
		{"loose secret file", jobEnv, []string{"--rank", "1", "--ranks", "2", "--bootstrap", "127.0.0.1:1", "--job-secret-file", loose},
			"has mode 0644: other users may read or change it; chmod 600"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res := runRanks(t, tt.env, append(tt.args, "plans/ring_allreduce.dag"))[0]
			assert.Equal(t, exitUsage, res.code, res.stderr)
			assert.Contains(t, res.stderr, tt.want)
			assert.Less(t, time.Since(start), 10*time.Second, "refused at once")
		})
	}
}

// TestRunOFIBootstrapLoopbackOnly: the bootstrap of an ofi run listens on an address the other
// ranks can dial; --ofi-addr is for ofi, and names what this host has (TestRunOFIAcrossHosts
// runs ranks on two hosts).
func TestRunOFIBootstrapLoopbackOnly(t *testing.T) {
	t.Parallel()
	code, _, stderr := coredagEnv(t, ofiEnv, "", "run", "--provider", "ofi", "--rank", "0", "--ranks", "2",
		"--bootstrap", "0.0.0.0:1", "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "--bootstrap 0.0.0.0:1: give rank 0's address, which the other ranks dial (127.0.0.1:PORT when every rank runs on this host)")
	code, _, stderr = coredag(t, "", "run", "--ofi-addr", "lo", "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code, stderr)
	assert.Contains(t, stderr, "--ofi-addr is for --provider ofi")
	code, _, stderr = coredag(t, "", "run", "--provider", "ofi", "--ofi-provider", "sockets", "--ofi-addr", "nosuch0", "plans/ring_allreduce.dag")
	assert.Equal(t, exitFail, code, stderr)
	assert.Regexp(t, `^coredag: --provider ofi: "nosuch0" is neither an IPv4 address nor an interface of this host \(this host has lo 127\.0\.0\.1`, stderr)
	code, stdout, stderr := coredag(t, "", "run", "--provider", "ofi", "--ofi-provider", "sockets", "--ofi-addr", "127.0.0.1", "plans/ring_allreduce.dag")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "PASS")
}

// A libfabric provider this host lacks (cxi, off Slingshot) is refused as every error is: on
// stderr, after "coredag: ", naming the flag.
func TestRunOFIUnknownProvider(t *testing.T) {
	t.Parallel()
	code, _, stderr := coredag(t, "", "run", "--provider", "ofi", "--ofi-provider", "cxi", "plans/ring_allgather.dag")
	assert.Equal(t, exitFail, code)
	assert.Regexp(t, `^coredag: --provider ofi: libfabric offers no provider "cxi"`, stderr)
}

// TestRunOFIAcrossHosts runs a plan with one process per rank on two hosts (network namespaces
// joined by a veth pair, internal/netnstest) without --ofi-addr: each rank binds the address on
// which its host reaches rank 0's --bootstrap, on one network and on two subnets routed to each
// other. Even ranks run on the first host, odd ones on the second.
func TestRunOFIAcrossHosts(t *testing.T) {
	netnstest.Enabled(t)
	joined, apart := netnstest.TwoHosts(t, "cj", true), netnstest.TwoHosts(t, "ca", false)
	for _, c := range []struct {
		prov  string
		ranks int
		hosts [2]netnstest.Host
	}{
		{"tcp;ofi_rxm", 4, joined},
		{"sockets", 2, joined},
		{"tcp;ofi_rxm", 2, apart},
	} {
		t.Run(fmt.Sprintf("%s/%d ranks/%s", c.prov, c.ranks, c.hosts[1].IP), func(t *testing.T) {
			boot := c.hosts[0].IP + ":7701"
			res := make([]procOut, c.ranks)
			var wg sync.WaitGroup
			for r := range c.ranks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cmd := exec.Command("ip", "netns", "exec", c.hosts[r%2].NS, binary, "run", "--provider", "ofi", "--ofi-provider", c.prov,
						"--iters", "3", "--rank", strconv.Itoa(r), "--ranks", strconv.Itoa(c.ranks), "--bootstrap", boot, "plans/ring_allreduce.dag")
					res[r].code, res[r].stdout, res[r].stderr = runBounded(t, cmd, jobEnv, "")
				}()
			}
			wg.Wait()
			for r := range res {
				require.Equal(t, exitOK, res[r].code, "rank %d:\n%s%s", r, res[r].stdout, res[r].stderr)
			}
			assert.Contains(t, res[0].stdout, fmt.Sprintf("PASS plans/ring_allreduce.dag: memory matches the reference on every rank (%d ranks, one process each)", c.ranks))
			assert.Contains(t, res[0].stdout, "ofi on ofi("+c.prov+")")
		})
	}
}
