package main

import (
	"bytes"
	"fmt"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/msccl"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/predict"
)

func init() {
	register("export", "Convert a .dag plan to another tool's algorithm format.", func() any { return &exportCmd{} })
}

type exportCmd struct {
	MSCCL exportMSCCLCmd `cmd:"" name:"msccl" help:"Write a checked two-sided plan (send, recv, reduce, copy, nop) as MSCCL-IR XML."`
	GOAL  exportGOALCmd  `cmd:"" name:"goal" help:"Write a checked plan as a GOAL schedule (LogGOPSim, ATLAHS): sends, receives, calcs and their dependencies; with --target of a triggered target, LogGOPSim2's puts, appends and counters."`
}

type exportGOALCmd struct {
	paramFlags
	ParamsFile string `name:"params" placeholder:"FILE" help:"The figures that turn host steps into calc times (coredag calibrate; default: predict's guess)."`
	Target     string `placeholder:"T" help:"Compile for triggered target T (triggered, triggered-cxi, triggered-sockets) and write its counters and thresholds in LogGOPSim2's form (put, append, tput, tappend, test); without it, the plan's graph as two-sided GOAL."`
	Out        string `short:"o" placeholder:"FILE" help:"Write the schedule to FILE (default: stdout)."`
	File       string `arg:"" name:"file" help:"Plan file (- for stdin)."`
}

func (c *exportGOALCmd) Run(e *env) error {
	par := predict.Default()
	if c.ParamsFile != "" {
		var err error
		if par, err = predict.ReadParams(c.ParamsFile); err != nil {
			return usageError("--params: %v", err)
		}
	}
	var tg *ir.Target
	if c.Target != "" {
		t, err := ir.LookupTarget(c.Target)
		if err != nil {
			return usageError("--target: %v", err)
		}
		if t.Trigger == nil {
			return usageError("--target %s: not a triggered target: only the triggered targets have counters to write (without --target the plan's graph is written)", c.Target)
		}
		tg = &t
	}
	if c.Out != "" {
		if err := checkOutput(e, "-o", c.Out, c.File, c.ParamsFile); err != nil {
			return err
		}
	}
	l, err := mustLoad(e, c.File, c.paramFlags, false, loadOptions{})
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if tg != nil {
		plan, err := lower.Compile(e.ctx, l.graph, *tg)
		if cause := stop.Stopped(e.ctx, err); cause != nil {
			return cause
		}
		if err != nil {
			return fmt.Errorf("%s: compile for %s: %v", l.path, tg.Name, err)
		}
		if err := predict.WriteGOALTriggered(&b, plan, par); err != nil {
			return err
		}
	} else if err := predict.WriteGOAL(&b, l.graph, par); err != nil {
		return err
	}
	if c.Out == "" {
		_, err := e.stdout.Write(b.Bytes())
		return err
	}
	return writeOutput(c.Out, "the schedule", b.Bytes())
}

type exportMSCCLCmd struct {
	paramFlags
	Coll string `placeholder:"NAME" help:"The coll attribute: the collective the algorithm implements (allreduce, allgather, alltoall, reduce_scatter, reduce, broadcast, custom; default: the plan's expect, else custom)."`
	Out  string `short:"o" placeholder:"FILE" help:"Write the XML to FILE (default: stdout)."`
	File string `arg:"" name:"file" help:"Plan file (- for stdin)."`
}

func (c *exportMSCCLCmd) Run(e *env) error {
	if c.Out != "" {
		if err := checkOutput(e, "-o", c.Out, c.File); err != nil {
			return err
		}
	}
	l, err := mustLoad(e, c.File, c.paramFlags, false, loadOptions{})
	if err != nil {
		return err
	}
	out, err := msccl.Export(l.graph, msccl.ExportOptions{Coll: c.Coll})
	if err != nil {
		diag.Print(e.stderr, err, diag.Sources{l.path: l.src})
		return &exitError{code: exitFail}
	}
	if c.Out == "" {
		_, err := e.stdout.Write(out)
		return err
	}
	return writeOutput(c.Out, "the algorithm", out)
}
