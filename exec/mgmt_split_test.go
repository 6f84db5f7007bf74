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

// shallowConnectX is target (connectx or connectx-inline) whose work queues hold at most depth
// WQEs, so that a management chain longer than that is spread over several management queues,
// and on connectx-inline a send queue whose WAITs do not fit beside its WQEs is managed from
// management queues of its own.
func shallowConnectX(t testing.TB, target string, depth int) ir.Target {
	tg, err := ir.LookupTarget(target)
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

// TestOffloadSplitManagement runs the ring allreduce with queues of 16 WQEs on the software NIC
// with cross-channel, compiled for targets whose queues hold 16: on connectx the management
// chain (4 (ranks - 1) entries) is spread over two management queues; on connectx-inline
// right.sq (4 (ranks - 1) - 1 entries) is managed from two management queues. Run for several
// iterations and schedules, the memory must be the ring's sum on every rank, and in a traced run
// no op may start before what it depends on has completed.
func TestOffloadSplitManagement(t *testing.T) {
	src, err := os.ReadFile("../plans/ring_allreduce.dag")
	require.NoError(t, err)
	src = []byte(strings.ReplaceAll(string(src), "depth min(32768, max(128, 4 * ranks))", "depth 16"))
	for _, target := range []string{"connectx", "connectx-inline"} {
		tg := shallowConnectX(t, target, 16)
		for _, ranks := range []int{6, 8} {
			g, err := planner.Load(t.Context(), "ring_allreduce.dag", src, map[string]int64{"ranks": int64(ranks), "n": 3}, planner.Options{})
			require.NoError(t, err)
			plan, err := lower.Compile(t.Context(), g, tg)
			require.NoError(t, err)
			require.Equal(t, 2, mgmtQueues(plan), "%s ranks %d: the chain needs two queues of 16", target, ranks)
			for _, seed := range []uint64{0, 11, 12, 13} {
				where := fmt.Sprintf("%s ranks %d schedule seed %d", target, ranks, seed)
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
}

// TestOffloadSplitManagementRandom does the same for random plans with queues of 8 WQEs, whose
// management chains vary in shape (WAITs for host steps and for other queues, receive enables,
// fences): the final memory must be the reference's and the trace must honour every edge.
func TestOffloadSplitManagementRandom(t *testing.T) {
	const depth = 8
	for _, target := range []string{"connectx", "connectx-inline"} {
		tg := shallowConnectX(t, target, depth)
		ran := 0
		for seed := uint64(1); seed <= 150 && ran < 40; seed++ {
			g := randgraph.New(seed, randgraph.Config{MaxRanks: 4, MaxSteps: 40, Depth: depth})
			plan, err := lower.Compile(t.Context(), g, tg)
			least := 2 // connectx: a rank with more than one management queue
			if target == "connectx-inline" {
				least = 1 // a send queue managed from a management queue
			}
			if err != nil || mgmtQueues(plan) < least {
				continue // a data chain longer than its queue, or one that fits as it is
			}
			ran++
			ref, err := exec.Reference(g)
			require.NoError(t, err, "graph seed %d", seed)
			for _, sched := range []uint64{seed*7 + 1, seed*7 + 2} {
				where := fmt.Sprintf("%s graph seed %d, schedule seed %d", target, seed, sched)
				nic := softnic.New(softnic.Options{Seeded: true, Seed: sched, Trace: true})
				res, err := exec.Run(context.Background(), plan, nic, exec.Options{Engine: exec.Offload, Iters: 1, Seed: sched})
				require.NoError(t, err, where)
				require.Empty(t, res.Memory.Diff(ref), where)
				checkTrace(t, g, plan, nic.Trace(), func() string { return where })

				// Re-armed: later iterations wait on counts that grew by what one iteration adds.
				nic = softnic.New(softnic.Options{Seeded: true, Seed: sched})
				res, err = exec.Run(context.Background(), plan, nic, exec.Options{Engine: exec.Offload, Iters: 3, Seed: sched})
				require.NoError(t, err, where)
				require.True(t, res.OK, "%s: %s", where, res.Summary())
			}
		}
		require.GreaterOrEqual(t, ran, 20, "%s: too few random plans needed more than one management queue", target)
	}
}
