//go:build verbs && linux

package verbs

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/nictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests need an RDMA device: they run inside ../shared/tools/rxe-vm.sh (scripts/vm-test.sh
// does it) and skip elsewhere. COREDAG_VERBS_DEVICE picks the device (default: the first one).

func provider(t *testing.T) nic.Provider {
	t.Helper()
	opts := testOptions()
	p, err := New(opts)
	if err != nil {
		t.Skipf("no usable RDMA device: %v", err)
	}
	return p
}

// testOptions reads COREDAG_VERBS_DEVICE and COREDAG_VERBS_IDLE (spin or yield).
func testOptions() Options {
	opts := DefaultOptions()
	opts.Device = os.Getenv("COREDAG_VERBS_DEVICE")
	switch os.Getenv("COREDAG_VERBS_IDLE") {
	case "spin":
		opts.Idle = IdleSpin
	case "yield":
		opts.Idle = IdleYield
	}
	return opts
}

// end is one rank of a connected pair: a PD, a region, a CQ per queue side and one QP.
type end struct {
	ctx      nic.Context
	pd       nic.PD
	mem      nic.MR
	scq, rcq nic.CQ
	qp       nic.QP
}

// pair opens ranks 0 and 1 in this process and connects one QP between them. Rank 1's region has
// access b; rank 0's has full access.
func pair(t *testing.T, p nic.Provider, b nic.Access, rnrRetry int) (*end, *end) {
	return pairDepth(t, p, b, rnrRetry, 64)
}

func pairDepth(t *testing.T, p nic.Provider, b nic.Access, rnrRetry, depth int) (*end, *end) {
	t.Helper()
	mk := func(rank int, acc nic.Access) *end {
		c, err := p.Open(rank)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		e := &end{ctx: c}
		e.pd, err = c.AllocPD()
		require.NoError(t, err)
		e.mem, err = e.pd.AllocMR(4096, acc)
		require.NoError(t, err)
		e.scq, err = c.CreateCQ(depth)
		require.NoError(t, err)
		e.rcq, err = c.CreateCQ(depth)
		require.NoError(t, err)
		e.qp, err = e.pd.CreateQP(nic.QPConfig{SendCQ: e.scq, RecvCQ: e.rcq, SendDepth: depth, RecvDepth: depth,
			MaxInline: p.Caps().MaxInline, MaxSGE: min(p.Caps().MaxSGE, 4), RNRRetry: rnrRetry})
		require.NoError(t, err)
		return e
	}
	all := nic.AccessLocalWrite | nic.AccessRemoteWrite | nic.AccessRemoteRead | nic.AccessRemoteAtomic
	a, bb := mk(0, all), mk(1, b)
	require.NoError(t, a.qp.Connect(bb.qp.Info()))
	require.NoError(t, bb.qp.Connect(a.qp.Info()))
	return a, bb
}

func sge(m nic.MR, off, n int) nic.SGE {
	return nic.SGE{Addr: m.Addr() + uint64(off), Len: uint32(n), LKey: m.LKey()}
}

func TestLayout(t *testing.T) {
	require.True(t, wrLayoutOK, "nic.SendWR/RecvWR/WC differ from the structs in shim.h")
}

func TestCaps(t *testing.T) {
	p := provider(t)
	c := p.Caps()
	t.Logf("%v: %+v", p, c)
	require.False(t, c.CrossChannel)
	require.False(t, c.InProcess)
	require.True(t, c.Atomics)
	require.Greater(t, c.MaxQPDepth, 0)
}

func TestDataPath(t *testing.T) {
	p := provider(t)
	a, b := pair(t, p, nic.AccessLocalWrite|nic.AccessRemoteWrite|nic.AccessRemoteRead|nic.AccessRemoteAtomic, 0)
	am, bm := a.mem.Bytes(), b.mem.Bytes()
	for i := range 256 {
		am[i] = byte(i)
	}
	binary.LittleEndian.PutUint64(bm[1024:], 40)
	binary.LittleEndian.PutUint64(bm[1032:], 7)
	copy(bm[2048:], "remote bytes")
	rb := b.mem.Remote()

	// Receives for a send, an inline send and a write with immediate, posted as one batch.
	n, err := b.qp.PostRecv([]nic.RecvWR{{ID: 100, Local: sge(b.mem, 512, 64)}, {ID: 101, Local: sge(b.mem, 576, 16)}, {ID: 102}})
	require.NoError(t, err)
	require.Equal(t, 3, n)

	wrs := []nic.SendWR{
		{ID: 1, Op: nic.OpRDMAWrite, Local: sge(a.mem, 0, 128), RemoteAddr: rb.Addr, RKey: rb.RKey},
		{ID: 2, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: sge(a.mem, 128, 64)},
		{ID: 3, Op: nic.OpSend, Flags: nic.FlagSignaled | nic.FlagInline, Local: nic.SGE{Addr: a.mem.Addr() + 8, Len: 16}},
		{ID: 4, Op: nic.OpRDMAWriteImm, Flags: nic.FlagSignaled, Local: sge(a.mem, 200, 8), RemoteAddr: rb.Addr + 256, RKey: rb.RKey, Imm: 0xdeadbeef},
		{ID: 5, Op: nic.OpAtomicFAdd, Flags: nic.FlagSignaled, Local: sge(a.mem, 1024, 8), RemoteAddr: rb.Addr + 1024, RKey: rb.RKey, CompareAdd: 2},
		{ID: 6, Op: nic.OpAtomicCAS, Flags: nic.FlagSignaled, Local: sge(a.mem, 1032, 8), RemoteAddr: rb.Addr + 1032, RKey: rb.RKey, CompareAdd: 7, Swap: 99},
		{ID: 7, Op: nic.OpAtomicFAdd, Flags: nic.FlagSignaled, RemoteAddr: rb.Addr + 1024, RKey: rb.RKey, CompareAdd: 1},
		{ID: 8, Op: nic.OpRDMARead, Flags: nic.FlagSignaled, Local: sge(a.mem, 2048, 12), RemoteAddr: rb.Addr + 2048, RKey: rb.RKey},
		{ID: 9, Op: nic.OpNop, Flags: nic.FlagSignaled},
	}
	n, err = a.qp.PostSend(wrs)
	require.NoError(t, err)
	require.Equal(t, len(wrs), n)

	sent := nictest.Wait(t, a.scq, 8)
	for i, wc := range sent {
		require.Equal(t, nic.StatusSuccess, wc.Status, "completion %d: %+v", i, wc)
		require.Equal(t, uint64(i+2), wc.ID, "send completions come in queue order")
		require.Equal(t, a.qp.Num(), wc.QPN)
	}
	require.Equal(t, nic.OpRDMAWrite, sent[7].Opcode, "a NOP is a zero-length RDMA write")
	require.Equal(t, nic.OpAtomicFAdd, sent[3].Opcode)
	require.Equal(t, nic.OpRDMARead, sent[6].Opcode)

	got := nictest.Wait(t, b.rcq, 3)
	require.Equal(t, nic.WC{ID: 100, Status: nic.StatusSuccess, Opcode: nic.OpRecv, QPN: b.qp.Num(), ByteLen: 64}, got[0])
	require.Equal(t, nic.WC{ID: 101, Status: nic.StatusSuccess, Opcode: nic.OpRecv, QPN: b.qp.Num(), ByteLen: 16}, got[1])
	require.Equal(t, nic.OpRecvImm, got[2].Opcode)
	require.Equal(t, uint32(0xdeadbeef), got[2].Imm)

	require.Equal(t, am[:128], bm[:128], "RDMA write")
	require.Equal(t, am[128:192], bm[512:576], "send")
	require.Equal(t, am[8:24], bm[576:592], "inline send")
	require.Equal(t, am[200:208], bm[256:264], "write with immediate")
	require.Equal(t, uint64(40), binary.LittleEndian.Uint64(am[1024:]), "fetch-add returns the old value")
	require.Equal(t, uint64(43), binary.LittleEndian.Uint64(bm[1024:]), "two fetch-adds applied")
	require.Equal(t, uint64(7), binary.LittleEndian.Uint64(am[1032:]), "compare-swap returns the old value")
	require.Equal(t, uint64(99), binary.LittleEndian.Uint64(bm[1032:]), "compare-swap swapped")
	require.Equal(t, "remote bytes", string(am[2048:2060]), "RDMA read")

	st := a.ctx.(nic.StatsReporter).NICStats()
	require.Equal(t, uint64(9), st.WQEs)
	require.Equal(t, uint64(8), st.CQEs)
}

// TestBigBatch posts more requests in one call than one C-stack chunk holds.
func TestBigBatch(t *testing.T) {
	p := provider(t)
	a, b := pairDepth(t, p, nic.AccessLocalWrite|nic.AccessRemoteWrite, 0, 256)
	rb := b.mem.Remote()
	wrs := make([]nic.SendWR, 150)
	for i := range wrs {
		a.mem.Bytes()[i] = byte(i + 1)
		wrs[i] = nic.SendWR{ID: uint64(i), Op: nic.OpRDMAWrite, Local: sge(a.mem, i, 1), RemoteAddr: rb.Addr + uint64(i), RKey: rb.RKey}
		if i%10 == 9 {
			wrs[i].Flags = nic.FlagSignaled
		}
	}
	n, err := a.qp.PostSend(wrs)
	require.NoError(t, err)
	require.Equal(t, 150, n)
	wcs := nictest.Wait(t, a.scq, 15)
	for i, wc := range wcs {
		require.Equal(t, uint64(10*i+9), wc.ID, "only signalled requests complete, in order")
	}
	require.Equal(t, a.mem.Bytes()[:150], b.mem.Bytes()[:150])
}

func TestFaults(t *testing.T) {
	p := provider(t)
	t.Run("remote write without permission", func(t *testing.T) {
		a, b := pair(t, p, nic.AccessLocalWrite|nic.AccessRemoteRead, 0)
		rb := b.mem.Remote()
		_, err := a.qp.PostSend([]nic.SendWR{{ID: 7, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: sge(a.mem, 0, 8), RemoteAddr: rb.Addr, RKey: rb.RKey}})
		require.NoError(t, err)
		wc := nictest.Wait(t, a.scq, 1)[0]
		require.Equal(t, nic.StatusRemoteAccessError, wc.Status)
		require.Equal(t, uint64(7), wc.ID)
		require.Equal(t, nic.OpRDMAWrite, wc.Opcode, "the opcode of a failed request is recovered from the post record")
	})
	t.Run("remote address out of bounds", func(t *testing.T) {
		a, b := pair(t, p, nic.AccessLocalWrite|nic.AccessRemoteRead|nic.AccessRemoteWrite, 0)
		rb := b.mem.Remote()
		_, err := a.qp.PostSend([]nic.SendWR{
			{ID: 8, Op: nic.OpRDMARead, Flags: nic.FlagSignaled, Local: sge(a.mem, 0, 64), RemoteAddr: rb.Addr + rb.Len - 32, RKey: rb.RKey},
			{ID: 9, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: sge(a.mem, 0, 8), RemoteAddr: rb.Addr, RKey: rb.RKey},
		})
		require.NoError(t, err)
		wcs := nictest.Wait(t, a.scq, 2)
		require.Equal(t, nic.StatusRemoteAccessError, wcs[0].Status)
		require.Equal(t, nic.OpRDMARead, wcs[0].Opcode)
		require.Equal(t, nic.StatusFlushError, wcs[1].Status, "a QP in error flushes the rest")
		require.Equal(t, nic.OpRDMAWrite, wcs[1].Opcode)
	})
	t.Run("send with no receive", func(t *testing.T) {
		a, _ := pair(t, p, nic.AccessLocalWrite, 1)
		_, err := a.qp.PostSend([]nic.SendWR{{ID: 10, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: sge(a.mem, 0, 8)}})
		require.NoError(t, err)
		wc := nictest.Wait(t, a.scq, 1)[0]
		require.Equal(t, nic.StatusRNRRetryExceeded, wc.Status)
		require.Equal(t, nic.OpSend, wc.Opcode)
	})
	t.Run("post errors", func(t *testing.T) {
		a, _ := pair(t, p, nic.AccessLocalWrite, 0)
		_, err := a.qp.PostSend([]nic.SendWR{{Op: nic.OpCQEWait}})
		require.ErrorIs(t, err, nic.ErrNoCrossChannel)
		_, err = a.qp.PostSend([]nic.SendWR{{Op: nic.OpSend, Flags: nic.FlagInline, Local: nic.SGE{Addr: a.mem.Addr(), Len: uint32(p.Caps().MaxInline + 1)}}})
		require.ErrorIs(t, err, nic.ErrInlineTooLarge)
		_, err = a.pd.CreateQP(nic.QPConfig{SendCQ: a.scq, RecvCQ: a.rcq, SendDepth: 4, RecvDepth: 4, ManagedSend: true})
		require.ErrorIs(t, err, nic.ErrNoCrossChannel)
		qp, err := a.pd.CreateQP(nic.QPConfig{SendCQ: a.scq, RecvCQ: a.rcq, SendDepth: 4, RecvDepth: 4})
		require.NoError(t, err)
		_, err = qp.PostSend([]nic.SendWR{{Op: nic.OpNop}})
		require.ErrorIs(t, err, nic.ErrNotConnected)
	})
}

func TestOpenRestricted(t *testing.T) {
	opts := testOptions()
	opts.Ranks = []int{3}
	p, err := New(opts)
	if err != nil {
		t.Skipf("no usable RDMA device: %v", err)
	}
	_, err = p.Open(1)
	require.ErrorContains(t, err, "not rank 1")
	c, err := p.Open(3)
	require.NoError(t, err)
	_, err = p.Open(3)
	require.ErrorContains(t, err, "already open")
	require.NoError(t, c.Close())
}

// TestStamp: a CQ asked to stamp dates each completion, on nic.Now's clock, between the post and
// the poll that returns it (within the error of the cycle counter's calibration, stampSlack: a
// few microseconds, but in an emulated VM whose host is busy the counter ran up to 44 µs ahead of
// the clock between two anchors, and in one CI run of session 52 85 to 132 µs ahead from the
// first completion on), in order, also right after pauses without polls (in a VM the counter's
// rate against the clock drifts by up to 0.7% in 10 ms: a stamp extrapolated over the 300 ms
// pause would be 2 ms off, well past the slack); unasked, it leaves the time zero.
func TestStamp(t *testing.T) {
	const stampSlack = 500_000 // ns
	c, _ := pair(t, provider(t), nic.AccessLocalWrite, 0)
	var last int64
	for i, tc := range []struct {
		on    bool
		pause time.Duration
	}{{true, 0}, {true, 0}, {true, 50 * time.Millisecond}, {true, 0}, {true, 300 * time.Millisecond}, {true, 0}, {false, 0}} {
		c.scq.(nic.StampCQ).Stamp(tc.on)
		time.Sleep(tc.pause)
		before := nic.Now()
		_, err := c.qp.PostSend([]nic.SendWR{{ID: 1, Op: nic.OpNop, Flags: nic.FlagSignaled}})
		require.NoError(t, err)
		wc := nictest.Wait(t, c.scq, 1)
		after := nic.Now()
		if !tc.on {
			assert.Zero(t, wc[0].Time)
			continue
		}
		assert.GreaterOrEqual(t, wc[0].Time, before-stampSlack, "completion %d, after a pause of %v", i, tc.pause)
		assert.LessOrEqual(t, wc[0].Time, after+stampSlack, "completion %d, after a pause of %v", i, tc.pause)
		assert.Greater(t, wc[0].Time, last, "completion %d", i)
		last = wc[0].Time
	}
}
