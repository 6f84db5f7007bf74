package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/prove"
	"github.com/coredag/coredag/planner/verify"
)

// An allgather whose blocks are published the RC way: a write, then a notified write whose
// arrival says the first is in place. Under an ordering with write-after-write the plan is
// race-free and its postcondition is proven (on an order of events that agrees with the
// ordering); the lints are told what it relies on. Without, it races.
const publishAllgather = `plan p
param ranks = 2
param n = 4
buffer data f32[n] init rank * 10 + i
buffer inbox f32[n] remote_write
buffer out f32[2 * n]
queue q to (rank + 1) % ranks peer q
let other = (rank + 1) % ranks
op w      = write q data[0 : n / 2] to inbox[0 : n / 2]
op wn     = write q data[n / 2 : n] to inbox[n / 2 : n] notify
op got    = recv q
op mine   = copy data to out[rank * n : (rank + 1) * n]
op theirs = copy inbox to out[other * n : (other + 1) * n] after got
expect allgather out from data
`

func TestLoadUnderOrdering(t *testing.T) {
	t.Parallel()
	var lints diag.List
	_, err := Load(t.Context(), "p.dag", []byte(publishAllgather), nil, Options{
		Verify: verify.Options{Order: ir.OrderRC, Target: "connectx"},
		Lint:   func(l diag.List) { lints = l },
	})

	require.NoError(t, err)
	require.NotEmpty(t, lints)
	assert.Contains(t, lints[0].Msg, "relies on write-after-write ordering (FI_ORDER_WAW)")

	_, err = Load(t.Context(), "p.dag", []byte(publishAllgather), nil, Options{Verify: verify.Options{Target: "unordered"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "only write-after-write ordering (FI_ORDER_WAW)")
}

// TestLoadUnderOrderingBudget: the proof replayed in an order that agrees with the target's
// ordering keeps within the memory budget like the first one.
func TestLoadUnderOrderingBudget(t *testing.T) {
	t.Parallel()
	_, err := Load(t.Context(), "p.dag", []byte(publishAllgather), nil, Options{
		Verify: verify.Options{Order: ir.OrderRC, Target: "connectx"},
		Prove:  prove.Options{Budget: budget.Budget{Bytes: 1 << 10, From: "--mem"}},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "expect allgather out from data: cannot prove within the memory budget: the proof's symbolic values need more than 512 bytes, half the memory budget of 1 KiB (set with --mem)")
}

// The Graph carries what the plan relies on: the fewest orderings (write-after-write alone,
// though the target gives seven), the two writes it orders and the race without it. A plan that
// relies on none carries nothing, and nor does one checked without an ordering.
func TestLoadRelies(t *testing.T) {
	t.Parallel()
	for _, ord := range []ir.Order{ir.OrderRC, ir.OrderStrict, ir.OrderWAW | ir.OrderSAS} {
		g, err := Load(t.Context(), "p.dag", []byte(publishAllgather), nil, Options{Verify: verify.Options{Order: ord}})
		require.NoError(t, err, "%v", ord)
		require.NotNil(t, g.Relies, "%v", ord)
		assert.Equal(t, ir.OrderWAW, g.Relies.Order, "%v", ord)
		require.Len(t, g.Relies.Uses, 1)
		u := g.Relies.Uses[0]
		require.NotEqual(t, ir.OpID(ir.None), u.Prev)
		require.NotEqual(t, ir.OpID(ir.None), u.Next)
		assert.Equal(t, "w", g.Ops[u.Prev].Name)
		assert.Equal(t, "wn", g.Ops[u.Next].Name)
		assert.Equal(t, g.Ops[u.Prev].Rank, g.Ops[u.Next].Rank)
		assert.Contains(t, u.Race, "race on rank 1's inbox[0:2]: write w on rank 0 writes it, and copy theirs on rank 1 reads it")
		d := g.Relies.Explain(g)
		assert.Contains(t, d, "FI_ORDER_WAW orders write wn (p.dag:10:4) after write w (p.dag:9:4) on queue q of rank 0: without it, race on rank 1's inbox[0:2]")
	}

	g, err := Load(t.Context(), "p.dag", []byte(publishAllgather), nil, Options{Verify: verify.Options{Order: ir.OrderSAS}})
	require.Error(t, err)
	assert.Nil(t, g.Relies)

	const ordered = `plan p
param ranks = 2
buffer a f32[4] init rank
buffer b f32[4] remote_write
queue q to (rank + 1) % ranks peer q
op w = write q a to b
`
	g, err = Load(t.Context(), "p.dag", []byte(ordered), nil, Options{Verify: verify.Options{Order: ir.OrderStrict}})
	require.NoError(t, err)
	assert.Nil(t, g.Relies)
}
