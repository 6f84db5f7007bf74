package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckCountsProvenPostconditions: a clean plan's line says how many postconditions check
// proved, and only when it has some.
func TestCheckCountsProvenPostconditions(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := coredag(t, "", "check", "-p", "ranks=8", "plans/pairwise_alltoall.dag", "plans/cas_handoff.dag")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "plans/pairwise_alltoall.dag: ok (plan pairwise_alltoall, 8 ranks, 120 ops, 2 postconditions proven)\n")
	assert.Contains(t, stdout, "plans/cas_handoff.dag: ok (plan cas_handoff, 8 ranks, 22 ops, 3 postconditions proven)\n")
}

// TestRunChecksPostconditions: run lists the postconditions it checked on values, in text and
// JSON.
func TestRunChecksPostconditions(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := coredag(t, "", "run", "-p", "ranks=3", "plans/notify_scatter.dag")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, " RNR retries\n  held: expect scatter dst from src root 0\n  held: expect unchanged src\n")

	code, stdout, stderr = coredag(t, "", "run", "--json", "-p", "ranks=3", "plans/ring_allreduce.dag")
	require.Equal(t, exitOK, code, stderr)
	var rep struct {
		OK      bool `json:"ok"`
		Expects []struct {
			Expect string `json:"expect"`
			Held   bool   `json:"held"`
		} `json:"expects"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	assert.True(t, rep.OK)
	require.Len(t, rep.Expects, 1)
	assert.Equal(t, "expect allreduce sum data", rep.Expects[0].Expect)
	assert.True(t, rep.Expects[0].Held)
}
