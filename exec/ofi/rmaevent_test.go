//go:build ofi && linux

package ofi

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/nictest"
)

// TestBindRemoteWrites: a counter bound to a region counts the writes that land in it, and a
// part of a region is refused.
func TestBindRemoteWrites(t *testing.T) {
	for _, name := range []string{"sockets", "shm"} {
		t.Run(name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.Provider = name
			p, err := NewProvider(opts)
			if err != nil {
				t.Skipf("no libfabric %s provider: %v", name, err)
			}
			t.Cleanup(func() { p.Close() })
			if !p.RMAEvent() {
				t.Skipf("%s has no FI_RMA_EVENT", p.name)
			}
			testBindRemoteWrites(t, p, name == "sockets")
		})
	}
}

// must: the provider is known to bind counters to regions (sockets); shm refuses (fi_mr_bind is
// not implemented: it counts remote writes per endpoint only), which must be a provider limit.
func testBindRemoteWrites(t *testing.T, p *Provider, must bool) {
	a, b := pair(t, p, nictest.AllAccess, 16, nil)
	k, err := b.ctx.OpenCounter()
	require.NoError(t, err)
	assert.ErrorIs(t, b.ctx.BindRemoteWrites(k, b.mr, 8, uint64(b.mr.size)-8), nic.ErrProviderLimited, "a part of the region")
	if err := b.ctx.BindRemoteWrites(k, b.mr, 0, uint64(b.mr.size)); !must && err != nil {
		require.ErrorIs(t, err, nic.ErrProviderLimited)
		t.Skipf("refused: %v", err)
	} else {
		require.NoError(t, err)
	}
	rb := b.mr.Remote()
	_, err = a.qp.PostSend([]nic.SendWR{
		{ID: 1, Op: nic.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: rb.Addr, RKey: rb.RKey},
		{ID: 2, Op: nic.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: rb.Addr + 8, RKey: rb.RKey},
		{ID: 3, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: a.sge(8, 8), RemoteAddr: rb.Addr, RKey: rb.RKey},
	})
	require.NoError(t, err)
	nictest.Wait(t, a.scq, 1)
	// Poll rather than fi_cntr_wait: a counter nothing raises must fail the test, not hang it.
	for deadline := time.Now().Add(5 * time.Second); k.Read() < 3 && time.Now().Before(deadline); {
		require.NoError(t, b.ctx.DriveProgress())
		time.Sleep(time.Millisecond)
	}
	assert.EqualValues(t, 3, k.Read())
}

// TestCountPart: a part of a buffer, registered on its own, counts the writes that name its key
// and not those into the rest of the buffer, nor those or the atomics into the part that name the
// buffer's key (sockets raises the counter of the registration whose
// key a write names); counter work queued on that counter runs when a poll of any CQ of the
// context finds the count reached, with nothing else changing a counter on this side.
func TestCountPart(t *testing.T) {
	opts := DefaultOptions()
	opts.Provider = "sockets"
	p, err := NewProvider(opts)
	if err != nil {
		t.Skipf("no libfabric sockets provider: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	if !p.RMAEvent() || !p.Triggered() {
		t.Skipf("%s has no FI_RMA_EVENT or no FI_TRIGGER", p.name)
	}
	a, b := pair(t, p, nictest.AllAccess, 16, nil)
	require.True(t, b.ctx.CountsPerRegistration())
	mem := b.mr.Bytes()[64:128]
	part, err := b.pd.RegisterMR(unsafe.Pointer(&mem[0]), len(mem), nictest.AllAccess)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, part.Close()) })
	k, err := b.ctx.CreateCounter()
	require.NoError(t, err)
	require.NoError(t, b.ctx.BindRemoteWrites(k, part, 0, uint64(len(mem))))
	done, err := b.ctx.CreateCounter()
	require.NoError(t, err)
	require.NoError(t, b.ctx.Trigger(k, 2, &nic.TriggeredWR{Kind: nic.TrigAdd, Target: done, Value: 1}))

	whole, rp := b.mr.Remote(), part.Remote()
	_, err = a.qp.PostSend([]nic.SendWR{
		{ID: 1, Op: nic.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: whole.Addr + 8, RKey: whole.RKey},  // outside the part
		{ID: 2, Op: nic.OpRDMAWrite, Local: a.sge(0, 8), RemoteAddr: whole.Addr + 64, RKey: whole.RKey}, // inside, the buffer's key
		{ID: 3, Op: nic.OpRDMAWrite, Local: a.sge(8, 8), RemoteAddr: rp.Addr, RKey: rp.RKey},
		{ID: 4, Op: nic.OpRDMAWrite, Local: a.sge(16, 8), RemoteAddr: rp.Addr + 56, RKey: rp.RKey},
		// an atomic into the part with the buffer's key (sockets counts an atomic as a remote
		// write of the registration it names): not counted
		{ID: 5, Op: nic.OpAtomicFAdd, Flags: nic.FlagSignaled, Local: a.sge(32, 8), RemoteAddr: whole.Addr + 72, RKey: whole.RKey, CompareAdd: 1},
	})
	require.NoError(t, err)
	nictest.Wait(t, a.scq, 1)
	wc := make([]nic.WC, 4)
	for deadline := time.Now().Add(5 * time.Second); done.Value() < 1 && time.Now().Before(deadline); {
		_, err := b.rcq.Poll(wc) // nothing completes there: the poll only progresses the endpoint
		require.NoError(t, err)
		time.Sleep(time.Millisecond)
	}
	assert.EqualValues(t, 2, k.Value(), "only the writes that name the part's key")
	assert.EqualValues(t, 1, done.Value(), "the counter work on the part's counter ran")
	assert.Equal(t, b.mr.Bytes()[64:72], a.mr.Bytes()[0:8], "a write with the buffer's key lands all the same")
	assert.Equal(t, mem[0:8], a.mr.Bytes()[8:16])
	assert.Equal(t, mem[56:64], a.mr.Bytes()[16:24])
}
