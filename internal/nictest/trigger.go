// Package nictest holds the contract tests of package nic: each provider's own tests call them
// with ends connected on its NIC (Contract for what every provider must do, Trigger and
// TriggerDisarm for providers with TriggerQP, Counters for providers with nic.TriggerContext), so every provider is held to the same behaviour.
// It depends on package nic only.
package nictest

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

// End is one rank of a connected pair: its context and protection domain, a QP, its send and
// receive CQs, and a region of at least 256 bytes (4 KiB for Contract) that peers may write.
type End struct {
	Ctx      nic.Context
	PD       nic.PD
	QP       nic.QP
	SCQ, RCQ nic.CQ
	MR       nic.MR
}

func (e End) sge(off, n int) nic.SGE {
	return nic.SGE{Addr: e.MR.Addr() + uint64(off), Len: uint32(n), LKey: e.MR.LKey()}
}

// Wait polls cq until it has returned n completions, and fails after 10 s.
func Wait(t testing.TB, cq nic.CQ, n int) []nic.WC {
	t.Helper()
	var got []nic.WC
	buf := make([]nic.WC, 16)
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < n {
		k, err := cq.Poll(buf[:min(len(buf), n-len(got))])
		require.NoError(t, err)
		got = append(got, buf[:k]...)
		if time.Now().After(deadline) {
			t.Fatalf("cq %d: %d of %d completions after 10 s: %+v", cq.Num(), len(got), n, got)
		}
	}
	return got
}

// Trigger arms two requests on b: a write to a after two notified writes from a arrive, and a
// NOP behind it that waits for nothing. Neither may go before the second arrival; both go inside
// the Poll that returns it, and the write lands.
func Trigger(t *testing.T, a, b End) {
	tq := b.QP.(nic.TriggerQP)
	ra, rb := a.MR.Remote(), b.MR.Remote()
	binary.LittleEndian.PutUint64(b.MR.Bytes(), 42)
	require.NoError(t, tq.ArmSend(b.RCQ, 2, &nic.SendWR{ID: 9, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: b.sge(0, 8), RemoteAddr: ra.Addr + 64, RKey: ra.RKey}))
	require.NoError(t, tq.ArmSend(b.SCQ, 0, &nic.SendWR{ID: 10, Op: nic.OpNop, Flags: nic.FlagSignaled}))
	_, err := b.QP.PostRecv([]nic.RecvWR{{ID: 1}, {ID: 2}})
	require.NoError(t, err)
	ping := nic.SendWR{Op: nic.OpRDMAWriteImm, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: rb.Addr + 128, RKey: rb.RKey}

	ping.ID = 1
	_, err = a.QP.PostSend([]nic.SendWR{ping})
	require.NoError(t, err)
	Wait(t, b.RCQ, 1)
	armed, n, err := tq.Fired()
	assert.Equal(t, 2, armed, "one of two completions: both still armed, the NOP behind the write")
	assert.Zero(t, n)
	assert.NoError(t, err)

	ping.ID = 2
	_, err = a.QP.PostSend([]nic.SendWR{ping})
	require.NoError(t, err)
	Wait(t, b.RCQ, 1)
	armed, n, err = tq.Fired()
	assert.Zero(t, armed)
	assert.Equal(t, 2, n, "the second completion posts the write and the NOP behind it inside Poll")
	assert.NoError(t, err)
	_, n, _ = tq.Fired()
	assert.Zero(t, n, "what was posted is reported once")

	wcs := Wait(t, b.SCQ, 2)
	assert.EqualValues(t, 9, wcs[0].ID)
	assert.EqualValues(t, 10, wcs[1].ID)
	assert.Equal(t, nic.StatusSuccess, wcs[0].Status)
	assert.EqualValues(t, 42, binary.LittleEndian.Uint64(a.MR.Bytes()[64:]), "the triggered write landed")
	Wait(t, a.SCQ, 2)
}

// TriggerDisarm: an error completion on the CQ a request waits for disarms it; Disarm drops what
// is armed; ArmSend refuses a CQ of another context, a negative count and more than MaxArmed
// requests.
func TriggerDisarm(t *testing.T, a, b End) {
	tq := a.QP.(nic.TriggerQP)
	rb := b.MR.Remote()
	require.NoError(t, tq.ArmSend(a.SCQ, 1, &nic.SendWR{ID: 2, Op: nic.OpNop, Flags: nic.FlagSignaled}))
	_, err := a.QP.PostSend([]nic.SendWR{{ID: 1, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: rb.Addr, RKey: rb.RKey + 1}})
	require.NoError(t, err)
	wc := Wait(t, a.SCQ, 1)[0]
	require.Equal(t, nic.StatusRemoteAccessError, wc.Status, "a write with a wrong key")
	armed, n, err := tq.Fired()
	assert.Zero(t, armed, "an error completion disarms")
	assert.Zero(t, n, "and posts nothing")
	assert.NoError(t, err)

	nop := &nic.SendWR{Op: nic.OpNop}
	assert.ErrorIs(t, tq.ArmSend(b.SCQ, 1, nop), nic.ErrWrongContext)
	assert.ErrorIs(t, tq.ArmSend(a.SCQ, -1, nop), nic.ErrBadRequest)
	for range nic.MaxArmed {
		require.NoError(t, tq.ArmSend(a.SCQ, 1000, nop))
	}
	assert.ErrorIs(t, tq.ArmSend(a.SCQ, 1, nop), nic.ErrQueueFull)
	armed, _, _ = tq.Fired()
	assert.Equal(t, nic.MaxArmed, armed, "a refused ArmSend arms nothing")
	tq.Disarm()
	armed, _, _ = tq.Fired()
	assert.Zero(t, armed)
}
