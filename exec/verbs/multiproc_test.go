//go:build verbs && linux

package verbs

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/bootstrap"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
)

// Multi-process tests: the parent test starts one copy of the test binary per rank, each running
// TestRankProcess, which runs its rank of a plan on the verbs device with the polling engine and
// connects to the others through exec/bootstrap. Ranks learn their position from the Open MPI
// variables, as under mpirun.

// Environment of a rank process.
const (
	envPlan   = "COREDAG_VERBS_PLAN"        // .dag file to run
	envFault  = "COREDAG_VERBS_FAULT"       // perm, oob or unmatched: break the plan after loading
	envBoot   = "COREDAG_VERBS_BOOTSTRAP"   // rank 0's HOST:PORT
	envIters  = "COREDAG_VERBS_ITERS"       // iterations (default 1)
	envNoTrig = "COREDAG_VERBS_NO_TRIGGERS" // 1: exec.Options.NoTriggers (to measure what triggers bring)
	envAB     = "COREDAG_VERBS_AB"          // K: K rounds of a run with triggers then one without
	envTime   = "COREDAG_VERBS_TIMELINE"    // 1: exec.Options.Timeline; rank 0 prints its hop samples
)

// abRounds runs the plan k times with QP triggers and k times without, alternating, and has rank
// 0 print the median iteration time of each mode ("AB triggers=on|off N ns over M iterations")
// and the median over the k pairs of the ratio of a run's median with triggers to the next run's
// without ("AB ratio R over K pairs"): pairs see the same state of a machine whose speed drifts.
func abRounds(t *testing.T, ctx context.Context, k int, g *ir.Graph, plan *ir.Plan, p nic.Provider, cfg bootstrap.Config, opts exec.Options) {
	lat := map[bool][]time.Duration{}
	var ratios []float64
	var on time.Duration
	for i := 0; i < 2*k; i++ {
		opts.NoTriggers = i%2 == 1
		res, _, all, err := bootstrap.RunProcess(ctx, plan, p, cfg, opts)
		require.NoError(t, err)
		require.NoError(t, bootstrap.AllOK(all))
		lat[opts.NoTriggers] = append(lat[opts.NoTriggers], res.Latency.All...)
		if opts.NoTriggers {
			ratios = append(ratios, float64(on)/float64(res.Latency.Median))
		} else {
			on = res.Latency.Median
		}
	}
	if cfg.World.Rank != 0 {
		return
	}
	for _, off := range []bool{false, true} {
		l := lat[off]
		slices.Sort(l)
		fmt.Printf("AB triggers=%s %d ns over %d iterations\n", map[bool]string{false: "on", true: "off"}[off], l[len(l)/2].Nanoseconds(), len(l))
	}
	slices.Sort(ratios)
	fmt.Printf("AB ratio %.3f over %d pairs\n", ratios[len(ratios)/2], len(ratios))
}

// rankOutput is what rank 0 prints for the parent: one line per rank's verdict, and the median.
var (
	verdictLine = regexp.MustCompile(`(?m)^VERDICT (.*)$`)
	medianLine  = regexp.MustCompile(`(?m)^MEDIAN (\d+) ns over (\d+) iterations$`)
	hopsLine    = regexp.MustCompile(`(?m)^HOPS median (\d+) ns p10 (\d+) p90 (\d+) over (\d+) samples$`)
)

// TestRankProcess is one rank of a multi-process run; it does nothing unless started by
// spawnRanks.
func TestRankProcess(t *testing.T) {
	path := os.Getenv(envPlan)
	if path == "" {
		t.Skip("runs only as a rank process started by the multi-process tests")
	}
	world, err := bootstrap.ResolveWorld(-1, -1, nil)
	require.NoError(t, err)
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), filepath.Base(path), src, map[string]int64{"ranks": int64(world.Size)}, planner.Options{})
	require.NoError(t, err)
	opts := exec.Options{Engine: exec.Poll, Iters: 1, HangTimeout: 5 * time.Second, QuietRuntime: true}
	if n, err := strconv.Atoi(os.Getenv(envIters)); err == nil {
		opts.Iters = n
	}
	opts.NoTriggers = os.Getenv(envNoTrig) == "1"
	opts.Timeline = os.Getenv(envTime) == "1"
	// Run what `coredag run --provider verbs` runs: the plan compiled for the generic target
	// (selective signalling, small payloads inline). A graph broken on purpose is compiled once
	// broken: the compiler does not check what the faults break (access rights, bounds, matches).
	if f := os.Getenv(envFault); f != "" {
		g = breakGraph(t, g, f)
		opts.Reference = exec.NewMemory(g) // the reference rejects broken graphs
	}
	tg, err := ir.LookupTarget("generic")
	require.NoError(t, err)
	plan, err := planner.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	vo := testOptions()
	vo.Ranks = []int{world.Rank}
	p, err := New(vo)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	secret, _, err := bootstrap.ResolveSecret("", nil)
	require.NoError(t, err)
	cfg := bootstrap.Config{World: world, Addr: os.Getenv(envBoot), Secret: secret, Timeout: 30 * time.Second}
	if k, _ := strconv.Atoi(os.Getenv(envAB)); k > 0 {
		abRounds(t, ctx, k, g, plan, p, cfg, opts)
		return
	}
	res, own, all, err := bootstrap.RunProcess(ctx, plan, p, cfg, opts)
	require.NoError(t, err)
	t.Logf("own verdict: %v", own)
	if world.Rank != 0 {
		return
	}
	for _, r := range all {
		fmt.Printf("VERDICT %s\n", strings.ReplaceAll(r.String(), "\n", " | "))
	}
	if res != nil && res.OK {
		fmt.Printf("MEDIAN %d ns over %d iterations\n", res.Latency.Median.Nanoseconds(), res.Iters)
		fmt.Printf("ITERS %v\n", res.Latency.All)
		fmt.Printf("TRIGGERED %d of %d WQEs posted\n", res.Triggered, res.WQEsPosted)
		if h := hopSamples(g, res); len(h) > 0 {
			slices.Sort(h)
			fmt.Printf("HOPS median %d ns p10 %d p90 %d over %d samples\n", h[len(h)/2], h[len(h)/10], h[len(h)*9/10], len(h))
		}
	}
	require.NoError(t, bootstrap.AllOK(all))
}

// hopSamples reads a ping-pong's hop times from the timeline, as ib_write_lat samples its own:
// half of each interval between consecutive receive completions on rank 0 (one round trip: the
// ball goes out and comes back), within each iteration.
func hopSamples(g *ir.Graph, res *exec.Result) []int64 {
	var recvs []ir.OpID
	first, end := g.RankOps(0)
	for id := first; id < end; id++ {
		if g.Ops[id].Kind == ir.OpRecv {
			recvs = append(recvs, id)
		}
	}
	var h []int64
	for _, at := range res.Timeline {
		t := make([]int64, len(recvs))
		for i, id := range recvs {
			t[i] = int64(at[id])
		}
		slices.Sort(t)
		for i := 1; i < len(t); i++ {
			h = append(h, (t[i]-t[i-1])/2)
		}
	}
	return h
}

// breakGraph returns a copy of a valid fault plan from testdata/verbs, broken into the fault it
// is named for.
func breakGraph(t *testing.T, valid *ir.Graph, fault string) *ir.Graph {
	g := valid.Clone()
	op := func(name string) *ir.Op {
		for i := range g.Ops {
			if g.Ops[i].Name == name {
				return &g.Ops[i]
			}
		}
		t.Fatalf("fault %s: no op %s in %s", fault, name, g.File)
		return nil
	}
	switch fault {
	case "perm": // remote write without remote_write
		g.Buffers[op("w").Dst.Buf].Access &^= ir.RemoteWrite
	case "oob": // read past the end of the peer's buffer
		op("rd").Src.Off = 12
	case "unmatched": // delete the only receive, the last op of the graph
		rx := op("rx")
		id := ir.OpID(len(g.Ops) - 1)
		require.Equal(t, rx, &g.Ops[id], "rx must be the last op")
		q := &g.Queues[rx.Queue]
		q.RecvOps = slices.DeleteFunc(q.RecvOps, func(o ir.OpID) bool { return o == id })
		g.Ops[rx.Match].Match = ir.None
		g.Ops = g.Ops[:id]
		g.Rank[rx.Rank].EndOp = id
	default:
		t.Fatalf("unknown fault %q", fault)
	}
	return g.Freeze()
}

// rankRun is the outcome of one multi-process run.
type rankRun struct {
	out   []string // each rank's output
	err   []error  // each rank's exit
	rank0 string
}

// spawnRanks runs plan with n rank processes and waits for all of them.
func spawnRanks(t *testing.T, plan string, n int, env ...string) rankRun {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	// The rank processes are killed before the test binary's own timeout, so a hung run leaves
	// no process behind to load the device for the tests after it.
	limit := time.Now().Add(3 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-10*time.Second).Before(limit) {
		limit = d.Add(-10 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), limit)
	defer cancel()
	secret := rand.Text() // the job secret, new for each run
	_, err = osexec.LookPath("taskset")
	pin := err == nil && n <= runtime.NumCPU()
	run := rankRun{out: make([]string, n), err: make([]error, n)}
	var wg sync.WaitGroup
	for r := range n {
		args := []string{os.Args[0], "-test.run=^TestRankProcess$", "-test.v", "-test.count=1"}
		if pin {
			// One CPU per rank: busy-polling ranks that share a CPU wait a scheduler time
			// slice (milliseconds) for each other at every hop.
			args = append([]string{"taskset", "-c", strconv.Itoa(r % runtime.NumCPU())}, args...)
		}
		cmd := osexec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = append(os.Environ(), envPlan+"="+plan, envBoot+"="+addr, bootstrap.SecretEnv+"="+secret,
			"OMPI_COMM_WORLD_RANK="+strconv.Itoa(r), "OMPI_COMM_WORLD_SIZE="+strconv.Itoa(n))
		cmd.Env = append(cmd.Env, env...)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		require.NoError(t, cmd.Start())
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.err[r] = cmd.Wait()
			run.out[r] = buf.String()
		}()
	}
	wg.Wait()
	run.rank0 = run.out[0]
	return run
}

func (r rankRun) dump(t *testing.T) {
	for i, o := range r.out {
		t.Logf("--- rank %d (exit: %v)\n%s", i, r.err[i], o)
	}
}

func requireDevice(t *testing.T) {
	t.Helper()
	if os.Getenv(envPlan) != "" {
		t.Skip("inside a rank process")
	}
	provider(t)
}

// TestPlansMultiProcess runs every plan in plans/ with 2 and 4 ranks, one process per rank.
func TestPlansMultiProcess(t *testing.T) {
	requireDevice(t)
	plans, err := filepath.Glob("../../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, plans)
	for _, plan := range plans {
		for _, n := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/ranks=%d", strings.TrimSuffix(filepath.Base(plan), ".dag"), n), func(t *testing.T) {
				run := spawnRanks(t, plan, n)
				verdicts := verdictLine.FindAllStringSubmatch(run.rank0, -1)
				ok := len(verdicts) == n
				for r, v := range verdicts {
					ok = ok && v[1] == fmt.Sprintf("rank %d: ok", r)
				}
				for _, e := range run.err {
					ok = ok && e == nil
				}
				if !ok {
					run.dump(t)
					t.Fatalf("%s with %d ranks did not verify on every rank", plan, n)
				}
			})
		}
	}
}

// TestFaultsMultiProcess: the fault cases of the execution issue on a real NIC, each ending with
// an error that names the op, rank, queue and source line, within a bounded time.
func TestFaultsMultiProcess(t *testing.T) {
	requireDevice(t)
	tests := []struct {
		fault, plan string
		want        []string // on rank 0's verdict lines
	}{
		{"perm", "fault_perm.dag", []string{`rank 0: FAIL: .*fault_perm.dag:8:\d+: op w on rank 0, queue q: completed with status remote access error`}},
		{"oob", "fault_oob.dag", []string{`rank 1: FAIL: .*fault_oob.dag:8:\d+: op rd on rank 1, queue q: completed with status remote access error`}},
		{"unmatched", "fault_unmatched.dag", []string{`rank 0: FAIL: .*lonely.*stuck`}},
	}
	for _, tt := range tests {
		t.Run(tt.fault, func(t *testing.T) {
			start := time.Now()
			run := spawnRanks(t, "../../testdata/verbs/"+tt.plan, 2, envFault+"="+tt.fault)
			verdicts := strings.Join(verdictLine.FindAllString(run.rank0, -1), "\n")
			ok := run.err[0] != nil && len(verdictLine.FindAllString(run.rank0, -1)) == 2
			for _, w := range tt.want {
				ok = ok && regexp.MustCompile(w).MatchString(verdicts)
			}
			if !ok {
				run.dump(t)
				t.Fatalf("fault %s: rank 0 did not report the expected failure; verdicts:\n%s", tt.fault, verdicts)
			}
			t.Logf("%s ended in %v:\n%s", tt.fault, time.Since(start).Round(time.Millisecond), verdicts)
		})
	}
}

// TestPingPong runs testdata/verbs/pingpong.dag (1,000 dependent notified writes bouncing between
// two processes) and prints the per-hop latency for scripts/vm-test.sh to compare with
// ib_write_lat. COREDAG_PINGPONG_ITERS sets the iterations (default 5).
func TestPingPong(t *testing.T) {
	requireDevice(t)
	iters := "5"
	if s := os.Getenv("COREDAG_PINGPONG_ITERS"); s != "" {
		iters = s
	}
	run := spawnRanks(t, "../../testdata/verbs/pingpong.dag", 2, envIters+"="+iters, envTime+"=1")
	m := medianLine.FindStringSubmatch(run.rank0)
	h := hopsLine.FindStringSubmatch(run.rank0)
	if run.err[0] != nil || run.err[1] != nil || m == nil || h == nil {
		run.dump(t)
		t.Fatal("pingpong did not verify")
	}
	ns, _ := strconv.ParseFloat(m[1], 64)
	for _, m := range regexp.MustCompile(`(?m)^(ITERS|TRIGGERED) .*$`).FindAllString(run.rank0, -1) {
		fmt.Println(m)
	}
	fmt.Printf("PINGPONG per-hop mean %.2f us (iteration median %.3f ms over %s iterations, 1000 hops)\n", ns/1000/1000, ns/1e6, m[2])
	typ, _ := strconv.ParseFloat(h[1], 64)
	fmt.Printf("PINGPONG per-hop typical %.2f us (median of %s round trips / 2, p10 %s ns, p90 %s ns)\n", typ/1000, h[4], h[2], h[3])
}

// TestPingPongAB measures what QP triggers bring to the ping-pong: COREDAG_PINGPONG_AB pairs
// (default 10) of a run with triggers then one without, 5 iterations each, in the same two
// processes. It prints the median hop time of each mode and the median ratio over the pairs.
func TestPingPongAB(t *testing.T) {
	requireDevice(t)
	k := os.Getenv("COREDAG_PINGPONG_AB")
	if k == "" {
		k = "10"
	}
	run := spawnRanks(t, "../../testdata/verbs/pingpong.dag", 2, envAB+"="+k, envIters+"=5")
	m := regexp.MustCompile(`(?m)^AB triggers=(on|off) (\d+) ns over (\d+) iterations$`).FindAllStringSubmatch(run.rank0, -1)
	r := regexp.MustCompile(`(?m)^AB ratio ([0-9.]+) over (\d+) pairs$`).FindStringSubmatch(run.rank0)
	if run.err[0] != nil || run.err[1] != nil || len(m) != 2 || r == nil {
		run.dump(t)
		t.Fatal("the A/B ping-pong did not verify")
	}
	for _, x := range m {
		ns, _ := strconv.ParseFloat(x[2], 64)
		fmt.Printf("PINGPONG triggers=%s per-hop median %.2f us over %s iterations\n", x[1], ns/1e6, x[3])
	}
	fmt.Printf("PINGPONG triggers on/off = %s (median of %s paired runs)\n", r[1], r[2])
}
