package exec_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
)

// TestOffloadRefusesTooManyWorkQueues: the offload engine's work request IDs number a rank's
// work queues in 16 bits. A plan with more on a rank is refused when the engine is set up, with
// the count and what to run instead, rather than run with failures and stalls blamed on the wrong
// op, queue and rank. (A plan that truly has 65,537 work queues takes half a minute to set up:
// this one pads a small plan's rank 0 with empty work queues, which no QP serves.)
func TestOffloadRefusesTooManyWorkQueues(t *testing.T) {
	g := exec.FaultGraphForTest("perm")
	plan, err := compileFor(g, "connectx")
	require.NoError(t, err)
	rp := &plan.Ranks[0]
	for k := len(rp.Queues); k <= 1<<16; k++ {
		rp.Queues = append(rp.Queues, ir.WorkQueue{Name: fmt.Sprintf("pad%d", k), Kind: ir.SendQueue, Queue: ir.None, CQ: -1})
	}
	_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Offload, Reference: exec.NewMemory(g)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the plan has 65,537 work queues on rank 0, more than the offload engine's 65,536")
	assert.Contains(t, err.Error(), "--engine poll")
}
