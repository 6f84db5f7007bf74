package exec_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
)

func TestPollRingAllreduceBuilt(t *testing.T) {
	for _, ranks := range []int{1, 2, 3, 4, 8} {
		g := exec.RingAllreduceForTest(ranks, 7)
		nic := softnic.New(softnic.Options{NoCrossChannel: true})
		res, err := exec.Run(context.Background(), mustCompile(t, g, exec.Poll), nic, exec.Options{Engine: exec.Poll, Iters: 3})
		require.NoError(t, err, "ranks=%d", ranks)
		assert.True(t, res.OK, "ranks=%d: %s", ranks, res.Summary())
		want := float64(ranks * (ranks + 1) / 2)
		for r := 0; r < ranks; r++ {
			for i, v := range res.Memory.Float64s(r, 0) {
				require.Equal(t, want, v, "ranks=%d rank %d data[%d]", ranks, r, i)
			}
		}
		t.Log(res.Summary())
	}
}

// TestTriggersOnChain runs the ping-pong of testdata/verbs/pingpong.dag: every hop after the first
// waits for exactly one receive completion, so the polling engine arms each one as a QP trigger
// and the software NIC (with Options.Triggers) posts it inside the Poll that finds the completion.
// With exec.Options.NoTriggers the engine posts the same requests itself; memory is the same.
func TestTriggersOnChain(t *testing.T) {
	const hops, iters = 100, 3
	g, _ := loadPlan(t, "../testdata/verbs/pingpong.dag", 2, map[string]int64{"hops": hops})
	plan, err := compileFor(g, "generic")
	require.NoError(t, err)
	for _, off := range []bool{false, true} {
		nic := softnic.New(softnic.Options{NoCrossChannel: true, Triggers: true})
		res, err := exec.Run(context.Background(), plan, nic, exec.Options{Engine: exec.Poll, Iters: iters, NoTriggers: off})
		require.NoError(t, err)
		require.True(t, res.OK, res.Summary())
		assert.EqualValues(t, iters*2*hops, res.WQEsPosted, "every hop and every receive, once")
		if off {
			assert.Zero(t, res.Triggered)
		} else {
			assert.EqualValues(t, iters*(hops-1), res.Triggered, "every hop but the first is triggered: %s", res.Summary())
		}
	}
}
