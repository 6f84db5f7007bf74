// Package randgraph builds seeded random Graphs that are valid and race-free, for property tests
// of the compiler, the replay checker and the engines.
//
// Construction. Ops are created one global step t at a time. A step creates either a message (a
// send or notify write on rank a's queue and the recv that consumes it on the peer's paired
// queue, both stamped t) or a single op on one rank (one-sided write, read, atomic, or a host
// reduce, copy or nop), stamped t. A rank declares its ops in creation order, so each queue side
// is FIFO in t, and the k-th sender on a queue meets the k-th recv on its peer. Dependency edges
// only go from an op of smaller t to one of larger t on the same rank. Ordering every event by
// (t, start before end) is then a topological order of the global happens-before graph (a
// message's two halves share t, which satisfies both of its matching edges), so the Graph has no
// cycle and no FIFO deadlock.
//
// Memory. There is one symmetric u64 buffer, "mem", with every remote access flag. Every region
// an op writes (on any rank) is fresh: allocated once, never written by another op. An op may
// read a region that one of its direct predecessors wrote (the predecessor's end happens before
// the reader's start); every other read is of a fresh region holding its init value. So no two
// accesses conflict unless ordered, there are no races, and every run has exactly one correct
// final memory, which still depends on dependencies being honoured.
package randgraph

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
)

// Config shapes the random Graphs. Zero fields take the defaults of DefaultConfig.
type Config struct {
	MinRanks, MaxRanks int // world size range
	MaxSteps           int // creation steps (messages count as one)
	MaxPreds           int // extra `after` predecessors per op
	MaxLen             int // elements per transfer
	Depth              int // queue depth
}

// DefaultConfig is a small, varied configuration.
var DefaultConfig = Config{MinRanks: 2, MaxRanks: 4, MaxSteps: 24, MaxPreds: 3, MaxLen: 8, Depth: 128}

func (c Config) withDefaults() Config {
	d := DefaultConfig
	if c.MinRanks > 0 {
		d.MinRanks = c.MinRanks
	}
	if c.MaxRanks > 0 {
		d.MaxRanks = c.MaxRanks
	}
	if d.MaxRanks < d.MinRanks {
		d.MaxRanks = d.MinRanks
	}
	if c.MaxSteps > 0 {
		d.MaxSteps = c.MaxSteps
	}
	if c.MaxPreds > 0 {
		d.MaxPreds = c.MaxPreds
	}
	if c.MaxLen > 0 {
		d.MaxLen = c.MaxLen
	}
	if c.Depth > 0 {
		d.Depth = c.Depth
	}
	return d
}

// proto is an op under construction.
type proto struct {
	op    ir.Op
	t     int
	preds []int // indices into the rank's protos
	out   ir.Slice
}

type builder struct {
	rng    *rand.Rand
	cfg    Config
	ranks  int
	next   int64 // bump allocator over mem, in elements
	protos [][]*proto
	queues [][]ir.Queue // per rank
}

// New returns a random valid, race-free Graph for seed. The same seed and config give the same
// Graph. The Graph is indexed and has everything elaboration sets (Match, Index, SendOps,
// RecvOps, Peer, Rank spans).
func New(seed uint64, cfg Config) *ir.Graph {
	cfg = cfg.withDefaults()
	b := &builder{rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), cfg: cfg}
	b.ranks = cfg.MinRanks + b.rng.IntN(cfg.MaxRanks-cfg.MinRanks+1)
	b.protos = make([][]*proto, b.ranks)
	b.queues = make([][]ir.Queue, b.ranks)
	b.connect()
	steps := 1 + b.rng.IntN(cfg.MaxSteps)
	for t := 0; t < steps; t++ {
		b.step(t)
	}
	return b.graph(fmt.Sprintf("rand_%d", seed))
}

// connect creates RC connections: a ring (so every rank has a peer) plus random chords, and
// sometimes a second connection between the same pair.
func (b *builder) connect() {
	if b.ranks == 1 {
		return
	}
	pair := func(x, y int) {
		n := len(b.queues[x])
		name := fmt.Sprintf("c%d_%d_%d", min(x, y), max(x, y), n)
		b.queues[x] = append(b.queues[x], ir.Queue{Name: name, Rank: x, PeerRank: y, Depth: b.cfg.Depth})
		b.queues[y] = append(b.queues[y], ir.Queue{Name: name + "p", Rank: y, PeerRank: x, Depth: b.cfg.Depth})
	}
	for r := 0; r < b.ranks; r++ {
		if b.ranks == 2 && r == 1 {
			break
		}
		pair(r, (r+1)%b.ranks)
	}
	for x := 0; x < b.ranks; x++ {
		for y := x + 1; y < b.ranks; y++ {
			if b.rng.IntN(3) == 0 {
				pair(x, y)
			}
		}
	}
}

func (b *builder) alloc(n int64) ir.Slice {
	s := ir.Slice{Buf: 0, Off: b.next, Len: n}
	b.next += n
	return s
}

func (b *builder) length() int64 { return 1 + int64(b.rng.IntN(b.cfg.MaxLen)) }

// add appends an op to rank r at step t with random predecessors among earlier ops of r.
func (b *builder) add(r, t int, op ir.Op) *proto {
	p := &proto{op: op, t: t, out: ir.NoSlice}
	p.op.Rank = int32(r)
	list := b.protos[r]
	if n := len(list); n > 0 {
		k := b.rng.IntN(b.cfg.MaxPreds + 1)
		seen := map[int]bool{}
		for i := 0; i < k; i++ {
			// prefer recent ops: more interesting chains
			j := n - 1 - b.rng.IntN(min(n, 6))
			if b.rng.IntN(4) == 0 {
				j = b.rng.IntN(n)
			}
			if list[j].t < t && !seen[j] {
				seen[j] = true
				p.preds = append(p.preds, j)
			}
		}
	}
	b.protos[r] = append(list, p)
	return p
}

// source returns a slice of n elements for p to read locally: a prefix of what a direct
// predecessor wrote when one is long enough (a real data dependency), else a fresh region.
func (b *builder) source(r int, p *proto, n int64) ir.Slice {
	if b.rng.IntN(3) != 0 {
		for _, j := range p.preds {
			o := b.protos[r][j].out
			if o.Valid() && o.Len >= n {
				return ir.Slice{Buf: 0, Off: o.Off, Len: n}
			}
		}
	}
	return b.alloc(n)
}

func (b *builder) step(t int) {
	r := b.rng.IntN(b.ranks)
	roll := b.rng.IntN(10)
	if len(b.queues[r]) == 0 {
		roll = 9 // host op
	}
	switch {
	case roll < 4: // message: send or notify write, and its recv
		qi := b.rng.IntN(len(b.queues[r]))
		q := &b.queues[r][qi]
		peer := q.PeerRank
		pqi := b.peerQueue(r, qi)
		n := b.length()
		if roll == 3 { // notify write
			s := b.add(r, t, ir.Op{Kind: ir.OpWrite, Notify: true, Queue: ir.QueueID(qi)})
			s.op.Src = b.source(r, s, n)
			s.op.Dst = b.alloc(n)
			rv := b.add(peer, t, ir.Op{Kind: ir.OpRecv, Queue: ir.QueueID(pqi), Src: ir.NoSlice, Dst: ir.NoSlice})
			_ = rv
			return
		}
		s := b.add(r, t, ir.Op{Kind: ir.OpSend, Queue: ir.QueueID(qi), Dst: ir.NoSlice})
		rv := b.add(peer, t, ir.Op{Kind: ir.OpRecv, Queue: ir.QueueID(pqi), Src: ir.NoSlice})
		if b.rng.IntN(8) == 0 { // zero-length message
			s.op.Src, rv.op.Dst = ir.NoSlice, ir.NoSlice
			return
		}
		s.op.Src = b.source(r, s, n)
		s.op.Inline = n <= 8 && b.rng.IntN(3) == 0
		rv.op.Dst = b.alloc(n)
		rv.out = rv.op.Dst
	case roll < 7: // one-sided
		qi := b.rng.IntN(len(b.queues[r]))
		switch b.rng.IntN(4) {
		case 0, 1:
			n := b.length()
			p := b.add(r, t, ir.Op{Kind: ir.OpWrite, Queue: ir.QueueID(qi)})
			p.op.Src = b.source(r, p, n)
			p.op.Dst = b.alloc(n)
		case 2:
			n := b.length()
			p := b.add(r, t, ir.Op{Kind: ir.OpRead, Queue: ir.QueueID(qi)})
			p.op.Src = b.alloc(n)
			p.op.Dst = b.alloc(n)
			p.out = p.op.Dst
		default:
			p := b.add(r, t, ir.Op{Kind: ir.OpAtomicAdd, Queue: ir.QueueID(qi), Src: ir.NoSlice})
			p.op.Dst = b.alloc(1)
			x := p.op.Extra()
			x.A = int64(1 + b.rng.IntN(100))
			if b.rng.IntN(2) == 0 {
				p.op.Kind = ir.OpAtomicCAS
				x.A = int64(initValue(b.queues[r][qi].PeerRank, p.op.Dst.Off)) // succeeds
				if b.rng.IntN(3) == 0 {
					x.A++ // fails
				}
				x.B = int64(b.rng.IntN(1000))
			}
			if b.rng.IntN(2) == 0 {
				x.Fetch = b.alloc(1)
				p.out = x.Fetch
			}
		}
	default: // host
		switch b.rng.IntN(3) {
		case 0:
			n := b.length()
			p := b.add(r, t, ir.Op{Kind: ir.OpReduce, Queue: ir.None})
			p.op.Red = ir.ReduceOp(b.rng.IntN(7))
			p.op.Src = b.source(r, p, n)
			p.op.Dst = b.alloc(n)
			p.out = p.op.Dst
		case 1:
			n := b.length()
			p := b.add(r, t, ir.Op{Kind: ir.OpCopy, Queue: ir.None})
			p.op.Src = b.source(r, p, n)
			p.op.Dst = b.alloc(n)
			p.out = p.op.Dst
		default:
			b.add(r, t, ir.Op{Kind: ir.OpNop, Queue: ir.None, Src: ir.NoSlice, Dst: ir.NoSlice})
		}
	}
}

// peerQueue finds the rank-local index of the queue paired with rank r's queue qi.
func (b *builder) peerQueue(r, qi int) int {
	q := b.queues[r][qi]
	want := q.Name + "p"
	if len(q.Name) > 0 && q.Name[len(q.Name)-1] == 'p' {
		want = q.Name[:len(q.Name)-1]
	}
	for i, pq := range b.queues[q.PeerRank] {
		if pq.Name == want {
			return i
		}
	}
	panic("randgraph: unpaired queue " + q.Name) // construction invariant, not input-dependent
}

// initValue is the init contents of element i of mem on rank r.
func initValue(r int, i int64) uint64 { return uint64(r)*1_000_003 + uint64(i)*7 + 1 }

func (b *builder) graph(name string) *ir.Graph {
	const file = "rand.dag"
	count := max(b.next, 1)
	g := &ir.Graph{
		Name:   name,
		File:   file,
		Ranks:  b.ranks,
		Params: []ir.Param{{Name: "ranks", Value: int64(b.ranks)}},
		Buffers: []ir.Buffer{{
			Name: "mem", Type: ir.U64, Count: count,
			Access: ir.RemoteRead | ir.RemoteWrite | ir.RemoteAtomic,
			Init: func(rank int, dst []byte) error {
				for i := 0; i+8 <= len(dst); i += 8 {
					binary.LittleEndian.PutUint64(dst[i:], initValue(rank, int64(i/8)))
				}
				return nil
			},
			Pos: diag.At(file, 1, 1),
		}},
	}
	line := 2
	for r := 0; r < b.ranks; r++ {
		span := ir.RankSpan{FirstOp: ir.OpID(len(g.Ops)), FirstQueue: ir.QueueID(len(g.Queues))}
		for _, q := range b.queues[r] {
			q.Pos = diag.At(file, line, 1)
			line++
			g.Queues = append(g.Queues, q)
		}
		span.EndQueue = ir.QueueID(len(g.Queues))
		g.Rank = append(g.Rank, span)
	}
	for r := 0; r < b.ranks; r++ {
		span := &g.Rank[r]
		span.FirstOp = ir.OpID(len(g.Ops))
		counts := map[string]int{}
		for _, p := range b.protos[r] {
			op := p.op
			base := op.Kind.String()
			if base == "atomic add" || base == "atomic cas" {
				base = "atomic"
			}
			op.Site = &ir.Site{Name: fmt.Sprintf("%s%d", base[:2], counts[base]), Pos: diag.At(file, line, 1)}
			counts[base]++
			line++
			op.Match = ir.None
			op.Index = -1
			if op.Kind.OnQueue() {
				op.Queue += span.FirstQueue
			} else {
				op.Queue = ir.None
			}
			id := ir.OpID(len(g.Ops))
			g.Ops = append(g.Ops, op)
			for _, j := range p.preds {
				g.Edges = append(g.Edges, ir.Edge{From: span.FirstOp + ir.OpID(j), To: id, Pos: op.Pos})
			}
		}
		span.EndOp = ir.OpID(len(g.Ops))
	}
	// Queue sides, indices, peers and matching.
	for i := range g.Ops {
		op := &g.Ops[i]
		if op.Queue == ir.None {
			continue
		}
		q := &g.Queues[op.Queue]
		if op.Kind.IsRecvSide() {
			op.Index = int32(len(q.RecvOps))
			q.RecvOps = append(q.RecvOps, ir.OpID(i))
		} else {
			op.Index = int32(len(q.SendOps))
			q.SendOps = append(q.SendOps, ir.OpID(i))
		}
	}
	for r := 0; r < b.ranks; r++ {
		for qi := range b.queues[r] {
			id := g.Rank[r].FirstQueue + ir.QueueID(qi)
			pr := g.Queues[id].PeerRank
			g.Queues[id].Peer = g.Rank[pr].FirstQueue + ir.QueueID(b.peerQueue(r, qi))
		}
	}
	for qi := range g.Queues {
		q := &g.Queues[qi]
		k := 0
		peer := &g.Queues[q.Peer]
		for _, s := range q.SendOps {
			op := &g.Ops[s]
			if !op.SendsMessage() {
				continue
			}
			rv := peer.RecvOps[k] // construction pairs them one to one
			op.Match, g.Ops[rv].Match = rv, s
			k++
		}
	}
	return g.Freeze()
}
