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
// then both together (Total): the compute loop starts as the iteration starts and the iteration
// ends when both have. Percent is OverlapPercent(Pure, Compute, Total).
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
	Iters                int           // iterations in each phase
	Pure, Compute, Total time.Duration // medians of the three phases
	Percent              float64       // 0 to 100
	// Units is the compute loop's size (passes over its buffer) calibrated to Pure.
	Units int
	// CPU time per iteration (means), where the OS tells (CPUTimes): the whole process in the
	// pure phase (PureCPU); in the overlapped phase the compute thread's own (ComputeCPU) and
	// the rest of the process (RestCPU: the engine's goroutine, the Go runtime and the
	// provider's threads).
	CPUTimes                     bool
	PureCPU, ComputeCPU, RestCPU time.Duration
	// Comm and Both are the results of the pure and the overlapped phase, each with the verdict of
	// its final memory: the compute loop must leave the plan's memory as it was.
	Comm, Both *Result
}

// OK reports whether both phases left memory equal to the reference.
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

// OverlapSampleBytes is what Overlap holds per iteration besides what Run holds: the latency
// samples of the second session run, and the three phases' wall times and their sorted copies.
func OverlapSampleBytes(iters int) int64 {
	d := int64(unsafe.Sizeof(time.Duration(0)))
	return int64(max(iters, 1)) * (sampleBytes + 3*2*d)
}

// Overlap runs one warm-up iteration and then the three phases of iters iterations each (at
// least 1), with memory reset before each iteration and checked after each session phase, as
// Run does. Errors are Run's; after one the session is unusable but for Close.
func (s *Session) Overlap(ctx context.Context, iters int) (*Overlap, error) {
	if iters < 1 {
		return nil, fmt.Errorf("overlap: %d iterations: need at least 1", iters)
	}
	o := &Overlap{Iters: iters}
	if _, err := s.Run(ctx, 1); err != nil {
		return nil, err
	}
	_, o.CPUTimes = ProcessCPU()
	var pure, cpu, total []time.Duration
	var procCPU, compCPU time.Duration

	// Pure communication.
	res, err := s.RunTimed(ctx, iters, func(iterate func() error) error {
		c0, _ := ProcessCPU()
		t0 := time.Now()
		err := iterate()
		pure = append(pure, time.Since(t0))
		c1, _ := ProcessCPU()
		procCPU += c1 - c0
		return err
	})
	o.Comm = res
	if err != nil {
		return o, err
	}
	o.Pure = median(pure)
	o.PureCPU = procCPU / time.Duration(iters)

	c := startComputer()
	defer c.stop()
	o.Units = c.calibrate(o.Pure)

	// Compute alone.
	for range iters {
		t0 := time.Now()
		c.start <- o.Units
		<-c.done
		cpu = append(cpu, time.Since(t0))
	}
	o.Compute = median(cpu)

	// Both.
	procCPU = 0
	res, err = s.RunTimed(ctx, iters, func(iterate func() error) error {
		c0, _ := ProcessCPU()
		t0 := time.Now()
		c.start <- o.Units
		err := iterate()
		d := <-c.done
		total = append(total, time.Since(t0))
		c1, _ := ProcessCPU()
		procCPU += c1 - c0
		compCPU += d.cpu
		return err
	})
	o.Both = res
	if err != nil {
		return o, err
	}
	o.Total = median(total)
	o.Percent = OverlapPercent(o.Pure, o.Compute, o.Total)
	o.ComputeCPU = compCPU / time.Duration(iters)
	o.RestCPU = max(procCPU-compCPU, 0) / time.Duration(iters)
	return o, nil
}

// Summary is the overlap figures in words, two lines.
func (o *Overlap) Summary() string {
	s := fmt.Sprintf("overlap %.1f%%: pure communication %v, compute %v (%d units), both %v (medians of %d iterations)\n",
		o.Percent, o.Pure, o.Compute, o.Units, o.Total, o.Iters)
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
