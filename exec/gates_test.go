package exec_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/ir"
)

// TestWaitPlans runs the plans of docs/examples that complete one-sidedly (wait for landings,
// wait for a word), and testdata's chain whose forwarding writes follow waits for landings (on
// the triggered target, thresholds on remote-write counters), on every engine that runs host steps, under several schedules of the software
// NIC, and checks the math: each rank ends with what its writers sent, which only holds when
// every wait held its successors until the writes it needs had landed.
func TestWaitPlans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file   string
		params map[string]int64
		check  expectation
	}{
		{"../testdata/onesided/counted_chain", map[string]int64{"c": 3, "n": 2}, func(t *testing.T, g *ir.Graph, m *exec.Memory) {
			each(t, g, m, "out", func(_ int, i int64) float64 { return float64(7*i + 1) })
		}},
		{"counted_allgather", map[string]int64{"n": 4}, func(t *testing.T, g *ir.Graph, m *exec.Memory) {
			n := param(t, g, "n")
			each(t, g, m, "out", func(_ int, i int64) float64 { return float64((i/n)*1000 + i%n) })
		}},
		{"counted_ring", map[string]int64{"s": 2, "m": 7, "n": 3}, func(t *testing.T, g *ir.Graph, m *exec.Memory) {
			p := int64(g.Ranks)
			each(t, g, m, "out", func(r int, i int64) float64 { return float64(((int64(r)+p-1)%p)*1000 + i) })
			each(t, g, m, "credit", func(int, int64) float64 { return float64(param(t, g, "m")) })
		}},
	} {
		for _, ranks := range []int{2, 3, 5} {
			file := tc.file
			if !strings.Contains(file, "/") {
				file = "../docs/examples/" + file
			}
			g, ok := loadPlan(t, file+".dag", ranks, tc.params)
			require.True(t, ok)
			require.NotEmpty(t, g.Lands, "the checks found no order that the waits make")
			for _, c := range engineCases {
				for _, seed := range []uint64{0, 7, 99} {
					t.Run(fmt.Sprintf("%s/ranks=%d/%s/seed=%d", filepath.Base(tc.file), ranks, c.name, seed), func(t *testing.T) {
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
	g, ok := loadPlan(t, "../docs/examples/counted_allgather.dag", 3, map[string]int64{"n": 2})
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

// On the triggered target a write after a wait for landed writes waits on the region's
// remote-write counter: when the count never comes (the Graph changed after the checks, as in
// TestWaitHangs) the hang report names the counter, the count and the writes that raise it.
func TestWaitHangsTriggered(t *testing.T) {
	t.Parallel()
	g, ok := loadPlan(t, "../testdata/onesided/counted_chain.dag", 3, map[string]int64{"c": 2, "n": 2})
	require.True(t, ok)
	bad := g.Clone()
	for i := range bad.Ops {
		if bad.Ops[i].Kind == ir.OpWait && bad.Ops[i].Rank == 1 {
			bad.Ops[i].X.A++ // one write more than lands
		}
	}
	bad.Freeze()
	_, _, _, err := runCase(t, bad, engineCase{"offload-triggered", exec.Offload, "triggered", false, false}, 0, 1, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "counter data[0:2].land")
	assert.Contains(t, err.Error(), "the writes that land in data[0:2]")
}
