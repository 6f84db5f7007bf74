package main

import (
	"context"
	"fmt"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/lower"
)

// expectReport is the outcome of one postcondition (`expect`) on values, in run's report.
type expectReport struct {
	Expect string `json:"expect"`
	Held   bool   `json:"held"`
	Detail string `json:"detail,omitempty"` // the first wrong element, and from which inits
}

// checkExpects checks g's postconditions on values twice (docs/language.md, Postconditions):
// on the memory the run left, which started from the plan's own inits, and on one more
// iteration of the same engine and target on the software NIC from exec.DistinctInits, where
// every (rank, buffer, element) starts with its own value so that misplaced data shows (but
// for the elements a general expect's precondition fixes: one such iteration per precondition).
// When ctx is cancelled it stops before the next run, or between the iterations of one, and
// returns ctx's cause.
func checkExpects(ctx context.Context, g *ir.Graph, engine exec.Engine, target ir.Target, last *exec.Result) ([]expectReport, error) {
	own := exec.NewMemory(g)
	if err := own.ResetAll(); err != nil {
		return nil, err
	}
	out := make([]expectReport, len(g.Expects))
	for i := range g.Expects {
		out[i] = expectReport{Expect: g.ExpectString(&g.Expects[i]), Held: true}
	}
	fail := func(i int, r exec.ExpectResult, inits string) {
		if !r.Held && out[i].Held {
			out[i].Held, out[i].Detail = false, r.Detail+" (from "+inits+")"
		}
	}
	// The plan's inits: an expect whose precondition they do not meet says nothing of them.
	for i, r := range exec.CheckExpects(g, own, last.Memory) {
		if exec.GivensHold(g, own, g.Expects[i].Given) {
			fail(i, r, "the plan's inits")
		}
	}
	// Distinct inits, one more run per precondition (most plans: one, with none).
	done := map[string]bool{}
	for _, e := range g.Expects {
		key := ir.GivenKey(e.Given)
		if done[key] {
			continue
		}
		done[key] = true
		if err := stop.Cause(ctx); err != nil {
			return nil, err
		}
		dg := exec.DistinctInits(g)
		if len(e.Given) > 0 {
			dg = exec.WithGivens(dg, e.Given)
		}
		plan, err := lower.Compile(ctx, dg, target)
		if cause := stop.Stopped(ctx, err); cause != nil {
			return nil, cause
		}
		if err != nil {
			return nil, err
		}
		ref, err := exec.Reference(dg)
		if err != nil {
			return nil, err
		}
		res, err := exec.Run(ctx, plan, softnic.New(softnic.Options{}), exec.Options{Engine: engine, Iters: 1, Reference: ref})
		if cause := stop.Stopped(ctx, err); cause != nil {
			return nil, cause
		}
		if err != nil {
			return nil, fmt.Errorf("the run from distinct inits failed: %w", err)
		}
		distinct := exec.NewMemory(dg)
		if err := distinct.ResetAll(); err != nil {
			return nil, err
		}
		for i, r := range exec.CheckExpects(dg, distinct, res.Memory) {
			if ir.GivenKey(g.Expects[i].Given) == key {
				fail(i, r, "distinct inits")
			}
		}
	}
	return out, nil
}

// provenNote is what check adds to a clean plan's line: ", 2 postconditions proven", or nothing
// when the plan states none.
func provenNote(g *ir.Graph) string {
	if len(g.Expects) == 0 {
		return ""
	}
	return ", " + english.Plural(len(g.Expects), "postcondition") + " proven"
}
