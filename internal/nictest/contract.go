package nictest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

// PairConfig says how Pair builds a connected pair.
type PairConfig struct {
	Access   nic.Access // the access rights of b's region (a's has every right)
	Depth    int        // send and receive queue depth, CQ depth at least this (0: 64)
	RNRRetry int        // QPConfig.RNRRetry
}

// Pair opens ranks 0 (a) and 1 (b) of one provider and connects one RC QP between them, each
// with a send CQ and a receive CQ of its own, a 4 KiB region and QPConfig.MaxInline set to
// Caps.MaxInline. It releases them when the test ends.
type Pair func(t *testing.T, cfg PairConfig) (a, b End)

// AllAccess is every access right.
const AllAccess = nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic

// Contract runs the checks every provider must pass (the rules in package nic's comment):
// regions, queue order of posts and completions, selective signalling, errors at post time, a
// full receive queue, and an error completion flushing the rest of its queue. caps are the
// provider's; pair builds fresh ends for each check.
func Contract(t *testing.T, caps nic.Caps, pair Pair) {
	t.Run("Regions", func(t *testing.T) { contractRegions(t, pair) })
	t.Run("Order", func(t *testing.T) { contractOrder(t, pair) })
	t.Run("Signalling", func(t *testing.T) { contractSignalling(t, pair) })
	t.Run("PostErrors", func(t *testing.T) { contractPostErrors(t, caps, pair) })
	t.Run("RecvQueueFull", func(t *testing.T) { contractRecvQueueFull(t, pair) })
	t.Run("Flush", func(t *testing.T) { contractFlush(t, pair) })
	t.Run("ScatterGather", func(t *testing.T) { contractScatterGather(t, caps, pair) })
}

// contractScatterGather: a SEND gathers its SGE list (Local, then More) and the receive scatters
// the message over its own, in order; an RDMA write gathers, a READ scatters; a list longer than
// Caps.MaxSGE is refused at post time. Pair's QPs must allow 3 SGEs when the device does.
func contractScatterGather(t *testing.T, caps nic.Caps, pair Pair) {
	if caps.MaxSGE < 3 {
		t.Skipf("the device takes %d SGEs per request", caps.MaxSGE)
	}
	a, b := pair(t, PairConfig{Access: AllAccess})
	am, bm := a.MR.Bytes(), b.MR.Bytes()
	for i := range 256 {
		am[i] = byte(i + 1)
		bm[2048+i] = byte(200 - i)
	}
	_, err := b.QP.PostRecv([]nic.RecvWR{{ID: 100, Local: b.sge(0, 6), More: []nic.SGE{b.sge(100, 4), b.sge(200, 10)}}})
	require.NoError(t, err)
	rb := b.MR.Remote()
	_, err = a.QP.PostSend([]nic.SendWR{
		{ID: 1, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 8), More: []nic.SGE{a.sge(64, 12)}},
		{ID: 2, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: a.sge(16, 4), More: []nic.SGE{a.sge(128, 4), a.sge(192, 8)}, RemoteAddr: rb.Addr + 1024, RKey: rb.RKey},
		{ID: 3, Op: nic.OpRDMARead, Flags: nic.FlagSignaled, Local: a.sge(1024, 5), More: []nic.SGE{a.sge(1100, 11)}, RemoteAddr: rb.Addr + 2048, RKey: rb.RKey},
	})
	require.NoError(t, err)
	rw := Wait(t, b.RCQ, 1)
	require.Equal(t, nic.StatusSuccess, rw[0].Status, "%+v", rw[0])
	assert.EqualValues(t, 20, rw[0].ByteLen)
	for _, wc := range Wait(t, a.SCQ, 3) {
		require.Equal(t, nic.StatusSuccess, wc.Status, "%+v", wc)
	}
	msg := append(append([]byte{}, am[0:8]...), am[64:76]...)
	assert.Equal(t, msg, append(append(append([]byte{}, bm[0:6]...), bm[100:104]...), bm[200:210]...), "send gathered, receive scattered")
	assert.Equal(t, append(append(append([]byte{}, am[16:20]...), am[128:132]...), am[192:200]...), bm[1024:1040], "write gathered")
	assert.Equal(t, bm[2048:2064], append(append([]byte{}, am[1024:1029]...), am[1100:1111]...), "read scattered")

	long := make([]nic.SGE, caps.MaxSGE)
	for i := range long {
		long[i] = a.sge(i, 1)
	}
	_, err = a.QP.PostSend([]nic.SendWR{{ID: 4, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(3000, 1), More: long}})
	assert.Error(t, err, "a list of %d SGEs on a device of %d", 1+len(long), caps.MaxSGE)
}

// contractRegions: a region is as large as asked, zeroed, cache-line aligned, with the access
// asked for, and its remote descriptor names it.
func contractRegions(t *testing.T, pair Pair) {
	a, b := pair(t, PairConfig{Access: nic.AccessLocalWrite | nic.AccessRemoteRead})
	for _, e := range []End{a, b} {
		m := e.MR
		require.Len(t, m.Bytes(), 4096)
		assert.Zero(t, bytes.Count(m.Bytes(), []byte{0})-len(m.Bytes()), "a new region is zeroed")
		assert.Zero(t, m.Addr()%64, "cache-line aligned")
		assert.Equal(t, nic.RemoteMR{Addr: m.Addr(), RKey: m.RKey(), Len: 4096}, m.Remote())
	}
	assert.Equal(t, AllAccess, a.MR.Access())
	assert.Equal(t, nic.AccessLocalWrite|nic.AccessRemoteRead, b.MR.Access())
}

// contractOrder: receives are consumed in posting order, whatever the message (send, empty send,
// write with immediate), and both queues complete in posting order with the ids, lengths,
// immediate data and QP numbers of their requests; a Poll returns at most as many completions as
// it is given room for.
func contractOrder(t *testing.T, pair Pair) {
	a, b := pair(t, PairConfig{Access: AllAccess})
	for i := range 256 {
		a.MR.Bytes()[i] = byte(i + 1)
	}
	_, err := b.QP.PostRecv([]nic.RecvWR{{ID: 100, Local: b.sge(0, 64)}, {ID: 101, Local: b.sge(64, 64)}, {ID: 102}, {ID: 103, Local: b.sge(128, 64)}})
	require.NoError(t, err)
	rb := b.MR.Remote()
	n, err := a.QP.PostSend([]nic.SendWR{
		{ID: 1, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 8)},
		{ID: 2, Op: nic.OpRDMAWriteImm, Flags: nic.FlagSignaled, Local: a.sge(8, 16), RemoteAddr: rb.Addr + 1024, RKey: rb.RKey, Imm: 77},
		{ID: 3, Op: nic.OpSend, Flags: nic.FlagSignaled},
		{ID: 4, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(64, 64)},
	})
	require.NoError(t, err)
	require.Equal(t, 4, n)

	// One completion at a time: Poll never returns more than it has room for.
	var got []nic.WC
	one := make([]nic.WC, 1)
	for len(got) < 4 {
		k, err := b.RCQ.Poll(one)
		require.NoError(t, err)
		require.LessOrEqual(t, k, 1)
		got = append(got, one[:k]...)
		if k == 0 {
			got = append(got, Wait(t, b.RCQ, 1)...)
		}
	}
	for i, wc := range got {
		assert.Equal(t, nic.StatusSuccess, wc.Status, "%+v", wc)
		assert.EqualValues(t, 100+i, wc.ID, "receives are consumed in posting order")
		assert.Equal(t, b.QP.Num(), wc.QPN)
	}
	assert.Equal(t, nic.OpRecv, got[0].Opcode)
	assert.EqualValues(t, 8, got[0].ByteLen)
	assert.Equal(t, nic.OpRecvImm, got[1].Opcode)
	assert.EqualValues(t, 77, got[1].Imm)
	assert.Equal(t, nic.OpRecv, got[2].Opcode)
	assert.Zero(t, got[2].ByteLen, "an empty message")
	assert.EqualValues(t, 64, got[3].ByteLen)

	sent := Wait(t, a.SCQ, 4)
	for i, wc := range sent {
		assert.Equal(t, nic.StatusSuccess, wc.Status, "%+v", wc)
		assert.EqualValues(t, i+1, wc.ID, "sends complete in posting order")
		assert.Equal(t, a.QP.Num(), wc.QPN)
	}
	bm, am := b.MR.Bytes(), a.MR.Bytes()
	assert.Equal(t, am[0:8], bm[0:8], "send")
	assert.Equal(t, am[8:24], bm[1024:1040], "write with immediate")
	assert.Equal(t, am[64:128], bm[128:192], "send")
	assert.Equal(t, make([]byte, 64), bm[64:128], "the write with immediate consumed a receive but wrote only its own target")
}

// contractSignalling: only signalled requests complete; the others are done when a later
// signalled one of the same queue is.
func contractSignalling(t *testing.T, pair Pair) {
	a, b := pair(t, PairConfig{Access: AllAccess})
	rb := b.MR.Remote()
	wrs := make([]nic.SendWR, 10)
	for i := range wrs {
		a.MR.Bytes()[i] = byte(0xa0 + i)
		wrs[i] = nic.SendWR{ID: uint64(i), Op: nic.OpRDMAWrite, Local: a.sge(i, 1), RemoteAddr: rb.Addr + uint64(i), RKey: rb.RKey}
		if i%5 == 4 {
			wrs[i].Flags = nic.FlagSignaled
		}
	}
	_, err := a.QP.PostSend(wrs)
	require.NoError(t, err)
	wcs := Wait(t, a.SCQ, 2)
	assert.EqualValues(t, 4, wcs[0].ID)
	assert.EqualValues(t, 9, wcs[1].ID)
	assert.Equal(t, a.MR.Bytes()[:10], b.MR.Bytes()[:10], "every write landed, signalled or not")
	_, err = a.QP.PostSend([]nic.SendWR{{ID: 10, Op: nic.OpNop, Flags: nic.FlagSignaled}})
	require.NoError(t, err)
	assert.EqualValues(t, 10, Wait(t, a.SCQ, 1)[0].ID, "no completion for the unsignalled writes came in between")
}

// contractPostErrors: what cannot be posted is an error at post time, wrapping the sentinel.
func contractPostErrors(t *testing.T, caps nic.Caps, pair Pair) {
	a, b := pair(t, PairConfig{Access: AllAccess})
	n, err := a.QP.PostSend([]nic.SendWR{{ID: 1, Op: nic.OpSend, Flags: nic.FlagInline | nic.FlagSignaled, Local: nic.SGE{Addr: a.MR.Addr(), Len: uint32(caps.MaxInline + 1)}}})
	assert.Zero(t, n)
	assert.ErrorIs(t, err, nic.ErrInlineTooLarge)
	if !caps.CrossChannel {
		_, err = a.QP.PostSend([]nic.SendWR{{Op: nic.OpCQEWait, WaitCQ: a.SCQ.Num(), Count: 1}})
		assert.ErrorIs(t, err, nic.ErrNoCrossChannel)
		_, err = a.PD.CreateQP(nic.QPConfig{SendCQ: a.SCQ, RecvCQ: a.RCQ, SendDepth: 4, RecvDepth: 4, ManagedSend: true})
		assert.ErrorIs(t, err, nic.ErrNoCrossChannel)
	}
	_, err = a.PD.CreateQP(nic.QPConfig{SendCQ: b.SCQ, RecvCQ: b.RCQ, SendDepth: 4, RecvDepth: 4})
	assert.ErrorIs(t, err, nic.ErrWrongContext, "a QP with another context's CQs")

	qp, err := a.PD.CreateQP(nic.QPConfig{SendCQ: a.SCQ, RecvCQ: a.RCQ, SendDepth: 4, RecvDepth: 4})
	require.NoError(t, err)
	_, err = qp.PostSend([]nic.SendWR{{Op: nic.OpNop}})
	assert.ErrorIs(t, err, nic.ErrNotConnected)
	require.NoError(t, qp.Close())
	_, err = qp.PostSend([]nic.SendWR{{Op: nic.OpNop}})
	assert.ErrorIs(t, err, nic.ErrClosed)

	// A request that posts fine but fails when it runs is a completion, not a post error.
	rb := b.MR.Remote()
	_, err = a.QP.PostSend([]nic.SendWR{{ID: 2, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: rb.Addr, RKey: rb.RKey + 1}})
	require.NoError(t, err)
	assert.Equal(t, nic.StatusRemoteAccessError, Wait(t, a.SCQ, 1)[0].Status, "a wrong rkey")
}

// contractRecvQueueFull: a batch longer than the receive queue posts a prefix at least as long as
// the depth asked for, says how long, and stops with ErrQueueFull.
func contractRecvQueueFull(t *testing.T, pair Pair) {
	const depth = 8
	_, b := pair(t, PairConfig{Access: AllAccess, Depth: depth})
	wrs := make([]nic.RecvWR, 512)
	for i := range wrs {
		wrs[i] = nic.RecvWR{ID: uint64(i)}
	}
	n, err := b.QP.PostRecv(wrs)
	assert.ErrorIs(t, err, nic.ErrQueueFull)
	assert.GreaterOrEqual(t, n, depth)
	assert.Less(t, n, len(wrs))
}

// contractFlush: after a request fails, the QP is in the error state: the requests queued behind
// it, and those posted later, complete with StatusFlushError, in order, each with its id and
// opcode.
func contractFlush(t *testing.T, pair Pair) {
	a, b := pair(t, PairConfig{Access: nic.AccessLocalWrite | nic.AccessRemoteRead})
	rb := b.MR.Remote()
	_, err := a.QP.PostSend([]nic.SendWR{
		{ID: 1, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: rb.Addr, RKey: rb.RKey},
		{ID: 2, Op: nic.OpRDMARead, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: rb.Addr, RKey: rb.RKey},
		{ID: 3, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: rb.Addr + 8, RKey: rb.RKey},
	})
	require.NoError(t, err)
	wcs := Wait(t, a.SCQ, 3)
	assert.Equal(t, nic.StatusRemoteAccessError, wcs[0].Status, "a write without remote_write")
	for i, wc := range wcs {
		assert.EqualValues(t, i+1, wc.ID)
		if i > 0 {
			assert.Equal(t, nic.StatusFlushError, wc.Status, "%+v", wc)
		}
	}
	assert.Equal(t, nic.OpRDMAWrite, wcs[0].Opcode)
	assert.Equal(t, nic.OpRDMARead, wcs[1].Opcode)
	assert.Equal(t, nic.OpRDMAWrite, wcs[2].Opcode)

	_, err = a.QP.PostSend([]nic.SendWR{{ID: 4, Op: nic.OpRDMARead, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: rb.Addr, RKey: rb.RKey}})
	require.NoError(t, err, "a QP in the error state takes requests, to flush them")
	wc := Wait(t, a.SCQ, 1)[0]
	assert.EqualValues(t, 4, wc.ID)
	assert.Equal(t, nic.StatusFlushError, wc.Status)
}
