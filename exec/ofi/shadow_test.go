//go:build ofi && linux

package ofi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

// TestCounterKeptCount: a counter only this side changes answers Value from the count it keeps
// (no call into libfabric), and that count is libfabric's after adds, sets, completions counted
// by a CQ and counter work, chained through three counters and fired in threshold order; a
// counter that is the target of libfabric's deferred work is read from libfabric.
func TestCounterKeptCount(t *testing.T) {
	p := provider(t)
	a, b := pair(t, p, nic.AccessLocalWrite, 8, nil)
	c := a.ctx
	x, err := c.CreateCounter()
	require.NoError(t, err)
	y, err := c.CreateCounter()
	require.NoError(t, err)
	z, err := c.CreateCounter()
	require.NoError(t, err)
	require.NoError(t, c.BindCounter(x, a.scq))
	kept := func() {
		t.Helper()
		for i, k := range []nic.Counter{x, y, z} {
			ck := k.(*Counter)
			assert.False(t, ck.ext, "counter %d", i)
			assert.Equal(t, ck.Read(), k.Value(), "counter %d", i)
		}
	}
	// x >= 1: y += 2; y >= 2: z = 7; y >= 3: z += 1; x >= 2: y += 1.
	for _, w := range []struct {
		on    nic.Counter
		thr   uint64
		to    nic.Counter
		kind  nic.TrigKind
		value uint64
	}{{x, 1, y, nic.TrigAdd, 2}, {y, 2, z, nic.TrigSet, 7}, {y, 3, z, nic.TrigAdd, 1}, {x, 2, y, nic.TrigAdd, 1}} {
		require.NoError(t, c.Trigger(w.on, w.thr, &nic.TriggeredWR{Kind: w.kind, Target: w.to, Value: w.value}))
	}
	kept()
	assert.Zero(t, z.Value())
	// A signalled send completes on a.scq, which raises x by one: the first two pieces of work run.
	_, err = b.qp.PostRecv([]nic.RecvWR{{ID: 1, Local: b.sge(0, 8)}})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]nic.SendWR{{ID: 2, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 8)}})
	require.NoError(t, err)
	waitN(t, a.scq, 1)
	kept()
	assert.EqualValues(t, 1, x.Value())
	assert.EqualValues(t, 2, y.Value())
	assert.EqualValues(t, 7, z.Value())
	require.NoError(t, x.Add(1)) // x >= 2: y += 1, then y >= 3: z += 1
	kept()
	assert.EqualValues(t, 3, y.Value())
	assert.EqualValues(t, 8, z.Value())
	require.NoError(t, z.Set(20))
	kept()
	assert.EqualValues(t, 20, z.Value())
	assert.Zero(t, c.PendingTriggers())

	// libfabric's own deferred work raises its target: that counter is read from libfabric.
	d, err := c.OpenCounter()
	require.NoError(t, err)
	_, err = c.QueueCounterWork(x.(*Counter), 3, d, 4, false, nil)
	require.NoError(t, err)
	assert.True(t, d.ext)
	require.NoError(t, x.Add(1))
	assert.EqualValues(t, d.Read(), d.Value())
}

// waitN polls cq until it has handed out n completions (at most a million polls).
func waitN(t *testing.T, cq nic.CQ, n int) []nic.WC {
	t.Helper()
	wc := make([]nic.WC, n)
	got := 0
	for i := 0; got < n && i < 1_000_000; i++ {
		k, err := cq.Poll(wc[got:])
		require.NoError(t, err)
		got += k
	}
	require.Equal(t, n, got)
	return wc
}
