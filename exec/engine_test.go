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
		res, err := exec.Run(context.Background(), g, nil, nic, exec.Options{Engine: exec.Poll, Iters: 3})
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
