package softnic

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

// TestProgressBounded: one Progress call makes at most maxSteps steps, in FIFO order and
// seeded, and the next goes on from there: an engine that posted a whole iteration looks at its
// context between calls. 20 queues of 256 unsignalled NOPs are 5120 requests: as many steps in
// FIFO order (a request executes and completes in one), twice as many seeded.
func TestProgressBounded(t *testing.T) {
	assert.Equal(t, []int{maxSteps, 5120 - maxSteps, 0}, progressCalls(t, Options{}, 3), "FIFO")
	assert.Equal(t, []int{maxSteps, maxSteps, 2*5120 - 2*maxSteps, 0}, progressCalls(t, Options{Seeded: true, Seed: 3}, 4), "seeded")
}

// progressCalls posts 256 unsignalled NOPs on each of 20 queues of a NIC made with opts, and
// returns the steps of calls Progress calls, checking that every request ran.
func progressCalls(t *testing.T, opts Options, calls int) []int {
	sn := New(opts)
	n := newNode(t, sn, 0)
	wrs := make([]nic.SendWR, 256)
	for i := range wrs {
		wrs[i] = nic.SendWR{ID: uint64(i), Op: nic.OpNop}
	}
	for range 20 {
		q, _, _ := n.queue(nic.QPConfig{}, true)
		_, err := q.PostSend(wrs)
		require.NoError(t, err)
	}
	var steps []int
	for range calls {
		steps = append(steps, sn.Progress())
	}
	assert.Empty(t, sn.active, "every request ran")
	return steps
}
