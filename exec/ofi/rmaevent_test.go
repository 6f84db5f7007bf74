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
