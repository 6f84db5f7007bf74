//go:build ofi && linux

package ofi

import (
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
// slots is still to be read from a CQ it shares keeps that slot's memory until the CQ closes.
// The CQ then reads the completion from memory that is still the closed endpoint's, and drops
// it. On shm a small send's completion is coredag's own (the CQ's done list), so one is surely
// pending when the endpoint closes. The slots used to be freed at once, and the poll read freed
// memory: harmless while the allocator leaves it as it was (glibc's calloc does not take a chunk
// just freed), a receive completed that nothing was sent to once a new endpoint's slots take it.
// go test -asan stops at that read.
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
	assert.Len(t, cq.retired, 1, "the send slots wait for the CQ; the receive slots, named by no completion, are freed")

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
	require.NoError(t, c.Close())
	require.NoError(t, cq.Close())
	assert.Empty(t, cq.retired, "the CQ frees the slots it kept when it closes")
}

// TestCloseQPWithArmedTrigger: an endpoint that a triggered operation still waits to post on
// does not close (libfabric would start the operation on a freed endpoint once the counter
// reaches its threshold); it closes once CancelTriggers dropped the operation.
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
	assert.ErrorContains(t, err, "1 triggered operations still wait to post on it")
	assert.False(t, a.qp.closed, "the endpoint stays open")

	assert.Equal(t, 1, a.ctx.CancelTriggers())
	require.NoError(t, a.qp.Close())
	assert.Zero(t, sends.Value(), "nothing fired")
}
