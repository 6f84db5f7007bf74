package softnic

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
)

// TestBindRemoteWrites checks the counters of the remote writes that land in part of a region:
// a write inside the part raises its counter once, with or without immediate data, and writes
// elsewhere in the region, reads and atomics do not; a part outside the region is refused.
func TestBindRemoteWrites(t *testing.T) {
	sn := New(Options{NoCrossChannel: true})
	a, b := pair(t, sn, nic.AccessLocalWrite|nic.AccessRemoteWrite|nic.AccessRemoteRead|nic.AccessRemoteAtomic, nic.QPConfig{})
	ctx := b.ctx.(nic.RMAEventContext)
	low, err := ctx.CreateCounter()
	require.NoError(t, err)
	high, err := ctx.CreateCounter()
	require.NoError(t, err)
	require.NoError(t, ctx.BindRemoteWrites(low, b.mr, 0, 1024))
	require.NoError(t, ctx.BindRemoteWrites(high, b.mr, 1024, 1024))
	require.Error(t, ctx.BindRemoteWrites(low, b.mr, 4000, 1024), "a part past the region's end")
	require.Error(t, ctx.BindRemoteWrites(low, a.mr, 0, 8), "a region of another context")

	at := func(off int) (uint64, uint32) { return b.remote(off) }
	addr0, key := at(0)
	addr1, _ := at(1024)
	addr2, _ := at(1000) // straddles the two parts: counts for neither
	addr3, _ := at(3000)
	postRecv(t, b, nic.RecvWR{ID: 9})
	postSend(t, a,
		nic.SendWR{ID: 1, Op: nic.OpRDMAWrite, Local: a.sge(0, 64), RemoteAddr: addr0, RKey: key},
		nic.SendWR{ID: 2, Op: nic.OpRDMAWriteImm, Local: a.sge(0, 64), RemoteAddr: addr0 + 64, RKey: key, Imm: 1},
		nic.SendWR{ID: 3, Op: nic.OpRDMAWrite, Local: a.sge(0, 64), RemoteAddr: addr1, RKey: key},
		nic.SendWR{ID: 4, Op: nic.OpRDMAWrite, Local: a.sge(0, 64), RemoteAddr: addr2, RKey: key},
		nic.SendWR{ID: 5, Op: nic.OpRDMAWrite, Local: a.sge(0, 64), RemoteAddr: addr3, RKey: key},
		nic.SendWR{ID: 6, Op: nic.OpRDMARead, Local: a.sge(128, 64), RemoteAddr: addr0, RKey: key},
		nic.SendWR{ID: 7, Op: nic.OpAtomicFAdd, Flags: nic.FlagSignaled, Local: a.sge(256, 8), RemoteAddr: addr1, RKey: key, CompareAdd: 1},
	)
	require.Len(t, drain(t, a.scq, 1), 1)
	require.Equal(t, uint64(2), low.Value(), "the write and the write with immediate into [0, 1024)")
	require.Equal(t, uint64(1), high.Value(), "the write into [1024, 2048), not the atomic")
}

// TestTriggerOnLandedWrites: triggered work waiting on a remote-write counter fires as the writes
// that reach its threshold land, with nothing else happening on the target's side (the triggered
// targets' ops after a wait for landed writes); below the threshold it waits.
func TestTriggerOnLandedWrites(t *testing.T) {
	sn := New(Options{NoCrossChannel: true})
	a, b := pair(t, sn, allAccess, nic.QPConfig{})
	ctx := b.ctx.(nic.RMAEventContext)
	land, err := ctx.CreateCounter()
	require.NoError(t, err)
	require.NoError(t, ctx.BindRemoteWrites(land, b.mr, 0, 64))
	postRecv(t, a, nic.RecvWR{ID: 50})
	require.NoError(t, ctx.Trigger(land, 2, &nic.TriggeredWR{Kind: nic.TrigSend, QP: b.qp,
		Send: nic.SendWR{ID: 60, Op: nic.OpSend, Flags: nic.FlagSignaled, Local: b.sge(0, 16)}}))
	addr, key := b.remote(0)
	postSend(t, a, nic.SendWR{ID: 1, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: a.sge(0, 8), RemoteAddr: addr, RKey: key})
	require.Len(t, drain(t, a.scq, 1), 1)
	require.Empty(t, drain(t, a.rcq, 1), "one write landed: the send waits for two")
	require.Equal(t, 1, ctx.PendingTriggers())
	postSend(t, a, nic.SendWR{ID: 2, Op: nic.OpRDMAWrite, Flags: nic.FlagSignaled, Local: a.sge(8, 8), RemoteAddr: addr + 8, RKey: key})
	require.Len(t, drain(t, a.scq, 1), 1)
	got := drain(t, a.rcq, 1)
	require.Len(t, got, 1, "the second write fired the triggered send")
	require.Equal(t, uint64(50), got[0].ID)
	require.Zero(t, ctx.PendingTriggers())
}

// Counting per registration (Options.CountPerRegistration), as libfabric does, a counter is bound
// to a whole region only.
func TestBindRemoteWritesPerRegistration(t *testing.T) {
	sn := New(Options{NoCrossChannel: true, CountPerRegistration: true})
	_, b := pair(t, sn, allAccess, nic.QPConfig{})
	ctx := b.ctx.(nic.RMAEventContext)
	require.True(t, b.ctx.(nic.RegistrationCounting).CountsPerRegistration())
	k, err := ctx.CreateCounter()
	require.NoError(t, err)
	require.ErrorIs(t, ctx.BindRemoteWrites(k, b.mr, 0, 64), nic.ErrProviderLimited)
	require.NoError(t, ctx.BindRemoteWrites(k, b.mr, 0, uint64(len(b.mr.Bytes()))))
}
