package main

import (
	"io"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/listing"
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
	// The lowering begins beside the checks. Listing to stdout, a target limit must be found
	// before the first rank is written: CheckLimits runs there first (see stream).
	opt := loadOptions{target: &t, lower: true, limits: c.Out == "" && t.Trigger == nil}
	l, err := mustLoad(e, c.File, c.paramFlags, c.Format == "json", opt)
	if err != nil {
		return err
	}
	if c.Rank < -1 || c.Rank >= l.graph.Ranks {
		return usageError("--rank %d: plan %s has ranks 0..%d", c.Rank, l.graph.Name, l.graph.Ranks-1)
	}
	return c.stream(e, l, t, listing.Options{Rank: c.Rank})
}

// stream lowers and lists the plan a rank at a time (l.lowering, begun by loadPlan), never
// holding every rank's chains: ranks are lowered and rendered on every CPU, and written in
// order. A target limit broken on a later rank is found only after earlier ranks are listed: -o
// then leaves its file as it was, and for stdout CheckLimits finds it first (on a triggered
// target CompileEach builds the Plan whole before listing it).
func (c *compileCmd) stream(e *env, l *loaded, t ir.Target, opt listing.Options) error {
	asJSON := c.Format == "json"
	if err := l.limits; err != nil { // listing to stdout (Run)
		l.err = err
		reportDiagnostics(e, l, asJSON)
		return &exitError{code: exitFail}
	}
	var compileErr error
	write := func(w io.Writer) error {
		lw := listing.NewWriter(w, opt)
		if asJSON {
			lw = listing.NewJSONWriter(w, opt)
		}
		var writeErr error
		p, err := l.lowering.CompileEach(func(p *ir.Plan, r int) func() error {
			b := lw.Render(p, r)
			return func() error {
				writeErr = lw.Emit(p, b)
				return writeErr
			}
		})
		if err != nil {
			if err != writeErr {
				compileErr = err
			}
			return err
		}
		return lw.Close(p)
	}
	var err error
	if c.Out == "" {
		err = write(e.stdout)
	} else {
		err = streamOutput(c.Out, "the listing", write)
	}
	if compileErr != nil {
		l.err = compileErr
		reportDiagnostics(e, l, asJSON)
		return &exitError{code: exitFail}
	}
	return err
}
