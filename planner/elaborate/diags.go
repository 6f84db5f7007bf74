package elaborate

import (
	"github.com/coredag/coredag/diag"
)

// phase orders diagnostics: only the first phase with errors is reported (docs/language.md §10,
// What `coredag check` verifies).
type phase int

const (
	phaseNames  phase = iota // names, declarations and expressions
	phaseShapes              // bounds, lengths, types, access flags
	phaseMatch               // queue pairing and send/recv matching
	numPhases
)

// diags collects the diagnostics of one phase. The same mistake made by every rank of an SPMD
// text is one diagnostic that lists the ranks, not one per rank (diag.Group).
type diags struct{ diag.Group }

// list returns the phase's diagnostics for a plan of the given number of ranks, sorted.
func (d *diags) list(ranks int) diag.List {
	l := d.Group.List(ranks)
	l.Sort()
	return l
}
