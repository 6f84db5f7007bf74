package main

import (
	"io"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/listing"
	"github.com/coredag/coredag/planner/lower"
)

func init() {
	register("compile", "Compile a plan into per-queue WQE chains (WAIT/ENABLE, fences, signalling) and list them.", func() any { return &compileCmd{} })
}

type compileCmd struct {
	paramFlags
	Target string `default:"connectx" help:"Target to compile for (see coredag targets)."`
	Rank   int    `default:"-1" help:"List only this rank (default: all)."`
	Format string `default:"text" enum:"text,json" help:"Listing format: text or json (docs/compile-json.md)."`
	Out    string `short:"o" placeholder:"FILE" help:"Write the listing to FILE instead of stdout."`
	File   string `arg:"" name:"file" help:"Plan file (- for stdin)."`
}

func (c *compileCmd) Run(e *env) error {
	t, err := ir.LookupTarget(c.Target)
	if err != nil {
		return usageError("%v", err)
	}
	if c.Out != "" {
		if err := checkOutput(e, "-o", c.Out, c.File); err != nil {
			return err
		}
	}
	l, err := mustLoad(e, c.File, c.paramFlags, c.Format == "json")
	if err != nil {
		return err
	}
	if c.Rank < -1 || c.Rank >= l.graph.Ranks {
		return usageError("--rank %d: plan %s has ranks 0..%d", c.Rank, l.graph.Name, l.graph.Ranks-1)
	}
	p, err := lower.Compile(l.graph, t)
	if err != nil {
		l.err = err
		reportDiagnostics(e, l, c.Format == "json")
		return &exitError{code: exitFail}
	}
	opt := listing.Options{Rank: c.Rank}
	write := func(w io.Writer) error { return listing.Write(w, p, opt) }
	if c.Format == "json" {
		write = func(w io.Writer) error { return listing.WriteJSON(w, p, opt) }
	}
	if c.Out == "" {
		return write(e.stdout)
	}
	return streamOutput(c.Out, "the listing", write)
}
