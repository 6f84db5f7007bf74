//go:build ofi && linux

package ofi

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/nictest"
)

// TestCloseQPKeepsSlotsForCQ: an endpoint closed while a completion that names one of its
// slots is still to be read from a CQ it shares keeps that slot's memory until the CQ has read
// it. The CQ then reads the completion from memory that is still the closed endpoint's, drops
// it, and frees the memory, long before the CQ closes. On shm a small send's completion is
// coredag's own (the CQ's done list), so one is surely pending when the endpoint closes. The
// slots used to be freed at once, and the poll read freed memory: harmless while the allocator
// leaves it as it was (glibc's calloc does not take a chunk just freed), a receive completed that
// nothing was sent to once a new endpoint's slots take it. go test -asan stops at that read, and
// at one that follows a free too early.
func TestCloseQPKeepsSlotsForCQ(t *testing.T) {
	p := providerNamed(t, "shm")
	a, b := pair(t, p, nictest.AllAccess, 4, nil)
	_, err := b.qp.PostRecv([]nic.RecvWR{{ID: 9, Local: b.sge(0, 64)}, {ID: 10, Local: b.sge(0, 64)}})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]nic.SendWR{{ID: 9, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 8)}})
	require.NoError(t, err)
	if sent, _ := exchange(t, a.scq, b.rcq); len(sent) == 0 { // the peers have met
		nictest.Wait(t, a.scq, 1)
	}

	// The free and the calloc that may take the memory back on one thread (malloc's caches are
	// per thread).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cq := a.scq.(*CQ)
	_, err = a.qp.PostSend([]nic.SendWR{{ID: 10, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 8)}})
	require.NoError(t, err)
	require.Len(t, cq.done, 1, "the send is injected: its completion waits in the CQ")
	old := uintptr(unsafe.Pointer(a.qp.sslots)) // 2×4 send slots
	require.NoError(t, a.qp.Close())
	require.Len(t, cq.retired, 1, "the send slots wait for the CQ; the receive slots, named by no completion, are freed")
	assert.Equal(t, 1, cq.retired[0].pending)

	// A new endpoint on the same CQ whose receive slots are as large as the closed one's send
	// slots, with a receive posted that nothing is sent to.
	c, err := a.pd.CreateEndpoint(nic.QPConfig{SendCQ: cq, RecvCQ: cq, SendDepth: 1, RecvDepth: 8})
	require.NoError(t, err)
	_, err = c.PostRecv([]nic.RecvWR{{ID: 77, Local: a.sge(0, 64)}})
	require.NoError(t, err)
	assert.NotEqual(t, old, uintptr(unsafe.Pointer(c.rslots)), "the closed endpoint's send slots were freed and taken again")
	var wc [4]nic.WC
	for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
		n, err := cq.Poll(wc[:])
		require.NoError(t, err)
		for _, w := range wc[:n] {
			t.Errorf("a completion of a closed endpoint's send was handed out as %+v", w)
		}
	}
	assert.Empty(t, cq.retired, "the CQ frees the slots once it has read the completion that names them")
	require.NoError(t, c.Close())
	require.NoError(t, cq.Close())
}

// TestCloseQPFreesSlotsOnceRead: the slots of an endpoint closed with requests whose completions
// libfabric has written to the CQ and nobody has read are freed when the CQ has read the last of
// them, not before (go test -asan would stop at the read of the next), and none is handed out.
// On sockets the write counter bound to the endpoint rises after the completion is in the CQ.
func TestCloseQPFreesSlotsOnceRead(t *testing.T) {
	p := provider(t)
	a, b, writes := countedPair(t, p, 0, EvWrite)
	rb := b.mr.Remote()
	var wrs []nic.SendWR
	for i := range 3 {
		wrs = append(wrs, nic.SendWR{ID: uint64(i), Op: nic.OpRDMAWrite, Local: a.sge(8*i, 8), RemoteAddr: rb.Addr + uint64(8*i), RKey: rb.RKey})
	}
	wrs[2].Flags = nic.FlagSignaled // libfabric completes the unsignalled ones too
	_, err := a.qp.PostSend(wrs)
	require.NoError(t, err)
	require.NoError(t, writes.Wait(3, 5*time.Second))

	cq := a.scq.(*CQ)
	require.NoError(t, a.qp.Close())
	require.Len(t, cq.retired, 1, "the send slots wait for the CQ")
	assert.Equal(t, 3, cq.retired[0].pending)
	var wc [4]nic.WC
	for deadline := time.Now().Add(5 * time.Second); len(cq.retired) > 0 && time.Now().Before(deadline); {
		n, err := cq.Poll(wc[:])
		require.NoError(t, err)
		for _, w := range wc[:n] {
			t.Errorf("a completion of a closed endpoint's write was handed out as %+v", w)
		}
	}
	assert.Empty(t, cq.retired, "the CQ frees the slots once it has read the three completions that name them")
	n, err := cq.Poll(wc[:])
	require.NoError(t, err)
	assert.Zero(t, n)
}

// TestCloseQPWithArmedTrigger: an endpoint that a triggered operation still waits to post on
// does not close (libfabric would start the operation on a freed endpoint once the counter
// reaches its threshold). Where the provider can drop triggered work (FI_FLUSH_WORK), it closes
// once CancelTriggers dropped it; sockets cannot, and keeps the work on its counter, so only
// closing the whole context, counter included, closes the endpoint. A triggered request that
// fails at once is not armed.
func TestCloseQPWithArmedTrigger(t *testing.T) {
	p := provider(t)
	if !p.Triggered() {
		t.Skip("no FI_TRIGGER")
	}
	a, b, sends := countedPair(t, p, 0, EvSend)
	rb := b.mr.Remote()
	require.NoError(t, a.qp.PostTriggered(sends, 1, nic.SendWR{ID: 9, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled,
		Local: a.sge(256, 8), RemoteAddr: rb.Addr + 512, RKey: rb.RKey}))
	err := a.qp.Close()
	require.ErrorIs(t, err, nic.ErrBadRequest)
	assert.ErrorContains(t, err, "1 triggered operations still wait to post on it; ")
	if a.ctx.DropsTriggers() {
		assert.ErrorContains(t, err, "cancel them first (CancelTriggers)")
	} else {
		assert.ErrorContains(t, err, "sockets cannot drop triggered work (no FI_FLUSH_WORK): close the whole context")
	}
	assert.False(t, a.qp.closed, "the endpoint stays open")

	assert.Equal(t, 1, a.ctx.CancelTriggers())
	require.NoError(t, a.ctx.TriggerErr(), "a provider without FI_FLUSH_WORK is no error of the work")
	if !a.ctx.DropsTriggers() {
		err = a.qp.Close()
		assert.ErrorContains(t, err, "cannot drop triggered work (no FI_FLUSH_WORK): close the whole context")
		assert.Equal(t, 1, a.ctx.PendingTriggers(), "still armed")
		require.NoError(t, a.ctx.Close())
		assert.True(t, a.qp.closed)
	} else {
		require.NoError(t, a.qp.Close())
		// The counter reaches the threshold: the dropped write must not go.
		require.NoError(t, sends.Add(1))
		time.Sleep(50 * time.Millisecond)
		require.NoError(t, b.ctx.DriveProgress())
		assert.Zero(t, binary.LittleEndian.Uint64(b.mr.Bytes()[512:]), "the dropped write did not land")
	}

	// A key of nothing registered: the write completes at once with an error, and holds no
	// endpoint open.
	c, d, sends := countedPair(t, p, 0, EvSend)
	bad := c.sge(256, 8)
	bad.LKey ^= 0xdead
	require.NoError(t, c.qp.PostTriggered(sends, 1, nic.SendWR{ID: 7, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled,
		Local: bad, RemoteAddr: d.mr.Remote().Addr + 512, RKey: d.mr.Remote().RKey}))
	wcs := nictest.Wait(t, c.scq, 1)
	assert.Equal(t, nic.StatusLocalProtectionError, wcs[0].Status)
	assert.Zero(t, c.ctx.PendingTriggers())
	require.NoError(t, c.qp.Close())
}
