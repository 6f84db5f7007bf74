package replay_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/stoptest"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/replay"
)

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
		all := stoptest.CancelAt(0)
		require.NoError(t, replay.Check(all, p, replay.Options{}), target)
		n := all.Count()
		require.Greater(t, n, ranks+3, "%s: a look as it starts, between ranks and between the checks", target)
		for _, at := range []int64{1, n / 2, n} {
			err := replay.Check(stoptest.CancelAt(at), p, replay.Options{})
			assert.Equal(t, context.Canceled, err, "%s: cancelled at look %d of %d", target, at, n)
		}
	}
}
