package verify

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate"
)

// ringGraph elaborates testdata/scale/ring_allreduce.dag (the one-slot ring of the scale
// figures; plans/ring_allreduce.dag has a slot per step) for a world size.
func ringGraph(b testing.TB, ranks int64) *ir.Graph {
	return loadPlan(b, "../../testdata/scale/ring_allreduce.dag", map[string]int64{"ranks": ranks, "n": 1024})
}

func graphOf(t testing.TB, src string) *ir.Graph {
	t.Helper()
	f, err := dsl.Parse("t.dag", []byte(src))
	require.NoError(t, err)
	g, err := elaborate.Elaborate(t.Context(), f, nil, elaborate.Options{})
	require.NoError(t, err)
	return g
}

func TestRacesAndFixes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		src   string
		races []string // "rank buf[range] first/second"
		fixes []string
	}{
		{
			name: "adds without fetch commute",
			src: `plan p
param ranks = 2
buffer ctr u64[1] remote_atomic
queue q to (rank + 1) % ranks
op a1 = atomic add q ctr[0] 1
op a2 = atomic add q ctr[0] 2
`,
		},
		{
			name: "ring allreduce without the WAR edge on tmp",
			src: `plan p
param ranks = 3
param n = 4
buffer data f32[ranks * n]
buffer tmp f32[n]
queue right to (rank + 1) % ranks peer left
queue left to (rank - 1) % ranks peer right
for s in 0 .. ranks - 1 {
  let sc = (rank - s) % ranks
  let rc = (rank - s - 1) % ranks
  op tx[s] = send right data[sc * n : (sc + 1) * n]
  op rx[s] = recv left tmp
  op red[s] = reduce sum data[rc * n : (rc + 1) * n] from tmp after rx[s]
  if s > 0 { tx[s] after red[s - 1]; rx[s] after rx[s - 1] }
}
`,
			races: []string{"0 tmp red[0]/rx[1]", "1 tmp red[0]/rx[1]", "2 tmp red[0]/rx[1]"},
			fixes: []string{"add `rx[1] after red[0]` on rank 0", "add `rx[1] after red[0]` on rank 1", "add `rx[1] after red[0]` on rank 2"},
		},
		{
			name: "notify write consumed before its notification",
			src: `plan p
param ranks = 2
buffer d f64[4] remote_write
buffer acc f64[4]
buffer out f64[4]
queue q to (rank + 1) % ranks
op w = write q acc to d notify
op got = recv q
op use = copy d to out
`,
			races: []string{"0 d use/w", "1 d w/use"}, // First is whichever can start first in a topological order
			fixes: []string{"add `use after got` on rank 0", "add `use after got` on rank 1"},
		},
		{
			name: "partial overlap is reported as the overlap",
			src: `plan p
buffer a u8[16]
buffer b u8[16]
op lo = copy a[0:8] to b[0:8]
op mid = copy a[8:12] to b[6:10]
`,
			races: []string{"0 b[6:8] lo/mid"},
			fixes: []string{"add `mid after lo` on rank 0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := graphOf(t, tt.src)
			races := Races(t.Context(), g)
			var got []string
			for _, r := range races {
				got = append(got, fmt.Sprintf("%d %s %s/%s", r.Rank(),
					g.SliceString(ir.Slice{Buf: r.Buf(), Off: r.Off, Len: r.Len}), g.Ops[r.First.Op].Name, g.Ops[r.Second.Op].Name))
			}
			assert.Equal(t, tt.races, got)
			fixes, ok := ExplainRaces(t.Context(), g, races)
			var fixText []string
			for i, f := range fixes {
				require.True(t, ok[i])
				fixText = append(fixText, f.Format(g))
				// The fix must really remove the race: add the edge and check again.
				m := g.WithEdges(append(slices.Clone(g.Edges), ir.Edge{From: f.After, To: f.Op}))
				for _, r := range Races(t.Context(), m) {
					assert.False(t, r.First.Op == races[i].First.Op && r.Second.Op == races[i].Second.Op,
						"fix %s leaves the race", f.Format(g))
				}
			}
			assert.Equal(t, tt.fixes, fixText)
			assert.Equal(t, len(races) == 0, len(Check(t.Context(), g)) == 0)
		})
	}
}

// BenchmarkCheck verifies the ring allreduce (all phases: cycles, FIFO deadlocks, races) at
// growing world sizes and reports the cost per op.
func BenchmarkCheck(b *testing.B) {
	for _, ranks := range []int64{64, 128, 256} {
		g := ringGraph(b, ranks)
		b.Run(fmt.Sprintf("ranks=%d", ranks), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if errs := Check(b.Context(), g); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
			b.ReportMetric(float64(len(g.Ops)), "ops")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(g.Ops)), "ns/planop")
		})
	}
}

// In a ring, the questions the race sweep leaves to resolve pass the separator's entry chains,
// or leave a separator rank by its exits: one sweep of the out labels over the whole graph, the
// other over the separator's events alone, and no question left to resolveBatch.
func TestResolveRingSweeps(t *testing.T) {
	t.Parallel()
	g := ringGraph(t, 16)
	var swept [2]int
	residue := -1
	h := newHB(t.Context(), g, true, &Options{resolved: func(r *sepReach) { swept, residue = r.swept, len(r.residue) }})
	require.True(t, h.acyclic)
	require.Empty(t, findRacesOn(t.Context(), g, h, 0, nil, nil))
	require.Zero(t, residue, "questions left to resolveBatch")
	require.Greater(t, swept[0], h.n, "the in labels are swept once per block")
	require.Less(t, swept[1], swept[0]*6/10, "positions swept for out labels (in labels: %d)", swept[0])
}

// segIndex numbers the distinct bounds as a sort and a binary search would, group after group
// (its table reused), as the groups grow past the table's first size.
func TestSegIndex(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 0))
	var x segIndex
	for _, n := range []int{1, 7, 300, 5000, 40, 20000, 2} {
		x.reset()
		var vals []int64
		for range n {
			v := rng.Int64N(int64(3 * n))
			vals = append(vals, v)
			x.add(v)
		}
		want := slices.Compact(slices.Sorted(slices.Values(vals)))
		require.Equal(t, len(want), x.number(), "%d bounds", n)
		for _, v := range vals {
			i, _ := slices.BinarySearch(want, v)
			require.Equal(t, int32(i), x.index(v), "bound %d of %d", v, n)
		}
	}
}
