package exec_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/internal/randgraph"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

// shallowConnectX is connectx whose work queues hold at most depth WQEs, so that a management
// chain longer than that is spread over several management queues.
func shallowConnectX(t testing.TB, depth int) ir.Target {
	tg, err := ir.LookupTarget("connectx")
	require.NoError(t, err)
	tg.MaxWQDepth = depth
	return tg
}

// mgmtQueues counts the management queues of the plan's ranks, the most any rank has.
func mgmtQueues(p *ir.Plan) int {
	most := 0
	for r := range p.Ranks {
		n := 0
		for _, q := range p.Ranks[r].Queues {
			if q.Kind == ir.MgmtQueue {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// TestOffloadSplitManagement runs plans whose management chains are spread over several
// management queues (a target whose queues hold 16 WQEs; the ring's chain has 4 (ranks - 1)
// entries) on the software NIC with cross-channel, for several iterations and schedules: the
// memory must be the ring's sum on every rank, and in a traced run no op may start before what
// it depends on has completed.
func TestOffloadSplitManagement(t *testing.T) {
	src, err := os.ReadFile("../plans/ring_allreduce.dag")
	require.NoError(t, err)
	src = []byte(strings.ReplaceAll(string(src), "depth min(32768, max(128, 4 * ranks))", "depth 16"))
	tg := shallowConnectX(t, 16)
	for _, ranks := range []int{6, 8} {
		g, err := planner.Load("ring_allreduce.dag", src, map[string]int64{"ranks": int64(ranks), "n": 3}, planner.Options{})
		require.NoError(t, err)
		plan, err := lower.Compile(g, tg)
		require.NoError(t, err)
		require.Equal(t, 2, mgmtQueues(plan), "ranks %d: the chain of %d entries needs two queues of 16", ranks, 4*(ranks-1))
		for _, seed := range []uint64{0, 11, 12, 13} {
			where := fmt.Sprintf("ranks %d schedule seed %d", ranks, seed)
			nic := softnic.New(softnic.Options{Seeded: seed != 0, Seed: seed})
			res, err := exec.Run(context.Background(), plan, nic, exec.Options{Engine: exec.Offload, Iters: 5, Seed: seed})
			require.NoError(t, err, where)
			require.True(t, res.OK, "%s: %s", where, res.Summary())
			require.Equal(t, exec.Offload, res.Engine, where)
			expectations["ring_allreduce"](t, g, res.Memory)

			nic = softnic.New(softnic.Options{Seeded: seed != 0, Seed: seed, Trace: true})
			res, err = exec.Run(context.Background(), plan, nic, exec.Options{Engine: exec.Offload, Iters: 1, Seed: seed})
			require.NoError(t, err, where)
			require.True(t, res.OK, "%s: %s", where, res.Summary())
			checkTrace(t, g, plan, nic.Trace(), func() string { return where })
		}
	}
}

// TestOffloadSplitManagementRandom does the same for random plans with queues of 8 WQEs, whose
// management chains vary in shape (WAITs for host steps and for other queues, receive enables,
// fences): the final memory must be the reference's and the trace must honour every edge.
func TestOffloadSplitManagementRandom(t *testing.T) {
	const depth = 8
	tg := shallowConnectX(t, depth)
	ran := 0
	for seed := uint64(1); seed <= 120 && ran < 40; seed++ {
		g := randgraph.New(seed, randgraph.Config{MaxRanks: 4, MaxSteps: 40, Depth: depth})
		plan, err := lower.Compile(g, tg)
		if err != nil || mgmtQueues(plan) < 2 {
			continue // a data chain longer than its queue, or a chain that fits one queue
		}
		ran++
		ref, err := exec.Reference(g)
		require.NoError(t, err, "graph seed %d", seed)
		for _, sched := range []uint64{seed*7 + 1, seed*7 + 2} {
			where := fmt.Sprintf("graph seed %d, schedule seed %d", seed, sched)
			nic := softnic.New(softnic.Options{Seeded: true, Seed: sched, Trace: true})
			res, err := exec.Run(context.Background(), plan, nic, exec.Options{Engine: exec.Offload, Iters: 1, Seed: sched})
			require.NoError(t, err, where)
			require.Empty(t, res.Memory.Diff(ref), where)
			checkTrace(t, g, plan, nic.Trace(), func() string { return where })
		}
	}
	require.GreaterOrEqual(t, ran, 20, "too few random plans split their management chain")
}
