package viz

import (
	"io"
	"os"
	"testing"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
)

// ringPlan compiles testdata/scale/ring_allreduce.dag for connectx with the given rank count.
func ringPlan(b testing.TB, ranks int64) *ir.Plan {
	src, err := os.ReadFile("../testdata/scale/ring_allreduce.dag")
	if err != nil {
		b.Fatal(err)
	}
	g, err := planner.Load(b.Context(), "ring_allreduce.dag", src, map[string]int64{"ranks": ranks}, planner.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return compile(b, g)
}

func planEntries(p *ir.Plan) int {
	n := 0
	for r := range p.Ranks {
		n += rankEntries(&p.Ranks[r])
	}
	return n
}

// BenchmarkRenderPlanSVG renders the plan view of a plan of about 400 WQEs (ring allreduce on
// 7 ranks for connectx), drawn in full, to SVG: building the DOT, running Graphviz's dot for the
// layout and SVG output.
func BenchmarkRenderPlanSVG(b *testing.B) {
	needDot(b)
	p := ringPlan(b, 7)
	n := planEntries(p)
	if n < 400 {
		b.Fatalf("plan has %d WQEs, want at least 400", n)
	}
	// Warm up (dot's program and libraries in the page cache) outside the timed loop.
	if err := Write(Plan(p, Options{Full: true}), SVG, io.Discard); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Write(Plan(p, Options{Full: true}), SVG, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "wqes")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/wqe")
}
