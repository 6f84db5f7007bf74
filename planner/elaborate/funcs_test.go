package elaborate

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
)

func TestEvalHelpers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		want int64
	}{
		{"if 1 then 2 else 1 / 0", 2}, // the branch not taken is not evaluated
		{"if rank == 0 then 0 else 10 / rank", 0},
		{"if 0 then 1 else if 1 then 2 else 3", 2},
		{"1 + (if ranks > 2 then 10 else 20)", 11},
		{"flog2(1)", 0}, {"flog2(12)", 3}, {"flog2(16)", 4},
		{"clog2(1)", 0}, {"clog2(12)", 4}, {"clog2(16)", 4},
		{"hibit(0)", 0}, {"hibit(12)", 8}, {"hibit(9223372036854775807)", 1 << 62},
		{"lobit(0)", 0}, {"lobit(12)", 4},
		{"popcount(0)", 0}, {"popcount(255)", 8},
		{"nextpow2(0)", 1}, {"nextpow2(1)", 1}, {"nextpow2(5)", 8}, {"nextpow2(8)", 8}, {"nextpow2(4611686018427387904)", 1 << 62},
		{"quo(-7, 2)", -3}, {"rem(-7, 2)", -1}, {"quo(7, -2)", -3}, {"rem(7, -2)", 1},
		{"-7 / 2", -4}, {"-7 % 2", 1}, {"rem(-9223372036854775807 - 1, -1)", 0},
	} {
		got, err := evalSrc(t, tc.expr)
		if assert.NoError(t, err, tc.expr) {
			assert.Equal(t, tc.want, got, tc.expr)
		}
	}
	for _, tc := range []struct{ expr, msg string }{
		{"if 1 / 0 then 1 else 2", "division by zero"},
		{"flog2(0)", "must be positive"},
		{"clog2(-1)", "must be positive"},
		{"hibit(-1)", "must not be negative"},
		{"popcount(-1)", "must not be negative"},
		{"nextpow2(4611686018427387905)", "overflow"},
		{"quo(1, 0)", "division by zero"},
		{"quo(-9223372036854775807 - 1, -1)", "overflow"},
		{"rem(1, 0)", "division by zero"},
		{"flg2(3)", "did you mean flog2"},
		{"log2(12)", "flog2 and clog2"},
	} {
		_, err := evalSrc(t, tc.expr)
		if assert.Error(t, err, tc.expr) {
			assert.Contains(t, err.Error(), tc.msg, tc.expr)
		}
	}
}

// elab elaborates src and returns the graph and the error text.
func elab(t *testing.T, src string, params map[string]int64) (*ir.Graph, string) {
	t.Helper()
	return elabWith(t, src, params, Options{})
}

// elabWith is elab with options.
func elabWith(t *testing.T, src string, params map[string]int64, opt Options) (*ir.Graph, string) {
	t.Helper()
	f, err := dsl.Parse("t.dag", []byte(src))
	require.NoError(t, err)
	g, err := Elaborate(t.Context(), f, params, opt)
	if err == nil {
		return g, ""
	}
	var lines []string
	for _, d := range err.(diag.List) {
		lines = append(lines, d.Error())
	}
	return g, strings.Join(lines, "\n")
}

func TestDefsAndVars(t *testing.T) {
	t.Parallel()
	ok := `plan t
param ranks = 5
def parent(r) = if r == 0 then -1 else (r - 1) / 2
def gcd(a, b) = if b == 0 then a else gcd(b, a % b)
def twice(x) = double(x) * 2
def double(x) = x + x
var total = 0
var last = -1
for k in 0 .. 10 {
  total += k
  if k % 3 == 0 { last = k }
  var inner = k
  inner *= 2
}
assert total == 45 && last == 9, "vars carried across iterations"
assert gcd(84, 36) == 12 && twice(3) == 12 && parent(rank) < rank
assert parent(4) == 1 && parent(0) == -1
`
	_, msg := elab(t, ok, nil)
	assert.Empty(t, msg)

	for _, tc := range []struct{ body, want string }{
		{"def f(x) = f(x)\nlet y = f(1)", "t.dag:3:12: calls nested more than 64 deep: f -> f -> f -> f -> f -> ..."},
		{"def f(x) = if x == 0 then 0 else f(x - 1) + f(x - 1)\nlet y = f(40)", "more than 65536 function calls"},
		{"def f(x) = x + rank\nlet y = f(1)", "t.dag:3:16: undefined: rank in function f"},
		{"def f(x) = x\nlet y = f(1, 2)", "t.dag:4:9: f takes 1 argument(s) (x), got 2"},
		{"def f(x, x) = x", "t.dag:3:10: parameter x of f declared twice"},
		{"def f(x) = x\ndef f(y) = y", "t.dag:4:5: function f defined twice"},
		{"def flog2(x) = x", "flog2 is a built-in function"},
		{"for k in 0 .. 2 { def f(x) = x }", "def f inside a block"},
		{"let c = 1\nc = 2", "t.dag:4:1: cannot assign to c: it is a constant"},
		{"for k in 0 .. 2 { k += 1 }", "cannot assign to k"},
		{"y = 2", "t.dag:3:1: assignment to undeclared y"},
		{"var v = 1\nvar v = 2", "v is already defined in this block"},
		{"var v = 1\nv /= 0", "t.dag:4:3: division by zero in 1 / 0"},
		{"if rank > 0 { var v = 1 }\nv = 2", "assignment to undeclared v"},
	} {
		_, msg := elab(t, "plan t\nparam ranks = 2\n"+tc.body+"\n", nil)
		assert.Contains(t, msg, tc.want, tc.body)
	}
}

func TestAssert(t *testing.T) {
	t.Parallel()
	src := `plan t
param ranks = 4
param n = 2
assert ranks % n == 0, "n must divide ranks"
assert rank != 3, "rank 3 is refused"
op x = nop after missing
`
	_, msg := elab(t, src, map[string]int64{"n": 3})
	assert.Equal(t, `t.dag:4:1: assertion failed: n must divide ranks (with n = 3 as given, ranks = 4)`, msg)
	_, msg = elab(t, src, nil)
	// A failed assert stops its rank: the missing op is reported for the others only.
	assert.Contains(t, msg, `t.dag:5:1: assertion failed: rank 3 is refused (on rank 3)`)
	assert.Contains(t, msg, "missing")
	assert.NotContains(t, msg, "missing (on rank 3")

	_, msg = elab(t, "plan t\nparam ranks = 2\nassert ranks > 2\n", nil)
	assert.Equal(t, "t.dag:3:1: assertion failed: ranks > 2 (with ranks = 2)", msg)
}

// TestFloatTyping: integers stay integers until combined with a float.
func TestFloatTyping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		init string
		want func(i, rank int64) float64
	}{
		{"(rank == 1) * (0.25 * i + 1)", func(i, r int64) float64 {
			if r == 1 {
				return 0.25*float64(i) + 1
			}
			return 0
		}},
		{"(i % 7) * 0.5", func(i, _ int64) float64 { return float64(i%7) * 0.5 }},
		{"(i / 7) * 0.5", func(i, _ int64) float64 { return float64(i/7) * 0.5 }},
		{"i / 2.0", func(i, _ int64) float64 { return float64(i) / 2 }},
		{"if i < 3 then 0.5 else i / 2", func(i, _ int64) float64 {
			if i < 3 {
				return 0.5
			}
			return float64(i / 2)
		}},
		{"-min(i, 3) * 1.5", func(i, _ int64) float64 { return -float64(min(i, 3)) * 1.5 }},
	} {
		g, msg := elab(t, fmt.Sprintf("plan t\nparam ranks = 2\nbuffer b f64[20] init %s\n", tc.init), nil)
		require.Empty(t, msg, tc.init)
		for r := 0; r < 2; r++ {
			dst := make([]byte, 8*20)
			require.NoError(t, g.Buffers[0].Init(r, dst))
			for i := int64(0); i < 20; i++ {
				got := math.Float64frombits(uint64(dst[8*i]) | uint64(dst[8*i+1])<<8 | uint64(dst[8*i+2])<<16 | uint64(dst[8*i+3])<<24 |
					uint64(dst[8*i+4])<<32 | uint64(dst[8*i+5])<<40 | uint64(dst[8*i+6])<<48 | uint64(dst[8*i+7])<<56)
				assert.Equal(t, tc.want(i, int64(r)), got, "%s at i=%d rank=%d", tc.init, i, r)
			}
		}
	}
	for _, tc := range []struct{ init, want string }{
		{"(i * 0.5) % 7", "t.dag:3:28: operator % needs integers; (i * 0.5) is a float (because of 0.5)"},
		{"i < 0.5", "t.dag:3:27: operator < needs integers; 0.5 is a float"},
		{"flog2(i + 0.5)", "t.dag:3:33: flog2 needs integers; i + 0.5 is a float (because of 0.5)"},
		{"if 0.5 then 1.0 else 2", "the condition of if-then-else needs integers"},
		{"0.5 / (i - i)", "division by zero"},
	} {
		_, msg := elab(t, fmt.Sprintf("plan t\nparam ranks = 2\nbuffer b f64[20] init %s\n", tc.init), nil)
		assert.Contains(t, msg, tc.want, tc.init)
	}
}

// Remembered def results change nothing but the time: values, and the errors of the call
// limits (their messages and call chains), are those of evaluating every call, on every rank
// (the later ranks find the first rank's results remembered).
func TestMemoSameAsEvaluating(t *testing.T) {
	t.Parallel()
	const defs = `plan p
param ranks = 3
param k = 20
param d = 60
param m = 10
def fib(n) = if n < 2 then n else fib(n - 1) + fib(n - 2)
def down(n) = if n == 0 then 0 else down(n - 1) + 1
def wrap(n) = wrap2(n) + 0
def wrap2(n) = down(n)
def four(n) = fib(n) + fib(n) + fib(n) + fib(n) # the later calls are remembered ones
buffer b u8[8]
let f = fib(k + rank - rank) # rank-level lets: the ranks' own evaluations
let x = down(d + rank - rank)
let y = wrap(d + rank - rank)
let w = four(m + rank - rank)
for i in 0 .. f % 7 + x % 3 + y % 2 + w % 5 + 1 { op o[i] = nop }
`
	for _, params := range []map[string]int64{
		{},                // fib(20) = 6765 in 21,891 calls, down at 61 levels, wrap at 63
		{"k": 25},         // fib(25) takes 242,785 calls: past MaxCalls
		{"d": 62},         // wrap(62) goes 65 levels deep: past MaxCallDepth, down(62) alone does not
		{"d": 64},         // down(64) itself is too deep
		{"k": 23, "d": 1}, // 92,735 calls: past MaxCalls too
		{"m": 20},         // four(20) makes 87,565 calls, the last three fib(20) remembered
		{"m": 19},         // 54,117: within MaxCalls
	} {
		g0, err0 := elabWith(t, defs, params, Options{noMemo: true})
		g1, err1 := elab(t, defs, params)
		assert.Equal(t, err0, err1, "%v", params)
		if err0 == "" {
			require.NotNil(t, g1)
			assert.Equal(t, len(g0.Ops), len(g1.Ops), "%v", params)
		}
	}
	_, err := elab(t, defs, map[string]int64{"k": 25})
	assert.Contains(t, err, "more than 65536 function calls in one expression")
	_, err = elab(t, defs, map[string]int64{"d": 62})
	assert.Contains(t, err, "calls nested more than 64 deep")
	g, err := elab(t, defs, nil)
	require.Empty(t, err)
	assert.Equal(t, 3*(6765%7+60%3+60%2+4*55%5+1), len(g.Ops))
	_, err = elab(t, defs, map[string]int64{"m": 20})
	assert.Contains(t, err, "more than 65536 function calls in one expression: four -> fib")
}

// A call site's last call of a def that is not remembered (siteCache) changes nothing either:
// p(0) is evaluated once at the top of down and found again at every level below, where its
// two levels of calls pass MaxCallDepth past d = 61, and fib's leaves count p's calls towards
// MaxCalls (fib(20) makes 21,891 calls and 10,946 pairs of p(0) and q(0) besides, 43,783 in
// all; fib(21) makes 70,843, past it).
func TestSiteCacheSameAsEvaluating(t *testing.T) {
	t.Parallel()
	const defs = `plan p
param ranks = 2
param d = 10
param k = 10
def q(x) = x * 2
def p(x) = q(x) + 1
def down(n) = if n == 0 then p(0) else p(0) + down(n - 1)
def fib(n) = if n < 2 then p(0) else fib(n - 1) + fib(n - 2)
buffer b u8[8]
let x = down(d + rank - rank)
let y = fib(k + rank - rank)
for i in 0 .. x % 5 + y % 3 + 1 { op o[i] = nop }
`
	var fails int
	for _, params := range []map[string]int64{
		{"d": 60}, {"d": 61}, {"d": 62}, {"d": 63},
		{"k": 19}, {"k": 20}, {"k": 21},
	} {
		g0, err0 := elabWith(t, defs, params, Options{noMemo: true})
		g1, err1 := elab(t, defs, params)
		assert.Equal(t, err0, err1, "%v", params)
		if err0 == "" {
			require.NotNil(t, g1)
			assert.Equal(t, len(g0.Ops), len(g1.Ops), "%v", params)
		} else {
			fails++
		}
	}
	assert.Equal(t, 3, fails) // d = 62, d = 63 and k = 21
	_, err := elab(t, defs, map[string]int64{"d": 62})
	assert.Contains(t, err, "calls nested more than 64 deep: down -> down")
	_, err = elab(t, defs, map[string]int64{"k": 21})
	assert.Contains(t, err, "more than 65536 function calls in one expression: fib -> fib")
}

// Only defs that may recurse, directly or through their callees, are remembered.
func TestMemoDefs(t *testing.T) {
	t.Parallel()
	f, err := dsl.Parse("t.dag", []byte(`plan p
def leaf(x) = x + 1
def twice(x) = leaf(leaf(x))
def self(x) = if x == 0 then 0 else self(x - 1)
def top(x) = self(x) + leaf(x)
def ping(x) = if x == 0 then 0 else pong(x - 1)
def pong(x) = ping(x)
op o = nop
`))
	require.NoError(t, err)
	defs := map[string]*dsl.DefStmt{}
	for _, st := range f.Stmts {
		if d, ok := st.(*dsl.DefStmt); ok {
			defs[d.Name.Name] = d
		}
	}
	got := map[string]bool{}
	for d, ok := range memoDefs(defs) {
		got[d.Name.Name] = ok
	}
	assert.Equal(t, map[string]bool{"leaf": false, "twice": false, "self": true, "top": true, "ping": true, "pong": true}, got)
}

// A block table that workers filled up while it was being replaced still answers: a key it
// holds gives its block, a new one a block of its own, kept nowhere (and no endless probing).
func TestMemoTableFull(t *testing.T) {
	t.Parallel()
	tab := &memoTable{}
	bt := newBlockTable(8)
	tab.cur.Store(bt)
	held := map[int64]*block{}
	for a := range int64(8) {
		k := blockKey{def: 1, n: 1, args: [maxArgs]int64{a}}
		h := k.hash()
		for i := h >> bt.shift; ; i = (i + 1) & 7 {
			if bt.slots[i].Load() == nil {
				held[a] = &block{key: k}
				bt.slots[i].Store(held[a])
				break
			}
		}
	}
	m := &memo{table: tab}
	for a := range int64(8) {
		k := blockKey{def: 1, n: 1, args: [maxArgs]int64{a}}
		assert.Same(t, held[a], tab.find(m, &k, k.hash()))
	}
	k := blockKey{def: 1, n: 1, args: [maxArgs]int64{8}}
	b := tab.find(m, &k, k.hash())
	require.NotNil(t, b)
	assert.Equal(t, k, b.key)
	assert.NotSame(t, b, tab.find(m, &k, k.hash()))
}
