package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A write, then a send on one queue: clean on the RC targets, with a warning naming the ordering
// relied on without --target; a race on the targets that lack it.
func TestCheckTargetOrdering(t *testing.T) {
	t.Parallel()
	const plan = "docs/examples/errors/race_order_send.dag"
	code, stdout, stderr := coredag(t, "", "check", plan)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, ": ok")
	assert.Contains(t, stderr, "warning: the plan relies on send-after-write ordering (FI_ORDER_SAW) between the ops of a queue, which `triggered-cxi` and `unordered` do not give")

	for _, target := range []string{"connectx", "generic", "triggered-sockets"} {
		code, _, stderr := coredag(t, "", "check", "--target", target, plan)
		assert.Equal(t, exitOK, code, "%s: %s", target, stderr)
	}
	for _, target := range []string{"unordered", "triggered-cxi"} {
		code, _, stderr := coredag(t, "", "check", "--target", target, plan)
		assert.Equal(t, exitFail, code, target)
		assert.Contains(t, stderr, "race on rank 0's inbox", target)
		assert.Contains(t, stderr, "only send-after-write ordering (FI_ORDER_SAW) between the ops of a queue would order them, which target `"+target+"` does not give", target)
	}

	code, stdout, _ = coredag(t, "", "check", "--json", plan)
	require.Equal(t, exitOK, code)
	var reports []checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &reports), stdout)
	require.Len(t, reports, 1)
	require.NotEmpty(t, reports[0].Warnings)
	assert.Equal(t, "race", string(reports[0].Warnings[0].Code))
	assert.Contains(t, reports[0].Warnings[0].Message, "FI_ORDER_SAW")

	// A plan that relies on no ordering gets no such warning.
	code, _, stderr = coredag(t, "", "check", "plans/ring_allreduce.dag")
	require.Equal(t, exitOK, code, stderr)
	assert.NotContains(t, stderr, "relies on")
}

// targets shows each target's ordering, in text and JSON.
func TestTargetsOrdering(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := coredag(t, "", "targets")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "ORDER (FI_ORDER_*)")
	assert.Contains(t, stdout, "unordered: ")
	assert.Contains(t, stdout, "  order: WAW SAS; from the cxi provider's msg_order")

	code, stdout, stderr = coredag(t, "", "targets", "--json")
	require.Equal(t, exitOK, code, stderr)
	var ts []targetJSON
	require.NoError(t, json.Unmarshal([]byte(stdout), &ts), stdout)
	got := map[string][]string{}
	for _, x := range ts {
		got[x.Name] = x.Order
		assert.NotEmpty(t, x.OrderSource, x.Name)
	}
	assert.Equal(t, []string{"FI_ORDER_RAR", "FI_ORDER_RAW", "FI_ORDER_RAS", "FI_ORDER_WAW", "FI_ORDER_WAS", "FI_ORDER_SAW", "FI_ORDER_SAS"}, got["connectx"])
	assert.Equal(t, []string{"FI_ORDER_WAW", "FI_ORDER_SAS"}, got["triggered-cxi"])
	assert.Equal(t, []string{}, got["unordered"])
}

// check --json says which orderings a plan relies on; run proves the races under the default
// targets' ordering (RC) and runs a plan that relies on write-after-write, and refuses it with
// --target unordered, whose ordering does not give it.
func TestRunReliesOnOrdering(t *testing.T) {
	t.Parallel()
	const plan = "docs/examples/errors/race_order_notify.dag"
	code, stdout, stderr := coredag(t, "", "check", "--json", plan, "plans/ring_allreduce.dag")
	require.Equal(t, exitOK, code, stderr)
	var reports []checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &reports), stdout)
	require.Len(t, reports, 2)
	assert.Equal(t, []string{"FI_ORDER_WAW"}, reports[0].ReliesOn)
	assert.Empty(t, reports[1].ReliesOn)
	assert.NotContains(t, stdout, `"relies_on": null`)

	for _, engine := range []string{"poll", "offload"} {
		code, stdout, stderr = coredag(t, "", "run", "--engine", engine, plan)
		assert.Equal(t, exitOK, code, "%s: %s", engine, stderr)
		assert.Contains(t, stdout, "PASS", engine)
	}
	code, _, stderr = coredag(t, "", "run", "--target", "unordered", plan)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "only write-after-write ordering (FI_ORDER_WAW) between the ops of a queue would order them, which target `unordered` does not give")
}
