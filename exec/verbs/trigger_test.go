//go:build verbs && linux

package verbs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/nictest"
)

func nicEnd(e *end) nictest.End {
	return nictest.End{Ctx: e.ctx, PD: e.pd, QP: e.qp, SCQ: e.scq, RCQ: e.rcq, MR: e.mem}
}

// TestContract holds the verbs provider to package nic's contract.
func TestContract(t *testing.T) {
	p := provider(t)
	nictest.Contract(t, p.Caps(), func(t *testing.T, c nictest.PairConfig) (nictest.End, nictest.End) {
		depth := c.Depth
		if depth == 0 {
			depth = 64
		}
		a, b := pairDepth(t, p, c.Access, c.RNRRetry, depth)
		return nicEnd(a), nicEnd(b)
	})
}

func TestTrigger(t *testing.T) {
	a, b := pair(t, provider(t), nic.AccessLocalWrite|nic.AccessRemoteWrite, 0)
	nictest.Trigger(t, nicEnd(a), nicEnd(b))
}

func TestTriggerDisarm(t *testing.T) {
	a, b := pair(t, provider(t), nic.AccessLocalWrite|nic.AccessRemoteWrite, 0)
	nictest.TriggerDisarm(t, nicEnd(a), nicEnd(b))
}

// TestHold is the engine's chain in miniature: a's receive CQ may hold its next completion, which
// only releases the reply armed on it. The poll still returns the completion, and the reply went
// out from inside it.
func TestHold(t *testing.T) {
	p := provider(t)
	a, b := pair(t, p, nic.AccessLocalWrite|nic.AccessRemoteWrite, 0)
	ra, rb := a.mem.Remote(), b.mem.Remote()
	_, err := a.qp.PostRecv([]nic.RecvWR{{ID: 1}, {ID: 2}})
	require.NoError(t, err)
	_, err = b.qp.PostRecv([]nic.RecvWR{{ID: 3}})
	require.NoError(t, err)
	ping := func(id uint64, to nic.RemoteMR, from nic.MR) *nic.SendWR {
		return &nic.SendWR{ID: id, Op: nic.OpRDMAWriteImm, Flags: nic.FlagSignaled, Local: sge(from, 0, 8), RemoteAddr: to.Addr, RKey: to.RKey}
	}
	// b answers a's first ping from inside its poll; a answers b's answer from inside its poll.
	require.NoError(t, b.qp.(nic.TriggerQP).ArmSend(b.rcq, 1, ping(5, ra, b.mem)))
	require.NoError(t, a.qp.(nic.TriggerQP).ArmSend(a.rcq, 1, ping(6, rb, a.mem)))
	a.rcq.(nic.HoldCQ).Hold(1)
	_, err = a.qp.PostSend([]nic.SendWR{*ping(4, rb, a.mem)})
	require.NoError(t, err)
	nictest.Wait(t, b.rcq, 1)
	_, err = b.qp.PostRecv([]nic.RecvWR{{ID: 7}})
	require.NoError(t, err)
	got := nictest.Wait(t, a.rcq, 1)
	assert.Len(t, got, 1, "a's receive CQ returns the held completion")
	_, n, _ := a.qp.(nic.TriggerQP).Fired()
	assert.Equal(t, 1, n, "a's reply went out from the poll")
	nictest.Wait(t, b.rcq, 1)
}

// TestTriggerRejected: a request the QP rejects when the trigger posts it comes back from Fired
// as PostSend's error would.
func TestTriggerRejected(t *testing.T) {
	p := provider(t)
	c, _ := pair(t, p, nic.AccessLocalWrite, 0)
	cq := c.qp.(nic.TriggerQP)
	big := &nic.SendWR{ID: 4, Op: nic.OpSend, Flags: nic.FlagInline | nic.FlagSignaled, Local: nic.SGE{Addr: c.mem.Addr(), Len: uint32(p.Caps().MaxInline + 1)}}
	require.NoError(t, cq.ArmSend(c.scq, 1, big))
	_, err := c.qp.PostSend([]nic.SendWR{{ID: 3, Op: nic.OpNop, Flags: nic.FlagSignaled}})
	require.NoError(t, err)
	nictest.Wait(t, c.scq, 1)
	armed, n, err := cq.Fired()
	assert.Zero(t, armed)
	assert.Zero(t, n)
	assert.ErrorIs(t, err, nic.ErrInlineTooLarge, "the triggered post's error names the cause")
}
