package softnic

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

// TestFaults checks that every access is checked, that the failed request completes with the
// right status and explanation, that the QP (and for responder-side faults, the peer) moves to the
// error state, and that the rest of the queues flush.
func TestFaults(t *testing.T) {
	tests := []struct {
		name       string
		access     nic.Access // of both buffers
		wr         func(a, b *end) nic.SendWR
		recv       *nic.RecvWR // posted at b first, if not nil
		status     nic.Status
		why        string // substring of the fault's explanation
		peerBroken bool
		recvStatus nic.Status // of b's receive, when recv != nil
	}{
		{
			name: "write without remote_write", access: nic.AccessLocalWrite | nic.AccessRemoteRead,
			wr: func(a, b *end) nic.SendWR {
				addr, key := b.remote(0)
				return nic.SendWR{ID: 1, Op: nic.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key}
			},
			status: nic.StatusRemoteAccessError, why: "without remote_write access", peerBroken: true,
		},
		{
			name: "read without remote_read", access: nic.AccessLocalWrite | nic.AccessRemoteWrite,
			wr: func(a, b *end) nic.SendWR {
				addr, key := b.remote(0)
				return nic.SendWR{ID: 1, Op: nic.OpRDMARead, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key}
			},
			status: nic.StatusRemoteAccessError, why: "without remote_read access", peerBroken: true,
		},
		{
			name: "atomic without remote_atomic", access: nic.AccessLocalWrite | nic.AccessRemoteWrite,
			wr: func(a, b *end) nic.SendWR {
				addr, key := b.remote(0)
				return nic.SendWR{ID: 1, Op: nic.OpAtomicFAdd, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key, CompareAdd: 1}
			},
			status: nic.StatusRemoteAccessError, why: "without remote_atomic access", peerBroken: true,
		},
		{
			name: "write past the end of the remote region", access: allAccess,
			wr: func(a, b *end) nic.SendWR {
				addr, key := b.remote(4090)
				return nic.SendWR{ID: 1, Op: nic.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key}
			},
			status: nic.StatusRemoteAccessError, why: "outside the memory region", peerBroken: true,
		},
		{
			name: "read before the start of the remote region", access: allAccess,
			wr: func(a, b *end) nic.SendWR {
				addr, key := b.remote(0)
				return nic.SendWR{ID: 1, Op: nic.OpRDMARead, Local: a.sge(0, 8), RemoteAddr: addr - 8, RKey: key}
			},
			status: nic.StatusRemoteAccessError, why: "outside the memory region", peerBroken: true,
		},
		{
			name: "bad rkey", access: allAccess,
			wr: func(a, b *end) nic.SendWR {
				addr, key := b.remote(0)
				return nic.SendWR{ID: 1, Op: nic.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key + 0x100}
			},
			status: nic.StatusRemoteAccessError, why: "no memory region has this rkey", peerBroken: true,
		},
		{
			name: "lkey used as rkey", access: allAccess,
			wr: func(a, b *end) nic.SendWR {
				addr, _ := b.remote(0)
				return nic.SendWR{ID: 1, Op: nic.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: addr, RKey: b.mr.LKey()}
			},
			status: nic.StatusRemoteAccessError, why: "not a valid rkey", peerBroken: true,
		},
		{
			name: "misaligned atomic", access: allAccess,
			wr: func(a, b *end) nic.SendWR {
				addr, key := b.remote(4)
				return nic.SendWR{ID: 1, Op: nic.OpAtomicCAS, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key}
			},
			status: nic.StatusRemoteInvalidRequest, why: "8-byte aligned", peerBroken: true,
		},
		{
			name: "bad lkey", access: allAccess,
			wr: func(a, b *end) nic.SendWR {
				addr, key := b.remote(0)
				s := a.sge(0, 8)
				s.LKey ^= 0x300
				return nic.SendWR{ID: 1, Op: nic.OpRDMAWrite, Local: s, RemoteAddr: addr, RKey: key}
			},
			status: nic.StatusLocalProtectionError, why: "local buffer",
		},
		{
			name: "read into a region without local_write", access: nic.AccessRemoteRead,
			wr: func(a, b *end) nic.SendWR {
				addr, key := b.remote(0)
				return nic.SendWR{ID: 1, Op: nic.OpRDMARead, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key}
			},
			status: nic.StatusLocalProtectionError, why: "without local_write access",
		},
		{
			name: "message longer than the receive", access: allAccess,
			recv: &nic.RecvWR{ID: 50},
			wr: func(a, b *end) nic.SendWR {
				return nic.SendWR{ID: 1, Op: nic.OpSend, Local: a.sge(0, 8)}
			},
			status: nic.StatusRemoteInvalidRequest, why: "longer than the receive buffer", peerBroken: true,
			recvStatus: nic.StatusLocalLengthError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sn := New(Options{Trace: true})
			a, b := pair(t, sn, tt.access, nic.QPConfig{})
			if tt.recv != nil {
				postRecv(t, b, *tt.recv)
			}
			postRecv(t, b, nic.RecvWR{ID: 60}) // flushed when the peer breaks
			postRecv(t, a, nic.RecvWR{ID: 70}) // always flushed
			postSend(t, a, tt.wr(a, b), nic.SendWR{ID: 2, Op: nic.OpNop, Flags: nic.FlagSignaled})
			got := drain(t, a.scq, 2)
			require.Len(t, got, 2)
			assert.Equal(t, tt.status, got[0].Status, "failed request")
			assert.EqualValues(t, 1, got[0].ID)
			assert.Equal(t, nic.StatusFlushError, got[1].Status, "the request behind it")
			arecv := drain(t, a.rcq, 1)
			require.Len(t, arecv, 1)
			assert.Equal(t, nic.StatusFlushError, arecv[0].Status)

			why, ok := sn.Explain(0, a.qp.Num(), 1)
			require.True(t, ok)
			assert.Contains(t, why, tt.why)
			assert.Contains(t, sn.Faults()[0].String(), "rank 0")

			brecv := drain(t, b.rcq, 2)
			if tt.recv != nil {
				require.NotEmpty(t, brecv)
				assert.Equal(t, tt.recvStatus, brecv[0].Status)
				brecv = brecv[1:]
			}
			if tt.peerBroken {
				require.Len(t, brecv, 1)
				assert.Equal(t, nic.StatusFlushError, brecv[0].Status)
			} else {
				assert.Empty(t, brecv)
			}
			// Posting to a broken QP is allowed and flushes at once, as on hardware.
			postSend(t, a, nic.SendWR{ID: 3, Op: nic.OpNop})
			again := drain(t, a.scq, 1)
			require.Len(t, again, 1)
			assert.Equal(t, nic.StatusFlushError, again[0].Status)
			for _, e := range sn.Trace() {
				if e.Rank == 0 || tt.peerBroken {
					assert.NotZero(t, e.End, "every request of a broken QP completed: %v", e)
				}
			}
		})
	}
}

// TestReceiverNotReady checks a send whose receive is never posted: retried forever by default,
// which shows as a stall naming the send, or failed after a bounded number of retries.
func TestReceiverNotReady(t *testing.T) {
	t.Run("forever", func(t *testing.T) {
		sn := New(Options{})
		a, b := pair(t, sn, allAccess, nic.QPConfig{})
		postSend(t, a, nic.SendWR{ID: 9, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 4)})
		for i := 0; i < 5; i++ {
			assert.Empty(t, drain(t, a.scq, 1))
		}
		assert.Zero(t, sn.Progress())
		assert.GreaterOrEqual(t, sn.NICStats().RNRRetries, uint64(5))
		st := sn.Stalls()
		require.Len(t, st, 1)
		assert.Equal(t, nic.StallNoRecv, st[0].Reason)
		assert.EqualValues(t, 9, st[0].ID)
		assert.Equal(t, b.qp.Info(), st[0].Peer)
		assert.Contains(t, st[0].String(), "no matching receive posted at rank 1")

		// A late receive unblocks it.
		postRecv(t, b, nic.RecvWR{ID: 1, Local: b.sge(0, 4)})
		got := drain(t, a.scq, 1)
		require.Len(t, got, 1)
		assert.Equal(t, nic.StatusSuccess, got[0].Status)
		assert.Empty(t, sn.Stalls())
	})
	t.Run("bounded", func(t *testing.T) {
		sn := New(Options{})
		a, _ := pair(t, sn, allAccess, nic.QPConfig{RNRRetry: 3})
		postSend(t, a, nic.SendWR{ID: 9, Op: nic.OpRDMAWriteImm, Local: a.sge(0, 4)})
		var got []nic.WC
		for i := 0; i < 10 && len(got) == 0; i++ {
			got = drain(t, a.scq, 1)
		}
		require.Len(t, got, 1)
		assert.Equal(t, nic.StatusRNRRetryExceeded, got[0].Status)
		assert.EqualValues(t, 4, sn.NICStats().RNRRetries)
		assert.Empty(t, sn.Stalls())
	})
}

// TestPostErrors checks requests rejected at post time: errors, never panics, and the count of
// requests posted before the bad one.
func TestPostErrors(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		cfg  nic.QPConfig
		wrs  func(a *end) []nic.SendWR
		n    int
		err  error
		msg  string
	}{
		{
			name: "queue full of unsignalled requests", cfg: nic.QPConfig{SendDepth: 2},
			wrs: func(a *end) []nic.SendWR {
				return []nic.SendWR{{Op: nic.OpNop}, {Op: nic.OpNop}, {Op: nic.OpNop}}
			},
			n: 2, err: nic.ErrQueueFull, msg: "signal one request",
		},
		{
			name: "WAIT without cross-channel", opts: Options{NoCrossChannel: true},
			wrs: func(a *end) []nic.SendWR {
				return []nic.SendWR{{Op: nic.OpNop}, {Op: nic.OpCQEWait, WaitCQ: a.scq.Num(), Count: 1}}
			},
			n: 1, err: nic.ErrNoCrossChannel, msg: "polling engine",
		},
		{
			name: "SEND_EN without cross-channel", opts: Options{NoCrossChannel: true},
			wrs: func(a *end) []nic.SendWR { return []nic.SendWR{{Op: nic.OpSendEnable, TargetQP: 1}} },
			err: nic.ErrNoCrossChannel,
		},
		{
			name: "RECV_EN without cross-channel", opts: Options{NoCrossChannel: true},
			wrs: func(a *end) []nic.SendWR { return []nic.SendWR{{Op: nic.OpRecvEnable, TargetQP: 1}} },
			err: nic.ErrNoCrossChannel,
		},
		{
			name: "WAIT on a QP created without CrossChannel",
			wrs:  func(a *end) []nic.SendWR { return []nic.SendWR{{Op: nic.OpCQEWait, WaitCQ: a.scq.Num()}} },
			err:  nic.ErrBadRequest, msg: "QPConfig.CrossChannel",
		},
		{
			name: "WAIT on an unknown CQ", cfg: nic.QPConfig{CrossChannel: true},
			wrs: func(a *end) []nic.SendWR { return []nic.SendWR{{Op: nic.OpCQEWait, WaitCQ: 99}} },
			err: nic.ErrBadRequest, msg: "no CQ 99",
		},
		{
			name: "SEND_EN of an unmanaged QP", cfg: nic.QPConfig{CrossChannel: true},
			wrs: func(a *end) []nic.SendWR { return []nic.SendWR{{Op: nic.OpSendEnable, TargetQP: a.qp.Num()}} },
			err: nic.ErrBadRequest, msg: "without ManagedSend",
		},
		{
			name: "inline too large", cfg: nic.QPConfig{MaxInline: 8},
			wrs: func(a *end) []nic.SendWR {
				return []nic.SendWR{{Op: nic.OpSend, Flags: nic.FlagInline, Local: a.sge(0, 9)}}
			},
			err: nic.ErrInlineTooLarge,
		},
		{
			name: "inline read", cfg: nic.QPConfig{MaxInline: 8},
			wrs: func(a *end) []nic.SendWR {
				return []nic.SendWR{{Op: nic.OpRDMARead, Flags: nic.FlagInline, Local: a.sge(0, 8)}}
			},
			err: nic.ErrBadRequest,
		},
		{
			name: "receive opcode on the send queue",
			wrs:  func(a *end) []nic.SendWR { return []nic.SendWR{{Op: nic.OpRecv}} },
			err:  nic.ErrBadRequest,
		},
		{
			name: "atomic with a short result buffer",
			wrs: func(a *end) []nic.SendWR {
				return []nic.SendWR{{Op: nic.OpAtomicFAdd, Local: a.sge(0, 4)}}
			},
			err: nic.ErrBadRequest, msg: "fetch 8",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sn := New(tt.opts)
			a, _ := pair(t, sn, allAccess, tt.cfg)
			n, err := a.qp.PostSend(tt.wrs(a))
			assert.Equal(t, tt.n, n)
			require.Error(t, err)
			assert.True(t, errors.Is(err, tt.err), "%v is not %v", err, tt.err)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}

	t.Run("send before connect", func(t *testing.T) {
		a := newEnd(t, New(Options{}), 0, allAccess, nic.QPConfig{})
		_, err := a.qp.PostSend([]nic.SendWR{{Op: nic.OpNop}})
		assert.ErrorIs(t, err, nic.ErrNotConnected)
	})
	t.Run("receive queue full", func(t *testing.T) {
		a := newEnd(t, New(Options{}), 0, allAccess, nic.QPConfig{RecvDepth: 1})
		n, err := a.qp.PostRecv([]nic.RecvWR{{ID: 1}, {ID: 2}})
		assert.Equal(t, 1, n)
		assert.ErrorIs(t, err, nic.ErrQueueFull)
	})
	t.Run("managed QP without cross-channel", func(t *testing.T) {
		sn := New(Options{NoCrossChannel: true})
		c, _ := sn.Open(0)
		pd, _ := c.AllocPD()
		cq, _ := c.CreateCQ(4)
		_, err := pd.CreateQP(nic.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4, RecvDepth: 4, ManagedSend: true})
		assert.ErrorIs(t, err, nic.ErrNoCrossChannel)
		assert.False(t, sn.Caps().CrossChannel)
	})
	t.Run("rank opened twice", func(t *testing.T) {
		sn := New(Options{})
		_, err := sn.Open(0)
		require.NoError(t, err)
		_, err = sn.Open(0)
		assert.ErrorContains(t, err, "already open")
	})
	t.Run("remote write without local write", func(t *testing.T) {
		c, _ := New(Options{}).Open(0)
		pd, _ := c.AllocPD()
		_, err := pd.AllocMR(64, nic.AccessRemoteWrite)
		assert.ErrorContains(t, err, "needs local_write")
	})
}

// TestSelectiveSignalling checks that send slots come back only with a signalled completion.
func TestSelectiveSignalling(t *testing.T) {
	sn := New(Options{})
	a, _ := pair(t, sn, allAccess, nic.QPConfig{SendDepth: 4})
	postSend(t, a, nic.SendWR{ID: 1, Op: nic.OpNop}, nic.SendWR{ID: 2, Op: nic.OpNop}, nic.SendWR{ID: 3, Op: nic.OpNop})
	assert.Empty(t, drain(t, a.scq, 1), "unsignalled requests make no completions")
	postSend(t, a, nic.SendWR{ID: 4, Op: nic.OpNop, Flags: nic.FlagSignaled})
	_, err := a.qp.PostSend([]nic.SendWR{{ID: 5, Op: nic.OpNop}})
	assert.ErrorIs(t, err, nic.ErrQueueFull, "the signalled completion is not produced before progress")
	got := drain(t, a.scq, 1)
	require.Len(t, got, 1)
	assert.EqualValues(t, 4, got[0].ID)
	postSend(t, a, nic.SendWR{ID: 5, Op: nic.OpNop}, nic.SendWR{ID: 6, Op: nic.OpNop},
		nic.SendWR{ID: 7, Op: nic.OpNop}, nic.SendWR{ID: 8, Op: nic.OpNop})
}

// TestCQOverflow checks that an overflowing CQ is reported, not silently wrapped.
func TestCQOverflow(t *testing.T) {
	sn := New(Options{})
	c, _ := sn.Open(0)
	pd, _ := c.AllocPD()
	cq, err := c.CreateCQ(2)
	require.NoError(t, err)
	qp, err := pd.CreateQP(nic.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 8, RecvDepth: 8})
	require.NoError(t, err)
	require.NoError(t, qp.Connect(qp.Info()))
	_, err = qp.PostSend([]nic.SendWR{{Op: nic.OpNop, Flags: nic.FlagSignaled}, {Op: nic.OpNop, Flags: nic.FlagSignaled}, {Op: nic.OpNop, Flags: nic.FlagSignaled}})
	require.NoError(t, err)
	sn.Progress()
	_, err = cq.Poll(make([]nic.WC, 4))
	assert.ErrorContains(t, err, "overflowed")
}
