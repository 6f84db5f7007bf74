// Package verify is the second pass of the planner: it checks an elaborated ir.Graph for what
// would hang or corrupt data on the NIC: dependency cycles, FIFO deadlocks (waits against queue
// order, loops through matching, within and across ranks) and races under the happens-before
// relation of docs/language.md §8. It also explains races: the `after` edges that would fix them
// (ExplainRaces, SuggestFixes). It reads the Graph only; package lower compiles what passes.
package verify

import (
	"context"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// Check runs the verification pass over a Graph that passed the front-end checks (names,
// bounds, matching, access flags). It works in three steps, each run only when the previous one
// is clean, so one mistake gives one message rather than a cascade:
//
//  1. dependency cycles among `after` edges (checkCycles);
//  2. FIFO deadlocks: an `after` against the order of one queue side, and loops of waits through
//     queue order and send/recv matching, within a rank or across ranks (checkFIFO);
//  3. races under the happens-before relation of docs/language.md §8 (Memory accesses), one
//     message per pair of op statements and buffer, naming the ranks it occurs on and the
//     `after` that would fix it.
//
// The returned list is sorted by position.
//
// Once ctx is cancelled the checks stop: they look at it between their steps and, within the
// steps that can take long (the waits' fixed point, the race sweep, the exact answers to its
// long-path questions, the lint's drained orders, the barrier proof, the search for fixes),
// every millisecond or so of work (package internal/stop), and return early. What a stopped
// check returns is incomplete, and means nothing: a caller looks at ctx before using a result
// (planner.Load returns its cause). So do the other functions and methods of the package that
// take a ctx.
func Check(ctx context.Context, g *ir.Graph) diag.List { return Options{}.Check(ctx, g) }

// Check is the package's Check with these options.
func (opt Options) Check(ctx context.Context, g *ir.Graph) diag.List {
	errs, _ := opt.CheckOrder(ctx, g)
	return errs
}

// CheckOrder is Check that also returns, when g passes, a topological order of its
// happens-before events (nil otherwise), for passes that replay the plan's effects in an order
// every run agrees with (planner/prove).
func CheckOrder(ctx context.Context, g *ir.Graph) (diag.List, *Order) {
	return Options{}.CheckOrder(ctx, g)
}

// CheckOrder is the package's CheckOrder with these options.
func (opt Options) CheckOrder(ctx context.Context, g *ir.Graph) (diag.List, *Order) {
	errs, o := opt.CheckDeadlocks(ctx, g)
	if len(errs) > 0 || o == nil { // o is nil only when stopped (ctx)
		return errs, nil
	}
	if errs = o.Races(ctx, nil); len(errs) > 0 || stop.Cause(ctx) != nil {
		return errs, nil
	}
	if r := o.Ordered(); r != nil {
		return nil, r
	}
	return nil, o
}

// CheckDeadlocks runs Check's first two steps. When they pass it returns the order of g's
// events, on which Order.Races runs the third; a pass that needs only the order (prove) can run
// beside it, its result to be used only if no race is found. Stopped (ctx), it returns neither
// diagnostics nor an order.
func CheckDeadlocks(ctx context.Context, g *ir.Graph) (diag.List, *Order) {
	return Options{}.CheckDeadlocks(ctx, g)
}

// CheckDeadlocks is the package's CheckDeadlocks with these options.
func (opt Options) CheckDeadlocks(ctx context.Context, g *ir.Graph) (diag.List, *Order) {
	if len(g.Ops) == 0 {
		return nil, &Order{}
	}
	if errs := resolveWaits(ctx, g); len(errs) > 0 || stop.Cause(ctx) != nil {
		return errs, nil
	}
	// A cycle of `after` edges, or an `after` against queue order, closes a cycle of the
	// happens-before graph too (end(a) -> start(b) -> ... -> end(a)): when that graph is acyclic,
	// neither check can find anything, and only a plan with a deadlock pays for them.
	//
	// The race search's accesses are collected while the graph is sorted, on the CPUs the sort
	// leaves idle.
	var col *collection
	h := newHBBeside(ctx, g, true, ir.OrderNone, &opt, func(edges int) {
		col = collectAccesses(ctx, g, edges, max(opt.workerCount(len(g.Ops), 1)-1, 1), &opt)
	})
	if stop.Cause(ctx) != nil {
		return nil, nil
	}
	if h.acyclic {
		return nil, &Order{g: g, topo: h.topo, h: h, col: col, opt: &opt}
	}
	errs := checkCycles(ctx, g)
	if len(errs) == 0 && stop.Cause(ctx) == nil {
		errs = checkFIFO(ctx, g, h)
	}
	if stop.Cause(ctx) != nil {
		return nil, nil
	}
	errs.Sort()
	return errs, nil
}

// Order numbers the events of every op (its start, the landing of its data, its end;
// docs/language.md §8) so that an event that happens before another has the smaller number. Its
// methods may be called while Races runs.
type Order struct {
	g    *ir.Graph
	topo []int32
	h    *hbGraph    // the happens-before graph, until Races is done with it
	col  *collection // the race search's accesses, collected while h was sorted, until Races
	opt  *Options

	// When the plan is race-free only under opt.Order: the order of the events under it, and
	// what the plan relies on (reliance).
	ordered *Order
	rely    *reliance
}

// Races runs Check's third step, races under happens-before, sorted by position. It may be
// called once. The races are those under Options.Order: the search runs first without any
// ordering between the ops of a queue, and only when it finds races again with the ordering's
// edges, so a plan that needs no ordering costs no more. A plan race-free only thanks to the
// ordering has its order of events under the ordering (Ordered) and a warning (Reliance).
//
// Unless nil, idle is called once Races has no more work to split over every CPU: when its sweep
// is one run, when it comes to the label sweeps that answer its long-path questions (they run
// on one CPU, between steps that still use all: in the ring allreduce at 1024 ranks, 0.5 s of
// one CPU), or when it returns; it may be called more than once. A caller that starts a pass
// beside Races then does not slow the steps split over every CPU (planner does so for prove).
func (o *Order) Races(ctx context.Context, idle func()) diag.List {
	if idle == nil {
		idle = func() {}
	}
	defer idle()
	if o.h == nil {
		return nil
	}
	h := o.h
	races := findRacesOn(ctx, o.g, h, 0, o.col, idle)
	o.h, o.col = nil, nil
	if len(races) == 0 || stop.Cause(ctx) != nil {
		return nil
	}
	errs := o.orderedRaces(ctx, h, races)
	errs.Sort()
	return errs
}

// Start is the position of op's start event.
func (o *Order) Start(op ir.OpID) int32 { return o.topo[startOf(op)] }

// Land is the position of op's landing event: when a send's, write's, read's or atomic's data
// lands (a recv takes its data at the landing of the send that matches it).
func (o *Order) Land(op ir.OpID) int32 { return o.topo[landOf(op)] }

// End is the position of op's end event.
func (o *Order) End(op ir.OpID) int32 { return o.topo[endOf(op)] }
