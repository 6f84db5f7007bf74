package exec_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/verify"
)

// Select picks engines and targets whatever ordering the NIC grants: what counts is what a
// plan relies on, which only a compiled plan says (CheckOrder).
func TestSelectIgnoresOrder(t *testing.T) {
	caps := softnic.New(softnic.Options{NoCrossChannel: true, Order: nic.OrderKnown}).Caps()
	for _, target := range []string{"generic", "unordered", "triggered-sockets"} {
		_, _, err := exec.Select(exec.Auto, target, caps)
		assert.NoError(t, err, target)
	}
}

// compileUnder loads a plan proven under the ordering ord and compiles it for target.
func compileUnder(t *testing.T, path string, src []byte, ord ir.Order, target string) *ir.Plan {
	t.Helper()
	g, err := planner.Load(t.Context(), path, src, nil, planner.Options{Verify: verify.Options{Order: ord}})
	require.NoError(t, err)
	tg, err := ir.LookupTarget(target)
	require.NoError(t, err)
	plan, err := planner.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	return plan
}

// A plan that relies on write-after-write ordering (a write, then a notified write that says the
// first is in place: docs/examples) is refused, by Prepare and by NewOp, on a NIC that says it
// does not grant it, naming the ordering, the two writes and the race; it runs on one that grants
// it, and on one that says nothing. A plan that relies on no ordering runs on a NIC that grants
// none.
func TestPrepareOrder(t *testing.T) {
	const path = "../docs/examples/errors/race_order_notify.dag"
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	relies := compileUnder(t, path, src, ir.OrderRC, "generic")
	require.NotNil(t, relies.Graph.Relies)
	require.Equal(t, ir.OrderWAW, relies.Graph.Relies.Order)

	free := compileUnder(t, "p.dag", []byte("plan p\nparam ranks = 2\nbuffer a f32[4] init rank\nbuffer b f32[4] remote_write\nqueue q to (rank + 1) % ranks peer q\nop w = write q a to b\n"), ir.OrderRC, "generic")
	require.Nil(t, free.Graph.Relies)

	for _, c := range []struct {
		name  string
		plan  *ir.Plan
		order uint64
		ok    bool
	}{
		{"relies, NIC grants SAS|SAW", relies, nic.OrderKnown | uint64(ir.OrderSAS|ir.OrderSAW), false},
		{"relies, NIC grants none", relies, nic.OrderKnown, false},
		{"relies, NIC grants WAW", relies, nic.OrderKnown | uint64(ir.OrderWAW), true},
		{"relies, NIC grants RC", relies, nic.OrderKnown | uint64(ir.OrderRC), true},
		{"relies, NIC does not say", relies, 0, true},
		{"free, NIC grants none", free, nic.OrderKnown, true},
		{"free, NIC grants RC", free, nic.OrderKnown | uint64(ir.OrderRC), true},
	} {
		nicOpts := softnic.Options{NoCrossChannel: true, Order: c.order}
		s, err := exec.Prepare(context.Background(), c.plan, softnic.New(nicOpts), exec.Options{})
		op, opErr := exec.NewOp(c.plan, softnic.New(nicOpts), exec.Options{})
		if c.ok {
			require.NoError(t, err, c.name)
			require.NoError(t, opErr, c.name)
			_, err = s.Run(context.Background(), 1)
			require.NoError(t, err, c.name)
			require.NoError(t, s.Close())
			require.NoError(t, op.Close())
			continue
		}
		for _, err := range []error{err, opErr} {
			require.ErrorIs(t, err, exec.ErrOrder, c.name)
			msg := err.Error()
			assert.Contains(t, msg, "plan race_order_notify relies on write-after-write ordering (FI_ORDER_WAW) between the ops of a queue, which this NIC does not grant", c.name)
			assert.Contains(t, msg, "FI_ORDER_WAW orders write wn (../docs/examples/errors/race_order_notify.dag:9:", c.name)
			assert.Contains(t, msg, "after write w (../docs/examples/errors/race_order_notify.dag:8:", c.name)
			assert.Contains(t, msg, "without it, race on rank", c.name)
		}
	}
}
