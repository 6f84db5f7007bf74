package nictest

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

// Counters holds a provider to the nic.TriggerContext contract, on ends whose contexts implement
// it and start with no triggered work: a send triggered at threshold 2 of a counter bound to a
// receive CQ does not fire after one completion and fires after two; work with equal thresholds
// fires in submission order; counter-add and counter-set work and the host's Add and Set fire
// what they make due; CancelTriggers drops pending work; an error completion raises a bound
// counter like a successful one.
func Counters(t *testing.T, a, b End) {
	ta, ok := a.Ctx.(nic.TriggerContext)
	require.True(t, ok, "context of a is no nic.TriggerContext")
	tb, ok := b.Ctx.(nic.TriggerContext)
	require.True(t, ok, "context of b is no nic.TriggerContext")
	newCounter := func(tc nic.TriggerContext) nic.Counter {
		k, err := tc.CreateCounter()
		require.NoError(t, err)
		assert.Zero(t, k.Value(), "a new counter is at 0")
		return k
	}
	ra, rb := a.MR.Remote(), b.MR.Remote()
	// settle polls cq, which drives a provider's progress, until cond holds or 10 s passed: due
	// work fires asynchronously.
	settle := func(cq nic.CQ, cond func() bool) {
		deadline := time.Now().Add(10 * time.Second)
		var buf [4]nic.WC
		for !cond() && time.Now().Before(deadline) {
			n, err := cq.Poll(buf[:])
			require.NoError(t, err)
			require.Zero(t, n, "no completion expected on cq %d", cq.Num())
		}
	}

	t.Run("threshold 2", func(t *testing.T) {
		rcnt := newCounter(tb)
		require.NoError(t, tb.BindCounter(rcnt, b.RCQ))
		binary.LittleEndian.PutUint64(b.MR.Bytes(), 77)
		require.NoError(t, tb.Trigger(rcnt, 2, &nic.TriggeredWR{Kind: nic.TrigSend, QP: b.QP,
			Send: nic.SendWR{ID: 9, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: b.sge(0, 8), RemoteAddr: ra.Addr + 64, RKey: ra.RKey}}))
		assert.Equal(t, 1, tb.PendingTriggers())
		_, err := b.QP.PostRecv([]nic.RecvWR{{ID: 1}, {ID: 2}})
		require.NoError(t, err)
		ping := nic.SendWR{Op: nic.OpRDMAWriteImm, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: rb.Addr + 128, RKey: rb.RKey}
		ping.ID = 1
		_, err = a.QP.PostSend([]nic.SendWR{ping})
		require.NoError(t, err)
		Wait(t, b.RCQ, 1)
		assert.EqualValues(t, 1, rcnt.Value(), "one receive completion")
		assert.Equal(t, 1, tb.PendingTriggers(), "threshold 2 is not reached by one completion")
		var none [4]nic.WC
		n, err := b.SCQ.Poll(none[:])
		require.NoError(t, err)
		assert.Zero(t, n, "the triggered write did not run")

		ping.ID = 2
		_, err = a.QP.PostSend([]nic.SendWR{ping})
		require.NoError(t, err)
		Wait(t, b.RCQ, 1)
		assert.EqualValues(t, 2, rcnt.Value())
		wc := Wait(t, b.SCQ, 1)[0]
		assert.EqualValues(t, 9, wc.ID, "the second completion fires the write")
		assert.Equal(t, nic.StatusSuccess, wc.Status)
		assert.Zero(t, tb.PendingTriggers())
		assert.EqualValues(t, 77, binary.LittleEndian.Uint64(a.MR.Bytes()[64:]), "the triggered write landed")
		Wait(t, a.SCQ, 2)
		assert.NoError(t, tb.TriggerErr())
	})

	t.Run("equal thresholds in submission order", func(t *testing.T) {
		gate, x, y := newCounter(tb), newCounter(tb), newCounter(tb)
		work := func(k nic.TrigKind, target nic.Counter, v uint64) *nic.TriggeredWR {
			return &nic.TriggeredWR{Kind: k, Target: target, Value: v}
		}
		require.NoError(t, tb.Trigger(gate, 1, work(nic.TrigSet, x, 10)))
		require.NoError(t, tb.Trigger(gate, 1, work(nic.TrigAdd, x, 1)))
		require.NoError(t, tb.Trigger(gate, 1, work(nic.TrigAdd, y, 1)))
		require.NoError(t, tb.Trigger(gate, 1, work(nic.TrigSet, y, 7)))
		// A higher threshold submitted first fires after them.
		require.NoError(t, tb.Trigger(gate, 2, work(nic.TrigAdd, y, 100)))
		assert.Equal(t, 5, tb.PendingTriggers())
		require.NoError(t, gate.Add(1))
		settle(b.SCQ, func() bool { return tb.PendingTriggers() == 1 })
		assert.EqualValues(t, 11, x.Value(), "set 10, then add 1")
		assert.EqualValues(t, 7, y.Value(), "add 1, then set 7")
		assert.Equal(t, 1, tb.PendingTriggers(), "threshold 2 still waits")
		require.NoError(t, gate.Set(2))
		settle(b.SCQ, func() bool { return tb.PendingTriggers() == 0 })
		assert.EqualValues(t, 107, y.Value(), "the host's Set fires what it makes due")
		assert.Zero(t, tb.PendingTriggers())
	})

	t.Run("counter work chains", func(t *testing.T) {
		c1, c2, c3 := newCounter(tb), newCounter(tb), newCounter(tb)
		// c1 >= 1 adds 2 to c2; c2 >= 2 sets c3 to 5; a threshold already reached fires at once.
		require.NoError(t, tb.Trigger(c2, 2, &nic.TriggeredWR{Kind: nic.TrigSet, Target: c3, Value: 5}))
		require.NoError(t, tb.Trigger(c1, 1, &nic.TriggeredWR{Kind: nic.TrigAdd, Target: c2, Value: 2}))
		assert.Zero(t, c3.Value())
		require.NoError(t, c1.Add(1))
		settle(b.SCQ, func() bool { return c3.Value() == 5 })
		assert.EqualValues(t, 2, c2.Value())
		assert.EqualValues(t, 5, c3.Value(), "work made due by counter work fires")
		require.NoError(t, tb.Trigger(c3, 5, &nic.TriggeredWR{Kind: nic.TrigAdd, Target: c1, Value: 3}))
		settle(b.SCQ, func() bool { return c1.Value() == 4 })
		assert.EqualValues(t, 4, c1.Value(), "a threshold already reached fires at once")
		assert.Zero(t, tb.PendingTriggers())
	})

	t.Run("cancel", func(t *testing.T) {
		c, d := newCounter(tb), newCounter(tb)
		require.NoError(t, tb.Trigger(c, 1, &nic.TriggeredWR{Kind: nic.TrigAdd, Target: d, Value: 1}))
		require.NoError(t, tb.Trigger(c, 3, &nic.TriggeredWR{Kind: nic.TrigSend, QP: b.QP, Send: nic.SendWR{ID: 30, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: b.sge(0, 8), RemoteAddr: ra.Addr, RKey: ra.RKey}}))
		assert.Equal(t, 2, tb.PendingTriggers())
		assert.Equal(t, 2, tb.CancelTriggers())
		assert.Zero(t, tb.PendingTriggers())
		require.NoError(t, c.Add(3))
		assert.Zero(t, d.Value(), "cancelled counter work does not fire")
		var none [4]nic.WC
		n, err := b.SCQ.Poll(none[:])
		require.NoError(t, err)
		assert.Zero(t, n, "a cancelled send is not posted")
		assert.NoError(t, tb.TriggerErr(), "cancelling is no error")
	})

	t.Run("error completion raises the counter", func(t *testing.T) {
		scnt, after := newCounter(ta), newCounter(ta)
		require.NoError(t, ta.BindCounter(scnt, a.SCQ))
		require.NoError(t, ta.Trigger(scnt, 1, &nic.TriggeredWR{Kind: nic.TrigAdd, Target: after, Value: 1}))
		_, err := a.QP.PostSend([]nic.SendWR{{ID: 40, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: rb.Addr, RKey: rb.RKey + 1}})
		require.NoError(t, err)
		wc := Wait(t, a.SCQ, 1)[0]
		require.Equal(t, nic.StatusRemoteAccessError, wc.Status, "a write with a wrong key")
		assert.EqualValues(t, 1, scnt.Value(), "an error completion raises a bound counter")
		settle(a.SCQ, func() bool { return after.Value() == 1 })
		assert.EqualValues(t, 1, after.Value(), "and fires what it makes due")
	})

	t.Run("foreign counters", func(t *testing.T) {
		k := newCounter(ta)
		assert.ErrorIs(t, tb.BindCounter(k, b.RCQ), nic.ErrWrongContext, "a counter of another context")
		own := newCounter(tb)
		assert.ErrorIs(t, tb.Trigger(own, 1, &nic.TriggeredWR{Kind: nic.TrigAdd, Target: k, Value: 1}), nic.ErrWrongContext)
		assert.Zero(t, tb.PendingTriggers(), "refused work is not queued")
	})
}
