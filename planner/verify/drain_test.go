package verify

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
)

// In the ring allreduce every RNR question answers "no", and the drained orders show it for
// every one of them (the ascending order for all but the receives on rank 0, whose sender is the
// last rank; the descending order for those).
func TestDrainedRing(t *testing.T) {
	t.Parallel()
	g := ringGraph(t, 16)
	h := newHB(t.Context(), g, true, &Options{})
	ready := make([][]int32, g.Ranks)
	asc, desc := h.drained(t.Context(), false, make([]int32, h.n), ready), h.drained(t.Context(), true, make([]int32, h.n), ready)
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
