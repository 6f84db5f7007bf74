//go:build ofi && linux

package ofi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
)

// BenchmarkPingPong runs testdata/ofi/pingpong.dag (dependent notified writes bouncing between
// two ranks, both in this process) on the offload engine, target triggered-sockets, and reports
// ns/hop: one benchmark op is one iteration of the whole ping-pong. With one lane, 1,000 hops do
// not fit the endpoint's libfabric queues at once (QP.flush hands them over as room frees); with 5
// they do. scripts/ofi-pingpong.sh puts
// the figure beside fi_pingpong's.
func BenchmarkPingPong(b *testing.B) {
	p := socketsProvider(b)
	for _, c := range []struct{ hops, lanes int64 }{{10, 1}, {200, 1}, {1000, 1}, {1000, 5}} {
		b.Run(fmt.Sprintf("hops=%d/lanes=%d", c.hops, c.lanes), func(b *testing.B) {
			_, plan := compileFile(b, "../../testdata/ofi/pingpong.dag", map[string]int64{"hops": c.hops, "lanes": c.lanes}, "triggered-sockets")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			s, err := exec.Prepare(ctx, plan, p, exec.Options{Engine: exec.Offload})
			require.NoError(b, err)
			defer s.Close()
			b.ResetTimer()
			var total time.Duration
			for b.Loop() {
				res, err := s.Run(ctx, 1)
				require.NoError(b, err)
				total += res.Latency.Median
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/float64(c.hops), "ns/hop")
		})
	}
}
