package main

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/provider"
	"github.com/coredag/coredag/internal/atomicfile"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/viz"
)

func init() {
	register("run", "Run a plan on the software NIC (or a real RDMA device: --provider verbs) and check its memory against the reference.", func() any { return &runCmd{} })
}

type runCmd struct {
	paramFlags
	verbsFlags
	Engine     string   `default:"auto" enum:"auto,offload,poll" help:"Engine: offload (the NIC walks compiled WAIT/ENABLE chains), poll (the CPU walks the DAG) or auto (offload when the NIC has cross-channel)."`
	Target     string   `placeholder:"NAME" help:"Target to compile for (default: connectx for offload, generic for poll)."`
	Iters      int      `default:"1" help:"Iterations (buffers are reset before each, outside the timed region); with --overlap, rounds (default 200)."`
	Seed       uint64   `help:"Schedule seed of the software NIC (0: round-robin)."`
	Explore    int      `placeholder:"K" help:"Run K times with seeds S, S+1, ... (S = --seed, or 1) to explore interleavings."`
	JSON       bool     `help:"Print the result as JSON on stdout."`
	Dump       []string `placeholder:"BUF" help:"Add the final contents of buffer BUF on every rank (repeatable)."`
	NoTriggers bool     `name:"no-triggers" help:"Poll engine on a NIC with triggers (verbs): post every work request from the engine's loop instead of arming triggers that post on a completion inside the poll (for comparison)."`
	OnHang     string   `name:"on-hang" placeholder:"FILE" help:"When the run is diagnosed as stuck, draw the plan view with the stuck WAIT and the WQE it awaits highlighted into FILE (.svg, .png or .dot)."`
	Timeline   string   `placeholder:"FILE" help:"Record when every op completed in every iteration and write it to FILE as trace-event JSON (open it in Perfetto or chrome://tracing). Needs the poll engine (auto picks it); with --provider verbs each rank writes FILE with .rankR before the extension."`
	Overlap    bool     `help:"Measure overlap as OSU does: the iterations alone, a host compute loop sized to match them alone, then both together; print the overlap percentage and the CPU time of the compute thread and of the rest of the process (every rank in this process)."`
	File       string   `arg:"" name:"file" help:"Plan file (- for stdin)."`
}

// runReport is the --json output of run.
type runReport struct {
	File       string             `json:"file"`
	Plan       string             `json:"plan"`
	Ranks      int                `json:"ranks"`
	Engine     string             `json:"engine"`
	Target     string             `json:"target,omitempty"`
	Provider   string             `json:"provider"`
	Seed       uint64             `json:"seed"`
	Iters      int                `json:"iters"`
	OK         bool               `json:"ok"`
	Error      string             `json:"error,omitempty"`
	Diags      []diag.JSON        `json:"diagnostics,omitempty"` // the error, as diagnostics with codes and positions
	Mismatches []string           `json:"mismatches,omitempty"`
	LatencyNS  map[string]int64   `json:"latency_ns"`
	WQEs       uint64             `json:"wqes_posted"`
	Triggered  uint64             `json:"triggered"`
	CQEs       uint64             `json:"cqes_polled"`
	Waits      uint64             `json:"waits"`
	Enables    uint64             `json:"enables"`
	HostSteps  uint64             `json:"host_steps"`
	RNR        uint64             `json:"rnr_retries"`
	Buffers    map[string][][]any `json:"buffers,omitempty"`
	Runs       []exploredRun      `json:"explored,omitempty"`
	Expects    []expectReport     `json:"expects,omitempty"` // postconditions checked on values (expect.go)
	Overlap    *overlapReport     `json:"overlap,omitempty"`
}

// exploredRun is the record of one run of --explore (fields in the order JSON maps print in).
type exploredRun struct {
	MedianNS int64  `json:"median_ns"`
	OK       bool   `json:"ok"`
	Seed     uint64 `json:"seed"`
}

// exploredRunBytes is what the report holds per explored run: the record, and with --json its
// text (the encoder builds the whole document before writing it).
func exploredRunBytes(asJSON bool) int64 {
	n := int64(unsafe.Sizeof(exploredRun{}))
	if asJSON {
		n += int64(len(`{"median_ns": -9223372036854775808, "ok": false, "seed": 18446744073709551615},`)) + 8*4 // and indentation
	}
	return n
}

func (c *runCmd) Run(e *env) error {
	if c.Explore < 0 {
		return usageError("--explore %d: need a number of runs, at least 1", c.Explore)
	}
	prov, err := provider.Lookup(c.Provider)
	if err != nil {
		return usageError("--provider: %v", err)
	}
	if c.NoTriggers && c.Engine == "offload" {
		return usageError("--no-triggers changes how the polling engine posts: it has no effect with --engine offload")
	}
	seen := map[string]bool{} // --dump data --dump data: once
	c.Dump = slices.DeleteFunc(c.Dump, func(b string) bool { dup := seen[b]; seen[b] = true; return dup })
	if c.Overlap {
		return c.runOverlap(e, prov)
	}
	if err := c.checkProvider(prov); err != nil {
		return err
	}
	if c.perProcess(prov) {
		return c.runPerProcess(e, prov)
	}
	if !prov.Seeded && (c.Explore > 0 || c.OnHang != "" || c.Seed != 0) {
		return usageError("--explore, --seed and --on-hang work with the software NIC only")
	}
	l, err := mustLoad(e, c.File, c.paramFlags, c.JSON, loadOptions{order: c.provenUnder()})
	if err != nil {
		return err
	}
	g := l.graph
	for _, b := range c.Dump {
		if _, ok := exec.BufferByName(g, b); !ok {
			return usageError("--dump %s: plan %s has no buffer %s", b, g.Name, b)
		}
	}
	if c.OnHang != "" {
		if _, err := viz.FormatForFile(c.OnHang); err != nil {
			return usageError("--on-hang: %v", err)
		}
	}
	if err := c.checkOutputs(e, c.Timeline); err != nil {
		return err
	}
	if c.Timeline != "" && c.Explore > 0 {
		return usageError("--timeline records one run: drop --explore")
	}
	// Explored runs are numbered, not listed: each keeps only its record for the report.
	runs, first := 1, c.Seed
	if c.Explore > 0 {
		runs, first = c.Explore, max(c.Seed, 1)
		need := budget.Mul(int64(runs), exploredRunBytes(c.JSON))
		if err := refuse(e, l, l.budget.Check(need,
			fmt.Sprintf("--explore %d keeps a record of every run: %s (%d bytes each)", runs, budget.Format(need), exploredRunBytes(c.JSON)),
			"use a smaller --explore")); err != nil {
			return err
		}
	}
	// The first run's provider also tells setup what the NIC can do and costs; a seeded one
	// (the software NIC) is opened anew for every further run, with its seed.
	first0, err := c.openProvider(e, prov, l.graph, -1, first)
	if err != nil {
		return err
	}
	defer first0.Close()
	engine, plan, ref, err := c.setup(e, l, first0.Caps(), first0)
	if err != nil {
		return err
	}
	rep := runReport{File: l.path, Plan: g.Name, Ranks: g.Ranks, Target: plan.Target.Name, Seed: first, Iters: c.Iters, OK: true}
	last, err := c.runSeeds(e, l, prov, first0, engine, plan, ref, &rep, runs, first)
	if err != nil {
		return err
	}
	return c.report(e, l, engine, plan, &rep, last, runs)
}

// runSeeds runs the plan runs times, with seeds first, first+1, ... (a seeded provider is opened
// anew for each run after the first, which runs on p), recording each in rep; it stops at the
// first failure, reported on stderr. It returns the last run's result.
func (c *runCmd) runSeeds(e *env, l *loaded, prov provider.Entry, p nic.Provider, engine exec.Engine, plan *ir.Plan, ref *exec.Memory,
	rep *runReport, runs int, first uint64) (*exec.Result, error) {
	bar := newProgress(e, int(min(budget.Mul(int64(c.Iters), int64(runs)), math.MaxInt)))
	defer bar.done()
	var last *exec.Result
	for k := 0; k < runs; k++ {
		seed := first + uint64(k)
		run := p
		if k > 0 && prov.Seeded {
			var err error
			if run, err = c.openProvider(e, prov, l.graph, -1, seed); err != nil {
				bar.abort()
				return nil, err
			}
		}
		res, err := exec.Run(e.ctx, plan, run, exec.Options{
			Engine: engine, Iters: c.Iters, Seed: seed, Reference: ref, NoTriggers: c.NoTriggers, Timeline: c.Timeline != "", OnIteration: func(int, int) { bar.step() },
		})
		if run != p {
			_ = run.Close()
		}
		if res != nil {
			last = res
		}
		if err != nil {
			bar.abort()
			if cause := stop.Stopped(e.ctx, err); cause != nil { // SIGINT or SIGTERM: no verdict, the interruption says it
				return nil, cause
			}
			c.reportFailure(e, l, plan, rep, err, seed)
			break
		}
		if runs > 1 {
			rep.Runs = append(rep.Runs, exploredRun{MedianNS: res.Latency.Median.Nanoseconds(), OK: res.OK, Seed: seed})
		}
		if !res.OK {
			rep.OK = false
			for _, v := range res.Verdicts {
				for _, m := range v.Mismatches {
					rep.Mismatches = append(rep.Mismatches, fmt.Sprintf("seed %d: %s", seed, m))
				}
			}
		}
	}
	return last, nil
}

// reportFailure records a failed run in rep and, unless --json, prints its diagnosis; with
// --on-hang it draws a hang.
func (c *runCmd) reportFailure(e *env, l *loaded, plan *ir.Plan, rep *runReport, err error, seed uint64) {
	rep.OK, rep.Error, rep.Diags = false, err.Error(), runDiagnostics(err, plan)
	if !c.JSON {
		fmt.Fprintf(e.stderr, "%s: run failed (seed %d): ", diag.QuoteName(l.path), seed)
		diag.Print(e.stderr, err, diag.Sources{l.path: l.src})
	}
	var hang *exec.HangError
	if c.OnHang != "" && errors.As(err, &hang) {
		if werr := writeHangView(c.OnHang, plan, hang); werr != nil {
			fmt.Fprintf(e.stderr, "%s: --on-hang: %v\n", l.path, werr)
		} else {
			fmt.Fprintf(e.stderr, "%s: plan view of the hang written to %s\n", l.path, c.OnHang)
		}
	}
}

// report checks the postconditions on the last run's values, adds the --dump buffers and prints
// the report (text or JSON) and the --timeline file.
func (c *runCmd) report(e *env, l *loaded, engine exec.Engine, plan *ir.Plan, rep *runReport, last *exec.Result, runs int) error {
	g := l.graph
	if rep.OK && last != nil && len(g.Expects) > 0 {
		var err error
		if rep.Expects, err = checkExpects(e.ctx, g, engine, plan.Target, last); err != nil {
			if cause := stop.Stopped(e.ctx, err); cause != nil { // SIGINT or SIGTERM: no verdict, the interruption says it
				return cause
			}
			rep.OK, rep.Error = false, err.Error()
		}
		for _, x := range rep.Expects {
			rep.OK = rep.OK && x.Held
		}
	}
	if last != nil {
		rep.fill(last)
		for _, name := range c.Dump {
			b, _ := exec.BufferByName(g, name)
			if rep.Buffers == nil {
				rep.Buffers = map[string][][]any{}
			}
			for r := 0; r < g.Ranks; r++ {
				rep.Buffers[name] = append(rep.Buffers[name], jsonValues(last.Memory.Values(r, b)))
			}
		}
	}
	if c.JSON {
		if err := writeJSON(e.stdout, rep); err != nil {
			return err
		}
	} else if last != nil {
		printRun(e, diag.QuoteName(l.path), rep, last, runs)
	}
	if c.Timeline != "" && last != nil {
		if err := c.writeTimeline(e, l.path, g, last, c.Timeline); err != nil {
			return err
		}
	}
	if !rep.OK {
		return &exitError{code: exitFail}
	}
	return nil
}

// provenUnder names the target whose ordering between the ops of a queue a run proves the
// plan's races under: --target, else connectx, whose ordering (RC) is that of every default
// target (exec.DefaultTarget). The runtime then refuses a NIC that does not grant what the plan
// relies on (exec.CheckOrder).
func (c *runCmd) provenUnder() string {
	if c.Target != "" {
		return c.Target
	}
	return defaultTarget
}

// fill sets what the report says of a run's result: the engine and provider, latency, counters.
func (rep *runReport) fill(res *exec.Result) {
	rep.Engine, rep.Provider = res.Engine.String(), res.Provider
	rep.LatencyNS = map[string]int64{"min": res.Latency.Min.Nanoseconds(), "median": res.Latency.Median.Nanoseconds(), "p99": res.Latency.P99.Nanoseconds()}
	rep.WQEs, rep.CQEs, rep.Waits, rep.Enables, rep.HostSteps, rep.RNR = res.WQEsPosted, res.CQEsPolled, res.Waits, res.Enables, res.HostSteps, res.RNRRetries
	rep.Triggered = res.Triggered
}

// setup does what a run needs on any provider: it parses the engine, lets exec.Select pick the
// engine and the target (--target, or the default for the engine and a NIC with caps), compiles
// the plan and computes the reference memory. Errors are reported and returned as exit codes.
//
// It refuses --iters that would overflow a triggered plan's counters (they are never reset), and
// before it allocates the reference it checks that the run fits in the memory budget: p (nil
// when the provider is not open yet) says what registering the buffers costs.
func (c *runCmd) setup(e *env, l *loaded, caps nic.Caps, p nic.Provider) (exec.Engine, *ir.Plan, *exec.Memory, error) {
	engine, err := exec.ParseEngine(c.Engine)
	if err != nil {
		return 0, nil, nil, usageError("%v", err)
	}
	if c.Timeline != "" {
		if engine == exec.Offload {
			return 0, nil, nil, usageError("--timeline needs the poll engine: on the offload engine the NIC walks the chains without telling the CPU when each op completes")
		}
		engine = exec.Poll
	}
	if c.Iters < 1 {
		return 0, nil, nil, usageError("--iters %d: need at least 1", c.Iters)
	}
	engine, target, err := exec.Select(engine, c.Target, caps)
	if err != nil {
		return 0, nil, nil, selectUsage(err)
	}
	plan, err := lower.Compile(e.ctx, l.graph, target)
	if cause := stop.Stopped(e.ctx, err); cause != nil { // SIGINT or SIGTERM: the interruption says it
		return 0, nil, nil, cause
	}
	if err == nil {
		if err := exec.CheckOrder(plan, caps); err != nil {
			return 0, nil, nil, selectUsage(err)
		}
		if err := plan.CheckIterations(uint64(c.Iters)); err != nil { // counters never reset
			return 0, nil, nil, usageError("--iters: %v", err)
		}
		if err := c.checkMemory(e, l, p); err != nil {
			return 0, nil, nil, err
		}
		var ref *exec.Memory
		if ref, err = exec.Reference(l.graph); err == nil {
			return engine, plan, ref, nil
		}
	}
	return 0, nil, nil, failPlan(e, l, err, c.JSON)
}

// selectUsage turns exec.Select's refusal into a usage error (exit 2) in the words of the flags.
func selectUsage(err error) error {
	var se *exec.SelectError
	if !errors.As(err, &se) {
		return err
	}
	switch {
	case errors.Is(err, exec.ErrNeedsCrossChannelTarget) && se.Engine == exec.Offload:
		return usageError("--engine offload needs a cross-channel target (connectx or connectx-inline); %s has none, so use --engine poll", se.Target)
	case errors.Is(err, exec.ErrNeedsGenericTarget):
		return usageError("--engine poll walks the DAG itself: it runs plans for --target generic; %s's WAIT/ENABLE chains are for --engine offload", se.Target)
	}
	return usageError("%v", err)
}

// printRun prints the human-readable result: first a verdict line that starts with PASS or FAIL
// and names the file, then what ran, the latency of the (last) run and its counters.
func printRun(e *env, path string, rep *runReport, res *exec.Result, runs int) {
	where := fmt.Sprintf("on every rank (%s)", english.Plural(rep.Ranks, "rank"))
	switch {
	case rep.OK:
		fmt.Fprintf(e.stdout, "PASS %s: memory matches the reference %s\n", path, where)
	case rep.Error != "":
		msg, _, _ := strings.Cut(rep.Error, "\n")
		fmt.Fprintf(e.stdout, "FAIL %s: run failed: %s\n", path, diag.EscapeControls(msg))
	default:
		fmt.Fprintf(e.stdout, "FAIL %s: memory differs from the reference (%s)\n", path, english.Plural(len(rep.Mismatches), "mismatch"))
	}
	fmt.Fprintf(e.stdout, "  plan %s, %s engine, target %s, %s, %s", rep.Plan, rep.Engine, rep.Target, rep.Provider, english.Plural(rep.Iters, "iteration"))
	last := ""
	if runs > 1 {
		fmt.Fprintf(e.stdout, ", schedule seeds %d-%d", rep.Seed, rep.Seed+uint64(runs)-1)
		last = fmt.Sprintf(" (last run, seed %d)", rep.Seed+uint64(runs)-1)
	} else if rep.Seed != 0 {
		fmt.Fprintf(e.stdout, ", schedule seed %d", rep.Seed)
	}
	fmt.Fprintln(e.stdout)
	for _, m := range rep.Mismatches {
		fmt.Fprintf(e.stdout, "  %s\n", m)
	}
	l := res.Latency
	if len(l.All) == 1 {
		fmt.Fprintf(e.stdout, "  latency %s%s\n", fmtDuration(l.Min), last)
	} else {
		fmt.Fprintf(e.stdout, "  latency min %s, median %s, p99 %s%s\n", fmtDuration(l.Min), fmtDuration(l.Median), fmtDuration(l.P99), last)
	}
	posted := english.Plural(int(rep.WQEs), "WQE") + " posted"
	if rep.Triggered > 0 {
		posted += fmt.Sprintf(" (%d by triggers)", rep.Triggered)
	}
	fmt.Fprintf(e.stdout, "  totals: %s, %s polled, %s, %s, %s, %s\n",
		posted, english.Plural(int(rep.CQEs), "CQE"), english.Plural(int(rep.Waits), "WAIT"),
		english.Plural(int(rep.Enables), "ENABLE"), english.Plural(int(rep.HostSteps), "host step"), english.Plural(int(rep.RNR), "RNR retry"))
	for _, x := range rep.Expects {
		if x.Held {
			fmt.Fprintf(e.stdout, "  held: %s\n", x.Expect)
		} else {
			fmt.Fprintf(e.stdout, "  FAILED: %s: %s\n", x.Expect, x.Detail)
		}
	}
	for _, name := range sortedKeys(rep.Buffers) {
		for r, vals := range rep.Buffers[name] {
			fmt.Fprintf(e.stdout, "%s[rank %d] = %v\n", name, r, vals)
		}
	}
}

// fmtDuration prints d with three significant digits in the largest unit that keeps it at
// least 1: "850 ns", "35.3 µs", "1.27 ms", "2.50 s" (time.Duration's String prints every digit).
func fmtDuration(d time.Duration) string {
	if d < time.Microsecond {
		return fmt.Sprintf("%d ns", d.Nanoseconds())
	}
	units := []struct {
		name string
		size time.Duration
	}{{"µs", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}}
	for i, u := range units {
		s, v := sig3(float64(d) / float64(u.size))
		if v < 1000 || i == len(units)-1 {
			return s + " " + u.name
		}
	}
	panic("unreachable")
}

// sig3 rounds v (>= 1) to three significant digits: the text and the rounded value.
func sig3(v float64) (string, float64) {
	decimals := func(v float64) int {
		switch {
		case v < 10:
			return 2
		case v < 100:
			return 1
		}
		return 0
	}
	s := strconv.FormatFloat(v, 'f', decimals(v), 64)
	r, _ := strconv.ParseFloat(s, 64)
	if decimals(r) != decimals(v) { // 9.996 rounds to 10.00: print 10.0
		s = strconv.FormatFloat(r, 'f', decimals(r), 64)
	}
	return s, r
}

func sortedKeys(m map[string][][]any) []string {
	return slices.Sorted(maps.Keys(m))
}

// jsonValues makes buffer values encodable: JSON has no NaN or infinities, so those floats
// become the strings "NaN", "+Inf" and "-Inf".
func jsonValues(vals []any) []any {
	for i, v := range vals {
		var f float64
		switch x := v.(type) {
		case float32:
			f = float64(x)
		case float64:
			f = x
		default:
			continue
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			vals[i] = strconv.FormatFloat(f, 'g', -1, 64)
		}
	}
	return vals
}

// progress is a progress bar on stderr that appears only when stderr is a terminal and the run
// has lasted more than a second.
type progress struct {
	enabled bool
	total   int
	n       int
	start   time.Time
	p       *mpb.Progress
	bar     *mpb.Bar
	out     *os.File
}

func newProgress(e *env, total int) *progress {
	f, ok := e.stderr.(*os.File)
	return &progress{enabled: ok && term.IsTerminal(int(f.Fd())), total: total, start: time.Now(), out: f}
}

func (p *progress) step() {
	p.n++
	if !p.enabled {
		return
	}
	if p.bar == nil {
		if time.Since(p.start) < time.Second {
			return
		}
		p.p = mpb.New(mpb.WithOutput(p.out), mpb.WithWidth(40))
		p.bar = p.p.AddBar(int64(p.total), mpb.PrependDecorators(decor.Name("run "), decor.CountersNoUnit("%d/%d")),
			mpb.AppendDecorators(decor.EwmaETA(decor.ET_STYLE_GO, 30)))
		p.bar.SetCurrent(int64(p.n))
		return
	}
	p.bar.Increment()
}

func (p *progress) abort() {
	if p.bar != nil {
		p.bar.Abort(false)
	}
}

func (p *progress) done() {
	if p.p != nil {
		if !p.bar.Completed() {
			p.bar.SetTotal(int64(p.n), true)
		}
		p.p.Wait()
	}
}

// writeTimeline writes what res recorded (--timeline) to path; a failed run's iterations up to
// the failure are kept.
func (c *runCmd) writeTimeline(e *env, plan string, g *ir.Graph, res *exec.Result, path string) error {
	f, err := atomicfile.Create(path)
	if err == nil {
		defer f.Abort()
		if err = viz.Timeline(f, g, res.Latency.All, res.Timeline); err == nil {
			err = f.Commit()
		}
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "%s: --timeline: %v (%s left as it was)\n", plan, err, path)
		return &exitError{code: exitFail}
	}
	if !c.JSON {
		fmt.Fprintf(e.stderr, "%s: timeline of %s written to %s\n", plan, english.Plural(len(res.Timeline), "iteration"), path)
	}
	return nil
}

// writeHangView draws the plan view of a hung run into path (format by extension), with the
// stuck entries and the WQEs they await highlighted and the first stuck item as the caption.
func writeHangView(path string, plan *ir.Plan, h *exec.HangError) error {
	format, err := viz.FormatForFile(path)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := viz.Write(viz.Plan(plan, viz.Options{Highlight: hangHighlight(h)}), format, &buf); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, buf.Bytes())
}

// hangHighlight picks what a hang drawing marks: every stuck WAIT or HOST step (or, for the
// polling engine, stuck WQE) that the engine placed in the plan, with the WQE it awaits; failing
// those, the first placed item alone.
func hangHighlight(h *exec.HangError) viz.Highlight {
	var hl viz.Highlight
	seen := map[viz.WQERef]bool{} // lookup only: WQEs keeps the order
	add := func(l *exec.WQELoc) {
		if l == nil {
			return
		}
		ref := viz.WQERef{Rank: l.Rank, Queue: l.Queue, Index: l.Index}
		if !seen[ref] {
			seen[ref] = true
			hl.WQEs = append(hl.WQEs, ref)
		}
	}
	var first *exec.Stuck
	for i := range h.Stuck {
		if s := &h.Stuck[i]; s.At != nil && s.ProducerAt != nil {
			add(s.At)
			add(s.ProducerAt)
			if first == nil {
				first = s
			}
		}
	}
	if first == nil {
		for i := range h.Stuck {
			if s := &h.Stuck[i]; s.At != nil {
				add(s.At)
				first = s
				break
			}
		}
	}
	hl.Note = fmt.Sprintf("hung in iteration %d", h.Iteration)
	if first != nil {
		hl.Note += ": " + strings.ReplaceAll(first.String(), "; ", "\n")
	}
	return hl
}
