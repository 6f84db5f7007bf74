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
	_, err := Load("p.dag", []byte(publishAllgather), nil, Options{
		Verify: verify.Options{Order: ir.OrderRC, Target: "connectx"},
		Lint:   func(l diag.List) { lints = l },
	})

	require.NoError(t, err)
	require.NotEmpty(t, lints)
	assert.Contains(t, lints[0].Msg, "relies on write-after-write ordering (FI_ORDER_WAW)")

	_, err = Load("p.dag", []byte(publishAllgather), nil, Options{Verify: verify.Options{Target: "unordered"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "only write-after-write ordering (FI_ORDER_WAW)")
}

// TestLoadUnderOrderingBudget: the proof replayed in an order that agrees with the target's
// ordering keeps within the memory budget like the first one.
func TestLoadUnderOrderingBudget(t *testing.T) {
	t.Parallel()
	_, err := Load("p.dag", []byte(publishAllgather), nil, Options{
		Verify: verify.Options{Order: ir.OrderRC, Target: "connectx"},
		Prove:  prove.Options{Budget: budget.Budget{Bytes: 1 << 10, From: "--mem"}},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "expect allgather out from data: cannot prove within the memory budget: the proof's symbolic values need more than 512 bytes, half the memory budget of 1 KiB (set with --mem)")
}
