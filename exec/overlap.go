package exec

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"
	"unsafe"
)

// Overlap measures how much host computation a plan's iterations hide, the way OSU's
// non-blocking collective benchmarks do: the median time of an iteration alone (pure
// communication, Pure); a host compute loop calibrated to take about as long, alone (Compute);
// and both together (Total): the compute loop starts as the iteration starts and the iteration
// ends when both have. Percent is OverlapPercent(Pure, Compute, Total). Unlike OSU, which runs
// the three one after the other, Session.Overlap interleaves them iteration by iteration.
//
// The compute loop is CPU arithmetic on a private buffer (it touches no plan memory) on a
// goroutine locked to its own OS thread. The engine goes on as in Run on the caller's goroutine:
// the poll engine walks the DAG; the offload engine hands the chains or the triggered work to the
// NIC at once and then polls for completions and runs the HOST steps (reductions). On a software
// NIC (softnic) the fabric moves only inside those polls, and on libfabric's sockets provider it
// moves in the provider's progress threads and in those polls: either way the "NIC" is CPU work
// beside the compute loop, so with two cores the figure says how well two busy threads share
// them, not what a NIC that progresses by itself would hide.
type Overlap struct {
	Iters                int           // rounds: each has one of each measure
	Pure, Compute, Total time.Duration // medians of the three measures
	Percent              float64       // 0 to 100
	// Spread is the overlap of the rounds at the first and third quartile: each round's own
	// figure (OverlapPercent of its three measures), sorted. A wide spread says the machine's
	// load moved the figure more than the plan did.
	Spread [2]float64
	// Units is the compute loop's size (passes over its buffer) calibrated to Pure.
	Units int
	// CPUs is the number of CPUs the process may run on (runtime.NumCPU): with two, the compute
	// thread and the engine (with any provider threads) have one each.
	CPUs int
	// CPU time per iteration (means), where the OS tells (CPUTimes): the whole process in the
	// iterations alone (PureCPU); in those beside the compute loop, the compute thread's own
	// (ComputeCPU) and the rest of the process (RestCPU: the engine's goroutine, the Go runtime
	// and the provider's threads).
	CPUTimes                     bool
	PureCPU, ComputeCPU, RestCPU time.Duration
	// Comm and Both add up the iterations alone and those beside the compute loop: counters,
	// latency, and the verdict of the memory after each (the first that failed, if one did): the
	// compute loop must leave the plan's memory as it was.
	Comm, Both *Result
}

// OK reports whether every iteration, alone or beside the compute loop, left memory equal to
// the reference.
func (o *Overlap) OK() bool { return o.Comm != nil && o.Comm.OK && o.Both != nil && o.Both.OK }

// OverlapPercent is OSU's overlap figure: 100 × (1 − (total − compute) / pure), the share of
// the pure communication time hidden behind compute, clamped to 0..100. It is 0 when pure is
// not positive.
func OverlapPercent(pure, compute, total time.Duration) float64 {
	if pure <= 0 {
		return 0
	}
	p := 100 * (1 - float64(total-compute)/float64(pure))
	return min(max(p, 0), 100)
}

// OverlapSampleBytes is what Overlap holds per round besides what Run holds: the latency
// samples of the second series of iterations, and the three measures and their sorted copies.
func OverlapSampleBytes(iters int) int64 {
	d := int64(unsafe.Sizeof(time.Duration(0)))
	return int64(max(iters, 1)) * (sampleBytes + 3*2*d + 8) // 8: the round's own figure
}

// overlapWarmup is the most iterations Overlap runs alone first, to size the compute loop.
const overlapWarmup = 5

// Overlap first runs min(iters, 5) iterations alone and sizes the compute loop to their median;
// then iters rounds (at least 1) of three measures, interleaved so that other load on the machine
// weighs on the three alike: an iteration alone, the compute loop alone, an iteration with the
// compute loop beside it. Memory is reset before each iteration and checked after each, as Run
// does. Errors are Run's; after one the session is unusable but for Close.
func (s *Session) Overlap(ctx context.Context, iters int) (*Overlap, error) {
	if iters < 1 {
		return nil, fmt.Errorf("overlap: %d iterations: need at least 1", iters)
	}
	o := &Overlap{Iters: iters, CPUs: runtime.NumCPU()}
	_, o.CPUTimes = ProcessCPU()
	var pure, cpu, total []time.Duration
	var pureCPU, bothCPU, compCPU time.Duration
	alone := func(iterate func() error) error {
		c0, _ := ProcessCPU()
		t0 := time.Now()
		err := iterate()
		pure = append(pure, time.Since(t0))
		c1, _ := ProcessCPU()
		pureCPU += c1 - c0
		return err
	}
	warm := min(iters, overlapWarmup)
	if _, err := s.RunTimed(ctx, warm, alone); err != nil {
		return nil, err
	}
	c := startComputer()
	defer c.stop()
	o.Units = c.calibrate(median(pure))
	pure, pureCPU = pure[:0], 0
	both := func(iterate func() error) error {
		c0, _ := ProcessCPU()
		t0 := time.Now()
		c.start <- o.Units
		err := iterate()
		d := <-c.done
		total = append(total, time.Since(t0))
		c1, _ := ProcessCPU()
		bothCPU += c1 - c0
		compCPU += d.cpu
		return err
	}
	defer func() {
		for _, r := range []*Result{o.Comm, o.Both} {
			if r != nil {
				r.Latency = summarise(r.Latency.All)
			}
		}
	}()
	for range iters {
		res, err := s.RunTimed(ctx, 1, alone)
		o.Comm = merge(o.Comm, res)
		if err != nil {
			return o, err
		}
		t0 := time.Now()
		c.run(o.Units)
		cpu = append(cpu, time.Since(t0))
		res, err = s.RunTimed(ctx, 1, both)
		o.Both = merge(o.Both, res)
		if err != nil {
			return o, err
		}
	}
	o.Pure, o.Compute, o.Total = median(pure), median(cpu), median(total)
	o.Percent = OverlapPercent(o.Pure, o.Compute, o.Total)
	per := make([]float64, iters)
	for i := range per {
		per[i] = OverlapPercent(pure[i], cpu[i], total[i])
	}
	slices.Sort(per)
	o.Spread = [2]float64{per[iters/4], per[min(3*iters/4, iters-1)]}
	n := time.Duration(iters)
	o.PureCPU, o.ComputeCPU, o.RestCPU = pureCPU/n, compCPU/n, max(bothCPU-compCPU, 0)/n
	return o, nil
}

// merge adds the result of one more iteration (nil after a failure before any ran) to acc: its
// counters, its latency sample (Latency.All only: the caller summarises), and its verdicts when
// they are the first or the first to fail.
func merge(acc, r *Result) *Result {
	if r == nil {
		return acc
	}
	if acc == nil {
		m := *r
		m.Latency.All = slices.Clone(r.Latency.All)
		return &m
	}
	acc.Iters += r.Iters
	acc.WQEsPosted += r.WQEsPosted
	acc.Triggered += r.Triggered
	acc.CQEsPolled += r.CQEsPolled
	acc.Waits += r.Waits
	acc.Enables += r.Enables
	acc.HostSteps += r.HostSteps
	acc.RNRRetries += r.RNRRetries
	acc.Memory = r.Memory
	if acc.OK && !r.OK {
		acc.Verdicts = r.Verdicts
	}
	acc.OK = acc.OK && r.OK
	acc.Latency.All = append(acc.Latency.All, r.Latency.All...) // summarised by Overlap at the end
	return acc
}

// Summary is the overlap figures in words, two lines.
func (o *Overlap) Summary() string {
	s := fmt.Sprintf("overlap %.1f%%: pure communication %v, compute %v (%d units), both %v (medians of %d rounds on %d CPUs)\n",
		o.Percent, o.Pure, o.Compute, o.Units, o.Total, o.Iters, o.CPUs)
	if o.CPUTimes {
		s += fmt.Sprintf("CPU per iteration: %v communicating alone; overlapped, compute thread %v, rest of the process %v\n",
			o.PureCPU, o.ComputeCPU, o.RestCPU)
	}
	return s
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// computer is the host compute loop on its own goroutine, locked to its OS thread for its life
// (the thread ends with it). It runs start's count of units and answers on done.
type computer struct {
	start chan int
	done  chan computed
}

type computed struct {
	wall, cpu time.Duration // the thread's own measure of the units it ran
}

// computeWords is the size of the compute loop's private buffer: 4 KiB, in the L1 cache, so a
// unit is arithmetic, not memory traffic.
const computeWords = 512

// calibrateMin is the shortest run calibration trusts, and calibrateMax the most units it tries.
const (
	calibrateMin = time.Millisecond
	calibrateMax = 1 << 30
)

func startComputer() *computer {
	c := &computer{start: make(chan int), done: make(chan computed)}
	go func() {
		runtime.LockOSThread() // not unlocked: the thread exits with the goroutine
		buf := make([]float64, computeWords)
		for i := range buf {
			buf[i] = float64(i)
		}
		for units := range c.start {
			c0, _ := threadCPU()
			t0 := time.Now()
			computeUnits(buf, units)
			wall := time.Since(t0)
			c1, _ := threadCPU()
			c.done <- computed{wall: wall, cpu: c1 - c0}
		}
	}()
	return c
}

func (c *computer) stop() { close(c.start) }

// run runs units on the compute thread and returns its measure.
func (c *computer) run(units int) computed {
	c.start <- units
	return <-c.done
}

// calibrate returns the number of units that takes about want on the compute thread: it doubles
// a trial run until it lasts at least want or calibrateMin, whichever is less (at least a
// microsecond), runs that trial twice more, and scales by the fastest of the three (the least
// disturbed by other threads on a shared machine).
func (c *computer) calibrate(want time.Duration) int {
	floor := max(min(want, calibrateMin), time.Microsecond)
	units := 1
	for {
		m := c.run(units)
		if m.wall >= floor || units >= calibrateMax {
			best := min(m.wall, c.run(units).wall, c.run(units).wall)
			n := math.Round(float64(units) * float64(want) / float64(max(best, 1)))
			return int(min(max(n, 1), calibrateMax))
		}
		units *= 2
	}
}

// computeUnits runs units passes of multiply-add over buf (kept in buf, so not optimised away).
func computeUnits(buf []float64, units int) {
	for range units {
		for i := range buf {
			buf[i] = buf[i]*0.999999 + 1
		}
	}
}
