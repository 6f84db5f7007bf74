package coredag

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/provider"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
)

// orderedSoftNIC is the software NIC as a provider that says it grants the ordering order
// (nic.Caps.Order), and records the ordering Init asked of it.
func orderedSoftNIC(order uint64, asked *uint64) provider.Entry {
	return provider.Entry{Name: "softnic", AllRanks: true, Seeded: true,
		Caps: func(provider.Config) nic.Caps { return softnic.New(softnic.Options{Order: order}).Caps() },
		Open: func(c provider.Config) (nic.Provider, error) {
			*asked = c.Order
			return softnic.New(softnic.Options{Order: order}), nil
		}}
}

// A plan that publishes with a write and then a notified write relies on write-after-write
// ordering: it opens (proven under the default targets' RC ordering), asks the provider for that
// ordering, runs where it is granted and is refused where it is not, naming it; under the
// unordered target it does not open. A plan that relies on no ordering runs on a NIC that
// grants none.
func TestInitOrder(t *testing.T) {
	const relies = "docs/examples/errors/race_order_notify.dag"
	_, err := Open(relies, Options{Target: "unordered"})
	var ce *CheckError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "only write-after-write ordering (FI_ORDER_WAW)")

	for _, c := range []struct {
		path  string
		order uint64
		ok    bool
	}{
		{relies, nic.OrderKnown | uint64(ir.OrderRC), true},
		{relies, nic.OrderKnown | uint64(ir.OrderWAW), true},
		{relies, 0, true}, // the NIC does not say
		{relies, nic.OrderKnown | uint64(ir.OrderSAS|ir.OrderSAW), false},
		{relies, nic.OrderKnown, false},
		{"plans/ring_allreduce.dag", nic.OrderKnown, true},
	} {
		p, err := Open(c.path, Options{HangTimeout: testHang})
		require.NoError(t, err, c.path)
		var asked uint64
		p.prov = orderedSoftNIC(c.order, &asked)
		coll, err := p.Init(context.Background(), nil)
		if c.path == relies {
			assert.Equal(t, uint64(ir.OrderWAW), asked, "Init asks for the ordering the plan relies on")
		} else {
			assert.Zero(t, asked)
		}
		if !c.ok {
			require.ErrorIs(t, err, ErrProvider, "%s on %#x", c.path, c.order)
			require.True(t, errors.Is(err, exec.ErrOrder), "%v", err)
			assert.Contains(t, err.Error(), "plan race_order_notify relies on write-after-write ordering (FI_ORDER_WAW) between the ops of a queue, which this NIC does not grant")
			assert.Contains(t, err.Error(), "FI_ORDER_WAW orders write wn (docs/examples/errors/race_order_notify.dag:9:4) after write w (docs/examples/errors/race_order_notify.dag:8:4) on queue q of rank 0")
			require.NoError(t, p.Close())
			continue
		}
		require.NoError(t, err, "%s on %#x", c.path, c.order)
		if c.path == relies {
			require.NoError(t, coll.Start())
			require.NoError(t, coll.Wait(context.Background()))
		}
		require.NoError(t, coll.Close())
		require.NoError(t, p.Close())
	}
}
