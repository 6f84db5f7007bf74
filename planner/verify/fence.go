package verify

import "github.com/coredag/coredag/ir"

// Fences tells which of the barriers a persistent run of g needs around each iteration when its
// ranks live in several processes, from the happens-before relation (without transport
// ordering, which only adds edges: leaving it out can only keep a barrier).
//
// Two-sided messages need neither barrier: a send lands only in a receive its owner posted after
// the start of the iteration, and an iteration ends at a rank only once its own ops ended. A
// one-sided op X (write, read, atomic) of rank B into the memory of rank A is what barriers are
// for:
//
//   - start: X must not touch A's memory before A started the iteration. It cannot when some op
//     of A happens before start(X). Start reports false when that holds for every such X.
//   - landed: no Wait of A may return while X may still touch A's memory. It cannot when land(X)
//     happens before the end of some op of A. Landed reports false when that holds for every X.
//   - done: as landed, with end(X) in place of land(X): X has also completed at its initiator
//     when A's iteration ends, so A owes it no more progress (a NIC moved by the host's calls).
//
// A graph too large for the check within its budget keeps every barrier.
func Fences(g *ir.Graph) (start, landed, done bool) {
	n := 3 * len(g.Ops)
	if int64(n)*int64(g.Ranks) > 1<<26 {
		return true, true, true
	}
	var targets map[int32][]ir.OpID // rank -> one-sided ops into its memory
	for i := range g.Ops {
		op := &g.Ops[i]
		switch op.Kind {
		case ir.OpWrite, ir.OpRead, ir.OpAtomicAdd, ir.OpAtomicCAS:
		default:
			continue
		}
		if op.Queue == ir.None {
			return true, true, true
		}
		if a := int32(g.Queues[op.Queue].PeerRank); a != op.Rank {
			if targets == nil {
				targets = map[int32][]ir.OpID{}
			}
			targets[a] = append(targets[a], ir.OpID(i))
		}
	}
	if len(targets) == 0 {
		return false, false, false
	}
	// Adjacency, forward and backward, in compressed rows.
	fwd, bwd := make([]int32, n+1), make([]int32, n+1)
	hbEdges(g, true, ir.OrderNone, func(a, b event) { fwd[a+1]++; bwd[b+1]++ })
	for v := 0; v < n; v++ {
		fwd[v+1] += fwd[v]
		bwd[v+1] += bwd[v]
	}
	fs, bs := make([]int32, fwd[n]), make([]int32, bwd[n])
	fp, bp := append([]int32(nil), fwd[:n]...), append([]int32(nil), bwd[:n]...)
	hbEdges(g, true, ir.OrderNone, func(a, b event) {
		fs[fp[a]] = int32(b)
		fp[a]++
		bs[bp[b]] = int32(a)
		bp[b]++
	})
	seen := make([]bool, n)
	queue := make([]int32, 0, n)
	// reach marks every event reachable from the events of rank's ops at phase, along rows.
	reach := func(rank int32, phase event, rows, adj []int32) {
		clear(seen)
		queue = queue[:0]
		for i := range g.Ops {
			if g.Ops[i].Rank == rank {
				e := event(i)*3 + phase
				seen[e] = true
				queue = append(queue, int32(e))
			}
		}
		for len(queue) > 0 {
			v := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			for _, w := range adj[rows[v]:rows[v+1]] {
				if !seen[w] {
					seen[w] = true
					queue = append(queue, w)
				}
			}
		}
	}
	for a, xs := range targets {
		reach(a, evStart, fwd, fs)
		for _, x := range xs {
			start = start || !seen[startOf(x)]
		}
		reach(a, evEnd, bwd, bs)
		for _, x := range xs {
			landed = landed || !seen[landOf(x)]
			done = done || !seen[endOf(x)]
		}
	}
	return start, landed, done
}
