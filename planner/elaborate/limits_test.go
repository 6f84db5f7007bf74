package elaborate

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/internal/race"
	"github.com/coredag/coredag/ir"
)

// TestLoopOpsFailFast: a loop that would make more ops than the limit fails before it runs, at
// the loop, without building the ops.
func TestLoopOpsFailFast(t *testing.T) {
	lowOps := Options{MaxOps: 100000} // should the count regress, the ops made before the limit cost only megabytes
	for _, tc := range []struct{ name, src, want string }{
		{"one loop", "plan p\nfor j in 0 .. 10**9 { op x[j] = nop }\n",
			"2:1: the plan has more than 100000 ops over all its ranks (this loop alone makes at least 1000000000): is a loop bound or the rank count wrong?"},
		{"nested loops", "plan p\nfor i in 0 .. 3000 {\n  for j in 0 .. 3000 { op x[i,j] = nop }\n}\n",
			"2:1: the plan has more than 100000 ops over all its ranks (this loop alone makes at least 9000000)"},
		{"inner bounds from the outer variable", "plan p\nfor i in 0 .. 3000 {\n  for j in 0 .. i { op x[i,j] = nop }\n}\n",
			"2:1: the plan has more than 100000 ops over all its ranks (this loop alone makes at least 100"},
		{"inner bounds from a let", "plan p\nfor i in 0 .. 3000 {\n  let m = i * 2\n  for j in 0 .. m step 2 { op x[i,j] = nop }\n}\n",
			"2:1: the plan has more than 100000 ops over all its ranks (this loop alone makes at least 100"},
		{"step and lets", "plan p\nfor i in 0 .. 10**12 step 2 {\n  let k = i + 1\n  op x[i] = nop\n  op y[k] = nop\n}\n",
			"2:1: the plan has more than 100000 ops over all its ranks (this loop alone makes at least 1000000000000)"},
		{"the whole range of int64", "plan p\nfor i in -9223372036854775807 - 1 .. 9223372036854775807 { op x[i] = nop }\n",
			"(this loop alone makes at least 9223372036854775807)"},
		{"iterations without ops", "plan p\nfor i in 0 .. 10**9 { let k = i }\n",
			"2:1: the plan runs more than 16777216 loop iterations: is a bound wrong?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := elaborateWith(t, tc.src, nil, lowOps)
			runtime.ReadMemStats(&after)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			if !race.Enabled {
				assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "allocated bytes")
			}
		})
	}
}

// TestLoopOpsLowerBound: the count before a loop is a lower bound: ops under an if, and inner
// loops whose bounds depend on the outer variable or a let of the body, are not counted, so
// plans within the limit still elaborate.
func TestLoopOpsLowerBound(t *testing.T) {
	t.Parallel()
	lowOps := Options{MaxOps: 1000}
	for _, src := range []string{
		"plan p\nfor i in 0 .. 10**6 { if i < 10 { op x[i] = nop } }\n",
		"plan p\nfor i in 0 .. 40 { for j in 0 .. i { op x[i,j] = nop } }\n",
		"plan p\nlet n = 10**6\nfor i in 0 .. 30 { let n = 30\n for j in 0 .. n { op x[i,j] = nop } }\n",
		"plan p\nfor i in 0 .. 1000 { op x[i] = nop }\n",
	} {
		_, err := elaborateWith(t, src, nil, lowOps)
		assert.NoError(t, err, src)
	}
	_, err := elaborateWith(t, "plan p\nfor i in 0 .. 1001 { op x[i] = nop }\n", nil, lowOps)
	assert.ErrorContains(t, err, "2:1: the plan has more than 1000 ops over all its ranks (this loop alone makes at least 1001)")
}

// TestLimitsFromBudget: a lower op limit (from the memory budget) says why it is lower.
func TestLimitsFromBudget(t *testing.T) {
	t.Parallel()
	src := "plan p\nparam ranks = 4\nfor i in 0 .. 10 { op x[i] = nop }\n"
	f, err := dsl.Parse("t.dag", []byte(src))
	require.NoError(t, err)
	_, err = Elaborate(t.Context(), f, nil, Options{MaxOps: 25, Why: "the memory budget is 50 KiB"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "t.dag:3:1: the plan has more than 25 ops over all its ranks (this loop alone makes at least 10): the memory budget is 50 KiB")
	g, err := Elaborate(t.Context(), f, nil, Options{MaxOps: 40})
	require.NoError(t, err)
	assert.Len(t, g.Ops, 40)
	_, err = Elaborate(t.Context(), f, nil, Options{MaxOps: 1 << 30})
	assert.NoError(t, err, "a limit above MaxOps changes nothing")

	// The limit Within sets from a budget is a refusal for the budget, at the loop.
	_, err = Elaborate(t.Context(), f, nil, Within(budget.Budget{Bytes: 25 * BytesPerOp, From: "--mem"}))
	var be *budget.Error
	require.ErrorAs(t, err, &be)
	assert.EqualValues(t, 3, be.Pos.Line)
	assert.Equal(t, "the plan has more than 25 ops over all its ranks (this loop alone makes at least 10), and a plan takes about 2 KiB per op to check, compile and run; "+
		"the memory budget is 50 KiB (set with --mem): is a loop bound or the rank count wrong? Else lower the ranks param or the plan's size", be.Message())
}

// TestBudgetBelowOneOp: a memory budget that holds no op (less than BytesPerOp) refuses the
// first op in terms of the budget, with the least budgets that hold one op and the loop's ops,
// not as "more than 1 ops"; the limits above it count ops in good English.
func TestBudgetBelowOneOp(t *testing.T) {
	t.Parallel()
	within := func(bytes int64, from string) Options { return Within(budget.Budget{Bytes: bytes, From: from}) }
	loop := "plan p\nparam ranks = 4\nfor i in 0 .. 10 { op x[i] = nop }\n"
	for _, tc := range []struct {
		name, src string
		opt       Options
		want      string
	}{
		{"one byte", loop, within(1, "--mem"),
			"t.dag:3:1: the memory budget is too small for even one op: a plan takes about 2 KiB per op to check, compile and run (this loop alone makes at least 10); " +
				"the memory budget is 1 byte (set with --mem): one op needs at least 2 KiB (--mem 2KiB), this loop's ops at least 20 KiB (--mem 20KiB)"},
		{"a byte short of one op", loop, within(BytesPerOp-1, "--mem"),
			"t.dag:3:1: the memory budget is too small for even one op: a plan takes about 2 KiB per op to check, compile and run (this loop alone makes at least 10); " +
				"the memory budget is 2 KiB (2047 bytes) (set with --mem): one op needs at least 2 KiB (--mem 2KiB), this loop's ops at least 20 KiB (--mem 20KiB)"},
		{"from the environment", "plan p\nop x = nop\n", within(100, budget.EnvVar),
			"t.dag:2:1: the memory budget is too small for even one op: a plan takes about 2 KiB per op to check, compile and run; " +
				"the memory budget is 100 bytes (set with COREDAG_MEM): one op needs at least 2 KiB (COREDAG_MEM=2KiB)"},
		{"a loop no budget holds", "plan p\nfor i in 0 .. 10**18 { op x[i] = nop }\n", within(1, "--mem"),
			"t.dag:2:1: the memory budget is too small for even one op: a plan takes about 2 KiB per op to check, compile and run (this loop alone makes at least 1000000000000000000); " +
				"the memory budget is 1 byte (set with --mem): one op needs at least 2 KiB (--mem 2KiB); is a loop bound or the rank count wrong?"},
		{"room for exactly one op", loop, within(BytesPerOp, "--mem"),
			"t.dag:3:1: the plan has more than 1 op over all its ranks (this loop alone makes at least 10), and a plan takes about 2 KiB per op to check, compile and run; " +
				"the memory budget is 2 KiB (set with --mem): is a loop bound or the rank count wrong? Else lower the ranks param or the plan's size"},
		{"a limit of one op without a budget", loop, Options{MaxOps: 1},
			"t.dag:3:1: the plan has more than 1 op over all its ranks (this loop alone makes at least 10): is a loop bound or the rank count wrong?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := elaborateWith(t, tc.src, nil, tc.opt)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}

	// A plan without ops needs no room for one.
	g, err := elaborateWith(t, "plan p\nbuffer a u8[1]\n", nil, within(1, "--mem"))
	require.NoError(t, err)
	assert.Empty(t, g.Ops)
	// The refusal's figure is what the ops known need.
	_, err = elaborateWith(t, loop, nil, within(1, "--mem"))
	var be *budget.Error
	require.ErrorAs(t, err, &be)
	assert.EqualValues(t, 10*BytesPerOp, be.Need)
}

// TestEdgesSizedForRanksThatFit: rank 0 sizes the edge array for the ranks to come only as far
// as the op limit leaves room: the ring allreduce at 4096 ranks, past the limit, used to size it
// for all 4096 (1.3 GB, "fatal error: out of memory" under ulimit -v 2000000) before the limit
// stopped it at the 24th rank.
func TestEdgesSizedForRanksThatFit(t *testing.T) {
	f, err := dsl.Parse("ring_allreduce.dag", ringAllreduce(t))
	require.NoError(t, err)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Elaborate(t.Context(), f, map[string]int64{"ranks": 4096}, Options{MaxOps: 300000, Why: "the memory budget is 586 MiB"})
	runtime.ReadMemStats(&after)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the plan has more than 300000 ops over all its ranks")
	assert.Contains(t, err.Error(), "): the memory budget is 586 MiB")
	if !race.Enabled {
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(128<<20), "allocated bytes")
	}
}

// TestQueuesRefusedByBudget: queues count against the memory budget as ops do, at the queue
// statement that passes it; a plan of queues and no ops used to take any budget (1.9 GB of
// memory under --mem 64MiB for 4 million queues).
func TestQueuesRefusedByBudget(t *testing.T) {
	t.Parallel()
	src := "plan q\nparam ranks = 512\nfor p in 0 .. ranks {\n  queue link[p] to p peer link[rank]\n}\n"
	f, err := dsl.Parse("q.dag", []byte(src))
	require.NoError(t, err)
	_, err = Elaborate(t.Context(), f, nil, Options{Budget: budget.Budget{Bytes: 64 << 20, From: "--mem"}})
	var be *budget.Error
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "q.dag:4:9: the plan's queues need 64 MiB (67109376 bytes) (131073 of 512 bytes each); "+
		"the memory budget is 64 MiB (set with --mem): lower the ranks param or the plan's size", err.Error())
	g, err := Elaborate(t.Context(), f, map[string]int64{"ranks": 128}, Options{Budget: budget.Budget{Bytes: 64 << 20, From: "--mem"}})
	require.NoError(t, err)
	assert.Len(t, g.Queues, 128*128)
}

// TestEdgesRefusedByBudget: an edge array that would not fit in the memory budget is refused
// before it is allocated, with the figure, at the `after` that makes the edges, as a
// *budget.Error (which coredag reports with exit 2) rather than diagnostics.
func TestEdgesRefusedByBudget(t *testing.T) {
	t.Parallel()
	src := "plan edges\nparam ranks = 16\nfor j in 0 .. 400 { op a[j] = nop }\nfor j in 0 .. 400 { op b[j] = nop }\n" +
		"for i in 0 .. 400 {\n  for j in 0 .. 400 { b[i] after a[j] }\n}\n"
	f, err := dsl.Parse("edges.dag", []byte(src))
	require.NoError(t, err)
	_, err = Elaborate(t.Context(), f, nil, Options{MaxOps: 16384, Budget: budget.Budget{Bytes: 32 << 20, From: "--mem"}})
	var be *budget.Error
	require.ErrorAs(t, err, &be)
	// The references of rank 0 hold 18 MiB: the op limit leaves room for 8 ranks' edges beside them.
	assert.Equal(t, "edges.dag:6:34: the plan's `after` edges on 8 ranks need 24.4 MiB (1280000 of 20 bytes each) "+
		"besides 1.56 MiB for its ops (800 of 2 KiB each) and 18 MiB for its `after` references (262144 of 72 bytes each): 44 MiB in all; "+
		"the memory budget is 32 MiB (set with --mem): lower the ranks param or the plan's size", err.Error())
	// The references wait in a list of their own until the rank is done: 72 bytes each.
	_, err = Elaborate(t.Context(), f, nil, Options{MaxOps: 16384, Budget: budget.Budget{Bytes: 4 << 20, From: "--mem"}})
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "edges.dag:6:34: the plan's `after` references on rank 0 need 4.5 MiB (65536 of 72 bytes each) "+
		"besides 1.56 MiB for its ops (800 of 2 KiB each): 6.06 MiB in all; "+
		"the memory budget is 4 MiB (set with --mem): lower the ranks param or the plan's size", err.Error())

	// Within a budget that holds them, the same plan elaborates.
	f, err = dsl.Parse("edges.dag", []byte(strings.Replace(src, "ranks = 16", "ranks = 2", 1)))
	require.NoError(t, err)
	g, err := Elaborate(t.Context(), f, nil, Options{MaxOps: 16384, Budget: budget.Budget{Bytes: 32 << 20, From: "--mem"}})
	require.NoError(t, err)
	assert.Len(t, g.Edges, 2*400*400)
}

// TestBudgetOneTotal: ops, queues and `after` edges count against the memory budget together,
// one running total, and the refusal names what tipped it over beside what the rest holds. Each
// was checked against the whole budget on its own, so that a plan could hold about three times
// the budget: here any two of them fit in 1 MiB, and all three used to pass as well.
func TestBudgetOneTotal(t *testing.T) {
	t.Parallel()
	const (
		head   = "plan mix\nparam ranks = 4\n"
		queues = "for p in 0 .. ranks {\n  for k in 0 .. 50 { queue link[p, k] to p peer link[rank, k] }\n}\n" // 800 queues: 400 KiB
		ops    = "for j in 0 .. 40 { op a[j] = nop }\nfor j in 0 .. 35 { op b[j] = nop }\n"                    // 300 ops: 600 KiB
		edges  = "for i in 0 .. 35 {\n  for j in 0 .. 40 { b[i] after a[j] }\n}\n"                             // 5600 edges: 109 KiB
	)
	mem := Within(budget.Budget{Bytes: 1 << 20, From: "--mem"})
	for _, src := range []string{queues, ops, ops + edges, queues + ops} {
		_, err := elaborateWith(t, head+src, nil, mem)
		require.NoError(t, err, src)
	}
	f, err := dsl.Parse("mix.dag", []byte(head+queues+ops+edges))
	require.NoError(t, err)
	_, _, err = elaborateBothWith(t, f, nil, mem) // in shards or not
	var be *budget.Error
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "mix.dag:4:28: the plan's queues need 321 KiB (642 of 512 bytes each) besides 450 KiB for its ops (225 of 2 KiB each), "+
		"109 KiB for its `after` edges (5600 of 20 bytes each) and 144 KiB for its `after` references (2048 of 72 bytes each): 1 MiB (1048960 bytes) in all; "+
		"the memory budget is 1 MiB (set with --mem): lower the ranks param or the plan's size", err.Error())
	assert.EqualValues(t, 1048960, be.Need)

	// Queues that leave no room for an op: the first one is refused, in those words.
	_, err = elaborateWith(t, "plan p\nfor k in 0 .. 125 { queue l[k] to rank peer l[k] }\nop x = nop\n", nil, Within(budget.Budget{Bytes: 64 << 10, From: "--mem"}))
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "t.dag:3:1: the plan's first op does not fit: a plan takes about 2 KiB per op to check, compile and run, "+
		"besides 62.5 KiB for its queues (125 of 512 bytes each): 64.5 KiB in all; the memory budget is 64 KiB (set with --mem): lower the ranks param or the plan's size", err.Error())

	// Shards count the queues past the windows made for ranks as large as rank 0 against the
	// budget too: rank 0 has none here, and the shards stop at the budget, as the ranks one
	// after the other do. The ops tip it over: the op limit is what the budget leaves them.
	lean := "plan lean\nparam ranks = 8\n" + ops + edges +
		"if rank > 0 {\n  for p in 1 .. ranks {\n    for k in 0 .. 25 { queue link[p, k] to p peer link[rank, k] }\n  }\n}\n"
	f, err = dsl.Parse("lean.dag", []byte(lean))
	require.NoError(t, err)
	_, _, err = elaborateBothWith(t, f, map[string]int64{"ranks": 3}, Within(budget.Budget{Bytes: 2 << 20, From: "--mem"}))
	require.NoError(t, err)
	_, _, err = elaborateBothWith(t, f, nil, Within(budget.Budget{Bytes: 2 << 20, From: "--mem"}))
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "lean.dag:4:1: the plan has more than 580 ops over all its ranks (this loop alone makes at least 35), "+
		"and a plan takes about 2 KiB per op to check, compile and run, besides 525 KiB for its queues (1050 of 512 bytes each), "+
		"219 KiB for its `after` edges (11200 of 20 bytes each) and 144 KiB for its `after` references (2048 of 72 bytes each): 2 MiB (2098944 bytes) in all; "+
		"the memory budget is 2 MiB (set with --mem): is a loop bound or the rank count wrong? Else lower the ranks param or the plan's size", err.Error())
}

// The int64 extremes, as a plan writes them (2 ** 63 overflows, so the least is written as a
// difference).
const (
	minInt = "(-9223372036854775807 - 1)"
	maxInt = "9223372036854775807"
)

// TestTripCountExtremes: the pass count of `for v in from .. to step step` is exact for every
// int64 bound and step, whether or not to - from fits in an int64.
func TestTripCountExtremes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		from, to, step int64
		want           uint64
	}{
		{0, 10, 1, 10},
		{0, 10, 3, 4},
		{0, 9, 3, 3},
		{math.MinInt64, math.MaxInt64, 1, math.MaxUint64},
		{math.MinInt64, math.MaxInt64, 2, 1 << 63},
		{math.MinInt64, math.MaxInt64, math.MaxInt64, 3}, // MinInt64, -1, MaxInt64 - 1
		{math.MinInt64, math.MaxInt64, 1 << 62, 4},
		{math.MinInt64, 0, 1, 1 << 63},
		{math.MinInt64, 0, math.MaxInt64, 2},
		{-1, math.MaxInt64, math.MaxInt64, 2},
		{0, math.MaxInt64, 1, math.MaxInt64},
		{0, math.MaxInt64, math.MaxInt64, 1},
		{math.MaxInt64 - 1, math.MaxInt64, math.MaxInt64, 1},
		{math.MinInt64, math.MinInt64 + 1, math.MaxInt64, 1},
		// empty ranges
		{math.MaxInt64, math.MinInt64, 1, 0},
		{math.MaxInt64, math.MaxInt64, 1, 0},
		{math.MinInt64, math.MinInt64, math.MaxInt64, 0},
		{5, 5, 1, 0},
	} {
		// the count the loops run, stepping as they do (values that would pass MaxInt64 end it)
		if tc.want <= 10 {
			var n uint64
			for v := tc.from; v < tc.to; v += tc.step {
				n++
				if v > math.MaxInt64-tc.step {
					break
				}
			}
			require.Equal(t, tc.want, n, "%d .. %d step %d, stepped", tc.from, tc.to, tc.step)
		}
		assert.Equal(t, tc.want, tripCount(tc.from, tc.to, tc.step), "%d .. %d step %d", tc.from, tc.to, tc.step)
	}
}

// TestLoopsAtTheExtremes: loops, table loops and list loops over int64's extremes run their
// passes, or are refused by the limit they pass, with its message: a span that overflows int64
// is no reason to refuse a loop of 3 passes.
func TestLoopsAtTheExtremes(t *testing.T) {
	t.Parallel()
	whole := minInt + " .. " + maxInt
	for _, tc := range []struct {
		name, body string
		ops        []string // the ops made, when the plan elaborates
		want       string   // else the error
	}{
		{"whole range by MaxInt64", "for i in " + whole + " step " + maxInt + " { op x[i] = nop }",
			[]string{"x[-9223372036854775808]", "x[-1]", "x[9223372036854775806]"}, ""},
		{"whole range by 2**62", "for i in " + whole + " step 2 ** 62 { op x[i / 2 ** 62] = nop }",
			[]string{"x[-2]", "x[-1]", "x[0]", "x[1]"}, ""},
		{"up to MaxInt64 by MaxInt64", "for i in -1 .. " + maxInt + " step " + maxInt + " { op x[i] = nop }",
			[]string{"x[-1]", "x[9223372036854775806]"}, ""},
		{"last value below MaxInt64", "for i in " + maxInt + " - 1 .. " + maxInt + " { op x[i] = nop }",
			[]string{"x[9223372036854775806]"}, ""},
		{"from MinInt64", "for i in " + minInt + " .. " + minInt + " + 2 { op x[i] = nop }",
			[]string{"x[-9223372036854775808]", "x[-9223372036854775807]"}, ""},
		{"empty: MaxInt64 .. MinInt64", "for i in " + maxInt + " .. " + minInt + " { op x[i] = nop }\nop y = nop",
			[]string{"y"}, ""},
		{"empty: MaxInt64 .. MaxInt64", "for i in " + maxInt + " .. " + maxInt + " step " + maxInt + " { op x[i] = nop }\nop y = nop",
			[]string{"y"}, ""},
		{"table over the whole range by MaxInt64", "let t = [i for i in " + whole + " step " + maxInt + "]\n" +
			"assert len(t) == 3 && t[0] == " + minInt + " && t[1] == -1 && t[2] == " + maxInt + " - 1\nop y = nop",
			[]string{"y"}, ""},
		{"list over the whole range by MaxInt64", // a[0:1], a[1:2], a[3:4]: as long as b
			"buffer a u64[4]\nbuffer b u64[3]\nop c = copy {a[i / 2 ** 62 + 2 : i / 2 ** 62 + 3] for i in " + whole + " step " + maxInt + "} to b",
			[]string{"c a[0]", "c a[1]", "c a[3]", "c"}, ""}, // one copy per slice, then their join

		{"whole range by 1", "for i in " + whole + " { op x[i] = nop }", nil,
			"2:1: the plan has more than 1000 ops over all its ranks (this loop alone makes at least 9223372036854775807)"},
		{"whole range by 1, no ops", "for i in " + whole + " { let k = i }", nil,
			"2:1: the plan runs more than 16777216 loop iterations: is a bound wrong?"},
		{"table over the whole range by 1", "let t = [i for i in " + whole + "]", nil,
			"2:9: the loop of this table runs 18446744073709551615 passes: tables hold at most 1048576 elements"},
		{"table over the whole range by 2", "let t = [i for i in " + whole + " step 2]", nil,
			"2:9: the loop of this table runs 9223372036854775808 passes: tables hold at most 1048576 elements"},
		{"list over the whole range by 1", "buffer a u64[4]\nop c = copy {a[0:0] for i in " + whole + "} to a[0:0]", nil,
			"3:13: the plan runs more than 16777216 loop iterations: is a bound wrong?"},
		{"negative step", "for i in " + maxInt + " .. " + minInt + " step -1 { op x[i] = nop }", nil,
			"2:" + fmt.Sprint(len("for i in "+maxInt+" .. "+minInt+" step ")+1) + ": for step -1: the step must be positive"},
		{"least step", "for i in 0 .. 1 step " + minInt + " { op x[i] = nop }", nil,
			"for step -9223372036854775808: the step must be positive"},
		{"table with a negative step", "let t = [i for i in 0 .. 1 step " + minInt + "]", nil,
			"for step -9223372036854775808: the step must be positive"},
		{"list with a negative step", "buffer a u64[4]\nop c = copy {a[0:0] for i in 0 .. 1 step -1} to a[0:0]", nil,
			"for step -1: the step must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := elaborateWith(t, "plan p\n"+tc.body+"\n", nil, Options{MaxOps: 1000})
			if tc.want != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
				return
			}
			require.NoError(t, err)
			var names []string
			for i := range g.Ops {
				op := &g.Ops[i]
				switch {
				case op.Rank != 0:
				case op.Kind == ir.OpCopy:
					names = append(names, op.Name+" "+g.SliceString(op.Src))
				default:
					names = append(names, op.Name)
				}
			}
			assert.Equal(t, tc.ops, names)
		})
	}
}
