package lower_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/lower"
)

// The ring allreduce on the triggered target: every op but the first of each side waits on a
// counter; red[1] joins its receive and the previous HOST step through a join counter raised by
// two counter-adds; rx[1] (held back by red[0]) is followed by an add to the post counter that
// gates the receives behind it.
// The triggered tests below read the one-slot ring of the scale figures, whose receives wait for
// the reduce that frees tmp: held receives, counters and thresholds on every side.
func TestTriggeredRingAllreduce(t *testing.T) {
	t.Parallel()
	g := load(t, "../../testdata/scale/ring_allreduce.dag", map[string]int64{"ranks": 4})
	p := compileFor(t, g, "triggered")
	tr := p.Ranks[1].Trig
	require.NotNil(t, tr)
	byName := map[string]int{}
	for i, c := range tr.Counters {
		byName[c.Name] = i
	}
	find := func(name string, kind ir.TrigKind) []ir.TriggeredOp {
		var out []ir.TriggeredOp
		for _, w := range tr.Work {
			if w.Name == name && w.Kind == kind {
				out = append(out, w)
			}
		}
		return out
	}
	tx0 := find("tx[0]", ir.TrigOp)
	require.Len(t, tx0, 1)
	assert.Equal(t, ir.Untriggered, tx0[0].Counter)
	red1 := find("red[1]", ir.TrigOp)
	require.Len(t, red1, 1)
	assert.Equal(t, byName["join.red[1]"], red1[0].Counter)
	assert.Equal(t, uint64(2), red1[0].Threshold)
	adds := find("red[1]", ir.TrigAdd)
	require.Len(t, adds, 2)
	assert.Equal(t, byName["left.rq.rcnt"], adds[0].Counter)
	assert.Equal(t, uint64(2), adds[0].Threshold) // rx[1] is the second receive
	assert.Equal(t, byName["host.cnt"], adds[1].Counter)
	assert.Equal(t, uint64(1), adds[1].Threshold) // red[0] is the first HOST step
	// Counters grow by their per-iteration amount: the send side completes 6 per iteration.
	assert.Equal(t, uint64(6), tr.Counters[byName["right.sq.scnt"]].PerIteration)
	assert.Equal(t, uint64(2), tr.Counters[byName["join.red[1]"]].PerIteration)
	// Every receive behind a triggered one waits for its posting.
	got0 := find("got[0]", ir.TrigOp)
	require.Len(t, got0, 1)
	assert.Equal(t, byName["left.rq.post"], got0[0].Counter)
}

// cxi posts receives only at threshold 0: a receive held back by `after` is refused at its line.
func TestTriggeredCXIRefusesHeldRecv(t *testing.T) {
	t.Parallel()
	g := load(t, "../../testdata/scale/ring_allreduce.dag", map[string]int64{"ranks": 4})
	tg, err := ir.LookupTarget("triggered-cxi")
	require.NoError(t, err)
	_, err = lower.Compile(t.Context(), g, tg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ring_allreduce.dag:19:")
	assert.Contains(t, err.Error(), "only at threshold 0")
}

// A budget of outstanding triggered work is a profile figure; exceeding it names the entry.
func TestTriggeredBudget(t *testing.T) {
	t.Parallel()
	g := load(t, "../../testdata/scale/ring_allreduce.dag", map[string]int64{"ranks": 4})
	tg, err := ir.LookupTarget("triggered")
	require.NoError(t, err)
	prof := *tg.Trigger
	prof.MaxOutstanding, prof.CounterWorkCost = 10, 2
	tg.Trigger = &prof
	_, err = lower.Compile(t.Context(), g, tg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "above the 10 outstanding triggered operations")
	assert.True(t, strings.Contains(err.Error(), "ring_allreduce.dag:"), err.Error())
}

// Counters are never reset, so a triggered plan runs a bounded number of iterations: with a
// profile whose counters stop at 60, the send counter of the ring (+6 per iteration) runs out
// after 10, and the refusal names the counter, its amount, the limit and what fits.
func TestTriggeredCounterLimit(t *testing.T) {
	t.Parallel()
	g := load(t, "../../testdata/scale/ring_allreduce.dag", map[string]int64{"ranks": 4})
	tg, err := ir.LookupTarget("triggered")
	require.NoError(t, err)
	prof := *tg.Trigger
	prof.MaxCounter = 60
	tg.Trigger = &prof
	p, err := lower.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	lim, ok := p.CounterLimit()
	require.True(t, ok)
	assert.Equal(t, ir.CounterLimit{Rank: 0, Counter: lim.Counter, Name: "right.sq.scnt", PerIteration: 6, Max: 60, Iterations: 10}, lim)
	require.NoError(t, p.CheckIterations(10))
	err = p.CheckIterations(11)
	require.ErrorIs(t, err, ir.ErrIterationLimit)
	assert.Equal(t, "11 iterations would overflow counter right.sq.scnt on rank 0: it grows by 6 per iteration and never resets, and target triggered's counters stop at 60 (profile figure MaxCounter): at most 10 iterations fit", err.Error())

	// Plans of other targets have no counters to overflow.
	q := compileFor(t, g, "generic")
	_, ok = q.CounterLimit()
	assert.False(t, ok)
	assert.NoError(t, q.CheckIterations(math.MaxUint64))

	// A counter that passes the limit within the first iteration is a compile error at the
	// queue it counts, once for all ranks.
	prof.MaxCounter = 5
	_, err = lower.Compile(t.Context(), g, tg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ring_allreduce.dag:12:7: counter right.sq.scnt passes 5 in the first iteration, the largest value target triggered's counters hold (profile figure MaxCounter)")
	assert.NotContains(t, err.Error(), "on rank")
}

// A wait for the writes that land in a region becomes a remote-write counter bound to the
// region; a NIC op after the wait is triggered at the wait's count on that counter (plus the
// wait's own predecessors, through a join), not at the wait's HOST step; a HOST step after it
// still follows the host counter, the CPU reading the region's counter.
func TestTriggeredLandCounter(t *testing.T) {
	t.Parallel()
	g := load(t, "../../testdata/onesided/counted_chain.dag", map[string]int64{"ranks": 3, "c": 2, "n": 4})
	p := compileFor(t, g, "triggered")
	tr := p.Ranks[1].Trig
	byName := map[string]int{}
	for i, c := range tr.Counters {
		byName[c.Name] = i
	}
	work := func(name string, kind ir.TrigKind) []ir.TriggeredOp {
		var out []ir.TriggeredOp
		for _, w := range tr.Work {
			if w.Name == name && w.Kind == kind {
				out = append(out, w)
			}
		}
		return out
	}
	for k, name := range []string{"data[0:4].land", "data[4:8].land"} {
		i, ok := byName[name]
		require.True(t, ok, "rank 1 has a counter %s", name)
		c := tr.Counters[i]
		assert.Equal(t, ir.CntLand, c.Kind)
		assert.Equal(t, uint64(1), c.PerIteration, "one write lands in a chunk per iteration")
		assert.Equal(t, "data", g.Buffers[c.Region.Buf].Name)
		assert.Equal(t, int64(4*k), c.Region.Off)
		assert.Equal(t, int64(4), c.Region.Len)
	}
	fwd0 := work("fwd[0]", ir.TrigOp)
	require.Len(t, fwd0, 1)
	assert.Equal(t, byName["data[0:4].land"], fwd0[0].Counter, "fwd[0] fires on the chunk's remote-write counter")
	assert.Equal(t, uint64(1), fwd0[0].Threshold)
	// fwd[1] waits for its chunk's count and for fwd[0] (queue order): a join.
	adds := work("fwd[1]", ir.TrigAdd)
	require.Len(t, adds, 2)
	assert.Equal(t, byName["data[4:8].land"], adds[0].Counter)
	assert.Equal(t, uint64(1), adds[0].Threshold)
	assert.Equal(t, byName["down.sq.scnt"], adds[1].Counter)
	// The copy after the waits is a HOST step after got[1]'s HOST step.
	cp := work("cp", ir.TrigOp)
	require.Len(t, cp, 1)
	assert.Equal(t, tr.HostCnt, cp[0].Counter)
	k, n, ok := tr.HostWait(g, work("got[1]", ir.TrigOp)[0].Op)
	require.True(t, ok)
	assert.Equal(t, byName["data[4:8].land"], k)
	assert.Equal(t, uint64(1), n)
	// Rank 0 waits for nothing: no remote-write counter.
	for _, c := range p.Ranks[0].Trig.Counters {
		assert.NotEqual(t, ir.CntLand, c.Kind, c.Name)
	}
}

// The remote-write counters count against the profile's budget and its counter range: past
// MaxCounters the one too many may be one of them, named at its wait; and in the one-sided
// allgather at 8 ranks the counter of `all`, raised by 7 writes per iteration, is the one that
// runs out first.
func TestTriggeredLandCounterBudget(t *testing.T) {
	t.Parallel()
	g := load(t, "../../docs/examples/counted_ring.dag", map[string]int64{"ranks": 2, "m": 3})
	tg, err := ir.LookupTarget("triggered")
	require.NoError(t, err)
	prof := *tg.Trigger
	prof.MaxCounters = 5 // the queues' four and the host counter
	tg.Trigger = &prof
	_, err = lower.Compile(t.Context(), g, tg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "counted_ring.dag:40:6: counter ring[0:4].land is one too many: the rank needs 10 counters")

	g = load(t, "../../docs/examples/counted_allgather.dag", map[string]int64{"ranks": 8})
	p := compileFor(t, g, "triggered")
	lim, ok := p.CounterLimit()
	require.True(t, ok)
	assert.Equal(t, "all.land", lim.Name)
	assert.Equal(t, uint64(7), lim.PerIteration)
	assert.Equal(t, (lim.Max-7)/7+1, lim.Iterations)
}
