package main

import (
	"fmt"
)

func init() {
	register("check", "Check plans: names, bounds, access, matching, cycles, FIFO deadlocks and races.", func() any { return &checkCmd{} })
}

type checkCmd struct {
	paramFlags
	JSON  bool     `help:"Print diagnostics as JSON on stdout."`
	Files []string `arg:"" name:"file" help:"Plan files (- for stdin)."`
}

// checkReport is the --json output of check.
type checkReport struct {
	File        string           `json:"file"`
	OK          bool             `json:"ok"`
	Ranks       int              `json:"ranks,omitempty"`
	Ops         int              `json:"ops,omitempty"`
	Diagnostics []jsonDiagnostic `json:"diagnostics"`
}

func (c *checkCmd) Run(e *env) error {
	var reports []checkReport
	failed := false
	for _, path := range c.Files {
		l, err := loadPlan(e, path, c.paramFlags)
		if err != nil {
			return err
		}
		r := checkReport{File: l.path, OK: l.err == nil, Diagnostics: []jsonDiagnostic{}}
		if l.err != nil {
			failed = true
			r.Diagnostics = diagnosticsJSON(l.err)
			if !c.JSON {
				printDiagnostics(e.stderr, l)
			}
		} else {
			r.Ranks, r.Ops = l.graph.Ranks, len(l.graph.Ops)
			if !c.JSON {
				fmt.Fprintf(e.stdout, "%s: ok (plan %s, %d ranks, %d ops)\n", l.path, l.graph.Name, l.graph.Ranks, len(l.graph.Ops))
			}
		}
		reports = append(reports, r)
	}
	if c.JSON {
		if err := writeJSON(e.stdout, reports); err != nil {
			return err
		}
	}
	if failed {
		return &exitError{code: exitFail}
	}
	return nil
}
