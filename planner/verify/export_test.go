package verify

import "github.com/coredag/coredag/ir"

// Hooks for the tests of package verify_test, which build random Graphs with internal/randgraph
// (it imports planner, so those tests cannot live in this package).

// HBEvents is the number of happens-before events of g (start, landing and end of every op, see
// hb.go), or 0 when its happens-before graph has a cycle.
func HBEvents(g *ir.Graph) int {
	h := newHB(g, true)
	if !h.acyclic {
		return 0
	}
	return h.n
}

// HBReach answers, for each pair of events, whether the first happens before or at the second:
// fast with the oracle the race check uses for long paths, plain with a search from each first
// event.
func HBReach(g *ir.Graph, pairs [][2]int32) (fast, plain []bool) {
	h := newHB(g, true)
	qs := make([]hbQuery, len(pairs))
	for i, p := range pairs {
		qs[i] = hbQuery{x: event(p[0]), y: event(p[1])}
	}
	ans := h.resolve(len(qs), func(i int) hbQuery { return qs[i] })
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
	h := newHB(g, true)
	return [2][]int32{h.drained(false, make([]int32, h.n)), h.drained(true, make([]int32, h.n))}
}
