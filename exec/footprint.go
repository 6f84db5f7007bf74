package exec

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
)

// Footprint is the host memory a run holds: the buffers (registered with the provider for each
// local rank, and the serial reference's copy of every rank), the latency samples, and with
// Options.Timeline the per-op completion times of every iteration.
type Footprint struct {
	g        *ir.Graph
	provider string
	Ranks    int   // local ranks
	PerRank  int64 // one rank's buffers as the provider registers them
	// Reference is the reference copy of every rank's buffers (Reference, or Options.Reference).
	Reference int64
	// Copy is the result's memory that Run copies into the Go heap before Close releases a
	// provider's registered memory (not nic.HostMemory); 0 for the software NIC.
	Copy     int64
	Iters    int
	Samples  int64 // latency samples of all iterations
	Timeline int64 // Options.Timeline: completion times of all iterations
}

// sampleBytes is what one iteration's latency sample costs: the sample and its copy sorted by
// summarise.
const sampleBytes = 2 * int64(unsafe.Sizeof(time.Duration(0)))

// timelineRowBytes is what Options.Timeline records per iteration: a stamp per op of the plan
// and the row's slice header, counted twice for the growth of the list of rows.
func timelineRowBytes(g *ir.Graph) int64 {
	return int64(len(g.Ops))*int64(unsafe.Sizeof(time.Duration(0))) + 2*int64(unsafe.Sizeof([]time.Duration(nil)))
}

// Estimate says what running g on p with opts holds (Prepare, and opts.Iters iterations of
// Session.Run, as exec.Run does), before it allocates anything. The
// figures come from the same arithmetic as the allocations (rankBytes, the provider's MRBytes).
// p may be nil when the provider is not open yet: regions then count their size.
func Estimate(g *ir.Graph, p nic.Provider, opts Options) Footprint {
	f := Footprint{g: g, provider: "the NIC", Ranks: g.Ranks, Iters: max(opts.Iters, 1)}
	if p != nil {
		f.provider = p.Name()
	}
	if opts.Ranks != nil {
		f.Ranks = len(opts.Ranks)
	}
	hm, _ := p.(nic.HostMemory)
	for i := range g.Buffers {
		n := g.Buffers[i].Bytes()
		if hm != nil {
			n = hm.MRBytes(n)
		}
		f.PerRank = budget.Add(f.PerRank, n)
	}
	f.Reference = budget.Mul(int64(g.Ranks), rankBytes(g))
	if hm == nil {
		f.Copy = budget.Mul(int64(f.Ranks), rankBytes(g))
	}
	f.Samples = budget.Mul(int64(f.Iters), sampleBytes)
	if opts.Timeline {
		f.Timeline = budget.Mul(int64(f.Iters), timelineRowBytes(g))
	}
	return f
}

// Buffers is what the buffers take in this process: every local rank's registered buffers, the
// reference copy and the result's copy.
func (f Footprint) Buffers() int64 {
	return budget.Add(budget.Mul(int64(f.Ranks), f.PerRank), f.Reference, f.Copy)
}

// Total is everything the footprint counts.
func (f Footprint) Total() int64 { return budget.Add(f.Buffers(), f.Samples, f.Timeline) }

// Check refuses a run that does not fit in b: the buffers (the error is positioned at the
// largest buffer's declaration), the latency samples of --iters iterations, the timeline, or
// all of them together. The error is a *budget.Error.
func (f Footprint) Check(b budget.Budget) error {
	g := f.g
	if len(g.Buffers) > 0 {
		largest := 0
		for i := range g.Buffers {
			if g.Buffers[i].Bytes() > g.Buffers[largest].Bytes() {
				largest = i
			}
		}
		what := fmt.Sprintf("buffers need %s in this process (%s × %s registered with %s, plus %s for the reference copy",
			budget.Format(f.Buffers()), english.Plural(f.Ranks, "rank"), budget.Format(f.PerRank), f.provider, budget.Format(f.Reference))
		if f.Copy > 0 {
			what += fmt.Sprintf(" and %s for the copy of the result", budget.Format(f.Copy))
		}
		what += ")"
		if len(g.Buffers) > 1 {
			what += fmt.Sprintf("; the largest, %s, takes %s per rank", g.Buffers[largest].Name, budget.Format(g.Buffers[largest].Bytes()))
		}
		if err := b.Check(f.Buffers(), what, "lower the buffer sizes or the ranks param"); err != nil {
			err.(*budget.Error).Pos = g.Buffers[largest].Pos
			return err
		}
	}
	if err := b.Check(f.Samples, fmt.Sprintf("%d iterations need %s for their latency samples (%d bytes each)",
		f.Iters, budget.Format(f.Samples), sampleBytes), "use fewer --iters"); err != nil {
		return err
	}
	if err := b.Check(f.Timeline, fmt.Sprintf("the timeline of %d iterations needs %s (%d ops × 8 bytes per iteration)",
		f.Iters, budget.Format(f.Timeline), len(g.Ops)), "use fewer --iters"); err != nil {
		return err
	}
	parts := fmt.Sprintf("%s for the buffers and %s for latency samples", budget.Format(f.Buffers()), budget.Format(f.Samples))
	if f.Timeline > 0 {
		parts = fmt.Sprintf("%s for the buffers, %s for latency samples and %s for the timeline",
			budget.Format(f.Buffers()), budget.Format(f.Samples), budget.Format(f.Timeline))
	}
	return b.Check(f.Total(), fmt.Sprintf("the run needs %s: %s", budget.Format(f.Total()), parts),
		"use fewer --iters, or lower the buffer sizes or the ranks param")
}
