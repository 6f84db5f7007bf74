package exec_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
)

// TestPollFaults runs graphs the checker would reject: each run must end (no hang, no panic)
// with an error that names the op, its rank and queue, and its source line.
func TestPollFaults(t *testing.T) {
	tests := []struct {
		kind string
		hang bool
		want []string
	}{
		{"perm", false, []string{`perm.dag:3:1: op w on rank 0, queue q: completed with status remote access error on CQ q.scq`}},
		{"oob", false, []string{`oob.dag:4:1: op rd on rank 1, queue q: completed with status remote access error`}},
		{"unmatched", true, []string{
			`rank 0: post of send lonely on queue q is stuck: CQ q.scq reached 0 of 1 completions; expected from lonely on rank 0 \(unmatched.dag:2:1\)`,
			`no matching receive posted at rank 1`}},
		{"deadlock", true, []string{
			`rank 0: unposted send tx on queue q is stuck: CQ q.scq reached 0 of 1 completions; expected from tx on rank 0 \(deadlock.dag:3:1\), which waits for rx on rank 0 \(deadlock.dag:2:1\)`,
			`rank 1: posted recv rx on queue q is stuck`}},
	}
	for _, tt := range tests {
		for _, seed := range []uint64{0, 1, 2} {
			// Odd seeds run with QP triggers: a failed or missing completion must disarm them
			// and leave the same diagnosis.
			t.Run(fmt.Sprintf("%s/seed=%d", tt.kind, seed), func(t *testing.T) {
				g := exec.FaultGraphForTest(tt.kind)
				nic := softnic.New(softnic.Options{NoCrossChannel: true, Seeded: seed != 0, Seed: seed, Triggers: seed%2 == 1})
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				// The checker rejects these graphs (the compiler, the deadlock's cycle) and so does the
				// reference: run a generic plan with the graph's dependencies, and a placeholder
				// reference, so the engine meets the faults at run time.
				plan, err := exec.GenericPlanForTest(g)
				require.NoError(t, err)
				_, err = exec.Run(ctx, plan, nic, exec.Options{Engine: exec.Poll, Reference: exec.NewMemory(g), HangTimeout: time.Second})
				require.Error(t, err)
				var oe *exec.OpError
				var he *exec.HangError
				if tt.hang {
					require.ErrorAs(t, err, &he, "%v", err)
					assert.True(t, errors.Is(err, exec.ErrHang))
				} else {
					require.ErrorAs(t, err, &oe, "%v", err)
				}
				for _, w := range tt.want {
					assert.Regexp(t, w, err.Error())
				}
			})
		}
	}
}

// TestPollFaultCause: ag[0] of the ring allreduce fails for want of remote_write, which flushes
// the receives its peer posted (and, with QP triggers, disarms the ag[1] armed on them). The run
// must end with the write's error, the cause, not with a flushed receive.
func TestPollFaultCause(t *testing.T) {
	for _, trig := range []bool{false, true} {
		g, _ := loadPlan(t, "../plans/ring_allreduce.dag", 3, map[string]int64{"n": 4})
		plan, err := compileFor(g, "generic")
		require.NoError(t, err)
		g.Buffers[0].Access = 0 // registered without remote write
		nic := softnic.New(softnic.Options{NoCrossChannel: true, Triggers: trig})
		_, err = exec.Run(context.Background(), plan, nic, exec.Options{Engine: exec.Poll, Reference: exec.NewMemory(g), HangTimeout: time.Second})
		var oe *exec.OpError
		require.ErrorAs(t, err, &oe, "triggers %v: %v", trig, err)
		assert.Regexp(t, `ring_allreduce.dag:\d+:\d+: op ag\[0\] on rank \d, queue right: completed with status remote access error`, err.Error(), "triggers %v", trig)
	}
}

// TestOffloadFaults alters a checked and compiled plan so that it fails at run time: the offload
// engine must end with an error naming the op, rank, queue and source line, or a hang diagnosis
// naming the stuck WAIT, its CQ, the counts and the op expected to produce the completion.
func TestOffloadFaults(t *testing.T) {
	load := func(t *testing.T) (*ir.Graph, *ir.Plan) {
		g, _ := loadPlan(t, "../plans/ring_allreduce.dag", 2, map[string]int64{"n": 4})
		plan, err := compileFor(g, "connectx")
		require.NoError(t, err)
		return g, plan
	}
	t.Run("write without remote_write", func(t *testing.T) {
		g, plan := load(t)
		g.Buffers[0].Access = 0 // registered without remote write
		_, err := exec.Run(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Offload, Reference: exec.NewMemory(g)})
		var oe *exec.OpError
		require.ErrorAs(t, err, &oe, "%v", err)
		assert.Regexp(t, `ring_allreduce.dag:\d+:\d+: op ag\[0\] on rank \d, queue right.sq: RDMA_WRITE_IMM entry #\d+: completed with status remote access error`, err.Error())
	})
	t.Run("unreachable WAIT", func(t *testing.T) {
		_, plan := load(t)
		rp := &plan.Ranks[1]
		found := false
		for k := range rp.Queues[rp.Mgmt].Chain {
			w := &rp.Queues[rp.Mgmt].Chain[k]
			if w.Opcode == ir.OpcWait {
				w.Wait.Count += 100
				found = true
				break
			}
		}
		require.True(t, found)
		_, err := exec.Run(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Offload, HangTimeout: time.Second})
		var he *exec.HangError
		require.ErrorAs(t, err, &he, "%v", err)
		assert.Regexp(t, `rank 1: WAIT before \S+ on queue mgmt is stuck: CQ \S+ reached \d+ of 10\d completions; expected from \S+ on rank 1 \(\S+ring_allreduce.dag:\d+:\d+\)`, err.Error())
	})
}
