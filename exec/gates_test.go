package exec_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/ir"
)

// TestWaitPlans runs the plans of docs/examples that complete one-sidedly (wait for landings,
// wait for a word) on every engine that runs host steps, under several schedules of the software
// NIC, and checks the math: each rank ends with what its writers sent, which only holds when
// every wait held its successors until the writes it needs had landed.
func TestWaitPlans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file   string
		params map[string]int64
		check  expectation
	}{
		{"onesided_allgather", map[string]int64{"n": 4}, func(t *testing.T, g *ir.Graph, m *exec.Memory) {
			n := param(t, g, "n")
			each(t, g, m, "out", func(_ int, i int64) float64 { return float64((i/n)*1000 + i%n) })
		}},
		{"credit_ring", map[string]int64{"s": 2, "m": 7, "n": 3}, func(t *testing.T, g *ir.Graph, m *exec.Memory) {
			p := int64(g.Ranks)
			each(t, g, m, "out", func(r int, i int64) float64 { return float64(((int64(r)+p-1)%p)*1000 + i) })
			each(t, g, m, "credit", func(int, int64) float64 { return float64(param(t, g, "m")) })
		}},
	} {
		for _, ranks := range []int{2, 3, 5} {
			g, ok := loadPlan(t, "../docs/examples/"+tc.file+".dag", ranks, tc.params)
			require.True(t, ok)
			require.NotEmpty(t, g.Lands, "the checks found no order that the waits make")
			for _, c := range engineCases {
				if c.name == "offload-triggered" {
					continue // triggered targets refuse waits (TestWaitsRefused)
				}
				for _, seed := range []uint64{0, 7, 99} {
					t.Run(fmt.Sprintf("%s/ranks=%d/%s/seed=%d", tc.file, ranks, c.name, seed), func(t *testing.T) {
						res, _, _, err := runCase(t, g, c, seed, 3, false)
						require.NoError(t, err)
						require.True(t, res.OK, res.Summary())
						tc.check(t, g, res.Memory)
					})
				}
			}
		}
	}
}

// TestWaitHangs checks that a wait holds: a plan whose wait can never be satisfied at run time
// (its count is above what lands, which the checks would refuse, so the Graph is changed after
// them) stops with a hang report that names the wait, instead of running on.
func TestWaitHangs(t *testing.T) {
	t.Parallel()
	g, ok := loadPlan(t, "../docs/examples/onesided_allgather.dag", 3, map[string]int64{"n": 2})
	require.True(t, ok)
	bad := g.Clone()
	for i := range bad.Ops {
		if bad.Ops[i].Kind == ir.OpWait {
			bad.Ops[i].X.A++ // one write more than land
		}
	}
	bad.Freeze()
	for _, c := range engineCases[:3] {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := runCase(t, bad, c, 0, 1, false)
			require.Error(t, err)
			require.Contains(t, err.Error(), "wait got: 2 of the 3 writes it waits for have landed in all")
		})
	}
}

// TestWaitsRefused checks that the triggered targets, which have no CPU step to hold a wait,
// refuse a plan with waits, naming the wait and the targets that take it.
func TestWaitsRefused(t *testing.T) {
	t.Parallel()
	g, ok := loadPlan(t, "../docs/examples/onesided_allgather.dag", 2)
	require.True(t, ok)
	for _, target := range []string{"triggered", "triggered-sockets", "triggered-cxi"} {
		_, err := compileFor(g, target)
		require.Error(t, err, target)
		require.Contains(t, err.Error(), "wait got: target "+target+" cannot wait for landings or memory words")
	}
}
