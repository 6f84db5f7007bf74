package exec_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
)

// orderedNIC is a software NIC that says it grants the ordering o (msg_order bits).
type orderedNIC struct {
	*softnic.NIC
	order ir.Order
}

func (n orderedNIC) Caps() nic.Caps {
	c := n.NIC.Caps()
	c.Order = nic.OrderKnown | uint64(n.order)
	return c
}

// A NIC that grants less ordering than a target's plans were proven under is refused, by Select
// and by Prepare, naming what it lacks; one that grants it, or does not say, is not.
func TestSelectOrder(t *testing.T) {
	plain := softnic.New(softnic.Options{NoCrossChannel: true}).Caps()
	for _, c := range []struct {
		target string
		order  uint64
		ok     bool
	}{
		{"generic", 0, true}, // the NIC does not say
		{"generic", nic.OrderKnown | uint64(ir.OrderRC), true},
		{"generic", nic.OrderKnown | uint64(ir.OrderStrict), true},
		{"generic", nic.OrderKnown | uint64(ir.OrderSAS|ir.OrderWAW), false},
		{"generic", nic.OrderKnown, false},
		{"unordered", nic.OrderKnown, true},
		{"triggered-cxi", nic.OrderKnown | uint64(ir.OrderSAS|ir.OrderWAW), true},
		{"triggered-sockets", nic.OrderKnown | uint64(ir.OrderRC), false},
	} {
		caps := plain
		caps.Order = c.order
		_, _, err := exec.Select(exec.Auto, c.target, caps)
		if c.ok {
			assert.NoError(t, err, "%s on %#x", c.target, c.order)
			continue
		}
		require.ErrorIs(t, err, exec.ErrOrder, "%s on %#x", c.target, c.order)
		assert.Contains(t, err.Error(), "FI_ORDER_", "%s on %#x", c.target, c.order)
	}

	src := []byte("plan p\nparam ranks = 2\nbuffer a f32[4] init rank\nbuffer b f32[4] remote_write\nqueue q to (rank + 1) % ranks peer q\nop w = write q a to b\n")
	g, err := planner.Load("p.dag", src, nil, planner.Options{})
	require.NoError(t, err)
	target, err := ir.LookupTarget("generic")
	require.NoError(t, err)
	plan, err := planner.Compile(g, target)
	require.NoError(t, err)
	p := orderedNIC{softnic.New(softnic.Options{NoCrossChannel: true}), ir.OrderSAS}
	_, err = exec.Prepare(context.Background(), plan, p, exec.Options{})
	require.ErrorIs(t, err, exec.ErrOrder)
	assert.Contains(t, err.Error(), "FI_ORDER_SAW")
	p.order = ir.OrderRC
	s, err := exec.Prepare(context.Background(), plan, p, exec.Options{})
	require.NoError(t, err)
	s.Close()
}
