package prove_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/planner/prove"
	"github.com/coredag/coredag/planner/verify"
)

// TestProofStops: a proof whose context is cancelled stops its replay (Run's State says so) and
// reports nothing, not even the postcondition the plan breaks: the memory it would judge is
// not the plan's. The replay looks at the context every few thousand ops: the ring at 64 ranks
// has 20160.
func TestProofStops(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../plans/ring_allreduce.dag")
	require.NoError(t, err)
	wrong := strings.Replace(string(src), "expect allreduce sum data", "expect allreduce max data", 1)
	require.NotEqual(t, string(src), wrong)
	g, ok := elaborated(t, "ring.dag", []byte(wrong), map[string]int64{"ranks": 64, "n": 4})
	require.True(t, ok)
	errs, o := verify.CheckOrder(t.Context(), g)
	require.Empty(t, errs)

	require.Len(t, prove.Check(t.Context(), g, o, prove.Options{}), 1, "the plan sums, it does not take the max")
	assert.False(t, prove.Run(t.Context(), g, o, prove.Options{}).Stopped())

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	assert.True(t, prove.Run(ctx, g, o, prove.Options{}).Stopped())
	assert.Empty(t, prove.Check(ctx, g, o, prove.Options{}))
}
