package verify

import (
	"context"
	"fmt"
	"sync"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// RNR lints g for receives that are posted late: a recv that waits (`after`) for an op its
// sender does not wait for can be posted after its message arrived. The sender's NIC then gets a
// receiver-not-ready NAK and retries after an RNR timer (the polling engine counts these as RNR
// retries), which costs latency on every such message, though the plan stays correct. One
// warning per recv statement and gate, naming the ranks it occurs on; g must have passed Check.
// Stopped (ctx), it returns nothing.
func RNR(ctx context.Context, g *ir.Graph) diag.List {
	h := newHB(ctx, g, true, &Options{})
	if !h.acyclic {
		return nil
	}
	return rnr(ctx, g, h, func() {}, func() {})
}

// LintRNR runs RNR on the happens-before graph of the checks, beside what runs next (Races,
// which must not have started), and delivers its findings on the channel: nothing once ctx is
// cancelled.
func (o *Order) LintRNR(ctx context.Context) <-chan diag.List {
	out := make(chan diag.List, 1)
	if o.h == nil {
		out <- nil
		return out
	}
	// The lint searches a copy of o.h, which Races renumbers: the copy keeps the event-numbered
	// adjacency, and shares the renumbered one if it needs it. Races renumbers only once the
	// lint is done with the array of the order (drained), and reuses the event-numbered arrays
	// only once the lint lets go of them.
	h := *o.h
	h.owner = false
	p := o.h.pos
	p.drain.Add(1)
	p.lint.Add(1)
	drained, release := sync.OnceFunc(p.drain.Done), sync.OnceFunc(p.lint.Done)
	go func() {
		defer release()
		defer drained()
		out <- rnr(ctx, o.g, &h, drained, release)
	}()
	return out
}

// rnr is RNR on g's happens-before graph h, numbered by event, not yet renumbered. It calls
// drained once done with the array of the order (its scratch), and release once it no longer
// reads the event-numbered adjacency. Stopped (ctx), it returns nothing.
func rnr(ctx context.Context, g *ir.Graph, h *hbGraph, drained, release func()) diag.List {
	type gated struct{ recv, gate, send ir.OpID }
	gatedRecv := func(i int) bool { return g.Ops[i].Kind == ir.OpRecv && g.Ops[i].Match != ir.None }
	n := 0
	for i := range g.Ops {
		if gatedRecv(i) {
			n += len(g.Preds(ir.OpID(i)))
		}
	}
	qs := make([]gated, 0, n)
	for i := range g.Ops {
		if gatedRecv(i) {
			for _, p := range g.Preds(ir.OpID(i)) {
				qs = append(qs, gated{ir.OpID(i), ir.OpID(p), g.Ops[i].Match})
			}
		}
	}
	if len(qs) == 0 {
		return nil
	}
	// Is the gate over before the send starts? Then the receive is posted (or its gate at least
	// passed) before the message leaves. The drained orders answer most "no"s; the questions
	// they leave open are answered exactly.
	query := func(q gated) hbQuery { return hbQuery{x: endOf(q.gate), y: startOf(q.send)} }
	unordered := make([]bool, len(qs))
	refute := func(pos []int32) {
		for i, q := range qs {
			if e := query(q); pos[e.y] < pos[e.x] {
				unordered[i] = true
			}
		}
	}
	refute(h.topo)
	// The drained orders are placed where the order of the topological sort was: renumber
	// waits for them.
	pos, ready := h.pos.order[:h.n], make([][]int32, g.Ranks)
	for _, desc := range [2]bool{false, true} {
		refute(h.drained(ctx, desc, pos, ready))
	}
	pos, ready = nil, nil
	drained()
	if stop.Cause(ctx) != nil {
		return nil
	}
	var open []int
	for i := range qs {
		if !unordered[i] {
			open = append(open, i)
		}
	}
	if len(open) > 0 {
		h.renumber() // the last read of the event-numbered adjacency
	}
	release()
	ordered := h.resolve(ctx, len(open), func(i int) hbQuery { return query(qs[open[i]]) }, nil)
	if stop.Cause(ctx) != nil { // unanswered questions would read as late receives
		return nil
	}
	for j, i := range open {
		unordered[i] = !ordered[j]
	}
	// One warning per recv statement, gate and send statement: the first instance is worded, the
	// instances on other ranks only counted (their messages name their ranks).
	type first struct {
		q      gated
		d      *diag.Diagnostic
		others []int
	}
	var firsts []*first
	byKey := map[[3]diag.Pos]*first{}
	var groups diag.Group
	const f = "recv %s on rank %d is posted only after %s (its `after`), which %s %s on rank %d does not wait for: the message can arrive before the receive is posted, and the sender's NIC retries (RNR) until it is (post the receive earlier, into a buffer nothing else uses then, or make %s wait for %s, e.g. through a message)"
	for i, q := range qs {
		if !unordered[i] {
			continue
		}
		r, gt, s := &g.Ops[q.recv], &g.Ops[q.gate], &g.Ops[q.send]
		key := [3]diag.Pos{r.Pos, gt.Pos, s.Pos}
		if fi := byKey[key]; fi != nil && r.Rank != g.Ops[fi.q.recv].Rank {
			// AddLikewise skips a rank that repeats the last one: so can this list.
			if k := len(fi.others); k == 0 || fi.others[k-1] != int(r.Rank) {
				fi.others = append(fi.others, int(r.Rank))
			}
			continue
		}
		d := diag.Errorf(diag.RNR, r.Pos, f, r.Name, r.Rank, gt.Name, s.Kind, s.Name, s.Rank, s.Name, gt.Name)
		d.Relate(gt.Pos, fmt.Sprintf("%s %s on rank %d, the receive's gate", gt.Kind, gt.Name, gt.Rank))
		d.Relate(s.Pos, fmt.Sprintf("%s %s on rank %d, whose message can arrive early", s.Kind, s.Name, s.Rank))
		if groups.Add(d, f, int(r.Rank)) {
			fi := &first{q: q, d: d}
			byKey[key] = fi
			firsts = append(firsts, fi)
		}
	}
	for _, fi := range firsts {
		groups.AddLikewise(fi.d, f, fi.others...)
	}
	list := groups.List(g.Ranks)
	list.Sort()
	return list
}
