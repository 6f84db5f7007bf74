//go:build ofi && linux

package ofi_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/ofi"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/planner/verify"
)

// openOrdered opens libfabric provider name asking for the message ordering order first.
func openOrdered(t *testing.T, name string, order ir.Order) *ofi.Provider {
	t.Helper()
	opts := ofi.DefaultOptions()
	opts.Provider, opts.Order = name, uint64(order)
	p, err := ofi.NewProvider(opts)
	if err != nil {
		if !ofi.Listed(name) && !(required[name] && os.Getenv("CI") == "1") {
			t.Skipf("libfabric has no %s provider here: %v", name, err)
		}
		t.Fatalf("provider %s: %v", name, err)
	}
	t.Logf("%s grants: %s", name, p.Grants())
	t.Cleanup(func() { p.Close() })
	return p
}

// compileRC loads plan file f with its races proven under the RC ordering and compiles it for
// the generic target.
func compileRC(t *testing.T, f string) *ir.Plan {
	t.Helper()
	src, err := os.ReadFile(f)
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), f, src, nil, planner.Options{Verify: verify.Options{Order: ir.OrderRC}})
	require.NoError(t, err, f)
	tg, err := ir.LookupTarget("generic")
	require.NoError(t, err)
	plan, err := lower.Compile(t.Context(), g, tg)
	require.NoError(t, err, f)
	return plan
}

// Caps().Order is the msg_order the provider granted on both sides: sockets grants every
// ordering; shm grants send-after-send alone unless asked for more, and then grants what it was
// asked. The runtime refuses a plan that relies on write-after-write (a write, then a notified
// write that publishes it) on shm asked for send-after-send only, and runs it on shm asked for
// write-after-write; a plan that relies on no ordering runs on both.
func TestOrderGranted(t *testing.T) {
	sockets := openOrdered(t, "sockets", ir.OrderSAS|ir.OrderSAW)
	assert.Equal(t, nic.OrderKnown|uint64(ir.OrderStrict), sockets.Caps().Order)

	relies := compileRC(t, "../../docs/examples/errors/race_order_notify.dag")
	require.NotNil(t, relies.Graph.Relies)
	free := compileRC(t, "../../plans/ring_allreduce.dag")
	require.Nil(t, free.Graph.Relies)

	run := func(plan *ir.Plan, p nic.Provider) error {
		s, err := exec.Prepare(context.Background(), plan, p, exec.Options{})
		if err != nil {
			return err
		}
		defer s.Close()
		_, err = s.Run(context.Background(), 1)
		return err
	}

	bare := openOrdered(t, "shm", ir.OrderSAS)
	got := ir.Order(bare.Caps().Order &^ nic.OrderKnown)
	require.NotZero(t, bare.Caps().Order&nic.OrderKnown)
	require.Zero(t, got&ir.OrderWAW, "shm asked for send-after-send only grants %v", got)
	err := run(relies, bare)
	require.ErrorIs(t, err, exec.ErrOrder)
	assert.Contains(t, err.Error(), "relies on write-after-write ordering (FI_ORDER_WAW) between the ops of a queue, which this NIC does not grant")
	assert.Contains(t, err.Error(), "FI_ORDER_WAW orders write wn")
	require.NoError(t, run(free, bare))

	waw := openOrdered(t, "shm", ir.OrderSAS|ir.OrderWAW)
	require.NotZero(t, waw.Caps().Order&uint64(ir.OrderWAW), "shm asked for write-after-write grants %v", ir.Order(waw.Caps().Order&^nic.OrderKnown))
	require.NoError(t, run(relies, waw))
	require.NoError(t, run(free, waw))
}

// tcp;ofi_rxm grants atomics or send-after-write, not both. A plan with atomics (Options.NoAtomics
// false) gets atomics and loses send-after-write; an atomics-free plan (NoAtomics) gets
// send-after-write, so a write with immediate is a write and a message posted together instead
// of a write, a wait for its delivery and a message.
func TestOrderBeforeAtomics(t *testing.T) {
	const name = "tcp;ofi_rxm"
	atomics := compileRC(t, "../../plans/atomic_fanin.dag")
	require.True(t, atomics.Graph.HasAtomics())
	free := compileRC(t, "../../plans/ring_allreduce.dag")
	require.False(t, free.Graph.HasAtomics())

	open := func(noAtomics bool) *ofi.Provider {
		opts := ofi.DefaultOptions()
		opts.Provider, opts.NoAtomics = name, noAtomics
		p, err := ofi.NewProvider(opts)
		if err != nil {
			if !ofi.Listed(name) && !(required[name] && os.Getenv("CI") == "1") {
				t.Skipf("libfabric has no %s provider here: %v", name, err)
			}
			t.Fatalf("provider %s: %v", name, err)
		}
		t.Logf("%s (NoAtomics %v) grants: %s", name, noAtomics, p.Grants())
		t.Cleanup(func() { p.Close() })
		return p
	}
	saw := uint64(ir.OrderSAW)

	first := open(!atomics.Graph.HasAtomics())
	assert.True(t, first.Caps().Atomics, "a plan with atomics gets FI_ATOMIC")

	ordered := open(!free.Graph.HasAtomics())
	assert.NotZero(t, ordered.Caps().Order&saw, "an atomics-free plan gets FI_ORDER_SAW, granted %v",
		ir.Order(ordered.Caps().Order&^nic.OrderKnown))
	assert.False(t, ordered.Caps().Atomics, "tcp;ofi_rxm was thought to grant FI_ATOMIC with FI_ORDER_SAW: the test's premise changed")
}
