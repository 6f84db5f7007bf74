package verify

import (
	"context"

	"github.com/coredag/coredag/ir"
)

// Hooks for the tests of package verify_test, which build random Graphs with internal/randgraph
// (it imports planner, so those tests cannot live in this package).

// HBEvents is the number of happens-before events of g (start, landing and end of every op, see
// hb.go), or 0 when its happens-before graph has a cycle.
func HBEvents(g *ir.Graph) int {
	h := newHB(context.Background(), g, true, &Options{})
	if !h.acyclic {
		return 0
	}
	return h.n
}

// HBReach answers, for each pair of events, whether the first happens before or at the second:
// fast with the oracle the race check uses for long paths (its labels 32 bits wide when wide),
// plain with a search from each first event.
func HBReach(g *ir.Graph, pairs [][2]int32, wide bool) (fast, plain []bool) {
	return HBReachOrdered(g, ir.OrderNone, pairs, wide)
}

// HBReachOrdered is HBReach on g's happens-before graph with the edges of the ordering ord.
func HBReachOrdered(g *ir.Graph, ord ir.Order, pairs [][2]int32, wide bool) (fast, plain []bool) {
	// The oracle's work is split among goroutines in each of its steps, the labels 32 bits wide
	// or not: its answers must not change.
	opt := &Options{wideLabels: wide}
	if wide {
		opt.Workers = 3
	}
	h := newHBBeside(context.Background(), g, true, ord, opt, nil)
	qs := make([]hbQuery, len(pairs))
	for i, p := range pairs {
		qs[i] = hbQuery{x: event(p[0]), y: event(p[1])}
	}
	ans := h.resolve(context.Background(), len(qs), func(i int) hbQuery { return qs[i] }, nil)
	reached := map[int32][]bool{}
	for i, p := range pairs {
		fast = append(fast, ans[i])
		if reached[p[0]] == nil {
			reached[p[0]] = h.forward(event(p[0]))
		}
		plain = append(plain, reached[p[0]][h.node(event(p[1]))])
	}
	return fast, plain
}

// HBDrained returns the positions of g's events in its two drained orders (drain.go).
func HBDrained(g *ir.Graph) [2][]int32 {
	h := newHB(context.Background(), g, true, &Options{})
	ready := make([][]int32, g.Ranks)
	return [2][]int32{h.drained(context.Background(), false, make([]int32, h.n), ready), h.drained(context.Background(), true, make([]int32, h.n), ready)}
}

// RacesOn is Races with its work (the happens-before graph, the collection of the accesses,
// the sweep of the (rank, buffer) groups, the renumbering) split among the given number of
// workers.
func RacesOn(g *ir.Graph, workers int) []Race {
	h := newHB(context.Background(), g, true, &Options{Workers: workers})
	if !h.acyclic {
		return nil
	}
	return findRacesOn(context.Background(), g, h, workers, nil, nil)
}

// RacyBuffers lists, by brute force, the (rank, buffer) pairs of g with a race: two conflicting
// accesses to a common element, neither of whose intervals ends before the other's starts.
func RacyBuffers(g *ir.Graph) map[[2]int]bool {
	h := newHB(context.Background(), g, true, &Options{})
	var all []placedAccess
	for i := range g.Ops {
		all = accesses(g, ir.OpID(i), all)
	}
	after := make(map[event][]bool)
	before := func(x, y event) bool {
		if after[x] == nil {
			after[x] = h.forward(x)
		}
		return after[x][h.node(y)]
	}
	out := map[[2]int]bool{}
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			a, b := &all[i], &all[j]
			if a.op == b.op || a.rank != b.rank || a.buf != b.buf || !a.conflicts(&b.access) {
				continue
			}
			sa, sb := a.slice(g), b.slice(g)
			if sa.Off >= sb.Off+sb.Len || sb.Off >= sa.Off+sa.Len {
				continue
			}
			if !before(a.to, b.from) && !before(b.to, a.from) {
				out[[2]int{int(a.rank), int(a.buf)}] = true
			}
		}
	}
	return out
}

// EarlyDeadlocks returns what the first two checks (cycles of `after` edges, `after` against
// queue order) find in g, and whether g's happens-before graph is acyclic.
func EarlyDeadlocks(g *ir.Graph) (cycles, queueOrder int, acyclic bool) {
	return len(checkCycles(context.Background(), g)), len(checkQueueOrder(g)), newHB(context.Background(), g, true, &Options{}).acyclic
}

// HBBothWays builds g's happens-before graph with the edges of the ordering ord op by op, on
// the given number of workers, and from hbEdges, the list of all edges: each gives every event's
// successors in order, and the topological order (nil when cyclic). opByOp reports whether the
// first way was taken.
func HBBothWays(g *ir.Graph, matching bool, ord ir.Order, workers int) (lists, want [][]int32, topo, wantTopo []int32, opByOp bool) {
	opt := &Options{Workers: workers}
	h := newHBBeside(context.Background(), g, matching, ord, opt, nil)
	n := 3 * len(g.Ops)
	lists, want = make([][]int32, n), make([][]int32, n)
	for v := range n {
		lists[v] = append([]int32{}, h.succs(int32(v))...)
	}
	var succ []int32
	start := make([]int32, n+1)
	for v := range n {
		want[v] = []int32{}
	}
	hbEdges(g, matching, ord, func(a, b event) {
		want[a] = append(want[a], int32(b))
	})
	for v := range n {
		succ = append(succ, want[v]...)
		start[v+1] = int32(len(succ))
	}
	ref := &hbGraph{g: g, n: n, succStart: start, succ: succ, opt: opt}
	ref.sort(context.Background(), nil)
	return lists, want, h.topo, ref.topo, newOpEdges(g, matching, ord, make([]int32, 3*len(g.Ops)), opt) != nil
}

// HBDeep answers, for each pair of events, whether the first happens before or at the second
// with the search resolveBatch tries before its bitsets (deep, within budget visits), the nodes
// numbered by event or, when byPos, by topological position; and with a plain search. deep is
// 1 for yes, 0 for no and -1 when the search gave up; bounded is reach's answer within the same
// budget, likewise.
func HBDeep(g *ir.Graph, pairs [][2]int32, budget int, byPos bool) (deep, bounded []int, plain []bool) {
	h := newHB(context.Background(), g, true, &Options{})
	if byPos {
		h.renumber()
	}
	var s, r search
	code := map[reachResult]int{reachYes: 1, reachNo: 0, reachUnknown: -1}
	reached := map[int32][]bool{}
	for _, p := range pairs {
		x, y := event(p[0]), event(p[1])
		deep = append(deep, code[h.deep(&s, x, y, budget)])
		bounded = append(bounded, code[h.reach(&r, x, y, budget)])
		if reached[p[0]] == nil {
			reached[p[0]] = h.forward(x)
		}
		plain = append(plain, reached[p[0]][h.node(y)])
	}
	return deep, bounded, plain
}
