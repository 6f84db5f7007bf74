package verify

import (
	"context"

	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// BarrierGap is a pair of ranks that a plan does not synchronise: rank Left may leave the plan
// (every op of it ends) before rank Entered has entered it (no op of Entered happens before any
// op of Left ends). Pairs counts such pairs over the whole plan.
type BarrierGap struct {
	Left, Entered int
	Pairs         int
}

// MaxBarrierWork bounds the work of Barrier: a search of the happens-before graph per rank.
const MaxBarrierWork = 1 << 31

// Barrier proves that the plan is a barrier (`expect barrier`): for every two ranks r and s,
// some op of r happens before some op of s ends, so s cannot leave before r has entered. The
// happens-before graph is that of the checks, with the edges of the target's ordering. It
// returns the first gap (by the leaving rank, then the other) and whether the plan is one; ok
// is false too, with a zero gap and within false, when the search would exceed MaxBarrierWork,
// or was stopped (ctx, looked at between the searches of two ranks).
func (o *Order) Barrier(ctx context.Context) (gap BarrierGap, ok, within bool) {
	g := o.g
	if g == nil || len(g.Ops) == 0 {
		if g != nil && g.Ranks > 1 {
			return BarrierGap{Left: 0, Entered: 1, Pairs: g.Ranks * (g.Ranks - 1)}, false, true
		}
		return BarrierGap{}, true, true
	}
	ord := ir.OrderNone
	if o.opt != nil {
		ord = o.opt.Order
	}
	h := newHBBeside(ctx, g, true, ord, o.opt, nil)
	if stop.Cause(ctx) != nil {
		return BarrierGap{}, false, false
	}
	if int64(g.Ranks)*int64(h.n+len(h.succ)) > MaxBarrierWork {
		return BarrierGap{}, false, false
	}
	byRank := make([][]ir.OpID, g.Ranks)
	for i := range g.Ops {
		r := g.Ops[i].Rank
		byRank[r] = append(byRank[r], ir.OpID(i))
	}
	// reached[s*ranks+r]: an op of s ends after an op of r.
	reached := make([]bool, g.Ranks*g.Ranks)
	seen := make([]int32, h.n) // the rank + 1 of the last search that reached the node
	stack := make([]int32, 0, 64)
	for r := range g.Ranks {
		if stop.Cause(ctx) != nil { // each search may visit the whole graph
			return BarrierGap{}, false, false
		}
		mark := int32(r + 1)
		for _, x := range byRank[r] {
			if p := h.node(startOf(x)); seen[p] != mark {
				seen[p] = mark
				stack = append(stack, p)
			}
		}
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, w := range h.succs(v) {
				if seen[w] != mark {
					seen[w] = mark
					stack = append(stack, w)
				}
			}
		}
		for s := range g.Ranks {
			for _, x := range byRank[s] {
				if seen[h.node(endOf(x))] == mark {
					reached[s*g.Ranks+r] = true
					break
				}
			}
		}
	}
	ok = true
	for s := range g.Ranks {
		for r := range g.Ranks {
			if !reached[s*g.Ranks+r] {
				if ok {
					gap.Left, gap.Entered = s, r
				}
				ok = false
				gap.Pairs++
			}
		}
	}
	return gap, ok, true
}
