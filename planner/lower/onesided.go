package lower

import "github.com/coredag/coredag/ir"

// waitsOn reports whether target t lowers wait ops (wait N writes to REGION, wait WORD >= V):
// the targets whose engines run host steps on the CPU, which holds a wait until its counter or
// word allows. Triggered targets have no CPU step that could hold one.
func waitsOn(t ir.Target) bool { return t.Trigger == nil }

// waitTargets says which targets lower wait ops, for the message that refuses one.
func waitTargets() string {
	return "run it on a target without triggers: connectx, connectx-inline or generic"
}

// landsByFrom lists, by op, the waits that need its landing (Graph.Lands), and counts each such
// need in the wait's start degree in st. In the order lowering places events in, a wait starts
// only once the writes it needs have started: a rank runs its host steps in that order (the
// offload engine), and a wait placed before the host steps that lead to its writes would hold
// them back for ever. Nil when the plan has no such order.
func landsByFrom(g *ir.Graph, st []opState) (start, list []int32) {
	if len(g.Lands) == 0 {
		return nil, nil
	}
	start = make([]int32, len(g.Ops)+1)
	for _, e := range g.Lands {
		start[e.From+1]++
		st[e.To].deg++
	}
	for i := range g.Ops {
		start[i+1] += start[i]
	}
	list = make([]int32, len(g.Lands))
	fill := append([]int32(nil), start[:len(g.Ops)]...)
	for _, e := range g.Lands {
		list[fill[e.From]] = int32(e.To)
		fill[e.From]++
	}
	return start, list
}
