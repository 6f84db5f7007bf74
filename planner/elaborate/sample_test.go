package elaborate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
)

// ElaborateRanks makes of each rank it elaborates what Elaborate makes of it: the same ops,
// queues and edges, numbered from where the rank starts.
func TestElaborateRanks(t *testing.T) {
	t.Parallel()
	for _, plan := range []string{"ring_allreduce.dag", "double_binary_tree_allreduce.dag", "bruck_alltoall.dag"} {
		src, err := os.ReadFile(filepath.Join("..", "..", "plans", plan))
		require.NoError(t, err)
		f, err := dsl.Parse(plan, src)
		require.NoError(t, err)
		ps := map[string]int64{"ranks": 12}
		full, err := Elaborate(t.Context(), f, ps, Options{})
		require.NoError(t, err)
		ranks := []int{11, 0, 5, 6}
		s, err := ElaborateRanks(t.Context(), f, ps, ranks, Options{})
		require.NoError(t, err, plan)
		assert.Equal(t, []int{0, 5, 6, 11}, s.Ranks)
		assert.Equal(t, 12, s.Graph.Ranks)
		assert.Len(t, s.PeerNames, len(s.Graph.Queues))
		for r := range 12 {
			a, b := full.Rank[r], s.Graph.Rank[r]
			if b.EndOp == b.FirstOp {
				assert.NotContains(t, s.Ranks, r)
				continue
			}
			require.Equal(t, a.EndOp-a.FirstOp, b.EndOp-b.FirstOp, "%s rank %d", plan, r)
			for k := range int(a.EndOp - a.FirstOp) {
				x, y := full.Ops[int(a.FirstOp)+k], s.Graph.Ops[int(b.FirstOp)+k]
				if x.Queue != ir.None {
					x.Queue -= a.FirstQueue
					y.Queue -= b.FirstQueue
				}
				x.Match, y.Match = ir.None, ir.None
				require.Equal(t, x, y, "%s rank %d op %d", plan, r, k)
			}
			require.Equal(t, a.EndQueue-a.FirstQueue, b.EndQueue-b.FirstQueue)
			for k := range int(a.EndQueue - a.FirstQueue) {
				x, y := full.Queues[int(a.FirstQueue)+k], s.Graph.Queues[int(b.FirstQueue)+k]
				assert.Equal(t, x.Name, y.Name)
				assert.Equal(t, x.PeerRank, y.PeerRank)
				assert.Equal(t, full.Queues[x.Peer].Name, s.PeerNames[int(b.FirstQueue)+k])
				assert.Equal(t, len(x.SendOps), len(y.SendOps))
				assert.Equal(t, len(x.RecvOps), len(y.RecvOps))
			}
			var ea, eb [][2]ir.OpID
			for _, e := range full.Edges {
				if e.To >= a.FirstOp && e.To < a.EndOp {
					ea = append(ea, [2]ir.OpID{e.From - a.FirstOp, e.To - a.FirstOp})
				}
			}
			for _, e := range s.Graph.Edges {
				if e.To >= b.FirstOp && e.To < b.EndOp {
					eb = append(eb, [2]ir.OpID{e.From - b.FirstOp, e.To - b.FirstOp})
				}
			}
			assert.Equal(t, ea, eb, "%s rank %d", plan, r)
		}
	}
}

// A rank outside the world, or a plan with a mistake on a sampled rank, is an error.
func TestElaborateRanksErrors(t *testing.T) {
	t.Parallel()
	f, err := dsl.Parse("x.dag", []byte("plan x\nparam ranks = 4\nbuffer a u8[4]\nqueue q to (rank + 1) % ranks peer p\nqueue p to (rank - 1) % ranks peer q\nif rank == 2 { op s = send q a[0:8] }\n"))
	require.NoError(t, err)
	_, err = ElaborateRanks(t.Context(), f, nil, []int{0, 4}, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rank 4 is not a rank of the plan")
	_, err = ElaborateRanks(t.Context(), f, nil, nil, Options{})
	require.Error(t, err)
	_, err = ElaborateRanks(t.Context(), f, nil, []int{0, 1}, Options{})
	require.NoError(t, err, "rank 2's mistake is not elaborated")
	_, err = ElaborateRanks(t.Context(), f, nil, []int{0, 2}, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "x.dag:6:")
}
