//go:build verbs && linux

package verbs

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
)

// TestTrigger arms a reply on rank 1 to be posted after two notified writes arrive: it must not
// fire on the first, must fire inside the Poll that returns the second, and the reply must land.
func TestTrigger(t *testing.T) {
	p := provider(t)
	a, b := pair(t, p, exec.AccessLocalWrite|exec.AccessRemoteWrite, 0)
	tq := b.qp.(exec.TriggerQP)
	ra, rb := a.mem.Remote(), b.mem.Remote()
	binary.LittleEndian.PutUint64(b.mem.Bytes(), 42)
	reply := exec.SendWR{ID: 9, Op: exec.OpRDMAWrite, Flags: exec.FlagSignaled, Local: sge(b.mem, 0, 8), RemoteAddr: ra.Addr + 64, RKey: ra.RKey}
	require.NoError(t, tq.ArmSend(b.rcq, 2, []exec.SendWR{reply}))
	_, err := b.qp.PostRecv([]exec.RecvWR{{ID: 1}, {ID: 2}})
	require.NoError(t, err)
	ping := exec.SendWR{Op: exec.OpRDMAWriteImm, Flags: exec.FlagSignaled, Local: sge(a.mem, 0, 8), RemoteAddr: rb.Addr + 128, RKey: rb.RKey}

	ping.ID = 1
	_, err = a.qp.PostSend([]exec.SendWR{ping})
	require.NoError(t, err)
	wait(t, b.rcq, 1)
	armed, n, err := tq.Fired()
	assert.True(t, armed, "one of two completions: still armed")
	assert.Zero(t, n)
	assert.NoError(t, err)

	ping.ID = 2
	_, err = a.qp.PostSend([]exec.SendWR{ping})
	require.NoError(t, err)
	wait(t, b.rcq, 1)
	armed, n, err = tq.Fired()
	assert.False(t, armed)
	assert.Equal(t, 1, n, "the second completion posts the reply inside Poll")
	assert.NoError(t, err)
	_, n, _ = tq.Fired()
	assert.Zero(t, n, "an outcome is reported once")

	wc := wait(t, b.scq, 1)[0]
	assert.Equal(t, exec.StatusSuccess, wc.Status)
	assert.EqualValues(t, 9, wc.ID)
	assert.EqualValues(t, 42, binary.LittleEndian.Uint64(a.mem.Bytes()[64:]), "the triggered write landed")
	wait(t, a.scq, 2)
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
	require.NoError(t, tq.ArmSend(a.scq, 1, []exec.SendWR{{ID: 2, Op: exec.OpNop, Flags: exec.FlagSignaled}}))
	_, err := a.qp.PostSend([]exec.SendWR{write}) // rank 1 grants no remote write
	require.NoError(t, err)
	wc := wait(t, a.scq, 1)[0]
	require.Equal(t, exec.StatusRemoteAccessError, wc.Status)
	armed, n, err := tq.Fired()
	assert.False(t, armed, "an error completion disarms")
	assert.Zero(t, n, "and posts nothing")
	assert.NoError(t, err)
}

func triggerRejected(t *testing.T, p exec.Provider) {
	c, d := pair(t, p, exec.AccessLocalWrite, 0)
	cq := c.qp.(exec.TriggerQP)
	big := exec.SendWR{ID: 4, Op: exec.OpSend, Flags: exec.FlagInline | exec.FlagSignaled, Local: exec.SGE{Addr: c.mem.Addr(), Len: uint32(p.Caps().MaxInline + 1)}}
	require.NoError(t, cq.ArmSend(c.scq, 1, []exec.SendWR{big}))
	_, err := c.qp.PostSend([]exec.SendWR{{ID: 3, Op: exec.OpNop, Flags: exec.FlagSignaled}})
	require.NoError(t, err)
	wait(t, c.scq, 1)
	armed, n, err := cq.Fired()
	assert.False(t, armed)
	assert.Zero(t, n)
	assert.ErrorIs(t, err, exec.ErrInlineTooLarge, "the triggered post's error names the cause")

	nop := exec.SendWR{Op: exec.OpNop}
	assert.ErrorIs(t, cq.ArmSend(d.scq, 1, []exec.SendWR{nop}), exec.ErrWrongContext)
	assert.ErrorIs(t, cq.ArmSend(c.scq, 1, nil), exec.ErrBadRequest)
	assert.ErrorIs(t, cq.ArmSend(c.scq, 1, make([]exec.SendWR, exec.MaxTriggerWRs+1)), exec.ErrBadRequest)
	assert.ErrorIs(t, cq.ArmSend(c.scq, 0, []exec.SendWR{nop}), exec.ErrBadRequest)
}
