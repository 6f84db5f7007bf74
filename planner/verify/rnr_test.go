package verify

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
)

// A receive held back by a local op its sender does not wait for is reported once per statement,
// at the recv, with its gate and the early send; a token from the receiver's gate to the sender
// silences it, and so does a receive posted up front.
func TestRNR(t *testing.T) {
	t.Parallel()
	late := `plan p
param ranks = 2
buffer a u64[4]
buffer b u64[4]
queue q to 1 - rank
op work = copy a to b
op tx = send q a
op rx = recv q b after work
`
	g := graphOf(t, late)
	require.Empty(t, Check(t.Context(), g))
	lint := RNR(t.Context(), g)
	require.Len(t, lint, 1, "%v", lint)
	d := lint[0]
	assert.Equal(t, diag.RNR, d.Code)
	assert.Equal(t, [2]uint32{8, 4}, [2]uint32{d.Pos.Line, d.Pos.Col})
	assert.Contains(t, d.Msg, "recv rx on rank 0 is posted only after work (its `after`), which send tx on rank 1 does not wait for")
	require.Len(t, d.Related, 2)
	assert.Equal(t, uint32(6), d.Related[0].Pos.Line) // the gate
	assert.Equal(t, uint32(7), d.Related[1].Pos.Line) // the send

	// The sender waits for a token the receiver sends after its gate.
	token := `plan p
param ranks = 2
buffer a u64[4]
buffer b u64[4]
queue q to 1 - rank
queue t to 1 - rank
op work = copy a to b
op go = send t after work
op gone = recv t
op tx = send q a after gone
op rx = recv q b after work
`
	g = graphOf(t, token)
	require.Empty(t, Check(t.Context(), g))
	assert.Empty(t, RNR(t.Context(), g))

	up := `plan p
param ranks = 2
buffer a u64[4]
buffer b u64[4]
queue q to 1 - rank
op tx = send q a
op rx = recv q b
`
	assert.Empty(t, RNR(t.Context(), graphOf(t, up)))
}

// The library's pairwise alltoall posts every receive up front: no warning at 64 ranks. The ring
// allreduce holds each receive back until the reduction that frees tmp: one warning.
func TestRNRPlans(t *testing.T) {
	t.Parallel()
	assert.Empty(t, RNR(t.Context(), loadPlan(t, "../../plans/pairwise_alltoall.dag", map[string]int64{"ranks": 64})))
	lint := RNR(t.Context(), ringGraph(t, 8))
	require.Len(t, lint, 1, "%v", lint)
	assert.Contains(t, lint[0].Msg, "recv rx[1] on rank 0 is posted only after red[0]")
}

// BenchmarkRNR is the RNR lint of the ring allreduce, where every gated receive warns (the
// questions all answer "no"), at growing world sizes.
func BenchmarkRNR(b *testing.B) {
	for _, ranks := range []int64{64, 128, 256} {
		g := ringGraph(b, ranks)
		b.Run(fmt.Sprintf("ranks=%d", ranks), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if lint := RNR(b.Context(), g); len(lint) != 1 {
					b.Fatal(lint)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(g.Ops)), "ns/planop")
		})
	}
}

// The lint run beside the race search on one happens-before graph (which the race search
// renumbers, and whose event-numbered arrays it then reuses) finds what each finds alone, for
// every plan; with the race detector, this also checks that they share nothing they write.
func TestLintBesideRaces(t *testing.T) {
	t.Parallel()
	for _, path := range planFiles(t) {
		for _, ranks := range []int64{5, 8} {
			if !elaborates(path, ranks) {
				continue
			}
			g := loadPlan(t, path, map[string]int64{"ranks": ranks})
			errs, o := CheckDeadlocks(t.Context(), g)
			require.Empty(t, errs, path)
			lint := o.LintRNR(t.Context())
			races := o.Races(t.Context(), nil)
			orNil := func(l diag.List) diag.List {
				if len(l) == 0 {
					return nil
				}
				return l
			}
			assert.Equal(t, orNil(RNR(t.Context(), g)), orNil(<-lint), "%s ranks=%d", path, ranks)
			assert.Equal(t, orNil(Check(t.Context(), g)), orNil(races), "%s ranks=%d", path, ranks)
		}
	}
}
