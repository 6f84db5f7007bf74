package exec_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
)

// TestOpWaitInline: an Op that runs every rank of the plan runs a start at Wait on the caller's
// goroutine when Wait's ctx cannot end (no hand-off to the background goroutine); a Test, or a
// Wait whose ctx can end, hands it to the background. Every way completes the iteration.
func TestOpWaitInline(t *testing.T) {
	plan, err := compileFor(exec.RingAllreduceForTest(3, 4), engineCases[0].target)
	require.NoError(t, err)
	op, err := exec.NewOp(plan, softnic.New(softnic.Options{}), exec.Options{Engine: engineCases[0].engine})
	require.NoError(t, err)
	defer op.Close()

	require.NoError(t, op.Start())
	require.NoError(t, op.Wait(context.Background()))
	assert.False(t, op.HandedForTest(), "Wait(context.Background()) ran the start inline")

	require.NoError(t, op.Start())
	for done := false; !done; {
		done, err = op.Test()
		require.NoError(t, err)
	}
	assert.True(t, op.HandedForTest(), "Test hands the start to the background")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, op.Start())
	require.NoError(t, op.Wait(ctx))
	assert.True(t, op.HandedForTest(), "a Wait whose ctx can end does not run the start inline")

	require.NoError(t, op.Start())
	require.NoError(t, op.Wait(context.Background()))
	assert.False(t, op.HandedForTest())
	assert.Equal(t, 4, op.Starts())
}
