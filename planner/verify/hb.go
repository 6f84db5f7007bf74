package verify

import (
	"context"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// The happens-before relation of docs/language.md §8 (What a plan means) as a DAG over events.
// Every op has three events, numbered 3*op (start), 3*op+1 (landing) and 3*op+2 (end). Host ops
// and recvs do not land anything themselves: their landing event is a filler between start and
// end, and a recv takes its data at the landing event of the send (or notify write) that
// matches it.
//
// Edges:
//
//	start(x) -> land(x) -> end(x)                      every op
//	end(a) -> start(b)                                 `b after a`
//	start(p) -> start(n), end(p) -> end(n)             consecutive ops on one side of a queue
//	start(r) -> land(s) -> end(r)                      send or notify write s matched with recv r
//	land(p) -> land(n)                                 consecutive ops on one send side, when the
//	                                                   transport orders n's kind after p's (ir.Order)
//
// The same graph answers the deadlock question (a cycle is a set of events that all wait on each
// other) and the race question (reachability between access intervals).

// event is a node of the happens-before graph.
type event int32

const (
	evStart = 0
	evLand  = 1
	evEnd   = 2
)

func startOf(op ir.OpID) event { return event(op) * 3 }
func landOf(op ir.OpID) event  { return event(op)*3 + evLand }
func endOf(op ir.OpID) event   { return event(op)*3 + evEnd }

// op is the op the event belongs to.
func (e event) op() ir.OpID { return ir.OpID(e / 3) }

// phase is evStart, evLand or evEnd.
func (e event) phase() int { return int(e % 3) }

// hbGraph is the event DAG with a topological order and a reachability oracle.
//
// Its nodes are numbered in two ways. While it is built, sorted and searched by reach, a node is
// an event: the events of one op, and the ops of one rank, sit side by side, so the short
// searches of the race sweep stay in a few cache lines. The oracle that answers the questions
// reach gave up on (resolve, resolveBatch) renumbers the nodes by topological position
// (renumber; topo maps an event to its position), as its sweeps read the adjacency in
// topological order. node maps an event to the node that stands for it either way.
type hbGraph struct {
	g *ir.Graph
	n int

	// The successors of node v are succ[succStart[v]:succStart[v+1]].
	succStart []int32
	succ      []int32

	// Valid when acyclic: topo maps an event to its topological position. byPos says whether
	// the nodes are positions (renumber) rather than events.
	acyclic bool
	topo    []int32
	byPos   bool

	// The position-numbered adjacency, made once for every copy of the graph (Order.LintRNR
	// searches a copy beside the race search). owner says this is the graph newHB made rather
	// than a copy: the one that may take the event-numbered arrays once renumbered.
	pos   *posGraph
	owner bool

	order ir.Order // the ordering whose edges the graph has (none for the first race check)

	opt *Options // how the steps split their work (never changed by them)
}

// posGraph is the adjacency of an hbGraph numbered by topological position (renumber).
type posGraph struct {
	once        sync.Once
	order       []int32 // the events in topological order, until its array becomes start
	start, succ []int32

	// The copies whose lint still uses the array of order (the drained orders of rnr).
	drain sync.WaitGroup

	// The array of the event-numbered adjacency, until the owner takes it (takeEvents) once
	// the searches of copies that read it are done with it (lint).
	events []int32
	lint   sync.WaitGroup

	// An array free for succ if renumber comes after it is offered (the race sweep's).
	mu    sync.Mutex
	spare []int32
}

// offer hands renumber an array it may use for the new lists.
func (p *posGraph) offer(a []int32) {
	p.mu.Lock()
	p.spare = a
	p.mu.Unlock()
}

// lists returns an array of n int32s for the new lists: the spare one if offered and large
// enough.
func (p *posGraph) lists(n int) []int32 {
	p.mu.Lock()
	a := p.spare
	p.spare = nil
	p.mu.Unlock()
	if len(a) < n {
		return make([]int32, n)
	}
	return a[:n:n]
}

// takeEvents hands the array of h's event-numbered adjacency (its starts and lists) to be
// overwritten, once h is renumbered and the copies that read it (LintRNR) let go of it, to the
// owner only and once; otherwise nil.
func (h *hbGraph) takeEvents() []int32 {
	if !h.owner || !h.byPos {
		return nil
	}
	p := h.pos
	p.lint.Wait()
	b := p.events
	p.events = nil
	return b
}

// search is the scratch of bounded searches (reach), one per goroutine searching. A search
// visits at most its budget of nodes, so the nodes it has visited are kept in a small hash
// table, a few cache lines, rather than in a mark per node of the graph: a slot holds the epoch
// of the search that filled it above the node, and a slot of an older epoch is empty, so there
// is no clearing between searches. A node's slot is its number modulo the size: the nodes of
// one search are mostly the events of nearby ops, which then take distinct slots. Searches of
// a thousand nodes collide more: given an array free for it, a search marks each node there.
type search struct {
	seen  []uint64
	mask  uint32  // the slots of seen the current search uses
	mark  []int32 // when given, the epoch of the search that visited each node, instead of seen
	epoch uint32
	stack []int32
}

// begin starts a search that visits at most budget nodes besides its first.
func (s *search) begin(budget int) {
	// The table is sized for the largest budget yet, and a search uses only the slots its own
	// budget needs: a short search stays in a few cache lines.
	size := 8
	for size < 2*(budget+2) {
		size *= 2
	}
	if s.mark == nil && len(s.seen) < size {
		s.seen, s.epoch = make([]uint64, size), 0
	}
	s.mask = uint32(size - 1)
	s.epoch++
	if s.epoch == 0 { // wrapped: forget all slots
		clear(s.seen)
		clear(s.mark)
		s.epoch = 1
	}
}

// probe marks node v visited in the hash table, reporting whether it was not yet.
func (s *search) probe(v int32) bool {
	seen, epoch, mask := s.seen, uint64(s.epoch), s.mask
	mark := epoch<<32 | uint64(uint32(v))
	for i := uint32(v) & mask; ; i = (i + 1) & mask {
		switch slot := seen[i]; {
		case slot == mark:
			return false
		case slot>>32 != epoch:
			seen[i] = mark
			return true
		}
	}
}

// newHB builds the event graph of g and sorts it topologically. Without matching, it leaves out
// the edges between ranks (for finding deadlocks within one rank).
func newHB(ctx context.Context, g *ir.Graph, matching bool, opt *Options) *hbGraph {
	return newHBBeside(ctx, g, matching, ir.OrderNone, opt, nil)
}

// newHBBeside is newHB with the edges of the ordering ord that, unless nil, runs beside on a
// goroutine of its own while the graph is sorted, given the number of its edges, and returns
// once both are done. Stopped (ctx), it returns a graph that is not acyclic and may have no
// adjacency: the caller looks at ctx before anything else.
func newHBBeside(ctx context.Context, g *ir.Graph, matching bool, ord ir.Order, opt *Options, beside func(edges int)) *hbGraph {
	n := 3 * len(g.Ops)
	h := &hbGraph{g: g, n: n, owner: true, opt: opt, order: ord}
	// Two passes over the edges, counting and then placing them: the adjacency is built in place,
	// without a list of all edges beside it, in one array that can serve again once renumber
	// is done with it (takeEvents).
	block := make([]int32, n+1+edgeBound(g, matching, ord))
	start := block[:n+1]
	indeg := make([]int32, n)
	if l := newOpEdges(g, matching, ord, indeg, opt); l != nil {
		// The lists of one op's events are made from the op alone: they are counted and placed
		// on all CPUs, op by op, and so are the events' in-degrees that sort needs.
		parts := opt.workerCount(len(g.Ops), minEdgePart)
		total := make([]int32, parts+1)
		forParts(parts, len(g.Ops), func(p, lo, hi int) {
			poll := stop.Every(ctx, hbPoll)
			for x := lo; x < hi; x++ {
				if poll.Step() != nil {
					return
				}
				total[p+1] += l.count(ir.OpID(x), start[3*x+1:3*x+4])
			}
		})
		if stop.Cause(ctx) != nil {
			return h
		}
		for p := range parts {
			total[p+1] += total[p]
		}
		if int(total[parts]) > len(block)-(n+1) { // a Match outside the queues' recvs
			block = append(start, make([]int32, total[parts])...)
			start = block[:n+1]
		}
		succ := block[n+1 : n+1+int(total[parts])]
		forParts(parts, len(g.Ops), func(p, lo, hi int) {
			k := total[p]
			for e := 3 * lo; e < 3*hi; e++ {
				k += start[e+1]
				start[e+1] = k
			}
			k = total[p]
			poll := stop.Every(ctx, hbPoll)
			for x := lo; x < hi; x++ {
				if poll.Step() != nil {
					return
				}
				k = l.place(ir.OpID(x), succ, k, indeg[3*x:3*x+3])
			}
		})
		if stop.Cause(ctx) != nil {
			return h
		}
		h.succStart, h.succ = start, succ
	} else {
		indeg = nil // sort counts them
		hbEdges(g, matching, ord, func(a, _ event) { start[a+1]++ })
		for i := 0; i < n; i++ {
			start[i+1] += start[i]
		}
		if int(start[n]) > len(block)-(n+1) { // a Match outside the queues' recvs
			block = append(start, make([]int32, start[n])...)
			start = block[:n+1]
		}
		succ := block[n+1 : n+1+int(start[n])]
		hbEdges(g, matching, ord, func(a, b event) {
			succ[start[a]] = int32(b)
			start[a]++
		})
		copy(start[1:], start[:n]) // each start[a] has moved to where a's list ends
		start[0] = 0
		h.succStart, h.succ = start, succ
	}
	var wg sync.WaitGroup
	if beside != nil {
		wg.Go(func() { beside(len(h.succ)) })
	}
	h.sort(ctx, indeg)
	wg.Wait()
	if h.pos != nil {
		h.pos.events = block
	}
	return h
}

// minEdgePart is the fewest ops worth a goroutine of newHB; hbPoll is how many ops a goroutine
// of newHB (or of collectAccesses) handles between two looks at the context, and sortPoll how
// many events sort takes: a millisecond or so.
const (
	minEdgePart = 1 << 14
	hbPoll      = 1 << 14
	sortPoll    = 1 << 16
)

// opEdges gives the edges of g's event graph op by op: the lists of an op's three events in the
// order hbEdges gives them, and the events' in-degrees.
type opEdges struct {
	g        *ir.Graph
	matching bool
	order    ir.Order
	// slot holds, at 3*x for op x, 1 + the op after x on its side of its queue (0: none), with
	// the flags below, until place overwrites it with the in-degrees of x's events.
	slot []int32
}

// The flags of a slot: the op is not the first on its queue side; it is a recv with a sender
// (a send or notify write matched with it); the ordering orders its landing after that of the
// op before it on its queue side.
const (
	hasPrev     = 1 << 30
	hasSender   = 1 << 29
	orderedPrev = 1 << 28
)

// newOpEdges returns the edges of g op by op, or nil when an op is on more than one side of a
// queue, or a send's recv is matched with another op: then only hbEdges gives them. indeg,
// all zeros, is where place puts the in-degrees of the events (one int32 per event).
func newOpEdges(g *ir.Graph, matching bool, ord ir.Order, indeg []int32, opt *Options) *opEdges {
	if len(g.Ops) >= orderedPrev || len(g.Lands) > 0 { // hbEdges gives the orders of waits
		return nil
	}
	l := &opEdges{g: g, matching: matching, order: ord, slot: indeg}
	for qi := range g.Queues {
		q := &g.Queues[qi]
		for _, side := range [2][]ir.OpID{q.SendOps, q.RecvOps} {
			for k := 1; k < len(side); k++ {
				p, x := &l.slot[3*side[k-1]], &l.slot[3*side[k]]
				if *p&^(hasPrev|orderedPrev) != 0 || *x&hasPrev != 0 {
					return nil
				}
				*p |= int32(side[k]) + 1
				*x |= hasPrev
				if l.ordered(side[k-1], side[k]) {
					*x |= orderedPrev
				}
			}
		}
	}
	if matching {
		// Each recv is marked by its sender, which the validation finds anyway: the lists then
		// need not look the sender up (another rank's op, a cache miss).
		var bad atomic.Bool
		opt.inParts(len(g.Ops), minEdgePart, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				if r := matchedSender(g, ir.OpID(i)); r != ir.None {
					if g.Ops[r].Match != ir.OpID(i) {
						bad.Store(true)
						return
					}
					atomic.OrInt32(&l.slot[3*r], hasSender)
				}
			}
		})
		if bad.Load() {
			return nil
		}
	}
	return l
}

// ordered reports whether the ordering orders the landing of op n after that of op p, the op
// before it on its queue side.
func (l *opEdges) ordered(p, n ir.OpID) bool {
	return l.order != ir.OrderNone && l.order.Orders(l.g.Ops[p].Kind, l.g.Ops[n].Kind)
}

// after is the op after x on its queue side, or None.
func (l *opEdges) after(x ir.OpID) ir.OpID {
	if n := l.slot[3*x] &^ (hasPrev | hasSender | orderedPrev); n != 0 {
		return ir.OpID(n - 1)
	}
	return ir.None
}

// sender is the send or notify write whose landing the recv x takes its data at, or None.
func (l *opEdges) sender(x ir.OpID) ir.OpID {
	if l.slot[3*x]&hasSender == 0 {
		return ir.None
	}
	return l.g.Ops[x].Match
}

// recv is the recv matched with the send or notify write x, or None.
func (l *opEdges) recv(x ir.OpID) ir.OpID {
	if !l.matching {
		return ir.None
	}
	return matchedSender(l.g, x)
}

// count puts the lengths of the lists of x's events in deg, and returns how many edges x's
// events have.
func (l *opEdges) count(x ir.OpID, deg []int32) int32 {
	nx := l.after(x)
	s, r, q := l.sender(x) != ir.None, l.recv(x) != ir.None, nx != ir.None
	deg[evStart] = 1 + b2i(s) + b2i(q)
	deg[evLand] = 1 + b2i(r) + b2i(q && l.ordered(x, nx))
	deg[evEnd] = int32(len(l.g.Succs(x))) + b2i(q)
	return deg[evStart] + deg[evLand] + deg[evEnd]
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// place writes the lists of x's events into succ from k on, and returns where they end; then it
// puts the in-degrees of x's events in in, over x's slot.
func (l *opEdges) place(x ir.OpID, succ []int32, k int32, in []int32) int32 {
	add := func(e event) {
		succ[k] = int32(e)
		k++
	}
	// hbEdges gives the edges of the ops in op order: the landing of x's sender comes before
	// x's own when the sender is the earlier op.
	s := l.sender(x)
	if s != ir.None && s < x {
		add(landOf(s))
	}
	add(landOf(x))
	if s != ir.None && s >= x {
		add(landOf(s))
	}
	nx := l.after(x)
	if nx != ir.None {
		add(startOf(nx))
	}
	add(endOf(x))
	r := l.recv(x)
	if r != ir.None {
		add(endOf(r))
	}
	if nx != ir.None && l.ordered(x, nx) {
		add(landOf(nx))
	}
	for _, t := range l.g.Succs(x) {
		add(startOf(ir.OpID(t)))
	}
	if nx != ir.None {
		add(endOf(nx))
	}
	prev, ordered := b2i(l.slot[3*x]&hasPrev != 0), b2i(l.slot[3*x]&orderedPrev != 0)
	in[evStart] = int32(len(l.g.Preds(x))) + prev
	in[evLand] = 1 + b2i(r != ir.None) + ordered
	in[evEnd] = 1 + b2i(s != ir.None) + prev
	return k
}

// edgeBound bounds how many edges hbEdges gives without reading the ops: a send or notify
// write matched with a recv gives two edges, and there are at most as many as recvs on queues;
// an ordering gives at most one per pair of consecutive ops on a send side.
func edgeBound(g *ir.Graph, matching bool, ord ir.Order) int {
	n := 2*len(g.Ops) + len(g.Edges) + len(g.Lands)
	for qi := range g.Queues {
		q := &g.Queues[qi]
		n += 2*max(len(q.SendOps)-1, 0) + 2*max(len(q.RecvOps)-1, 0)
		if ord != ir.OrderNone {
			n += max(len(q.SendOps)-1, 0)
		}
		if matching {
			n += 2 * len(q.RecvOps)
		}
	}
	return n
}

// hbEdges calls add for every edge of g's event graph with the ordering ord (see the top of this
// file), the edges from one event in a fixed order.
func hbEdges(g *ir.Graph, matching bool, ord ir.Order, add func(a, b event)) {
	for i := range g.Ops {
		id := ir.OpID(i)
		add(startOf(id), landOf(id))
		add(landOf(id), endOf(id))
		op := &g.Ops[i]
		if matching && op.SendsMessage() && op.Match != ir.None {
			r := op.Match
			add(startOf(r), landOf(id))
			add(landOf(id), endOf(r))
		}
	}
	for _, e := range g.Edges {
		add(endOf(e.From), startOf(e.To))
	}
	for _, e := range g.Lands { // the orders of wait ops (waits.go)
		add(landOf(e.From), endOf(e.To))
	}
	for qi := range g.Queues {
		q := &g.Queues[qi]
		for _, side := range [2][]ir.OpID{q.SendOps, q.RecvOps} {
			for k := 1; k < len(side); k++ {
				add(startOf(side[k-1]), startOf(side[k]))
				add(endOf(side[k-1]), endOf(side[k]))
				if ord != ir.OrderNone && ord.Orders(g.Ops[side[k-1]].Kind, g.Ops[side[k]].Kind) {
					add(landOf(side[k-1]), landOf(side[k]))
				}
			}
		}
	}
}

// succs returns the successors of node v.
func (h *hbGraph) succs(v int32) []int32 { return h.succ[h.succStart[v]:h.succStart[v+1]] }

// sort computes a topological order with Kahn's algorithm (topo); it sets acyclic to false when
// some events are left over (they sit on or behind a cycle), or when it stops (ctx). indeg, the
// in-degrees of the events, is counted when nil; it is used up.
func (h *hbGraph) sort(ctx context.Context, indeg []int32) {
	if indeg == nil {
		indeg = make([]int32, h.n)
		for _, w := range h.succ {
			indeg[w]++
		}
	}
	order := make([]int32, 0, h.n+1) // one more: renumber turns it into the start of each adjacency
	for v := 0; v < h.n; v++ {
		if indeg[v] == 0 {
			order = append(order, int32(v))
		}
	}
	poll := stop.Every(ctx, sortPoll)
	for i := 0; i < len(order); i++ {
		if poll.Step() != nil { // not acyclic: the caller stops
			return
		}
		for _, w := range h.succs(order[i]) {
			indeg[w]--
			if indeg[w] == 0 {
				order = append(order, w)
			}
		}
	}
	h.acyclic = len(order) == h.n
	if !h.acyclic {
		return
	}
	// indeg is all zeros now: it becomes topo.
	topo := indeg
	h.opt.inParts(len(order), minRenumber, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			topo[order[i]] = int32(i)
		}
	})
	h.topo = topo
	h.pos = &posGraph{order: order}
}

// node is the node that stands for event e.
func (h *hbGraph) node(e event) int32 {
	if h.byPos {
		return h.topo[e]
	}
	return int32(e)
}

// minRenumber is the fewest events worth a goroutine of renumber.
const minRenumber = 1 << 16

// renumber makes the nodes topological positions: position t's successors are those of the
// event at t, as positions, in the same order. The new adjacency is made once for all copies of
// h, the starts of its lists in the array of the topological order. (Building it from g instead
// of the event-numbered adjacency scatters every edge's writes: twice as slow.)
func (h *hbGraph) renumber() {
	if h.byPos {
		return
	}
	p := h.pos
	p.once.Do(func() {
		p.drain.Wait()
		// Both passes run on all CPUs, each goroutine writing the lists of its own events,
		// which are other positions than any other goroutine's (topo is a permutation).
		topo := h.topo
		start := p.order[:h.n+1] // the order is not needed any more
		h.opt.inParts(h.n, minRenumber, func(_, lo, hi int) {
			for v := lo; v < hi; v++ {
				start[topo[v]+1] = h.succStart[v+1] - h.succStart[v]
			}
		})
		start[0] = 0
		for t := range h.n {
			start[t+1] += start[t]
		}
		succ := p.lists(len(h.succ))
		h.opt.inParts(h.n, minRenumber, func(_, lo, hi int) {
			for v := lo; v < hi; v++ {
				k := start[topo[v]]
				for _, w := range h.succs(int32(v)) {
					succ[k] = topo[w]
					k++
				}
			}
		})
		p.order, p.start, p.succ = nil, start, succ
	})
	h.succStart, h.succ, h.byPos = p.start, p.succ, true
}

// reachResult is the answer of a bounded reachability search.
type reachResult uint8

const (
	reachNo reachResult = iota
	reachYes
	reachUnknown // the search gave up; resolve answers it exactly (reach.go)
)

// reach reports whether event x happens before or at event y, visiting at most budget events,
// with the scratch s. Only events whose topological position lies between x's and y's can be on
// a path, which keeps searches between nearby events short.
func (h *hbGraph) reach(s *search, x, y event, budget int) reachResult {
	return h.bounded(s, h.node(x), h.node(y), budget)
}

// bounded is reach between nodes x and y, in either numbering (see hbGraph).
func (h *hbGraph) bounded(s *search, x, y int32, budget int) reachResult {
	if x == y {
		return reachYes
	}
	ty, ok := h.window(x, y)
	if !ok {
		return reachNo
	}
	topo, byPos := h.topo, h.byPos
	s.begin(budget)
	visit := s.visitor()
	stack := append(s.stack[:0], x)
	visit(x)
	visited := 0
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, w := range h.succs(v) {
			if w == y {
				s.stack = stack
				return reachYes
			}
			tw := w
			if !byPos {
				tw = topo[w]
			}
			if tw < ty && visit(w) {
				stack = append(stack, w)
				if visited++; visited > budget {
					s.stack = stack
					return reachUnknown
				}
			}
		}
	}
	s.stack = stack
	return reachNo
}

// window returns y's position in the numbering of the searches (see hbGraph), and false when x
// comes at or after it there, so that no path leads from x to y.
func (h *hbGraph) window(x, y int32) (int32, bool) {
	if !h.byPos {
		return h.topo[y], h.topo[x] < h.topo[y]
	}
	return y, x < y
}

// visitor returns the function that marks node v visited in s's current search, reporting
// whether it was not yet.
func (s *search) visitor() func(int32) bool {
	mark, epoch := s.mark, int32(s.epoch)
	return func(v int32) bool {
		if mark == nil {
			return s.probe(v)
		}
		if mark[v] == epoch {
			return false
		}
		mark[v] = epoch
		return true
	}
}

// deep is reach by a depth-first search that takes the successors of a node one at a time and
// looks at all of a node's successors for y before it goes further. It visits at most budget
// nodes besides x (a visit looks at a node's successors) and answers exactly when it answers yes
// or no. reach counts every successor it puts on its stack, and so gives up at the first node
// with more successors than its budget: a nop that every op of the next step waits for, on the
// path from an op to one several steps later, where deep goes through to the next such nop.
func (h *hbGraph) deep(s *search, x, y event, budget int) reachResult {
	nx, ny := h.node(x), h.node(y)
	if nx == ny {
		return reachYes
	}
	ty, ok := h.window(nx, ny)
	if !ok {
		return reachNo
	}
	topo, byPos := h.topo, h.byPos
	s.begin(budget)
	visit := s.visitor()
	// The stack holds each node and the index of the next of its successors to take, -1 before
	// its visit. A node is put on it just before its visit: at most budget+2 are ever marked.
	stack := append(s.stack[:0], nx, -1)
	visit(nx)
	visited := 0
	for len(stack) > 0 {
		v, i := stack[len(stack)-2], stack[len(stack)-1]
		succ := h.succs(v)
		if i < 0 {
			if visited++; visited > budget+1 {
				s.stack = stack[:0]
				return reachUnknown
			}
			if slices.Contains(succ, ny) {
				s.stack = stack[:0]
				return reachYes
			}
			i = 0
		}
		next := int32(-1)
		for ; int(i) < len(succ); i++ {
			w := succ[i]
			tw := w
			if !byPos {
				tw = topo[w]
			}
			if tw < ty && visit(w) {
				next = w
				i++
				break
			}
		}
		if next < 0 {
			stack = stack[:len(stack)-2]
			continue
		}
		stack[len(stack)-1] = i
		stack = append(stack, next, -1)
	}
	s.stack = stack
	return reachNo
}

// batchBudget and deepBudget bound the searches resolveBatch tries before its bitset passes,
// reach and then deep; minBatchPart is the fewest questions worth a goroutine of those searches.
// batchPoll is how many of the first searches a goroutine makes between two looks at the
// context: a millisecond or so.
const (
	batchBudget  = 64
	deepBudget   = 1024
	minBatchPart = 256
	batchPoll    = 1 << 12
)

// hbQuery is a deferred reachability question: does event x happen before or at event y?
type hbQuery struct {
	x, y event
	ans  bool
}

// resolveBatch answers queries exactly by propagating bitsets of sources in topological order,
// 64 sources per pass, each pass restricted to the window of topological indices its queries span.
// Taking the queries in order of their sources keeps the windows of one pass close together; qs
// itself keeps its order.
//
// free, if it holds a word per node, is scratch for the searches. Stopped (ctx), it returns
// early, the questions it has not reached unanswered.
func (h *hbGraph) resolveBatch(ctx context.Context, qs []hbQuery, free []int32) {
	if len(qs) == 0 {
		return
	}
	h.renumber()
	// A longer bounded search first: most of these questions hold through a path a few hundred
	// events long, far shorter than the windows of the passes below. The searches run on all
	// CPUs, in parts of the questions, each part marking the nodes it visits in its own share of
	// free if there is room, else in its small hash table; the questions left are kept in order.
	parts := h.opt.workerCount(len(qs), minBatchPart)
	left := make([][]int32, parts)
	forParts(parts, len(qs), func(p, lo, hi int) {
		var s search
		if len(free) >= (p+1)*h.n {
			s.mark = free[p*h.n : (p+1)*h.n]
			clear(s.mark)
		}
		poll := stop.Every(ctx, batchPoll)
		for i := lo; i < hi; i++ {
			if poll.Step() != nil {
				return
			}
			q := &qs[i]
			switch h.reach(&s, q.x, q.y, batchBudget) {
			case reachYes:
				q.ans = true
			case reachNo:
				q.ans = false
			default:
				left[p] = append(left[p], int32(i))
			}
		}
	})
	idx := slices.Concat(left...)
	left = nil
	if len(idx) == 0 {
		return
	}
	// Then a search that goes deeper (deep), for the questions whose path is long but through
	// nodes with many successors, like a rank's path from one step to a later one.
	parts = h.opt.workerCount(len(idx), minBatchPart)
	left = make([][]int32, parts)
	forParts(parts, len(idx), func(p, lo, hi int) {
		var s search
		if len(free) >= (p+1)*h.n {
			s.mark = free[p*h.n : (p+1)*h.n]
			clear(s.mark)
		}
		poll := stop.Every(ctx, batchPoll/16) // deep visits up to 16 times more
		for _, i := range idx[lo:hi] {
			if poll.Step() != nil {
				return
			}
			q := &qs[i]
			switch h.deep(&s, q.x, q.y, deepBudget) {
			case reachYes:
				q.ans = true
			case reachNo:
				q.ans = false
			default:
				left[p] = append(left[p], i)
			}
		}
	})
	idx = slices.Concat(left...)
	left = nil
	if len(idx) == 0 {
		return
	}
	sort.Slice(idx, func(i, j int) bool { return h.topo[qs[idx[i]].x] < h.topo[qs[idx[j]].x] })
	bits := make([]uint64, h.n)
	for lo := 0; lo < len(idx); lo += 64 {
		if stop.Cause(ctx) != nil { // each pass sweeps a window of the graph: as long as the plan
			return
		}
		block := idx[lo:min(lo+64, len(idx))]
		first, last := int32(h.n), int32(0)
		for j, qi := range block {
			q := &qs[qi]
			bits[h.topo[q.x]] |= 1 << uint(j)
			first = min(first, h.topo[q.x])
			last = max(last, h.topo[q.y])
		}
		for i := first; i <= last; i++ {
			b := bits[i]
			if b == 0 {
				continue
			}
			for _, w := range h.succs(i) {
				if w <= last {
					bits[w] |= b
				}
			}
		}
		for j, qi := range block {
			q := &qs[qi]
			q.ans = q.x == q.y || bits[h.topo[q.y]]&(1<<uint(j)) != 0
		}
		if first <= last {
			clear(bits[first : last+1])
		}
	}
}

// forward marks every event reachable from the given events (themselves included), by node:
// event e is marked when seen[node(e)].
func (h *hbGraph) forward(from ...event) []bool {
	seen := make([]bool, h.n)
	stack := make([]int32, 0, 64)
	for _, e := range from {
		if p := h.node(e); !seen[p] {
			seen[p] = true
			stack = append(stack, p)
		}
	}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, w := range h.succs(v) {
			if !seen[w] {
				seen[w] = true
				stack = append(stack, w)
			}
		}
	}
	return seen
}
