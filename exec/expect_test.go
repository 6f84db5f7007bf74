package exec_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate"
)

// elaborateOnly builds a plan's Graph without the checks, so that a plan whose postconditions
// do not hold can still be run.
func elaborateOnly(t *testing.T, src string, params map[string]int64) *ir.Graph {
	t.Helper()
	f, err := dsl.Parse("t.dag", []byte(src))
	require.NoError(t, err)
	g, err := elaborate.Elaborate(t.Context(), f, params, elaborate.Options{})
	require.NoError(t, err)
	return g
}

// checkValues runs g serially from inits and checks its postconditions on the values.
func checkValues(t *testing.T, g *ir.Graph) []exec.ExpectResult {
	t.Helper()
	init := exec.NewMemory(g)
	require.NoError(t, init.ResetAll())
	final, err := exec.Reference(g)
	require.NoError(t, err)
	return exec.CheckExpects(g, init, final)
}

func TestCheckExpectsOnValues(t *testing.T) {
	src, err := os.ReadFile("../plans/ring_allreduce.dag")
	require.NoError(t, err)
	params := map[string]int64{"ranks": 4, "n": 8}
	g := elaborateOnly(t, string(src), params)
	for _, gg := range []*ir.Graph{g, exec.DistinctInits(g)} {
		rs := checkValues(t, gg)
		require.Len(t, rs, 1)
		require.True(t, rs[0].Held, rs[0].Detail)
	}

	// The allgather one step short leaves a partial sum in one chunk per rank: wrong values
	// whatever the inits.
	short := strings.Replace(string(src), "for s in 0 .. ranks - 1 { # allgather", "for s in 0 .. ranks - 2 { # allgather", 1)
	require.NotEqual(t, string(src), short)
	rs := checkValues(t, exec.DistinctInits(elaborateOnly(t, short, params)))
	require.False(t, rs[0].Held)
	require.Regexp(t, `^data\[\d+\] on rank 0 is \d+, want \d+$`, rs[0].Detail)
}

// TestDistinctInitsShowMisplacedData: a plan that gathers the right rank's block into the wrong
// place passes on inits that do not depend on the element, and fails on DistinctInits.
func TestDistinctInitsShowMisplacedData(t *testing.T) {
	src := `plan swap
param ranks = 2
param n = 4
buffer src u32[ranks * n] init rank + 1
buffer dst u32[ranks * n] remote_write
queue link to (rank + 1) % ranks
op own = copy src[rank * n : (rank + 1) * n] to dst[rank * n : (rank + 1) * n]
op put = write link src[rank * n : (rank + 1) * n] to dst[rank * n : (rank + 1) * n] notify
op got = recv link
expect alltoall dst from src
`
	g := elaborateOnly(t, src, nil)
	require.True(t, checkValues(t, g)[0].Held, "rank + 1 is the same in every block")
	rs := checkValues(t, exec.DistinctInits(g))
	require.False(t, rs[0].Held)
	require.Contains(t, rs[0].Detail, "dst[4] on rank 0")

	// Every (rank, buffer, element) starts distinct.
	m := exec.NewMemory(exec.DistinctInits(g))
	require.NoError(t, m.ResetAll())
	seen := map[float64]bool{}
	for r := 0; r < 2; r++ {
		for b := range g.Buffers {
			for _, v := range m.Float64s(r, ir.BufID(b)) {
				require.False(t, seen[v], "value %v twice", v)
				seen[v] = true
			}
		}
	}
}

// TestCheckValueForms: the general form and its precondition are checked on values: the fan-in's
// counter from distinct inits, and the CAS hand-off only where its precondition holds.
func TestCheckValueForms(t *testing.T) {
	src, err := os.ReadFile("../plans/atomic_fanin.dag")
	require.NoError(t, err)
	g := elaborateOnly(t, string(src), map[string]int64{"ranks": 3, "root": 1})
	for _, gg := range []*ir.Graph{g, exec.DistinctInits(g)} {
		for _, r := range checkValues(t, gg) {
			require.True(t, r.Held, r.Detail)
		}
	}
	// One addend off: every total is wrong by one.
	bad := strings.Replace(string(src), "atomic add up counter[0] rank + 1", "atomic add up counter[0] rank + 2", 1)
	require.NotEqual(t, string(src), bad)
	rs := checkValues(t, exec.DistinctInits(elaborateOnly(t, bad, map[string]int64{"ranks": 3, "root": 1})))
	require.False(t, rs[0].Held)
	require.Regexp(t, `^counter\[0\] on rank 1 is \d+, want \d+$`, rs[0].Detail)

	cas := `plan claim
param ranks = 2
buffer owner u64[1] remote_atomic
buffer seen  u64[1]
queue home to 0 peer guest[rank]
if rank == 0 { for p in 0 .. ranks { queue guest[p] to p peer home } }
op take = atomic cas home owner[0] (7) (8) to seen[0]
expect owner[0] == 8 on rank 0 if owner[0]@0 == 7
`
	cg := elaborateOnly(t, cas, nil)
	require.Equal(t, []ir.Given{{Buf: 0, Elem: 0, Rank: 0, Value: 7}}, cg.Expects[0].Given)
	init := exec.NewMemory(cg)
	require.NoError(t, init.ResetAll())
	require.False(t, exec.GivensHold(cg, init, cg.Expects[0].Given), "owner starts at 0")
	wg := exec.WithGivens(exec.DistinctInits(cg), cg.Expects[0].Given)
	rs = checkValues(t, wg)
	require.True(t, rs[0].Held, rs[0].Detail)
	rs = checkValues(t, exec.DistinctInits(cg)) // without the precondition the swap fails
	require.False(t, rs[0].Held)
}

// TestReduceScatterIntoBlockOnValues: reduce_scatter into an n-element destination is checked
// on values as block rank of the reduction.
func TestReduceScatterIntoBlockOnValues(t *testing.T) {
	src := `plan rs_into
param ranks = 3
param n = 2
buffer data u32[ranks * n] init rank * 10 + i
buffer out  u32[n]
expect reduce_scatter sum out from data
op nothing = nop
`
	g := elaborateOnly(t, src, nil)
	require.True(t, g.Expects[0].DstBlock)
	init := exec.NewMemory(g)
	require.NoError(t, init.ResetAll())
	final := exec.NewMemory(g)
	require.NoError(t, final.ResetAll())
	for r := range 3 {
		out := final.Bytes(r, 1)
		for k := range 2 {
			out[4*k] = byte(0 + 10 + 20 + 3*(2*r+k)) // sum over q of data[2r+k]@q = 30 + 3(2r+k)
		}
	}
	rs := exec.CheckExpects(g, init, final)
	require.True(t, rs[0].Held, rs[0].Detail)
	final.Bytes(2, 1)[4] ^= 1
	rs = exec.CheckExpects(g, init, final)
	require.False(t, rs[0].Held)
	require.Equal(t, "out[1] on rank 2 is 44, want 45", rs[0].Detail)
}

// TestVectorFormsOnValues: the vector postconditions hold on the values of the alltoallv and
// allgatherv plans, and the alltoallv one fails, at the first misplaced element, when each
// block is taken from where the receiver puts it rather than from the sender's displacement.
func TestVectorFormsOnValues(t *testing.T) {
	for _, plan := range []string{"../plans/pairwise_alltoallv.dag", "../plans/ring_allgatherv.dag"} {
		src, err := os.ReadFile(plan)
		require.NoError(t, err)
		g := elaborateOnly(t, string(src), map[string]int64{"ranks": 3})
		require.NotNil(t, g.Expects[0].Vec)
		for _, gg := range []*ir.Graph{g, exec.DistinctInits(g)} {
			for _, r := range checkValues(t, gg) {
				require.True(t, r.Held, "%s: %s", plan, r.Detail)
			}
		}
	}
	src, err := os.ReadFile("../plans/pairwise_alltoallv.dag")
	require.NoError(t, err)
	bad := strings.Replace(string(src), "src[sdispls[me + t] : sdispls[me + t] + sendcounts[me + t]] to", "src[at : at + sendcounts[me + t]] to", 1)
	require.NotEqual(t, string(src), bad)
	rs := checkValues(t, exec.DistinctInits(elaborateOnly(t, bad, map[string]int64{"ranks": 4})))
	require.False(t, rs[0].Held)
	require.Regexp(t, `^dst\[\d+\] on rank \d is \d+, want \d+$`, rs[0].Detail)
	require.True(t, rs[1].Held) // src is unchanged
}
