package exec

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
)

// gbuild builds a ir.Graph by hand, the way Elaborate would, so the reference and the
// engines can be tested on exact shapes (and on shapes the checker would reject).
type gbuild struct {
	g     *ir.Graph
	line  int
	names map[string]ir.OpID // "rank/name" -> op
	qname map[string]ir.QueueID
	peerQ map[ir.QueueID]string // peer queue name
	after []pendingEdge
}

type pendingEdge struct {
	rank     int
	from, to string
}

func newBuild(name string, ranks int) *gbuild {
	return &gbuild{
		g:     &ir.Graph{Name: name, File: name + ".dag", Ranks: ranks, Rank: make([]ir.RankSpan, ranks)},
		names: map[string]ir.OpID{},
		qname: map[string]ir.QueueID{},
		peerQ: map[ir.QueueID]string{},
	}
}

func (b *gbuild) pos() diag.Pos {
	b.line++
	return diag.At(b.g.File, b.line, 1)
}

// buffer declares a symmetric buffer; init gives element i on rank (nil: zeroed).
func (b *gbuild) buffer(name string, t ir.ElemType, count int64, acc ir.Access, init func(rank int, i int64) float64) ir.BufID {
	buf := ir.Buffer{Name: name, Type: t, Count: count, Access: acc, Pos: b.pos()}
	if init != nil {
		buf.Init = func(rank int, dst []byte) error {
			for i := int64(0); i < count; i++ {
				putElem(t, dst, i, init(rank, i))
			}
			return nil
		}
	}
	b.g.Buffers = append(b.g.Buffers, buf)
	return ir.BufID(len(b.g.Buffers) - 1)
}

func putElem(t ir.ElemType, dst []byte, i int64, v float64) {
	off := i * t.Size()
	le := binary.LittleEndian
	switch t {
	case ir.U8:
		dst[off] = uint8(int64(v))
	case ir.I32, ir.U32:
		le.PutUint32(dst[off:], uint32(int64(v)))
	case ir.I64, ir.U64:
		le.PutUint64(dst[off:], uint64(int64(v)))
	case ir.F32:
		le.PutUint32(dst[off:], math.Float32bits(float32(v)))
	case ir.F64:
		le.PutUint64(dst[off:], math.Float64bits(v))
	}
}

// rankB declares one rank's queues and ops. Ranks must be built in order 0, 1, ...
type rankB struct {
	b *gbuild
	r int
}

func (b *gbuild) rank(r int, fn func(rb *rankB)) {
	b.g.Rank[r].FirstOp = ir.OpID(len(b.g.Ops))
	b.g.Rank[r].FirstQueue = ir.QueueID(len(b.g.Queues))
	fn(&rankB{b: b, r: r})
	b.g.Rank[r].EndOp = ir.OpID(len(b.g.Ops))
	b.g.Rank[r].EndQueue = ir.QueueID(len(b.g.Queues))
}

// forEach builds every rank with the same SPMD body.
func (b *gbuild) forEach(fn func(rb *rankB)) *gbuild {
	for r := 0; r < b.g.Ranks; r++ {
		b.rank(r, fn)
	}
	return b
}

func (rb *rankB) queue(name string, peer int, peerName string) {
	g := rb.b.g
	if peerName == "" {
		peerName = name
	}
	g.Queues = append(g.Queues, ir.Queue{Name: name, Rank: rb.r, PeerRank: peer, Peer: ir.None, Depth: 128, Pos: rb.b.pos()})
	id := ir.QueueID(len(g.Queues) - 1)
	rb.b.qname[fmt.Sprintf("%d/%s", rb.r, name)] = id
	rb.b.peerQ[id] = peerName
}

// sl makes a slice of buffer buf [lo, hi).
func sl(buf ir.BufID, lo, hi int64) ir.Slice {
	return ir.Slice{Buf: buf, Off: lo, Len: hi - lo}
}

// opSpec is an op to add; Queue is given by name.
type opSpec struct {
	Kind              ir.OpKind
	Q                 string
	Src, Dst, Fetch   ir.Slice
	Red               ir.ReduceOp
	A, B              int64
	Notify, Inline    bool
	After             []string
	srcSet, dstSet, f bool
}

func (rb *rankB) op(name string, s opSpec) {
	g := rb.b.g
	op := ir.Op{Site: &ir.Site{Name: name, Pos: rb.b.pos()}, Rank: int32(rb.r), Kind: s.Kind, Queue: ir.None, Src: ir.NoSlice, Dst: ir.NoSlice,
		Red: s.Red, Notify: s.Notify, Inline: s.Inline, Match: ir.None, Index: -1}
	if s.Kind.IsAtomic() {
		op.X = &ir.OpExtra{Fetch: ir.NoSlice, A: s.A, B: s.B}
	}
	if s.Src.Len > 0 {
		op.Src = s.Src
	}
	if s.Dst.Len > 0 {
		op.Dst = s.Dst
	}
	if s.Fetch.Len > 0 {
		op.Extra().Fetch = s.Fetch
	}
	id := ir.OpID(len(g.Ops))
	if s.Kind.OnQueue() {
		qid, ok := rb.b.qname[fmt.Sprintf("%d/%s", rb.r, s.Q)]
		if !ok {
			panic("test build: unknown queue " + s.Q)
		}
		op.Queue = qid
		q := &g.Queues[qid]
		if s.Kind.IsRecvSide() {
			op.Index = int32(len(q.RecvOps))
			q.RecvOps = append(q.RecvOps, id)
		} else {
			op.Index = int32(len(q.SendOps))
			q.SendOps = append(q.SendOps, id)
		}
	}
	g.Ops = append(g.Ops, op)
	rb.b.names[fmt.Sprintf("%d/%s", rb.r, name)] = id
	for _, a := range s.After {
		rb.b.after = append(rb.b.after, pendingEdge{rank: rb.r, from: a, to: name})
	}
}

// dep adds `to after from` on this rank (forward references allowed).
func (rb *rankB) dep(to string, from ...string) {
	for _, f := range from {
		rb.b.after = append(rb.b.after, pendingEdge{rank: rb.r, from: f, to: to})
	}
}

// done pairs queues, matches sends with recvs, resolves edges and indexes the graph.
func (b *gbuild) done() *ir.Graph {
	g := b.g
	for qi := range g.Queues {
		q := &g.Queues[qi]
		if p, ok := b.qname[fmt.Sprintf("%d/%s", q.PeerRank, b.peerQ[ir.QueueID(qi)])]; ok {
			q.Peer = p
		}
	}
	for qi := range g.Queues {
		q := &g.Queues[qi]
		if q.Peer == ir.None {
			continue
		}
		k := 0
		peer := &g.Queues[q.Peer]
		for _, id := range q.SendOps {
			op := &g.Ops[id]
			if op.Kind == ir.OpSend || (op.Kind == ir.OpWrite && op.Notify) {
				if k < len(peer.RecvOps) {
					op.Match = peer.RecvOps[k]
					g.Ops[peer.RecvOps[k]].Match = id
				}
				k++
			}
		}
	}
	for _, e := range b.after {
		from, ok1 := b.names[fmt.Sprintf("%d/%s", e.rank, e.from)]
		to, ok2 := b.names[fmt.Sprintf("%d/%s", e.rank, e.to)]
		if !ok1 || !ok2 {
			panic(fmt.Sprintf("test build: unknown op in %s after %s on rank %d", e.to, e.from, e.rank))
		}
		g.Edges = append(g.Edges, ir.Edge{From: from, To: to, Pos: g.Ops[to].Pos})
	}
	return g.Freeze()
}

// opID finds op name on rank.
func (b *gbuild) opID(rank int, name string) ir.OpID {
	return b.names[fmt.Sprintf("%d/%s", rank, name)]
}

// ringAllreduce builds the ring allreduce of docs/language.md §9 (data f32[ranks*n] init rank+1).
func ringAllreduce(ranks int, n int64) *ir.Graph {
	b := newBuild("ring_allreduce", ranks)
	data := b.buffer("data", ir.F32, int64(ranks)*n, ir.RemoteWrite, func(r int, _ int64) float64 { return float64(r + 1) })
	tmp := b.buffer("tmp", ir.F32, n, 0, nil)
	mod := func(a int) int64 { return int64(((a % ranks) + ranks) % ranks) }
	b.forEach(func(rb *rankB) {
		r := rb.r
		rb.queue("right", (r+1)%ranks, "left")
		rb.queue("left", (r-1+ranks)%ranks, "right")
		for s := 0; s < ranks-1; s++ {
			sc, rc := mod(r-s), mod(r-s-1)
			rb.op(fmt.Sprintf("tx[%d]", s), opSpec{Kind: ir.OpSend, Q: "right", Src: sl(data, sc*n, (sc+1)*n)})
			rb.op(fmt.Sprintf("rx[%d]", s), opSpec{Kind: ir.OpRecv, Q: "left", Dst: sl(tmp, 0, n)})
			rb.op(fmt.Sprintf("red[%d]", s), opSpec{Kind: ir.OpReduce, Red: ir.RedSum, Dst: sl(data, rc*n, (rc+1)*n), Src: sl(tmp, 0, n),
				After: []string{fmt.Sprintf("rx[%d]", s)}})
			if s > 0 {
				rb.dep(fmt.Sprintf("tx[%d]", s), fmt.Sprintf("red[%d]", s-1))
				rb.dep(fmt.Sprintf("rx[%d]", s), fmt.Sprintf("red[%d]", s-1))
			}
		}
		for s := 0; s < ranks-1; s++ {
			c := mod(r - s + 1)
			after := fmt.Sprintf("got[%d]", s-1)
			if s == 0 {
				after = fmt.Sprintf("red[%d]", ranks-2)
			}
			rb.op(fmt.Sprintf("ag[%d]", s), opSpec{Kind: ir.OpWrite, Q: "right", Src: sl(data, c*n, (c+1)*n), Dst: sl(data, c*n, (c+1)*n), Notify: true, After: []string{after}})
			rb.op(fmt.Sprintf("got[%d]", s), opSpec{Kind: ir.OpRecv, Q: "left"})
		}
	})
	return b.done()
}
