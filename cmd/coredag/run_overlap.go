package main

import (
	"fmt"
	"math"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/provider"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/internal/stop"
)

// overlapReport is the "overlap" object of `run --overlap --json` (docs/run-json.md).
type overlapReport struct {
	Iters     int         `json:"iters"`
	Percent   float64     `json:"percent"`
	Spread    [2]float64  `json:"spread"` // the rounds' own figures at the first and third quartile
	PureNS    int64       `json:"pure_ns"`
	ComputeNS int64       `json:"compute_ns"`
	TotalNS   int64       `json:"total_ns"`
	Units     int         `json:"compute_units"`
	CPUs      int         `json:"cpus"`
	CPU       *overlapCPU `json:"cpu_ns_per_iter,omitempty"`
}

// overlapCPU is the CPU time per iteration, where the OS tells (Linux).
type overlapCPU struct {
	Communication int64 `json:"communication"`
	ComputeThread int64 `json:"compute_thread"`
	Rest          int64 `json:"rest"`
}

// runOverlap is `run --overlap`: every rank in this process on the software NIC or libfabric,
// measured by exec's Session.Overlap, memory checked after every iteration.
func (c *runCmd) runOverlap(e *env, prov provider.Entry) error {
	switch {
	case !prov.AllRanks || c.perProcess(prov):
		return usageError("--overlap runs every rank in this process: use --provider softnic, or ofi without --rank, --ranks and --bootstrap")
	case c.Explore > 0 || c.Timeline != "" || c.OnHang != "" || len(c.Dump) > 0:
		return usageError("--overlap measures one run: drop --explore, --timeline, --on-hang and --dump")
	}
	if err := c.checkProvider(prov); err != nil {
		return err
	}
	if !prov.Seeded && c.Seed != 0 {
		return usageError("--seed works with the software NIC only")
	}
	if c.Iters == 1 {
		// One round gives a figure the machine's noise can move anywhere; OSU's benchmarks also
		// run many rounds.
		c.Iters = defaultOverlapRounds
	}
	l, err := mustLoad(e, c.File, c.paramFlags, c.JSON, loadOptions{order: c.provenUnder()})
	if err != nil {
		return err
	}
	p, err := c.openProvider(e, prov, l.graph, -1, c.Seed)
	if err != nil {
		return err
	}
	defer p.Close()
	engine, plan, ref, err := c.setup(e, l, p.Caps(), p)
	if err != nil {
		return err
	}
	g := l.graph
	rep := runReport{File: l.path, Plan: g.Name, Ranks: g.Ranks, Target: plan.Target.Name, Seed: c.Seed, Iters: c.Iters}
	var o *exec.Overlap
	s, err := exec.Prepare(e.ctx, plan, p, exec.Options{Engine: engine, Seed: c.Seed, Reference: ref, NoTriggers: c.NoTriggers})
	if err == nil {
		defer s.Close()
		o, err = s.Overlap(e.ctx, c.Iters) // a signal stops it within an iteration
	}
	if cause := stop.Stopped(e.ctx, err); cause != nil { // SIGINT or SIGTERM: no verdict, the interruption says it
		return cause
	}
	var last *exec.Result
	if o != nil {
		for _, ph := range []struct {
			res  *exec.Result
			name string
		}{{o.Comm, "communication alone"}, {o.Both, "beside the compute loop"}} {
			if ph.res == nil {
				continue
			}
			if last == nil || err != nil {
				last = ph.res // the series that failed, else the communication alone
			}
			for _, v := range ph.res.Verdicts {
				for _, m := range v.Mismatches {
					rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("%s: %s", ph.name, m))
				}
			}
		}
	}
	rep.OK = err == nil && o.OK()
	if err != nil {
		rep.Error, rep.Diags = err.Error(), runDiagnostics(err, plan)
		if !c.JSON {
			fmt.Fprintf(e.stderr, "%s: run failed: ", diag.QuoteName(l.path))
			diag.Print(e.stderr, err, diag.Sources{l.path: l.src})
		}
	} else {
		rep.Overlap = &overlapReport{Iters: o.Iters, Percent: math.Round(o.Percent*10) / 10,
			Spread: [2]float64{math.Round(o.Spread[0]*10) / 10, math.Round(o.Spread[1]*10) / 10}, PureNS: o.Pure.Nanoseconds(),
			ComputeNS: o.Compute.Nanoseconds(), TotalNS: o.Total.Nanoseconds(), Units: o.Units, CPUs: o.CPUs}
		if o.CPUTimes {
			rep.Overlap.CPU = &overlapCPU{Communication: o.PureCPU.Nanoseconds(), ComputeThread: o.ComputeCPU.Nanoseconds(), Rest: o.RestCPU.Nanoseconds()}
		}
	}
	if last != nil {
		if rep.OK && len(g.Expects) > 0 { // the postconditions, on the values of the last iteration
			if rep.Expects, err = checkExpects(e.ctx, g, engine, plan.Target, last); err != nil {
				if cause := stop.Stopped(e.ctx, err); cause != nil {
					return cause
				}
				rep.OK, rep.Error = false, err.Error()
			}
			for _, x := range rep.Expects {
				rep.OK = rep.OK && x.Held
			}
		}
		rep.fill(last)
	}
	if c.JSON {
		if err := writeJSON(e.stdout, rep); err != nil {
			return err
		}
	} else if last != nil {
		printRun(e, diag.QuoteName(l.path), &rep, last, 1)
		if rep.Overlap != nil {
			printOverlap(e, o)
		}
	}
	if !rep.OK {
		return &exitError{code: exitFail}
	}
	return nil
}

// defaultOverlapRounds is how many rounds --overlap measures when --iters is not given.
const defaultOverlapRounds = 200

// printOverlap prints the overlap figures under printRun's lines (whose latency and counters are
// those of the communication alone).
func printOverlap(e *env, o *exec.Overlap) {
	fmt.Fprintf(e.stdout, "  overlap %.1f%% (middle half of the rounds %.1f%% to %.1f%%): communication alone %s, compute alone %s, both %s (medians of %s on %s; compute loop of %d units)\n",
		o.Percent, o.Spread[0], o.Spread[1], fmtDuration(o.Pure), fmtDuration(o.Compute), fmtDuration(o.Total), english.Plural(o.Iters, "round"), english.Plural(o.CPUs, "CPU"), o.Units)
	if o.CPUTimes {
		fmt.Fprintf(e.stdout, "  CPU time per iteration: communication alone %s (the process); both: compute thread %s, rest of the process %s (coredag's and the provider's threads)\n",
			fmtDuration(o.PureCPU), fmtDuration(o.ComputeCPU), fmtDuration(o.RestCPU))
	}
}
