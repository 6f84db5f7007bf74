package lower_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/lower"
)

// TestLoweringStops: a lowering whose context is cancelled stops with the context's cause,
// while it orders the events (the ring at 128 ranks has 162560 of them: the order looks at the
// context every 65536) or between the ranks it lowers; a live context changes nothing, and the
// context of a preparation does not outlive it: the Prepared compiles under its own once the
// preparation's is cancelled.
// Before, nothing stopped a lowering begun beside the checks, and `coredag check` waited for it;
// nor the compilation of a large plan for predict.
func TestLoweringStops(t *testing.T) {
	t.Parallel()
	g := load(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 128})
	tg, err := ir.LookupTarget("connectx")
	require.NoError(t, err)
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("interrupted")

	require.NoError(t, lower.CheckLimits(ctx, g, tg))
	pr := lower.PrepareEach(ctx, g, tg)
	require.NoError(t, pr.CheckLimits(ctx))
	again := lower.PrepareEach(ctx, g, tg)
	cancel(cause)
	assert.Same(t, cause, pr.CheckLimits(ctx), "stopped between the ranks")
	_, err = again.CompileEach(ctx, nil)
	assert.Same(t, cause, err, "stopped between the ranks")
	whole, err := lower.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	p, err := pr.CompileEach(t.Context(), nil)
	require.NoError(t, err)
	assert.Equal(t, whole.Stats, p.Stats)

	assert.Same(t, cause, lower.CheckLimits(ctx, g, tg))
	_, err = lower.Compile(ctx, g, tg)
	assert.Same(t, cause, err)
	_, err = lower.CompileEach(ctx, g, tg, nil)
	assert.Same(t, cause, err)
	_, err = lower.PrepareEach(ctx, g, tg).CompileEach(t.Context(), nil)
	assert.Same(t, cause, err, "stopped ordering the events")
}
