package elaborate

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
)

// randInitExpr writes a random init expression over i, rank and n, with operators that can fail
// (division, overflow, shifts, log2) and, with float, float literals.
func randInitExpr(rng *rand.Rand, depth int, float bool) string {
	if depth == 0 || rng.Intn(4) == 0 {
		leaves := []string{"i", "i", "i", "rank", "n", "0", "1", "2", "3", "7", "64", "100", "4611686018427387904", "9223372036854775807"}
		if float {
			leaves = append(leaves, "0.5", "2.0", "1.5", "0.25")
		}
		return leaves[rng.Intn(len(leaves))]
	}
	if rng.Intn(8) == 0 {
		funs := []string{"min", "max", "log2", "flog2", "clog2", "hibit", "lobit", "popcount", "nextpow2", "quo", "rem"}
		fun := funs[rng.Intn(len(funs))]
		if builtins[fun].args == 1 {
			return fun + "(" + randInitExpr(rng, depth-1, float) + ")"
		}
		return fun + "(" + randInitExpr(rng, depth-1, float) + ", " + randInitExpr(rng, depth-1, float) + ")"
	}
	if rng.Intn(10) == 0 {
		return "(if " + randInitExpr(rng, depth-1, false) + " then " + randInitExpr(rng, depth-1, float) + " else " + randInitExpr(rng, depth-1, float) + ")"
	}
	if rng.Intn(8) == 0 {
		return []string{"-", "!", "^", "+"}[rng.Intn(4)] + "(" + randInitExpr(rng, depth-1, float) + ")"
	}
	ops := []string{"+", "-", "*", "/", "%", "**", "<<", ">>", "&", "|", "^", "==", "!=", "<", "<=", ">", ">=", "&&", "||"}
	if float && rng.Intn(2) == 0 {
		ops = []string{"+", "-", "*", "/", "**"}
	}
	return "(" + randInitExpr(rng, depth-1, float) + " " + ops[rng.Intn(len(ops))] + " " + randInitExpr(rng, depth-1, float) + ")"
}

// initPlan parses a plan with one buffer initialised by expr and reads its header.
func initPlan(t *testing.T, typ, count, expr string) (*elaborator, *dsl.BufferStmt, bool) {
	t.Helper()
	src := fmt.Sprintf("plan p\nparam ranks = 3\nparam n = 7\nbuffer a %s[%s] init %s\n", typ, count, expr)
	f, err := dsl.Parse("t.dag", []byte(src))
	require.NoError(t, err, src)
	el := newElaborator(t.Context(), f, nil, Options{})
	el.header()
	if el.result() != nil {
		return nil, nil, false // e.g. a float init for an integer buffer
	}
	return el, f.Stmts[3].(*dsl.BufferStmt), true
}

// TestInitRangeSound: wherever range analysis says an init cannot fail over a box, no point of
// the box fails and every value lies in the range.
func TestInitRangeSound(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(1))
	starts := []int64{0, 3, 95, 1 << 20, 1 << 40, math.MaxInt64 - 40}
	proven := 0
	for k := 0; k < 2000; k++ {
		float := k%3 == 0
		expr := randInitExpr(rng, 4, float)
		el, st, ok := initPlan(t, map[bool]string{false: "i64", true: "f64"}[float], "4", expr)
		if !ok {
			continue
		}
		i0 := starts[rng.Intn(len(starts))]
		box := initBox{0, int64(rng.Intn(3)), i0, i0 + int64(rng.Intn(30))}
		env := rangeEnv{globals: el.globals, box: box}
		s := &scope{parent: el.globals}
		s.bind("rank", 0)
		s.bind("i", 0)
		check := func(at func(r, i int64) (string, bool)) {
			for r := box.r0; r <= box.r1; r++ {
				for i := box.i0; i <= box.i1; i++ {
					s.values[0], s.values[1] = r, i
					if msg, ok := at(r, i); !ok {
						t.Fatalf("%s over %+v: proven safe, but at rank %d element %d: %s", expr, box, r, i, msg)
					}
				}
			}
			proven++
		}
		if float {
			if fr := env.floatRange(st.Init); fr.ok {
				check(func(r, i int64) (string, bool) {
					v, err := evalFloat(st.Init, s)
					if err != nil {
						return err.msg, false
					}
					return fmt.Sprintf("%g outside [%g, %g]", v, fr.lo, fr.hi), math.IsNaN(v) || fr.lo <= v && v <= fr.hi
				})
			}
			continue
		}
		if ir := env.intRange(st.Init); ir.ok {
			check(func(r, i int64) (string, bool) {
				v, err := evalInt(st.Init, s)
				if err != nil {
					return err.msg, false
				}
				return fmt.Sprintf("%d outside [%d, %d]", v, ir.lo, ir.hi), ir.lo <= v && v <= ir.hi
			})
		}
	}
	assert.Greater(t, proven, 300, "too few boxes proven for the test to mean much")
}

// TestCheckInitsFindsTheFirstFailure compares checkInits with evaluating every element: on each
// rank it must report exactly the first element that fails, with its message.
func TestCheckInitsFindsTheFirstFailure(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(2))
	failing := 0
	for k := 0; k < 1000; k++ {
		float := k%3 == 0
		expr := randInitExpr(rng, 4, float)
		if rng.Intn(2) == 0 { // a divisor that is zero at one element
			expr = fmt.Sprintf("(%s) / (i - %d)", expr, rng.Intn(300))
		}
		el, st, ok := initPlan(t, map[bool]string{false: "i64", true: "f64"}[float], "200", expr)
		if !ok {
			continue
		}
		b := &el.g.Buffers[0]
		want := map[int]string{}
		s := &scope{parent: el.globals}
		s.bind("rank", 0)
		s.bind("i", 0)
		for r := 0; r < 3; r++ {
			for i := 0; i < 200 && (i == 0 || el.perElem[0]); i++ {
				s.values[0], s.values[1] = int64(r), int64(i)
				if _, err := initValue(st.Init, s, b.Type, float); err != nil {
					want[r] = fmt.Sprintf("%s: %s at %d", err.pos, err.msg, map[bool]int{true: i, false: -1}[el.perElem[0]])
					break
				}
			}
		}
		got := map[int]string{}
		budget := int64(MaxInitChecks)
		c := &initChecker{el: el, b: b, e: st.Init, float: float, perElem: el.perElem[0], budget: &budget, failed: map[int64]bool{},
			onFail: func(ie *ir.InitError) {
				_, dup := got[ie.Rank]
				assert.False(t, dup, "%s: two failures reported on rank %d", expr, ie.Rank)
				got[ie.Rank] = fmt.Sprintf("%s: %s at %d", ie.Pos, ie.Msg, ie.Elem)
			}}
		n := int64(0)
		if el.perElem[0] {
			n = 199
		}
		c.visit(initBox{0, 2, 0, n})
		require.Equal(t, want, got, "%s", expr)
		assert.Zero(t, c.skipped)
		if len(want) > 0 {
			failing++
		}
	}
	assert.Greater(t, failing, 200)
}

// TestCheckInitsWholeBuffer: an init is proven on every element, however large the buffer; the
// one element that fails is found far past what evaluating element by element could reach.
func TestCheckInitsWholeBuffer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, want string }{
		{"fails past the first 4Mi elements", "plan p\nbuffer a u8[8MiB] init 1 / (i - 5000000)\n",
			"t.dag:2:26: division by zero in 1 / 0 in the init of buffer a at element 5000000"},
		{"on some ranks of many", "plan p\nparam ranks = 64\nbuffer a f32[8MiB] init 1 / (i - 4 * rank - 7000000.0)\n",
			"t.dag:3:27: division by zero in the init of buffer a at element 7000000 (on rank 0; likewise on ranks 1-63)"},
		{"xor with a constant", "plan p\nbuffer a u64[1 << 30] init 3 % (i ^ 1000000000)\n",
			"t.dag:2:30: division by zero in 3 % 0 in the init of buffer a at element 1000000000"},
		{"not depending on i", "plan p\nparam ranks = 8\nbuffer a u64[1 << 30] init 5 / (rank - 6)\n",
			"t.dag:3:30: division by zero in 5 / 0 in the init of buffer a (on rank 6)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := elaborateSrc(t, tc.src, nil)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
	// Proven without a note, over 2^30 elements on each of 64 ranks.
	g, err := elaborateSrc(t, "plan p\nparam ranks = 64\nbuffer a u64[1 << 30] init (i * rank) % (ranks - rank) + i / (i % 1000 + 1) + (1 << (i % 60)) + i ** 2 + 3 / (2 * i + 1)\n"+
		"buffer b f64[1 << 34] init 1 / (i - 0.5) + min(i, rank) * 0.25\n", nil)
	require.NoError(t, err)
	assert.Empty(t, g.Notes)
}

// TestCheckInitsBudgetNote: what the budget leaves unchecked is said in a note, at the init.
func TestCheckInitsBudgetNote(t *testing.T) {
	t.Parallel()
	g, err := elaborateWith(t, "plan p\nparam ranks = 2\nbuffer a u32[100000] init 7 / ((i | 1) & 255)\n", nil, Options{MaxInitChecks: 1000})
	require.NoError(t, err)
	require.Len(t, g.Notes, 1)
	assert.Regexp(t, `^t.dag:3:27: the init of buffer a is checked only in part: from element [0-9]+ on rank 0, [0-9]+ elements on ranks 0, 1 are left to run time, where an error stops the run [(]checking stops after 1000 evaluations[)]$`, g.Notes[0].Error())
}
