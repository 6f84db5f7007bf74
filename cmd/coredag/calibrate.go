package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/provider"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/predict"
)

func init() {
	register("calibrate", "Measure the cost model's figures on this machine (ping-pong, posting rate, host reduce and copy) and write them for coredag predict.", func() any { return &calibrateCmd{} })
}

type calibrateCmd struct {
	Provider string `default:"softnic" help:"NIC provider to measure: softnic or ofi (ofi needs a build with -tags ofi)."`
	OFIProv  string `name:"ofi-provider" placeholder:"NAME" help:"With --provider ofi: the libfabric provider (default: the first with triggered operations)."`
	Target   string `default:"connectx" help:"Target the micro-benchmarks are compiled for: the figures are for plans compiled for it (see coredag targets)."`
	Iters    int    `default:"200" help:"Iterations of each micro-benchmark."`
	Stat     string `default:"median" enum:"median,min" help:"Which iteration's time stands for a benchmark: median, or min (the fastest: steadier on a loaded machine)."`
	Clock    string `default:"wall" enum:"wall,cpu" help:"Which clock times an iteration: wall, or cpu (the CPU time of the thread that runs every rank: what the wall time would be on a core of its own, whatever the load)."`
	Out      string `short:"o" placeholder:"FILE" help:"Write the figures to FILE (default: stdout)."`
}

// calBench is one micro-benchmark of calibrate: a plan text and the params it runs at.
type calBench struct {
	name   string
	src    string
	params map[string]int64
}

// The micro-benchmarks move every message from and into memory of its own (a slice per hop or
// step), as a collective does over its buffers: their large sizes measure memory out of the
// caches, not one buffer kept hot.
const calPingPong = `plan pingpong
param ranks = 2
param n = 8
param hops = 20
buffer a u8[hops * n]
buffer b u8[hops * n]
queue q to 1 - rank peer q
for h in 0 .. hops {
  if h % 2 == rank {
    op tx[h] = send q a[h * n : (h + 1) * n]
    if h > 0 { tx[h] after rx[h - 1] }
  } else {
    op rx[h] = recv q b[h * n : (h + 1) * n]
  }
}
`

// calPingPongWrite is the ping-pong by writes with immediate (notify), each hop's receive
// consuming the immediate: what a write with immediate costs beyond a message (Params.Imm).
const calPingPongWrite = `plan pingpongw
param ranks = 2
param n = 8
param hops = 20
buffer a u8[hops * n] remote_write
queue q to 1 - rank peer q
for h in 0 .. hops {
  if h % 2 == rank {
    op tx[h] = write q a[h * n : (h + 1) * n] to a[h * n : (h + 1) * n] notify
    if h > 0 { tx[h] after rx[h - 1] }
  } else {
    op rx[h] = recv q
  }
}
`

// calPingPongQueues is the ping-pong of 8 B beside extra queues that carry one message each: the
// more queues, the more CQs an engine that polls each in turn goes round (Params.CQ).
const calPingPongQueues = `plan pingpongq
param ranks = 2
param n = 8
param hops = 20
param extra = 16
buffer a u8[hops * n]
buffer b u8[hops * n]
buffer c u8[extra * n]
queue q to 1 - rank peer q
for i in 0 .. extra {
  queue x[i] to 1 - rank peer x[i]
  if rank == 0 {
    op xs[i] = send x[i] c[i * n : (i + 1) * n]
  } else {
    op xr[i] = recv x[i] c[i * n : (i + 1) * n]
  }
}
for h in 0 .. hops {
  if h % 2 == rank {
    op tx[h] = send q a[h * n : (h + 1) * n]
    if h > 0 { tx[h] after rx[h - 1] }
  } else {
    op rx[h] = recv q b[h * n : (h + 1) * n]
  }
}
`

// calExchange is recursive doubling's step between two ranks, repeated: both send, and each adds
// what it received once its own send completed (the buffer it sent is the one it adds into), so
// every step waits for a send's completion besides the message; extra queues carry one message
// each, as in calPingPongQueues.
const calExchange = `plan exchange
param ranks = 2
param n = 1
param steps = 10
param extra = 0
buffer data i64[n]
buffer tmp i64[steps * n]
buffer c i64[max(extra, 1) * n]
queue q to 1 - rank peer q
for i in 0 .. extra {
  queue x[i] to 1 - rank peer x[i]
  if rank == 0 {
    op xs[i] = send x[i] c[i * n : (i + 1) * n]
  } else {
    op xr[i] = recv x[i] c[i * n : (i + 1) * n]
  }
}
for j in 0 .. steps {
  op tx[j] = send q data
  op rx[j] = recv q tmp[j * n : (j + 1) * n]
  op red[j] = reduce sum data from tmp[j * n : (j + 1) * n] after tx[j], rx[j]
  if j > 0 { tx[j] after red[j - 1] }
}
`

const calStream = `plan stream
param ranks = 2
param n = 8
param k = 64
buffer a u8[k * n]
queue q to 1 - rank peer q depth 512
for j in 0 .. k {
  if rank == 0 {
    op tx[j] = send q a[j * n : (j + 1) * n]
  } else {
    op rx[j] = recv q a[j * n : (j + 1) * n]
  }
}
`

const calReduce = `plan hostreduce
param ranks = 1
param n = 1024
param k = 8
buffer x f32[k * n]
buffer y f32[k * n]
for j in 0 .. k {
  op red[j] = reduce sum x[j * n : (j + 1) * n] from y[j * n : (j + 1) * n]
  if j > 0 { red[j] after red[j - 1] }
}
`

const calCopy = `plan hostcopy
param ranks = 1
param n = 1024
param k = 8
buffer x f32[k * n]
buffer y f32[k * n]
for j in 0 .. k {
  op cp[j] = copy x[j * n : (j + 1) * n] to y[j * n : (j + 1) * n]
  if j > 0 { cp[j] after cp[j - 1] }
}
`

// calBenches are the micro-benchmarks: a ping-pong over sizes (latency and bandwidth) and beside
// more queues (the cost of the CQs an engine polls in turn), a stream
// of small messages at two lengths (the per-message and posting cost), host reduces and copies
// over sizes (their cost per byte).
func calBenches() []calBench {
	var bs []calBench
	for _, n := range []int64{8, 1 << 10, 64 << 10, 1 << 20, 4 << 20} {
		bs = append(bs, calBench{fmt.Sprintf("pingpong %s", formatBytes(n)), calPingPong, map[string]int64{"n": n, "hops": min(20, 64<<20/n)}})
	}
	bs = append(bs, calBench{"pingpong 8 B by write", calPingPongWrite, nil})
	for _, x := range []int64{15, 63} {
		bs = append(bs, calBench{fmt.Sprintf("pingpong 8 B, %d queues", x+1), calPingPongQueues, map[string]int64{"extra": x}})
	}
	for _, x := range []int64{0, 31} {
		bs = append(bs, calBench{fmt.Sprintf("exchange 8 B, %d queues", x+1), calExchange, map[string]int64{"extra": x}})
	}
	for _, k := range []int64{16, 256} {
		bs = append(bs, calBench{fmt.Sprintf("stream %d x 8 B", k), calStream, map[string]int64{"k": k}})
	}
	for _, n := range []int64{64, 16 << 10, 256 << 10, 1 << 20} {
		bs = append(bs, calBench{fmt.Sprintf("reduce %s", formatBytes(4*n)), calReduce, map[string]int64{"n": n}})
		bs = append(bs, calBench{fmt.Sprintf("copy %s", formatBytes(4*n)), calCopy, map[string]int64{"n": n}})
	}
	return bs
}

// measured is a plan's measured median time of one iteration.
type measured struct {
	name string
	plan *ir.Plan
	ns   float64
}

// openRunProvider opens a provider that runs every rank in this process, by name.
func openRunProvider(name, ofiProv string) (nic.Provider, int, error) {
	prov, err := provider.Usable(name)
	if err != nil {
		return nil, 0, usageError("--provider: %v", err)
	}
	if !prov.AllRanks {
		return nil, 0, usageError("--provider %s: runs one rank per process; calibrate and measure run every rank in this process (softnic, ofi)", name)
	}
	p, err := prov.Open(provider.Config{Rank: -1, OFIProvider: ofiProv, GIDIndex: -1})
	if err != nil {
		return nil, 0, fmt.Errorf("--provider %s: %v", name, err)
	}
	// every rank runs in this process, on the thread that runs the engine
	return p, 1, nil
}

// measureOpts says how a plan is measured: iterations, which iteration stands for the run
// (median or min) and which clock times an iteration (wall, or cpu: the CPU time of the thread
// that runs the engine).
type measureOpts struct {
	iters       int
	stat, clock string
}

// measurePlan runs a compiled plan m.iters times on p and returns its median (or with stat
// "min", its least) time per iteration in nanoseconds, by the wall clock or, with clock "cpu",
// by the CPU time of the thread that ran the iteration: every rank runs on that one thread (the
// software NIC inside the engine's calls, libfabric with manual progress inside its polls), so
// its CPU time is what the wall time would be with a core of its own, whatever else the machine
// runs; the time the thread waits for the CPU is left out.
func measurePlan(ctx context.Context, plan *ir.Plan, p nic.Provider, m measureOpts) (float64, error) {
	wall, cpu, err := measureClocks(ctx, plan, p, m.iters, m.clock == "cpu")
	if err != nil {
		return 0, err
	}
	if m.clock == "cpu" {
		return pick(cpu, m.stat), nil
	}
	return pick(wall, m.stat), nil
}

// pick is the median or (stat "min") the least of the times, in nanoseconds.
func pick(ts []time.Duration, stat string) float64 {
	ts = slices.Clone(ts)
	slices.Sort(ts)
	if stat == "min" {
		return float64(ts[0].Nanoseconds())
	}
	return float64(ts[(len(ts)-1)/2].Nanoseconds())
}

// measureClocks runs a compiled plan iters times on p and returns every iteration's wall time
// and, with cpu, the CPU time of the thread that ran it (always within its wall time).
func measureClocks(ctx context.Context, plan *ir.Plan, p nic.Provider, iters int, cpu bool) (wall, used []time.Duration, err error) {
	s, err := exec.Prepare(ctx, plan, p, exec.Options{Iters: iters})
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	var timed func(func() error) error
	if cpu {
		// the thread CPU clock is only this goroutine's while it stays on one thread
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if _, ok := exec.ThreadCPU(); !ok {
			return nil, nil, fmt.Errorf("--clock cpu: this system has no per-thread CPU clock")
		}
		used = make([]time.Duration, 0, iters)
		timed = func(iterate func() error) error {
			c0, _ := exec.ThreadCPU()
			err := iterate()
			c1, _ := exec.ThreadCPU()
			used = append(used, c1-c0)
			return err
		}
	}
	res, err := s.RunTimed(ctx, max(iters, 1), timed)
	if err != nil {
		return nil, nil, err
	}
	if !res.OK {
		return nil, nil, fmt.Errorf("the run's memory does not match the reference")
	}
	return res.Latency.All, used, nil
}

// measure loads micro-benchmark b, compiles it for tg and times it on p, until ctx is cancelled.
func (c *calibrateCmd) measure(ctx context.Context, b calBench, tg ir.Target, p nic.Provider) (measured, error) {
	g, err := planner.Load(ctx, b.name+".dag", []byte(b.src), b.params, planner.Options{})
	if err != nil {
		return measured{}, fmt.Errorf("calibrate: %s: internal error: %v", b.name, err)
	}
	plan, err := planner.Compile(ctx, g, tg)
	if err != nil {
		return measured{}, fmt.Errorf("calibrate: %s on %s: %v", b.name, tg.Name, err)
	}
	ns, err := measurePlan(ctx, plan, p, measureOpts{c.Iters, c.Stat, c.Clock})
	if err != nil {
		return measured{}, fmt.Errorf("calibrate: %s: %v", b.name, err)
	}
	return measured{b.name, plan, ns}, nil
}

func (c *calibrateCmd) Run(e *env) error {
	if c.Iters < 1 {
		return usageError("--iters %d: must be at least 1", c.Iters)
	}
	tg, err := ir.LookupTarget(c.Target)
	if err != nil {
		return usageError("--target: %v", err)
	}
	if c.Out != "" {
		if err := checkOutput(e, "-o", c.Out); err != nil {
			return err
		}
	}
	p, workers, err := openRunProvider(c.Provider, c.OFIProv)
	if err != nil {
		return err
	}
	defer p.Close()
	var ms []measured
	for _, b := range calBenches() {
		m, err := c.measure(e.ctx, b, tg, p)
		if cause := stop.Stopped(e.ctx, err); cause != nil { // a signal: the interruption says it
			return cause
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "calibrate: %-20s %s\n", b.name, formatNs(m.ns))
		ms = append(ms, m)
	}
	par, errs, err := fitMeasured(e.ctx, ms, c.Provider, tg.Name, workers, c.Stat+" "+c.Clock)
	if err != nil {
		return err
	}
	printFit(e.stderr, ms, errs)
	out := par.Encode()
	if c.Out == "" {
		_, err := e.stdout.Write(out)
		return err
	}
	return writeOutput(c.Out, "the figures", out)
}

// fitMeasured fits the model's figures to measurements. With every rank in one process on one
// thread, there is no wire: L and g stay 0 and the per-message costs carry the time. Once ctx is
// cancelled, the error is its cause.
func fitMeasured(ctx context.Context, ms []measured, prov, target string, workers int, stat string) (predict.Params, []float64, error) {
	samples := make([]predict.Sample, len(ms))
	for i, m := range ms {
		samples[i] = predict.Sample{Name: m.name, Plan: m.plan, Scale: 1, Measured: m.ns}
	}
	base := predict.Params{Provider: prov, Target: target, Workers: workers}
	free := slices.DeleteFunc(slices.Clone(predict.FitFigures), func(s string) bool { return s == "L_ns" && workers > 0 })
	par, errs, err := predict.FitCache(ctx, samples, base, free)
	if cause := stop.Stopped(ctx, err); cause != nil {
		return par, nil, cause
	}
	if err != nil {
		return par, nil, fmt.Errorf("calibrate: %v", err)
	}
	var worst float64
	for _, e := range errs {
		worst = max(worst, math.Abs(e))
	}
	par.Note = fmt.Sprintf("coredag calibrate: %d micro-benchmarks (ping-pongs, exchanges beside more queues, message streams, host reduces and copies) on %s, target %s, %s time of each, fitted by relative least squares (cache size searched); worst fit error %.0f%%",
		len(ms), prov, target, stat, 100*worst)
	return par, errs, nil
}

func printFit(w io.Writer, ms []measured, errs []float64) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "calibrate: benchmark\tmeasured\tfitted model\terror")
	for i, m := range ms {
		fmt.Fprintf(tw, "calibrate: %s\t%s\t%s\t%+.0f%%\n", m.name, formatNs(m.ns), formatNs(m.ns*(1+errs[i])), 100*errs[i])
	}
	tw.Flush()
}
