package elaborate

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
)

// A compiled expression evaluates as evalInt does, value and error alike, on every evaluation:
// the first (which finds the bindings), the later ones (which use them, and fold constants),
// and after a var it reads changed.
func TestCompiledExprMatchesEvalInt(t *testing.T) {
	t.Parallel()
	exprs := []string{
		"1 + 2 * 3", "(g - 1) % ranks", "-7 / 2", "-7 % 3", "2 ** 3 ** 2", "-2 ** 2", "(-1) ** 1000000000000",
		"1 << 62", "-1 >> 70", "6 & 3 | 8 ^ 1", "3 < 4 && 4 <= 4", "1 == 2 || !0", "0 && 1 / 0", "1 || 1 / 0",
		"min(g, -2) + max(v, 9)", "if v > 2 then g else rank", "-(g * 2)", "^rank", "(g + 1) * (v + 1)",
		"1 / (v - v)", "g / (rank - rank)", "9223372036854775807 + g", "4294967296 * (4294967296 + v)",
		"2 ** (60 + v)", "1 << (g - 10)", "nope + 1", "bad + 1", "v && bad", "(ranks - 1) * 2",
	}
	src := "plan e\n"
	for i, e := range exprs {
		src += fmt.Sprintf("let x%d = %s\n", i, e)
	}
	f, err := dsl.Parse("e.dag", []byte(src))
	require.NoError(t, err)
	globals := &scope{}
	globals.bind("ranks", 4)
	globals.bind("g", 7)
	globals.bindBroken("bad")
	top := &scope{parent: globals}
	top.bind("rank", 3)
	inner := &scope{parent: top}
	inner.bind("v", 1)
	inner.setFlag(0, flagMutable)
	for i, st := range f.Stmts[1:] {
		e := st.(*dsl.LetStmt).Value
		c := compileExpr(e)
		for pass, v := range []int64{1, 1, 5, 0} {
			inner.values[0] = v
			want, wantErr := evalInt(e, inner)
			got, gotErr := c.eval(inner)
			assert.Equal(t, want, got, "%s, pass %d", exprs[i], pass)
			assert.Equal(t, wantErr, gotErr, "%s, pass %d", exprs[i], pass)
		}
	}
	// What reads only params and global lets is folded; what reads rank or a var is not.
	for _, tc := range []struct {
		expr string
		lit  bool
	}{{"(ranks - 1) * 2", true}, {"-(g * 2)", true}, {"g * 2 + rank", false}, {"(g + 1) * (v + 1)", false}} {
		f, err := dsl.Parse("e.dag", []byte("plan e\nlet x = "+tc.expr+"\n"))
		require.NoError(t, err)
		c := compileExpr(f.Stmts[1].(*dsl.LetStmt).Value)
		for range 2 { // the first finds the bindings, the second folds
			_, everr := c.eval(inner)
			require.Nil(t, everr)
		}
		assert.Equal(t, tc.lit, c.kind == cLit, tc.expr)
	}
}

// Names kept by their text, not by the tables (several indices, a negative or a large index),
// are declared, found, reported twice-declared and reported missing like the others.
func TestNamesKeptByText(t *testing.T) {
	t.Parallel()
	g, err := elaborateSrc(t, "plan p\nop h[1, 2] = nop\nop n[-1] = nop\nop big[70000] = nop\nop t[3] = nop\n"+
		"op z = nop after h[1, 2], n[-1], big[70000], t[3]\nz after t[3], big[70000]\n", nil)
	require.NoError(t, err)
	assert.Len(t, g.Ops, 5)
	assert.Len(t, g.Edges, 6)
	for _, tc := range []struct{ src, want string }{
		{"plan p\nop big[70000] = nop\nop big[70000] = nop\n", "3:4: op big[70000] declared twice on this rank"},
		{"plan p\nop h[1, 2] = nop\nop h[1, 2] = nop\n", "3:4: op h[1,2] declared twice on this rank"},
		{"plan p\nop t[3] = nop\nop t[3] = nop\n", "3:4: op t[3] declared twice on this rank"},
		{"plan p\nop big[70000] = nop\nop z = nop after big[70001]\n", "3:18: big[70001] is not defined on this rank, though other big ops are"},
		{"plan p\nop h[1, 2] = nop\nop z = nop after h[2, 1]\n", "3:18: h[2,1] is not defined on this rank, though other h ops are"},
		{"plan p\nop t[3] = nop\nop z = nop after t[4]\n", "3:18: t[4] is not defined on this rank, though other t ops are"},
		{"plan p\nop t[3] = nop\nop z = nop after u[3]\n", "3:18: unknown op u[3]"},
	} {
		_, err := elaborateSrc(t, tc.src, nil)
		if assert.Error(t, err, tc.src) {
			assert.Contains(t, err.Error(), tc.want, tc.src)
		}
	}
}

// Once the tables are full, names are kept by their text: the Graph is the same.
func TestNamesPastFullTables(t *testing.T) {
	t.Parallel()
	src := "plan p\nparam ranks = 3\nfor i in 0 .. 40 { op a[i] = nop\n if i > 0 { a[i] after a[i - 1] }\n if i % 3 == 0 { op b[i] = nop after a[i] } }\n" +
		"for i in 0 .. 40 { op c[i] = nop after a[39 - i], b[i - i % 3] }\nop z = nop after c[39], b[39]\nz after a[0]\n"
	want, err := elaborateSrc(t, src, nil)
	require.NoError(t, err)
	for _, n := range []int{0, 1, 17, 60} {
		g, err := elaborateWith(t, src, nil, Options{byIndexSet: true, maxByIndexLen: n})
		require.NoError(t, err)
		assert.Equal(t, want.Edges, g.Edges, "maxByIndexLen %d", n)
		assert.Equal(t, len(want.Ops), len(g.Ops))
		for i := range g.Ops {
			assert.Equal(t, want.Ops[i].Name, g.Ops[i].Name)
		}
	}
	_, err = elaborateSrc(t, "plan p\nfor i in 0 .. 30 { op a[i] = nop }\nop a[25] = nop\n", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "3:4: op a[25] declared twice on this rank")
}

// Names with two indices are kept in rows of the tables while there is room, and by their text
// past it (or with a negative index, or with three): the Graph, and the errors, are the same.
func TestTwoIndexNamesPastFullTables(t *testing.T) {
	t.Parallel()
	src := "plan p\nparam ranks = 3\nfor i in 0 .. 6 { for j in 0 .. 7 { op d[i, j] = nop\n if j > 0 { d[i, j] after d[i, j - 1] }\n" +
		" if i > 0 { d[i, j] after d[i - 1, 6 - j] } } }\n" +
		"for i in 0 .. 6 { op d[i] = nop after d[i, 3]\n op e[i, -1] = nop after d[5 - i, i]\n op f[i, i, 2] = nop after e[i, -1], d[i] } \n" +
		"op z = nop after d[5, 6], f[5, 5, 2]\nd[0, 0] after z\n"
	want, err := elaborateSrc(t, src, nil) // with a cycle through z: verify's to find, not elaborate's
	require.NoError(t, err)
	for _, n := range []int{0, 1, 5, 17, 60, 1000} {
		g, err := elaborateWith(t, src, nil, Options{byIndexSet: true, maxByIndexLen: n})
		require.NoError(t, err)
		assert.Equal(t, want.Edges, g.Edges, "maxByIndexLen %d", n)
		require.Equal(t, len(want.Ops), len(g.Ops))
		for i := range g.Ops {
			assert.Equal(t, want.Ops[i].Name, g.Ops[i].Name)
		}
		for _, bad := range []struct{ src, want string }{
			{"plan p\nfor i in 0 .. 3 { for j in 0 .. 4 { op a[i, j] = nop } }\nop a[2, 3] = nop\n", "3:4: op a[2,3] declared twice on this rank"},
			{"plan p\nfor i in 0 .. 3 { for j in 0 .. 4 { op a[i, j] = nop } }\nop b = nop after a[2, 4]\n", "a[2,4] is not defined on this rank, though other a ops are"},
			{"plan p\nop a[1] = nop\nop b = nop after a[1, 0]\n", "a[1,0] is not defined on this rank"},
		} {
			_, err := elaborateWith(t, bad.src, nil, Options{byIndexSet: true, maxByIndexLen: n})
			if assert.Error(t, err, bad.src) {
				assert.Contains(t, err.Error(), bad.want, "maxByIndexLen %d", n)
			}
		}
	}
}

// quickBinary, where it answers, answers as applyBinary does: the same value, and never for
// operands that applyBinary refuses.
func TestQuickBinary(t *testing.T) {
	t.Parallel()
	vals := []int64{0, 1, -1, 2, -2, 3, -7, 7, 1 << 31, -1 << 31, 1<<31 - 1, 1 << 32, 1<<62 + 5, -1 << 62,
		9223372036854775807, -9223372036854775808, 9223372036854775806, -9223372036854775807}
	e := &dsl.BinaryExpr{Op: "?"}
	answered := 0
	for op := opAdd; op <= opLogOr; op++ {
		for _, x := range vals {
			for _, y := range vals {
				v, ok := quickBinary(op, x, y)
				if !ok {
					continue
				}
				answered++
				want, err := applyBinary(e, op, x, y)
				require.Nil(t, err, "op %d on %d, %d: quickBinary answers %d where applyBinary refuses", op, x, y, v)
				require.Equal(t, want, v, "op %d on %d, %d", op, x, y)
			}
		}
	}
	assert.Greater(t, answered, 1000)
}
