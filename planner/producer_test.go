package planner_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/planner"
)

// producerPlan is a one-rank plan built by hand: a send queue whose chain mixes signalled and
// unsignalled sends with a HOST entry (never posted), and a receive queue whose RECVs carry no
// Signalled flag (a receive completes regardless).
func producerPlan() *planner.Plan {
	sig := planner.Signalled
	return &planner.Plan{
		Graph: &planner.Graph{Ops: []planner.Op{{Rank: 0}, {Rank: 0}, {Rank: 0}}},
		Ranks: []planner.RankPlan{{
			Queues: []planner.WorkQueue{
				{Name: "q.sq", Kind: planner.SendQueue, CQ: 1, Chain: []planner.WQE{
					{Opcode: planner.OpcSend},              // 0: no completion
					{Opcode: planner.OpcSend, Flags: sig},  // 1: completion 1
					{Opcode: planner.OpcHost, Flags: sig},  // 2: not posted, no completion
					{Opcode: planner.OpcWrite},             // 3: no completion
					{Opcode: planner.OpcWrite, Flags: sig}, // 4: completion 2
				}},
				{Name: "q.rq", Kind: planner.RecvQueue, CQ: 0, Chain: []planner.WQE{
					{Opcode: planner.OpcRecv}, // 0: completion 1
					{Opcode: planner.OpcRecv}, // 1: completion 2
				}},
			},
			// The CQs are listed in the opposite order of their queues: Producer follows CQ.Queue.
			CQs: []planner.CQ{{Name: "q.rcq", Queue: 1}, {Name: "q.scq", Queue: 0}},
		}},
		Loc: []planner.Loc{{Queue: 0, Index: 1}, {Queue: 1, Index: 1}, {Queue: 1, Index: 7}},
	}
}

func TestProducer(t *testing.T) {
	p := producerPlan()
	const scq, rcq = 1, 0
	for _, tc := range []struct {
		rank, cq     int
		count        uint32
		queue, index int
		ok           bool
	}{
		{0, scq, 1, 0, 1, true},
		{0, scq, 2, 0, 4, true},
		{0, scq, 3, 0, 0, false}, // the chain produces two completions
		{0, scq, 0, 0, 0, false}, // counts are 1-based
		{0, rcq, 1, 1, 0, true},  // RECVs complete without the Signalled flag
		{0, rcq, 2, 1, 1, true},
		{0, 2, 1, 0, 0, false},   // no such CQ
		{0, -1, 1, 0, 0, false},  // the host queue on generic has no CQ
		{1, scq, 1, 0, 0, false}, // no such rank
	} {
		q, i, ok := p.Producer(tc.rank, tc.cq, tc.count)
		assert.Equal(t, []any{tc.queue, tc.index, tc.ok}, []any{q, i, ok}, "Producer(%d, %d, %d)", tc.rank, tc.cq, tc.count)
	}
	p.Ranks[0].CQs[rcq].Queue = 5
	_, _, ok := p.Producer(0, rcq, 1)
	assert.False(t, ok, "a CQ serving a work queue that does not exist")
}

func TestPlace(t *testing.T) {
	p := producerPlan()
	r, l, ok := p.Place(1)
	assert.True(t, ok)
	assert.Equal(t, 0, r)
	assert.Equal(t, planner.Loc{Queue: 1, Index: 1}, l)
	for _, id := range []planner.OpID{-1, 2, 3} { // 2 lies past its chain, 3 is no op
		_, _, ok := p.Place(id)
		assert.False(t, ok, "op %d", id)
	}
}

// TestProducerOfCompiledWaits checks Producer against the counts the compiler gave WAITs and
// HOST steps: every condition's producer is a WQE of the op it stands for (the NOP after the
// HOST entry for a host op).
func TestProducerOfCompiledWaits(t *testing.T) {
	files, err := filepath.Glob("../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		g := load(t, f, nil)
		for _, tg := range planner.Targets() {
			p, err := planner.Compile(g, tg)
			require.NoError(t, err, "%s %s", f, tg.Name)
			conds := 0
			for r := range p.Ranks {
				rp := &p.Ranks[r]
				for wi := range rp.Queues {
					for k := range rp.Queues[wi].Chain {
						e := &rp.Queues[wi].Chain[k]
						var cs []planner.Cond
						switch e.Opcode {
						case planner.OpcWait:
							cs = []planner.Cond{e.Wait}
						case planner.OpcHost:
							cs = e.Waits
						}
						for _, c := range cs {
							conds++
							at := fmt.Sprintf("%s %s rank %d %s[%d]", f, tg.Name, r, rp.Queues[wi].Name, k)
							q, i, ok := p.Producer(r, c.CQ, c.Count)
							require.True(t, ok, at)
							w := &rp.Queues[q].Chain[i]
							assert.True(t, w.Completes(), at)
							assert.Equal(t, c.Op, w.Op, at)
							assert.Equal(t, q, rp.CQs[c.CQ].Queue, at)
						}
					}
				}
			}
			if tg.Name != "generic" {
				assert.NotZero(t, conds, "%s %s: no condition checked", f, tg.Name)
			}
		}
	}
}
