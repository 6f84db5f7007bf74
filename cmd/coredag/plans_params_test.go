package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
)

// planAsserts parses a plan of plans/ and returns its declared params other than ranks (which
// coredag bounds itself) and its top-level asserts, in source order.
func planAsserts(t *testing.T, rel string) (params []string, asserts []*dsl.AssertStmt) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", rel))
	require.NoError(t, err)
	f, err := dsl.Parse(rel, src)
	require.NoError(t, err)
	for _, s := range f.Stmts {
		switch s := s.(type) {
		case *dsl.ParamStmt:
			if s.Name.Name != "ranks" {
				params = append(params, s.Name.Name)
			}
		case *dsl.AssertStmt:
			asserts = append(asserts, s)
		}
	}
	return params, asserts
}

// reads reports whether e reads the name p.
func reads(e dsl.Expr, p string) bool {
	switch e := e.(type) {
	case *dsl.Ident:
		return e.Name == p
	case *dsl.ParenExpr:
		return reads(e.X, p)
	case *dsl.UnaryExpr:
		return reads(e.X, p)
	case *dsl.BinaryExpr:
		return reads(e.X, p) || reads(e.Y, p)
	case *dsl.CallExpr:
		for _, a := range e.Args {
			if reads(a, p) {
				return true
			}
		}
	case *dsl.CondExpr:
		return reads(e.Cond, p) || reads(e.Then, p) || reads(e.Else, p)
	}
	return false
}

// assertFailsAt runs check on plan with -p set and wants exactly the failure of assert a: its
// position, its message and the value given, and the assert's source line quoted under it.
func assertFailsAt(t *testing.T, plan, set string, a *dsl.AssertStmt) {
	t.Helper()
	plan = filepath.Join(repoRoot, plan)
	code, _, stderr := coredagIn(t, "", "check", "-p", set, plan)
	require.Equal(t, exitFail, code, "%s -p %s:\n%s", plan, set, stderr)
	name, value, _ := strings.Cut(set, "=")
	want := fmt.Sprintf("%s:%d:%d: assertion failed: %s (with ", plan, a.Pos().Line, a.Pos().Col, a.Msg.Value)
	lines := strings.Split(stderr, "\n")
	require.GreaterOrEqual(t, len(lines), 2, stderr)
	assert.True(t, strings.HasPrefix(lines[0], want), "%s -p %s: want %q..., got:\n%s", plan, set, want, stderr)
	assert.Contains(t, lines[0], fmt.Sprintf("%s = %s as given)", name, value))
	assert.True(t, strings.HasPrefix(strings.TrimSpace(lines[1]), "assert "), "the assert is quoted:\n%s", stderr)
	assert.Equal(t, 1, strings.Count(stderr, ": assertion failed: "), "a failed param assert is the only diagnostic:\n%s", stderr)
}

// TestPlansAssertParams: every param of every plan (ranks aside, which coredag bounds to
// 1..65536) is guarded by a top-level assert whose message names it, and a value out of range
// is refused with that message at the assert's line and column, not with whatever breaks
// further down (a division by zero, an empty buffer, a wrong postcondition).
func TestPlansAssertParams(t *testing.T) {
	t.Parallel()
	// Values out of range: below the least a param takes, and a root that is not a rank of the
	// default world size (4).
	bad := func(p string) []string {
		if p == "root" {
			return []string{"-1", "4"}
		}
		return []string{"-1", "0"}
	}
	guarded := 0
	for _, plan := range plansFiles(t) {
		params, asserts := planAsserts(t, plan)
		for _, p := range params {
			var guard *dsl.AssertStmt
			for _, a := range asserts {
				if reads(a.Cond, p) {
					guard = a
					break
				}
			}
			require.NotNil(t, guard, "%s: param %s has no assert", plan, p)
			require.NotNil(t, guard.Msg, "%s: the assert of %s has no message", plan, p)
			assert.Regexp(t, `\b`+p+`\b`, guard.Msg.Value, "%s: the assert's message names the param %s", plan, p)
			for _, v := range bad(p) {
				assertFailsAt(t, plan, p+"="+v, guard)
			}
			guarded++
		}
	}
	assert.GreaterOrEqual(t, guarded, 20, "params guarded across the plan library")
}

// TestPlansAssertRanks: the plans that take fewer world sizes than coredag does say so with an
// assert at its position.
func TestPlansAssertRanks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ plan, set, word string }{
		{"plans/binomial_reduce.dag", "ranks=64", "1 to 63"},
		{"plans/recursive_doubling_allreduce.dag", "ranks=6", "power of two"},
		{"plans/recursive_doubling_allreduce.dag", "ranks=3", "power of two"},
	} {
		_, asserts := planAsserts(t, tc.plan)
		var guard *dsl.AssertStmt
		for _, a := range asserts {
			if reads(a.Cond, "ranks") && a.Msg != nil && strings.Contains(a.Msg.Value, tc.word) {
				guard = a
			}
		}
		require.NotNil(t, guard, "%s: no assert on ranks saying %q", tc.plan, tc.word)
		assert.True(t, strings.HasPrefix(guard.Msg.Value, "ranks "), "%s: the message names ranks", tc.plan)
		assertFailsAt(t, tc.plan, tc.set, guard)
	}
	// The edges of what they take pass.
	for _, tc := range []struct{ plan, set string }{
		{"plans/binomial_reduce.dag", "ranks=63"},
		{"plans/recursive_doubling_allreduce.dag", "ranks=64"},
	} {
		code, stdout, stderr := coredag(t, "", "check", "-p", tc.set, tc.plan)
		assert.Equal(t, exitOK, code, "%s -p %s:\n%s", tc.plan, tc.set, stderr)
		assert.Contains(t, stdout, tc.plan+": ok")
	}
}
