package softnic

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

// TestScatterGather: a SEND gathers its list and the receive scatters it, in order; an RDMA
// write gathers, a READ scatters; inline lists are copied whole at post; lists longer than
// Caps.MaxSGE are refused at post; the caller may reuse its list once posted.
func TestScatterGather(t *testing.T) {
	sn := New(Options{MaxSGE: 3})
	require.Equal(t, 3, sn.Caps().MaxSGE)
	a, b := pair(t, sn, allAccess, nic.QPConfig{MaxInline: 64})
	fill(a.mr.Bytes()[:64], 1)
	fill(b.mr.Bytes()[2048:2064], 100)

	more := []nic.SGE{a.sge(40, 8), a.sge(0, 0), a.sge(20, 4)}[:2]
	postRecv(t, b, nic.RecvWR{ID: 9, Local: b.sge(1000, 6), More: []nic.SGE{b.sge(2000, 10)}})
	postSend(t, a, nic.SendWR{ID: 1, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(10, 8), More: more})
	more[0] = a.sge(0, 1) // reused by the caller after the post: the posted list is a copy
	sn.Progress()
	got := drain(t, b.rcq, 1)
	require.Len(t, got, 1)
	assert.Equal(t, nic.StatusSuccess, got[0].Status)
	assert.Equal(t, uint32(16), got[0].ByteLen)
	msg := append(append([]byte{}, a.mr.Bytes()[10:18]...), a.mr.Bytes()[40:48]...)
	assert.Equal(t, msg[:6], b.mr.Bytes()[1000:1006])
	assert.Equal(t, msg[6:], b.mr.Bytes()[2000:2010])

	// RDMA write of a gather list into one remote range; READ of one range into a scatter list.
	addr, rkey := b.remote(3000)
	postSend(t, a, nic.SendWR{ID: 2, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: a.sge(0, 4), More: []nic.SGE{a.sge(60, 4)}, RemoteAddr: addr, RKey: rkey})
	addr, rkey = b.remote(2048)
	postSend(t, a, nic.SendWR{ID: 3, Op: nic.OpRDMARead, Flags: nic.FlagSignaled, Local: a.sge(500, 10), More: []nic.SGE{a.sge(600, 6)}, RemoteAddr: addr, RKey: rkey})
	sn.Progress()
	wcs := drain(t, a.scq, 3)
	require.Len(t, wcs, 3)
	for _, wc := range wcs {
		assert.Equal(t, nic.StatusSuccess, wc.Status, "wr %d", wc.ID)
	}
	assert.Equal(t, append(append([]byte{}, a.mr.Bytes()[0:4]...), a.mr.Bytes()[60:64]...), b.mr.Bytes()[3000:3008])
	assert.Equal(t, b.mr.Bytes()[2048:2058], a.mr.Bytes()[500:510])
	assert.Equal(t, b.mr.Bytes()[2058:2064], a.mr.Bytes()[600:606])

	// Inline: the whole list is copied at post time.
	postRecv(t, b, nic.RecvWR{ID: 10, Local: b.sge(3500, 12)})
	postSend(t, a, nic.SendWR{ID: 4, Op: nic.OpSend, Flags: nic.FlagSignaled | nic.FlagInline, Local: a.sge(0, 8), More: []nic.SGE{a.sge(32, 4)}})
	want := append(append([]byte{}, a.mr.Bytes()[0:8]...), a.mr.Bytes()[32:36]...)
	clear(a.mr.Bytes()[:64])
	sn.Progress()
	require.Len(t, drain(t, b.rcq, 1), 1)
	assert.Equal(t, want, b.mr.Bytes()[3500:3512])

	// Four elements on a device of three.
	_, err := a.qp.PostSend([]nic.SendWR{{ID: 5, Op: nic.OpSend, Local: a.sge(0, 1), More: []nic.SGE{a.sge(1, 1), a.sge(2, 1), a.sge(3, 1)}}})
	assert.True(t, errors.Is(err, nic.ErrBadRequest), "%v", err)
	assert.ErrorContains(t, err, "a scatter/gather list of 4 elements, the device allows 3")
	_, err = b.qp.PostRecv([]nic.RecvWR{{ID: 11, Local: b.sge(0, 1), More: []nic.SGE{b.sge(1, 1), b.sge(2, 1), b.sge(3, 1)}}})
	assert.True(t, errors.Is(err, nic.ErrBadRequest), "%v", err)

	// A message longer than the receive's whole list fails as a length error.
	postRecv(t, b, nic.RecvWR{ID: 12, Local: b.sge(0, 2), More: []nic.SGE{b.sge(10, 2)}})
	postSend(t, a, nic.SendWR{ID: 6, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 5)})
	sn.Progress()
	rw := drain(t, b.rcq, 1)
	require.Len(t, rw, 1)
	assert.Equal(t, nic.StatusLocalLengthError, rw[0].Status)
}
