package verify

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
)

// The heap of the drained orders' turns and of the fix search gives the smallest first, pushes and
// pops mixed.
func TestMinHeap(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 0))
	var h minHeap
	var want []uint64
	for range 2000 {
		if len(want) > 0 && rng.IntN(3) == 0 {
			slices.Sort(want)
			require.Equal(t, want[0], h.pop())
			want = want[1:]
			continue
		}
		x := rng.Uint64N(500)
		h.push(x)
		want = append(want, x)
	}
	slices.Sort(want)
	for _, x := range want {
		require.Equal(t, x, h.pop())
	}
	require.Empty(t, h)
}

// In the ring allreduce every RNR question answers "no", and the drained orders show it for
// every one of them (the ascending order for all but the receives on rank 0, whose sender is the
// last rank; the descending order for those).
func TestDrainedRing(t *testing.T) {
	t.Parallel()
	g := ringGraph(t, 16)
	h := newHB(g, true, &Options{})
	ready := make([][]int32, g.Ranks)
	asc, desc := h.drained(false, make([]int32, h.n), ready), h.drained(true, make([]int32, h.n), ready)
	n := 0
	for i := range g.Ops {
		r := &g.Ops[i]
		if r.Kind != ir.OpRecv {
			continue
		}
		for _, p := range g.Preds(ir.OpID(i)) {
			x, y := endOf(ir.OpID(p)), startOf(r.Match)
			refuted := asc[y] < asc[x] || desc[y] < desc[x]
			require.True(t, refuted, "recv %s on rank %d, gate %s", r.Name, r.Rank, g.Ops[p].Name)
			n++
		}
	}
	require.Equal(t, 16*14, n) // rx[1] to rx[14] on each rank, gated by red[s-1]
}
