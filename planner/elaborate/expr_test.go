package elaborate

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
)

// evalSrc evaluates an integer expression by elaborating `let x = EXPR` on one rank.
func evalSrc(t *testing.T, expr string) (int64, error) {
	t.Helper()
	src := fmt.Sprintf("plan e\nparam ranks = 3\nlet x = %s\n", expr)
	f, err := dsl.Parse("e.dag", []byte(src))
	require.NoError(t, err, "parse %q", expr)
	s := &scope{}
	s.bind("ranks", 3)
	s.bind("rank", 0)
	v, everr := evalInt(f.Stmts[2].(*dsl.LetStmt).Value, s)
	if everr != nil {
		return 0, everr
	}
	return v, nil
}

func TestEvalInt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		want int64
	}{
		{"1 + 2 * 3", 7},
		{"(1 + 2) * 3", 9},
		{"-7 / 2", -4}, // floor division
		{"-7 % 3", 2},  // floor modulo
		{"7 % -3", -2},
		{"(rank - 1) % ranks", 2},
		{"2 ** 3 ** 2", 512}, // right-associative
		{"-2 ** 2", -4},      // ** binds tighter than unary minus
		{"(-2) ** 3", -8},
		{"(-1) ** 1000000000000", 1},
		{"1 ** 1000000000000000000", 1},
		{"1 << 62", 1 << 62},
		{"-1 >> 70", -1},
		{"6 & 3 | 8 ^ 1", 6&3 | 8 ^ 1},
		{"3 < 4 && 4 <= 4", 1},
		{"1 == 2 || !0", 1},
		{"0 && 1 / 0", 0}, // short-circuit skips the division by zero
		{"1 || 1 / 0", 1},
		{"min(3, -2) + max(3, 9)", 7},
		{"log2(1024)", 10},
		{"4KiB", 4096},
		{"0x2a + 1_000", 1042},
		{"9223372036854775807", math.MaxInt64},
		{"-9223372036854775807 - 1", math.MinInt64},
		{"(-9223372036854775807 - 1) % -1", 0},
	} {
		got, err := evalSrc(t, tc.expr)
		if assert.NoError(t, err, tc.expr) {
			assert.Equal(t, tc.want, got, tc.expr)
		}
	}
}

func TestEvalIntErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, msg string }{
		{"1 / 0", "division by zero"},
		{"5 % (rank - rank)", "division by zero"},
		{"9223372036854775807 + 1", "overflow"},
		{"-9223372036854775807 - 2", "overflow"},
		{"4294967296 * 4294967296", "overflow"},
		{"2 ** 63", "overflow"},
		{"2 ** -1", "negative exponent"},
		{"1 << 63", "overflow"},
		{"3 << 62", "overflow"},
		{"1 << -1", "negative shift"},
		{"1 >> -1", "negative shift"},
		{"log2(12)", "power of two"},
		{"log2(0)", "power of two"},
		{"min(1)", "takes 2 argument"},
		{"foo(1)", "unknown function foo"},
		{"nope + 1", "undefined: nope"},
		{"-(-9223372036854775807 - 1)", "overflow"},
		{"(-9223372036854775807 - 1) / -1", "overflow"},
	} {
		_, err := evalSrc(t, tc.expr)
		if assert.Error(t, err, tc.expr) {
			assert.Contains(t, err.Error(), tc.msg, tc.expr)
		}
	}
}
