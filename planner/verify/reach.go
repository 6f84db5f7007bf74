package verify

import (
	"context"
	"math"
	"slices"
	"sync"

	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/internal/view"
	"github.com/coredag/coredag/ir"
)

// Exact answers to the happens-before questions a bounded search gave up on: "does event x
// happen before event y?" when the only paths are long, like the ring allreduce's chunk reduced
// early on rank r and the allgather write into it from rank r-1, ordered only through every
// other rank. Searching or propagating bitsets over the graph for each of those costs the size of
// the graph per question; this answers them all in a few linear sweeps for plans whose ranks
// talk along a ring, a chain or a tree.
//
// Chains. The starts of one queue side are totally ordered, and so are its ends (FIFO). Given a
// chain c_0 < c_1 < ..., one backward sweep gives every event the first c_i it reaches, out(e),
// and one forward sweep the last c_i that reaches it, in(e); then x happens before y through the
// chain exactly when out(x) <= in(y).
//
// Separators. The only edges between ranks are a send's (or notify write's) matching edges:
// start(recv) -> land(send) -> end(recv). So a path that touches a rank passes one of its chains:
// it enters at a recv's end, or at a landing that goes on to its send's end; it leaves at a recv's
// start, or at a landing that comes from its send's start. The one exception is a path through a
// landing alone, start(recv) -> land(send) -> end(recv), and it can go through the recv's own
// landing instead, on the recv's rank. (Questions whose own ends are such landings are split
// first into questions about their neighbours.) Hence for a set S of ranks that separates the
// graph of ranks (joined when they match a send and a recv): a question between events off S is
// answered yes by S's chains, or its paths avoid S and lie in one component of the rest, where
// the same step repeats with that component's own separator. A question with an end on S is
// answered by S's chains alone, except between two events of one rank of S, whose path may stay
// in the rank: those, and the questions of components without a small separator, go to
// resolveBatch.

// minSplitPart is the fewest queries worth a goroutine of resolve's split.
const minSplitPart = 1 << 14

// maxSepRanks bounds the separator of a component; a component without a separator this small
// (ranks that all talk to each other) has its questions answered by resolveBatch.
const maxSepRanks = 8

// subQuery is one of the questions a query is split into: the query is yes if any is.
type subQuery struct {
	x, y event
	q    int32
}

// sepReach holds the scratch state of resolve.
type sepReach struct {
	h *hbGraph
	g *ir.Graph

	ranks rankIndex

	// The graph of ranks, as CSR adjacency.
	adjStart, adj []int32

	// Per rank: a stamp saying which set of ranks it is in at the moment (see fresh), and the
	// number of its component when components are being found.
	mark  []int32
	stamp int32
	comp  []int32
	dist  []int32
	queue []int32

	// The chain labels, in 16 bits when every chain is that short or else 32.
	lab16 *labels[int16]
	lab32 *labels[int32]
	free  []int32 // the array the labels are in, if it was free (takeEvents)

	// Per topological position, a bit: whether the event belongs to the component being solved;
	// whether it belongs to a rank of the separator (sepPositions).
	member, sepMember []uint64

	// The scratch of certify: per queue, the chains of the separator ranks' sides (chainKey;
	// -1 for none); per rank, its place in the separator (-1: none); the open questions; those
	// carried to the next block.
	chainAt []int32
	sepAt   []int32
	open    []int32
	carry   []int32

	// The scratch of children, and of certify between them: per question, its component (its
	// first block); the questions, when they go to several components.
	dst   []int32
	spare []subQuery

	// The scratch of answerBlock: whether each question asked was answered yes.
	hit []bool

	ans     []bool
	residue []hbQuery
	resOf   []int32

	swept [2]int // how many positions the sweeps of the in labels and of the out labels visited

	runs *orderRuns // when the graph has the edges of an ordering
}

// orderRuns describes the paths an ordering's edges make through landings alone (hb.go):
// land(p) -> land(n) for consecutive ops of one send side that the ordering orders. A run is a
// maximal sequence of such ops, each ordered after the one before it. A path from the landing
// of op x leaves the landings of its run through end(y) or, for a matched y, the end of y's
// recv, for some y at or after x in the run: which end(x) reaches along the send side's ends,
// or the end of the recv of the first matched op at or after x along the recv side's (its recvs
// are in the same order). Likewise backwards with starts.
type orderRuns struct {
	run []int32 // per op: the op that begins its run (None off send sides)
	// fwd: the first op at or after x in its run that is matched with a recv; bwd: the last at
	// or before x. None when there is none.
	fwd, bwd []ir.OpID
}

func newOrderRuns(g *ir.Graph, ord ir.Order) *orderRuns {
	n := len(g.Ops)
	o := &orderRuns{run: make([]int32, n), fwd: make([]ir.OpID, n), bwd: make([]ir.OpID, n)}
	for i := range n {
		o.run[i], o.fwd[i], o.bwd[i] = int32(ir.None), ir.None, ir.None
	}
	for qi := range g.Queues {
		side := g.Queues[qi].SendOps
		for k, x := range side {
			first, last := x, ir.OpID(ir.None)
			if k > 0 && ord.Orders(g.Ops[side[k-1]].Kind, g.Ops[x].Kind) {
				first, last = ir.OpID(o.run[side[k-1]]), o.bwd[side[k-1]]
			}
			if matchedSender(g, x) != ir.None {
				last = x
			}
			o.run[x], o.bwd[x] = int32(first), last
		}
		next := ir.OpID(ir.None)
		for k := len(side) - 1; k >= 0; k-- {
			x := side[k]
			if k+1 >= len(side) || o.run[side[k+1]] != o.run[x] {
				next = ir.None
			}
			if matchedSender(g, x) != ir.None {
				next = x
			}
			o.fwd[x] = next
		}
	}
	return o
}

// onSendSide reports whether op x is on a send side.
func (o *orderRuns) onSendSide(x ir.OpID) bool { return o.run[x] != int32(ir.None) }

// component is a set of ranks with the questions still open in it.
type component struct {
	ranks []int32
	subs  []subQuery
}

// resolve answers the n queries at(0), ..., at(n-1) exactly: ans[i] reports whether at(i)'s x
// happens before or at its y. It renumbers h by topological position. at may be called from
// several goroutines at once. Unless nil, serial is called when resolve comes to its steps that
// run on one goroutine; at is not called after. Stopped (ctx), it returns early: the answers it
// has not reached are false.
func (h *hbGraph) resolve(ctx context.Context, n int, at func(i int) hbQuery, serial func()) (ans []bool) {
	if n == 0 {
		return nil
	}
	h.renumber()
	r := newSepReach(h, n)
	// The questions the queries split into, counted first: they are placed in one exactly sized
	// array rather than grown by appending, which would leave several times their size behind.
	// Both passes run on all CPUs, part i's questions placed after those of the parts before.
	parts := h.opt.workerCount(n, minSplitPart)
	base := make([]int, parts+1)
	forParts(parts, n, func(p, lo, hi int) {
		var buf [4]subQuery
		for i := lo; i < hi; i++ {
			base[p+1] += r.split(at(i), int32(i), &buf)
		}
	})
	for p := range parts {
		base[p+1] += base[p]
	}
	subs := make([]subQuery, base[parts])
	forParts(parts, n, func(p, lo, hi int) {
		var buf [4]subQuery
		k := base[p]
		for i := lo; i < hi; i++ {
			k += copy(subs[k:], buf[:r.split(at(i), int32(i), &buf)])
		}
	})
	if serial != nil {
		serial()
	}
	all := make([]int32, h.g.Ranks)
	for i := range all {
		all[i] = int32(i)
	}
	cur := r.fresh()
	for _, k := range all {
		r.mark[k] = cur
	}
	stack := r.children(all, cur, subs, 0)
	subs = nil
	for len(stack) > 0 {
		if stop.Cause(ctx) != nil {
			return r.ans
		}
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		stack = append(stack, r.solve(ctx, c)...)
	}
	h.resolveBatch(ctx, r.residue, r.free) // the labels are done with
	for i, q := range r.residue {
		if q.ans {
			r.ans[r.resOf[i]] = true
		}
	}
	if h.opt.resolved != nil {
		h.opt.resolved(r)
	}
	return r.ans
}

func newSepReach(h *hbGraph, nq int) *sepReach {
	g := h.g
	r := &sepReach{h: h, g: g, ans: make([]bool, nq)}
	// Ranks are joined by matched pairs; both directions, duplicates removed per rank.
	var pairs [][2]int32
	for i := range g.Ops {
		if m := matchedSender(g, ir.OpID(i)); m != ir.None {
			a, b := int32(g.Ops[i].Rank), int32(g.Ops[m].Rank)
			// Consecutive ops mostly talk to the same peer: skipping repeats of the last pair
			// leaves the sort a few pairs per rank rather than two per matched op.
			if a != b && (len(pairs) == 0 || pairs[len(pairs)-2] != [2]int32{a, b}) {
				pairs = append(pairs, [2]int32{a, b}, [2]int32{b, a})
			}
		}
	}
	slices.SortFunc(pairs, func(p, q [2]int32) int {
		if p[0] != q[0] {
			return int(p[0] - q[0])
		}
		return int(p[1] - q[1])
	})
	pairs = slices.Compact(pairs)
	r.adjStart = make([]int32, g.Ranks+1)
	r.adj = make([]int32, len(pairs))
	for i, p := range pairs {
		r.adjStart[p[0]+1]++
		r.adj[i] = p[1]
	}
	for k := 0; k < g.Ranks; k++ {
		r.adjStart[k+1] += r.adjStart[k]
	}
	r.ranks = newRankIndex(g)
	r.mark = make([]int32, g.Ranks)
	r.comp = make([]int32, g.Ranks)
	r.dist = make([]int32, g.Ranks)
	// The labels take the place of the event-numbered adjacency when it is free and large
	// enough (16-bit labels of a plan of a few edges per event fit).
	free := h.takeEvents()
	r.free = free
	if longestSide(g) <= math.MaxInt16 && !h.opt.wideLabels {
		r.lab16 = newLabels(int16s(free), lanes*h.n, math.MaxInt16)
	} else {
		r.lab32 = newLabels(free, lanes*h.n, math.MaxInt32)
	}
	r.member = make([]uint64, (h.n+63)/64)
	if h.order != ir.OrderNone {
		r.runs = newOrderRuns(g, h.order)
	}
	return r
}

// int16s views the array of b as int16s.
func int16s(b []int32) []int16 { return view.As[int16](b, 2*len(b)) }

// longestSide is the most ops on one side of a queue of g: the longest chain.
func longestSide(g *ir.Graph) int {
	n := 0
	for i := range g.Queues {
		n = max(n, len(g.Queues[i].SendOps), len(g.Queues[i].RecvOps))
	}
	return n
}

// matchedSender returns the recv matched with op id when id is a send or notify write, the ops
// whose landing has edges to another rank's recv; otherwise None.
func matchedSender(g *ir.Graph, id ir.OpID) ir.OpID {
	op := &g.Ops[id]
	if op.SendsMessage() && op.Match != ir.None {
		return op.Match
	}
	return ir.None
}

// split puts into out the questions query q is made of, and returns how many: x happens before
// y when x is y, or when a successor of x reaches a predecessor of y, for the matched landings
// whose edges cross ranks. It may be called again for the same query.
func (r *sepReach) split(q hbQuery, qi int32, out *[4]subQuery) int {
	if q.x == q.y {
		r.ans[qi] = true
		return 0
	}
	xs, ys := [2]event{q.x}, [2]event{q.y}
	nx, ny := 1, 1
	if o := r.runs; o != nil {
		// Paths through the landings of a run (see orderRuns).
		x, y := q.x.op(), q.y.op()
		lx, ly := q.x.phase() == evLand && o.onSendSide(x), q.y.phase() == evLand && o.onSendSide(y)
		if lx && ly && o.run[x] == o.run[y] && r.h.topo[q.x] < r.h.topo[q.y] {
			r.ans[qi] = true // y is later in x's run
			return 0
		}
		if lx {
			xs[0] = endOf(x)
			if m := o.fwd[x]; m != ir.None {
				xs[1], nx = endOf(r.g.Ops[m].Match), 2
			}
		}
		if ly {
			ys[0] = startOf(y)
			if m := o.bwd[y]; m != ir.None {
				ys[1], ny = startOf(r.g.Ops[m].Match), 2
			}
		}
	} else if q.x.phase() == evLand {
		if m := matchedSender(r.g, q.x.op()); m != ir.None {
			xs, nx = [2]event{endOf(q.x.op()), endOf(m)}, 2
		}
	}
	if r.runs == nil && q.y.phase() == evLand {
		if m := matchedSender(r.g, q.y.op()); m != ir.None {
			ys, ny = [2]event{startOf(q.y.op()), startOf(m)}, 2
		}
	}
	k := 0
	for _, x := range xs[:nx] {
		for _, y := range ys[:ny] {
			switch {
			case x == y:
				r.ans[qi] = true
			case r.h.topo[x] < r.h.topo[y]:
				out[k] = subQuery{x, y, qi}
				k++
			}
		}
	}
	return k
}

// rank is the rank event e happens on.
func (r *sepReach) rank(e event) int32 { return r.ranks.of(e) }

// rankIndex finds the rank of an event: the op each rank's ops end before, a few cache lines
// rather than a line of the op.
type rankIndex struct {
	end []int32
	ops int
}

func newRankIndex(g *ir.Graph) rankIndex {
	x := rankIndex{end: make([]int32, g.Ranks), ops: len(g.Ops)}
	for k := range g.Ranks {
		x.end[k] = int32(g.Rank[k].EndOp)
	}
	return x
}

// of is the rank event e happens on.
func (x rankIndex) of(e event) int32 {
	// Ranks mostly have as many ops as each other: the guess by proportion is mostly right.
	o, ends := int32(e.op()), x.end
	k := int(int64(o) * int64(len(ends)) / int64(x.ops))
	if o < ends[k] && (k == 0 || ends[k-1] <= o) {
		return int32(k)
	}
	k, _ = slices.BinarySearch(ends, o+1)
	return int32(k)
}

// children numbers the components of the ranks marked cur among ranks (ignoring the others)
// and hands each the questions inside it. A question between two components has no path. With
// limit > 0, questions of a child with more than limit ranks go to resolveBatch.
func (r *sepReach) children(ranks []int32, cur int32, subs []subQuery, limit int) []component {
	var out []component
	for _, k := range ranks {
		if r.mark[k] != cur {
			continue
		}
		id := int32(len(out))
		c := component{}
		r.bfs(k, cur, func(v int32) {
			r.mark[v] = -1 // visited; children get fresh stamps when solved
			r.comp[v] = id
			c.ranks = append(c.ranks, v)
		})
		out = append(out, c)
	}
	// The questions go to their components in the array they came in (the caller's no longer),
	// counted first. When they all go to one, they only close up; otherwise they are placed
	// in the spare array and copied back.
	// dst[i] is the component subs[i] goes to, or -1.
	if cap(r.dst) < len(subs) {
		r.dst = make([]int32, len(subs))
	}
	dst := r.dst[:len(subs)]
	count := make([]int, len(out)+1)
	for i := range subs {
		s := &subs[i]
		dst[i] = -1
		if r.ans[s.q] {
			continue
		}
		cx, cy := r.comp[r.rank(s.x)], r.comp[r.rank(s.y)]
		switch {
		case cx != cy:
		case limit > 0 && len(out[cx].ranks) > limit:
			r.toResidue(*s) // a child too big to be worth its separator
		default:
			dst[i] = cx
			count[cx+1]++
		}
	}
	busy := 0
	for i := range out {
		if count[i+1] > 0 {
			busy++
		}
		count[i+1] += count[i]
	}
	total := count[len(out)]
	placed := subs[:total]
	if busy > 1 {
		if cap(r.spare) < total {
			r.spare = make([]subQuery, total)
		}
		placed = r.spare[:total]
	}
	for i, s := range subs { // in place, s is read before its place is written
		if c := dst[i]; c >= 0 {
			placed[count[c]] = s
			count[c]++
		}
	}
	copy(subs, placed)
	for i := range out {
		lo := 0
		if i > 0 {
			lo = count[i-1]
		}
		out[i].subs = subs[lo:count[i]:count[i]]
	}
	kept := out[:0]
	for _, c := range out {
		if len(c.subs) > 0 {
			kept = append(kept, c)
		}
	}
	return kept
}

// bfs visits start and the ranks marked m that it reaches through ranks marked m, in
// breadth-first order, with their distance from start in dist.
func (r *sepReach) bfs(start, m int32, visit func(int32)) {
	seen := r.fresh()
	q := append(r.queue[:0], start)
	r.dist[start] = 0
	r.mark[start] = seen
	for i := 0; i < len(q); i++ {
		v := q[i]
		for _, w := range r.adj[r.adjStart[v]:r.adjStart[v+1]] {
			if r.mark[w] == m {
				r.mark[w] = seen
				r.dist[w] = r.dist[v] + 1
				q = append(q, w)
			}
		}
	}
	for _, v := range q {
		r.mark[v] = m
	}
	r.queue = q
	for _, v := range q {
		visit(v)
	}
}

// fresh returns a stamp no rank carries yet.
func (r *sepReach) fresh() int32 {
	r.stamp++
	return r.stamp
}

// toResidue leaves a question to resolveBatch.
func (r *sepReach) toResidue(s subQuery) {
	r.residue = append(r.residue, hbQuery{x: s.x, y: s.y})
	r.resOf = append(r.resOf, s.q)
}

// solve answers the questions of one component through its separator's chains and returns the
// components of the rest that still have questions. Stopped (ctx), it leaves questions
// unanswered.
func (r *sepReach) solve(ctx context.Context, c component) []component {
	cur, onSep := r.fresh(), r.fresh()
	for _, k := range c.ranks {
		r.mark[k] = cur
	}
	sep := r.separator(c.ranks, cur)
	if len(sep) > maxSepRanks {
		r.residue = slices.Grow(r.residue, len(c.subs)) // all of them (Swing: every question)
		r.resOf = slices.Grow(r.resOf, len(c.subs))
		for _, s := range c.subs {
			r.toResidue(s)
		}
		return nil
	}
	for _, k := range sep {
		r.mark[k] = onSep
	}
	r.certify(ctx, c, sep)
	// What the chains did not answer: on S, a question within one rank may have a path inside
	// it; any other has no path. Off S, the paths lie in one component of the rest.
	rest := c.subs[:0] // c.subs is not needed past this
	for _, s := range c.subs {
		if r.ans[s.q] {
			continue
		}
		kx, ky := r.rank(s.x), r.rank(s.y)
		switch {
		case r.mark[kx] == onSep || r.mark[ky] == onSep:
			if kx == ky {
				r.toResidue(s)
			}
		default:
			rest = append(rest, s)
		}
	}
	// A separator that leaves most of the component in one piece makes little progress (ranks
	// that all talk to each other): hand those questions to resolveBatch.
	return r.children(c.ranks, cur, rest, max(3*len(c.ranks)/4, 1))
}

// separator returns the middle layer of a breadth-first search from a rank farthest from the
// component's first one: removing it separates the nearer layers from the farther ones.
func (r *sepReach) separator(ranks []int32, cur int32) []int32 {
	far := ranks[0]
	r.bfs(ranks[0], cur, func(v int32) { far = v })
	var layer []int32
	var order []int32
	r.bfs(far, cur, func(v int32) { order = append(order, v) })
	mid := r.dist[order[len(order)-1]] / 2
	for _, v := range order {
		if r.dist[v] == mid {
			layer = append(layer, v)
		}
	}
	return layer
}

// lanes is how many chains one pair of sweeps labels at once: the labels of an event sit side by
// side, so a sweep reads each successor's once for all of them.
const lanes = 4

// chain is the starts or the ends of one queue side.
type chain struct {
	side []ir.OpID
	ev   func(ir.OpID) event
}

// certify answers yes the questions of c that have a path through a chain of a separator rank.
// It works in topological positions rather than events, so that the sweeps read memory in order.
// The in labels and the out labels share one array: the in labels the questions need are copied
// aside (yin) before the out labels overwrite them.
//
// Which chains a question needs (lanesOf). A path that comes onto a rank from another enters it
// at the end of a recv, or at a landing that goes on to its send's end (a landing that goes
// straight back is the exception of the top of this file): at an event of one of the rank's
// entry chains, the ends of its queue sides. A path that leaves a rank first passes the start
// of a recv, or of a send whose landing it leaves by: one of its exit chains, the starts. So:
//
//   - a question between events off S whose path passes S enters it: S's entry chains answer it;
//   - one whose y is on a separator rank and x off it: the last entry into y's rank, that rank's
//     entry chains;
//   - one whose x is on a separator rank and y off it: the first exit from x's rank, that rank's
//     exit chains; and since the path to that exit stays on x's rank, the out labels of those
//     questions need only the separator's events (labelOut over them alone);
//   - one with an event on a chain (the start or end of an op on a separator queue) needs only
//     that chain: a path to y ends on y's chain, one from x starts on x's.
//
// The entry chains of every separator rank come first, block by block, then the exit chains:
// in a ring, one block of entries answers all but the questions from a separator rank, and one
// block of exits, whose out labels cost a sweep of two ranks, the rest. A rank of many queues
// (a root that talks to every other rank) costs a sweep per block its questions need, not a
// pass over every question per block. Stopped (ctx), it leaves blocks unswept.
func (r *sepReach) certify(ctx context.Context, c component, sep []int32) {
	ts, whole := r.positions(c.ranks)
	if !whole {
		for _, t := range ts {
			r.member[t/64] |= 1 << (t % 64)
		}
	}
	lc := r.laneChains(sep)
	nblocks := len(lc.blocks)
	// blk[i] is the first block that may answer c.subs[i], or -1 when it is answered or no
	// chain can answer it (each costs a look at the ranks of its events). The questions are looked at on all CPUs, in parts: part
	// p places its questions of a first block after those of the parts before it. wide[p][b]
	// says that part p asks block b a question whose out labels need paths off the separator.
	if cap(r.dst) < len(c.subs) {
		r.dst = make([]int32, len(c.subs))
	}
	blk := r.dst[:len(c.subs)]
	parts := r.h.opt.workerCount(len(c.subs), minSplitPart)
	at := make([][]int, parts) // at[p][b]: where part p places its next question of block b
	wide := make([][]bool, parts)
	forParts(parts, len(c.subs), func(p, lo, hi int) {
		count := make([]int, nblocks)
		wp := make([]bool, nblocks)
		for i := lo; i < hi; i++ {
			s := &c.subs[i]
			if r.ans[s.q] {
				blk[i] = -1
				continue
			}
			first, last, local := r.lanesOf(s, &lc)
			if last < first { // no chain: no path through the separator
				blk[i] = -1
				continue
			}
			blk[i] = first / lanes
			count[blk[i]]++
			if !local {
				for b := first / lanes; b <= last/lanes; b++ {
					wp[b] = true
				}
			}
		}
		at[p], wide[p] = count, wp
	})
	// global[b]: some question asks block b for out labels of paths off the separator.
	global := make([]bool, nblocks)
	for _, wp := range wide {
		for b, w := range wp {
			global[b] = global[b] || w
		}
	}
	// Block b's first questions are open[firstAt[b]:firstAt[b+1]].
	firstAt := cursors(at, nblocks)
	if cap(r.open) < firstAt[nblocks] {
		r.open = make([]int32, firstAt[nblocks])
	}
	open := r.open[:firstAt[nblocks]]
	forParts(parts, len(c.subs), func(p, lo, hi int) {
		next := at[p]
		for i := lo; i < hi; i++ {
			if b := blk[i]; b >= 0 {
				open[next[b]] = int32(i)
				next[b]++
			}
		}
	})
	r.dst = nil       // blk: let the sweeps below run without it (children makes one as large as it needs)
	var sepTs []int32 // the positions of the separator's events, for the out labels of exit blocks
	var carry []int32 // the questions of earlier blocks that later ones may answer
	for b, block := range lc.blocks {
		ask := [2][]int32{carry, open[firstAt[b]:firstAt[b+1]]}
		if len(ask[0])+len(ask[1]) == 0 {
			continue
		}
		if stop.Cause(ctx) != nil { // each block sweeps a window of the graph: as long as the plan
			break
		}
		// Only the window from the first x to the last y of the questions is swept: a path
		// x -> c_i -> c_j -> y (i <= j) lies between x and y in topological order.
		first, last := r.span(c.subs, ask)
		w := r.window(ts, whole, r.member, first, last)
		wout := w
		if b >= lc.exits && !global[b] {
			if sepTs == nil {
				sepTs = r.sepPositions(sep)
			}
			wout = r.window(sepTs, false, r.sepMember, first, last)
		}
		if r.lab16 != nil {
			answerBlock(r, r.lab16, c.subs, ask, w, wout, block)
		} else {
			answerBlock(r, r.lab32, c.subs, ask, w, wout, block)
		}
		kept := r.carry[:0]
		for _, part := range ask {
			for _, i := range part {
				if s := &c.subs[i]; !r.ans[s.q] {
					if _, l, _ := r.lanesOf(s, &lc); l/lanes > int32(b) {
						kept = append(kept, i)
					}
				}
			}
		}
		r.carry, carry = kept, kept
	}
	if sepTs != nil {
		for _, t := range sepTs {
			r.sepMember[t/64] &^= 1 << (t % 64)
		}
	}
	lc.clear(r)
	if !whole {
		for _, t := range ts {
			r.member[t/64] &^= 1 << (t % 64)
		}
	}
}

// laneChains are the chains of a separator, in blocks of lanes: the entry chains of its ranks
// (the ends of their queue sides), rank by rank, and from block exits on their exit chains (the
// starts). A chain's index is its block times lanes plus its lane.
type laneChains struct {
	blocks [][]chain
	exits  int
	// Per rank of the separator (sepAt gives its place), the indexes of its entry chains,
	// [entry[k], entry[k+1]), and of its exit chains.
	entry, exit []int32
	sep         []int32
}

// laneChains numbers the chains of the separator ranks sep (see laneChains), in r.chainAt and
// r.sepAt until clear.
func (r *sepReach) laneChains(sep []int32) laneChains {
	if r.chainAt == nil {
		r.chainAt = make([]int32, 4*len(r.g.Queues))
		for i := range r.chainAt {
			r.chainAt[i] = -1
		}
		r.sepAt = make([]int32, r.g.Ranks)
		for i := range r.sepAt {
			r.sepAt[i] = -1
		}
	}
	lc := laneChains{sep: sep, entry: make([]int32, len(sep)+1), exit: make([]int32, len(sep)+1)}
	for i, k := range sep {
		r.sepAt[k] = int32(i)
	}
	for phase, ev := range [2]func(ir.OpID) event{endOf, startOf} {
		var chains []chain
		base := int32(len(lc.blocks) * lanes)
		idx := &lc.entry
		if phase == 1 {
			idx = &lc.exit
			lc.exits = len(lc.blocks)
		}
		for i, k := range sep {
			(*idx)[i] = base + int32(len(chains))
			span := r.g.Rank[k]
			for qi := span.FirstQueue; qi < span.EndQueue; qi++ {
				q := &r.g.Queues[qi]
				for recv, side := range [2][]ir.OpID{q.SendOps, q.RecvOps} {
					if len(side) > 0 {
						r.chainAt[chainKey(qi, recv == 1, phase == 0)] = base + int32(len(chains))
						chains = append(chains, chain{side, ev})
					}
				}
			}
		}
		(*idx)[len(sep)] = base + int32(len(chains))
		for lo := 0; lo < len(chains); lo += lanes {
			lc.blocks = append(lc.blocks, chains[lo:min(lo+lanes, len(chains))])
		}
	}
	return lc
}

// clear forgets the numbering of lc's chains in r.
func (lc *laneChains) clear(r *sepReach) {
	for _, k := range lc.sep {
		r.sepAt[k] = -1
		span := r.g.Rank[k]
		for i := chainKey(span.FirstQueue, false, false); i < chainKey(span.EndQueue, false, false); i++ {
			r.chainAt[i] = -1
		}
	}
}

// lanesOf returns the chains that answer question s (see certify), the indexes first to last
// (none when last < first), and whether the out labels of its x need only the separator's
// events.
func (r *sepReach) lanesOf(s *subQuery, lc *laneChains) (first, last int32, local bool) {
	kx, ky := r.rank(s.x), r.rank(s.y)
	ix, iy := r.sepAt[kx], r.sepAt[ky]
	if iy >= 0 && kx != ky && lc.entry[iy+1]-lc.entry[iy] <= lanes {
		// The entries of y's rank, when they are one sweep's worth: else y's chain, if any.
		return lc.entry[iy], lc.entry[iy+1] - 1, false
	}
	// Only an event of a separator rank can be on its chains (a look at the event's op).
	if iy >= 0 {
		if ch := r.onChain(s.y); ch >= 0 {
			return ch, ch, false
		}
	}
	if ix >= 0 {
		if ch := r.onChain(s.x); ch >= 0 {
			return ch, ch, true
		}
	}
	switch {
	case iy >= 0: // on the same rank as x, or its path passes that rank's entries
		return lc.entry[iy], lc.entry[iy+1] - 1, false
	case ix >= 0:
		return lc.exit[ix], lc.exit[ix+1] - 1, true
	}
	return 0, lc.entry[len(lc.sep)] - 1, false
}

// chainKey is where chainAt holds the chain of a separator rank that the starts or the ends of
// one side of a queue make.
func chainKey(q ir.QueueID, recv, end bool) int {
	k := 4 * int(q)
	if recv {
		k += 2
	}
	if end {
		k++
	}
	return k
}

// onChain returns the index of the separator chain event e is on, or -1.
func (r *sepReach) onChain(e event) int32 {
	if e.phase() == evLand {
		return -1
	}
	op := &r.g.Ops[e.op()]
	if op.Queue == ir.None {
		return -1
	}
	return r.chainAt[chainKey(op.Queue, op.Kind.IsRecvSide(), e.phase() == evEnd)]
}

// window is the topological positions a sweep works on: ts (in order, marked in member), or
// every position when whole; either way only those from first to last.
type window struct {
	ts          []int32
	whole       bool
	member      []uint64
	first, last int32
}

// window is the window of the positions ts (marked in member), or of every position when
// whole, from first to last.
func (r *sepReach) window(ts []int32, whole bool, member []uint64, first, last int32) window {
	if !whole {
		i, _ := slices.BinarySearch(ts, first)
		j, _ := slices.BinarySearch(ts, last+1)
		ts = ts[i:j]
	}
	return window{ts: ts, whole: whole, member: member, first: first, last: last}
}

// len is how many positions w has.
func (w *window) len() int {
	if w.whole {
		return int(w.last-w.first) + 1
	}
	return len(w.ts)
}

// at is w's position i.
func (w *window) at(i int) int32 {
	if w.whole {
		return w.first + int32(i)
	}
	return w.ts[i]
}

// has reports whether position t, a successor of one in w, is in w.
func (w *window) has(t int32) bool {
	return t <= w.last && (w.whole || w.member[t/64]&(1<<(t%64)) != 0)
}

// labels is the label array of the sweeps (lanes per topological position: in, and then out in
// the same place, see certify), its elements wide enough for the longest chain, whose index
// top exceeds.
type labels[T int16 | int32] struct {
	label []T
	top   T

	// While the out labels are computed: the in labels of the second events of the questions
	// asked, lanes per question.
	yin []T
}

// newLabels makes labels of n elements, in free if it holds them (and the yin of the first
// questions in what is left of it).
func newLabels[T int16 | int32](free []T, n int, top T) *labels[T] {
	if len(free) < n {
		return &labels[T]{label: make([]T, n), top: top}
	}
	return &labels[T]{label: free[:n:n], yin: free[n:n], top: top}
}

// answerBlock answers yes the questions subs[i], i in either part of ask, that have a path
// through a chain of block, with a pair of sweeps: of the in labels over the window w, of the
// out labels over wout (w, or the part of it the paths from the questions' x need).
func answerBlock[T int16 | int32](r *sepReach, lab *labels[T], subs []subQuery, ask [2][]int32, w, wout window, block []chain) {
	topo := r.h.topo
	r.swept[0] += w.len()
	r.swept[1] += wout.len()
	labelIn(r, lab, w, block)
	n := len(ask[0]) + len(ask[1])
	if cap(lab.yin) < lanes*n {
		lab.yin = make([]T, lanes*n)
	}
	yin := lab.yin[:lanes*n]
	// Question j is the j-th of ask's two parts put together; the questions are copied and
	// answered on all CPUs, in parts (the answers of one query's questions meet in r.ans after).
	asked := func(j int) int32 {
		if j < len(ask[0]) {
			return ask[0][j]
		}
		return ask[1][j-len(ask[0])]
	}
	r.h.opt.inParts(n, minSplitPart, func(_, lo, hi int) {
		for j := lo; j < hi; j++ {
			ty := topo[subs[asked(j)].y] * lanes
			copy(yin[j*lanes:j*lanes+lanes], lab.label[ty:ty+lanes])
		}
	})
	labelOut(r, lab, wout, block)
	if cap(r.hit) < n {
		r.hit = make([]bool, n)
	}
	hit := r.hit[:n]
	r.h.opt.inParts(n, minSplitPart, func(_, lo, hi int) {
		for j := lo; j < hi; j++ {
			tx := topo[subs[asked(j)].x] * lanes
			x, y := lab.label[tx:tx+lanes], yin[j*lanes:j*lanes+lanes]
			hit[j] = false
			for l := range block {
				if x[l] <= y[l] {
					hit[j] = true
					break
				}
			}
		}
	})
	for j, ok := range hit {
		if ok {
			r.ans[subs[asked(j)].q] = true
		}
	}
}

// span is the first position of the x and the last of the y of the questions subs[i], i in
// either part of ask (looked at on all CPUs).
func (r *sepReach) span(subs []subQuery, ask [2][]int32) (first, last int32) {
	topo := r.h.topo
	type bounds struct{ first, last int32 }
	var mu sync.Mutex
	all := bounds{math.MaxInt32, -1}
	for _, part := range ask {
		r.h.opt.inParts(len(part), minSplitPart, func(_, lo, hi int) {
			b := bounds{math.MaxInt32, -1}
			for _, i := range part[lo:hi] {
				s := &subs[i]
				b.first, b.last = min(b.first, topo[s.x]), max(b.last, topo[s.y])
			}
			mu.Lock()
			all.first, all.last = min(all.first, b.first), max(all.last, b.last)
			mu.Unlock()
		})
	}
	return all.first, all.last
}

// labelIn sets, for each lane, the in label at the positions of w: the last position on the
// lane's chain that reaches the event there, counting only paths inside w.
func labelIn[T int16 | int32](r *sepReach, lab *labels[T], w window, block []chain) {
	in := quads(lab.label)
	start, succ := r.h.succStart, r.h.succ
	n := w.len()
	r.h.opt.inParts(n, minRenumber, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			in[w.at(i)] = [lanes]T{-1, -1, -1, -1}
		}
	})
	seed(r, lab, block)
	for i := 0; i < n; i++ {
		t := w.at(i)
		it := in[t]
		if max(it[0], it[1], it[2], it[3]) < 0 {
			continue
		}
		for _, v := range succ[start[t]:start[t+1]] {
			if w.has(v) {
				iw := &in[v]
				iw[0], iw[1], iw[2], iw[3] = max(iw[0], it[0]), max(iw[1], it[1]), max(iw[2], it[2]), max(iw[3], it[3])
			}
		}
	}
}

// labelOut sets, for each lane, the out label at the positions of w: the first position on
// the lane's chain that the event there reaches, counting only paths inside w. The sweeps are
// unrolled for four lanes.
func labelOut[T int16 | int32](r *sepReach, lab *labels[T], w window, block []chain) {
	out, top := quads(lab.label), lab.top
	start, succ := r.h.succStart, r.h.succ
	n := w.len()
	r.h.opt.inParts(n, minRenumber, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			out[w.at(i)] = [lanes]T{top, top, top, top}
		}
	})
	// An event on a chain reaches nothing earlier on it: its seed stays its label.
	seed(r, lab, block)
	for i := n - 1; i >= 0; i-- {
		t := w.at(i)
		ot := out[t]
		for _, v := range succ[start[t]:start[t+1]] {
			if w.has(v) {
				ow := &out[v]
				ot[0], ot[1], ot[2], ot[3] = min(ot[0], ow[0]), min(ot[1], ow[1]), min(ot[2], ow[2]), min(ot[3], ow[3])
			}
		}
		out[t] = ot
	}
}

// quads views the labels of each position, lanes of them side by side, as one array.
func quads[T int16 | int32](label []T) [][lanes]T { return view.As[[lanes]T](label, len(label)/lanes) }

// seed sets the label of every event on the chains of block, in the lane of its chain, to its
// position there: the sweeps of labelIn and labelOut then carry them along the paths, with no
// array saying which events are on a chain.
func seed[T int16 | int32](r *sepReach, lab *labels[T], block []chain) {
	topo := r.h.topo
	for l, ch := range block {
		for i, op := range ch.side {
			lab.label[topo[ch.ev(op)]*lanes+int32(l)] = T(i)
		}
	}
}

// sepPositions lists the topological positions of the events of the separator ranks sep, in
// order, and marks them in sepMember (certify clears the marks).
func (r *sepReach) sepPositions(sep []int32) []int32 {
	if r.sepMember == nil {
		r.sepMember = make([]uint64, (r.h.n+63)/64)
	}
	ts := []int32{}
	for _, k := range sep {
		first, end := r.g.RankOps(int(k))
		for e := startOf(first); e < startOf(end); e++ {
			t := r.h.topo[e]
			ts = append(ts, t)
			r.sepMember[t/64] |= 1 << (t % 64)
		}
	}
	slices.Sort(ts)
	return ts
}

// positions lists the topological positions of the events of the given ranks, in order, or
// reports whole when they are all the ranks (every position, not listed).
func (r *sepReach) positions(ranks []int32) (ts []int32, whole bool) {
	h := r.h
	if len(ranks) == r.g.Ranks {
		return nil, true
	}
	for _, k := range ranks {
		first, end := r.g.RankOps(int(k))
		for e := startOf(first); e < startOf(end); e++ {
			ts = append(ts, h.topo[e])
		}
	}
	slices.Sort(ts)
	return ts, false
}
