package replay_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/e2e"
	"github.com/coredag/coredag/internal/randgraph"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/planner/replay"
)

// allMessages joins every diagnostic of an error list (Error() prints only the first).
func allMessages(err error) string {
	var list diag.List
	if errors.As(err, &list) {
		var b strings.Builder
		for _, e := range list {
			b.WriteString(e.Error() + "\n")
		}
		return b.String()
	}
	return err.Error()
}

// remove drops entry i of rank r's queue q and keeps the per-iteration counts consistent, so
// that only the ordering the entry gave is lost.
func remove(p *ir.Plan, r, q, i int) {
	wq := &p.Ranks[r].Queues[q]
	if wq.Chain[i].Signalled() {
		p.Ranks[r].CQs[wq.CQ].PerIteration--
	}
	wq.Chain = append(wq.Chain[:i:i], wq.Chain[i+1:]...)
	wq.PerIteration--
}

func compile(t *testing.T, g *ir.Graph, target string) *ir.Plan {
	t.Helper()
	tg, err := ir.LookupTarget(target)
	require.NoError(t, err)
	p, err := lower.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	return p
}

func loadPlans(t *testing.T, ranks int64) map[string]*ir.Graph {
	t.Helper()
	files, err := filepath.Glob("../../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string]*ir.Graph{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		g, err := planner.Load(t.Context(), "plans/"+filepath.Base(f), src, map[string]int64{"ranks": ranks}, planner.Options{})
		require.NoError(t, err, f)
		out[filepath.Base(f)] = g
	}
	return out
}

func TestReplayPlans(t *testing.T) {
	t.Parallel()
	for _, ranks := range []int64{2, 4, 8} {
		for name, g := range loadPlans(t, ranks) {
			for _, tg := range ir.Targets() {
				p, err := lower.Compile(t.Context(), g, tg)
				if refusesHeldRecv(tg, err) {
					continue
				}
				if err != nil && tg.PrePost && strings.Contains(err.Error(), "posts whole chains") {
					t.Logf("%s ranks=%d: %v", name, ranks, err)
					continue
				}
				require.NoError(t, err, "%s ranks=%d target %s", name, ranks, tg.Name)
				assert.NoError(t, replay.Check(t.Context(), p, replay.Options{}), "%s ranks=%d target %s", name, ranks, tg.Name)
			}
		}
	}
}

// Every target, over random graphs of several shapes. Before the inline lowering ordered each
// message after the posting of its receive, connectx-inline deadlocked here (a RECV_EN queued
// behind a send whose peer's RECV_EN sat behind a send needing the first receive) on 86 of the
// default graphs, 142 of the two-rank ones and 79 of the many-rank ones.
func TestReplayRandomGraphs(t *testing.T) {
	t.Parallel()
	shapes := []struct {
		name string
		cfg  randgraph.Config
		n    uint64
	}{
		{"default", randgraph.Config{}, 600},
		{"two ranks, long", randgraph.Config{MinRanks: 2, MaxRanks: 2, MaxSteps: 60}, 300},
		{"many ranks", randgraph.Config{MinRanks: 4, MaxRanks: 8, MaxSteps: 80, MaxPreds: 2}, 200},
	}
	const seed0 = 20261123
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			n := sh.n
			if !e2e.Enabled() {
				n /= 4 // every graph under CI, a quarter of each shape's in a plain go test
			}
			for k := uint64(0); k < n; k++ {
				seed := seed0 + k
				g := randgraph.New(seed, sh.cfg)
				for _, tg := range ir.Targets() {
					p, err := lower.Compile(t.Context(), g, tg)
					if refusesHeldRecv(tg, err) {
						continue
					}
					require.NoError(t, err, "seed %d target %s", seed, tg.Name)
					if err := replay.Check(t.Context(), p, replay.Options{}); err != nil {
						t.Fatalf("shape %q seed %d target %s: %s", sh.name, seed, tg.Name, allMessages(err))
					}
				}
			}
		})
	}
}

// Bigger random graphs, fewer of them.
func TestReplayLargerRandomGraphs(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 40; seed++ {
		g := randgraph.New(seed, randgraph.Config{MinRanks: 3, MaxRanks: 6, MaxSteps: 120, MaxPreds: 4})
		for _, tg := range ir.Targets() {
			p, err := lower.Compile(t.Context(), g, tg)
			if refusesHeldRecv(tg, err) {
				continue
			}
			require.NoError(t, err, "seed %d target %s", seed, tg.Name)
			require.NoError(t, replay.Check(t.Context(), p, replay.Options{Iterations: 2, FirstIter: 1 << 24}), "seed %d target %s", seed, tg.Name)
		}
	}
}

// Corrupting a correct plan must be caught: dropping a WAIT, an ENABLE, a fence or a HOST
// condition, or lowering a signalled completion.
func TestReplayCatchesCorruption(t *testing.T) {
	t.Parallel()
	type mutation struct {
		name  string
		apply func(p *ir.Plan) bool // false: nothing to corrupt in this plan
		want  string
	}
	drop := func(opc ir.Opcode) func(p *ir.Plan) bool {
		return func(p *ir.Plan) bool {
			for r := range p.Ranks {
				for q := range p.Ranks[r].Queues {
					chain := p.Ranks[r].Queues[q].Chain
					for i := range chain {
						if chain[i].Opcode == opc {
							remove(p, r, q, i)
							return true
						}
					}
				}
			}
			return false
		}
	}
	muts := []mutation{
		{"drop a WAIT", drop(ir.OpcWait), "not enforced"},
		{"drop the last ENABLE of a queue", func(p *ir.Plan) bool {
			for r := range p.Ranks {
				last := map[int][2]int{} // target queue -> placing queue, index
				for q := range p.Ranks[r].Queues {
					for i, e := range p.Ranks[r].Queues[q].Chain {
						if e.Opcode == ir.OpcSendEnable || e.Opcode == ir.OpcRecvEnable {
							last[int(e.Queue)] = [2]int{q, i}
						}
					}
				}
				for t := range p.Ranks[r].Queues {
					if at, ok := last[t]; ok {
						remove(p, r, at[0], at[1])
						return true
					}
				}
			}
			return false
		}, "no ENABLE ever lets it run"},
		{"drop a HOST condition", func(p *ir.Plan) bool {
			for r := range p.Ranks {
				for q := range p.Ranks[r].Queues {
					for i := range p.Ranks[r].Queues[q].Chain {
						e := &p.Ranks[r].Queues[q].Chain[i]
						if e.Opcode == ir.OpcHost && len(e.Waits) > 0 {
							e.Waits = e.Waits[1:]
							return true
						}
					}
				}
			}
			return false
		}, "not enforced"},
		{"wait for a count that never comes", func(p *ir.Plan) bool {
			for r := range p.Ranks {
				for q := range p.Ranks[r].Queues {
					for i := range p.Ranks[r].Queues[q].Chain {
						e := &p.Ranks[r].Queues[q].Chain[i]
						if e.Opcode == ir.OpcWait {
							e.Wait.Count = p.Ranks[r].CQs[e.Wait.CQ].PerIteration + 1
							return true
						}
					}
				}
			}
			return false
		}, "blocks forever"},
	}
	for _, m := range muts {
		t.Run(m.name, func(t *testing.T) {
			caught, tried := 0, 0
			for _, target := range []string{"connectx", "connectx-inline"} {
				for seed := uint64(1); seed <= 60; seed++ {
					g := randgraph.New(seed, randgraph.Config{})
					p := compile(t, g, target)
					if !m.apply(p) {
						continue
					}
					tried++
					err := replay.Check(t.Context(), p, replay.Options{})
					if err != nil && strings.Contains(allMessages(err), m.want) {
						caught++
					}
				}
			}
			require.NotZero(t, tried, "no plan had anything to corrupt")
			assert.Equal(t, tried, caught, "corruptions caught")
		})
	}
}

// The exchange example of LOWERING.md, with the WAR edge the race checker demands.
func TestReplayExchangeWithoutItsWaitDeadlocksOrRaces(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../testdata/compile/exchange.dag")
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), "exchange.dag", src, nil, planner.Options{})
	require.NoError(t, err)
	p := compile(t, g, "connectx")
	require.NoError(t, replay.Check(t.Context(), p, replay.Options{}))
	// Lower the host-signal wait to count 0: tx2 may now start before red.
	for q := range p.Ranks[0].Queues {
		for i := range p.Ranks[0].Queues[q].Chain {
			if e := &p.Ranks[0].Queues[q].Chain[i]; e.Opcode == ir.OpcWait {
				e.Wait.Count = 0
			}
		}
	}
	err = replay.Check(t.Context(), p, replay.Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "red on rank 0 -> tx2 is not enforced")
}

// The exchange plan lowered for connectx-inline as the compiler once did: on both ranks the
// RECV_EN of rx sits behind the SEND tx, which RC holds (receiver not ready) until the peer's
// rx is posted, and the peer is in the mirror position. The replay must call it a deadlock.
func TestReplayRecvEnableBehindSendDeadlocks(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../testdata/compile/exchange.dag")
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), "exchange.dag", src, nil, planner.Options{})
	require.NoError(t, err)
	p := compile(t, g, "connectx-inline")
	require.NoError(t, replay.Check(t.Context(), p, replay.Options{}))
	for r := range p.Ranks {
		sq := p.Ranks[r].SendWQ[0]
		chain := p.Ranks[r].Queues[sq].Chain
		require.Equal(t, ir.OpcRecvEnable, chain[0].Opcode, "rank %d: rx is enabled first", r)
		require.Equal(t, ir.OpcSend, chain[1].Opcode, "rank %d", r)
		chain[0], chain[1] = chain[1], chain[0]
		p.Loc[chain[0].Op] = ir.Loc{Queue: sq, Index: 0}
	}
	err = replay.Check(t.Context(), p, replay.Options{})
	require.Error(t, err)
	msg := allMessages(err)
	assert.Contains(t, msg, "the chains deadlock")
	assert.Regexp(t, `RECV_EN -> rank \d q.rq\[0\] RECV -> rank \d q.sq\[0\] SEND`, msg, "the cycle runs from a RECV_EN through its RECV to the peer's SEND")
}

// refusesHeldRecv reports a triggered target that posts receives only at threshold 0 refusing a
// graph with a receive that waits for something (planner/lower tests that refusal).
func refusesHeldRecv(tg ir.Target, err error) bool {
	return err != nil && tg.Trigger != nil && tg.Trigger.RecvThresholdZero && strings.Contains(err.Error(), "only at threshold 0")
}

// A management chain spread over two queues (a target whose queues hold 16 WQEs) is proven only
// while the WAIT that opens the second piece orders it after the first: without it, or waiting
// for something else, the ENABLEs of one queue from both pieces are not ordered, and the checker
// says so.
func TestReplaySplitManagement(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../plans/ring_allreduce.dag")
	require.NoError(t, err)
	src = []byte(strings.ReplaceAll(string(src), "depth min(32768, max(128, 4 * ranks))", "depth 16"))
	g, err := planner.Load(t.Context(), "ring_allreduce.dag", src, map[string]int64{"ranks": 8, "n": 2}, planner.Options{})
	require.NoError(t, err)
	tg, err := ir.LookupTarget("connectx")
	require.NoError(t, err)
	tg.MaxWQDepth = 16
	fresh := func() (*ir.Plan, int) {
		p, err := lower.Compile(t.Context(), g, tg)
		require.NoError(t, err)
		rp := &p.Ranks[3]
		last := len(rp.Queues) - 1
		require.Equal(t, "mgmt1", rp.Queues[last].Name)
		require.Equal(t, ir.OpcWait, rp.Queues[last].Chain[0].Opcode)
		return p, last
	}
	p, _ := fresh()
	require.NoError(t, replay.Check(t.Context(), p, replay.Options{}))

	p, q := fresh()
	remove(p, 3, q, 0)
	err = replay.Check(t.Context(), p, replay.Options{})
	require.Error(t, err)
	assert.Contains(t, allMessages(err), "rank 3 right.sq is enabled from both mgmt and mgmt1, and nothing orders")

	p, q = fresh()
	w := &p.Ranks[3].Queues[q].Chain[0]
	w.Wait.CQ, w.Wait.Count = int32(p.Ranks[3].Queues[p.Ranks[3].Host].CQ), 1 // the first host step instead
	err = replay.Check(t.Context(), p, replay.Options{})
	require.Error(t, err)
	assert.Contains(t, allMessages(err), "nothing orders")
}
