package exec_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
)

func TestOverlapPercent(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name                 string
		pure, compute, total time.Duration
		want                 float64
	}{
		{"all hidden", 10 * ms, 10 * ms, 10 * ms, 100},
		{"none hidden", 10 * ms, 10 * ms, 20 * ms, 0},
		{"half hidden", 10 * ms, 10 * ms, 15 * ms, 50},
		{"a quarter", 8 * ms, 10 * ms, 16 * ms, 25},
		{"slower than serial clamps to 0", 10 * ms, 10 * ms, 25 * ms, 0},
		{"faster than compute clamps to 100", 10 * ms, 10 * ms, 9 * ms, 100},
		{"no communication time", 0, 10 * ms, 10 * ms, 0},
		{"negative communication time", -ms, 10 * ms, 10 * ms, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.InDelta(t, c.want, exec.OverlapPercent(c.pure, c.compute, c.total), 1e-9)
		})
	}
}

// TestOverlapSoftNIC measures the overlap of the ring allreduce on both engines: the phases
// ran, the compute loop was calibrated, both phases' memory matches the reference (the compute
// loop touches none of it), and the figures are consistent with one another. No timing bounds.
func TestOverlapSoftNIC(t *testing.T) {
	g := exec.RingAllreduceForTest(4, 256)
	for _, e := range ringEngines {
		t.Run(e.name, func(t *testing.T) {
			plan := mustCompile(t, g, e.engine)
			s, err := exec.Prepare(context.Background(), plan, softnic.New(softnic.Options{NoCrossChannel: e.engine == exec.Poll}), exec.Options{Engine: e.engine})
			require.NoError(t, err)
			defer s.Close()
			o, err := s.Overlap(context.Background(), 5)
			require.NoError(t, err)
			require.True(t, o.OK(), "%s\n%s", o.Comm.Summary(), o.Both.Summary())
			require.Equal(t, 5, o.Iters)
			require.Equal(t, 5, o.Comm.Iters)
			require.Equal(t, 5, o.Both.Iters)
			for _, r := range []*exec.Result{o.Comm, o.Both} {
				require.Len(t, r.Latency.All, 5)
				require.Positive(t, r.Latency.Median)
				require.Zero(t, r.WQEsPosted%5, "the same work in every iteration")
			}
			require.Positive(t, o.Comm.WQEsPosted)
			require.Equal(t, o.Comm.WQEsPosted, o.Both.WQEsPosted)
			require.Equal(t, o.Comm.HostSteps, o.Both.HostSteps)
			require.Positive(t, o.Pure)
			require.Positive(t, o.Compute)
			require.Positive(t, o.Total)
			require.Positive(t, o.Units)
			require.Equal(t, exec.OverlapPercent(o.Pure, o.Compute, o.Total), o.Percent)
			if o.CPUTimes {
				require.Positive(t, o.ComputeCPU)
			}
			require.Contains(t, o.Summary(), "overlap ")
		})
	}
}
