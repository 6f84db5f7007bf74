package planner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/chunktest"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/verify"
)

// fixCase is one racy plan of the corpus of suggested fixes.
type fixCase struct {
	name   string
	src    []byte
	params map[string]int64
	target string // the --target it is checked with, "" for none
}

// fixCorpus is every racy plan the fixes are tested on: the examples of testdata/fixes (the
// plans of issue 30, at several sizes), the race examples of the language reference and the
// chunks of testdata/errors/races.dag.
func fixCorpus(t *testing.T) []fixCase {
	t.Helper()
	var out []fixCase
	sizes := map[string][]map[string]int64{
		"seg_ring_credits.dag":    {nil, {"ranks": 3}, {"ranks": 6}, {"ranks": 7, "slots": 3}},
		"two_level_allreduce.dag": {nil, {"ranks": 12, "per": 3}, {"ranks": 16, "per": 4}, {"ranks": 6, "per": 2}},
		"gather_children.dag":     {nil, {"ranks": 16}, {"ranks": 9, "per": 3}},
		"token_unordered.dag":     {nil, {"ranks": 3}, {"ranks": 5}},
	}
	files, err := filepath.Glob(filepath.Join("..", "testdata", "fixes", "*.dag"))
	require.NoError(t, err)
	require.Len(t, files, len(sizes), "every plan of testdata/fixes has its sizes here")
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, p := range sizes[filepath.Base(f)] {
			out = append(out, fixCase{name: f, src: src, params: p})
		}
	}
	docs, err := filepath.Glob(filepath.Join("..", "docs", "examples", "errors", "race_*.dag"))
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	for _, f := range docs {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		c := fixCase{name: f, src: src, target: "connectx"} // check's default
		if m := regexp.MustCompile(`(?m)^# args: .*--target (\S+)`).FindSubmatch(src); m != nil {
			c.target = string(m[1])
		}
		out = append(out, c)
	}
	path := filepath.Join("..", "testdata", "errors", "races.dag")
	chunks, err := chunktest.Read(path)
	require.NoError(t, err)
	for _, c := range chunks {
		out = append(out, fixCase{name: path, src: c.Src})
	}
	return out
}

// hintGroup matches the edges of a race's hint that go on the same ranks: "`crd_tx[0] after
// red[0]` and `crd_tx[1] after red[1]` on every rank"; hintEdge, one of them.
var (
	hintGroup = regexp.MustCompile("((?:`[^`]+ after [^`]+`(?:, | and )?)+) on (every rank|rank \\d+|ranks \\d+(?:-\\d+)?(?:, \\d+(?:-\\d+)?)*)")
	hintEdge  = regexp.MustCompile("`([^`]+) after ([^`]+)`")
)

// parseRanks reads the ranks of a hint ("every rank", "rank 3", "ranks 0, 2-4") for a plan of n
// ranks.
func parseRanks(t *testing.T, s string, n int) []int {
	t.Helper()
	if s == "every rank" {
		s = fmt.Sprintf("ranks 0-%d", n-1)
	}
	s = strings.TrimPrefix(strings.TrimPrefix(s, "ranks "), "rank ")
	var out []int
	for _, part := range strings.Split(s, ", ") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		require.NoError(t, err, s)
		b := a
		if isRange {
			b, err = strconv.Atoi(hi)
			require.NoError(t, err, s)
		}
		for r := a; r <= b; r++ {
			out = append(out, r)
		}
	}
	return out
}

// dependency writes `op after after` on ranks as the statement a user would add to the plan.
func dependency(op, after string, ranks []int, n int) string {
	stmt := op + " after " + after
	if len(ranks) == n {
		return stmt + "\n"
	}
	var conds []string
	for _, r := range ranks {
		conds = append(conds, fmt.Sprintf("rank == %d", r))
	}
	return fmt.Sprintf("if %s { %s }\n", strings.Join(conds, " || "), stmt)
}

// load checks a plan of the corpus as check does, with the target's ordering.
func (c fixCase) load(t *testing.T, src []byte) (*ir.Graph, diag.List) {
	t.Helper()
	opt := Options{}
	if c.target != "" {
		tg, err := ir.LookupTarget(c.target)
		require.NoError(t, err)
		opt.Verify.Order, opt.Verify.Target = tg.Order, tg.Name
	}
	g, err := Load(t.Context(), c.name, src, c.params, opt)
	var list diag.List
	if err != nil {
		require.True(t, errors.As(err, &list), "%v", err)
	}
	return g, list
}

// samePlace reports whether two diagnostics are about the same places.
func samePlace(a, b *diag.Diagnostic) bool {
	if a.Code != b.Code || a.Pos != b.Pos || len(a.Related) != len(b.Related) {
		return false
	}
	for i := range a.Related {
		if a.Related[i].Pos != b.Related[i].Pos {
			return false
		}
	}
	return true
}

// afterFix checks a plan with fixes applied: no deadlock or cycle, nor any error but races and
// postconditions (a race can hide a postcondition's failure, and fixing it shows it).
func afterFix(t *testing.T, fixed diag.List, what string) {
	t.Helper()
	for _, d := range fixed {
		assert.Contains(t, []diag.Code{diag.Race, diag.Expect}, d.Code, "%s gives %s", what, d)
	}
}

// TestSuggestedFixesHold applies, as statements appended to the plan's text, every fix that
// check suggests for the races of the corpus, in their diagnostics and in --explain-races's
// list, and checks the plan again: the races each fix claims to fix are gone, and no deadlock
// or cycle appears.
func TestSuggestedFixesHold(t *testing.T) {
	t.Parallel()
	races, fixes := 0, 0
	for _, c := range fixCorpus(t) {
		g, list := c.load(t, c.src)
		for _, d := range list {
			if d.Code != diag.Race {
				continue
			}
			races++
			if d.Fix == nil {
				assert.Regexp(t, "no single `after` edge fixes this race|no `after` suggested", d.Msg)
				continue
			}
			groups := hintGroup.FindAllStringSubmatch(d.Fix.Msg, -1)
			require.NotEmpty(t, groups, d.Fix.Msg)
			require.NotContains(t, d.Fix.Msg, "more such edges", "the corpus's hints list all their edges")
			patch := "\n"
			for _, gr := range groups {
				for _, e := range hintEdge.FindAllStringSubmatch(gr[1], -1) {
					patch += dependency(e[1], e[2], parseRanks(t, gr[2], g.Ranks), g.Ranks)
				}
			}
			what := fmt.Sprintf("%s %v: %q for %s", c.name, c.params, patch, d)
			_, fixed := c.load(t, append([]byte(string(c.src)), patch...))
			afterFix(t, fixed, what)
			for _, f := range fixed {
				assert.False(t, samePlace(d, f), "%s leaves the race: %s", what, f)
			}
			fixes++
		}

		// The plan-wide list.
		if g == nil || len(list) == 0 || list[0].Code != diag.Race {
			continue
		}
		opt := Options{}
		if c.target != "" {
			tg, _ := ir.LookupTarget(c.target)
			opt.Verify.Order, opt.Verify.Target = tg.Order, tg.Name
		}
		plan := opt.Verify.SuggestFixes(t.Context(), g)
		assert.Equal(t, plan.Complete, len(plan.Unfixed) == 0, "%s: %+v", c.name, plan)
		if len(plan.Edges) == 0 {
			assert.NotEmpty(t, plan.Unfixed, "%s: no fix, and no race said to have none", c.name)
			continue
		}
		patch := "\n"
		for _, e := range plan.Edges {
			patch += dependency(e.Op, e.After, e.Ranks, g.Ranks)
		}
		what := fmt.Sprintf("%s %v: %q", c.name, c.params, patch)
		_, fixed := c.load(t, append([]byte(string(c.src)), patch...))
		afterFix(t, fixed, what)
		left := 0
		for _, f := range fixed {
			if f.Code == diag.Race {
				left++
			}
		}
		if plan.Complete {
			assert.Zero(t, left, "%s leaves races:\n%s", what, fixed)
		} else {
			assert.LessOrEqual(t, left, len(plan.Unfixed), "%s leaves races it does not list:\n%s", what, fixed)
		}
	}
	assert.Greater(t, races, 25, "the corpus has races")
	assert.Greater(t, fixes, 20, "and fixes for most")
}

// TestFixesOfTheIssue checks the fixes suggested for the two plans of issue 30 where check used
// to suggest a deadlock: the credit waits for the read of its slot, and the leader's first ring
// send for the last of its children's reductions, on every rank where those ops are; and for a
// leader whose children's copies are unordered, where one edge per child is needed.
func TestFixesOfTheIssue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file   string
		params map[string]int64
		hints  []string // the fix of each race diagnostic, in order
		plan   string   // the plan-wide list
	}{
		{"seg_ring_credits.dag", nil, []string{"add `crd_tx[0] after red[0]` on every rank"}, "  crd_tx[0] after red[0]   # on ranks 0-3\n"},
		{"seg_ring_credits.dag", map[string]int64{"ranks": 7, "slots": 3}, []string{"add `crd_tx[0] after red[0]`, `crd_tx[1] after red[1]` and `crd_tx[2] after red[2]` on every rank"}, ""},
		{"two_level_allreduce.dag", nil, []string{"add `tx[0] after cred[3]` on ranks 0, 4", "add `tx[0] after cred[3]` on ranks 0, 4"}, "  tx[0] after cred[3]   # on ranks 0, 4\n"},
		{"gather_children.dag", nil, []string{"add `fwd after cp[1]`, `fwd after cp[2]` and `fwd after cp[3]` on rank 4"}, "  fwd after cp[1]   # on rank 4\n  fwd after cp[2]   # on rank 4\n  fwd after cp[3]   # on rank 4\n"},
		{"gather_children.dag", map[string]int64{"ranks": 16}, []string{"add `fwd after cp[1]`, `fwd after cp[2]` and `fwd after cp[3]` on ranks 4, 8, 12"}, ""},
		{"two_level_allreduce.dag", map[string]int64{"ranks": 12, "per": 3}, []string{"add `tx[0] after cred[2]` on ranks 0, 3, 6, 9", "add `tx[0] after cred[2]` on ranks 0, 3, 6, 9"}, "  tx[0] after cred[2]   # on ranks 0, 3, 6, 9\n"},
		{"token_unordered.dag", nil, []string{"add `tok after w` and `use after got` on every rank"}, "  tok after w   # on ranks 0, 1\n  use after got   # on ranks 0, 1\n"},
	}
	for _, tt := range tests {
		path := filepath.Join("..", "testdata", "fixes", tt.file)
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		c := fixCase{name: path, src: src, params: tt.params, target: "connectx"}
		g, list := c.load(t, src)
		var hints []string
		for _, d := range list {
			require.Equal(t, diag.Race, d.Code, "%s", d)
			require.NotNil(t, d.Fix, "%s", d)
			hints = append(hints, d.Fix.Msg)
		}
		assert.Equal(t, tt.hints, hints, "%s %v", tt.file, tt.params)
		if tt.plan != "" {
			tg, _ := ir.LookupTarget(c.target)
			plan := verify.Options{Order: tg.Order, Target: tg.Name}.SuggestFixes(t.Context(), g)
			assert.True(t, plan.Complete)
			assert.Equal(t, tt.plan, plan.String(), "%s %v", tt.file, tt.params)
		}
	}
}

// TestTwoEdgeFix: a race that no single `after` fixes gets a pair of edges, and each of the two
// is needed: the plan with either one alone still races, with both it is clean.
func TestTwoEdgeFix(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "testdata", "fixes", "token_unordered.dag")
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, ranks := range []int64{2, 3, 5} {
		c := fixCase{name: path, src: src, params: map[string]int64{"ranks": ranks}}
		_, list := c.load(t, src)
		require.Len(t, list, 1)
		require.NotNil(t, list[0].Fix, "%s", list[0])
		require.Equal(t, "add `tok after w` and `use after got` on every rank", list[0].Fix.Msg)
		for _, patch := range []string{"\ntok after w\n", "\nuse after got\n"} {
			_, one := c.load(t, append(slices.Clone(src), patch...))
			require.Len(t, one, 1, "ranks=%d with%q", ranks, patch)
			require.Equal(t, diag.Race, one[0].Code, "%s", one[0])
		}
		_, both := c.load(t, append(slices.Clone(src), "\ntok after w\nuse after got\n"...))
		require.Empty(t, both, "ranks=%d", ranks)
	}
}
