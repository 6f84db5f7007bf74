//go:build ofi && linux

package ofi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/nictest"
)

// TestSendsCompletedWhenPosted: on shm, whose sends under 4096 bytes complete as soon as they
// are posted, a one-segment send that small is injected and completed by coredag itself; a
// larger one, one of two segments, or one on an endpoint whose sends a bound counter counts
// goes through libfabric's completions. Completions keep posting order either way, and every
// message arrives whole.
func TestSendsCompletedWhenPosted(t *testing.T) {
	p := providerNamed(t, "shm")
	require.EqualValues(t, min(uint64(p.ccaps.inject), 4095), p.injectDone)

	a, b := pair(t, p, nictest.AllAccess, 16, nil)
	var err error
	for i := range a.mr.Bytes() {
		a.mr.Bytes()[i] = byte(i * 7)
	}
	sends := []nic.SendWR{
		{ID: 1, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 8)},                                // injected
		{ID: 2, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 4096)},                             // too long
		{ID: 3, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(8, 8), More: []nic.SGE{a.sge(32, 8)}}, // two segments
		{ID: 4, Op: nic.OpSend, Local: a.sge(100, 16)},                                                      // injected, unsignalled
		{ID: 5, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(1, 4095)},                             // injected, the largest
	}
	recvs := make([]nic.RecvWR, len(sends))
	for i := range recvs {
		recvs[i] = nic.RecvWR{ID: uint64(10 + i), Local: b.sge(0, 4096)}
	}
	want := [][]byte{a.mr.Bytes()[:8], a.mr.Bytes()[:4096], append(append([]byte{}, a.mr.Bytes()[8:16]...), a.mr.Bytes()[32:40]...),
		a.mr.Bytes()[100:116], a.mr.Bytes()[1:4096]}
	// The first message: shm refuses an inject (FI_EAGAIN) until the peers have met, and the QP
	// posts it again when the sender's CQ is polled.
	_, err = b.qp.PostRecv([]nic.RecvWR{{ID: 9, Local: b.sge(0, 4096)}})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]nic.SendWR{{ID: 9, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 8)}})
	require.NoError(t, err)
	if sent, _ := exchange(t, a.scq, b.rcq); len(sent) == 0 {
		nictest.Wait(t, a.scq, 1)
	}
	before := a.qp.injected
	var wcs []nic.WC
	for i := range sends {
		_, err = b.qp.PostRecv(recvs[i : i+1])
		require.NoError(t, err)
		_, err = a.qp.PostSend(sends[i : i+1])
		require.NoError(t, err)
		sent, got := exchange(t, a.scq, b.rcq)
		wcs = append(wcs, sent...)
		require.Equal(t, nic.StatusSuccess, got.Status, "%+v: %s", got, b.qp.Explain())
		assert.Equal(t, want[i], b.mr.Bytes()[:got.ByteLen], "message %d", sends[i].ID)
	}
	assert.EqualValues(t, 3, a.qp.injected-before, "sends 1, 4 and 5 injected")
	wcs = append(wcs, nictest.Wait(t, a.scq, 4-len(wcs))...)
	for i, id := range []uint64{1, 2, 3, 5} {
		assert.Equal(t, id, wcs[i].ID, "completions in posting order")
		assert.Equal(t, nic.StatusSuccess, wcs[i].Status, "%+v: %s", wcs[i], a.qp.Explain())
	}

	// A bound counter of sends counts what libfabric completes: nothing is injected there.
	c, d, sent := countedPair(t, p, 0, EvSend)
	for id := uint64(1); id <= 2; id++ {
		_, err = d.qp.PostRecv([]nic.RecvWR{{ID: id, Local: d.sge(0, 64)}})
		require.NoError(t, err)
		_, err = c.qp.PostSend([]nic.SendWR{{ID: id, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: c.sge(0, 8)}})
		require.NoError(t, err)
		sent, _ := exchange(t, c.scq, d.rcq)
		if len(sent) == 0 {
			nictest.Wait(t, c.scq, 1)
		}
	}
	assert.Zero(t, c.qp.injected)
	assert.EqualValues(t, 2, sent.Read())
}

// exchange polls the sender's CQ (which also posts again what libfabric refused) and the
// receiver's until one message arrives; it returns the send completions it found and the
// arrival. It fails after 10 s.
func exchange(t *testing.T, scq, rcq nic.CQ) ([]nic.WC, nic.WC) {
	t.Helper()
	var sent []nic.WC
	var wc [4]nic.WC
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n, err := scq.Poll(wc[:])
		require.NoError(t, err)
		sent = append(sent, wc[:n]...)
		if n, err = rcq.Poll(wc[:1]); n == 1 {
			return sent, wc[0]
		}
		require.NoError(t, err)
	}
	t.Fatalf("no message arrived in 10 s")
	return nil, nic.WC{}
}

// TestInjectDuringDoneLoop: a completion the provider gave at posting (inject) may free room for
// a send that waited (txCap, or an FI_EAGAIN); the send flushed then is injected too, while
// CQ.Poll walks the completions in hand. Both sends must complete: the second used to be
// dropped with the list, and its queue then stopped until the hang timeout.
func TestInjectDuringDoneLoop(t *testing.T) {
	p := providerNamed(t, "shm")
	a, b := pair(t, p, nictest.AllAccess, 16, nil)
	_, err := b.qp.PostRecv([]nic.RecvWR{{ID: 9, Local: b.sge(0, 64)}})
	require.NoError(t, err)
	_, err = a.qp.PostSend([]nic.SendWR{{ID: 9, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 8)}})
	require.NoError(t, err)
	if sent, _ := exchange(t, a.scq, b.rcq); len(sent) == 0 { // the peers have met
		nictest.Wait(t, a.scq, 1)
	}
	a.qp.txCap = 1 // room for one send at a time in the provider
	for id := uint64(1); id <= 2; id++ {
		_, err = b.qp.PostRecv([]nic.RecvWR{{ID: 10 + id, Local: b.sge(0, 64)}})
		require.NoError(t, err)
	}
	_, err = a.qp.PostSend([]nic.SendWR{
		{ID: 1, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 8)},
		{ID: 2, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: a.sge(0, 8)},
	})
	require.NoError(t, err)
	var sent []nic.WC
	received := 0
	var wc [4]nic.WC
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && (len(sent) < 2 || received < 2); {
		n, err := a.scq.Poll(wc[:])
		require.NoError(t, err)
		sent = append(sent, wc[:n]...)
		n, err = b.rcq.Poll(wc[:])
		require.NoError(t, err)
		received += n
	}
	assert.Equal(t, 2, received)
	require.Len(t, sent, 2, "both signalled sends complete")
	assert.Equal(t, []uint64{1, 2}, []uint64{sent[0].ID, sent[1].ID})
}
