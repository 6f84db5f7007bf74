package ir_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/randgraph"
	"github.com/coredag/coredag/ir"
)

// wantAdjacency is Preds and Succs of every op computed from Edges alone.
func wantAdjacency(g *ir.Graph) (preds, succs [][]int32) {
	preds, succs = make([][]int32, len(g.Ops)), make([][]int32, len(g.Ops))
	for _, e := range g.Edges {
		preds[e.To] = append(preds[e.To], int32(e.From))
		succs[e.From] = append(succs[e.From], int32(e.To))
	}
	return preds, succs
}

// TestFrozenGraphConcurrentReads reads fresh Graphs from several goroutines at once: nothing
// is built lazily, so `go test -race` finds no write.
func TestFrozenGraphConcurrentReads(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		g := randgraph.New(seed, randgraph.DefaultConfig)
		require.True(t, g.Frozen())
		preds, succs := wantAdjacency(g)
		var wg sync.WaitGroup
		got := make([][2][][]int32, 6)
		for w := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, s := make([][]int32, len(g.Ops)), make([][]int32, len(g.Ops))
				for id := range g.Ops {
					p[id] = slices.Clone(g.Preds(ir.OpID(id)))
					s[id] = slices.Clone(g.Succs(ir.OpID(id)))
					_ = g.OpString(ir.OpID(id))
				}
				for r := 0; r < g.Ranks; r++ {
					g.RankOps(r)
				}
				got[w] = [2][][]int32{p, s}
			}()
		}
		wg.Wait()
		for _, x := range got {
			for id := range g.Ops {
				assert.ElementsMatch(t, preds[id], x[0][id], "seed %d preds of op %d", seed, id)
				assert.ElementsMatch(t, succs[id], x[1][id], "seed %d succs of op %d", seed, id)
			}
		}
	}
}

// TestGraphVariants: WithEdges and Clone build new Graphs and leave the original as it was.
func TestGraphVariants(t *testing.T) {
	g := randgraph.New(3, randgraph.DefaultConfig)
	require.NotEmpty(t, g.Edges)
	edges := slices.Clone(g.Edges)
	bare := g.WithEdges(nil)
	assert.True(t, bare.Frozen())
	for id := range bare.Ops {
		assert.Empty(t, bare.Preds(ir.OpID(id)))
	}
	assert.Equal(t, edges, g.Edges)
	c := g.Clone()
	assert.False(t, c.Frozen())
	c.Ops[0].Site = &ir.Site{Name: "changed"}
	c.Edges = c.Edges[:0]
	assert.NotEqual(t, "changed", g.Ops[0].Name)
	assert.Equal(t, edges, g.Edges)
	assert.Panics(t, func() { c.Preds(0) }, "an unfrozen Graph is not read")
	assert.Panics(t, func() { g.Freeze() }, "a frozen Graph stays frozen")
}

// TestNewDepsLarge: past the size at which NewDeps builds predecessors and successors on two
// goroutines, it still lists every op's in edge order.
func TestNewDepsLarge(t *testing.T) {
	const n, m = 5000, 1 << 17
	g := &ir.Graph{Ops: make([]ir.Op, n)}
	x := uint32(1)
	for range m {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		g.Edges = append(g.Edges, ir.Edge{From: ir.OpID(x % n), To: ir.OpID(x / n % n)})
	}
	preds, succs := wantAdjacency(g)
	d := ir.NewDeps(n, g.Edges)
	for o := range ir.OpID(n) {
		require.Equal(t, len(preds[o]), int(d.NumPreds(o)), "op %d", o)
		if len(preds[o]) > 0 {
			require.Equal(t, preds[o], d.Preds(o), "preds of op %d", o)
		}
		if len(succs[o]) > 0 {
			require.Equal(t, succs[o], d.Succs(o), "succs of op %d", o)
		}
	}
}

// HasAtomics is true exactly when some op is a fetch-add or a compare-swap.
func TestHasAtomics(t *testing.T) {
	g := &ir.Graph{Ops: []ir.Op{{Kind: ir.OpWrite}, {Kind: ir.OpRead}, {Kind: ir.OpRecv}}}
	assert.False(t, g.HasAtomics())
	assert.False(t, (&ir.Graph{}).HasAtomics())
	for _, k := range []ir.OpKind{ir.OpAtomicAdd, ir.OpAtomicCAS} {
		h := &ir.Graph{Ops: append(slices.Clone(g.Ops), ir.Op{Kind: k})}
		assert.True(t, h.HasAtomics(), "%v", k)
	}
}
