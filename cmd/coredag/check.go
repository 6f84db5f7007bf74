package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/verify"
	"github.com/coredag/coredag/planset"
)

func init() {
	register("check", "Check plans: names, bounds, access, matching, cycles, FIFO deadlocks, races and target limits.", func() any { return &checkCmd{} })
}

type checkCmd struct {
	paramFlags
	Target       string   `placeholder:"NAME" help:"Also check the plan against this target's limits (see coredag targets), as compile does: a plan over them fails; races are proven under its ordering between the ops of a queue. Without it, the limits of the default target (connectx) are reported as warnings, and so is an ordering of connectx the plan relies on."`
	JSON         bool     `help:"Print diagnostics as JSON on stdout."`
	ExplainRaces bool     `help:"When a plan has races, list after edges that make it race-free, checked to leave no deadlock, and the races no after edge fixes."`
	Files        []string `arg:"" name:"file" help:"Plan files (- for stdin), or plan sets (.set): their lines, and each plan at the least world size of its line, as select loads them."`
}

// checkReport is the --json output of check.
type checkReport struct {
	File        string      `json:"file"`
	OK          bool        `json:"ok"`
	Ranks       int         `json:"ranks,omitempty"`
	Ops         int         `json:"ops,omitempty"`
	Target      string      `json:"target,omitempty"` // with --target: the target whose limits were checked
	Diagnostics []diag.JSON `json:"diagnostics"`
	Warnings    []diag.JSON `json:"warnings,omitempty"` // without --target: the default target's limits the plan exceeds
	Notes       []diag.JSON `json:"notes,omitempty"`    // what check left unproven (not errors)
	Fixes       []jsonFix   `json:"fixes,omitempty"`    // with --explain-races
	Unfixed     []string    `json:"unfixed,omitempty"`  // with --explain-races: races no edge fixes
	// ReliesOn is the ordering between the ops of a queue the plan's race-freedom relies on, as
	// libfabric's FI_ORDER_* names (absent: none): a runtime refuses a NIC that lacks it.
	ReliesOn []string `json:"relies_on,omitempty"`
}

// jsonFix is one suggested `op after after` edge and the ranks that need it.
type jsonFix struct {
	Op    string `json:"op"`
	After string `json:"after"`
	Ranks []int  `json:"ranks"`
}

func (c *checkCmd) Run(e *env) error {
	if _, err := c.paramFlags.values(); err != nil {
		return err
	}
	name := c.Target
	if name == "" {
		name = defaultTarget
	}
	target, err := ir.LookupTarget(name)
	if err != nil {
		return usageError("--target: %v", err)
	}
	var reports []checkReport
	failed, unreadable := false, false
	for _, path := range c.Files {
		if isSetFile(path) {
			r, err := c.checkSet(e, path)
			if errors.Is(err, context.Canceled) { // interrupted: stop here
				return err
			}
			if err != nil {
				unreadable = true
				fmt.Fprintf(e.stderr, "coredag: %s\n", diag.EscapeControls(err.Error()))
			}
			failed = failed || !r.OK && err == nil
			reports = append(reports, r)
			continue
		}
		l, err := loadPlan(e, path, c.paramFlags, loadOptions{lint: true, target: &target, limits: true})
		if errors.Is(err, context.Canceled) { // interrupted: stop here
			return err
		}
		if err != nil { // an unreadable file: say so, check the others, exit 2 at the end
			unreadable = true
			fmt.Fprintf(e.stderr, "coredag: %s\n", diag.EscapeControls(err.Error()))
			reports = append(reports, checkReport{File: path, Diagnostics: []diag.JSON{{Code: diag.Input, File: path, Message: err.Error()}}})
			continue
		}
		r := checkReport{File: l.path, OK: l.err == nil, Diagnostics: []diag.JSON{}}
		if l.err != nil {
			failed = true
			r.Diagnostics = diagnosticsJSON(l.err)
			if !c.JSON {
				printDiagnostics(e.stderr, l)
			}
			if c.ExplainRaces && l.graph != nil {
				if err := c.explain(e, l, target, &r); err != nil { // interrupted while searching for fixes: stop here
					return err
				}
			}
		} else if c.checkPassed(e, l, target, &r) {
			r.Ranks, r.Ops = l.graph.Ranks, len(l.graph.Ops)
			if rl := l.graph.Relies; rl != nil {
				r.ReliesOn = strings.Split(rl.Order.String(), "|")
			}
			if !c.JSON {
				fits := ""
				if c.Target != "" {
					fits = ", within the limits of target " + target.Name
				}
				fmt.Fprintf(e.stdout, "%s: ok (plan %s, %s, %s%s%s)\n", diag.QuoteName(l.path), l.graph.Name, english.Plural(l.graph.Ranks, "rank"), english.Plural(len(l.graph.Ops), "op"), provenNote(l.graph), fits)
			}
		} else {
			failed = true
		}
		if l.graph != nil && len(l.graph.Notes) > 0 {
			r.Notes = diagnosticsJSON(l.graph.Notes)
			if !c.JSON {
				printNotes(e.stderr, l)
			}
		}
		reports = append(reports, r)
	}
	if c.JSON {
		if err := writeJSON(e.stdout, reports); err != nil {
			return err
		}
	}
	switch {
	case unreadable:
		return &exitError{code: exitUsage}
	case failed:
		return &exitError{code: exitFail}
	}
	return nil
}

// checkSet checks a plan set as select and tune load it (planset.Load): its lines and their
// coverage, and each plan at the least world size of its line. It returns an error only for a
// set it could not read.
func (c *checkCmd) checkSet(e *env, path string) (checkReport, error) {
	r := checkReport{File: path, Diagnostics: []diag.JSON{}}
	if len(c.Params) > 0 {
		err := fmt.Errorf("%s: -p sets a plan's params; a plan set's lines set their own (coredag select SET --size SIZE -p ranks=R says which plan serves a world size)", path)
		r.Diagnostics = []diag.JSON{{Code: diag.Input, File: path, Message: err.Error()}}
		return r, err
	}
	s, src, err := planset.Load(e.ctx, path, planChecker())
	if cause := stop.Stopped(e.ctx, err); cause != nil {
		return r, cause
	}
	var l diag.List
	switch {
	case err == nil:
		r.OK = true
		if !c.JSON {
			fmt.Fprintf(e.stdout, "%s: ok (plan set for %s, %s)\n", diag.QuoteName(path), s.Collective, english.Plural(len(s.Entries), "plan"))
		}
	case errors.As(err, &l):
		r.Diagnostics = diagnosticsJSON(err)
		if !c.JSON {
			diag.Print(e.stderr, err, diag.Sources{path: src})
		}
	default:
		r.Diagnostics = []diag.JSON{{Code: diag.Input, File: path, Message: err.Error()}}
		return r, err
	}
	return r, nil
}

// defaultTarget is the target whose limits check reports as warnings without --target: the
// default of compile's --target.
const defaultTarget = "connectx"

// checkTarget reports a plan that checked against target's limits, found by lower.CheckLimits
// beside the checks (loadPlan): it runs Compile's lowering and limit checks rank by rank without
// keeping the Plan, so check and compile refuse the same plans with the same diagnostics (code
// target). With --target a plan over a limit fails: checkTarget fills r's diagnostics and
// returns false. Without, the default target's refusals are warnings, and the plan passes.
func (c *checkCmd) checkTarget(e *env, l *loaded, target ir.Target, r *checkReport) bool {
	if c.Target != "" {
		r.Target = target.Name
	}
	err := l.limits
	if err == nil {
		return true
	}
	if c.Target != "" {
		r.OK, r.Diagnostics = false, diagnosticsJSON(err)
		if !c.JSON {
			l.err = err
			printDiagnostics(e.stderr, l)
		}
		return false
	}
	r.Warnings = append(r.Warnings, diagnosticsJSON(err)...)
	if !c.JSON {
		printPrefixed(e.stderr, l, err, "warning: ")
	}
	return true
}

// checkPassed checks a plan that passed against the target's limits (checkTarget) and, when
// it is within them, reports the lints' warnings (loaded with it); it reports whether the plan
// is within the limits.
func (c *checkCmd) checkPassed(e *env, l *loaded, target ir.Target, r *checkReport) bool {
	ok := c.checkTarget(e, l, target, r)
	if ok && len(l.lints) > 0 {
		r.Warnings = append(r.Warnings, diagnosticsJSON(l.lints)...)
		if !c.JSON {
			printPrefixed(e.stderr, l, l.lints, "warning: ")
		}
	}
	return ok
}

// explain suggests the orderings that would remove a plan's races, under the ordering of the
// target the races were found under: edges proven by adding them to the plan and checking it
// again (verify.Options.SuggestFixes), and the races no edge fixes. A signal stops the search,
// which then says nothing: the error is the interruption.
func (c *checkCmd) explain(e *env, l *loaded, target ir.Target, r *checkReport) error {
	fixes := verify.Options{Order: target.Order, Target: target.Name}.SuggestFixes(e.ctx, l.graph)
	if fixes.Stopped {
		return stop.Cause(e.ctx)
	}
	for _, f := range fixes.Edges {
		r.Fixes = append(r.Fixes, jsonFix{Op: f.Op, After: f.After, Ranks: f.Ranks})
	}
	r.Unfixed = fixes.Unfixed
	if c.JSON {
		return nil
	}
	if len(fixes.Edges) > 0 {
		what := "to make the plan race-free, add these orderings"
		if !fixes.Complete {
			what = "to fix the races that an `after` can fix, add these orderings"
		}
		fmt.Fprintf(e.stderr, "%s: %s (as `after` clauses or dependency statements; checked: they leave no deadlock):\n%s", diag.QuoteName(l.path), what, fixes)
	}
	if len(fixes.Unfixed) > 0 {
		what := "no single `after` edge fixes these races (see their diagnostics)"
		if fixes.OutOfBudget {
			what = "no `after` suggested for these races: the search for fixes stopped at its budget"
		}
		fmt.Fprintf(e.stderr, "%s: %s:\n", diag.QuoteName(l.path), what)
		for _, u := range fixes.Unfixed {
			fmt.Fprintf(e.stderr, "  %s\n", u)
		}
	}
	return nil
}

// printNotes prints what check left unproven in a plan, as diagnostics worded "note: ...".
func printNotes(w io.Writer, l *loaded) {
	printPrefixed(w, l, l.graph.Notes, "note: ")
}

// printPrefixed prints err's diagnostics with their messages prefixed (a diagnostic that is not
// an error: "note: ", "warning: ").
func printPrefixed(w io.Writer, l *loaded, err error, prefix string) {
	var list diag.List
	if !errors.As(err, &list) {
		fmt.Fprintf(w, "%s: %s%s\n", diag.QuoteName(l.path), prefix, diag.EscapeControls(err.Error()))
		return
	}
	out := make(diag.List, len(list))
	for i, d := range list {
		p := *d
		p.Msg = prefix + d.Msg
		out[i] = &p
	}
	diag.Print(w, out, diag.Sources{l.path: l.src})
}
