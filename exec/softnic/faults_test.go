package softnic

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
)

// TestFaults checks that every access is checked, that the failed request completes with the
// right status and explanation, that the QP (and for responder-side faults, the peer) moves to the
// error state, and that the rest of the queues flush.
func TestFaults(t *testing.T) {
	tests := []struct {
		name       string
		access     exec.Access // of both buffers
		wr         func(a, b *end) exec.SendWR
		recv       *exec.RecvWR // posted at b first, if not nil
		status     exec.Status
		why        string // substring of the fault's explanation
		peerBroken bool
		recvStatus exec.Status // of b's receive, when recv != nil
	}{
		{
			name: "write without remote_write", access: exec.AccessLocalWrite | exec.AccessRemoteRead,
			wr: func(a, b *end) exec.SendWR {
				addr, key := b.remote(0)
				return exec.SendWR{ID: 1, Op: exec.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key}
			},
			status: exec.StatusRemoteAccessError, why: "without remote_write access", peerBroken: true,
		},
		{
			name: "read without remote_read", access: exec.AccessLocalWrite | exec.AccessRemoteWrite,
			wr: func(a, b *end) exec.SendWR {
				addr, key := b.remote(0)
				return exec.SendWR{ID: 1, Op: exec.OpRDMARead, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key}
			},
			status: exec.StatusRemoteAccessError, why: "without remote_read access", peerBroken: true,
		},
		{
			name: "atomic without remote_atomic", access: exec.AccessLocalWrite | exec.AccessRemoteWrite,
			wr: func(a, b *end) exec.SendWR {
				addr, key := b.remote(0)
				return exec.SendWR{ID: 1, Op: exec.OpAtomicFAdd, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key, CompareAdd: 1}
			},
			status: exec.StatusRemoteAccessError, why: "without remote_atomic access", peerBroken: true,
		},
		{
			name: "write past the end of the remote region", access: allAccess,
			wr: func(a, b *end) exec.SendWR {
				addr, key := b.remote(4090)
				return exec.SendWR{ID: 1, Op: exec.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key}
			},
			status: exec.StatusRemoteAccessError, why: "outside the memory region", peerBroken: true,
		},
		{
			name: "read before the start of the remote region", access: allAccess,
			wr: func(a, b *end) exec.SendWR {
				addr, key := b.remote(0)
				return exec.SendWR{ID: 1, Op: exec.OpRDMARead, Local: a.sge(0, 8), RemoteAddr: addr - 8, RKey: key}
			},
			status: exec.StatusRemoteAccessError, why: "outside the memory region", peerBroken: true,
		},
		{
			name: "bad rkey", access: allAccess,
			wr: func(a, b *end) exec.SendWR {
				addr, key := b.remote(0)
				return exec.SendWR{ID: 1, Op: exec.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key + 0x100}
			},
			status: exec.StatusRemoteAccessError, why: "no memory region has this rkey", peerBroken: true,
		},
		{
			name: "lkey used as rkey", access: allAccess,
			wr: func(a, b *end) exec.SendWR {
				addr, _ := b.remote(0)
				return exec.SendWR{ID: 1, Op: exec.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: addr, RKey: b.mr.LKey()}
			},
			status: exec.StatusRemoteAccessError, why: "not a valid rkey", peerBroken: true,
		},
		{
			name: "misaligned atomic", access: allAccess,
			wr: func(a, b *end) exec.SendWR {
				addr, key := b.remote(4)
				return exec.SendWR{ID: 1, Op: exec.OpAtomicCAS, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key}
			},
			status: exec.StatusRemoteInvalidRequest, why: "8-byte aligned", peerBroken: true,
		},
		{
			name: "bad lkey", access: allAccess,
			wr: func(a, b *end) exec.SendWR {
				addr, key := b.remote(0)
				s := a.sge(0, 8)
				s.LKey ^= 0x300
				return exec.SendWR{ID: 1, Op: exec.OpRDMAWrite, Local: s, RemoteAddr: addr, RKey: key}
			},
			status: exec.StatusLocalProtectionError, why: "local buffer",
		},
		{
			name: "read into a region without local_write", access: exec.AccessRemoteRead,
			wr: func(a, b *end) exec.SendWR {
				addr, key := b.remote(0)
				return exec.SendWR{ID: 1, Op: exec.OpRDMARead, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key}
			},
			status: exec.StatusLocalProtectionError, why: "without local_write access",
		},
		{
			name: "message longer than the receive", access: allAccess,
			recv: &exec.RecvWR{ID: 50},
			wr: func(a, b *end) exec.SendWR {
				return exec.SendWR{ID: 1, Op: exec.OpSend, Local: a.sge(0, 8)}
			},
			status: exec.StatusRemoteInvalidRequest, why: "longer than the receive buffer", peerBroken: true,
			recvStatus: exec.StatusLocalLengthError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nic := New(Options{Trace: true})
			a, b := pair(t, nic, tt.access, exec.QPConfig{})
			if tt.recv != nil {
				postRecv(t, b, *tt.recv)
			}
			postRecv(t, b, exec.RecvWR{ID: 60}) // flushed when the peer breaks
			postRecv(t, a, exec.RecvWR{ID: 70}) // always flushed
			postSend(t, a, tt.wr(a, b), exec.SendWR{ID: 2, Op: exec.OpNop, Flags: exec.FlagSignaled})
			got := drain(t, a.scq, 2)
			require.Len(t, got, 2)
			assert.Equal(t, tt.status, got[0].Status, "failed request")
			assert.EqualValues(t, 1, got[0].ID)
			assert.Equal(t, exec.StatusFlushError, got[1].Status, "the request behind it")
			arecv := drain(t, a.rcq, 1)
			require.Len(t, arecv, 1)
			assert.Equal(t, exec.StatusFlushError, arecv[0].Status)

			why, ok := nic.Explain(0, a.qp.Num(), 1)
			require.True(t, ok)
			assert.Contains(t, why, tt.why)
			assert.Contains(t, nic.Faults()[0].String(), "rank 0")

			brecv := drain(t, b.rcq, 2)
			if tt.recv != nil {
				require.NotEmpty(t, brecv)
				assert.Equal(t, tt.recvStatus, brecv[0].Status)
				brecv = brecv[1:]
			}
			if tt.peerBroken {
				require.Len(t, brecv, 1)
				assert.Equal(t, exec.StatusFlushError, brecv[0].Status)
			} else {
				assert.Empty(t, brecv)
			}
			// Posting to a broken QP is allowed and flushes at once, as on hardware.
			postSend(t, a, exec.SendWR{ID: 3, Op: exec.OpNop})
			again := drain(t, a.scq, 1)
			require.Len(t, again, 1)
			assert.Equal(t, exec.StatusFlushError, again[0].Status)
			for _, e := range nic.Trace() {
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
		nic := New(Options{})
		a, b := pair(t, nic, allAccess, exec.QPConfig{})
		postSend(t, a, exec.SendWR{ID: 9, Op: exec.OpSend, Flags: exec.FlagSignaled, Local: a.sge(0, 4)})
		for i := 0; i < 5; i++ {
			assert.Empty(t, drain(t, a.scq, 1))
		}
		assert.Zero(t, nic.Progress())
		assert.GreaterOrEqual(t, nic.NICStats().RNRRetries, uint64(5))
		st := nic.Stalls()
		require.Len(t, st, 1)
		assert.Equal(t, exec.StallNoRecv, st[0].Reason)
		assert.EqualValues(t, 9, st[0].ID)
		assert.Equal(t, b.qp.Info(), st[0].Peer)
		assert.Contains(t, st[0].String(), "no matching receive posted at rank 1")

		// A late receive unblocks it.
		postRecv(t, b, exec.RecvWR{ID: 1, Local: b.sge(0, 4)})
		got := drain(t, a.scq, 1)
		require.Len(t, got, 1)
		assert.Equal(t, exec.StatusSuccess, got[0].Status)
		assert.Empty(t, nic.Stalls())
	})
	t.Run("bounded", func(t *testing.T) {
		nic := New(Options{})
		a, _ := pair(t, nic, allAccess, exec.QPConfig{RNRRetry: 3})
		postSend(t, a, exec.SendWR{ID: 9, Op: exec.OpRDMAWriteImm, Local: a.sge(0, 4)})
		var got []exec.WC
		for i := 0; i < 10 && len(got) == 0; i++ {
			got = drain(t, a.scq, 1)
		}
		require.Len(t, got, 1)
		assert.Equal(t, exec.StatusRNRRetryExceeded, got[0].Status)
		assert.EqualValues(t, 4, nic.NICStats().RNRRetries)
		assert.Empty(t, nic.Stalls())
	})
}

// TestPostErrors checks requests rejected at post time: errors, never panics, and the count of
// requests posted before the bad one.
func TestPostErrors(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		cfg  exec.QPConfig
		wrs  func(a *end) []exec.SendWR
		n    int
		err  error
		msg  string
	}{
		{
			name: "queue full of unsignalled requests", cfg: exec.QPConfig{SendDepth: 2},
			wrs: func(a *end) []exec.SendWR {
				return []exec.SendWR{{Op: exec.OpNop}, {Op: exec.OpNop}, {Op: exec.OpNop}}
			},
			n: 2, err: exec.ErrQueueFull, msg: "signal one request",
		},
		{
			name: "WAIT without cross-channel", opts: Options{NoCrossChannel: true},
			wrs: func(a *end) []exec.SendWR {
				return []exec.SendWR{{Op: exec.OpNop}, {Op: exec.OpCQEWait, WaitCQ: a.scq.Num(), Count: 1}}
			},
			n: 1, err: exec.ErrNoCrossChannel, msg: "polling engine",
		},
		{
			name: "SEND_EN without cross-channel", opts: Options{NoCrossChannel: true},
			wrs: func(a *end) []exec.SendWR { return []exec.SendWR{{Op: exec.OpSendEnable, TargetQP: 1}} },
			err: exec.ErrNoCrossChannel,
		},
		{
			name: "RECV_EN without cross-channel", opts: Options{NoCrossChannel: true},
			wrs: func(a *end) []exec.SendWR { return []exec.SendWR{{Op: exec.OpRecvEnable, TargetQP: 1}} },
			err: exec.ErrNoCrossChannel,
		},
		{
			name: "WAIT on a QP created without CrossChannel",
			wrs:  func(a *end) []exec.SendWR { return []exec.SendWR{{Op: exec.OpCQEWait, WaitCQ: a.scq.Num()}} },
			err:  exec.ErrBadRequest, msg: "QPConfig.CrossChannel",
		},
		{
			name: "WAIT on an unknown CQ", cfg: exec.QPConfig{CrossChannel: true},
			wrs: func(a *end) []exec.SendWR { return []exec.SendWR{{Op: exec.OpCQEWait, WaitCQ: 99}} },
			err: exec.ErrBadRequest, msg: "no CQ 99",
		},
		{
			name: "SEND_EN of an unmanaged QP", cfg: exec.QPConfig{CrossChannel: true},
			wrs: func(a *end) []exec.SendWR { return []exec.SendWR{{Op: exec.OpSendEnable, TargetQP: a.qp.Num()}} },
			err: exec.ErrBadRequest, msg: "without ManagedSend",
		},
		{
			name: "inline too large", cfg: exec.QPConfig{MaxInline: 8},
			wrs: func(a *end) []exec.SendWR {
				return []exec.SendWR{{Op: exec.OpSend, Flags: exec.FlagInline, Local: a.sge(0, 9)}}
			},
			err: exec.ErrInlineTooLarge,
		},
		{
			name: "inline read", cfg: exec.QPConfig{MaxInline: 8},
			wrs: func(a *end) []exec.SendWR {
				return []exec.SendWR{{Op: exec.OpRDMARead, Flags: exec.FlagInline, Local: a.sge(0, 8)}}
			},
			err: exec.ErrBadRequest,
		},
		{
			name: "receive opcode on the send queue",
			wrs:  func(a *end) []exec.SendWR { return []exec.SendWR{{Op: exec.OpRecv}} },
			err:  exec.ErrBadRequest,
		},
		{
			name: "atomic with a short result buffer",
			wrs: func(a *end) []exec.SendWR {
				return []exec.SendWR{{Op: exec.OpAtomicFAdd, Local: a.sge(0, 4)}}
			},
			err: exec.ErrBadRequest, msg: "fetch 8",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nic := New(tt.opts)
			a, _ := pair(t, nic, allAccess, tt.cfg)
			n, err := a.qp.PostSend(tt.wrs(a))
			assert.Equal(t, tt.n, n)
			require.Error(t, err)
			assert.True(t, errors.Is(err, tt.err), "%v is not %v", err, tt.err)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}

	t.Run("send before connect", func(t *testing.T) {
		a := newEnd(t, New(Options{}), 0, allAccess, exec.QPConfig{})
		_, err := a.qp.PostSend([]exec.SendWR{{Op: exec.OpNop}})
		assert.ErrorIs(t, err, exec.ErrNotConnected)
	})
	t.Run("receive queue full", func(t *testing.T) {
		a := newEnd(t, New(Options{}), 0, allAccess, exec.QPConfig{RecvDepth: 1})
		n, err := a.qp.PostRecv([]exec.RecvWR{{ID: 1}, {ID: 2}})
		assert.Equal(t, 1, n)
		assert.ErrorIs(t, err, exec.ErrQueueFull)
	})
	t.Run("managed QP without cross-channel", func(t *testing.T) {
		nic := New(Options{NoCrossChannel: true})
		c, _ := nic.Open(0)
		pd, _ := c.AllocPD()
		cq, _ := c.CreateCQ(4)
		_, err := pd.CreateQP(exec.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 4, RecvDepth: 4, ManagedSend: true})
		assert.ErrorIs(t, err, exec.ErrNoCrossChannel)
		assert.False(t, nic.Caps().CrossChannel)
	})
	t.Run("rank opened twice", func(t *testing.T) {
		nic := New(Options{})
		_, err := nic.Open(0)
		require.NoError(t, err)
		_, err = nic.Open(0)
		assert.ErrorContains(t, err, "already open")
	})
	t.Run("remote write without local write", func(t *testing.T) {
		c, _ := New(Options{}).Open(0)
		pd, _ := c.AllocPD()
		_, err := pd.AllocMR(64, exec.AccessRemoteWrite)
		assert.ErrorContains(t, err, "needs local_write")
	})
}

// TestSelectiveSignalling checks that send slots come back only with a signalled completion.
func TestSelectiveSignalling(t *testing.T) {
	nic := New(Options{})
	a, _ := pair(t, nic, allAccess, exec.QPConfig{SendDepth: 4})
	postSend(t, a, exec.SendWR{ID: 1, Op: exec.OpNop}, exec.SendWR{ID: 2, Op: exec.OpNop}, exec.SendWR{ID: 3, Op: exec.OpNop})
	assert.Empty(t, drain(t, a.scq, 1), "unsignalled requests make no completions")
	postSend(t, a, exec.SendWR{ID: 4, Op: exec.OpNop, Flags: exec.FlagSignaled})
	_, err := a.qp.PostSend([]exec.SendWR{{ID: 5, Op: exec.OpNop}})
	assert.ErrorIs(t, err, exec.ErrQueueFull, "the signalled completion is not produced before progress")
	got := drain(t, a.scq, 1)
	require.Len(t, got, 1)
	assert.EqualValues(t, 4, got[0].ID)
	postSend(t, a, exec.SendWR{ID: 5, Op: exec.OpNop}, exec.SendWR{ID: 6, Op: exec.OpNop},
		exec.SendWR{ID: 7, Op: exec.OpNop}, exec.SendWR{ID: 8, Op: exec.OpNop})
}

// TestCQOverflow checks that an overflowing CQ is reported, not silently wrapped.
func TestCQOverflow(t *testing.T) {
	nic := New(Options{})
	c, _ := nic.Open(0)
	pd, _ := c.AllocPD()
	cq, err := c.CreateCQ(2)
	require.NoError(t, err)
	qp, err := pd.CreateQP(exec.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 8, RecvDepth: 8})
	require.NoError(t, err)
	require.NoError(t, qp.Connect(qp.Info()))
	_, err = qp.PostSend([]exec.SendWR{{Op: exec.OpNop, Flags: exec.FlagSignaled}, {Op: exec.OpNop, Flags: exec.FlagSignaled}, {Op: exec.OpNop, Flags: exec.FlagSignaled}})
	require.NoError(t, err)
	nic.Progress()
	_, err = cq.Poll(make([]exec.WC, 4))
	assert.ErrorContains(t, err, "overflowed")
}
