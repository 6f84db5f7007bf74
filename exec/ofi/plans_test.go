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
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
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
	g, err := planner.Load(f, src, params)
	require.NoError(t, err, "%s %v", f, params)
	tg, err := ir.LookupTarget(target)
	require.NoError(t, err)
	plan, err := lower.Compile(g, tg)
	require.NoError(t, err, "%s %v for %s", f, params, target)
	return g, plan
}

// TestPlansTriggered runs every plan of plans/ on the sockets provider over loopback, every rank
// in this process with its own domain and endpoints: the offload engine with the plan compiled
// for triggered-sockets (libfabric counters and triggered operations), and the poll engine with
// target generic beside it. Both must match the reference.
func TestPlansTriggered(t *testing.T) {
	p := socketsProvider(t)
	files, err := filepath.Glob("../../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	cases := []struct {
		engine exec.Engine
		target string
	}{{exec.Offload, "triggered-sockets"}, {exec.Poll, "generic"}}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".dag")
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, ranks := range []int{2, 4} {
			g, err := planner.Load(f, src, map[string]int64{"ranks": int64(ranks)})
			require.NoError(t, err, "%s ranks=%d", name, ranks)
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/ranks=%d/%s-%s", name, ranks, c.engine, c.target), func(t *testing.T) {
					tg, err := ir.LookupTarget(c.target)
					require.NoError(t, err)
					plan, err := lower.Compile(g, tg)
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
}

// TestFaultRemoteWrite: a write into a buffer without remote_write is reported with its op, rank,
// queue and file:line, within a bound, on both engines; the contexts close (flushing any
// triggered work still waiting) after.
func TestFaultRemoteWrite(t *testing.T) {
	p := socketsProvider(t)
	const f = "../../testdata/verbs/fault_perm.dag"
	src, err := os.ReadFile(f)
	require.NoError(t, err)
	g, err := planner.Load(f, src, nil)
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
		plan, err := lower.Compile(g, tg)
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
// before the session closes.
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
	require.Equal(t, map[int]int{0: 0, 1: 0, 2: 0, 3: 0}, op.PendingTriggers(), "triggered work left after the failure")
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
// descriptors, TestDescriptorIsNotAPointer) must never look like a bad pointer to it.
func TestRunUnderGC(t *testing.T) {
	p := socketsProvider(t)
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	_, plan := compileFile(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 4}, "generic")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	gcs := make(chan struct{})
	go func() { // collections back to back, so that stacks are scanned mid-post
		defer close(gcs)
		for ctx.Err() == nil {
			runtime.GC()
		}
	}()
	res, err := exec.Run(ctx, plan, p, exec.Options{Engine: exec.Poll, Iters: 300})
	cancel()
	<-gcs
	require.NoError(t, err)
	require.True(t, res.OK, res.Summary())
}
