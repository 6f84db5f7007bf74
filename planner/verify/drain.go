package verify

import (
	"context"

	"github.com/coredag/coredag/internal/minheap"
	"github.com/coredag/coredag/internal/stop"
)

// Quick "no" answers. Any topological order of the happens-before graph refutes x -> y when it
// puts y before x. The order the graph was sorted in (breadth first) is one; drained orders are
// two more, chosen to separate the events that questions between neighbouring ranks ask about:
// each rank runs as far as it can before the next rank gets a turn, in rank order, round after
// round until every event is placed, once with the ranks ascending and once descending. A rank
// that runs ahead of a lower neighbour's send, or of a higher one's, then shows it.
//
// In the ring allreduce, where every receive gated by a reduction is asked whether the sender's
// send waits for that reduction (RNR), the two drained orders answer all of the questions "no"
// (none hold) with two linear passes; exact answers would take a separator search per level.

// drained returns the positions of the events of h (event-numbered) in the order drained from
// its ranks, ascending or descending, in place of the scratch pos (len h.n). ready is scratch
// too: a list per rank, all empty, left empty (their arrays serve the next call). Stopped (ctx),
// it returns part of the order, which means nothing.
func (h *hbGraph) drained(ctx context.Context, descending bool, pos []int32, ready [][]int32) []int32 {
	g := h.g
	// In degrees count down as events are placed; pos doubles as the in-degree array until an
	// event is placed (a placed event's degree is never read again).
	indeg := pos
	clear(indeg)
	for _, w := range h.succ {
		indeg[w]++
	}
	ranks := newRankIndex(g)
	rankOf := func(e int32) int { return int(ranks.of(event(e))) }
	// Turns are taken in (round, rank) order: a rank that gets work during its own round's turn,
	// or after it, waits for the next round.
	turns := minheap.NewOrdered[uint64]() // turns, (round << 32 | rank key)
	round := uint64(0)
	key := func(k int) uint64 {
		if descending {
			k = g.Ranks - 1 - k
		}
		return uint64(k)
	}
	cur := uint64(0)
	wake := func(k int) {
		r := round
		if key(k) <= cur {
			r++
		}
		turns.Push(r<<32 | key(k))
	}
	for v := range h.n {
		if indeg[v] == 0 {
			k := rankOf(int32(v))
			if len(ready[k]) == 0 {
				turns.Push(key(k))
			}
			ready[k] = append(ready[k], int32(v))
		}
	}
	next := int32(0)
	poll := stop.Every(ctx, drainPoll)
	var run []int32
	for turns.Len() > 0 {
		t := turns.Pop()
		round, cur = t>>32, t&(1<<32-1)
		k := int(cur)
		if descending {
			k = g.Ranks - 1 - k
		}
		lo, hi := int32(startOf(g.Rank[k].FirstOp)), int32(startOf(g.Rank[k].EndOp))
		// The rank runs its ready events, and those they make ready on it, in one list shared
		// by the turns: its own list keeps only what other ranks make ready for it.
		run = append(run[:0], ready[k]...)
		ready[k] = ready[k][:0]
		for i := 0; i < len(run); i++ {
			v := run[i]
			for _, w := range h.succs(v) {
				indeg[w]--
				if indeg[w] != 0 {
					continue
				}
				if lo <= w && w < hi {
					run = append(run, w)
					continue
				}
				j := rankOf(w)
				if len(ready[j]) == 0 {
					wake(j)
				}
				ready[j] = append(ready[j], w)
			}
			pos[v] = next // v's degree is not read again
			next++
			if poll.Step() != nil {
				for k := range ready {
					ready[k] = ready[k][:0]
				}
				return pos
			}
		}
	}
	return pos
}

// drainPoll is how many events drained places between two looks at the context: a millisecond
// or so.
const drainPoll = 1 << 16
