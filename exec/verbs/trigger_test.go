//go:build verbs && linux

package verbs

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
	p := provider(t)
	a, b := pair(t, p, exec.AccessLocalWrite|exec.AccessRemoteWrite, 0)
	tq := b.qp.(exec.TriggerQP)
	ra, rb := a.mem.Remote(), b.mem.Remote()
	binary.LittleEndian.PutUint64(b.mem.Bytes(), 42)
	require.NoError(t, tq.ArmSend(b.rcq, 2, &exec.SendWR{ID: 9, Op: exec.OpRDMAWrite, Flags: exec.FlagSignaled, Local: sge(b.mem, 0, 8), RemoteAddr: ra.Addr + 64, RKey: ra.RKey}))
	require.NoError(t, tq.ArmSend(b.scq, 0, &exec.SendWR{ID: 10, Op: exec.OpNop, Flags: exec.FlagSignaled}))
	_, err := b.qp.PostRecv([]exec.RecvWR{{ID: 1}, {ID: 2}})
	require.NoError(t, err)
	ping := exec.SendWR{Op: exec.OpRDMAWriteImm, Flags: exec.FlagSignaled, Local: sge(a.mem, 0, 8), RemoteAddr: rb.Addr + 128, RKey: rb.RKey}

	ping.ID = 1
	_, err = a.qp.PostSend([]exec.SendWR{ping})
	require.NoError(t, err)
	wait(t, b.rcq, 1)
	armed, n, err := tq.Fired()
	assert.Equal(t, 2, armed, "one of two completions: both still armed, the NOP behind the write")
	assert.Zero(t, n)
	assert.NoError(t, err)

	ping.ID = 2
	_, err = a.qp.PostSend([]exec.SendWR{ping})
	require.NoError(t, err)
	wait(t, b.rcq, 1)
	armed, n, err = tq.Fired()
	assert.Zero(t, armed)
	assert.Equal(t, 2, n, "the second completion posts the write and the NOP behind it inside Poll")
	assert.NoError(t, err)
	_, n, _ = tq.Fired()
	assert.Zero(t, n, "what was posted is reported once")

	wcs := wait(t, b.scq, 2)
	assert.EqualValues(t, 9, wcs[0].ID)
	assert.EqualValues(t, 10, wcs[1].ID)
	assert.Equal(t, exec.StatusSuccess, wcs[0].Status)
	assert.EqualValues(t, 42, binary.LittleEndian.Uint64(a.mem.Bytes()[64:]), "the triggered write landed")
	wait(t, a.scq, 2)
}

// TestHold: a CQ told to hold its next two completions returns both from one poll, after the
// first triggered the reply that brought the second.
func TestHold(t *testing.T) {
	p := provider(t)
	a, b := pair(t, p, exec.AccessLocalWrite|exec.AccessRemoteWrite, 0)
	ra, rb := a.mem.Remote(), b.mem.Remote()
	_, err := a.qp.PostRecv([]exec.RecvWR{{ID: 1}, {ID: 2}})
	require.NoError(t, err)
	_, err = b.qp.PostRecv([]exec.RecvWR{{ID: 3}})
	require.NoError(t, err)
	ping := func(id uint64, to exec.RemoteMR, from exec.MR) *exec.SendWR {
		return &exec.SendWR{ID: id, Op: exec.OpRDMAWriteImm, Flags: exec.FlagSignaled, Local: sge(from, 0, 8), RemoteAddr: to.Addr, RKey: to.RKey}
	}
	// b answers a's first ping from inside its poll; a answers b's answer from inside its poll.
	require.NoError(t, b.qp.(exec.TriggerQP).ArmSend(b.rcq, 1, ping(5, ra, b.mem)))
	require.NoError(t, a.qp.(exec.TriggerQP).ArmSend(a.rcq, 1, ping(6, rb, a.mem)))
	a.rcq.(exec.HoldCQ).Hold(1)
	_, err = a.qp.PostSend([]exec.SendWR{*ping(4, rb, a.mem)})
	require.NoError(t, err)
	wait(t, b.rcq, 1)
	_, err = b.qp.PostRecv([]exec.RecvWR{{ID: 7}})
	require.NoError(t, err)
	got := wait(t, a.rcq, 1)
	assert.Len(t, got, 1, "a's receive CQ returns the held completion")
	_, n, _ := a.qp.(exec.TriggerQP).Fired()
	assert.Equal(t, 1, n, "a's reply went out from the poll")
	wait(t, b.rcq, 1)
}

// TestTriggerFaults: an error completion disarms; a request the QP rejects comes back from Fired
// as PostSend's error would; ArmSend refuses what it cannot hold.
func TestTriggerFaults(t *testing.T) {
	p := provider(t)
	t.Run("error completion", func(t *testing.T) { triggerOnError(t, p) })
	t.Run("rejected request", func(t *testing.T) { triggerRejected(t, p) })
}

func triggerOnError(t *testing.T, p exec.Provider) {
	a, b := pair(t, p, exec.AccessLocalWrite|exec.AccessRemoteRead, 0)
	tq := a.qp.(exec.TriggerQP)
	rb := b.mem.Remote()
	write := exec.SendWR{ID: 1, Op: exec.OpRDMAWrite, Flags: exec.FlagSignaled, Local: sge(a.mem, 0, 8), RemoteAddr: rb.Addr, RKey: rb.RKey}
	require.NoError(t, tq.ArmSend(a.scq, 1, &exec.SendWR{ID: 2, Op: exec.OpNop, Flags: exec.FlagSignaled}))
	_, err := a.qp.PostSend([]exec.SendWR{write}) // rank 1 grants no remote write
	require.NoError(t, err)
	wc := wait(t, a.scq, 1)[0]
	require.Equal(t, exec.StatusRemoteAccessError, wc.Status)
	armed, n, err := tq.Fired()
	assert.Zero(t, armed, "an error completion disarms")
	assert.Zero(t, n, "and posts nothing")
	assert.NoError(t, err)
}

func triggerRejected(t *testing.T, p exec.Provider) {
	c, d := pair(t, p, exec.AccessLocalWrite, 0)
	cq := c.qp.(exec.TriggerQP)
	big := &exec.SendWR{ID: 4, Op: exec.OpSend, Flags: exec.FlagInline | exec.FlagSignaled, Local: exec.SGE{Addr: c.mem.Addr(), Len: uint32(p.Caps().MaxInline + 1)}}
	require.NoError(t, cq.ArmSend(c.scq, 1, big))
	_, err := c.qp.PostSend([]exec.SendWR{{ID: 3, Op: exec.OpNop, Flags: exec.FlagSignaled}})
	require.NoError(t, err)
	wait(t, c.scq, 1)
	armed, n, err := cq.Fired()
	assert.Zero(t, armed)
	assert.Zero(t, n)
	assert.ErrorIs(t, err, exec.ErrInlineTooLarge, "the triggered post's error names the cause")

	nop := &exec.SendWR{Op: exec.OpNop}
	assert.ErrorIs(t, cq.ArmSend(d.scq, 1, nop), exec.ErrWrongContext)
	assert.ErrorIs(t, cq.ArmSend(c.scq, -1, nop), exec.ErrBadRequest)
	for range exec.MaxArmed {
		require.NoError(t, cq.ArmSend(c.scq, 1000, nop))
	}
	assert.ErrorIs(t, cq.ArmSend(c.scq, 1, nop), exec.ErrQueueFull)
	cq.Disarm()
}
