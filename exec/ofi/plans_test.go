//go:build ofi && linux

package ofi_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/ofi"
	"github.com/coredag/coredag/internal/nictest"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

// socketsProvider opens libfabric's sockets provider for the test, which skips without it.
func socketsProvider(t testing.TB) *ofi.Provider {
	t.Helper()
	opts := ofi.DefaultOptions()
	opts.Provider = "sockets"
	p, err := ofi.NewProvider(opts)
	if err != nil {
		t.Skipf("no libfabric sockets provider: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// compileFile loads plan file f with params and compiles it for target.
func compileFile(t testing.TB, f string, params map[string]int64, target string) (*ir.Graph, *ir.Plan) {
	t.Helper()
	src, err := os.ReadFile(f)
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), f, src, params, planner.Options{})
	require.NoError(t, err, "%s %v", f, params)
	tg, err := ir.LookupTarget(target)
	require.NoError(t, err)
	plan, err := lower.Compile(t.Context(), g, tg)
	require.NoError(t, err, "%s %v for %s", f, params, target)
	return g, plan
}

// providers are the libfabric providers the tests run on: each is skipped where libfabric does
// not offer it, except under CI=1 for those in required. verbs;ofi_rxm needs an RDMA device
// (Soft-RoCE in CI's VM stage).
var (
	providers = []string{"shm", "tcp;ofi_rxm", "sockets", "verbs;ofi_rxm"}
	required  = map[string]bool{"shm": true, "tcp;ofi_rxm": true, "sockets": true}
)

// openNamed opens libfabric provider name for the test. A provider libfabric does not offer is
// skipped (failed under CI=1 if required); one it offers but coredag refuses fails the test.
func openNamed(t testing.TB, name string) *ofi.Provider {
	t.Helper()
	opts := ofi.DefaultOptions()
	opts.Provider = name
	p, err := ofi.NewProvider(opts)
	if err != nil {
		if !ofi.Listed(name) && !(required[name] && os.Getenv("CI") == "1") {
			t.Skipf("libfabric has no %s provider here: %v", name, err)
		}
		t.Fatalf("provider %s: %v", name, err)
	}
	t.Logf("%s grants: %s", name, p.Grants())
	t.Cleanup(func() { p.Close() })
	return p
}

// TestPlans runs every plan of plans/ at 2 and 4 ranks on each provider over loopback (shm:
// shared memory), every rank in this process with its own domain and endpoints: the poll engine
// with target generic, and where the provider has triggered operations (FI_TRIGGER: sockets) the
// offload engine with the plan compiled for triggered-sockets (libfabric counters and triggered
// operations) beside it. Every run must match the reference.
func TestPlans(t *testing.T) {
	files, err := filepath.Glob("../../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, prov := range providers {
		t.Run(prov, func(t *testing.T) {
			p := openNamed(t, prov)
			type engine struct {
				engine exec.Engine
				target string
			}
			cases := []engine{{exec.Poll, "generic"}}
			if p.Triggered() {
				cases = append(cases, engine{exec.Offload, "triggered-sockets"})
			}
			for _, f := range files {
				name := strings.TrimSuffix(filepath.Base(f), ".dag")
				src, err := os.ReadFile(f)
				require.NoError(t, err)
				for _, ranks := range []int{2, 4} {
					g, err := planner.Load(t.Context(), f, src, map[string]int64{"ranks": int64(ranks)}, planner.Options{})
					require.NoError(t, err, "%s ranks=%d", name, ranks)
					for _, c := range cases {
						t.Run(fmt.Sprintf("%s/ranks=%d/%s-%s", name, ranks, c.engine, c.target), func(t *testing.T) {
							tg, err := ir.LookupTarget(c.target)
							require.NoError(t, err)
							plan, err := lower.Compile(t.Context(), g, tg)
							require.NoError(t, err)
							ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
							defer cancel()
							res, err := exec.Run(ctx, plan, p, exec.Options{Engine: c.engine, Iters: 3})
							require.NoError(t, err)
							require.True(t, res.OK, res.Summary())
						})
					}
				}
			}
		})
	}
}

// TestTriggeredTargetWithoutTrigger: a plan compiled for a triggered target runs on a provider
// without FI_TRIGGER when the engine is left to choose (the poll engine), and the offload engine,
// asked for by name, is refused with the reason before anything runs.
func TestTriggeredTargetWithoutTrigger(t *testing.T) {
	p := openNamed(t, "shm")
	require.False(t, p.Triggered(), "shm has no FI_TRIGGER")
	_, plan := compileFile(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 2}, "triggered-sockets")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := exec.Run(ctx, plan, p, exec.Options{Engine: exec.Auto, Iters: 2})
	require.NoError(t, err)
	require.True(t, res.OK, res.Summary())
	_, err = exec.Run(ctx, plan, p, exec.Options{Engine: exec.Offload, Iters: 1})
	require.ErrorIs(t, err, nic.ErrProviderLimited)
	require.Contains(t, err.Error(), "FI_TRIGGER")
}

// TestFaultRemoteWrite: a write into a buffer without remote_write is reported with its op, rank,
// queue and file:line, within a bound, on both engines; the contexts close (flushing any
// triggered work still waiting) after.
func TestFaultRemoteWrite(t *testing.T) {
	p := socketsProvider(t)
	const f = "../../testdata/verbs/fault_perm.dag"
	src, err := os.ReadFile(f)
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), f, src, nil, planner.Options{})
	require.NoError(t, err)
	for i := range g.Ops {
		if g.Ops[i].Name == "w" {
			g.Buffers[g.Ops[i].Dst.Buf].Access &^= ir.RemoteWrite
		}
	}
	for _, c := range []struct {
		engine exec.Engine
		target string
	}{{exec.Offload, "triggered-sockets"}, {exec.Poll, "generic"}} {
		tg, err := ir.LookupTarget(c.target)
		require.NoError(t, err)
		plan, err := lower.Compile(t.Context(), g, tg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		_, err = exec.Run(ctx, plan, p, exec.Options{Engine: c.engine, Iters: 2, HangTimeout: 10 * time.Second})
		cancel()
		require.Error(t, err, c.target)
		require.Less(t, time.Since(start), 10*time.Second, c.target)
		require.Regexp(t, `fault_perm.dag:8:\d+: .*op w on rank 0, queue q: .*remote access error`, err.Error(), c.target)
	}
}

// TestFaultCancelsTriggers: after a triggered run fails (a write into a buffer without
// remote_write), the engine has cancelled the triggered work still waiting: no context holds any,
// before the session closes, where the provider can drop it (Context.DropsTriggers). sockets
// cannot: there the work stays armed, and the session still closes cleanly.
func TestFaultCancelsTriggers(t *testing.T) {
	p := socketsProvider(t)
	g, plan := compileFile(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 4}, "triggered-sockets")
	g.Buffers[0].Access = 0 // registered without remote write: the first write into it fails
	op := &nictest.Opened{Provider: p}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := exec.Prepare(ctx, plan, op, exec.Options{Engine: exec.Offload, HangTimeout: 10 * time.Second, Reference: exec.NewMemory(g)})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Run(ctx, 1)
	require.Error(t, err)
	require.Contains(t, err.Error(), "remote access error")
	c, err := p.OpenContext(0)
	require.NoError(t, err)
	drops := c.DropsTriggers()
	require.NoError(t, c.Close())
	if drops {
		require.Equal(t, map[int]int{0: 0, 1: 0, 2: 0, 3: 0}, op.PendingTriggers(), "triggered work left after the failure")
	}
	require.NoError(t, s.Close())
	require.Zero(t, ofi.OpenCQs(p), "the session closed every CQ, armed work or not")
}

// TestBarrierPanicOnProgressGoroutine: with manual progress the run's end barrier runs on a
// goroutine of its own while the caller's drives the devices; a panic there comes back as
// ErrPanic, where it used to end the process beyond any caller's recover.
func TestBarrierPanicOnProgressGoroutine(t *testing.T) {
	p := socketsProvider(t)
	_, plan := compileFile(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 2}, "generic")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := exec.Run(ctx, plan, p, exec.Options{Engine: exec.Poll, HangTimeout: 10 * time.Second,
		Barrier: func(context.Context) error { panic("the World's barrier failed") }})
	require.ErrorIs(t, err, exec.ErrPanic)
	require.Contains(t, err.Error(), "in Options.Barrier: the World's barrier failed")
	require.Zero(t, ofi.OpenCQs(p), "the session closed every CQ")
}

// TestSetupPanicClosesDevices: a panic while a start sets up (here in the caller's Exchange,
// after every rank's context, queues and memory were opened) leaves nothing open once the Op
// closes: neither CQs nor shm's files.
func TestSetupPanicClosesDevices(t *testing.T) {
	p := openNamed(t, "shm")
	_, plan := compileFile(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 2}, "generic")
	op, err := exec.NewOp(plan, p, exec.Options{Engine: exec.Poll, HangTimeout: 10 * time.Second,
		Exchange: func(context.Context, []exec.Endpoint) ([]exec.Endpoint, error) { panic("the World's allgather failed") }})
	require.NoError(t, err)
	data, _ := exec.BufferByName(plan.Graph, "data")
	mem := make([][]float32, 2)
	for r := range mem {
		mem[r] = make([]float32, plan.Graph.Buffers[data].Count)
		require.NoError(t, op.Bind(r, data, exec.Region{Addr: unsafe.Pointer(&mem[r][0]), Len: 4 * len(mem[r])}))
	}
	require.NoError(t, op.Start())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.ErrorIs(t, op.Wait(ctx), exec.ErrPanic)
	require.NoError(t, op.Close())
	require.Zero(t, ofi.OpenCQs(p), "CQs left open after the Op closed")
}

// TestAutoProgress: with Options.AutoProgress the provider keeps libfabric's progress thread, and
// plans still run on it (slowly: README.md).
func TestAutoProgress(t *testing.T) {
	opts := ofi.DefaultOptions()
	opts.Provider, opts.AutoProgress = "sockets", true
	p, err := ofi.NewProvider(opts)
	if err != nil {
		t.Skipf("no libfabric sockets provider: %v", err)
	}
	defer p.Close()
	require.False(t, p.ManualProgress())
	require.True(t, socketsProvider(t).ManualProgress(), "the default is manual progress")
	_, plan := compileFile(t, "../../plans/read_gather.dag", nil, "triggered-sockets")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := exec.Run(ctx, plan, p, exec.Options{Engine: exec.Offload, Iters: 2})
	require.NoError(t, err)
	require.True(t, res.OK, res.Summary())
}

// TestRunUnderGC runs the ring on sockets with the collector running all the time, so that
// stacks and work requests are scanned mid-post: what Go holds of the provider's (memory
// descriptors, TestDescriptorIsNotAPointer) must never look like a bad pointer to it. What counts
// is how many collections meet the posts, not how many iterations run, and under GC's constant
// stops an iteration's time varies tenfold with the machine's load: it runs 10 iterations at a
// time for about 15 s (at most 300) and checks that collections ran all along.
func TestRunUnderGC(t *testing.T) {
	p := socketsProvider(t)
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	_, plan := compileFile(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 4}, "generic")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var gcs atomic.Int64
	done := make(chan struct{})
	go func() { // collections back to back, so that stacks are scanned mid-post
		defer close(done)
		for ctx.Err() == nil {
			runtime.GC()
			gcs.Add(1)
		}
	}()
	defer func() { cancel(); <-done }()
	until := time.Now().Add(15 * time.Second)
	iters := 0
	for iters == 0 || iters < 300 && time.Now().Before(until) {
		before := gcs.Load()
		res, err := exec.Run(ctx, plan, p, exec.Options{Engine: exec.Poll, Iters: 10})
		require.NoError(t, err, "after %d iterations", iters)
		require.True(t, res.OK, res.Summary())
		require.Greater(t, gcs.Load(), before, "no collection ran during iterations %d to %d", iters, iters+10)
		iters += 10
	}
	t.Logf("%d iterations, %d collections", iters, gcs.Load())
}

// TestProviderGrants checks what coredag reads from each provider and relies on to run every
// plan: shm addresses by name (not 127.0.0.1) and progresses manually; tcp;ofi_rxm progresses
// manually and has atomics (bought by giving up send-after-write, which a write with immediate
// then does without); sockets has triggered operations. None of the first two has FI_TRIGGER.
func TestProviderGrants(t *testing.T) {
	for _, c := range []struct {
		name            string
		addr            string
		manual, trigger bool
	}{
		{"shm", "", true, false},
		{"tcp;ofi_rxm", "127.0.0.1", true, false},
		{"sockets", "127.0.0.1", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := openNamed(t, c.name)
			g := p.Grants()
			require.Equal(t, c.addr, p.Addr(), g)
			require.Equal(t, c.manual, p.ManualProgress(), g)
			require.Equal(t, c.trigger, p.Triggered(), g)
			require.True(t, p.Caps().Atomics, g)
			require.Contains(t, g, "FI_ORDER_SAS")
		})
	}
}
