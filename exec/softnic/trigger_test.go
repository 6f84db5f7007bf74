package softnic

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/internal/nictest"
)

func nicEnd(e *end) nictest.End {
	return nictest.End{Ctx: e.ctx, PD: e.pd, QP: e.qp, SCQ: e.scq, RCQ: e.rcq, MR: e.mr}
}

// TestContract holds the software NIC, with and without cross-channel, to package nic's contract.
func TestContract(t *testing.T) {
	for _, opts := range []Options{{}, {NoCrossChannel: true}, {Seeded: true, Seed: 3, Triggers: true}} {
		nictest.Contract(t, New(opts).Caps(), func(t *testing.T, c nictest.PairConfig) (nictest.End, nictest.End) {
			sn := New(opts)
			depth := c.Depth
			if depth == 0 {
				depth = 64
			}
			cfg := nic.QPConfig{SendDepth: depth, RecvDepth: depth, RNRRetry: c.RNRRetry, MaxInline: sn.Caps().MaxInline}
			a, b := newEnd(t, sn, 0, nictest.AllAccess, cfg), newEnd(t, sn, 1, c.Access, cfg)
			require.NoError(t, a.qp.Connect(b.qp.Info()))
			require.NoError(t, b.qp.Connect(a.qp.Info()))
			t.Cleanup(func() {
				require.NoError(t, a.ctx.Close())
				require.NoError(t, b.ctx.Close())
			})
			return nicEnd(a), nicEnd(b)
		})
	}
}

func TestTrigger(t *testing.T) {
	a, b := pair(t, New(Options{NoCrossChannel: true}), allAccess, nic.QPConfig{})
	nictest.Trigger(t, nicEnd(a), nicEnd(b))
}

func TestTriggerDisarm(t *testing.T) {
	a, b := pair(t, New(Options{NoCrossChannel: true}), allAccess, nic.QPConfig{})
	nictest.TriggerDisarm(t, nicEnd(a), nicEnd(b))
}

// TestCounters holds the software NIC to the nic.TriggerContext contract.
func TestCounters(t *testing.T) {
	a, b := pair(t, New(Options{NoCrossChannel: true}), allAccess, nic.QPConfig{})
	nictest.Counters(t, nicEnd(a), nicEnd(b))
}
