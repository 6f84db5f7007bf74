package verify

import (
	"context"
	"fmt"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// checkCycles reports every cycle of explicit `after` edges, once per distinct cycle of
// statements: an SPMD plan that has the cycle on several ranks gets one message naming them.
// Stopped (ctx), it returns what it found so far.
func checkCycles(ctx context.Context, g *ir.Graph) diag.List {
	n := len(g.Ops)
	succs := func(v int32) []int32 { return g.Succs(ir.OpID(v)) }
	comp, cyclic := sccs(n, succs)
	roots := cycleRoots(comp, cyclic)
	if len(roots) == 0 {
		return nil
	}
	pos := edgePositions(g)
	var groups diag.Group
	bfs := newCycleFinder(n)
	for _, root := range roots {
		if stop.Cause(ctx) != nil {
			break
		}
		cyc := bfs.shortest(root, comp, succs)
		// cyc[i] -> cyc[i+1]: cyc[i+1] is after cyc[i]. Start the listing at the edge written first.
		k := len(cyc)
		best := 0
		for i := 1; i < k; i++ {
			if pos[edgeKey(cyc[i], cyc[(i+1)%k])].Before(pos[edgeKey(cyc[best], cyc[(best+1)%k])]) {
				best = i
			}
		}
		cyc = append(cyc[best:], cyc[:best]...)
		steps := make([]step, k)
		for i := range steps {
			from, to := ir.OpID(cyc[i]), ir.OpID(cyc[(i+1)%k])
			steps[i] = step{fmt.Sprintf("%s after %s", g.Ops[to].Name, g.Ops[from].Name), pos[edgeKey(int32(from), int32(to))]}
		}
		d := diag.Errorf(diag.Cycle, steps[0].pos,
			"dependency cycle: %s; no op on a cycle can ever start (remove one of these `after` edges)", listSteps(steps))
		d.Related = relatedSteps(steps)
		groups.Add(d, "cycle", int(g.Ops[cyc[0]].Rank))
	}
	return groups.List(g.Ranks)
}

// step is one step of a loop (a cycle or a deadlock) told to a person, and where it is written.
type step struct {
	text string
	pos  diag.Pos
}

// Long loops are told by their first steps, a count of the elided ones, and the last step.
const keepSteps = 12

// listSteps joins the texts of a loop's steps, eliding the middle of very long ones.
func listSteps(steps []step) string {
	var texts []string
	for i, s := range steps {
		if len(steps) > keepSteps+2 && i == keepSteps {
			texts = append(texts, fmt.Sprintf("... %d more steps ...", len(steps)-keepSteps-1))
		}
		if len(steps) <= keepSteps+2 || i < keepSteps || i == len(steps)-1 {
			texts = append(texts, s.text)
		}
	}
	return strings.Join(texts, ", ")
}

// relatedSteps gives the positions of a loop's steps after the first (the diagnostic's own
// position), eliding the middle of very long loops as listSteps does.
func relatedSteps(steps []step) []diag.Related {
	var out []diag.Related
	for i, s := range steps {
		if i > 0 && (len(steps) <= keepSteps+2 || i < keepSteps || i == len(steps)-1) {
			out = append(out, diag.Related{Pos: s.pos, Label: s.text})
		}
	}
	return out
}

func edgeKey(from, to int32) uint64 { return uint64(uint32(from))<<32 | uint64(uint32(to)) }

// edgePositions maps each explicit edge to the position of the clause that made it.
// Only built on the error path.
func edgePositions(g *ir.Graph) map[uint64]diag.Pos {
	m := make(map[uint64]diag.Pos, len(g.Edges))
	for _, e := range g.Edges {
		k := edgeKey(int32(e.From), int32(e.To))
		if _, ok := m[k]; !ok {
			m[k] = e.Pos
		}
	}
	return m
}

// sccs labels the strongly connected components of a graph of n nodes (Tarjan's algorithm with
// an explicit stack, so deep graphs cannot overflow the goroutine stack). cyclic[c] reports whether
// component c holds a cycle: more than one node, or a node with an edge to itself.
func sccs(n int, succs func(int32) []int32) (comp []int32, cyclic []bool) {
	index := make([]int32, n) // 0: not visited yet
	low := make([]int32, n)
	onStack := make([]bool, n)
	comp = make([]int32, n)
	var stack []int32
	type frame struct{ v, i int32 }
	var calls []frame
	next := int32(1)
	visit := func(v int32) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		calls = append(calls, frame{v, 0})
	}
	for r := int32(0); r < int32(n); r++ {
		if index[r] != 0 {
			continue
		}
		visit(r)
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			ss := succs(v)
			if int(f.i) < len(ss) {
				w := ss[f.i]
				f.i++
				if index[w] == 0 {
					visit(w)
				} else if onStack[w] {
					low[v] = min(low[v], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			c := int32(len(cyclic))
			size := 0
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = c
				size++
				if w == v {
					break
				}
			}
			self := false
			for _, w := range ss {
				self = self || w == v
			}
			cyclic = append(cyclic, size > 1 || self)
		}
	}
	return comp, cyclic
}

// cycleRoots returns the smallest node of every cyclic component, in increasing order.
func cycleRoots(comp []int32, cyclic []bool) []int32 {
	seen := make([]bool, len(cyclic))
	var roots []int32
	for v, c := range comp {
		if cyclic[c] && !seen[c] {
			seen[c] = true
			roots = append(roots, int32(v))
		}
	}
	return roots
}

// cycleFinder finds shortest cycles by breadth-first search, reusing its arrays between searches.
type cycleFinder struct {
	parent []int32
	stamp  []uint32
	epoch  uint32
}

func newCycleFinder(n int) *cycleFinder {
	return &cycleFinder{parent: make([]int32, n), stamp: make([]uint32, n)}
}

// shortest returns a shortest cycle through root inside root's component, as the list of its
// nodes starting at root (each node has an edge to the next, the last one back to root).
func (f *cycleFinder) shortest(root int32, comp []int32, succs func(int32) []int32) []int32 {
	f.epoch++
	c := comp[root]
	queue := []int32{root}
	f.stamp[root] = f.epoch
	for i := 0; i < len(queue); i++ {
		v := queue[i]
		for _, w := range succs(v) {
			if w == root {
				var cyc []int32
				for u := v; u != root; u = f.parent[u] {
					cyc = append(cyc, u)
				}
				cyc = append(cyc, root)
				for a, b := 0, len(cyc)-1; a < b; a, b = a+1, b-1 {
					cyc[a], cyc[b] = cyc[b], cyc[a]
				}
				return cyc
			}
			if comp[w] == c && f.stamp[w] != f.epoch {
				f.stamp[w] = f.epoch
				f.parent[w] = v
				queue = append(queue, w)
			}
		}
	}
	return []int32{root} // unreachable for a cyclic component
}
