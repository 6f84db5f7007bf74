// Package verify is the second pass of the planner: it checks an elaborated ir.Graph for what
// would hang or corrupt data on the NIC: dependency cycles, FIFO deadlocks (waits against queue
// order, loops through matching, within and across ranks) and races under the happens-before
// relation of DSL.md. It also explains races: the `after` edges that would fix them
// (ExplainRaces, SuggestFixes). It reads the Graph only; package lower compiles what passes.
package verify

import (
	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
)

// Check runs the verification pass over a Graph that passed the front-end checks (names,
// bounds, matching, access flags). It works in three steps, each run only when the previous one
// is clean, so one mistake gives one message rather than a cascade:
//
//  1. dependency cycles among `after` edges (checkCycles);
//  2. FIFO deadlocks: an `after` against the order of one queue side, and loops of waits through
//     queue order and send/recv matching, within a rank or across ranks (checkFIFO);
//  3. races under the happens-before relation of DSL.md (Races), one message per pair of op
//     statements and buffer, naming the ranks it occurs on and the `after` that would fix it.
//
// The returned list is sorted by position.
func Check(g *ir.Graph) diag.List {
	if len(g.Ops) == 0 {
		return nil
	}
	errs := checkCycles(g)
	if len(errs) == 0 {
		var h *hbGraph
		errs, h = checkFIFO(g)
		if len(errs) == 0 {
			errs = raceErrors(g, h)
		}
	}
	errs.Sort()
	return errs
}
