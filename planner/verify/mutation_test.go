package verify

import (
	"fmt"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
)

// mutateRanks are the world sizes each mutant is verified at; a deletion counts as reported
// when Verify finds an error at any of them (plans that need a power of two skip 3).
var mutateRanks = []int64{3, 4, 8}

// harmlessDeletions lists the `after` edges of plans/ whose deletion leaves the final memory
// independent of timing, keyed "file:line:col of the reference -> waiting op's line", with why.
// Every other deletion must make Verify report an error.
var harmlessDeletions = map[string]string{
	// The barrier has no buffers: its edges order synchronisation only, so without them the
	// plan is no longer a barrier (its `expect barrier` fails: planner/prove's
	// TestBarrierNeedsEachEdge), but no memory depends on timing.
	"dissemination_barrier.dag:28:39 -> 23": "no memory: arrive[k] after heard[j] only paces the rounds",
	"dissemination_barrier.dag:31:40 -> 30": "no memory: done is a nop",
	// Each put[s] writes a distinct block of a distinct peer's dst and reads src, which nobody
	// writes: the edge is flow control (one message in flight per rank), not a data dependency.
	"pairwise_alltoall.dag:35:27 -> 33":  "flow control only: blocks written are disjoint and src is read-only",
	"pairwise_alltoallv.dag:43:27 -> 41": "flow control only, as in pairwise_alltoall",
	// full[k] waits for put[k], whose completion follows full[k - 1]'s on the same queue (queue
	// order): the head adds land in order without the edge, which the plan keeps for the reader.
	"credit_ring.dag:49:19 -> 43": "implied: full[k] after put[k], which completes after full[k - 1] on queue right",
	// done is a nop that marks the end of the gather; it touches no memory.
	"read_gather.dag:31:16 -> 23": "done is a nop with no accesses",
}

// clauseEdges groups a Graph's edges by source-level edge: the reference (Edge.Pos) and the
// statement of the op that waits (one clause like `tx[s], rx[s] after red[s-1]` makes two).
func clauseEdges(g *ir.Graph) (keys []string, edges map[string][]int) {
	edges = map[string][]int{}
	for i, e := range g.Edges {
		k := fmt.Sprintf("%s:%d:%d -> %d", filepath.Base(e.Pos.Filename()), e.Pos.Line, e.Pos.Col, g.Ops[e.To].Pos.Line)
		if _, ok := edges[k]; !ok {
			keys = append(keys, k)
		}
		edges[k] = append(edges[k], i)
	}
	return keys, edges
}

// withoutEdges returns a copy of g without the edges at the given indices.
func withoutEdges(g *ir.Graph, drop []int) *ir.Graph {
	skip := map[int]bool{}
	for _, i := range drop {
		skip[i] = true
	}
	var edges []ir.Edge
	for i, e := range g.Edges {
		if !skip[i] {
			edges = append(edges, e)
		}
	}
	return g.WithEdges(edges)
}

// TestMutationDeleteEachAfter deletes each source-level `after` edge of every plan in turn: the
// deletion must be reported unless it is listed in harmlessDeletions (and a listed one must
// really be harmless, so the list stays honest).
func TestMutationDeleteEachAfter(t *testing.T) {
	t.Parallel()
	caught := map[string]bool{}
	var all []string
	for _, path := range planFiles(t) {
		for _, ranks := range mutateRanks {
			if !elaborates(path, ranks) {
				continue
			}
			g := loadPlan(t, path, map[string]int64{"ranks": ranks})
			keys, edges := clauseEdges(g)
			for _, k := range keys {
				if _, ok := caught[k]; !ok {
					all = append(all, k)
					caught[k] = false
				}
				if errs := Check(t.Context(), withoutEdges(g, edges[k])); len(errs) > 0 {
					caught[k] = true
					assertOnlyRaces(t, k, errs)
				}
			}
		}
	}
	sort.Strings(all)
	assert.GreaterOrEqual(t, len(all), 20, "source-level edges mutated")
	for _, k := range all {
		reason, harmless := harmlessDeletions[k]
		if harmless {
			assert.False(t, caught[k], "deleting %s is listed as harmless (%s) but Verify reports it", k, reason)
		} else {
			assert.True(t, caught[k], "deleting %s makes the plan timing-dependent, but Verify is silent", k)
		}
	}
	for k := range harmlessDeletions {
		assert.Contains(t, caught, k, "harmlessDeletions names an edge that no longer exists")
	}
}

// assertOnlyRaces checks that deleting an edge yields races, never a cycle or deadlock: removing
// an ordering cannot create a loop of waits.
func assertOnlyRaces(t *testing.T, key string, errs diag.List) {
	t.Helper()
	for _, e := range errs {
		assert.Regexp(t, "^race on rank", e.Msg, "deleting %s", key)
	}
}
