package verify

import (
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
	g, err := elaborate.Elaborate(f, map[string]int64{"ranks": 4}, elaborate.Options{})
	require.NoError(t, err)
	require.NotEmpty(t, Races(g))
	edges := len(g.Edges)

	plan := SuggestFixes(g)
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
	assert.Empty(t, Check(applyPlan(t, g, plan.Edges)))
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
