package exec_test

import (
	"context"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/lower"
)

// A session of a triggered plan runs no more iterations than its counters hold: the counters are
// never reset, so the limit counts the session's earlier Runs too, and the refusal comes before
// anything runs.
func TestTriggeredSessionCounterLimit(t *testing.T) {
	g, _ := loadPlan(t, "../plans/ring_allreduce.dag", 4)
	tg, err := ir.LookupTarget("triggered")
	require.NoError(t, err)
	prof := *tg.Trigger
	prof.MaxCounter = 18 // the send counters grow by 6 per iteration: 3 iterations fit
	tg.Trigger = &prof
	plan, err := lower.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	s, err := exec.Prepare(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Offload})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Run(context.Background(), 4)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at most 3 iterations fit")
	res, err := s.Run(context.Background(), 2)
	require.NoError(t, err)
	assert.True(t, res.OK)
	_, err = s.Run(context.Background(), 2)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "4 iterations would overflow counter right.sq.scnt on rank 0")
	assert.Contains(t, err.Error(), "this session has run 2")
	res, err = s.Run(context.Background(), 1)
	require.NoError(t, err, "a refused Run leaves the session usable")
	assert.True(t, res.OK)
}

// An Op of a triggered plan refuses the start its counters cannot hold, with the same words as
// a session, and its starts before that run (the bound is worked out once, when the Op is made).
func TestOpCounterLimit(t *testing.T) {
	g, _ := loadPlan(t, "../plans/ring_allreduce.dag", 4)
	tg, err := ir.LookupTarget("triggered")
	require.NoError(t, err)
	prof := *tg.Trigger
	prof.MaxCounter = 18 // the send counters grow by 6 per iteration: 3 iterations fit
	tg.Trigger = &prof
	plan, err := lower.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	op, err := exec.NewOp(plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Offload})
	require.NoError(t, err)
	defer op.Close()
	data, ok := exec.BufferByName(g, "data")
	require.True(t, ok)
	for r := 0; r < g.Ranks; r++ {
		mem := make([]byte, g.Buffers[data].Bytes())
		require.NoError(t, op.Bind(r, data, exec.Region{Addr: unsafe.Pointer(&mem[0]), Len: len(mem)}))
		defer runtime.KeepAlive(mem)
	}
	for i := 0; i < 3; i++ {
		require.NoError(t, op.Start(), "start %d", i+1)
		require.NoError(t, op.Wait(context.Background()))
	}
	err = op.Start()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "4 iterations would overflow counter right.sq.scnt on rank 0")
	assert.Contains(t, err.Error(), "at most 3 iterations fit")
}
