package verify_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/e2e"
	"github.com/coredag/coredag/internal/randgraph"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planner/verify"
)

// checkReach compares the race check's reachability oracle with a plain search on every pair of
// events of g, or on a sample of 100,000 pairs (drawn with seed) when there are more.
func checkReach(t *testing.T, g *ir.Graph, seed uint64, what string) {
	t.Helper()
	checkReachOrdered(t, g, ir.OrderNone, seed, what)
}

// checkReachOrdered is checkReach on g's happens-before graph with the edges of the ordering
// ord (whose drained orders, made for the RNR lint without ordering, are not compared). It
// returns how many pairs are ordered.
func checkReachOrdered(t *testing.T, g *ir.Graph, ord ir.Order, seed uint64, what string) int {
	t.Helper()
	n := verify.HBEvents(g)
	require.NotZero(t, n, "%s: cyclic", what)
	var pairs [][2]int32
	const most = 100_000
	if n*n > most {
		rng := rand.New(rand.NewPCG(seed, 0))
		for range most {
			pairs = append(pairs, [2]int32{rng.Int32N(int32(n)), rng.Int32N(int32(n))})
		}
	} else {
		for x := range n {
			for y := range n {
				pairs = append(pairs, [2]int32{int32(x), int32(y)})
			}
		}
	}
	fast, plain := verify.HBReachOrdered(g, ord, pairs, false)
	wide, _ := verify.HBReachOrdered(g, ord, pairs, true)
	var drained [2][]int32
	if ord == ir.OrderNone {
		drained = verify.HBDrained(g)
	}
	ordered := 0
	for _, pos := range drained {
		seen := make([]bool, n)
		for _, p := range pos {
			require.False(t, seen[p], "%s: a drained order places two events at %d", what, p)
			seen[p] = true
		}
	}
	for i, p := range pairs {
		if plain[i] {
			ordered++
		}
		if fast[i] != plain[i] || wide[i] != plain[i] {
			t.Fatalf("%s: event %d happens before event %d: oracle says %v (%v with 32-bit labels), search says %v", what, p[0], p[1], fast[i], wide[i], plain[i])
		}
		// The drained orders answer "no" for the RNR lint: they must keep every ordered pair.
		for k, pos := range drained {
			if plain[i] && pos != nil && pos[p[1]] < pos[p[0]] {
				t.Fatalf("%s: event %d happens before event %d, but drained order %d puts it after", what, p[0], p[1], k)
			}
		}
	}
	return ordered
}

// The oracle stays exact with the edges of an ordering, whose paths go through the landings of
// consecutive ops of one queue (and so from rank to rank through landings alone): the graphs
// have more ordered pairs than without.
func TestReachRandomGraphsOrdered(t *testing.T) {
	t.Parallel()
	const seed0 = 20261202
	n := e2e.Cases(48, 16) // all of them under CI; each config and ordering four times otherwise
	configs := []randgraph.Config{
		{},
		{MinRanks: 4, MaxRanks: 12, MaxSteps: 60, MaxPreds: 2},
		{MinRanks: 8, MaxRanks: 16, MaxSteps: 50, MaxPreds: 1},
		{MinRanks: 20, MaxRanks: 24, MaxSteps: 300, MaxPreds: 1},
	}
	orders := []ir.Order{ir.OrderRC, ir.OrderStrict, ir.OrderSAS | ir.OrderWAW, ir.OrderSAW}
	more := 0
	for k := range uint64(n) {
		seed := seed0 + k
		cfg := configs[k%uint64(len(configs))]
		g := randgraph.New(seed, cfg)
		ord := orders[k%uint64(len(orders))]
		what := fmt.Sprintf("seed %d (config %+v, ordering %v)", seed, cfg, ord)
		if checkReachOrdered(t, g, ord, seed, what) > checkReachOrdered(t, g, ir.OrderNone, seed, what) {
			more++
		}
	}
	require.Greater(t, more, n/2, "too few graphs whose ordering orders more pairs")
}

func TestReachRandomGraphs(t *testing.T) {
	t.Parallel()
	const seed0 = 20260301
	n := e2e.Cases(240, 60) // all of them under CI; each config 15 times otherwise
	configs := []randgraph.Config{
		{},
		{MinRanks: 4, MaxRanks: 12, MaxSteps: 60, MaxPreds: 2},
		{MinRanks: 8, MaxRanks: 16, MaxSteps: 50, MaxPreds: 1},
		{MinRanks: 20, MaxRanks: 24, MaxSteps: 300, MaxPreds: 1}, // separators too big to use
	}
	for k := range uint64(n) {
		seed := seed0 + k
		cfg := configs[k%uint64(len(configs))]
		checkReach(t, randgraph.New(seed, cfg), seed, fmt.Sprintf("seed %d (config %+v)", seed, cfg))
	}
}

// The plans whose ranks talk along a ring, a chain or a tree, where the oracle goes through
// separators rather than falling back.
func TestReachPlans(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"ring_allreduce", "ring_allgather", "pipeline_chain", "binomial_reduce", "recursive_doubling_allreduce", "atomic_fanin", "notify_scatter"} {
		for _, ranks := range []int64{5, 8} {
			path := "../../plans/" + name + ".dag"
			src, err := os.ReadFile(path)
			require.NoError(t, err)
			f, err := dsl.Parse(path, src)
			require.NoError(t, err)
			g, err := elaborate.Elaborate(t.Context(), f, map[string]int64{"ranks": ranks, "n": 4}, elaborate.Options{})
			if err != nil {
				continue // needs another world size
			}
			checkReach(t, g, 1, fmt.Sprintf("%s ranks=%d", name, ranks))
		}
	}
}

// The race sweep gives the same races, in the same order, whatever the number of workers
// sweeping its (rank, buffer) groups: on random graphs (many of which race) and on the plans.
func TestRacesWorkers(t *testing.T) {
	t.Parallel()
	var graphs []*ir.Graph
	// Long graphs, so that some checks outrun the bounded search and are answered exactly.
	cfg := randgraph.Config{MinRanks: 3, MaxRanks: 10, MaxSteps: 240, MaxPreds: 1}
	for k := range uint64(60) {
		g := randgraph.New(20261124+k, cfg)
		// randgraph's graphs are race-free; without every other `after` most of them race.
		var kept []ir.Edge
		for i, e := range g.Edges {
			if i%2 == 0 {
				kept = append(kept, e)
			}
		}
		graphs = append(graphs, g, g.WithEdges(kept))
	}
	graphs = append(graphs, plansAt8(t, "ring_allreduce", "pairwise_alltoall", "recursive_doubling_allreduce")...)
	racy := 0
	for i, g := range graphs {
		one := verify.RacesOn(g, 1)
		if len(one) > 0 {
			racy++
		}
		// Every (rank, buffer) with a race reports one, and no other.
		got := map[[2]int]bool{}
		for _, r := range one {
			got[[2]int{r.Rank(), int(r.Buf())}] = true
		}
		require.Equal(t, verify.RacyBuffers(g), got, "graph %d", i)
		for _, w := range []int{2, 3, 5} {
			require.Equal(t, one, verify.RacesOn(g, w), "graph %d, %d workers", i, w)
		}
	}
	require.Greater(t, racy, 5, "too few random graphs race to test the merge")
}

// CheckDeadlocks skips the checks of `after` cycles and `after` against queue order when the
// happens-before graph is acyclic: on random graphs with random `after` edges added within a
// rank, neither may then find anything (and some must find something, for the test to count).
func TestEarlyDeadlocksNeedAnHBCycle(t *testing.T) {
	t.Parallel()
	found := 0
	for k := range uint64(300) {
		g := randgraph.New(20261125+k, randgraph.Config{MinRanks: 2, MaxRanks: 4, MaxSteps: 20})
		rng := rand.New(rand.NewPCG(k, 7))
		edges := slices.Clone(g.Edges)
		for range 1 + rng.IntN(3) {
			r := rng.IntN(g.Ranks)
			first, end := g.RankOps(r)
			if end-first < 2 {
				continue
			}
			a, b := first+ir.OpID(rng.IntN(int(end-first))), first+ir.OpID(rng.IntN(int(end-first)))
			edges = append(edges, ir.Edge{From: a, To: b})
		}
		m := g.WithEdges(edges)
		cycles, queueOrder, acyclic := verify.EarlyDeadlocks(m)
		if acyclic {
			require.Zero(t, cycles+queueOrder, "seed %d: acyclic happens-before graph, but %d cycles and %d queue order errors", k, cycles, queueOrder)
		} else if cycles+queueOrder > 0 {
			found++
		}
	}
	require.Greater(t, found, 30, "mutants with an `after` cycle or an `after` against queue order")
}

// The happens-before graph built op by op on several workers has the lists hbEdges gives, in
// its order, and so the same topological order: on random graphs (some with cycles) and plans.
func TestHBOpByOp(t *testing.T) {
	t.Parallel()
	var graphs []*ir.Graph
	for k := range uint64(40) {
		g := randgraph.New(20261126+k, randgraph.Config{MinRanks: 2, MaxRanks: 8, MaxSteps: 60, MaxPreds: 2})
		graphs = append(graphs, g)
		// Random `after` edges within a rank, which close cycles in some.
		edges := slices.Clone(g.Edges)
		for i := 0; i+7 < len(g.Ops); i += 7 {
			if g.Ops[i].Rank == g.Ops[i+7].Rank {
				edges = append(edges, ir.Edge{From: ir.OpID(i + 7), To: ir.OpID(i)})
			}
		}
		graphs = append(graphs, g.WithEdges(edges))
	}
	graphs = append(graphs, plansAt8(t, "ring_allreduce", "pairwise_alltoall", "atomic_fanin", "bruck_alltoall")...)
	cyclic, withOrder := 0, 0
	for i, g := range graphs {
		for _, matching := range []bool{true, false} {
			for _, w := range []int{1, 3} {
				var unordered [][]int32
				for _, ord := range []ir.Order{ir.OrderNone, ir.OrderRC, ir.OrderStrict, ir.OrderSAS | ir.OrderWAW} {
					lists, want, topo, wantTopo, opByOp := verify.HBBothWays(g, matching, ord, w)
					require.True(t, opByOp, "graph %d", i)
					if ord == ir.OrderNone {
						unordered = lists
					} else if !slices.EqualFunc(lists, unordered, slices.Equal) {
						withOrder++
					}
					require.Equal(t, want, lists, "graph %d, matching %v, %d workers, ordering %v", i, matching, w, ord)
					require.Equal(t, wantTopo, topo, "graph %d, matching %v, %d workers, ordering %v", i, matching, w, ord)
					if topo == nil && ord == ir.OrderNone {
						cyclic++
					}
				}
			}
		}
	}
	require.Greater(t, cyclic, 4, "too few cyclic graphs")
	require.Greater(t, withOrder, len(graphs), "too few graphs with ordering edges")
}

// Check, its order of events and the RNR lint give the same results, to the byte, however many
// goroutines share their work (the happens-before graph, the accesses, the sweep, the
// renumbering, the split of the deferred queries): on random graphs, most of which race or
// deadlock, and on plans.
func TestChecksWhateverTheWorkers(t *testing.T) {
	t.Parallel()
	var graphs []*ir.Graph
	cfg := randgraph.Config{MinRanks: 3, MaxRanks: 10, MaxSteps: 240, MaxPreds: 1}
	for k := range uint64(30) {
		g := randgraph.New(20261127+k, cfg)
		var kept, cyclic []ir.Edge
		for i, e := range g.Edges {
			if i%2 == 0 {
				kept = append(kept, e)
			}
			cyclic = append(cyclic, e)
			if i%13 == 0 {
				cyclic = append(cyclic, ir.Edge{From: e.To, To: e.From, Pos: e.Pos})
			}
		}
		graphs = append(graphs, g, g.WithEdges(kept), g.WithEdges(cyclic))
	}
	graphs = append(graphs, plansAt8(t, "ring_allreduce", "pairwise_alltoall", "atomic_fanin", "bruck_alltoall")...)
	// run gives everything the checks say about g, as text.
	run := func(g *ir.Graph, workers int) string {
		errs, o := verify.Options{Workers: workers}.CheckOrder(t.Context(), g)
		out := fmt.Sprintln(len(errs))
		for _, d := range errs {
			out += d.Error() + "\n"
		}
		if o != nil {
			for i := range g.Ops {
				id := ir.OpID(i)
				out += fmt.Sprint(o.Start(id), o.Land(id), o.End(id), " ")
			}
			out += verify.RNR(t.Context(), g).Error()
		}
		return out
	}
	racy, passing := 0, 0
	for i, g := range graphs {
		one := run(g, 1)
		if strings.Contains(one, "race on") {
			racy++
		}
		if strings.HasPrefix(one, "0\n") {
			passing++
		}
		for _, w := range []int{2, 4} {
			require.Equal(t, one, run(g, w), "graph %d, %d workers", i, w)
		}
	}
	require.Greater(t, racy, 5, "too few random graphs race")
	require.Greater(t, passing, 5, "too few graphs pass")
}

// plansAt8 elaborates the named plans of plans/ at 8 ranks.
func plansAt8(t *testing.T, names ...string) []*ir.Graph {
	var graphs []*ir.Graph
	for _, name := range names {
		path := "../../plans/" + name + ".dag"
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		f, err := dsl.Parse(path, src)
		require.NoError(t, err)
		g, err := elaborate.Elaborate(t.Context(), f, map[string]int64{"ranks": 8}, elaborate.Options{})
		require.NoError(t, err)
		graphs = append(graphs, g)
	}
	return graphs
}

// The search that follows paths within ranks first (deep) is exact when it answers, in either
// numbering of the nodes, on random graphs with long ranks.
func TestDeepRandomGraphs(t *testing.T) {
	t.Parallel()
	answered := [2]int{}
	for k := range uint64(e2e.Cases(16, 8)) {
		seed := 20261203 + k
		g := randgraph.New(seed, randgraph.Config{MinRanks: 4, MaxRanks: 12, MaxSteps: 80, MaxPreds: 2})
		n := verify.HBEvents(g)
		require.NotZero(t, n)
		rng := rand.New(rand.NewPCG(seed, 1))
		pairs := make([][2]int32, 2000)
		for i := range pairs {
			pairs[i] = [2]int32{rng.Int32N(int32(n)), rng.Int32N(int32(n))}
		}
		for _, byPos := range []bool{false, true} {
			for _, budget := range []int{4, 64} {
				deep, _, plain := verify.HBDeep(g, pairs, budget, byPos)
				for i, p := range pairs {
					if deep[i] >= 0 {
						answered[deep[i]]++
						require.Equal(t, plain[i], deep[i] == 1, "seed %d, budget %d, by position %v: does event %d happen before %d", seed, budget, byPos, p[0], p[1])
					}
				}
			}
		}
	}
	require.NotZero(t, answered[0], "no question answered no")
	require.NotZero(t, answered[1], "no question answered yes")
}

// In Swing every op of a step waits for a nop of the step before (more ops than a bounded search
// visits): the path from a reduce of the first step to the copy into the same block in the
// allgather goes through every step of the rank. deep finds it within the budget where reach
// gives up.
func TestDeepFollowsTheSteps(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../testdata/scale/swing_allreduce.dag")
	require.NoError(t, err)
	f, err := dsl.Parse("swing_allreduce.dag", src)
	require.NoError(t, err)
	g, err := elaborate.Elaborate(t.Context(), f, map[string]int64{"ranks": 64, "n": 1}, elaborate.Options{})
	require.NoError(t, err)
	// Rank 0's reduces of step 0, and its copies from the peer of step 1 in the allgather.
	red, agu := map[string]int32{}, map[string]int32{}
	for i := g.Rank[0].FirstOp; i < g.Rank[0].EndOp; i++ {
		name := g.Ops[i].Name
		if b, ok := strings.CutPrefix(name, "red[0,"); ok {
			red[b] = int32(i)
		}
		if b, ok := strings.CutPrefix(name, "agu[1,"); ok {
			agu[b] = int32(i)
		}
	}
	var pairs [][2]int32
	for b, r := range red {
		if a, ok := agu[b]; ok {
			pairs = append(pairs, [2]int32{3*r + 2, 3 * a}) // the reduce's end, the copy's start
		}
	}
	require.NotEmpty(t, pairs)
	for _, byPos := range []bool{false, true} {
		deep, bounded, plain := verify.HBDeep(g, pairs, 64, byPos)
		for i := range pairs {
			require.True(t, plain[i])
			require.Equal(t, -1, bounded[i], "reach answered within the budget")
			require.Equal(t, 1, deep[i], "by position %v: %s before %s", byPos, g.Ops[pairs[i][0]/3].Name, g.Ops[pairs[i][1]/3].Name)
		}
	}
}
