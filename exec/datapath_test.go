package exec_test

import (
	"context"
	"testing"
	"time"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
)

// BenchmarkSoftnicAllreduce runs the ring allreduce with ranks=4 and 1M f32 per chunk on the
// software NIC and, side by side, a plain copy() of the bytes the allreduce moves between
// ranks (2*(ranks-1) chunks per rank), in the same chunk-sized pieces between distinct regions. It reports both
// bandwidths and their ratio (allreduce / copy).
func BenchmarkSoftnicAllreduce(b *testing.B) {
	const ranks, n = 4, 1 << 20
	g := exec.RingAllreduceForTest(ranks, n)
	ref, err := exec.Reference(g)
	if err != nil {
		b.Fatal(err)
	}
	chunk := n * 4
	moved := int64(ranks * 2 * (ranks - 1) * chunk)
	// Distinct source and destination regions as large as the traffic, so the copy, like the
	// allreduce, streams through memory instead of re-copying one cached chunk.
	src, dst := make([]byte, moved), make([]byte, moved)
	for i := range src {
		src[i] = byte(i)
	}
	for _, e := range []struct {
		name   string
		engine exec.Engine
		cross  bool
	}{{"poll", exec.Poll, false}, {"offload", exec.Offload, true}} {
		b.Run(e.name, func(b *testing.B) {
			var plan = mustCompile(b, g, e.engine)
			nic := softnic.New(softnic.Options{NoCrossChannel: !e.cross})
			b.ResetTimer()
			res, err := exec.Run(context.Background(), plan, nic, exec.Options{Engine: e.engine, Iters: b.N, Reference: ref})
			if err != nil {
				b.Fatal(err)
			}
			if !res.OK {
				b.Fatal(res.Summary())
			}
			var copyTime time.Duration
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				for off := int64(0); off < moved; off += int64(chunk) {
					copy(dst[off:off+int64(chunk)], src[off:off+int64(chunk)])
				}
				copyTime += time.Since(t0)
			}
			run := res.Latency.Median.Seconds()
			cp := copyTime.Seconds() / float64(b.N)
			b.ReportMetric(float64(moved)/run/1e9, "allreduce-GB/s")
			b.ReportMetric(float64(moved)/cp/1e9, "copy-GB/s")
			b.ReportMetric(cp/run, "ratio")
		})
	}
}
