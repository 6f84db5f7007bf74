package lower_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/randgraph"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/listing"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/planner/replay"
)

// shallowConnectX is connectx whose work queues hold at most depth WQEs: a management chain
// longer than that must be spread over several management queues.
func shallowConnectX(t testing.TB, depth int) ir.Target {
	tg, err := ir.LookupTarget("connectx")
	require.NoError(t, err)
	tg.MaxWQDepth = depth
	return tg
}

// queueDepth declares `depth D` on every queue of a plan's text (replacing its own).
var queueDepth = regexp.MustCompile(`(?m)^([ \t]*queue\s[^#\n]*?)(\s+depth\s[^#\n]*?)?(\s*#.*)?$`)

func withDepth(src []byte, depth int) []byte {
	return queueDepth.ReplaceAll(src, []byte(fmt.Sprintf("${1} depth %d${3}", depth)))
}

// checkSplit compares plan p, compiled for a target whose management queues hold at most
// capacity WQEs, with whole, the same graph compiled without that limit: every chain but the
// management one is the same; the management chain is cut into pieces of at most capacity WQEs,
// each after the first opening with a WAIT for every completion of the piece before it, and the
// pieces without those WAITs are whole's chain entry for entry (signalling aside). It returns how
// many ranks were split.
func checkSplit(t *testing.T, p, whole *ir.Plan, capacity int, where string) int {
	t.Helper()
	split := 0
	for r := range p.Ranks {
		rp, wp := &p.Ranks[r], &whole.Ranks[r]
		var pieces []int
		for wi := range rp.Queues {
			if rp.Queues[wi].Kind == ir.MgmtQueue {
				pieces = append(pieces, wi)
			}
		}
		if wp.Mgmt < 0 {
			require.Empty(t, pieces, "%s rank %d", where, r)
			continue
		}
		require.Equal(t, wp.Mgmt, rp.Mgmt, "%s rank %d", where, r)
		require.Equal(t, rp.Mgmt, pieces[0], "%s rank %d: the first management queue is rp.Mgmt", where, r)
		// Every queue of whole is in p at the same index, with the same chain (the management
		// queue aside), and the same CQs.
		require.GreaterOrEqual(t, len(rp.Queues), len(wp.Queues), where)
		for wi := range wp.Queues {
			if wi == wp.Mgmt {
				continue
			}
			assertSameQueue(t, wp.Queues[wi], rp.Queues[wi], fmt.Sprintf("%s rank %d queue %s", where, r, wp.Queues[wi].Name))
		}
		for ci := range wp.CQs {
			if ci != wp.Queues[wp.Mgmt].CQ {
				assert.Equal(t, wp.CQs[ci], rp.CQs[ci], "%s rank %d CQ %s", where, r, wp.CQs[ci].Name)
			}
		}
		want := wp.Queues[wp.Mgmt].Chain
		if len(want) <= capacity {
			require.Len(t, pieces, 1, "%s rank %d: a chain of %d fits one queue of %d", where, r, len(want), capacity)
			assertSameQueue(t, wp.Queues[wp.Mgmt], rp.Queues[rp.Mgmt], fmt.Sprintf("%s rank %d", where, r))
			continue
		}
		split++
		var got []ir.WQE
		for k, wi := range pieces {
			q := &rp.Queues[wi]
			require.LessOrEqual(t, len(q.Chain), capacity, "%s rank %d %s", where, r, q.Name)
			require.LessOrEqual(t, q.Depth, capacity, "%s rank %d %s", where, r, q.Name)
			require.Equal(t, uint32(len(q.Chain)), q.PerIteration, "%s rank %d %s", where, r, q.Name)
			require.True(t, q.Chain[len(q.Chain)-1].Signalled(), "%s rank %d %s: the last entry ends the piece", where, r, q.Name)
			chain := q.Chain
			if k > 0 {
				w := chain[0]
				prev := &rp.Queues[pieces[k-1]]
				require.Equal(t, ir.OpcWait, w.Opcode, "%s rank %d %s opens with a WAIT", where, r, q.Name)
				require.Equal(t, int32(prev.CQ), w.Wait.CQ, "%s rank %d %s waits for %s", where, r, q.Name, prev.Name)
				require.Equal(t, rp.CQs[prev.CQ].PerIteration, w.Wait.Count, "%s rank %d %s waits for all of %s", where, r, q.Name, prev.Name)
				chain = chain[1:]
			}
			for _, e := range chain {
				e.Flags &^= ir.Signalled
				got = append(got, e)
			}
		}
		require.Len(t, got, len(want), "%s rank %d", where, r)
		for i := range want {
			e := want[i]
			e.Flags &^= ir.Signalled
			require.Equal(t, e, got[i], "%s rank %d management entry %d", where, r, i)
		}
	}
	return split
}

// assertSameQueue asserts that two work queues are the same, an empty chain and none alike.
func assertSameQueue(t *testing.T, want, got ir.WorkQueue, where string) {
	t.Helper()
	if len(want.Chain) > 0 || len(got.Chain) > 0 {
		assert.Equal(t, want.Chain, got.Chain, where)
	}
	want.Chain, got.Chain = nil, nil
	assert.Equal(t, want, got, where)
}

// TestSplitManagementRing compiles a ring allreduce whose management chain (4 (ranks - 1)
// entries) is longer than the queues of the target at several world sizes: the chain is spread
// over management queues that replay proves enforce every edge and make progress, and at the
// sizes it fits the plan is the one an unlimited target gives.
func TestSplitManagementRing(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../plans/ring_allreduce.dag")
	require.NoError(t, err)
	src = withDepth(src, 16)
	small := shallowConnectX(t, 16)
	big := shallowConnectX(t, 1<<15)
	for _, ranks := range []int64{4, 5, 6, 8} { // 12, 16, 20 and 28 management entries
		g, err := planner.Load(t.Context(), "ring_allreduce.dag", src, map[string]int64{"ranks": ranks, "n": 2}, planner.Options{})
		require.NoError(t, err)
		p, err := lower.Compile(t.Context(), g, small)
		require.NoError(t, err, "ranks %d", ranks)
		whole, err := lower.Compile(t.Context(), g, big)
		require.NoError(t, err)
		where := fmt.Sprintf("ranks %d", ranks)
		n := checkSplit(t, p, whole, 16, where)
		if ranks >= 6 {
			assert.Equal(t, int(ranks), n, "%s: every rank's chain is split", where)
			assert.Equal(t, "mgmt1", p.Ranks[0].Queues[len(p.Ranks[0].Queues)-1].Name)
		} else {
			assert.Zero(t, n, where)
		}
		require.NoError(t, replay.Check(t.Context(), p, replay.Options{}), where)
		require.NoError(t, replay.Check(t.Context(), p, replay.Options{Iterations: 3, FirstIter: 1<<16 - 2}), where)
		if ranks == 8 {
			var b bytes.Buffer
			require.NoError(t, listing.Write(&b, p, listing.Options{Ranks: []int{0}}))
			// The second piece is listed with its queue, and its opening WAIT says what it awaits.
			assert.Contains(t, b.String(), "\n  mgmt1  mgmt, depth 16, cq mgmt1.cq (1 per iteration), 13 WQEs per iteration\n"+
				"    [0]   CQE_WAIT  wait mgmt.cq >= 1  (mgmt done)                 ag[1]  ring_allreduce.dag:40\n")
			// A naive lowering needs the WAITs that open the pieces too.
			assert.Equal(t, p.Stats.NaiveWaits, whole.Stats.NaiveWaits+int(ranks))
			assert.Equal(t, p.Stats.Waits, whole.Stats.Waits+int(ranks))
		}
	}
}

// A target whose largest queue is not a power of two holds chains of the power of two below it:
// a management queue's depth is its chain's length rounded up to one.
func TestSplitManagementOddDepth(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../plans/ring_allreduce.dag")
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), "ring_allreduce.dag", withDepth(src, 12), map[string]int64{"ranks": 4, "n": 1}, planner.Options{})
	require.NoError(t, err)
	p, err := lower.Compile(t.Context(), g, shallowConnectX(t, 12)) // 12 management entries: 8 and 1 + 4
	require.NoError(t, err)
	whole, err := lower.Compile(t.Context(), g, shallowConnectX(t, 1<<15))
	require.NoError(t, err)
	assert.Equal(t, 4, checkSplit(t, p, whole, 8, "depth 12"))
	for r := range p.Ranks {
		for _, q := range p.Ranks[r].Queues {
			assert.LessOrEqual(t, q.Depth, 12, "rank %d %s", r, q.Name)
		}
	}
	require.NoError(t, replay.Check(t.Context(), p, replay.Options{}))
}

// TestSplitManagementPlans does the same for every plan of plans/ and for random graphs with
// queues of 8 WQEs: whatever the shape of the management chain (WAITs for host steps, fences,
// receive enables, several queues), its pieces are the chain, and replay proves them.
func TestSplitManagementPlans(t *testing.T) {
	t.Parallel()
	const depth = 8
	small := shallowConnectX(t, depth)
	big := shallowConnectX(t, 1<<15)
	files, err := filepath.Glob("../../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	split, plans := 0, 0
	check := func(g *ir.Graph, where string) {
		whole, err := lower.Compile(t.Context(), g, big)
		if err != nil {
			return // a data chain longer than the depth the plan declares: it does not fit anywhere
		}
		for r := range whole.Ranks {
			if h := whole.Ranks[r].Host; h >= 0 && whole.Ranks[r].Queues[h].Depth > depth {
				return // the host-signal queue cannot be split: too long for the shallow target
			}
		}
		p, err := lower.Compile(t.Context(), g, small)
		require.NoError(t, err, "%s: only chains that cannot be split are refused", where)
		plans++
		if checkSplit(t, p, whole, depth, where) > 0 {
			split++
		}
		require.NoError(t, replay.Check(t.Context(), p, replay.Options{}), where)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, ranks := range []int64{3, 4} {
			g, err := planner.Load(t.Context(), filepath.Base(f), withDepth(src, depth), map[string]int64{"ranks": ranks, "n": 1}, planner.Options{})
			if err != nil {
				continue // not a plan of this size (recursive doubling on 3 ranks)
			}
			check(g, fmt.Sprintf("%s ranks %d", filepath.Base(f), ranks))
		}
	}
	for seed := uint64(1); seed <= 150; seed++ {
		g := randgraph.New(seed, randgraph.Config{MaxRanks: 4, MaxSteps: 40, Depth: depth})
		check(g, fmt.Sprintf("random graph seed %d", seed))
	}
	t.Logf("%d plans compiled, %d of them split", plans, split)
	assert.GreaterOrEqual(t, split, 20, "too few plans split to prove anything")
}

// shallowInline is connectx-inline whose work queues hold at most depth WQEs.
func shallowInline(t testing.TB, depth int) ir.Target {
	tg, err := ir.LookupTarget("connectx-inline")
	require.NoError(t, err)
	tg.MaxWQDepth = depth
	return tg
}

// checkManagedSends compares plan p, compiled for an inline target whose queues hold at most
// capacity WQEs, with whole, the same plan with deeper queues compiled without that limit: a send queue whose chain is longer is
// managed, holds the chain's data WQEs, and is run by management queues whose pieces (their
// opening WAITs aside), with each SEND_EN replaced by the data WQEs it lets go, are the chain
// entry for entry (signalling aside); every other queue is as in whole. It returns how many
// send queues were taken over.
func checkManagedSends(t *testing.T, p, whole *ir.Plan, capacity int, where string) int {
	t.Helper()
	taken := 0
	for r := range p.Ranks {
		rp, wp := &p.Ranks[r], &whole.Ranks[r]
		require.Equal(t, -1, rp.Mgmt, where)
		// The management queues, by the send queue they run: right.mgmt, right.mgmt1, ... run
		// right.sq.
		byName := map[string]int{}
		for wi := range rp.Queues {
			byName[rp.Queues[wi].Name] = wi
		}
		pieces := map[int][]int{}
		for wi := range rp.Queues {
			q := &rp.Queues[wi]
			if q.Kind != ir.SendQueue {
				continue
			}
			base := strings.TrimSuffix(q.Name, ".sq") + ".mgmt"
			for k := 0; ; k++ {
				name := base
				if k > 0 {
					name += strconv.Itoa(k)
				}
				mi, ok := byName[name]
				if !ok {
					break
				}
				require.Equal(t, ir.MgmtQueue, rp.Queues[mi].Kind, "%s rank %d %s", where, r, name)
				pieces[wi] = append(pieces[wi], mi)
			}
		}
		mgmts := 0
		for wi := range rp.Queues {
			if rp.Queues[wi].Kind == ir.MgmtQueue {
				mgmts++
			}
		}
		listed := 0
		for _, l := range pieces {
			listed += len(l)
		}
		require.Equal(t, mgmts, listed, "%s rank %d: management queues named after no send queue", where, r)
		for wi := range wp.Queues {
			wq := &wp.Queues[wi]
			list, ok := pieces[wi]
			if !ok || wq.Kind != ir.SendQueue {
				a, b := *wq, rp.Queues[wi]
				a.Depth, b.Depth = 0, 0 // whole declares deeper queues
				assertSameQueue(t, a, b, fmt.Sprintf("%s rank %d queue %s", where, r, wq.Name))
				continue
			}
			require.Greater(t, len(wq.Chain), capacity, "%s rank %d %s: taken over though its chain fits", where, r, wq.Name)
			taken++
			sq := &rp.Queues[wi]
			require.True(t, sq.Managed, "%s rank %d %s", where, r, sq.Name)
			var got []ir.WQE
			next := 0
			for k, mi := range list {
				q := &rp.Queues[mi]
				require.LessOrEqual(t, len(q.Chain), capacity, "%s rank %d %s", where, r, q.Name)
				chain := q.Chain
				if k > 0 {
					require.Equal(t, ir.OpcWait, chain[0].Opcode, "%s rank %d %s", where, r, q.Name)
					require.Equal(t, int32(rp.Queues[list[k-1]].CQ), chain[0].Wait.CQ, "%s rank %d %s", where, r, q.Name)
					chain = chain[1:]
				}
				for _, e := range chain {
					if e.Opcode == ir.OpcSendEnable {
						require.Equal(t, int32(wi), e.Queue, "%s rank %d %s", where, r, q.Name)
						require.Greater(t, int(e.UpTo), next, "%s rank %d %s: an ENABLE that lets nothing go", where, r, q.Name)
						got = append(got, sq.Chain[next:e.UpTo]...)
						next = int(e.UpTo)
						continue
					}
					got = append(got, e)
				}
			}
			require.Equal(t, len(sq.Chain), next, "%s rank %d %s: data WQEs no ENABLE lets go", where, r, sq.Name)
			require.Len(t, got, len(wq.Chain), "%s rank %d %s", where, r, wq.Name)
			for i := range got {
				a, b := wq.Chain[i], got[i]
				a.Flags &^= ir.Signalled
				b.Flags &^= ir.Signalled
				require.Equal(t, a, b, "%s rank %d %s entry %d", where, r, wq.Name, i)
			}
		}
	}
	return taken
}

// TestManagedSendsRing: on connectx-inline the ring allreduce's right.sq holds a WAIT before
// every message but the first (4 (ranks - 1) - 1 entries). Past a queue's capacity the queue is
// managed from management queues of its own, which replay proves, and the plan runs.
func TestManagedSendsRing(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../plans/ring_allreduce.dag")
	require.NoError(t, err)
	small := shallowInline(t, 16)
	big := shallowInline(t, 1<<15)
	for _, ranks := range []int64{4, 5, 6, 8} { // 11, 15, 19 and 27 entries on right.sq
		g, err := planner.Load(t.Context(), "ring_allreduce.dag", withDepth(src, 16), map[string]int64{"ranks": ranks, "n": 2}, planner.Options{})
		require.NoError(t, err)
		p, err := lower.Compile(t.Context(), g, small)
		require.NoError(t, err, "ranks %d", ranks)
		deep, err := planner.Load(t.Context(), "ring_allreduce.dag", withDepth(src, 1024), map[string]int64{"ranks": ranks, "n": 2}, planner.Options{})
		require.NoError(t, err)
		whole, err := lower.Compile(t.Context(), deep, big)
		require.NoError(t, err)
		where := fmt.Sprintf("ranks %d", ranks)
		n := checkManagedSends(t, p, whole, 16, where)
		if ranks >= 6 {
			assert.Equal(t, int(ranks), n, "%s: every rank's right.sq is taken over", where)
		} else {
			assert.Zero(t, n, where)
		}
		require.NoError(t, replay.Check(t.Context(), p, replay.Options{}), where)
		require.NoError(t, replay.Check(t.Context(), p, replay.Options{Iterations: 3, FirstIter: 1<<16 - 2}), where)
		if ranks == 8 {
			var b bytes.Buffer
			require.NoError(t, listing.Write(&b, p, listing.Options{Ranks: []int{0}}))
			for _, line := range []string{
				"\n  right.sq  send, managed, depth 16, cq right.scq (1 per iteration), 14 WQEs per iteration\n",
				"\n  right.mgmt  mgmt, depth 16, cq right.mgmt.cq (1 per iteration), 16 WQEs per iteration\n" +
					"    [0]   SEND_EN   enable right.sq up to 1                       tx[0]  ring_allreduce.dag:33\n" +
					"    [1]   CQE_WAIT  wait host.cq >= 1  (red[0] done)              tx[1]  ring_allreduce.dag:33\n",
				"\n  right.mgmt1  mgmt, depth 16, cq right.mgmt1.cq (1 per iteration), 12 WQEs per iteration\n" +
					"    [0]   CQE_WAIT  wait right.mgmt.cq >= 1  (right.mgmt done)             ag[1]  ring_allreduce.dag:40\n",
			} {
				assert.Contains(t, b.String(), line)
			}
		}
	}
}

// TestManagedSendsPlans does the same for plans/ and random graphs with queues of 8 WQEs.
func TestManagedSendsPlans(t *testing.T) {
	t.Parallel()
	const depth = 8
	small := shallowInline(t, depth)
	big := shallowInline(t, 1<<15)
	files, err := filepath.Glob("../../plans/*.dag")
	require.NoError(t, err)
	taken, plans := 0, 0
	check := func(g, deep *ir.Graph, where string) {
		whole, err := lower.Compile(t.Context(), deep, big)
		if err != nil {
			return // a chain longer than the plan's deep queues: too large for this test
		}
		p, err := lower.Compile(t.Context(), g, small)
		if err != nil {
			// Only a queue that cannot be taken over: data WQEs alone past the depth, or the
			// host-signal queue.
			require.ErrorContains(t, err, "WQEs", where)
			return
		}
		plans++
		if checkManagedSends(t, p, whole, depth, where) > 0 {
			taken++
		}
		require.NoError(t, replay.Check(t.Context(), p, replay.Options{}), where)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, ranks := range []int64{3, 4} {
			params := map[string]int64{"ranks": ranks, "n": 1}
			g, err := planner.Load(t.Context(), filepath.Base(f), withDepth(src, depth), params, planner.Options{})
			if err != nil {
				continue
			}
			deep, err := planner.Load(t.Context(), filepath.Base(f), withDepth(src, 1024), params, planner.Options{})
			require.NoError(t, err)
			check(g, deep, fmt.Sprintf("%s ranks %d", filepath.Base(f), ranks))
		}
	}
	for seed := uint64(1); seed <= 150; seed++ {
		cfg := randgraph.Config{MaxRanks: 4, MaxSteps: 40, Depth: depth}
		g := randgraph.New(seed, cfg)
		cfg.Depth = 1024
		check(g, randgraph.New(seed, cfg), fmt.Sprintf("random graph seed %d", seed))
	}
	t.Logf("%d plans compiled, %d of them with a send queue taken over", plans, taken)
	assert.GreaterOrEqual(t, taken, 20, "too few plans took a send queue over to prove anything")
}
