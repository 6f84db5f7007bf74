package ir_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coredag/coredag/ir"
)

// producerPlan is a one-rank plan built by hand: a send queue whose chain mixes signalled and
// unsignalled sends with a HOST entry (never posted), and a receive queue whose RECVs carry no
// Signalled flag (a receive completes regardless).
func producerPlan() *ir.Plan {
	sig := ir.Signalled
	return &ir.Plan{
		Graph: &ir.Graph{Ops: []ir.Op{{Rank: 0}, {Rank: 0}, {Rank: 0}}},
		Ranks: []ir.RankPlan{{
			Queues: []ir.WorkQueue{
				{Name: "q.sq", Kind: ir.SendQueue, CQ: 1, Chain: []ir.WQE{
					{Opcode: ir.OpcSend},              // 0: no completion
					{Opcode: ir.OpcSend, Flags: sig},  // 1: completion 1
					{Opcode: ir.OpcHost, Flags: sig},  // 2: not posted, no completion
					{Opcode: ir.OpcWrite},             // 3: no completion
					{Opcode: ir.OpcWrite, Flags: sig}, // 4: completion 2
				}},
				{Name: "q.rq", Kind: ir.RecvQueue, CQ: 0, Chain: []ir.WQE{
					{Opcode: ir.OpcRecv}, // 0: completion 1
					{Opcode: ir.OpcRecv}, // 1: completion 2
				}},
			},
			// The CQs are listed in the opposite order of their queues: Producer follows CQ.Queue.
			CQs: []ir.CQ{{Name: "q.rcq", Queue: 1}, {Name: "q.scq", Queue: 0}},
		}},
		Loc: []ir.Loc{{Queue: 0, Index: 1}, {Queue: 1, Index: 1}, {Queue: 1, Index: 7}},
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
	assert.Equal(t, ir.Loc{Queue: 1, Index: 1}, l)
	for _, id := range []ir.OpID{-1, 2, 3} { // 2 lies past its chain, 3 is no op
		_, _, ok := p.Place(id)
		assert.False(t, ok, "op %d", id)
	}
}
