package exec_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
)

// pollHang runs fault graph kind on the polling engine (with QP triggers for odd seeds) and
// returns the hang it must end with.
func pollHang(t *testing.T, kind string, seed uint64) (*ir.Plan, *exec.HangError) {
	t.Helper()
	g := exec.FaultGraphForTest(kind)
	plan, err := exec.GenericPlanForTest(g)
	require.NoError(t, err)
	nic := softnic.New(softnic.Options{NoCrossChannel: true, Seeded: seed != 0, Seed: seed, Triggers: seed%2 == 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = exec.Run(ctx, plan, nic, exec.Options{Engine: exec.Poll, Reference: exec.NewMemory(g), HangTimeout: time.Second})
	var h *exec.HangError
	require.ErrorAs(t, err, &h, "%v", err)
	return plan, h
}

// TestPollHangCountsCompletions: a send queue holding two unsignalled writes and then a send
// that nothing receives owes its CQ one completion, the send's. The hang report names the send
// (the writes complete with it) and counts that one completion, not the queue's three slots.
func TestPollHangCountsCompletions(t *testing.T) {
	for _, seed := range []uint64{0, 1} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			plan, h := pollHang(t, "unsignalled", seed)
			rp := &plan.Ranks[0]
			var signalled []bool
			for _, w := range rp.Queues[rp.SendWQ[0]].Chain {
				signalled = append(signalled, w.Signalled())
			}
			require.Equal(t, []bool{false, false, true}, signalled, "the case needs w1 and w2 unsignalled")

			msg := h.Error()
			assert.Regexp(t, `rank 0: post of send lonely on queue q is stuck: CQ q.scq reached 0 of 1 completions; expected from lonely on rank 0 \(unsignalled.dag:\d+:1\)`, msg)
			assert.NotContains(t, msg, "w1", "%s", msg)
			assert.NotContains(t, msg, "w2", "%s", msg)
			for _, s := range h.Stuck {
				if s.At != nil {
					w := &rp.Queues[s.At.Queue].Chain[s.At.Index]
					assert.Equal(t, "lonely", plan.OpOf(w).Name, "At places the op the report names")
				}
			}
		})
	}
}

// TestPollHangRecvNamesPeer: a posted receive that never completes waits for the send that
// matches it on its peer. The report names that send and the rank it runs on (hardware gives no
// detail line of its own to say so), and places it in the plan as the awaited WQE.
func TestPollHangRecvNamesPeer(t *testing.T) {
	for _, seed := range []uint64{0, 1} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			plan, h := pollHang(t, "deadlock", seed)
			msg := h.Error()
			assert.Regexp(t, `rank 1: posted recv rx on queue q is stuck: CQ q.rcq reached 0 of 1 completions; expected from tx on rank 0 \(deadlock.dag:3:1\): rank 1 waits for rank 0\n`, msg)
			assert.NotContains(t, msg, "expected from rx on rank 1")
			var found bool
			for _, s := range h.Stuck {
				if s.Rank != 1 || s.What != "posted recv rx" {
					continue
				}
				found = true
				require.NotNil(t, s.ProducerAt, "%v", s)
				assert.Equal(t, 0, s.ProducerAt.Rank)
				w := &plan.Ranks[0].Queues[s.ProducerAt.Queue].Chain[s.ProducerAt.Index]
				assert.Equal(t, "tx", plan.OpOf(w).Name)
			}
			assert.True(t, found, "%s", msg)
		})
	}
}

// TestOffloadHangRecvNamesPeer: on the offload engine, a receive queue's CQ short of its
// completions names the receive that is stuck and the send on the peer that would complete it:
// rank 1's WAIT raised out of reach holds its ag[0], the write with immediate that rank 0's
// got[0] receives.
func TestOffloadHangRecvNamesPeer(t *testing.T) {
	g, _ := loadPlan(t, "../plans/ring_allreduce.dag", 2, map[string]int64{"n": 4})
	plan, err := compileFor(g, "connectx")
	require.NoError(t, err)
	rp := &plan.Ranks[1]
	found := false
	for k := range rp.Queues[rp.Mgmt].Chain {
		if w := &rp.Queues[rp.Mgmt].Chain[k]; w.Opcode == ir.OpcWait {
			w.Wait.Count += 100
			found = true
			break
		}
	}
	require.True(t, found, "no WAIT in rank 1's management queue")
	_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Offload, HangTimeout: time.Second})
	var h *exec.HangError
	require.ErrorAs(t, err, &h, "%v", err)
	assert.Regexp(t, `rank 0: RECV got\[0\] \(\S+ring_allreduce.dag:\d+:\d+\) on queue left.rq is stuck: CQ left.rcq reached \d+ of \d+ completions; `+
		`expected from ag\[0\] on rank 1 \(\S+ring_allreduce.dag:\d+:\d+\): rank 0 waits for rank 1\n`, err.Error())
	assert.NotRegexp(t, `expected from RECV`, err.Error())
}
