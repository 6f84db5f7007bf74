package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/emicklei/dot"

	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/viz"
)

func init() {
	register("dot", "Draw a plan with Graphviz: the op graph or the compiled WQE chains, as DOT, SVG or PNG.", func() any { return &dotCmd{} })
}

// dotHelp is the dot command's --help text after the flag list.
const dotHelp = `SVG and PNG are drawn by Graphviz's dot program, run as a child process with the DOT text
on its stdin: dot from PATH, or the program named by the environment variable ` + viz.DotEnv + `
(an absolute path). Without Graphviz, write .dot and lay it out elsewhere.`

type dotCmd struct {
	paramFlags
	View    string        `default:"graph" enum:"graph,plan" help:"What to draw: graph (ops and dependencies) or plan (compiled WQE chains per queue)."`
	Target  string        `default:"connectx" help:"Target to compile for with --view plan."`
	Rank    []int         `help:"Draw only these ranks (repeatable); others reached by transfers appear as one node."`
	Out     string        `short:"o" placeholder:"FILE" help:"Write to FILE; the format follows its extension (.dot, .svg, .png). Default: DOT on stdout."`
	Limit   int           `default:"400" help:"Fold loop bodies, then ranks, into summary nodes above this many nodes."`
	Full    bool          `help:"Draw every node, whatever the count (SVG and PNG: at most 4000 nodes in the graph view, 1500 in the plan view)."`
	Timeout time.Duration `default:"5m" help:"Stop Graphviz's layout (SVG, PNG) after this long."`
	File    string        `arg:"" name:"file" help:"Plan file (- for stdin)."`
}

// Help is printed by --help after the flags.
func (c *dotCmd) Help() string { return dotHelp }

// bytesPerDrawnOp is about what dot --full takes in memory per op it draws: the drawing's nodes
// and edges, its DOT text and the copies made of it (3.7 to 4 KiB measured at 20 to 80 thousand
// ops of the ring allreduce, graph view).
const bytesPerDrawnOp = 4 << 10

func (c *dotCmd) Run(e *env) error {
	format := viz.DOT
	if c.Out != "" {
		f, err := viz.FormatForFile(c.Out)
		if err != nil {
			return usageError("%v", err)
		}
		format = f
		if err := checkOutput(e, "-o", c.Out, c.File); err != nil {
			return err
		}
	}
	if c.Limit <= 0 {
		return usageError("--limit %d: want a positive node count", c.Limit)
	}
	if c.Timeout <= 0 {
		return usageError("--timeout %v: want a positive duration", c.Timeout)
	}
	if _, err := ir.LookupTarget(c.Target); err != nil { // used by --view plan alone: check it for every view
		return usageError("--target: %v", err)
	}
	l, err := mustLoad(e, c.File, c.paramFlags, false, loadOptions{})
	if err != nil {
		return err
	}
	g := l.graph
	for _, r := range c.Rank {
		if r < 0 || r >= g.Ranks {
			return usageError("--rank %d: plan %s has ranks 0..%d", r, g.Name, g.Ranks-1)
		}
	}
	if c.Full {
		drawn := int64(len(g.Ops))
		if len(c.Rank) > 0 {
			drawn = 0
			for i := range g.Ops {
				if slices.Contains(c.Rank, int(g.Ops[i].Rank)) {
					drawn++
				}
			}
		}
		need := budget.Mul(drawn, bytesPerDrawnOp)
		if err := l.budget.Check(need, fmt.Sprintf("--full draws %s, about %s of memory (%s each)", english.Plural(int(drawn), "op"), budget.Format(need), budget.Format(bytesPerDrawnOp)),
			"fold the view without --full, or draw fewer ranks with --rank"); err != nil {
			return refuse(e, l, err)
		}
	}
	opts := viz.Options{Ranks: c.Rank, Limit: c.Limit, Full: c.Full}
	var d *dot.Graph
	bound, edgeBound := viz.MaxGraphLayout, viz.MaxGraphLayoutEdges
	switch c.View {
	case "plan":
		t, err := ir.LookupTarget(c.Target)
		if err != nil {
			return usageError("%v", err)
		}
		p, err := lower.Compile(e.ctx, g, t)
		if cause := stop.Stopped(e.ctx, err); cause != nil { // interrupted: the interruption says it
			return cause
		}
		if err != nil {
			printDiagnostics(e.stderr, &loaded{path: l.path, src: l.src, err: err})
			return &exitError{code: exitFail}
		}
		d, bound, edgeBound = viz.Plan(p, opts), viz.MaxPlanLayout, viz.MaxPlanLayoutEdges
	default:
		d = viz.Graph(g, opts)
	}
	if format != viz.DOT {
		n, m := viz.Nodes(d), viz.Edges(d)
		var over string
		limit := bound
		switch {
		case n > bound:
			over = fmt.Sprintf("%d nodes; Graphviz lays out at most about %d", n, bound)
		case m > edgeBound:
			over = fmt.Sprintf("%d nodes and %d edges; Graphviz lays out at most about %d edges", n, m, edgeBound)
			limit = max(1, int(int64(n)*int64(edgeBound)/int64(m))) // folding drops edges with nodes
		}
		if over != "" {
			how := fmt.Sprintf("fold it with --limit %d or less", limit)
			if c.Full {
				how = fmt.Sprintf("fold it without --full (--limit %d or less)", limit)
			}
			return fmt.Errorf("the %s view of %s has %s of this view in 10 s: %s, draw fewer ranks with --rank, or write .dot and lay it out yourself",
				c.View, g.Name, over, how)
		}
	}
	text := d.String()
	ctx, cancel := context.WithTimeout(e.ctx, c.Timeout)
	defer cancel()
	var buf bytes.Buffer
	if err := viz.RenderContext(ctx, []byte(text), format, &buf, viz.RenderOptions{}); err != nil {
		if errors.Is(err, viz.ErrTimeout) {
			return fmt.Errorf("%w (--timeout %v)\n(draw fewer nodes with a lower --limit or --rank, allow more time with --timeout, or write .dot)", err, c.Timeout)
		}
		return err
	}
	if c.Out == "" {
		_, err := e.stdout.Write(buf.Bytes())
		return err
	}
	return writeOutput(c.Out, "the drawing", buf.Bytes())
}
