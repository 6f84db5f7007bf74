package prove_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/prove"
	"github.com/coredag/coredag/planner/verify"
)

// cpuTime reports, beside the wall time, the CPU time per op of the process (user and system):
// on a machine shared with other work it moves less than the wall time. It returns it too.
func cpuTime(b *testing.B, body func()) float64 {
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	n := 0
	for b.Loop() {
		body()
		n++
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	ns := func(r *syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
	cpu := float64(ns(&after)-ns(&before)) / float64(n)
	b.ReportMetric(cpu, "cpu-ns/op")
	return cpu
}

// ringAllreduce elaborates testdata/scale/ring_allreduce.dag at ranks and n.
func ringAllreduce(b *testing.B, ranks, n int64) *ir.Graph {
	src, err := os.ReadFile("../../testdata/scale/ring_allreduce.dag")
	require.NoError(b, err)
	g, ok := elaborated(b, "ring_allreduce.dag", src, map[string]int64{"ranks": ranks, "n": n})
	require.True(b, ok)
	return g
}

// BenchmarkCheck compares, on the ring allreduce at three world sizes, the verification pass
// (what check ran before postconditions) with the proof alone, per plan op (ns/planop,
// B/planop): the proof's cost per op must not grow with ranks. At 256 ranks it also runs 1M
// elements per chunk: the proof's cost must not depend on n.
func BenchmarkCheck(b *testing.B) {
	for _, c := range []struct{ ranks, n int64 }{{128, 1 << 10}, {256, 1 << 10}, {512, 1 << 10}, {256, 1 << 20}} {
		g := ringAllreduce(b, c.ranks, c.n)
		name := "ranks=" + strconv.FormatInt(c.ranks, 10) + "/n=" + strconv.FormatInt(c.n, 10)
		b.Run(name+"/verify", func(b *testing.B) {
			perOp(b, len(g.Ops), func() {
				if errs, _ := verify.CheckOrder(b.Context(), g); len(errs) > 0 {
					b.Fatal(errs)
				}
			})
		})
		_, order := verify.CheckOrder(b.Context(), g)
		b.Run(name+"/prove", func(b *testing.B) {
			perOp(b, len(g.Ops), func() {
				if errs := prove.Check(b.Context(), g, order, prove.Options{}); len(errs) > 0 {
					b.Fatal(errs)
				}
			})
		})
	}
}

// perOp runs body as the benchmark loop and reports, beside CPU time per op (cpuTime), time,
// CPU time and bytes allocated per plan op.
func perOp(b *testing.B, ops int, body func()) {
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu := cpuTime(b, body)
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(ops), "ns/planop")
	b.ReportMetric(cpu/float64(ops), "cpu-ns/planop")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(ops), "B/planop")
}

// BenchmarkLoad is what `coredag check` does (planner.Load: parse, elaborate, verify, prove) on
// the 256-rank ring allreduce, with its `expect` line and without it.
func BenchmarkLoad(b *testing.B) {
	src, err := os.ReadFile("../../testdata/scale/ring_allreduce.dag")
	require.NoError(b, err)
	without := []byte(strings.Replace(string(src), "\nexpect allreduce sum data", "\n", 1))
	require.NotEqual(b, string(src), string(without))
	for _, n := range []int64{1 << 10, 1 << 20} {
		params := map[string]int64{"ranks": 256, "n": n}
		for _, c := range []struct {
			name string
			src  []byte
		}{{"without", without}, {"with", src}} {
			b.Run("ranks=256/n="+strconv.FormatInt(n, 10)+"/"+c.name, func(b *testing.B) {
				cpuTime(b, func() {
					g, err := planner.Load(b.Context(), "ring_allreduce.dag", c.src, params, planner.Options{})
					if err != nil {
						b.Fatal(err)
					}
					if want := len(c.src) == len(src); (len(g.Expects) > 0) != want {
						b.Fatal("expect line")
					}
				})
			})
		}
	}
}

// BenchmarkChain proves chain(k, false) at 1k, 3k and 5k ops, a chain of reduces whose values
// grow by one term a step, and reports the most the table of values held (table-B, 24 bytes a
// term) beside -benchmem's allocations: the table used to keep every value, k²/2 terms (385
// MB at 3,000 ops, out of memory at 5,000); collected, it holds what memory holds.
func BenchmarkChain(b *testing.B) {
	for _, k := range []int{1000, 3000, 5000} {
		g, order := proveChain(b, k, false)
		b.Run("ops="+strconv.Itoa(k), func(b *testing.B) {
			b.ReportAllocs()
			peak := 0
			for b.Loop() {
				p, _ := prove.Run(b.Context(), g, order, prove.Options{}).Terms()
				peak = max(peak, p)
			}
			b.ReportMetric(float64(peak*24), "table-B")
		})
	}
}
