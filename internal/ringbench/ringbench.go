// Package ringbench benchmarks plans/ring_allreduce.dag at 4 ranks on a provider, the offload
// and the poll engine side by side at several sizes: the software NIC's benchmarks in exec and
// libfabric's in exec/ofi run the same code.
package ringbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

// Ranks is the world size of the benchmarks.
const Ranks = 4

// Size is the f32 elements of the allreduce per rank (the plan's data buffer: Ranks chunks of
// param n elements).
type Size struct {
	Name string
	F32  int64
}

// Sizes are 64Ki, 256Ki and 1Mi f32 per rank.
var Sizes = []Size{{"64K", 64 << 10}, {"256K", 256 << 10}, {"1M", 1 << 20}}

// Engine is an engine and the target its plans are compiled for.
type Engine struct {
	Name   string
	Engine exec.Engine
	Target string
}

// Run runs one sub-benchmark per size and engine, "f32=SIZE/engine=NAME", engines side by side
// within each size. open returns the provider for an engine (called once per sub-benchmark,
// closed by the caller). An op is one iteration of a Session prepared once: the timer runs only
// around the iteration's timed region (Session.RunTimed), so the reset of the buffers between
// iterations is left out, and CPU-ns/op is the process's CPU time (all threads: the engine, the
// Go runtime, the provider's) over the same regions. Memory is checked against the reference
// after every op.
func Run(b *testing.B, open func(exec.Engine) nic.Provider, engines []Engine, sizes []Size) {
	path, src := planFile(b)
	for _, sz := range sizes {
		g, err := planner.Load(b.Context(), path, src, map[string]int64{"ranks": Ranks, "n": sz.F32 / Ranks}, planner.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ref, err := exec.Reference(g)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range engines {
			b.Run(fmt.Sprintf("f32=%s/engine=%s", sz.Name, e.Name), func(b *testing.B) {
				runOne(b, g, ref, open(e.Engine), e)
			})
		}
	}
}

func runOne(b *testing.B, g *ir.Graph, ref *exec.Memory, p nic.Provider, e Engine) {
	t, err := ir.LookupTarget(e.Target)
	if err != nil {
		b.Fatal(err)
	}
	plan, err := lower.Compile(b.Context(), g, t)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s, err := exec.Prepare(ctx, plan, p, exec.Options{Engine: e.Engine, Reference: ref})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	Iterate(b, ctx, s)
}

// Iterate runs one iteration of s per benchmark op (Session.RunTimed: the buffers' reset is
// left out of the timer), failing on an error or a wrong result, and reports the process's CPU
// time over the same regions as CPU-ns/op.
func Iterate(b *testing.B, ctx context.Context, s *exec.Session) {
	var cpu time.Duration
	timed := func(iterate func() error) error {
		b.StartTimer()
		c0, _ := exec.ProcessCPU()
		err := iterate()
		c1, _ := exec.ProcessCPU()
		b.StopTimer()
		cpu += c1 - c0
		return err
	}
	n := 0
	for b.Loop() {
		b.StopTimer()
		res, err := s.RunTimed(ctx, 1, timed)
		if err != nil || !res.OK {
			b.Fatal(err, res.Summary())
		}
		n++
		b.StartTimer()
	}
	if _, ok := exec.ProcessCPU(); ok && n > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "CPU-ns/op")
	}
}

// planFile reads plans/ring_allreduce.dag from the module root, found above the working
// directory (a package's directory under go test).
func planFile(b *testing.B) (string, []byte) {
	dir, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			b.Fatal("no go.mod above the working directory: run from the module")
		}
		dir = up
	}
	path := filepath.Join(dir, "plans", "ring_allreduce.dag")
	src, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return path, src
}
