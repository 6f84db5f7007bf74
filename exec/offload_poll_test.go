package exec

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

// plainNIC hides the software NIC's CQNotifier and Progresser, so that the offload engine polls
// the CQs itself each round, as it does on libfabric.
type plainNIC struct{ nic.Provider }

// countCQ counts the polls of a CQ.
type countCQ struct {
	nic.CQ
	polls int
}

func (c *countCQ) Poll(wc []nic.WC) (int, error) { c.polls++; return c.CQ.Poll(wc) }

// prepareTriggered prepares plan path (compiled for the triggered target) on the offload engine
// over a software NIC the engine has to poll, and returns the session's engine.
func prepareTriggered(t *testing.T, path string, params map[string]int64) (*Session, *offloadEngine) {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), path, src, params, planner.Options{})
	require.NoError(t, err)
	tgt, err := ir.LookupTarget("triggered")
	require.NoError(t, err)
	plan, err := lower.Compile(t.Context(), g, tgt)
	require.NoError(t, err)
	s, err := Prepare(context.Background(), plan, plainNIC{softnic.New(softnic.Options{})}, Options{Engine: Offload})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	e, ok := s.d.(*offloadEngine)
	require.True(t, ok)
	require.Nil(t, e.ready, "the engine must poll the CQs itself")
	return s, e
}

// pollCounts runs the session for iters iterations, checks the memory, and returns every CQ's
// poll count, by rank index and CQ (nil for a CQ the rank does not create).
func pollCounts(t *testing.T, s *Session, e *offloadEngine, iters int) [][]*countCQ {
	t.Helper()
	counts := make([][]*countCQ, len(e.ranks))
	for ri := range e.ranks {
		for ci := range e.ranks[ri].cqs {
			c := &e.ranks[ri].cqs[ci]
			if c.cq == nil {
				counts[ri] = append(counts[ri], nil)
				continue
			}
			w := &countCQ{CQ: c.cq}
			c.cq = w
			counts[ri] = append(counts[ri], w)
		}
	}
	res, err := s.Run(context.Background(), iters)
	require.NoError(t, err)
	require.NotEmpty(t, res.Verdicts)
	for _, v := range res.Verdicts {
		require.True(t, v.OK, "rank %d: %v", v.Rank, v.Mismatches)
	}
	return counts
}

func totalPolls(counts [][]*countCQ) (polls, cqs int) {
	for _, r := range counts {
		for _, c := range r {
			if c != nil {
				polls += c.polls
				cqs++
			}
		}
	}
	return polls, cqs
}

var rdParams = map[string]int64{"ranks": 4, "n": 64}

// TestOffloadLiveCQs: when an iteration's triggered work has been handed to the NIC, a CQ counts
// as live when its queue's next entries are with the NIC (posted at once, or their counter has
// reached the threshold): in the recursive doubling, rank 0's first-step send and both receives
// are, and its second-step send, which waits for the first reduction, is not.
func TestOffloadLiveCQs(t *testing.T) {
	_, e := prepareTriggered(t, "../examples/mpi/recursive_doubling_f32.dag", rdParams)
	require.True(t, e.owedOnly)
	e.rearm(0, true)
	require.NoError(t, e.postAll(context.Background(), 0))
	defer e.cancelTrig()
	for ri := range e.ranks {
		or := &e.ranks[ri]
		if or.rp.Rank != 0 {
			continue
		}
		live := map[string]bool{}
		for ci := range or.cqs {
			live[or.cqs[ci].name] = e.liveCQ(or, ci)
		}
		assert.Equal(t, map[string]bool{"hop[0].scq": true, "hop[0].rcq": true, "hop[1].rcq": true, "hop[1].scq": false}, live)
		return
	}
	t.Fatal("no rank 0")
}

// TestOffloadPollsLiveCQs: on a NIC the engine has to poll, a triggered plan whose transfers are
// all two-sided polls fewer CQs than every CQ every round, every CQ at least once in fullEvery
// rounds, and still computes the right result.
func TestOffloadPollsLiveCQs(t *testing.T) {
	s, e := prepareTriggered(t, "../examples/mpi/recursive_doubling_f32.dag", rdParams)
	require.True(t, e.owedOnly)
	counts := pollCounts(t, s, e, 5)
	polls, cqs := totalPolls(counts)
	rounds := int(e.round)
	assert.Less(t, polls, rounds*cqs, "every CQ polled every round")
	for ri := range counts {
		for ci, c := range counts[ri] {
			if c != nil {
				assert.GreaterOrEqual(t, c.polls, rounds/fullEvery, "rank %d CQ %s", e.ranks[ri].rp.Rank, e.ranks[ri].cqs[ci].name)
			}
		}
	}
}

// TestOffloadPollsEveryCQOneSided: a plan with one-sided transfers keeps polling every CQ of a
// rank each round: the target of a write or read owes no completion for it, and on a NIC whose
// data moves inside the polls its endpoints must still be progressed.
func TestOffloadPollsEveryCQOneSided(t *testing.T) {
	s, e := prepareTriggered(t, "../plans/ring_allreduce.dag", map[string]int64{"ranks": 4})
	require.False(t, e.owedOnly)
	counts := pollCounts(t, s, e, 2)
	for ri := range counts {
		for ci, c := range counts[ri] {
			if c != nil {
				assert.Equal(t, int(e.round), c.polls, "rank %d CQ %s", e.ranks[ri].rp.Rank, e.ranks[ri].cqs[ci].name)
			}
		}
	}
}

// relayGraph: rank 0 sends x to rank 1 (m1), then tells rank 2 (m2, after m1); rank 2 tells
// rank 1 (m3). Rank 1 receives x (r1) and the word from rank 2 (r3), then copies x to y, after
// r1 when direct, else after r3 only: then the copy is ordered after the data's arrival only
// through m1's completion, which must mean delivery. Rank 1 answers rank 0 (ok), so rank 0
// hears from rank 1 every iteration; ranks 0 and 2 never hear from 2 and 1.
func relayGraph(direct bool) *ir.Graph {
	b := newBuild("relay", 3)
	x := b.buffer("x", ir.F32, 4, 0, nil)
	y := b.buffer("y", ir.F32, 4, 0, nil)
	b.rank(0, func(rb *rankB) {
		rb.queue("b", 1, "a")
		rb.queue("c", 2, "a")
		rb.op("m1", opSpec{Kind: ir.OpSend, Q: "b", Src: sl(x, 0, 4)})
		rb.op("m2", opSpec{Kind: ir.OpSend, Q: "c", After: []string{"m1"}})
		rb.op("rok", opSpec{Kind: ir.OpRecv, Q: "b"})
	})
	b.rank(1, func(rb *rankB) {
		rb.queue("a", 0, "b")
		rb.queue("c", 2, "b")
		rb.op("r1", opSpec{Kind: ir.OpRecv, Q: "a", Dst: sl(x, 0, 4)})
		rb.op("r3", opSpec{Kind: ir.OpRecv, Q: "c"})
		after := []string{"r3"}
		if direct {
			after = append(after, "r1")
		}
		rb.op("cp", opSpec{Kind: ir.OpCopy, Src: sl(x, 0, 4), Dst: sl(y, 0, 4), After: after})
		rb.op("ok", opSpec{Kind: ir.OpSend, Q: "a", After: []string{"cp"}})
	})
	b.rank(2, func(rb *rankB) {
		rb.queue("a", 0, "c")
		rb.queue("b", 1, "c")
		rb.op("r2", opSpec{Kind: ir.OpRecv, Q: "a"})
		rb.op("m3", opSpec{Kind: ir.OpSend, Q: "b", After: []string{"r2"}})
	})
	return b.done()
}

// TestDeliveryUnobserved: a send may complete before delivery only when every op of the
// receiver that touches the received memory is ordered before or after the recv by the
// receiver's own dependencies, and the sender hears from the receiver every iteration.
func TestDeliveryUnobserved(t *testing.T) {
	for _, direct := range []bool{true, false} {
		g := relayGraph(direct)
		find := func(rank int, name string) ir.OpID {
			first, end := g.RankOps(rank)
			for o := first; o < end; o++ {
				if g.Ops[o].Name == name {
					return o
				}
			}
			t.Fatalf("no %s on rank %d", name, rank)
			return ir.None
		}
		u := newUnobservedSends(g)
		assert.Equal(t, direct, u.send(find(0, "m1")), "m1, copy after r1: %v", direct)
		assert.True(t, u.send(find(1, "ok")), "ok is empty, and rank 1 hears from rank 0")
		assert.False(t, u.send(find(0, "m2")), "rank 0 never hears from rank 2")
		assert.False(t, u.send(find(2, "m3")), "rank 2 never hears from rank 1")
		assert.False(t, u.send(find(1, "r1")), "a recv")
		assert.Equal(t, direct, u.send(find(0, "m1")), "m1 again, with the scratch of the others: %v", direct)
	}
	// The MPI bench's recursive doubling: every send's data is reduced after its recv.
	_, e := prepareTriggered(t, "../examples/mpi/recursive_doubling_f32.dag", rdParams)
	require.NotNil(t, e.unobserved)
	n := 0
	for ri := range e.ranks {
		for wi := range e.ranks[ri].wqs {
			for _, wr := range e.ranks[ri].wqs[wi].swr { // the host queue's entries are not posted
				if wr.Op == nic.OpSend && !e.ranks[ri].wqs[wi].host {
					assert.NotZero(t, wr.Flags&nic.FlagLocalComplete, "rank %d send %d", e.ranks[ri].rp.Rank, wr.ID)
					n++
				}
			}
		}
	}
	assert.Equal(t, 8, n, "2 sends on each of 4 ranks")
}
