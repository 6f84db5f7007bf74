package viz

import (
	"fmt"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
)

// ringGraph builds, by hand, the Graph that the ring allreduce example of docs/language.md §9
// elaborates to, so the views can be tested without the front end.
func ringGraph(ranks int, n int64) *ir.Graph {
	const file = "plans/ring_allreduce.dag"
	pos := func(line int) diag.Pos { return diag.At(file, line, 3) }
	g := &ir.Graph{
		Name:  "ring_allreduce",
		File:  file,
		Ranks: ranks,
		Params: []ir.Param{
			{Name: "ranks", Value: int64(ranks), Pos: pos(2)},
			{Name: "n", Value: n, Pos: pos(3)},
		},
		Buffers: []ir.Buffer{
			{Name: "data", Type: ir.F32, Count: int64(ranks) * n, Access: ir.RemoteWrite, Pos: pos(5)},
			{Name: "tmp", Type: ir.F32, Count: n, Pos: pos(6)},
		},
	}
	const data, tmp = ir.BufID(0), ir.BufID(1)
	chunk := func(c int) ir.Slice { return ir.Slice{Buf: data, Off: int64(c) * n, Len: n} }
	mod := func(a int) int { return ((a % ranks) + ranks) % ranks }
	steps := ranks - 1
	perRank := 5 * steps
	for r := 0; r < ranks; r++ {
		right := ir.QueueID(2 * r)
		left := right + 1
		first := ir.OpID(len(g.Ops))
		g.Queues = append(g.Queues,
			ir.Queue{Name: "right", Rank: r, PeerRank: mod(r + 1), Peer: ir.QueueID(2*mod(r+1) + 1), Depth: 128, Pos: pos(7)},
			ir.Queue{Name: "left", Rank: r, PeerRank: mod(r - 1), Peer: ir.QueueID(2 * mod(r-1)), Depth: 128, Pos: pos(8)})
		add := func(op ir.Op) ir.OpID {
			id := ir.OpID(len(g.Ops))
			op.Rank = int32(r)
			op.Match = ir.None
			op.Index = -1
			if op.Kind.OnQueue() {
				q := &g.Queues[op.Queue]
				if op.Kind.IsRecvSide() {
					op.Index = int32(len(q.RecvOps))
					q.RecvOps = append(q.RecvOps, id)
				} else {
					op.Index = int32(len(q.SendOps))
					q.SendOps = append(q.SendOps, id)
				}
			}
			g.Ops = append(g.Ops, op)
			return id
		}
		edge := func(from, to ir.OpID, line int) {
			g.Edges = append(g.Edges, ir.Edge{From: from, To: to, Pos: pos(line)})
		}
		var tx, rx, red, ag, got []ir.OpID
		for s := 0; s < steps; s++ {
			sc, rc := mod(r-s), mod(r-s-1)
			tx = append(tx, add(ir.Op{Site: &ir.Site{Name: fmt.Sprintf("tx[%d]", s), Pos: pos(15)}, Kind: ir.OpSend, Queue: right, Src: chunk(sc), Dst: ir.NoSlice}))
			rx = append(rx, add(ir.Op{Site: &ir.Site{Name: fmt.Sprintf("rx[%d]", s), Pos: pos(16)}, Kind: ir.OpRecv, Queue: left, Src: ir.NoSlice, Dst: ir.Slice{Buf: tmp, Len: n}}))
			red = append(red, add(ir.Op{Site: &ir.Site{Name: fmt.Sprintf("red[%d]", s), Pos: pos(17)}, Kind: ir.OpReduce, Queue: ir.None, Red: ir.RedSum, Dst: chunk(rc), Src: ir.Slice{Buf: tmp, Len: n}}))
			edge(rx[s], red[s], 17)
			if s > 0 {
				edge(red[s-1], tx[s], 18)
				edge(red[s-1], rx[s], 18)
			}
		}
		for s := 0; s < steps; s++ {
			c := mod(r - s + 1)
			ag = append(ag, add(ir.Op{Site: &ir.Site{Name: fmt.Sprintf("ag[%d]", s), Pos: pos(22)}, Kind: ir.OpWrite, Queue: right, Src: chunk(c), Dst: chunk(c), Notify: true}))
			got = append(got, add(ir.Op{Site: &ir.Site{Name: fmt.Sprintf("got[%d]", s), Pos: pos(23)}, Kind: ir.OpRecv, Queue: left, Src: ir.NoSlice, Dst: ir.NoSlice}))
			if s == 0 {
				edge(red[steps-1], ag[s], 24)
			} else {
				edge(got[s-1], ag[s], 24)
			}
		}
		g.Rank = append(g.Rank, ir.RankSpan{FirstOp: first, EndOp: first + ir.OpID(perRank), FirstQueue: right, EndQueue: left + 1})
	}
	// Match the k-th send-side transfer on rank r's "right" with the k-th recv on the next rank's "left".
	for r := 0; r < ranks; r++ {
		right := &g.Queues[2*r]
		left := &g.Queues[2*mod(r+1)+1]
		for k, s := range right.SendOps {
			if k < len(left.RecvOps) {
				g.Ops[s].Match = left.RecvOps[k]
				g.Ops[left.RecvOps[k]].Match = s
			}
		}
	}
	return g.Freeze()
}
