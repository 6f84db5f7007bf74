package softnic

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
)

// TestTrigger arms two requests on rank 1: a write back to rank 0 after two notified writes
// arrive, and a NOP behind it that waits for nothing. Neither may go before the second arrival;
// both go inside the Poll that returns it.
func TestTrigger(t *testing.T) {
	nic := New(Options{NoCrossChannel: true})
	a, b := pair(t, nic, allAccess, exec.QPConfig{})
	tq := b.qp.(exec.TriggerQP)
	raddr, rkey := a.remote(64)
	binary.LittleEndian.PutUint64(b.mr.Bytes(), 42)
	require.NoError(t, tq.ArmSend(b.rcq, 2, &exec.SendWR{ID: 9, Op: exec.OpRDMAWrite, Flags: exec.FlagSignaled, Local: b.sge(0, 8), RemoteAddr: raddr, RKey: rkey}))
	require.NoError(t, tq.ArmSend(b.scq, 0, &exec.SendWR{ID: 10, Op: exec.OpNop, Flags: exec.FlagSignaled}))
	postRecv(t, b, exec.RecvWR{ID: 1}, exec.RecvWR{ID: 2})
	baddr, bkey := b.remote(128)
	ping := exec.SendWR{Op: exec.OpRDMAWriteImm, Flags: exec.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: baddr, RKey: bkey}

	ping.ID = 1
	postSend(t, a, ping)
	require.Len(t, drain(t, b.rcq, 1), 1)
	armed, n, err := tq.Fired()
	assert.Equal(t, 2, armed, "one of two completions: both still armed, the NOP behind the write")
	assert.Zero(t, n)
	assert.NoError(t, err)

	ping.ID = 2
	postSend(t, a, ping)
	require.Len(t, drain(t, b.rcq, 1), 1)
	armed, n, err = tq.Fired()
	assert.Zero(t, armed)
	assert.Equal(t, 2, n, "the second completion posts the write and the NOP behind it inside Poll")
	assert.NoError(t, err)
	_, n, _ = tq.Fired()
	assert.Zero(t, n, "what was posted is reported once")

	got := drain(t, b.scq, 2)
	require.Len(t, got, 2)
	assert.EqualValues(t, 9, got[0].ID)
	assert.EqualValues(t, 10, got[1].ID)
	assert.EqualValues(t, 42, binary.LittleEndian.Uint64(a.mr.Bytes()[64:]), "the triggered write landed")
}

func TestTriggerDisarmed(t *testing.T) {
	nic := New(Options{NoCrossChannel: true})
	a, b := pair(t, nic, allAccess, exec.QPConfig{})
	tq := a.qp.(exec.TriggerQP)
	raddr, rkey := b.remote(0)
	require.NoError(t, tq.ArmSend(a.scq, 1, &exec.SendWR{ID: 2, Op: exec.OpRDMAWrite, Flags: exec.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: raddr, RKey: rkey}))
	postSend(t, a, exec.SendWR{ID: 1, Op: exec.OpRDMAWrite, Flags: exec.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: raddr, RKey: rkey + 1})
	got := drain(t, a.scq, 1)
	require.Len(t, got, 1)
	assert.Equal(t, exec.StatusRemoteAccessError, got[0].Status)
	armed, n, err := tq.Fired()
	assert.Zero(t, armed, "an error completion disarms")
	assert.Zero(t, n, "and posts nothing")
	assert.NoError(t, err)

	// Disarm drops what is armed.
	c, _ := pair(t, New(Options{}), allAccess, exec.QPConfig{})
	cq := c.qp.(exec.TriggerQP)
	require.NoError(t, cq.ArmSend(c.scq, 1, &exec.SendWR{ID: 2, Op: exec.OpNop, Flags: exec.FlagSignaled}))
	cq.Disarm()
	postSend(t, c, exec.SendWR{ID: 1, Op: exec.OpNop, Flags: exec.FlagSignaled})
	assert.Len(t, drain(t, c.scq, 2), 1, "the disarmed NOP was not posted")
}

func TestArmSendErrors(t *testing.T) {
	nic := New(Options{})
	a, b := pair(t, nic, allAccess, exec.QPConfig{})
	tq := a.qp.(exec.TriggerQP)
	nop := &exec.SendWR{Op: exec.OpNop}
	assert.ErrorIs(t, tq.ArmSend(b.scq, 1, nop), exec.ErrWrongContext)
	assert.ErrorIs(t, tq.ArmSend(a.scq, -1, nop), exec.ErrBadRequest)
	for range exec.MaxArmed {
		require.NoError(t, tq.ArmSend(a.scq, 1, nop))
	}
	assert.ErrorIs(t, tq.ArmSend(a.scq, 1, nop), exec.ErrQueueFull)
	armed, _, _ := tq.Fired()
	assert.Equal(t, exec.MaxArmed, armed, "a failed ArmSend arms nothing")
}
