package replay_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/replay"
)

// looks is a context that counts the looks at it (Err), and is cancelled from the n-th on
// (never when n is 0): where in a replay a cancellation comes does not depend on timing.
type looks struct {
	context.Context
	n     int64
	count atomic.Int64
}

func (c *looks) Err() error {
	if k := c.count.Add(1); c.n > 0 && k >= c.n {
		return context.Canceled
	}
	return nil
}

// TestCheckStops: a replay looks at its context all along its checks, not only as it starts:
// cancelled at its first look, half way through its looks or at its last, Check returns the
// context's cause, and no verdict on the plan. The ring at 64 ranks makes the progress check
// look within its iterations; a triggered plan's replay has checks of its own. Before, nothing
// stopped a replay, which `compile` runs after the listing on plans of up to a million ops.
func TestCheckStops(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../plans/ring_allreduce.dag")
	require.NoError(t, err)
	for target, ranks := range map[string]int64{"connectx": 64, "triggered": 16} {
		g, err := planner.Load(t.Context(), "ring_allreduce.dag", src, map[string]int64{"ranks": ranks}, planner.Options{})
		require.NoError(t, err)
		p := compile(t, g, target)
		all := &looks{Context: context.Background()}
		require.NoError(t, replay.Check(all, p, replay.Options{}), target)
		n := all.count.Load()
		require.Greater(t, n, ranks+3, "%s: a look as it starts, between ranks and between the checks", target)
		for _, at := range []int64{1, n / 2, n} {
			err := replay.Check(&looks{Context: context.Background(), n: at}, p, replay.Options{})
			assert.Equal(t, context.Canceled, err, "%s: cancelled at look %d of %d", target, at, n)
		}
	}
}
