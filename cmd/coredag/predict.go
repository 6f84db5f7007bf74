package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/internal/intlit"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/msccl"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/predict"
)

func init() {
	register("predict", "Predict a plan's time over message sizes with the cost model (coredag calibrate measures its figures).", func() any { return &predictCmd{} })
}

type predictCmd struct {
	paramFlags
	Target     string   `default:"connectx" help:"Target to compile for (see coredag targets)."`
	Sizes      string   `default:"8B..16MiB" placeholder:"LIST" help:"Message sizes: A..B (every power of two from A to B) or a comma list, with B, KiB, MiB, GiB, TiB."`
	SizeParam  string   `name:"size-param" default:"n" placeholder:"NAME" help:"The param that sets the message size (it must scale the plan's slices linearly)."`
	ParamsFile string   `name:"params" placeholder:"FILE" help:"The model's figures, as coredag calibrate writes them (default: a guess for an RDMA NIC)."`
	Plot       string   `placeholder:"FILE" help:"Draw predicted time against size (log-log) with crossovers marked, as SVG or PNG by FILE's extension."`
	Measure    bool     `help:"Also run every plan at every size (on --provider, every rank in this process) and print the measured median beside the prediction, with the error."`
	Provider   string   `default:"softnic" help:"With --measure: the NIC provider to run on (softnic, or ofi in a build with -tags ofi)."`
	OFIProv    string   `name:"ofi-provider" placeholder:"NAME" help:"With --measure --provider ofi: the libfabric provider."`
	Iters      int      `default:"100" help:"With --measure: iterations per run."`
	Stat       string   `default:"median" enum:"median,min" help:"With --measure: which iteration's time is compared, median or min (the fastest: steadier on a loaded machine)."`
	Clock      string   `default:"wall" enum:"wall,cpu" help:"With --measure: which clock times an iteration, wall or cpu (the CPU time of the thread that runs every rank)."`
	Model      string   `default:"auto" enum:"auto,ops,symmetric" help:"ops: simulate every rank's ops; symmetric: simulate one rank of a plan whose ranks are alike (rank 0 moved by a rotation or xor of the ranks, checked on --samples ranks); auto: symmetric when the plan has more than 1Mi ops over its ranks and is symmetric, else ops."`
	Samples    int      `default:"8" help:"With the symmetric model: the ranks besides rank 0 that are elaborated and compared with it (every rank when there are no more)."`
	Files      []string `arg:"" name:"plan" help:"Plan files (.dag or MSCCL .xml)."`
}

// sizedPlan is one plan ready to be predicted at any size.
type sizedPlan struct {
	name  string
	plan  *ir.Plan // compiled at size param = 1 when linear
	unit  int64    // bytes of the message at size param = 1
	param int64    // the size param as the plan declares it (or as -p sets it)
	model string   // how it is simulated, for the reader (printPredictions)
	// at elaborates the plan with the size param at n (unchecked: the plan was checked at its
	// own params, and the size param changes no structure, which Linear verified)
	at func(n int64) (*ir.Graph, error)
}

// curve is one plan's predictions, by requested size.
type curve struct {
	name     string
	model    string  // how the plan was simulated
	bytes    []int64 // the size predicted (the requested one rounded to the plan's unit)
	ns       []float64
	measured []float64 // with --measure
}

func (c *predictCmd) Run(e *env) error {
	if c.Plot != "" {
		if ext := strings.ToLower(filepath.Ext(c.Plot)); ext != ".svg" && ext != ".png" {
			return usageError("--plot %s: the file must end in .svg or .png", c.Plot)
		}
		if err := checkOutput(e, "--plot", c.Plot, c.Files...); err != nil {
			return err
		}
	}
	sizes, par, err := c.setup()
	if err != nil {
		return err
	}
	curves, err := c.curves(e)
	if err != nil {
		return err
	}
	printPredictions(e.stdout, par, c.Target, sizes, curves)
	if c.Plot != "" {
		out, err := plotCurves(curves, c.Plot, par)
		if err != nil {
			return fmt.Errorf("--plot: %v", err)
		}
		return writeOutput(c.Plot, "the plot", out)
	}
	return nil
}

// setup reads --sizes and --params, and checks that -p leaves the size param to --sizes.
func (c *predictCmd) setup() ([]int64, predict.Params, error) {
	sizes, err := parseSizes(c.Sizes)
	if err != nil {
		return nil, predict.Params{}, usageError("--sizes %s: %v", c.Sizes, err)
	}
	params, err := c.values()
	if err != nil {
		return nil, predict.Params{}, err
	}
	if v, ok := params[c.SizeParam]; ok {
		return nil, predict.Params{}, usageError("-p %s=%d: --sizes sets %s (--size-param) at each size: drop the -p", c.SizeParam, v, c.SizeParam)
	}
	par := predict.Default()
	if c.ParamsFile != "" {
		if par, err = predict.ReadParams(c.ParamsFile); err != nil {
			return nil, par, usageError("--params: %v", err)
		}
	}
	return sizes, par, nil
}

// curves predicts (and with --measure, measures) every plan at every size.
func (c *predictCmd) curves(e *env) ([]curve, error) {
	sizes, par, err := c.setup()
	if err != nil {
		return nil, err
	}
	tg, err := ir.LookupTarget(c.Target)
	if err != nil {
		return nil, usageError("--target: %v", err)
	}
	var run nic.Provider
	if c.Measure {
		if c.Iters < 1 {
			return nil, usageError("--iters %d: must be at least 1", c.Iters)
		}
		if run, _, err = openRunProvider(c.Provider, c.OFIProv); err != nil {
			return nil, err
		}
		defer run.Close()
	}
	var curves []curve
	// A signal stops the elaborations, the compilation, the simulations and the runs: the
	// command then reports the interruption alone (stop.Stopped).
	for _, f := range c.Files {
		sp, err := c.prepare(e, f, tg, par)
		if cause := stop.Stopped(e.ctx, err); cause != nil {
			return nil, cause
		}
		if err != nil {
			return nil, err
		}
		cv := curve{name: sp.name, model: sp.model}
		for _, s := range sizes {
			q := math.Round(float64(s) / float64(sp.unit))
			if q >= float64(math.MaxInt64/sp.unit) {
				return nil, usageError("--sizes: %s: %s takes sizes in steps of %s, and this many steps pass the largest integer", formatBytes(s), f, formatBytes(sp.unit))
			}
			k := max(1, int64(q))
			res, err := predict.Simulate(e.ctx, sp.plan, par, predict.Options{Scale: float64(k)})
			if cause := stop.Stopped(e.ctx, err); cause != nil {
				return nil, cause
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %v", f, err)
			}
			cv.bytes = append(cv.bytes, k*sp.unit)
			cv.ns = append(cv.ns, res.Time)
			if run != nil {
				ns, err := measureAt(e, sp, k, tg, run, measureOpts{c.Iters, c.Stat, c.Clock})
				if cause := stop.Stopped(e.ctx, err); cause != nil {
					return nil, cause
				}
				if err != nil {
					return nil, fmt.Errorf("%s at %s: %v", f, formatBytes(k*sp.unit), err)
				}
				cv.measured = append(cv.measured, ns)
			}
		}
		curves = append(curves, cv)
	}
	return curves, nil
}

// prepare checks the plan at its params, then compiles it with the size param at 1 (after
// checking that the plan's slices scale linearly with it); or, with the symmetric model, folds
// it onto one rank (prepareSymmetric).
func (c *predictCmd) prepare(e *env, path string, tg ir.Target, par predict.Params) (*sizedPlan, error) {
	switch c.Model {
	case "", "auto", "symmetric":
		sp, err := c.prepareSymmetric(e, path, tg, par)
		if sp != nil || err != nil {
			return sp, err
		}
	case "ops":
	default:
		return nil, usageError("--model %s: one of auto, ops, symmetric", c.Model)
	}
	l, err := mustLoad(e, path, c.paramFlags, false, loadOptions{})
	if err != nil {
		return nil, err
	}
	sp := &sizedPlan{name: l.graph.Name}
	v, ok := l.graph.Param(c.SizeParam)
	if !ok {
		return nil, usageError("%s: the plan has no param %q to set the size with (--size-param)", l.path, c.SizeParam)
	}
	sp.param = v
	params, err := c.values()
	if err != nil {
		return nil, err
	}
	sp.at = func(n int64) (*ir.Graph, error) {
		ps := map[string]int64{}
		for k, v := range params {
			ps[k] = v
		}
		ps[c.SizeParam] = n
		f, err := planner.Parse(l.path, l.src, msccl.Options{Elem: c.Type})
		if err != nil {
			return nil, err
		}
		return elaborate.Elaborate(e.ctx, f, ps, elaborate.Within(l.budget))
	}
	g1, err := sp.at(1)
	if err != nil {
		return nil, c.atSize(l.path, 1, err)
	}
	g2, err := sp.at(2)
	if err != nil {
		return nil, c.atSize(l.path, 2, err)
	}
	if ok, why := predict.Linear(g1, g2, 2); !ok {
		return nil, usageError("%s: the message size is not linear in %s: %s", l.path, c.SizeParam, why)
	}
	sp.unit, err = g1.MessageBytes()
	if err != nil {
		return nil, usageError("%s: %v", l.path, err)
	}
	if sp.plan, err = lower.Compile(e.ctx, g1, tg); err != nil {
		return nil, fmt.Errorf("%s: compile for %s: %v", l.path, tg.Name, err)
	}
	sp.model = fmt.Sprintf("op by op, every one of its %s simulated", english.Plural(g1.Ranks, "rank"))
	return sp, nil
}

// atSize is the error of elaborating the plan at path with the size param at n: a refusal of
// the memory budget as check reports it, else the mistake, naming the file once.
func (c *predictCmd) atSize(path string, n int64, err error) error {
	if r := refusal(path, err); r != nil {
		return r
	}
	return errors.New(inPlan(path, fmt.Sprintf("at %s = %d", c.SizeParam, n), err))
}

// measureAt compiles the plan with its size param at k and runs it.
func measureAt(e *env, sp *sizedPlan, k int64, tg ir.Target, p nic.Provider, m measureOpts) (float64, error) {
	g, err := sp.at(k)
	if err != nil {
		return 0, err
	}
	plan, err := lower.Compile(e.ctx, g, tg)
	if err != nil {
		return 0, err
	}
	return measurePlan(e.ctx, plan, p, m)
}

func headLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// parseSizes reads "8B..16MiB" (the powers of two between) or "1KiB,3MiB": the value of
// --sizes, whose errors (without the flag) say what it takes.
func parseSizes(s string) ([]int64, error) {
	one := func(raw string) (int64, error) {
		raw = strings.TrimSpace(raw)
		x := strings.ReplaceAll(raw, " ", "")
		if !strings.HasSuffix(x, "iB") {
			x = strings.TrimSuffix(x, "B")
		}
		if x == "" {
			return 0, fmt.Errorf("a size is missing; %s", sizesSyntax())
		}
		n, err := intlit.Parse(x)
		if err != nil {
			return 0, fmt.Errorf("%q is not a size; %s", raw, sizesSyntax())
		}
		if n < 1 {
			return 0, fmt.Errorf("%q: a message size must be at least 1 byte; %s", raw, sizesSyntax())
		}
		return n, nil
	}
	if a, b, ok := strings.Cut(s, ".."); ok {
		lo, err := one(a)
		if err != nil {
			return nil, err
		}
		hi, err := one(b)
		if err != nil {
			return nil, err
		}
		if hi < lo {
			return nil, fmt.Errorf("the range ends below its start; %s", sizesSyntax())
		}
		var out []int64
		for x := lo; ; x *= 2 {
			out = append(out, x)
			if x > hi/2 { // the next would pass hi (or overflow)
				return out, nil
			}
		}
	}
	var out []int64
	for _, x := range strings.Split(s, ",") {
		n, err := one(x)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	slices.Sort(out) // a list in any order: tune's switches assume increasing sizes
	return slices.Compact(out), nil
}

// sizesSyntax says what --sizes takes.
func sizesSyntax() string {
	return "write a range A..B, every power of two from A to B, as in --sizes 8B..16MiB, or a list, as in --sizes 1KiB,3MiB; " +
		"sizes are whole bytes, with B, " + intlit.UnitNames()
}

// formatBytes prints a size as 8 B, 64 KiB, 1.5 MiB.
func formatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f := float64(n)
	u := 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if f == math.Trunc(f) {
		return fmt.Sprintf("%d %s", int64(f), units[u])
	}
	return fmt.Sprintf("%.3g %s", f, units[u])
}

// formatNs prints a time in nanoseconds with a unit.
func formatNs(ns float64) string {
	switch {
	case ns < 1e3:
		return fmt.Sprintf("%.3g ns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.3g µs", ns/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.3g ms", ns/1e6)
	}
	return fmt.Sprintf("%.3g s", ns/1e9)
}

// crossover is where two curves change order.
type crossover struct {
	a, b  string // a is faster below, b above
	bytes float64
	ns    float64
}

// crossovers finds, for every pair of curves, where the faster of the two changes, by
// interpolating on the log-log scale between the two sizes around the change.
func crossovers(cs []curve) []crossover {
	var out []crossover
	for i := range cs {
		for j := i + 1; j < len(cs); j++ {
			a, b := &cs[i], &cs[j]
			for k := 1; k < len(a.ns) && k < len(b.ns); k++ {
				d0 := math.Log(a.ns[k-1]) - math.Log(b.ns[k-1])
				d1 := math.Log(a.ns[k]) - math.Log(b.ns[k])
				if d0 == 0 || d0*d1 >= 0 {
					continue
				}
				f := d0 / (d0 - d1)
				x0, x1 := math.Log(float64(a.bytes[k-1])), math.Log(float64(a.bytes[k]))
				y0, y1 := math.Log(a.ns[k-1]), math.Log(a.ns[k])
				c := crossover{bytes: math.Exp(x0 + f*(x1-x0)), ns: math.Exp(y0 + f*(y1-y0))}
				if d0 < 0 {
					c.a, c.b = a.name, b.name
				} else {
					c.a, c.b = b.name, a.name
				}
				out = append(out, c)
			}
		}
	}
	return out
}

// switches are the crossovers where the fastest plan changes, in size order.
func switches(cs []curve) []crossover {
	var out []crossover
	best := func(k int) int {
		b := 0
		for i := range cs {
			if cs[i].ns[k] < cs[b].ns[k] {
				b = i
			}
		}
		return b
	}
	if len(cs) < 2 {
		return nil
	}
	for k := 1; k < len(cs[0].ns); k++ {
		i, j := best(k-1), best(k)
		if i == j {
			continue
		}
		for _, x := range crossovers([]curve{cs[i], cs[j]}) {
			if x.bytes >= float64(cs[i].bytes[k-1])*0.999 && x.bytes <= float64(cs[i].bytes[k])*1.001 {
				out = append(out, x)
			}
		}
	}
	return out
}

// predictionErrors lists the absolute relative errors of every measured prediction (nil when
// nothing was measured).
func predictionErrors(cs []curve) []float64 {
	var out []float64
	for _, c := range cs {
		for i := range c.measured {
			out = append(out, math.Abs(c.ns[i]/c.measured[i]-1))
		}
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func printPredictions(w io.Writer, par predict.Params, target string, sizes []int64, cs []curve) {
	fmt.Fprintf(w, "predicted time of one iteration, target %s, figures: %s", target, par.Provider)
	if par.Workers > 0 {
		fmt.Fprintf(w, " (%d shared worker(s))", par.Workers)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "size\t")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t", c.name)
		if c.measured != nil {
			fmt.Fprint(tw, "measured\terror\t")
		}
	}
	fmt.Fprintln(tw)
	rounded := false
	for i, s := range sizes {
		fmt.Fprintf(tw, "%s\t", formatBytes(s))
		for _, c := range cs {
			mark := ""
			if c.bytes[i] != s {
				mark, rounded = "*", true
			}
			fmt.Fprintf(tw, "%s%s\t", formatNs(c.ns[i]), mark)
			if c.measured != nil {
				fmt.Fprintf(tw, "%s\t%+.0f%%\t", formatNs(c.measured[i]), 100*(c.ns[i]/c.measured[i]-1))
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if errs := predictionErrors(cs); errs != nil {
		fmt.Fprintf(w, "error of the prediction (predicted / measured - 1) over %d runs: median of the absolute errors %.0f%%, largest %.0f%%\n", len(errs), 100*median(errs), 100*slices.Max(errs))
	}
	if rounded {
		fmt.Fprintln(w, "* at the nearest size the plan has (its size param times its unit):")
		for _, c := range cs {
			var at []string
			for i, s := range sizes {
				if c.bytes[i] != s {
					at = append(at, fmt.Sprintf("%s→%s", formatBytes(s), formatBytes(c.bytes[i])))
				}
			}
			if len(at) > 0 {
				fmt.Fprintf(w, "  %s: %s\n", c.name, strings.Join(at, ", "))
			}
		}
	}
	for _, c := range cs {
		if c.model != "" {
			fmt.Fprintf(w, "model: %s: %s\n", c.name, c.model)
		}
	}
	for _, x := range switches(cs) {
		fmt.Fprintf(w, "fastest: %s below about %s, %s above (%s)\n", x.a, formatBytes(int64(math.Round(x.bytes))), x.b, formatNs(x.ns))
	}
	for _, x := range crossovers(cs) {
		fmt.Fprintf(w, "crossover: %s is faster than %s below about %s (%s)\n", x.a, x.b, formatBytes(int64(math.Round(x.bytes))), formatNs(x.ns))
	}
}
