package verify

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate"
)

// TestSuggestFixes removes an ordering from the one-slot ring allreduce and checks that the suggested
// edges really make the plan race-free, and that they are the edges the plan had.
func TestSuggestFixes(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../testdata/scale/ring_allreduce.dag")
	require.NoError(t, err)
	broken := strings.Replace(string(src), "tx[s], rx[s] after red[s - 1]", "tx[s] after red[s - 1]", 1)
	require.NotEqual(t, string(src), broken, "the plan changed: update the test")
	f, err := dsl.Parse("ring.dag", []byte(broken))
	require.NoError(t, err)
	g, err := elaborate.Elaborate(t.Context(), f, map[string]int64{"ranks": 4}, elaborate.Options{})
	require.NoError(t, err)
	require.NotEmpty(t, Races(t.Context(), g))
	edges := len(g.Edges)

	plan := SuggestFixes(t.Context(), g)
	assert.True(t, plan.Complete)
	assert.Len(t, g.Edges, edges, "the graph is not modified")
	var found bool
	for _, e := range plan.Edges {
		if e.Op == "rx[1]" && e.After == "red[0]" {
			found = true
			assert.Equal(t, []int{0, 1, 2, 3}, e.Ranks)
		}
	}
	assert.True(t, found, "expected rx[1] after red[0] among:\n%s", plan)

	assert.Len(t, plan.Edges, 2, "implied edges are pruned:\n%s", plan)
	// Apply the suggestion on every listed rank: the plan must verify clean.
	assert.Empty(t, Check(t.Context(), applyPlan(t, g, plan.Edges)))
}

// applyPlan returns a copy of g with the suggested edges added on every rank they list, found
// by the names of their ops.
func applyPlan(t *testing.T, g *ir.Graph, edges []FixEdge) *ir.Graph {
	t.Helper()
	named := func(r int, name string) ir.OpID {
		first, end := g.RankOps(r)
		for id := first; id < end; id++ {
			if g.Ops[id].Name == name {
				return id
			}
		}
		t.Fatalf("no op %s on rank %d", name, r)
		return ir.None
	}
	out := slices.Clone(g.Edges)
	for _, e := range edges {
		for _, r := range e.Ranks {
			out = append(out, ir.Edge{From: named(r, e.After), To: named(r, e.Op)})
		}
	}
	return g.WithEdges(out)
}

// TestFixBudget checks that a search for fixes past Options.FixBudget suggests nothing, and
// says why, rather than an edge it has not proven.
func TestFixBudget(t *testing.T) {
	t.Parallel()
	g := graphOf(t, `plan p
param ranks = 2
buffer data f32[4] init rank + 1
buffer tmp f32[4]
queue q to (rank + 1) % ranks
op tx = send q data
op rx = recv q tmp
op red = reduce sum data from tmp after rx
`)
	errs := Check(t.Context(), g)
	require.Len(t, errs, 1)
	require.NotNil(t, errs[0].Fix)
	assert.Equal(t, "add `red after tx` on every rank", errs[0].Fix.Msg)

	tight := Options{FixBudget: 10}
	errs = tight.Check(t.Context(), g)
	require.Len(t, errs, 1)
	assert.Nil(t, errs[0].Fix)
	assert.Contains(t, errs[0].Msg, "(no `after` suggested: proving one would take more than the search budget)")
	plan := tight.SuggestFixes(t.Context(), g)
	assert.False(t, plan.Complete)
	assert.Empty(t, plan.Edges)
	require.Len(t, plan.Unfixed, 1)
	assert.Contains(t, plan.Unfixed[0], "race on rank 0's data between send tx on rank 0 and reduce red on rank 0")
}

// TestNoSingleEdge checks the races no `after` edge fixes: a receive into the buffer its own
// rank's send reads (every ordering of the two is a loop of waits through the matching), and
// writes from two ranks that no message orders.
func TestNoSingleEdge(t *testing.T) {
	t.Parallel()
	g := graphOf(t, `plan p
param ranks = 2
buffer d u64[4]
queue q to (rank + 1) % ranks
op tx = send q d
op rx = recv q d
`)
	errs := Check(t.Context(), g)
	require.Len(t, errs, 1)
	assert.Nil(t, errs[0].Fix)
	assert.Contains(t, errs[0].Msg, "(no single `after` edge fixes this race without a deadlock: use another buffer for one of the two accesses, or order them through other ops)")
	plan := SuggestFixes(t.Context(), g)
	assert.False(t, plan.Complete)
	assert.Empty(t, plan.Edges)
	assert.Len(t, plan.Unfixed, 1)

	g = graphOf(t, `plan p
param ranks = 3
buffer d u64[4] remote_write
buffer e u64[4]
if rank == 0 {
  for p in 1 .. ranks { queue inq[p] to p peer up }
} else {
  queue up to 0 peer inq[rank]
  op w = write up e to d
}
`)
	errs = Check(t.Context(), g)
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Msg, "(no single `after` edge fixes this race, as no message orders these ranks' ops: pass a token (rank 1 sends to rank 2 after w, and w on rank 2 is `after` the recv of it))")
}

// BenchmarkCheckRacy checks the ring allreduce without its ordering on the receive buffer
// (a race on every rank at every step), with the proven fixes of its diagnostics and without
// (a negative FixBudget): the difference is the cost of the search and of its proof.
func BenchmarkCheckRacy(b *testing.B) {
	src, err := os.ReadFile("../../testdata/scale/ring_allreduce.dag")
	require.NoError(b, err)
	racy := strings.Replace(string(src), "tx[s], rx[s] after red[s - 1]", "tx[s] after red[s - 1]", 1)
	f, err := dsl.Parse("ring.dag", []byte(racy))
	require.NoError(b, err)
	for _, ranks := range []int64{16, 64} {
		g, err := elaborate.Elaborate(b.Context(), f, map[string]int64{"ranks": ranks}, elaborate.Options{})
		require.NoError(b, err)
		for _, fixes := range []bool{false, true} {
			opt := Options{FixBudget: -1}
			if fixes {
				opt.FixBudget = 0
			}
			b.Run(fmt.Sprintf("ranks=%d/fixes=%v", ranks, fixes), func(b *testing.B) {
				for b.Loop() {
					errs := opt.Check(b.Context(), g)
					if len(errs) == 0 || (errs[0].Fix != nil) != fixes {
						b.Fatalf("unexpected: %v", errs)
					}
				}
			})
		}
	}
}
