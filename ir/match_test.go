package ir_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coredag/coredag/ir"
)

// twoQueues is a graph of two ranks joined by queue 0 (rank 0) and queue 1 (rank 1), with the
// given ops; ops with a queue are listed on its send or receive side in order.
func twoQueues(ops ...ir.Op) *ir.Graph {
	g := &ir.Graph{
		Ranks:   2,
		Buffers: []ir.Buffer{{Name: "b", Type: ir.U64, Count: 16}, {Name: "w", Type: ir.U64, Count: 1}},
		Queues: []ir.Queue{
			{Name: "q", Rank: 0, PeerRank: 1, Peer: 1},
			{Name: "q", Rank: 1, PeerRank: 0, Peer: 0},
		},
	}
	for i, op := range ops {
		if op.Site == nil {
			op.Site = &ir.Site{Name: string(rune('a' + i))}
		}
		op.Match = ir.None
		if op.Kind.OnQueue() {
			q := &g.Queues[op.Queue]
			if op.Kind.IsRecvSide() {
				q.RecvOps = append(q.RecvOps, ir.OpID(i))
			} else {
				q.SendOps = append(q.SendOps, ir.OpID(i))
			}
		} else {
			op.Queue = ir.None
		}
		g.Ops = append(g.Ops, op)
	}
	return g
}

func sl(off, n int64) ir.Slice { return ir.Slice{Buf: 0, Off: off, Len: n} }

// MatchQueue pairs the k-th message (send or notify write; a plain write is none) with the k-th
// recv of the peer, and reports each break of the rule in order.
func TestMatchQueue(t *testing.T) {
	t.Parallel()
	g := twoQueues(
		ir.Op{Kind: ir.OpSend, Queue: 0, Src: sl(0, 2)},                               // 0: meets 4
		ir.Op{Kind: ir.OpWrite, Queue: 0, Src: sl(0, 1), Dst: sl(8, 1)},               // 1: no message
		ir.Op{Kind: ir.OpWrite, Queue: 0, Src: sl(0, 1), Dst: sl(9, 1), Notify: true}, // 2: meets 5
		ir.Op{Kind: ir.OpSend, Queue: 0, Src: sl(0, 3)},                               // 3: meets 6, 3 elements against 2
		ir.Op{Kind: ir.OpRecv, Queue: 1, Dst: sl(2, 2)},
		ir.Op{Kind: ir.OpRecv, Queue: 1, Dst: ir.NoSlice},
		ir.Op{Kind: ir.OpRecv, Queue: 1, Dst: sl(4, 2)},
		ir.Op{Kind: ir.OpRecv, Queue: 1, Dst: sl(6, 1)}, // 7: never matched
	)
	var faults []ir.MatchFault
	ok := g.MatchQueue(0, func(f ir.MatchFault) bool { faults = append(faults, f); return true })
	assert.False(t, ok)
	assert.Equal(t, []ir.MatchFault{
		{Kind: ir.LengthMismatch, Send: 3, Recv: 6, Sent: 2},
		{Kind: ir.UnmatchedRecv, Send: ir.None, Recv: 7, Sent: 3},
	}, faults)
	for s, r := range map[ir.OpID]ir.OpID{0: 4, 2: 5, 3: 6} {
		assert.Equal(t, r, g.Ops[s].Match)
		assert.Equal(t, s, g.Ops[r].Match)
	}
	assert.Equal(t, ir.OpID(ir.None), g.Ops[1].Match)
	assert.Equal(t, ir.OpID(ir.None), g.Ops[7].Match)

	// The other way: no messages on rank 1's queue, no recvs on rank 0's.
	assert.True(t, g.MatchQueue(1, func(ir.MatchFault) bool { t.Fatal("no fault"); return false }))

	// A notify write whose recv takes a slice; a message past the last recv. Stopping at the
	// first fault stops the matching.
	g = twoQueues(
		ir.Op{Kind: ir.OpWrite, Queue: 0, Src: sl(0, 1), Dst: sl(9, 1), Notify: true},
		ir.Op{Kind: ir.OpSend, Queue: 0, Src: sl(0, 1)},
		ir.Op{Kind: ir.OpRecv, Queue: 1, Dst: sl(2, 1)},
	)
	faults = nil
	assert.False(t, g.MatchQueue(0, func(f ir.MatchFault) bool { faults = append(faults, f); return true }))
	assert.Equal(t, []ir.MatchFault{
		{Kind: ir.NotifySlice, Send: 0, Recv: 2, Sent: 0},
		{Kind: ir.UnmatchedSend, Send: 1, Recv: ir.None, Sent: 1},
	}, faults)
	faults = nil
	assert.False(t, g.MatchQueue(0, func(f ir.MatchFault) bool { faults = append(faults, f); return false }))
	assert.Len(t, faults, 1)

	// A queue not paired has nothing to match.
	g.Queues[0].Peer = ir.None
	assert.True(t, g.MatchQueue(0, func(ir.MatchFault) bool { t.Fatal("no fault"); return false }))
}
