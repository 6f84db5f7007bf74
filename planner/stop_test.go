package planner

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
)

// broadcastReads sends one buffer n times from rank 0 to rank 1: the race sweep keeps every
// send's read in one antichain and searches each against the others, a minute and more at n =
// 20000 (40000 ops) where elaborating the plan takes milliseconds.
const broadcastReads = `plan reads
param ranks = 2
param n = 20000
buffer b f32[4]
buffer d f32[4 * n]
queue q to 1 - rank peer q depth 32768
if rank == 0 {
  for i in 0 .. n { op s[i] = send q b }
} else {
  for i in 0 .. n { op r[i] = recv q d[4 * i : 4 * i + 4] }
}
`

// TestLoadStops: Load's context cancelled while the checks run (from Beside, which starts with
// the race search once the plan is free of deadlocks) stops Load within moments, with the
// context's cause and no Graph, and cancels Beside's context too. Before, Load ran the race
// search to its end, and `coredag check` could not be interrupted.
func TestLoadStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("interrupted")
	var cancelled time.Time
	besideStopped := false
	g, err := Load(ctx, "reads.dag", []byte(broadcastReads), nil, Options{Beside: func(bctx context.Context, g *ir.Graph) {
		cancelled = time.Now()
		cancel(cause)
		select {
		case <-bctx.Done():
			besideStopped = true
		case <-time.After(10 * time.Second):
		}
	}})
	took := time.Since(cancelled)
	assert.Same(t, cause, err)
	assert.Nil(t, g)
	assert.True(t, besideStopped, "Beside's context follows Load's")
	assert.Less(t, took, 2*time.Second, "Load returned %v after the cancellation", took)
}

// TestLoadStopsBeforeChecks: a context cancelled before Load stops it at elaboration, and its
// cause is the error, not the plan's mistakes.
func TestLoadStopsBeforeChecks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("interrupted")
	cancel(cause)
	racy := "plan p\nbuffer a i32[8]\nop x = copy a[0:4] to a[4:8]\nop y = copy a[4:8] to a[0:4]\n"
	_, err := Load(t.Context(), "racy.dag", []byte(racy), nil, Options{})
	require.Error(t, err)
	g, err := Load(ctx, "racy.dag", []byte(racy), nil, Options{})
	assert.Same(t, cause, err)
	assert.Nil(t, g)
}

// TestLoadStopsAfterChecks: a cancellation that comes once the checks are done, while Beside
// still works, makes Load return the cause, not a Graph whose Beside work was cut short.
func TestLoadStopsAfterChecks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("interrupted")
	checked := make(chan struct{})
	src, err := os.ReadFile("../plans/ring_allreduce.dag")
	require.NoError(t, err)
	g, err := Load(ctx, "ring_allreduce.dag", src, nil, Options{
		Lint: func(diag.List) { close(checked) }, // after the checks, before Load's return
		Beside: func(bctx context.Context, g *ir.Graph) {
			select {
			case <-checked:
			case <-time.After(10 * time.Second):
			}
			cancel(cause)
		}})
	assert.Same(t, cause, err)
	assert.Nil(t, g)
}
