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
// context of a preparation does not outlive it: the Prepared compiles once it is cancelled.
// Before, nothing stopped a lowering begun beside the checks, and `coredag check` waited for it;
// nor the compilation of a large plan for predict.
func TestLoweringStops(t *testing.T) {
	t.Parallel()
	g := load(t, "../../plans/ring_allreduce.dag", map[string]int64{"ranks": 128})
	tg, err := ir.LookupTarget("connectx")
	require.NoError(t, err)
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("interrupted")

	require.NoError(t, lower.CheckLimitsContext(ctx, g, tg))
	pr := lower.PrepareEachContext(ctx, g, tg)
	require.NoError(t, pr.CheckLimitsContext(ctx))
	cancel(cause)
	assert.Same(t, cause, pr.CheckLimitsContext(ctx), "stopped between the ranks")
	whole, err := lower.Compile(g, tg)
	require.NoError(t, err)
	p, err := pr.CompileEach(nil)
	require.NoError(t, err)
	assert.Equal(t, whole.Stats, p.Stats)

	assert.Same(t, cause, lower.CheckLimitsContext(ctx, g, tg))
	_, err = lower.CompileContext(ctx, g, tg)
	assert.Same(t, cause, err)
	_, err = lower.PrepareEachContext(ctx, g, tg).CompileEach(nil)
	assert.Same(t, cause, err, "stopped ordering the events")
}
