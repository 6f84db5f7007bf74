package planner_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
)

// BenchmarkCheckRing is `coredag check` of plans/ring_allreduce.dag (parse, elaborate, verify)
// at three world sizes; ns/planop and B/planop show whether the cost per op stays flat.
func BenchmarkCheckRing(b *testing.B) {
	src, err := os.ReadFile("../plans/ring_allreduce.dag")
	if err != nil {
		b.Fatal(err)
	}
	for _, ranks := range []int64{128, 256, 512} {
		b.Run(fmt.Sprintf("ranks=%d", ranks), func(b *testing.B) {
			var g *ir.Graph
			b.ReportAllocs()
			for b.Loop() {
				if g, err = planner.Load("ring_allreduce.dag", src, map[string]int64{"ranks": ranks}); err != nil {
					b.Fatal(err)
				}
			}
			perOp(b, len(g.Ops))
		})
	}
}

// BenchmarkCompileRing is `coredag compile` of the ring allreduce for connectx past the check
// (lowering only) at three world sizes, its queues deep enough for one iteration.
func BenchmarkCompileRing(b *testing.B) {
	src, err := os.ReadFile("../plans/ring_allreduce.dag")
	if err != nil {
		b.Fatal(err)
	}
	deep := strings.NewReplacer("peer left\n", "peer left depth 2 * ranks\n", "peer right\n", "peer right depth 2 * ranks\n")
	if src = []byte(deep.Replace(string(src))); !strings.Contains(string(src), "depth 2 * ranks") {
		b.Fatal("ring_allreduce.dag: no queue to deepen")
	}
	t, err := ir.LookupTarget("connectx")
	if err != nil {
		b.Fatal(err)
	}
	for _, ranks := range []int64{128, 256, 512} {
		b.Run(fmt.Sprintf("ranks=%d", ranks), func(b *testing.B) {
			g, err := planner.Load("ring_allreduce.dag", src, map[string]int64{"ranks": ranks})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := planner.Compile(g, t); err != nil {
					b.Fatal(err)
				}
			}
			perOp(b, len(g.Ops))
		})
	}
}

// perOp reports time and bytes allocated per op of the plan.
func perOp(b *testing.B, ops int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(ops), "ns/planop")
	b.ReportMetric(float64(ops), "planops")
}
