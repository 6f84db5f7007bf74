package planner_test

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/listing"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

// BenchmarkCheckRing is `coredag check` of testdata/scale/ring_allreduce.dag (parse, elaborate, verify)
// at three world sizes; ns/planop and B/planop show whether the cost per op stays flat.
func BenchmarkCheckRing(b *testing.B) { benchCheck(b, "ring_allreduce.dag") }

// BenchmarkCheckSwing is `coredag check` of testdata/scale/swing_allreduce.dag, whose block sets
// are recomputed by recursive defs at every use: it measures a check dominated by evaluating
// functions (parse, elaborate, verify).
func BenchmarkCheckSwing(b *testing.B) { benchCheck(b, "swing_allreduce.dag") }

// benchCheck checks testdata/scale/FILE at 128, 256 and 512 ranks, reporting the CPU time of a
// check beside its wall time, and the costs per op.
func benchCheck(b *testing.B, file string) {
	src, err := os.ReadFile("../testdata/scale/" + file)
	if err != nil {
		b.Fatal(err)
	}
	for _, ranks := range []int64{128, 256, 512} {
		b.Run(fmt.Sprintf("ranks=%d", ranks), func(b *testing.B) {
			var g *ir.Graph
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if g, err = planner.Load(b.Context(), file, src, map[string]int64{"ranks": ranks}, planner.Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			perOp(b, len(g.Ops))
		})
	}
}

// BenchmarkCompileRing is `coredag compile` of the ring allreduce for connectx past the check
// (lowering only), its queues deep enough for the target at every size.
func BenchmarkCompileRing(b *testing.B) {
	benchRing(b, deepRing(b), func(b *testing.B, g *ir.Graph, t ir.Target) {
		if _, err := planner.Compile(b.Context(), g, t); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkListRing is the text listing of the compiled ring allreduce, as `coredag compile`
// writes it (lowering not included).
func BenchmarkListRing(b *testing.B) {
	src := deepRing(b)
	t := connectx(b)
	for _, ranks := range []int64{128, 256, 512} {
		b.Run(fmt.Sprintf("ranks=%d", ranks), func(b *testing.B) {
			g := loadRing(b, src, ranks)
			p, err := planner.Compile(b.Context(), g, t)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := listing.Write(io.Discard, p, listing.Options{}); err != nil {
					b.Fatal(err)
				}
			}
			perOp(b, len(g.Ops))
		})
	}
}

// BenchmarkCheckLimitsRing is the target-limit part of `coredag check`: lower.CheckLimits of the
// ring allreduce for connectx, which lowers rank by rank without keeping the Plan.
func BenchmarkCheckLimitsRing(b *testing.B) {
	benchRing(b, deepRing(b), func(b *testing.B, g *ir.Graph, t ir.Target) {
		if err := lower.CheckLimits(b.Context(), g, t); err != nil {
			b.Fatal(err)
		}
	})
}

// benchRing runs f on the ring allreduce of src for connectx at three world sizes.
func benchRing(b *testing.B, src []byte, f func(*testing.B, *ir.Graph, ir.Target)) {
	t := connectx(b)
	for _, ranks := range []int64{128, 256, 512} {
		b.Run(fmt.Sprintf("ranks=%d", ranks), func(b *testing.B) {
			g := loadRing(b, src, ranks)
			b.ReportAllocs()
			for b.Loop() {
				f(b, g, t)
			}
			perOp(b, len(g.Ops))
		})
	}
}

// deepRing is testdata/scale/ring_allreduce.dag, whose queues are deep enough for connectx at any size
// (their depth grows with ranks).
func deepRing(b *testing.B) []byte {
	src, err := os.ReadFile("../testdata/scale/ring_allreduce.dag")
	if err != nil {
		b.Fatal(err)
	}
	if !strings.Contains(string(src), "depth max(128, 4 * ranks)") {
		b.Fatal("ring_allreduce.dag: its queues no longer grow with ranks")
	}
	return src
}

func loadRing(b *testing.B, src []byte, ranks int64) *ir.Graph {
	g, err := planner.Load(b.Context(), "ring_allreduce.dag", src, map[string]int64{"ranks": ranks}, planner.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func connectx(b *testing.B) ir.Target {
	t, err := ir.LookupTarget("connectx")
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// perOp reports time and bytes allocated per op of the plan.
func perOp(b *testing.B, ops int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(ops), "ns/planop")
	b.ReportMetric(float64(ops), "planops")
}
