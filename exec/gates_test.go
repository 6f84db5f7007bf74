package exec_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
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
			require.Contains(t, err.Error(), "wait got: 2 of the 3 writes it waits for have landed in all on queue host is stuck; expected from the writes or atomic adds that count for it")
			assert.NotContains(t, err.Error(), "CQ  reached", "a wait the CPU checks has no CQ to report")
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
	// A land counter counts landings (remote writes into its region), not completions.
	assert.Contains(t, err.Error(), "is stuck: counter data[0:2].land reached 1 of 2 landings (remote writes); expected from the writes that land in data[0:2]")
	assert.NotRegexp(t, `land reached \d+ of \d+ completions`, err.Error())
	// The host steps' counter counts host steps.
	assert.Contains(t, err.Error(), "is stuck: counter host.cnt reached 0 of 1 host steps done; expected from got[0] on rank 1")
}

// A NIC that counts remote writes per registration, as libfabric does, counts only whole
// registrations: each counted part of a buffer is registered on its own and the writers into it
// name its key. With the software NIC counting so, the plans that count parts of a buffer (the
// ring's slots, the chain's chunks) and the one that counts a whole buffer run on the polling
// engine and on triggered operations; a wait whose count is short (the parts' keys not used)
// would hang, and the memory would not match.
func TestWaitPerRegistration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file   string
		params map[string]int64
	}{
		{"../docs/examples/counted_ring.dag", map[string]int64{"s": 2, "m": 5, "n": 3}},
		{"../docs/examples/counted_allgather.dag", map[string]int64{"n": 3}},
		{"../testdata/onesided/counted_chain.dag", map[string]int64{"c": 3, "n": 2}},
	} {
		g, ok := loadPlan(t, tc.file, 3, tc.params)
		require.True(t, ok)
		for _, c := range []engineCase{engineCases[0], engineCases[5]} {
			t.Run(filepath.Base(tc.file)+"/"+c.name, func(t *testing.T) {
				plan, err := compileFor(g, c.target)
				require.NoError(t, err)
				n := softnic.New(softnic.Options{NoCrossChannel: true, CountPerRegistration: true})
				res, err := exec.Run(context.Background(), plan, n, exec.Options{Engine: c.engine, Iters: 3, HangTimeout: 5 * time.Second})
				require.NoError(t, err)
				require.True(t, res.OK, res.Summary())
			})
		}
	}
}

// Counting per registration, a write is counted in one region only: waits whose regions
// overlap are refused before the run, naming both.
func TestWaitPerRegistrationOverlap(t *testing.T) {
	t.Parallel()
	src := `plan overlap
param ranks = 2
buffer mine u64[4] init rank
buffer box  u64[4] remote_write
queue q to 1 - rank peer q
if rank == 0 {
  op put = write q mine[0:2] to box[0:2]
} else {
  op half = wait 1 writes to box[0:2]
  op all  = wait 1 writes to box
}
`
	g, err := planner.Load(t.Context(), "overlap.dag", []byte(src), nil, planner.Options{})
	require.NoError(t, err)
	plan, err := compileFor(g, "generic")
	require.NoError(t, err)
	_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{NoCrossChannel: true}), exec.Options{Engine: exec.Poll})
	require.NoError(t, err, "a NIC that counts any part of a region counts both")
	n := softnic.New(softnic.Options{NoCrossChannel: true, CountPerRegistration: true})
	_, err = exec.Run(context.Background(), plan, n, exec.Options{Engine: exec.Poll})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "overlap.dag:10:")
	assert.Contains(t, err.Error(), "wait all counts the writes that land in box, which overlaps box[0:2], the region of wait half")
}

// On the triggered target the NIC forwards the chain without the CPU: with rank 1's CPU held at
// its first wait for ever (the Graph's count raised after compiling, which only the CPU's check
// reads), rank 1's NIC still forwards chunk 0 on the chunk's remote-write counter, so rank 2's
// wait for it completes and only rank 1's host steps, and what waits for them, hang.
func TestWaitTriggeredNICForwards(t *testing.T) {
	t.Parallel()
	g, ok := loadPlan(t, "../testdata/onesided/counted_chain.dag", 3, map[string]int64{"c": 2, "n": 2})
	require.True(t, ok)
	plan, err := compileFor(g, "triggered")
	require.NoError(t, err)
	bad := g.Clone()
	for i := range bad.Ops {
		if op := &bad.Ops[i]; op.Kind == ir.OpWait && op.Rank == 1 && op.Name == "got[0]" {
			op.X.A++ // the CPU's check waits for a write more than lands
		}
	}
	plan.Graph = bad.Freeze()
	_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{NoCrossChannel: true}), exec.Options{Engine: exec.Offload, Iters: 1})
	var hang *exec.HangError
	require.ErrorAs(t, err, &hang)
	var stuck []string
	for _, s := range hang.Stuck {
		stuck = append(stuck, fmt.Sprintf("rank %d: %s", s.Rank, s.What))
	}
	assert.Contains(t, stuck, "rank 1: wait got[0]: 1 of the 2 writes it waits for have landed in data[0:2]")
	for _, s := range hang.Stuck {
		assert.NotEqual(t, 2, s.Rank, "rank 1's NIC forwarded both chunks, so rank 2 ran: %s", s.What)
	}
}
