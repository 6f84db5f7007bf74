package softnic

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

// TestParkedWaits: queues whose head waits for a CQ leave the active list, so progress does not
// visit them, and come back when the CQ reaches their count, in any number.
func TestParkedWaits(t *testing.T) {
	sn := New(Options{})
	n := newNode(t, sn, 0)
	y, ycq, _ := n.queue(nic.QPConfig{}, true)
	const waiters = 50
	var xcqs []*cq
	for i := range waiters {
		x, xcq, _ := n.queue(nic.QPConfig{CrossChannel: true}, true)
		_, err := x.PostSend([]nic.SendWR{
			{ID: uint64(100 + i), Op: nic.OpCQEWait, WaitCQ: ycq.Num(), Count: uint32(1 + i%3)},
			{ID: uint64(200 + i), Op: nic.OpNop, Flags: nic.FlagSignaled},
		})
		require.NoError(t, err)
		xcqs = append(xcqs, xcq)
	}
	assert.Zero(t, sn.Progress())
	assert.Empty(t, sn.active, "every waiting queue is parked")
	assert.Len(t, ycq.waiters, waiters)
	for k := 1; k <= 3; k++ {
		_, err := y.PostSend(nops(uint64(k)))
		require.NoError(t, err)
		sn.Progress()
		still := 0
		for i, c := range xcqs {
			assert.Equal(t, i%3 < k, c.produced == 1, "count %d: waiter %d", k, i)
			if i%3 >= k {
				still++
			}
		}
		assert.Len(t, ycq.waiters, still, "count %d", k)
	}
	assert.Empty(t, sn.active)
	assert.Empty(t, sn.Stalls())
}

// TestParkedWaitOnClosedCQ: a WAIT on a CQ that is closed no longer holds its queue.
func TestParkedWaitOnClosedCQ(t *testing.T) {
	sn := New(Options{})
	n := newNode(t, sn, 0)
	w, err := n.ctx.CreateCQ(4)
	require.NoError(t, err)
	x, xcq, _ := n.queue(nic.QPConfig{CrossChannel: true}, true)
	_, err = x.PostSend([]nic.SendWR{
		{ID: 1, Op: nic.OpCQEWait, WaitCQ: w.Num(), Count: 1},
		{ID: 2, Op: nic.OpNop, Flags: nic.FlagSignaled},
	})
	require.NoError(t, err)
	assert.Zero(t, sn.Progress())
	require.NoError(t, w.Close())
	assert.NotZero(t, sn.Progress())
	assert.EqualValues(t, 1, xcq.produced)
}

// TestReadyCQs: ReadyCQs lists each CQ that produced completions once, in the order of its first,
// and again only after a new one.
func TestReadyCQs(t *testing.T) {
	sn := New(Options{})
	n := newNode(t, sn, 0)
	a, acq, _ := n.queue(nic.QPConfig{}, true)
	b, bcq, _ := n.queue(nic.QPConfig{}, true)
	_, err := b.PostSend(nops(1, 2))
	require.NoError(t, err)
	_, err = a.PostSend(nops(3))
	require.NoError(t, err)
	assert.Empty(t, sn.ReadyCQs(nil))
	sn.Progress()
	assert.Equal(t, []nic.CQ{bcq, acq}, sn.ReadyCQs(nil))
	assert.Empty(t, sn.ReadyCQs(nil))
	_, err = a.PostSend(nops(4))
	require.NoError(t, err)
	sn.Progress()
	assert.Equal(t, []nic.CQ{acq}, sn.ReadyCQs(nil))
}
