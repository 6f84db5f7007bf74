package exec_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/internal/nictest"
	"github.com/coredag/coredag/ir"
)

// A threshold one too high never fires: the run hangs and names the counter, its value, the
// threshold and the op expected to raise it.
func TestTriggeredThresholdOffByOneHangs(t *testing.T) {
	g, _ := loadPlan(t, "../plans/ring_allreduce.dag", 4)
	plan, err := compileFor(g, "triggered")
	require.NoError(t, err)
	work := plan.Ranks[1].Trig.Work
	hit := false
	for i := range work {
		if work[i].Kind == ir.TrigOp && work[i].Name == "tx[1]" {
			work[i].Threshold++
			hit = true
		}
	}
	require.True(t, hit)
	_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Offload, Iters: 1})
	var h *exec.HangError
	require.True(t, errors.As(err, &h), "%v", err)
	assert.Contains(t, err.Error(), "join.tx[1]")
	assert.Contains(t, err.Error(), "tx[1]")
}

// Dropping one counter-add of a join leaves the join short: the run hangs.
func TestTriggeredDroppedCounterAddHangs(t *testing.T) {
	g, _ := loadPlan(t, "../plans/ring_allreduce.dag", 4)
	plan, err := compileFor(g, "triggered")
	require.NoError(t, err)
	tr := plan.Ranks[2].Trig
	for i := range tr.Work {
		if tr.Work[i].Kind == ir.TrigAdd && tr.Counters[tr.Work[i].Target].Kind == ir.CntJoin {
			tr.Work = append(tr.Work[:i], tr.Work[i+1:]...)
			break
		}
	}
	_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Offload, Iters: 1})
	var h *exec.HangError
	require.True(t, errors.As(err, &h), "%v", err)
}

// A triggered run whose op fails cancels the triggered work still waiting: after the failed run
// (before the session closes, which would drop it anyway) no NIC context holds pending work.
func TestTriggeredFailureCancelsPendingWork(t *testing.T) {
	g, _ := loadPlan(t, "../plans/ring_allreduce.dag", 4)
	plan, err := compileFor(g, "triggered")
	require.NoError(t, err)
	g.Buffers[0].Access = 0 // registered without remote write: the first write into it fails
	p := &nictest.Opened{Provider: softnic.New(softnic.Options{})}
	s, err := exec.Prepare(context.Background(), plan, p, exec.Options{Engine: exec.Offload, Reference: exec.NewMemory(g)})
	require.NoError(t, err)
	defer s.Close()
	idle := map[int]int{0: 0, 1: 0, 2: 0, 3: 0}
	require.Equal(t, idle, p.PendingTriggers(), "nothing is handed to the NIC before the run")
	_, err = s.Run(context.Background(), 1)
	var oe *exec.OpError
	require.ErrorAs(t, err, &oe, "%v", err)
	assert.Contains(t, err.Error(), "remote access error")
	assert.Equal(t, idle, p.PendingTriggers(), "triggered work left after the failure")
}
