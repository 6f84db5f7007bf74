package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/predict"
	"github.com/coredag/coredag/simgrid"
)

func init() {
	register("simulate", "Run a plan on a network simulator (SimGrid, on a fat tree) and compare with coredag predict.", func() any { return &simulateCmd{} })
}

type simulateCmd struct {
	paramFlags
	Engine     string        `default:"simgrid" enum:"simgrid" help:"The simulator: simgrid (SimGrid's activities on a fat-tree platform; needs g++ and libsimgrid-dev)."`
	ParamsFile string        `name:"params" placeholder:"FILE" help:"The machine's figures, as coredag calibrate writes them, for both SimGrid's platform and predict (default: predict's guess for an RDMA NIC)."`
	FatTree    string        `name:"fat-tree" placeholder:"SPEC" help:"The platform's fat tree as SimGrid's topo_parameters, LEVELS;DOWN,...;UP,...;LINKS,... (default: two levels of full bisection for the ranks, 2;32,32;1,32;1,1 at 1024)."`
	Target     string        `default:"connectx" help:"The target predict compiles for."`
	NoPredict  bool          `name:"no-predict" help:"Do not run predict beside SimGrid."`
	Timeout    time.Duration `default:"10m" help:"Stop SimGrid after this long (building its engine the first time is not counted)."`
	Keep       string        `placeholder:"DIR" help:"Write the platform (platform.xml) and the schedule (schedule.txt) SimGrid runs to DIR, and keep them."`
	File       string        `arg:"" name:"file" help:"Plan file (.dag or MSCCL .xml; - for stdin)."`
}

func (c *simulateCmd) Run(e *env) error {
	par := predict.Default()
	if c.ParamsFile != "" {
		var err error
		if par, err = predict.ReadParams(c.ParamsFile); err != nil {
			return usageError("--params: %v", err)
		}
	}
	if c.Timeout <= 0 {
		return usageError("--timeout %v: must be positive", c.Timeout)
	}
	var tg ir.Target
	if !c.NoPredict {
		var err error
		if tg, err = ir.LookupTarget(c.Target); err != nil {
			return usageError("--target: %v", err)
		}
	}
	l, err := mustLoad(e, c.File, c.paramFlags, false, loadOptions{})
	if err != nil {
		return err
	}
	g := l.graph
	tree := simgrid.AutoFatTree(g.Ranks)
	if c.FatTree != "" {
		if tree, err = simgrid.ParseFatTree(c.FatTree); err != nil {
			return usageError("--fat-tree: %v", err)
		}
		if tree.Hosts() < g.Ranks {
			return usageError("--fat-tree %s: %d hosts, and the plan has %d ranks (the hosts are the product of the down counts)", c.FatTree, tree.Hosts(), g.Ranks)
		}
	}
	size, err := g.MessageBytes()
	if err != nil {
		size = -1
	}
	fmt.Fprintf(e.stdout, "plan %s, %d ranks, %d ops", g.Name, g.Ranks, len(g.Ops))
	if size >= 0 {
		fmt.Fprintf(e.stdout, ", message %s", formatBytes(size))
	}
	fmt.Fprintln(e.stdout)
	sched, err := simgrid.Build(g, par)
	if err != nil {
		return fmt.Errorf("%s: %v", l.path, err)
	}
	plat := simgrid.PlatformFor(tree, par, predict.MissShare(g, par, 1))
	fmt.Fprintf(e.stdout, "platform: fat tree %s, %d hosts; links of %s/s and %s each (%s host to host through the top)\n",
		tree, tree.Hosts(), formatBytes(int64(plat.LinkBps)), formatNs(plat.LinkLatency*1e9), formatNs(plat.LinkLatency*1e9*float64(2*tree.Levels)))
	if c.Keep != "" {
		if err := os.MkdirAll(c.Keep, 0o755); err != nil {
			return usageError("--keep: %v", err)
		}
	}
	b, err := c.budget()
	if err != nil {
		return err
	}
	res, err := simgrid.Run(e.ctx, sched, plat, simgrid.Options{Timeout: c.Timeout, Dir: c.Keep, CXX: os.Getenv("CXX"), MaxBytes: b.Bytes})
	if cause := stop.Stopped(e.ctx, err); cause != nil {
		return cause
	}
	if err != nil {
		if errors.Is(err, simgrid.ErrNoSimGrid) || errors.Is(err, simgrid.ErrBudget) {
			return usageError("%v", err)
		}
		return err
	}
	fmt.Fprintf(e.stdout, "simgrid:  %s (last: %s; %d activities, %d dependencies; SimGrid took %s, %s of CPU, and %s)\n",
		formatNs(res.Time), res.Last, res.Activities, sched.Dependencies(), fmtDuration(res.Wall), fmtDuration(res.CPU), formatBytes(res.MaxRSS))
	if c.NoPredict {
		return nil
	}
	t1 := time.Now()
	plan, err := lower.Compile(e.ctx, g, tg)
	if cause := stop.Stopped(e.ctx, err); cause != nil {
		return cause
	}
	if err != nil {
		return fmt.Errorf("%s: compile for %s: %v", l.path, tg.Name, err)
	}
	pr, err := predict.Simulate(e.ctx, plan, par, predict.Options{})
	if cause := stop.Stopped(e.ctx, err); cause != nil {
		return cause
	}
	if err != nil {
		return fmt.Errorf("%s: %v", l.path, err)
	}
	fmt.Fprintf(e.stdout, "predict:  %s (last: %s; target %s; took %s)\n", formatNs(pr.Time), pr.Last, tg.Name, fmtDuration(time.Since(t1)))
	fmt.Fprintf(e.stdout, "simgrid / predict - 1: %+.1f%%\n", (res.Time/pr.Time-1)*100)
	return nil
}
