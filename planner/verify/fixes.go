package verify

import (
	"slices"
	"sort"

	"github.com/coredag/coredag/ir"
)

// The search for the `after` edges that fix races. A race between accesses a and b is fixed by
// an edge `y after x` on some rank when a ends before x does and y starts before b: the path
// a -> end(x) -> start(y) -> b orders them. x and y need not be the racing ops: in a ring whose
// receiver returns a credit before it has read the slot, the fix is `credit after read`, on the
// reader's rank, which the writer already waits for through the credit's message. The search
// ranks such edges by how short that path is, the edge tightest around the two accesses first
// (it restrains the plan least), and takes the first that closes no cycle once the edges
// chosen before it are added: an edge that orders a race on every rank of a ring may close a
// loop around the ring that none of its copies closes alone. What it chooses is then proven
// by the real passes (provenFix): the plan with the edges added has no cycle and no deadlock,
// and the races are gone.

// fixGraph is the happens-before graph of a plan (hb.go) with the edges the search has added,
// searched both ways.
type fixGraph struct {
	g                    *ir.Graph
	n                    int
	succStart, succ      []int32
	predStart, pred      []int32
	added                []Fix // the edges added, end(After) -> start(Op)
	xsucc, xpred         map[int32][]int32
	markF, markB, markR  []uint32
	epochF, epochB, epR  uint32
	distF, distB         []int32
	queueF, queueB, stck []int32
	visits, budget       int // events visited, and how many the search may visit

	byName map[string][]ir.OpID // the ops of each name, on every rank that has one
}

// defaultFixBudget is how many events the search for fixes may visit when Options.FixBudget is
// zero: about a second of searching, enough for every race of the examples and plans of a few
// thousand ops.
const defaultFixBudget = 1 << 27

// fixBudget is the budget of the search for fixes under o.
func (o *Options) fixBudget() int {
	if o != nil && o.FixBudget != 0 {
		return o.FixBudget
	}
	return defaultFixBudget
}

// newFixGraph builds g's happens-before graph under the ordering ord for the search, or returns
// nil when that alone would spend the budget.
func newFixGraph(g *ir.Graph, ord ir.Order, budget int) *fixGraph {
	n := 3 * len(g.Ops)
	if 8*n > budget {
		return nil
	}
	s := &fixGraph{g: g, n: n, budget: budget, visits: 2 * n,
		xsucc: map[int32][]int32{}, xpred: map[int32][]int32{}}
	var edges [][2]int32
	hbEdges(g, true, ord, func(a, b event) { edges = append(edges, [2]int32{int32(a), int32(b)}) })
	s.succStart, s.succ = csr(n, edges, 0)
	s.predStart, s.pred = csr(n, edges, 1)
	s.markF, s.markB, s.markR = make([]uint32, n), make([]uint32, n), make([]uint32, n)
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
// takes them out again. A new cycle goes through one of them, from its start to its end.
func (s *fixGraph) acyclicWith(set []Fix) bool {
	n := len(s.added)
	for _, f := range set {
		s.add(f)
	}
	for _, f := range set {
		if s.reaches(startOf(f.Op), endOf(f.After)) {
			s.setAdded(s.added[:n:n])
			return false
		}
	}
	return true
}

// csr lists the edges by their end k (0: from, 1: to), each with the other end.
func csr(n int, edges [][2]int32, k int) (start, list []int32) {
	start = make([]int32, n+1)
	for _, e := range edges {
		start[e[k]+1]++
	}
	for i := 0; i < n; i++ {
		start[i+1] += start[i]
	}
	list = make([]int32, len(edges))
	at := slices.Clone(start[:n])
	for _, e := range edges {
		list[at[e[k]]] = e[1-k]
		at[e[k]]++
	}
	return start, list
}

// spent reports whether the search has used its budget.
func (s *fixGraph) spent() bool { return s.visits > s.budget }

// add adds `f.Op after f.After`.
func (s *fixGraph) add(f Fix) {
	s.added = append(s.added, f)
	a, b := int32(endOf(f.After)), int32(startOf(f.Op))
	s.xsucc[a] = append(s.xsucc[a], b)
	s.xpred[b] = append(s.xpred[b], a)
}

// setAdded replaces the added edges with fixes.
func (s *fixGraph) setAdded(fixes []Fix) {
	s.added = nil
	clear(s.xsucc)
	clear(s.xpred)
	for _, f := range fixes {
		s.add(f)
	}
}

// reaches reports whether event from happens before event to (or is it).
func (s *fixGraph) reaches(from, to event) bool {
	if from == to {
		return true
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
				if mark[w] != ep {
					mark[w] = ep
					stack = append(stack, w)
				}
			}
		}
	}
	return false
}

// bfs numbers the events reachable from e (forward) or that reach it (backward) by their
// distance in edges, and returns them in order of distance.
func (s *fixGraph) bfs(e event, forward bool) []int32 {
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
	for i := 0; i < len(queue); i++ {
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
func (s *fixGraph) candidates(a, b MemAccess) []candidate {
	fwd := s.bfs(a.to, true)
	xs := map[int][]ir.OpID{}
	for _, v := range fwd {
		if e := event(v); e.phase() == evEnd {
			r := int(s.g.Ops[e.op()].Rank)
			if len(xs[r]) < maxEnds {
				xs[r] = append(xs[r], e.op())
			}
		}
	}
	bwd := s.bfs(b.from, false)
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
		for i, c := range s.candidates(dir[0], dir[1]) {
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
	}
	return nil, false
}

// fixRaces chooses edges that order the races, each race's pick made with the edges of the
// races before it in place, then drops the edges the others imply. It returns the edges and, for
// each race, whether they order it. The graph keeps the chosen edges.
func (s *fixGraph) fixRaces(races []Race) ([]Fix, []bool) {
	var sets [][]Fix
	for _, r := range races {
		if s.spent() {
			break
		}
		if s.ordered(r) {
			continue
		}
		if set, ok := s.pick(r); ok {
			sets = append(sets, set)
		}
	}
	fixed := make([]bool, len(races))
	for i, r := range races {
		fixed[i] = !s.spent() && s.ordered(r)
	}
	// Drop the edges the others imply, the last first (rx[1] after rx[0] next to rx[1] after
	// red[0], red[0] being after rx[0]).
	base := slices.Clone(s.added[:len(s.added)-total(sets)])
	for i := len(sets) - 1; i >= 0 && !s.spent(); i-- {
		trial := slices.Delete(slices.Clone(sets), i, i+1)
		s.setAdded(append(slices.Clone(base), slices.Concat(trial...)...))
		still := true
		for k, r := range races {
			if fixed[k] && !s.ordered(r) {
				still = false
				break
			}
		}
		if still {
			sets = trial
		}
	}
	s.setAdded(append(base, slices.Concat(sets...)...))
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
func (s *fixGraph) fixGroup(races []Race, ord ir.Order, opt *Options) (fixes []Fix, open []Race) {
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
		left, proven := proveFixes(g, fixes, done, ord, opt)
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
