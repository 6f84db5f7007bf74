package main

import (
	"errors"
	"fmt"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/ir"
)

// runDiagnostics words the error of a failed run as diagnostics for `run --json`: a fault of an
// op at the op (code fault), a hang at the first stuck entry with the other stuck entries and
// the ops expected to unblock them as related positions (code hang), anything else as a fault
// without a position.
func runDiagnostics(err error, plan *ir.Plan) []diag.JSON {
	var (
		op   *exec.OpError
		hang *exec.HangError
	)
	switch {
	case errors.As(err, &op):
		return diag.List{opDiagnostic(op)}.ToJSON()
	case errors.As(err, &hang):
		return diag.List{hangDiagnostic(hang, plan)}.ToJSON()
	}
	return []diag.JSON{{Code: diag.Fault, Message: err.Error()}}
}

// hangDiagnostic places a hang in the plan's source: at the first stuck entry, with the others
// and the producers each stuck entry waits for as related positions (those the engine could
// place in the plan).
func hangDiagnostic(h *exec.HangError, plan *ir.Plan) *diag.Diagnostic {
	d := &diag.Diagnostic{Code: diag.Hang, Msg: fmt.Sprintf("iteration %d: %v", h.Iteration, exec.ErrHang)}
	for i, s := range h.Stuck {
		if i == 0 {
			d.Pos = wqePos(plan, s.At)
			d.Msg += ": " + s.String()
		} else if p := wqePos(plan, s.At); p.IsValid() {
			d.Relate(p, s.String())
		}
		if p := wqePos(plan, s.ProducerAt); p.IsValid() && s.Producer != "" {
			d.Relate(p, fmt.Sprintf("expected to complete the %s on rank %d, queue %s", s.What, s.Rank, s.Queue))
		}
	}
	return d
}

// wqePos is the source position of the chain entry at loc, or no position.
func wqePos(plan *ir.Plan, loc *exec.WQELoc) diag.Pos {
	if plan == nil || loc == nil || loc.Rank < 0 || loc.Rank >= len(plan.Ranks) {
		return diag.Pos{}
	}
	qs := plan.Ranks[loc.Rank].Queues
	if loc.Queue < 0 || loc.Queue >= len(qs) || loc.Index < 0 || loc.Index >= len(qs[loc.Queue].Chain) {
		return diag.Pos{}
	}
	return plan.OpOf(&qs[loc.Queue].Chain[loc.Index]).Pos
}
