package main

import (
	"fmt"
	"io"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/planner/verify"
)

func init() {
	register("check", "Check plans: names, bounds, access, matching, cycles, FIFO deadlocks and races.", func() any { return &checkCmd{} })
}

type checkCmd struct {
	paramFlags
	JSON         bool     `help:"Print diagnostics as JSON on stdout."`
	ExplainRaces bool     `help:"When a plan has races, list the after edges that would make it race-free."`
	Files        []string `arg:"" name:"file" help:"Plan files (- for stdin)."`
}

// checkReport is the --json output of check.
type checkReport struct {
	File        string      `json:"file"`
	OK          bool        `json:"ok"`
	Ranks       int         `json:"ranks,omitempty"`
	Ops         int         `json:"ops,omitempty"`
	Diagnostics []diag.JSON `json:"diagnostics"`
	Notes       []diag.JSON `json:"notes,omitempty"` // what check left unproven (not errors)
	Fixes       []jsonFix   `json:"fixes,omitempty"` // with --explain-races
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
	var reports []checkReport
	failed, unreadable := false, false
	for _, path := range c.Files {
		l, err := loadPlan(e, path, c.paramFlags)
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
				c.explain(e, l, &r)
			}
		} else {
			r.Ranks, r.Ops = l.graph.Ranks, len(l.graph.Ops)
			if !c.JSON {
				fmt.Fprintf(e.stdout, "%s: ok (plan %s, %s, %s%s)\n", diag.QuoteName(l.path), l.graph.Name, english.Plural(l.graph.Ranks, "rank"), english.Plural(len(l.graph.Ops), "op"), provenNote(l.graph))
			}
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

// explain suggests the orderings that would remove a plan's races.
func (c *checkCmd) explain(e *env, l *loaded, r *checkReport) {
	fixes := verify.SuggestFixes(l.graph)
	if len(fixes.Edges) == 0 {
		return
	}
	for _, f := range fixes.Edges {
		r.Fixes = append(r.Fixes, jsonFix{Op: f.Op, After: f.After, Ranks: f.Ranks})
	}
	if c.JSON {
		return
	}
	fmt.Fprintf(e.stderr, "%s: to make the plan race-free, add these orderings (as `after` clauses or dependency statements):\n%s", diag.QuoteName(l.path), fixes)
	if !fixes.Complete {
		fmt.Fprintln(e.stderr, "  (some races have no single-edge fix: order the two accesses by hand)")
	}
}

// printNotes prints what check left unproven in a plan, as diagnostics worded "note: ...".
func printNotes(w io.Writer, l *loaded) {
	notes := make(diag.List, len(l.graph.Notes))
	for i, n := range l.graph.Notes {
		note := *n
		note.Msg = "note: " + n.Msg
		notes[i] = &note
	}
	diag.Print(w, notes, diag.Sources{l.path: l.src})
}
