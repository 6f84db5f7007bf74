package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
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

// TestCheckExpectsStops: the run from distinct inits that checks a run's postconditions takes
// the command's context. Live, the postcondition holds; cancelled, checkExpects returns the
// context's cause itself (the interruption, which main reports alone), without a verdict.
// Before, that run got context.Background and a signal could not stop it.
func TestCheckExpectsStops(t *testing.T) {
	t.Parallel()
	g, err := planner.Load(t.Context(), "ring.dag", mustRead(t, "../../plans/ring_allreduce.dag"), map[string]int64{"ranks": 4, "n": 16}, planner.Options{})
	require.NoError(t, err)
	target, err := ir.LookupTarget("connectx")
	require.NoError(t, err)
	plan, err := lower.Compile(t.Context(), g, target)
	require.NoError(t, err)
	ref, err := exec.Reference(g)
	require.NoError(t, err)
	last, err := exec.Run(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Offload, Iters: 1, Reference: ref})
	require.NoError(t, err)

	held, err := checkExpects(context.Background(), g, exec.Offload, target, last)
	require.NoError(t, err)
	require.Len(t, held, 1)
	assert.True(t, held[0].Held, held[0].Detail)

	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("interrupted")
	cancel(cause)
	held, err = checkExpects(ctx, g, exec.Offload, target, last)
	assert.Same(t, cause, err)
	assert.Nil(t, held)
}
