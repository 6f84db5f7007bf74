package verify

import (
	"context"
	"slices"
	"sort"

	"github.com/coredag/coredag/internal/minheap"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// The search for the `after` edges that fix races. A race between accesses a and b is fixed by
// an edge `y after x` on some rank when a ends before x does and y starts before b: the path
// a -> end(x) -> start(y) -> b orders them. x and y need not be the racing ops: in a ring whose
// receiver returns a credit before it has read the slot, the fix is `credit after read`, on the
// reader's rank, which the writer already waits for through the credit's message. The search
// ranks such edges by how short that path is (candidates), the edge tightest around the two
// accesses first (it restrains the plan least), adds each on every rank that has its two ops
// (everywhere), and takes the first that closes no cycle once the edges chosen before it are
// added: an edge that orders a race on every rank of a ring may close a loop around the ring
// that none of its copies closes alone. What it chooses is then proven by the real passes
// (proveFixes): the plan with the edges added has no cycle and no deadlock, and the races are
// gone.

// fixGraph is the happens-before graph of a plan (hb.go) with the edges the search has added,
// searched both ways.
type fixGraph struct {
	g                    *ir.Graph
	n                    int
	succStart, succ      []int32
	predStart, pred      []int32
	added                []Fix     // the edges added, end(After) -> start(Op)
	xsucc, xpred         [][]int32 // the added edges, by event
	touched              []int32   // the events with added edges
	markF, markB, markR  []uint32
	epochF, epochB, epR  uint32
	distF, distB         []int32
	queueF, queueB, stck []int32
	visits, budget       int // events visited, and how many the search may visit
	// poll counts the visits and looks at the context of the search every fixPoll of them
	// (spent); looked is the visits it has counted.
	poll   stop.Poll
	looked int

	byName map[string][]ir.OpID // the ops of each name, on every rank that has one

	// topo is a topological order of the graph with the added edges (the position of each
	// event) and order its inverse, kept up to date as edges are added (Pearce and Kelly's
	// algorithm: only the events between the new edge's ends move); taking edges out leaves a
	// topological order one. deltaF and deltaB are the scratch of the update.
	topo, order    []int32
	deltaF, deltaB []int32
	pos            []int32
}

// defaultFixBudget is how many events the search for fixes may visit when Options.FixBudget is
// zero: about a second of searching. The ring allreduce without its ordering on the receive
// buffer, a race on every rank at every step, is explained within it up to 256 ranks (330k
// ops, about a second of CPU); at 1024 ranks its graph alone is over the budget.
const defaultFixBudget = 1 << 27

// fixBudget is the budget of the search for fixes under o.
func (o *Options) fixBudget() int {
	if o != nil && o.FixBudget != 0 {
		return o.FixBudget
	}
	return defaultFixBudget
}

// newFixGraph builds g's happens-before graph under the ordering ord for the search, within
// opt's budget (opt may be nil: the default), or returns nil when that alone would spend it.
// The search stops once ctx is cancelled (spent).
func newFixGraph(ctx context.Context, g *ir.Graph, ord ir.Order, opt *Options) *fixGraph {
	n := 3 * len(g.Ops)
	budget := opt.fixBudget()
	if 64*n > budget { // the search would not get far, and its arrays would be large
		return nil
	}
	s := &fixGraph{g: g, n: n, budget: budget, visits: 2 * n, poll: stop.Every(ctx, fixPoll),
		xsucc: make([][]int32, n), xpred: make([][]int32, n)}
	s.succStart, s.succ = csr(g, ord, n, false)
	s.predStart, s.pred = csr(g, ord, n, true)
	s.markF, s.markB, s.markR = make([]uint32, n), make([]uint32, n), make([]uint32, n)
	if !s.sort() {
		return nil // a cycle: Verify's first steps report it
	}
	s.distF, s.distB = make([]int32, n), make([]int32, n)
	s.byName = map[string][]ir.OpID{}
	for id := range g.Ops {
		name := g.Ops[id].Name
		s.byName[name] = append(s.byName[name], ir.OpID(id))
	}
	return s
}

// everywhere is fix f on every rank that has ops of both its names: the plan is one text for
// all ranks, and an `after` written in it applies wherever its ops exist.
func (s *fixGraph) everywhere(f Fix) []Fix {
	op, after := s.g.Ops[f.Op].Name, s.g.Ops[f.After].Name
	afters := s.byName[after]
	var out []Fix
	for _, y := range s.byName[op] {
		r := s.g.Ops[y].Rank
		k := sort.Search(len(afters), func(i int) bool { return s.g.Ops[afters[i]].Rank >= r })
		if k < len(afters) && s.g.Ops[afters[k]].Rank == r {
			out = append(out, Fix{Rank: int(r), Op: y, After: afters[k]})
		}
	}
	return out
}

// acyclicWith adds the edges of set and reports whether the graph stays acyclic; if not, it
// takes them out again.
func (s *fixGraph) acyclicWith(set []Fix) bool {
	n := len(s.added)
	for _, f := range set {
		if !s.add(f) {
			s.setAdded(s.added[:n:n])
			return false
		}
	}
	return true
}

// sort computes topo and order, reporting false when the graph has a cycle. It is Kahn's
// algorithm taking first the ready event earliest in its rank's program (the events of the
// ranks' first ops, then of their second ops, ...), which keeps every rank's ops in the order
// of the plan where it can: the edges a fix adds mostly agree with that order, and then move
// no event (add).
func (s *fixGraph) sort() bool {
	indeg := make([]int32, s.n)
	for _, w := range s.succ {
		indeg[w]++
	}
	// A heap entry is the event's place in its rank's program, then the event.
	entry := func(v int32) uint64 {
		op := event(v).op()
		local := int64(op-s.g.Rank[s.g.Ops[op].Rank].FirstOp)*3 + int64(event(v).phase())
		return uint64(local)<<32 | uint64(v)
	}
	order := make([]int32, 0, s.n)
	ready := minheap.NewOrdered[uint64]()
	for v := range int32(s.n) {
		if indeg[v] == 0 {
			ready.Push(entry(v))
		}
	}
	for ready.Len() > 0 {
		v := int32(uint32(ready.Pop()))
		order = append(order, v)
		for _, w := range s.succ[s.succStart[v]:s.succStart[v+1]] {
			if indeg[w]--; indeg[w] == 0 {
				ready.Push(entry(w))
			}
		}
	}
	s.visits += s.n
	if len(order) < s.n {
		return false
	}
	for i, v := range order {
		indeg[v] = int32(i)
	}
	s.topo, s.order = indeg, order
	return true
}

// csr lists the edges of g's happens-before graph under ord by their source (or, backward, by
// their target), each with its other end, in two passes over them.
func csr(g *ir.Graph, ord ir.Order, n int, backward bool) (start, list []int32) {
	start = make([]int32, n+1)
	hbEdges(g, true, ord, func(a, b event) {
		if backward {
			a = b
		}
		start[a+1]++
	})
	for i := 0; i < n; i++ {
		start[i+1] += start[i]
	}
	list = make([]int32, start[n])
	at := slices.Clone(start[:n])
	hbEdges(g, true, ord, func(a, b event) {
		if backward {
			a, b = b, a
		}
		list[at[a]] = int32(b)
		at[a]++
	})
	return start, list
}

// spent reports whether the search has used its budget, or was stopped (its context, looked at
// every fixPoll visits): either way it goes no further.
func (s *fixGraph) spent() bool {
	stopped := s.poll.Add(s.visits-s.looked) != nil
	s.looked = s.visits
	return stopped || s.visits > s.budget
}

// fixPoll is how many events the search for fixes visits between two looks at the context:
// well under a millisecond.
const fixPoll = 1 << 16

// add adds `f.Op after f.After` and updates the topological order, unless the edge closes a
// cycle: it then reports false and adds nothing.
func (s *fixGraph) add(f Fix) bool {
	x, y := int32(endOf(f.After)), int32(startOf(f.Op))
	if lb, ub := s.topo[y], s.topo[x]; lb < ub {
		// Pearce-Kelly: the events after y up to x's position, and those before x down to
		// y's, are the only ones out of order; the former must come after the latter.
		s.deltaF = s.deltaF[:0]
		if !s.collect(y, ub, true, x) {
			return false
		}
		s.deltaB = s.deltaB[:0]
		s.collect(x, lb, false, -1)
		s.reorder()
	}
	s.added = append(s.added, f)
	if len(s.xsucc[x]) == 0 && len(s.xpred[x]) == 0 {
		s.touched = append(s.touched, x)
	}
	if len(s.xsucc[y]) == 0 && len(s.xpred[y]) == 0 {
		s.touched = append(s.touched, y)
	}
	s.xsucc[x] = append(s.xsucc[x], y)
	s.xpred[y] = append(s.xpred[y], x)
	return true
}

// collect gathers into deltaF (forward) or deltaB the events reachable from v (or reaching it)
// whose position is at most (at least) bound; forward, it reports false if it meets stop.
func (s *fixGraph) collect(v, bound int32, forward bool, stop int32) bool {
	s.epR++
	mark, ep := s.markR, s.epR
	mark[v] = ep
	stack := append(s.stck[:0], v)
	out := &s.deltaB
	if forward {
		out = &s.deltaF
	}
	*out = append(*out, v)
	defer func() { s.stck = stack[:0] }()
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		s.visits++
		lists := [2][]int32{s.pred[s.predStart[v]:s.predStart[v+1]], s.xpred[v]}
		if forward {
			lists = [2][]int32{s.succ[s.succStart[v]:s.succStart[v+1]], s.xsucc[v]}
		}
		for _, l := range lists {
			for _, w := range l {
				if w == stop {
					return false
				}
				if mark[w] == ep || forward && s.topo[w] > bound || !forward && s.topo[w] < bound {
					continue
				}
				mark[w] = ep
				*out = append(*out, w)
				stack = append(stack, w)
			}
		}
	}
	return true
}

// reorder gives the positions of deltaB and deltaF, pooled in order, to deltaB's events then
// deltaF's, each kept in its order.
func (s *fixGraph) reorder() {
	byTopo := func(a, b int32) int { return int(s.topo[a]) - int(s.topo[b]) }
	slices.SortFunc(s.deltaB, byTopo)
	slices.SortFunc(s.deltaF, byTopo)
	pos := s.pos[:0]
	for _, v := range s.deltaB {
		pos = append(pos, s.topo[v])
	}
	for _, v := range s.deltaF {
		pos = append(pos, s.topo[v])
	}
	slices.Sort(pos)
	for i, v := range s.deltaB {
		s.topo[v] = pos[i]
		s.order[pos[i]] = v
	}
	for i, v := range s.deltaF {
		k := pos[len(s.deltaB)+i]
		s.topo[v] = k
		s.order[k] = v
	}
	s.pos = pos
}

// remove takes the edges of set, the last ones added, out: the topological order stays one.
func (s *fixGraph) remove(set []Fix) {
	for _, f := range set {
		x, y := int32(endOf(f.After)), int32(startOf(f.Op))
		s.xsucc[x] = deleteOne(s.xsucc[x], y)
		s.xpred[y] = deleteOne(s.xpred[y], x)
	}
}

// deleteOne deletes one v from list.
func deleteOne(list []int32, v int32) []int32 {
	if i := slices.Index(list, v); i >= 0 {
		return slices.Delete(list, i, i+1)
	}
	return list
}

// restore puts the edges of set, taken out by remove, back: the order is still one for them.
func (s *fixGraph) restore(set []Fix) {
	for _, f := range set {
		x, y := int32(endOf(f.After)), int32(startOf(f.Op))
		s.xsucc[x] = append(s.xsucc[x], y)
		s.xpred[y] = append(s.xpred[y], x)
	}
}

// setAdded replaces the added edges with fixes, which must be some of them: the topological
// order stays one.
func (s *fixGraph) setAdded(fixes []Fix) {
	fixes = slices.Clone(fixes)
	s.added = nil
	for _, v := range s.touched {
		s.xsucc[v], s.xpred[v] = s.xsucc[v][:0], s.xpred[v][:0]
	}
	s.touched = s.touched[:0]
	for _, f := range fixes {
		if !s.add(f) {
			panic("verify: a subset of the fixes closes a cycle")
		}
	}
}

// reaches reports whether event from happens before event to (or is it).
func (s *fixGraph) reaches(from, to event) bool {
	if from == to {
		return true
	}
	limit := s.topo[to]
	if s.topo[from] >= limit {
		return false
	}
	s.epR++
	mark, ep := s.markR, s.epR
	stack := append(s.stck[:0], int32(from))
	mark[from] = ep
	defer func() { s.stck = stack[:0] }()
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		s.visits++
		for _, list := range [2][]int32{s.succ[s.succStart[v]:s.succStart[v+1]], s.xsucc[v]} {
			for _, w := range list {
				if w == int32(to) {
					return true
				}
				if mark[w] != ep && s.topo[w] < limit {
					mark[w] = ep
					stack = append(stack, w)
				}
			}
		}
	}
	return false
}

// bfs numbers the events reachable from e (forward) or that reach it (backward) by their
// distance in edges, and returns them in order of distance: the limit nearest ones, or all
// when limit is 0.
func (s *fixGraph) bfs(e event, forward bool, limit int) []int32 {
	mark, dist, queue := s.markF, s.distF, s.queueF[:0]
	start, list, extra := s.succStart, s.succ, s.xsucc
	if forward {
		s.epochF++
	} else {
		s.epochB++
		mark, dist, queue = s.markB, s.distB, s.queueB[:0]
		start, list, extra = s.predStart, s.pred, s.xpred
	}
	ep := s.epochF
	if !forward {
		ep = s.epochB
	}
	mark[e], dist[e] = ep, 0
	queue = append(queue, int32(e))
	for i := 0; i < len(queue) && (limit == 0 || len(queue) < limit); i++ {
		v := queue[i]
		s.visits++
		for _, l := range [2][]int32{list[start[v]:start[v+1]], extra[v]} {
			for _, w := range l {
				if mark[w] != ep {
					mark[w], dist[w] = ep, dist[v]+1
					queue = append(queue, w)
				}
			}
		}
	}
	if forward {
		s.queueF = queue
	} else {
		s.queueB = queue
	}
	return queue
}

// ordered reports whether the accesses of race r are ordered, one before the other.
func (s *fixGraph) ordered(r Race) bool {
	return s.reaches(r.First.to, r.Second.from) || s.reaches(r.Second.to, r.First.from)
}

// candidate is an edge that would order two accesses, and the length of the path it makes.
type candidate struct {
	fix  Fix
	cost int32
}

// maxEnds is how many ops of a rank the search considers at either end of an edge: those
// closest to the access they follow or precede.
const maxEnds = 2

// maxTries is how many candidates of a race the search tries for a cycle before giving up on it.
const maxTries = 12

// candidates lists the edges `y after x` that would order access a before access b, cheapest
// first: x an op whose end follows a, y one whose start precedes b, both of one rank. The cost
// of an edge is the length of the path it makes, in happens-before edges, the part from a to
// x counting four times: the fix waits for the op that ends the first access if it can (the
// read of a slot, before the credit that lets the writer overwrite it, is sent), and then for
// as little else as it can.
func (s *fixGraph) candidates(a, b MemAccess, limit int) []candidate {
	fwd := s.bfs(a.to, true, limit)
	xs := map[int][]ir.OpID{}
	for _, v := range fwd {
		if e := event(v); e.phase() == evEnd {
			r := int(s.g.Ops[e.op()].Rank)
			if len(xs[r]) < maxEnds {
				xs[r] = append(xs[r], e.op())
			}
		}
	}
	bwd := s.bfs(b.from, false, limit)
	var out []candidate
	ys := map[int][]ir.OpID{}
	for _, v := range bwd {
		if e := event(v); e.phase() == evStart {
			r := int(s.g.Ops[e.op()].Rank)
			if len(ys[r]) < maxEnds {
				ys[r] = append(ys[r], e.op())
			}
		}
	}
	for r, xl := range xs {
		for _, x := range xl {
			for _, y := range ys[r] {
				if x == y {
					continue
				}
				out = append(out, candidate{Fix{Rank: r, Op: y, After: x}, 4*s.distF[endOf(x)] + s.distB[startOf(y)]})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		p, q := out[i], out[j]
		if p.cost != q.cost {
			return p.cost < q.cost
		}
		if p.fix.Rank != q.fix.Rank {
			return p.fix.Rank < q.fix.Rank
		}
		if p.fix.After != q.fix.After {
			return p.fix.After < q.fix.After
		}
		return p.fix.Op < q.fix.Op
	})
	return out
}

// firstAccess orders the two accesses of race r as the plan most likely means them: between two
// ops of one rank, the one declared first goes first; between ops of two ranks, the one earlier
// in its rank's program (the step of a loop, say), then the one that can start earlier.
func firstAccess(g *ir.Graph, r Race) (a, b MemAccess) {
	a, b = r.First, r.Second
	ra, rb := g.Ops[a.Op].Rank, g.Ops[b.Op].Rank
	la, lb := a.Op-g.Rank[ra].FirstOp, b.Op-g.Rank[rb].FirstOp
	if ra == rb && b.Op < a.Op || ra != rb && lb < la {
		a, b = b, a
	}
	return a, b
}

// pick finds the cheapest edge that orders race r and, added on every rank where its ops exist
// (everywhere), closes no cycle with the edges added so far; it adds it there. It tries the
// direction the plan most likely means first (firstAccess), then the other.
func (s *fixGraph) pick(r Race) ([]Fix, bool) {
	a, b := firstAccess(s.g, r)
	for _, dir := range [2][2]MemAccess{{a, b}, {b, a}} {
		// The events near the accesses first: the edges the search prefers join ops close to
		// them, and a ring's race should not cost a walk around the ring.
		for _, limit := range []int{nearEvents, 0} {
			for i, c := range s.candidates(dir[0], dir[1], limit) {
				if i == maxTries || s.spent() {
					break
				}
				if s.reaches(startOf(c.fix.Op), endOf(c.fix.After)) {
					continue
				}
				if set := s.everywhere(c.fix); s.acyclicWith(set) {
					return set, true
				}
			}
			if s.spent() || len(s.queueF) < nearEvents && len(s.queueB) < nearEvents {
				break // the first search saw every event there is
			}
		}
	}
	return s.pickPair(r)
}

// maxPairFirsts is how many first edges the search of pairs tries for one race.
const maxPairFirsts = 8

// pickPair finds two edges that together order race r when no single one does: a token sent
// after neither the write nor waited for by the read takes `tok after w` on the writer's rank
// and `use after got` on the reader's. The first edge, `y after x`, has x an op whose end
// follows the first access (as pick's) and y an op of x's rank that does not follow it yet,
// the ops that reach other ranks (sends, writes, reads, atomics) first, each in the order of
// the plan after x; with it in place everywhere, the second is the single edge pick would
// choose. The pair is added everywhere, as single edges are, and proven with them.
func (s *fixGraph) pickPair(r Race) ([]Fix, bool) {
	a, b := firstAccess(s.g, r)
	n := len(s.added)
	tried := 0
	for _, dir := range [2][2]MemAccess{{a, b}, {b, a}} {
		for _, first := range s.firsts(dir[0]) {
			if tried == maxPairFirsts || s.spent() {
				return nil, false
			}
			tried++
			set1 := s.everywhere(first)
			if !s.acyclicWith(set1) {
				continue
			}
			for i, c := range s.candidates(dir[0], dir[1], nearEvents) {
				if i == maxTries || s.spent() {
					break
				}
				if s.reaches(startOf(c.fix.Op), endOf(c.fix.After)) {
					continue
				}
				if set2 := s.everywhere(c.fix); s.acyclicWith(set2) {
					if s.ordered(r) {
						return append(set1, set2...), true
					}
					s.setAdded(s.added[: n+len(set1) : n+len(set1)])
				}
			}
			s.setAdded(s.added[:n:n])
		}
	}
	return nil, false
}

// firsts lists the first edges pickPair tries for access a: `y after x` with x among the ops
// whose end follows a nearest (as candidates takes them) and y an op of x's rank that neither
// follows x already nor precedes it, the ops that reach another rank first, then the nearest
// after x in the plan.
func (s *fixGraph) firsts(a MemAccess) []Fix {
	g := s.g
	var xs []ir.OpID
	perRank := map[int32]int{}
	for _, v := range s.bfs(a.to, true, nearEvents) {
		if e := event(v); e.phase() == evEnd {
			r := int32(g.Ops[e.op()].Rank)
			if perRank[r] < maxEnds {
				perRank[r]++
				xs = append(xs, e.op())
			}
		}
	}
	remote := func(k ir.OpKind) bool {
		return k == ir.OpSend || k == ir.OpWrite || k == ir.OpRead || k.IsAtomic()
	}
	var out []Fix
	for _, x := range xs {
		if len(out) >= maxPairFirsts { // pickPair tries no more
			break
		}
		span := g.Rank[g.Ops[x].Rank]
		var ys []ir.OpID
		for y := span.FirstOp; y < span.EndOp; y++ {
			if s.spent() { // the reach tests count against the search's budget
				return out
			}
			if y == x || s.reaches(endOf(x), startOf(y)) || s.reaches(startOf(y), endOf(x)) {
				continue
			}
			ys = append(ys, y)
		}
		dist := func(y ir.OpID) int64 { // after x in the plan first, nearest first
			d := int64(y) - int64(x)
			if d < 0 {
				d = int64(span.EndOp-span.FirstOp) - d
			}
			return d
		}
		slices.SortStableFunc(ys, func(p, q ir.OpID) int {
			if rp, rq := remote(g.Ops[p].Kind), remote(g.Ops[q].Kind); rp != rq {
				if rp {
					return -1
				}
				return 1
			}
			return int(dist(p) - dist(q))
		})
		for _, y := range ys[:min(len(ys), maxEnds)] {
			out = append(out, Fix{Rank: int(g.Ops[x].Rank), Op: y, After: x})
		}
	}
	return out
}

// nearEvents is how many events around each access the search looks at first.
const nearEvents = 1 << 12

// fixRaces chooses edges that order the races, each race's pick made with the edges of the
// races before it in place, then drops the edges the others imply. It returns the edges and, for
// each race, whether they order it. The graph keeps the chosen edges.
func (s *fixGraph) fixRaces(races []Race) ([]Fix, []bool) {
	var sets [][]Fix
	var pickers []Race // the race each set was chosen for
	for _, r := range races {
		if s.spent() {
			break
		}
		if s.ordered(r) {
			continue
		}
		if set, ok := s.pick(r); ok {
			sets = append(sets, set)
			pickers = append(pickers, r)
		}
	}
	fixed := make([]bool, len(races))
	for i, r := range races {
		fixed[i] = !s.spent() && s.ordered(r)
	}
	// Drop the sets the others imply, the last first (rx[1] after rx[0] next to rx[1] after
	// red[0], red[0] being after rx[0]): a set goes if the races the others were chosen for stay
	// ordered without it, and in the end every race fixed must stay so. s.added is updated
	// at the end; meanwhile only the event lists change.
	base := slices.Clone(s.added[:len(s.added)-total(sets)])
	keep := make([]bool, len(sets))
	for i := len(sets) - 1; i >= 0; i-- {
		keep[i] = true
		if s.spent() {
			continue
		}
		s.remove(sets[i])
		keep[i] = false
		for _, r := range pickers {
			if !s.ordered(r) {
				keep[i] = true
				break
			}
		}
		if keep[i] {
			s.restore(sets[i])
		}
	}
	var kept [][]Fix
	for i, set := range sets {
		if keep[i] {
			kept = append(kept, set)
		}
	}
	s.setAdded(append(slices.Clone(base), slices.Concat(kept...)...))
	for i, r := range races {
		if fixed[i] && !s.ordered(r) {
			s.setAdded(append(base, slices.Concat(sets...)...))
			return slices.Concat(sets...), fixed
		}
	}
	sets = kept
	return slices.Concat(sets...), fixed
}

// total is how many fixes the sets hold.
func total(sets [][]Fix) int {
	n := 0
	for _, set := range sets {
		n += len(set)
	}
	return n
}

// fixGroup finds the edges that fix races, the races of one diagnostic, and proves them
// (proveFixes). The race pass reports a race on every piece of memory that has one, not every
// racing pair: once the reported ones are fixed, others of the same pair of op statements and
// buffer may show (a rank's several children reducing into what it sends), and they are fixed
// too, for a few rounds. It returns the proven edges and the races they leave; no edges when
// none could be proven.
func (s *fixGraph) fixGroup(ctx context.Context, races []Race, ord ir.Order, opt *Options) (fixes []Fix, open []Race) {
	g := s.g
	want := raceKind(g, races[0])
	claimed := slices.Clone(races)
	seen := map[raceKey]bool{}
	for _, r := range races {
		seen[keyOf(r)] = true
	}
	var best []Fix
	var bestOpen []Race
	for round := 0; round < 4; round++ {
		s.setAdded(nil)
		fixes, fixed := s.fixRaces(claimed)
		if s.spent() {
			return nil, claimed
		}
		var done []Race
		open = open[:0:0]
		for k, r := range claimed {
			if fixed[k] {
				done = append(done, r)
			} else {
				open = append(open, r)
			}
		}
		if len(fixes) == 0 {
			return best, claimed
		}
		s.visits += 16 * s.n // the passes run again on the plan
		left, proven := proveFixes(ctx, g, fixes, done, ord, opt)
		if !proven {
			return best, bestOpen
		}
		best, bestOpen = fixes, open
		var more []Race
		for _, r := range left {
			if k := keyOf(r); !seen[k] && raceKind(g, r) == want {
				seen[k] = true
				more = append(more, r)
			}
		}
		if len(more) == 0 {
			return fixes, open
		}
		claimed = append(claimed, more...)
	}
	return best, bestOpen
}
