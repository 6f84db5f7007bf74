package exec_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
)

// BenchmarkRunNops is `coredag run` of testdata/scale/nops.dag (one nop per rank) on the software
// NIC, set-up, one iteration and teardown per op, at three sizes: ns/op divided by the ranks shows
// whether the cost per rank stays flat.
func BenchmarkRunNops(b *testing.B) {
	for _, e := range ringEngines {
		for _, ranks := range []int{8192, 16384, 32768} {
			b.Run(fmt.Sprintf("%s/ranks=%d", e.name, ranks), func(b *testing.B) {
				g, _ := loadPlan(b, "../testdata/scale/nops.dag", ranks)
				plan := mustCompile(b, g, e.engine)
				b.ReportAllocs()
				for b.Loop() {
					sn := softnic.New(softnic.Options{NoCrossChannel: e.engine == exec.Poll})
					res, err := exec.Run(context.Background(), plan, sn, exec.Options{Engine: e.engine})
					if err != nil || !res.OK {
						b.Fatal(err, res)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(ranks), "ns/rank")
			})
		}
	}
}

// BenchmarkChainAllreduce is one iteration of testdata/scale/chain_allreduce.dag (8 chunks of 256
// f32) on the software NIC, per op, with the session prepared once, on both engines at three
// chain lengths: the offload engine should stay within a small factor of the polling one.
func BenchmarkChainAllreduce(b *testing.B) {
	for _, ranks := range []int{16, 32, 64, 128} {
		g, _ := loadPlan(b, "../testdata/scale/chain_allreduce.dag", ranks)
		ref, err := exec.Reference(g)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range ringEngines {
			b.Run(fmt.Sprintf("%s/ranks=%d", e.name, ranks), func(b *testing.B) {
				runPrepared(b, g, ref, e.engine)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(g.Ops)), "ns/graph-op")
			})
		}
	}
}
