package prove_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planner/prove"
	"github.com/coredag/coredag/planner/verify"
)

// elaborated parses and elaborates a plan; ok is false when the plan refuses params.
func elaborated(t testing.TB, name string, src []byte, params map[string]int64) (*ir.Graph, bool) {
	t.Helper()
	f, err := dsl.Parse(name, src)
	require.NoError(t, err)
	g, err := elaborate.Elaborate(t.Context(), f, params, elaborate.Options{})
	return g, err == nil
}

// TestPlans: every plan in plans/ states postconditions, and has them proven at ranks 2, 3, 4
// and 8 (the sizes it takes).
func TestPlans(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".dag")
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, ranks := range []int64{2, 3, 4, 8} {
			t.Run(name+"/ranks="+strconv.FormatInt(ranks, 10), func(t *testing.T) {
				params := map[string]int64{"ranks": ranks}
				if _, ok := elaborated(t, path, src, params); !ok {
					t.Skipf("%s does not take ranks=%d", name, ranks)
				}
				g, err := planner.Load(t.Context(), path, src, params, planner.Options{})
				require.NoError(t, err)
				require.NotEmpty(t, g.Expects, "%s states no postcondition (expect)", name)
			})
		}
	}
}

// load elaborates and verifies src and proves it, returning the proof's diagnostics.
func load(t testing.TB, src string, params map[string]int64) diag.List {
	t.Helper()
	g, ok := elaborated(t, "t.dag", []byte(src), params)
	require.True(t, ok)
	errs, order := verify.CheckOrder(t.Context(), g)
	require.Empty(t, errs)
	return prove.Check(t.Context(), g, order, prove.Options{})
}

// reduceScatter is a ring reduce-scatter; shift 0 leaves rank r with the sum of block r, shift 1
// with the sum of block r+1 (the first half of plans/ring_allreduce.dag).
func reduceScatter(shift int) string {
	return `plan rs
param ranks = 4
param n = 3
buffer data u32[ranks * n] init rank * 10 + i
buffer tmp  u32[n]
queue right to (rank + 1) % ranks peer left
queue left  to (rank - 1) % ranks peer right
expect reduce_scatter sum data
for s in 0 .. ranks - 1 {
  let sc = (rank - s - ` + strconv.Itoa(1-shift) + `) % ranks
  let rc = (rank - s - ` + strconv.Itoa(2-shift) + `) % ranks
  op tx[s]  = send right data[sc * n : (sc + 1) * n]
  op rx[s]  = recv left tmp
  op red[s] = reduce sum data[rc * n : (rc + 1) * n] from tmp after rx[s]
  if s > 0 { tx[s], rx[s] after red[s - 1] }
}
`
}

func TestReduceScatter(t *testing.T) {
	t.Parallel()
	for _, ranks := range []int64{1, 2, 3, 4, 8} {
		require.Empty(t, load(t, reduceScatter(0), map[string]int64{"ranks": ranks}), "ranks=%d", ranks)
	}
	errs := load(t, reduceScatter(1), nil)
	require.Len(t, errs, 1)
	require.Equal(t, diag.Expect, errs[0].Code)
	require.Equal(t, 8, int(errs[0].Pos.Line))
	require.Contains(t, errs[0].Msg, "data[0] on rank 0 should hold the sum over ranks 0-3 of data[0], but holds data[0]@0 — the contributions of ranks 1-3 are missing")
}

// TestCostIndependentOfCount: the proof's state is the same size whatever the element count,
// which is what makes its cost independent of it.
func TestCostIndependentOfCount(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../plans/ring_allreduce.dag")
	require.NoError(t, err)
	var sizes [][2]int
	for _, n := range []int64{1 << 10, 1 << 20} {
		g, ok := elaborated(t, "ring_allreduce.dag", src, map[string]int64{"ranks": 16, "n": n})
		require.True(t, ok)
		errs, order := verify.CheckOrder(t.Context(), g)
		require.Empty(t, errs)
		require.Empty(t, prove.Check(t.Context(), g, order, prove.Options{}))
		shapes, runs := prove.Run(t.Context(), g, order, prove.Options{}).Size()
		sizes = append(sizes, [2]int{shapes, runs})
	}
	require.Equal(t, sizes[0], sizes[1])
	require.Less(t, sizes[0][1], 16*16*4, "runs of memory at the end")
}

// TestCostPerOpIndependentOfRanks: the ring's writes to memory move a few segments each,
// however many ranks (and so segments per buffer) there are; a list that shifts its tail on
// every write moves about ranks/9 segments a write.
func TestCostPerOpIndependentOfRanks(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../plans/ring_allreduce.dag")
	require.NoError(t, err)
	for _, ranks := range []int64{16, 64, 128} {
		g, ok := elaborated(t, "ring_allreduce.dag", src, map[string]int64{"ranks": ranks})
		require.True(t, ok)
		errs, order := verify.CheckOrder(t.Context(), g)
		require.Empty(t, errs)
		puts, moved := prove.Run(t.Context(), g, order, prove.Options{}).Moves()
		require.Positive(t, puts)
		require.LessOrEqual(t, float64(moved)/float64(puts), 2.0, "ranks=%d: %d segments moved by %d writes", ranks, moved, puts)
	}
}

// chain is a plan of k reduces on one rank. With grow unset, each adds one more element into
// data[0], which ends as the sum of k + 1 elements while every value before it is dropped:
// the proof's table of values used to keep them all, k²/2 terms (385 MB at 3,000 ops). With
// grow set, each adds data[s] into data[s + 1], so data[s] holds the sum of s + 1 elements:
// k²/2 terms that all stay live.
func chain(k int, grow bool) string {
	red := "reduce sum data[0:1] from data[s + 1 : s + 2]"
	if grow {
		red = "reduce sum data[s + 1 : s + 2] from data[s : s + 1]"
	}
	return `plan chain
param ranks = 1
buffer data u32[` + strconv.Itoa(k+1) + `] init i
for s in 0 .. ` + strconv.Itoa(k) + ` {
  op r[s] = ` + red + `
  if s > 0 { r[s] after r[s - 1] }
}
expect unchanged data
`
}

// proveChain elaborates and verifies chain(k, grow) and returns its graph and order.
func proveChain(t testing.TB, k int, grow bool) (*ir.Graph, *verify.Order) {
	t.Helper()
	g, ok := elaborated(t, "chain.dag", []byte(chain(k, grow)), nil)
	require.True(t, ok)
	errs, order := verify.CheckOrder(t.Context(), g)
	require.Empty(t, errs)
	return g, order
}

// TestValuesDropped: the values a chain of reduces leaves behind are collected, so the table
// holds about what memory holds (k + 1 terms in data[0]), not every value ever made.
func TestValuesDropped(t *testing.T) {
	t.Parallel()
	const k = 3000
	g, order := proveChain(t, k, false)
	s := prove.Run(t.Context(), g, order, prove.Options{})
	peak, end := s.Terms()
	require.Less(t, end, 1<<17, "terms held at the end (k²/2 = %d were kept)", k*k/2)
	require.Less(t, peak, 1<<18, "terms held at most")
	errs := prove.Check(t.Context(), g, order, prove.Options{})
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Msg, "expect unchanged data: data[0] on rank 0 should hold data[0]@0, but holds the sum of data[0]@0, data[1]@0, data[2]@0, data[3]@0, data[4]@0, data[5]@0, and 2995 more — ")
}

// TestValuesBudget: values that stay live past the proof's share of the budget stop the proof
// with a diagnostic at each postcondition that says so and gives the figure, never a proof.
func TestValuesBudget(t *testing.T) {
	t.Parallel()
	g, order := proveChain(t, 1500, true) // 1500²/2 terms of 48 bytes: 54 MB
	errs := prove.Check(t.Context(), g, order, prove.Options{Budget: budget.Budget{Bytes: 64 << 20, From: "--mem"}})
	require.Len(t, errs, 1)
	require.Equal(t, diag.Limit, errs[0].Code)
	require.Equal(t, "expect unchanged data: cannot prove within the memory budget: the proof's symbolic values need more than 32 MiB, half the memory budget of 64 MiB (set with --mem)", errs[0].Msg)

	// Within a budget large enough, the same plan is proven wrong as it is.
	errs = prove.Check(t.Context(), g, order, prove.Options{Budget: budget.Budget{Bytes: 4 << 30, From: "--mem"}})
	require.Len(t, errs, 1)
	require.Equal(t, diag.Expect, errs[0].Code)
}

// TestBarrierNeedsEachEdge: the dissemination barrier is proven a barrier, and deleting any of
// the edges that start a round after the earlier ones (which no race check notices: the plan
// has no memory) makes `expect barrier` fail at some world size. (The edges into done are not
// needed: a rank leaves the plan when all its ops have ended, heard[j] included.)
func TestBarrierNeedsEachEdge(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../plans/dissemination_barrier.dag")
	require.NoError(t, err)
	caught := map[string]bool{}
	for _, ranks := range []int64{2, 3, 4, 8, 16} {
		g, ok := elaborated(t, "dissemination_barrier.dag", src, map[string]int64{"ranks": ranks})
		require.True(t, ok)
		errs, order := verify.CheckOrder(t.Context(), g)
		require.Empty(t, errs)
		require.Empty(t, prove.Check(t.Context(), g, order, prove.Options{}), "ranks=%d", ranks)
		for i, e := range g.Edges {
			if g.OpString(e.To)[:len("arrive")] != "arrive" {
				continue
			}
			key := g.OpString(e.To) + " after " + g.OpString(e.From)
			key = key[:strings.Index(key, " on rank")] + key[strings.Index(key, " after"):strings.LastIndex(key, " on rank")]
			edges := append(append([]ir.Edge(nil), g.Edges[:i]...), g.Edges[i+1:]...)
			m := g.WithEdges(edges)
			errs, order := verify.CheckOrder(t.Context(), m)
			require.Empty(t, errs)
			if errs := prove.Check(t.Context(), m, order, prove.Options{}); len(errs) > 0 {
				require.Contains(t, errs[0].Msg, "expect barrier: rank ")
				caught[key] = true
			} else if !caught[key] {
				caught[key] = false
			}
		}
	}
	require.Contains(t, caught, "arrive[2] after heard[0]")
	for k, c := range caught {
		require.True(t, c, "deleting %s leaves a barrier at every size", k)
	}
}

// TestTraceBack: a wrong element is traced back to the op where it first went wrong, not to
// the last op that forwarded it: a bad reduce at step 0 of a ring, found through the
// allgather and the reduces after it, with the send that brought the misplaced part.
func TestTraceBack(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../docs/examples/errors/expect_bad_reduce.dag")
	require.NoError(t, err)
	errs := load(t, string(src), nil)
	require.Len(t, errs, 1)
	d := errs[0]
	require.Contains(t, d.Msg, "another element's contributions: the contribution of rank 1 to data[2] in place of the contribution of rank 0 to data[0], data from 2 elements further on")
	require.Len(t, d.Related, 2)
	require.Equal(t, 15, int(d.Related[0].Pos.Line)) // red[s]
	require.Contains(t, d.Related[0].Label, "first goes wrong at red[0] on rank 2")
	require.Equal(t, 13, int(d.Related[1].Pos.Line)) // tx[s]
	require.Contains(t, d.Related[1].Label, "tx[0] on rank 1 had put there from data[2] on rank 1")

	// Without the bug the plan is proven; with only a contribution missing, the related
	// position stays the last writer.
	fixed := strings.Replace(string(src), "if s == 0 { rc = (rank - 2) % ranks }", "", 1)
	require.NotEqual(t, string(src), fixed)
	require.Empty(t, load(t, fixed, nil))
	short, err := os.ReadFile("../../docs/examples/errors/expect_short_allgather.dag")
	require.NoError(t, err)
	errs = load(t, string(short), nil)
	require.Len(t, errs, 1)
	require.Len(t, errs[0].Related, 1)
	require.Contains(t, errs[0].Related[0].Label, "was last written by red[1] on rank 0")
}

// reduceScatterInto is a ring reduce-scatter whose result, block rank of the reduction, is
// copied into an n-element out (MPI's receive buffer); block picks the block copied.
func reduceScatterInto(block string) string {
	return `plan rs_into
param ranks = 4
param n = 3
buffer data u32[ranks * n] init rank * 10 + i
buffer tmp  u32[n]
buffer out  u32[n]
queue right to (rank + 1) % ranks peer left
queue left  to (rank - 1) % ranks peer right
expect reduce_scatter sum out from data
for s in 0 .. ranks - 1 {
  let sc = (rank - s - 1) % ranks
  let rc = (rank - s - 2) % ranks
  op tx[s]  = send right data[sc * n : (sc + 1) * n]
  op rx[s]  = recv left tmp
  op red[s] = reduce sum data[rc * n : (rc + 1) * n] from tmp after rx[s]
  if s > 0 { tx[s], rx[s] after red[s - 1] }
}
let b = ` + block + `
op keep = copy data[b * n : (b + 1) * n] to out after red[ranks - 2]
`
}

// TestReduceScatterIntoBlock: reduce_scatter into a destination of one block (Src's elements /
// ranks) promises block rank of the reduction in all of it.
func TestReduceScatterIntoBlock(t *testing.T) {
	t.Parallel()
	for _, ranks := range []int64{2, 3, 4, 8} {
		require.Empty(t, load(t, reduceScatterInto("rank"), map[string]int64{"ranks": ranks}), "ranks=%d", ranks)
	}
	errs := load(t, reduceScatterInto("(rank + 1) % ranks"), nil)
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Msg, "out[0] on rank 0 should hold the sum over ranks 0-3 of data[0], but holds the sum over ranks 0, 2, 3 of data[3] — another element's contributions")
}
