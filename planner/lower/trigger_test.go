package lower_test

import (
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
func TestTriggeredRingAllreduce(t *testing.T) {
	g := load(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 4})
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
	g := load(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 4})
	tg, err := ir.LookupTarget("triggered-cxi")
	require.NoError(t, err)
	_, err = lower.Compile(g, tg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ring_allreduce.dag:29:")
	assert.Contains(t, err.Error(), "only at threshold 0")
}

// A budget of outstanding triggered work is a profile figure; exceeding it names the entry.
func TestTriggeredBudget(t *testing.T) {
	g := load(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 4})
	tg, err := ir.LookupTarget("triggered")
	require.NoError(t, err)
	prof := *tg.Trigger
	prof.MaxOutstanding, prof.CounterWorkCost = 10, 2
	tg.Trigger = &prof
	_, err = lower.Compile(g, tg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "above the 10 outstanding triggered operations")
	assert.True(t, strings.Contains(err.Error(), "ring_allreduce.dag:"), err.Error())
}
