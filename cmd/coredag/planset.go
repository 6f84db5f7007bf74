package main

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planset"
)

func init() {
	register("select", "Say which plan of a plan set runs a message size on a world size, and why.", func() any { return &selectCmd{} })
	register("tune", "Write a plan set from the cost model's predictions (or from measurements) of several plans.", func() any { return &tuneCmd{} })
}

type selectCmd struct {
	Size   string   `required:"" placeholder:"SIZE" help:"The message size: 8B, 64KiB, 16MiB (the bytes of the collective's buffer on one rank)."`
	Params []string `short:"p" name:"param" sep:"none" placeholder:"ranks=R" help:"The world size, as -p ranks=R."`
	File   string   `arg:"" name:"set" help:"Plan set file."`
}

// planChecker loads a set's plan at a world size with its params, checked as coredag check
// does, and returns its postconditions. A signal stops it (the ctx it is given: the command's).
func planChecker() planset.Checker {
	return planner.SetPlanExpects(planner.Options{})
}

// loadSet loads and checks a set, printing its diagnostics.
func loadSet(e *env, path string) (*planset.Set, error) {
	s, src, err := planset.Load(e.ctx, path, planChecker())
	if err == nil {
		return s, nil
	}
	if cause := stop.Stopped(e.ctx, err); cause != nil { // interrupted: the interruption says it
		return nil, cause
	}
	var l diag.List
	if errors.As(err, &l) {
		diag.Print(e.stderr, err, diag.Sources{path: src})
		return nil, &exitError{code: exitFail}
	}
	return nil, usageError("%v", err)
}

func (c *selectCmd) Run(e *env) error {
	size, err := planset.ParseSize(c.Size)
	if err != nil {
		return usageError("--size %s: %v", c.Size, err)
	}
	ps, err := elaborate.ParseParams(c.Params)
	if err != nil {
		return usageError("-p %v", err)
	}
	ranks, ok := ps["ranks"]
	if !ok || len(ps) != 1 {
		return usageError("-p: give the world size, and only it: -p ranks=R")
	}
	s, err := loadSet(e, c.File)
	if err != nil {
		return err
	}
	ch, err := s.Select(size, ranks)
	if err != nil {
		return &exitError{code: exitFail, err: err}
	}
	fmt.Fprintf(e.stdout, "%s", ch.Entry.File)
	for _, p := range ch.Entry.Params {
		fmt.Fprintf(e.stdout, " -p %s", p)
	}
	fmt.Fprintf(e.stdout, " -p ranks=%d", ranks)
	// The size param the library's Set.Open would set, when the line does not.
	lps, err := elaborate.ParseParams(ch.Entry.Params)
	if err != nil {
		return usageError("%s: %v", ch.Entry.Pos, err)
	}
	var note string
	if v, given := lps[s.SizeParam]; given {
		note = fmt.Sprintf("note: the line sets %s=%d: the plan's message is what that gives, not --size\n", s.SizeParam, v)
	} else {
		lps["ranks"] = ranks
		src, err := dsl.ReadFile(ch.Entry.File)
		if err != nil {
			return &exitError{code: exitFail, err: err}
		}
		n, ok, err := planner.SizeParam(e.ctx, ch.Entry.File, src, s.SizeParam, size, lps, elaborate.Options{})
		if cause := stop.Stopped(e.ctx, err); cause != nil {
			return cause
		}
		switch {
		case err != nil:
			note = fmt.Sprintf("note: %s is not set: %v\n", s.SizeParam, err)
		case ok:
			fmt.Fprintf(e.stdout, " -p %s=%d", s.SizeParam, n)
		}
	}
	fmt.Fprintf(e.stdout, "\nwhy: %s\n%s", ch.Why, note)
	return nil
}

type tuneCmd struct {
	Target     string   `default:"connectx" help:"Target to compile for (see coredag targets)."`
	Sizes      string   `default:"8B..16MiB" placeholder:"LIST" help:"Message sizes to compare the plans at (as predict --sizes)."`
	Ranks      string   `default:"8" placeholder:"R,..." help:"World sizes to compare the plans at, increasing: the choice at R serves world sizes from R to the next one less 1 (the last: R alone)."`
	SizeParam  string   `name:"size-param" default:"n" placeholder:"NAME" help:"The param that sets the message size."`
	ParamsFile string   `name:"params" placeholder:"FILE" help:"The model's figures (coredag calibrate)."`
	Measure    bool     `help:"Choose by measurements (every plan run at every size on --provider) instead of predictions."`
	Provider   string   `default:"softnic" help:"With --measure: the NIC provider."`
	Iters      int      `default:"30" help:"With --measure: iterations per run."`
	Out        string   `short:"o" placeholder:"FILE" help:"Write the set to FILE (default: stdout); plan paths are written relative to FILE's directory."`
	Files      []string `arg:"" name:"plan" help:"Plan files to choose among; they must expect the same collective."`
}

func (c *tuneCmd) Run(e *env) error {
	var ranks []int64
	for _, r := range strings.Split(c.Ranks, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(r), 10, 64)
		if err != nil || v < 1 || (len(ranks) > 0 && v <= ranks[len(ranks)-1]) {
			return usageError("--ranks %s: write increasing world sizes, e.g. 8,64", c.Ranks)
		}
		ranks = append(ranks, v)
	}
	sizes, err := parseSizes(c.Sizes)
	if err != nil {
		return usageError("--sizes %s: %v", c.Sizes, err)
	}
	if c.Out != "" {
		if err := checkOutput(e, "-o", c.Out, append([]string{c.ParamsFile}, c.Files...)...); err != nil {
			return err
		}
	}
	for _, f := range c.Files {
		if p := setPath(c.Out, f); strings.ContainsFunc(p, unicode.IsSpace) || strings.Contains(p, "#") {
			return usageError("%s: a plan set names its plans without quotes, so their paths may not hold spaces or #: rename or move the file", p)
		}
	}
	var coll ir.ExpectKind
	var collFrom string
	var out bytes.Buffer
	for ri, r := range ranks {
		pc := &predictCmd{Target: c.Target, Sizes: c.Sizes, SizeParam: c.SizeParam, ParamsFile: c.ParamsFile,
			Measure: c.Measure, Provider: c.Provider, Iters: c.Iters, Stat: "median", Files: c.Files}
		pc.Type = "f32"
		pc.paramFlags.Params = []string{fmt.Sprintf("ranks=%d", r)}
		cs, err := pc.curves(e)
		if err != nil {
			return err
		}
		if ri == 0 {
			for i, f := range c.Files {
				exps, err := planChecker()(e.ctx, f, r, nil)
				if cause := stop.Stopped(e.ctx, err); cause != nil {
					return cause
				}
				if err != nil {
					return fmt.Errorf("%s: %v", f, headLine(err.Error()))
				}
				if len(exps) == 0 {
					return usageError("%s: the plan has no expect: a set's plans must say which collective they compute", f)
				}
				if i == 0 {
					coll, collFrom = exps[0].Kind, f
					fmt.Fprintf(&out, "# written by coredag tune --ranks %s --sizes %s --target %s", c.Ranks, c.Sizes, c.Target)
					if c.Measure {
						fmt.Fprintf(&out, " --measure (on %s)", c.Provider)
					} else if c.ParamsFile != "" {
						fmt.Fprintf(&out, " --params %s", c.ParamsFile)
					}
					fmt.Fprintf(&out, "\ncollective %s\n", coll)
					if c.SizeParam != planset.DefaultSizeParam {
						fmt.Fprintf(&out, "size-param %s\n", c.SizeParam)
					}
				} else if exps[0].Kind != coll {
					return usageError("%s computes %s but %s computes %s: a set serves one collective", f, exps[0].Kind, collFrom, coll)
				}
			}
		}
		rlo, rhi := strconv.FormatInt(r, 10), strconv.FormatInt(r, 10)
		if ri+1 < len(ranks) {
			rhi = strconv.FormatInt(ranks[ri+1]-1, 10)
		}
		rr := rlo
		if rhi != rlo {
			rr = rlo + ".." + rhi
		}
		// the fastest plan at each size; a run of sizes with the same winner is one entry, from
		// its first size (0 for the first run) to the next run's first size (open for the last)
		best := func(k int) int {
			b := 0
			for i := range cs {
				if cs[i].time(k) < cs[b].time(k) {
					b = i
				}
			}
			return b
		}
		start := 0
		for k := 1; k <= len(sizes); k++ {
			if k < len(sizes) && best(k) == best(start) {
				continue
			}
			lo, hi := "0", ""
			if start > 0 {
				lo = planset.FormatSize(sizes[start])
			}
			if k < len(sizes) {
				hi = planset.FormatSize(sizes[k])
			}
			fmt.Fprintf(&out, "plan %s sizes %s..%s ranks %s\n", setPath(c.Out, c.Files[best(start)]), lo, hi, rr)
			start = k
		}
	}
	if c.Out == "" {
		_, err := e.stdout.Write(out.Bytes())
		return err
	}
	return writeOutput(c.Out, "the plan set", out.Bytes())
}

// time is the curve's measured time at size index k when measured, else its prediction.
func (c *curve) time(k int) float64 {
	if c.measured != nil {
		return c.measured[k]
	}
	return c.ns[k]
}

// setPath writes a plan's path relative to the set file's directory when it can.
func setPath(setFile, plan string) string {
	if setFile == "" {
		return plan
	}
	dir, err := filepath.Abs(filepath.Dir(setFile))
	if err != nil {
		return plan
	}
	abs, err := filepath.Abs(plan)
	if err != nil {
		return plan
	}
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		return plan
	}
	return rel
}
