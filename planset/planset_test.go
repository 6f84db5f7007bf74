package planset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
)

// fake answers every plan with the collective its file name starts with ("allreduce_x.dag"),
// none for "none_", and an error for "bad_".
func fake(_ context.Context, path string, ranks int64, params []string) ([]ir.Expect, error) {
	base := path[strings.LastIndexByte(path, '/')+1:]
	name, _, _ := strings.Cut(base, "_")
	switch name {
	case "none":
		return nil, nil
	case "bad":
		return nil, errors.New("bad.dag:3:1: an assert failed")
	}
	k, ok := ir.ParseExpectKind(name)
	if !ok {
		return nil, errors.New("unknown " + name)
	}
	return []ir.Expect{{Kind: k}}, nil
}

func load(t *testing.T, text string) (*Set, error) {
	t.Helper()
	s, err := Parse("dir/x.set", []byte(text))
	if err != nil {
		return nil, err
	}
	return s, s.Check(context.Background(), fake)
}

func messages(err error) []string {
	var l diag.List
	if !errors.As(err, &l) {
		return []string{err.Error()}
	}
	var out []string
	for _, d := range l {
		out = append(out, d.Pos.String()+": "+d.Msg)
	}
	return out
}

const good = `# allreduce up to 64 ranks
collective allreduce
plan allreduce_rd.dag   sizes 0..16KiB  ranks 2..64
plan allreduce_ring.dag sizes 16KiB..   ranks 2..32 -p n=4
plan allreduce_rab.dag  sizes 16KiB..   ranks 33..64
`

func TestGoodSet(t *testing.T) {
	s, err := load(t, good)
	require.NoError(t, err)
	require.Len(t, s.Entries, 3)
	assert.Equal(t, "dir/allreduce_ring.dag", s.Entries[1].File)
	assert.Equal(t, []string{"n=4"}, s.Entries[1].Params)
	for _, c := range []struct {
		size, ranks int64
		want        string
	}{{8, 2, "allreduce_rd.dag"}, {16<<10 - 1, 64, "allreduce_rd.dag"}, {16 << 10, 32, "allreduce_ring.dag"}, {1 << 30, 33, "allreduce_rab.dag"}} {
		ch, err := s.Select(c.size, c.ranks)
		require.NoError(t, err)
		assert.Equal(t, c.want, ch.Entry.Path, "%d %d", c.size, c.ranks)
		assert.Contains(t, ch.Why, "dir/x.set:")
	}
	_, err = s.Select(8, 65)
	assert.ErrorContains(t, err, "no plan of dir/x.set serves ranks 65: the set serves ranks 2..64")
	assert.Equal(t, "n", s.SizeParam)
	s, err = load(t, "collective allreduce\nsize-param count_2\nplan allreduce_a.dag sizes 0.. ranks 2\n")
	require.NoError(t, err)
	assert.Equal(t, "count_2", s.SizeParam)
	s, err = load(t, "collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 2 -p n=1KiB -p k=-4 -p m=0x10\n")
	require.NoError(t, err)
	assert.Equal(t, []string{"n=1KiB", "k=-4", "m=0x10"}, s.Entries[0].Params)
	_, err = load(t, "collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 2 -p k=-9223372036854775808\n")
	require.NoError(t, err, "the least int64 is a value")
}

func TestIsSet(t *testing.T) {
	for text, want := range map[string]bool{
		"# a set\ncollective allreduce\nplan a.dag sizes 0.. ranks 2..\n": true,
		"size-param m\ncollective allreduce\n":                            true,
		"\n  plan a.dag sizes 0.. ranks 2.. # first\n":                    true,
		"plan ring\nparam ranks = 4\n":                                    false,
		"plan a.dag\n":                                                    false,
		"<algo/>":                                                         false,
		"# only a comment\n\n":                                            false,
		"":                                                                false,
	} {
		assert.Equal(t, want, IsSet("x.txt", []byte(text)), "%q", text)
	}
	assert.True(t, IsSet("x.set", nil), "a .set name, whatever the text")
}

func TestSetErrors(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"collective allreduce\nplan allreduce_a.dag sizes 0..1KiB ranks 2..8\nplan allreduce_b.dag sizes 2KiB.. ranks 2..8\n",
			[]string{"dir/x.set:3:28: a gap: no plan serves sizes 1KiB..2KiB at ranks 2..8"}},
		{"collective allreduce\nplan allreduce_a.dag sizes 0..4KiB ranks 2..8\nplan allreduce_b.dag sizes 1KiB.. ranks 2..8\n",
			[]string{"dir/x.set:3:28: an overlap: sizes 1KiB..4KiB at ranks 2..8 are served by two plans"}},
		{"collective allreduce\nplan allreduce_a.dag sizes 0..4KiB ranks 2..8\n",
			[]string{"dir/x.set:2:28: a gap: no plan serves sizes from 4KiB on at ranks 2..8 (end the last range with `..`)"}},
		{"collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 2..4\nplan allreduce_b.dag sizes 0.. ranks 8..16\n",
			[]string{"dir/x.set:3:38: a gap: no plan serves ranks 5..7 (at any size)"}},
		{"collective allreduce\nplan allgather_a.dag sizes 0.. ranks 2..8\n",
			[]string{"dir/x.set:2:1: plan allgather_a.dag computes allgather (its expect), not the set's collective allreduce"}},
		{"collective allreduce\nplan none_a.dag sizes 0.. ranks 2..8\n",
			[]string{"dir/x.set:2:1: plan none_a.dag has no `expect`"}},
		{"collective allreduce\nplan bad_a.dag sizes 0.. ranks 2..8\n",
			[]string{"dir/x.set:2:1: plan bad_a.dag at ranks=2: bad.dag:3:1: an assert failed"}},
		{"collective allreduce\nplan allreduce_a.dag sizes 4KiB..1KiB ranks 2\n",
			[]string{`dir/x.set:2:28: sizes "4KiB..1KiB": the range is empty`}},
		{"collective allreduce\nplan allreduce_a.dag sizes 1KiB ranks 2\n",
			[]string{`dir/x.set:2:28: sizes "1KiB": write a range`}},
		{"collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 0..2\n",
			[]string{`dir/x.set:2:38: ranks "0..2": a world size is at least 1`}},
		{"collective allreduce\nplan allreduce_a.dag sizes 0.. ranks x\n",
			[]string{`dir/x.set:2:38: ranks "x": not a world size (write a number of ranks, such as 4)`}},
		{"collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 2..4KiB\n",
			[]string{`dir/x.set:2:38: ranks "2..4KiB": not a world size`}},
		{"collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 2.. -p ranks=2\n",
			[]string{"dir/x.set:2:45: -p \"ranks=2\": the line's `ranks` gives the world size"}},
		// a -p value the checker would refuse is refused at the value, not at the line's `plan`
		{"collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 2.. -p n=abc\n",
			[]string{`dir/x.set:2:47: -p "n=abc": invalid integer literal "abc": unexpected 'a'`}},
		{"collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 2.. -p n=9223372036854775808\n",
			[]string{`dir/x.set:2:47: -p "n=9223372036854775808": integer literal 9223372036854775808 overflows`}},
		{"collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 2.. -p n=4 -p n=8\n",
			[]string{`dir/x.set:2:52: -p "n=8": n is given twice on the line (n=4 before)`}},
		{"collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 2.. -p n= -p =4\n",
			[]string{`dir/x.set:2:45: -p "n=": write -p NAME=VALUE`}},
		{"collective allreduce\nplan inner.set sizes 0.. ranks 2\n",
			[]string{"dir/x.set:2:6: inner.set is a plan set, not a plan: a set's lines name plan files, and sets do not nest"}},
		{"collective allreduce\nplan allreduce_a.dag sizes 0..\n",
			[]string{"dir/x.set:2:1: the plan line has no `ranks R..S`"}},
		{"collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 2 root 3\n",
			[]string{`dir/x.set:2:40: unknown word "root"`}},
		{"collective allreduce\ncollective allgather\nplan allreduce_a.dag sizes 0.. ranks 2\n",
			[]string{"dir/x.set:2:1: a second `collective` line"}},
		{"collective everything\n", []string{`dir/x.set:1:12: unknown collective "everything"`}},
		{"plan allreduce_a.dag sizes 0.. ranks 2\n", []string{"dir/x.set:1:1: the set has no `collective NAME` line"}},
		{"collective allreduce\n", []string{"dir/x.set:1:1: the set lists no plan"}},
		{"collective allreduce\nsize-param n\nsize-param m\nplan allreduce_a.dag sizes 0.. ranks 2\n",
			[]string{"dir/x.set:3:1: a second `size-param` line"}},
		{"collective allreduce\nsize-param 2n\nplan allreduce_a.dag sizes 0.. ranks 2\n",
			[]string{"dir/x.set:2:1: write `size-param NAME`"}},
		{"collective allreduce\nsize-param\nplan allreduce_a.dag sizes 0.. ranks 2\n",
			[]string{"dir/x.set:2:1: write `size-param NAME`"}},
		{"collective allreduce\nsize-param ranks\nplan allreduce_a.dag sizes 0.. ranks 2\n",
			[]string{"dir/x.set:2:12: ranks is the world size"}},
		{"collective allreduce\nuse x.dag\n", []string{`dir/x.set:2:1: unknown statement "use"`, "dir/x.set:1:1: the set lists no plan"}},
		// a plan or an MSCCL algorithm given as a set: one error, not one per line
		{"# a plan\n\n  plan ring # the ring\nparam ranks = 4\nbuffer data f32[ranks]\n",
			[]string{"dir/x.set:3:3: this is a plan (`plan ring`), not a plan set: a set begins with `collective NAME`"}},
		{"<?xml version=\"1.0\"?>\n<algo name=\"ring\">\n", []string{"dir/x.set:1:1: this is an MSCCL algorithm (XML), not a plan set"}},
		// a set's plan line without its sizes is no plan
		{"plan ring.dag\ncollective allreduce\n", []string{"dir/x.set:1:1: the plan line has no `sizes A..B`"}},
	} {
		_, err := load(t, c.text)
		require.Error(t, err, c.text)
		got := messages(err)
		require.Len(t, got, len(c.want), "%q: %q", c.text, got)
		for i := range got {
			assert.True(t, strings.HasPrefix(got[i], c.want[i]), "%q\ngot  %s\nwant %s", c.text, got[i], c.want[i])
		}
	}
}

// A set file past MaxSize is refused before it is parsed (a device such as /dev/zero never ends).
func TestLoadTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.set")
	require.NoError(t, os.WriteFile(path, []byte("collective allreduce\n"+strings.Repeat("#", MaxSize)), 0o644))
	_, _, err := Load(context.Background(), path, fake)
	assert.ErrorContains(t, err, "big.set: larger than 1 MiB: a plan set may be at most 1 MiB")
}

// TestCheckStops: Check stops once its context is cancelled, between two plans (here by the
// first plan's check, as a signal stops a plan being loaded) or in the sweep of the coverage,
// and returns the context's cause rather than what it found: the plans left unchecked, the gap
// the coverage would report.
func TestCheckStops(t *testing.T) {
	t.Parallel()
	s, err := Parse("dir/x.set", []byte("collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 2..4\nplan allreduce_b.dag sizes 0.. ranks 6..\nplan bad_c.dag sizes 0.. ranks 5\n"))
	require.NoError(t, err)
	require.Len(t, messages(s.Check(context.Background(), fake)), 1, "plan bad_c.dag fails")

	cause := errors.New("interrupted")
	ctx, cancel := context.WithCancelCause(context.Background())
	var checked []string
	stopping := func(ctx context.Context, path string, ranks int64, params []string) ([]ir.Expect, error) {
		checked = append(checked, path)
		cancel(cause)                  // as a signal would while the plan loads
		return nil, context.Cause(ctx) // the plan is stopped by Check's context
	}
	assert.Same(t, cause, s.Check(ctx, stopping))
	assert.Equal(t, []string{"dir/allreduce_a.dag"}, checked, "the plans after the stopped one are not checked")

	gap, err := Parse("dir/y.set", []byte("collective allreduce\nplan allreduce_a.dag sizes 0.. ranks 2\nplan allreduce_b.dag sizes 0.. ranks 4\n"))
	require.NoError(t, err)
	require.NotEmpty(t, messages(gap.Check(context.Background(), nil)), "ranks 3 has no plan")
	assert.Same(t, cause, gap.Check(ctx, nil))
}

// TestCoverageOnce: a gap or an overlap is reported once for the world sizes in a row where it
// holds, not once for each range of world sizes the other lines cut, and at most maxCoverage
// of them, then how many more. A set whose lines each start one world size after the last
// used to get a gap per line per world size: 500 lines, 125,750 of them.
func TestCoverageOnce(t *testing.T) {
	t.Parallel()
	// the gap between a and b holds at ranks 2..4 (c serves the rest) and 5..8 (d does)
	_, err := load(t, "collective allreduce\nplan allreduce_a.dag sizes 0..1KiB ranks 2..8\nplan allreduce_b.dag sizes 2KiB..4KiB ranks 2..8\n"+
		"plan allreduce_c.dag sizes 4KiB.. ranks 2..4\nplan allreduce_d.dag sizes 4KiB.. ranks 5..8\n")
	assert.Equal(t, []string{"dir/x.set:3:28: a gap: no plan serves sizes 1KiB..2KiB at ranks 2..8"}, messages(err))
	_, err = load(t, "collective allreduce\nplan allreduce_a.dag sizes 0..4KiB ranks 2..8\nplan allreduce_b.dag sizes 1KiB.. ranks 2..8\n"+
		"plan allreduce_c.dag sizes 0.. ranks 9..16\nplan allreduce_d.dag sizes 0.. ranks 9..16\n")
	assert.Equal(t, []string{
		"dir/x.set:3:28: an overlap: sizes 1KiB..4KiB at ranks 2..8 are served by two plans",
		"dir/x.set:5:28: an overlap: sizes 0.. at ranks 9..16 are served by two plans",
	}, messages(err))

	const lines = 500
	var b strings.Builder
	b.WriteString("collective allreduce\n")
	for i := range lines {
		fmt.Fprintf(&b, "plan allreduce_a.dag sizes %d..%d ranks %d..%d\n", 2*i+1, 2*i+2, i+1, lines)
	}
	_, err = load(t, b.String())
	var l diag.List
	require.ErrorAs(t, err, &l)
	require.Len(t, l, maxCoverage+1)
	// each line's gap below it, at every world size from the line's on; the gap above the last
	// line at each world size
	assert.Equal(t, "dir/x.set:2:28: a gap: no plan serves sizes 0..1 at ranks 1..500", l[0].Error())
	assert.Equal(t, "dir/x.set:2:28: a gap: no plan serves sizes from 2 on at ranks 1 (end the last range with `..`)", l[1].Error())
	assert.Equal(t, "dir/x.set:3:28: a gap: no plan serves sizes 2..3 at ranks 2..500", l[2].Error())
	assert.Equal(t, "dir/x.set:27:28: and 950 more gaps and overlaps, the first of them here: a set's check reports at most 50", l[maxCoverage].Error())
	assert.Equal(t, diag.Limit, l[maxCoverage].Code)
}

// TestPlanErrorsCapped: the plans that do not load (missing, broken) are reported at most
// diag.MaxErrors of them (maxPlans), then how many more, as the gaps and overlaps are; each is
// still checked, to count them. A set copied without its 200 plans used to get 200 errors.
func TestPlanErrorsCapped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const lines = 200
	var b strings.Builder
	b.WriteString("collective allreduce\n")
	for i := range lines {
		name := fmt.Sprintf("missing_%d.dag", i)
		if i%2 == 1 {
			name = fmt.Sprintf("broken_%d.dag", i)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("plan p\nop x = nothing\n"), 0o644))
		}
		fmt.Fprintf(&b, "plan %s sizes 0.. ranks %d\n", name, i+1) // one plan per world size: no gap, no overlap
	}
	set := filepath.Join(dir, "x.set")
	require.NoError(t, os.WriteFile(set, []byte(b.String()), 0o644))
	checked := 0
	check := func(_ context.Context, path string, ranks int64, params []string) ([]ir.Expect, error) {
		checked++
		if _, err := os.ReadFile(path); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s:2:8: unknown op kind nothing", filepath.Base(path))
	}
	_, _, err := Load(context.Background(), set, check)
	var l diag.List
	require.ErrorAs(t, err, &l)
	assert.Equal(t, lines, checked)
	require.Len(t, l, diag.MaxErrors+1)
	assert.Equal(t, set+":2:1: plan missing_0.dag at ranks=1: open "+filepath.Join(dir, "missing_0.dag")+": no such file or directory", l[0].Error())
	assert.Equal(t, set+":3:1: plan broken_1.dag at ranks=2: broken_1.dag:2:8: unknown op kind nothing", l[1].Error())
	assert.Equal(t, set+":52:1: and 150 more plans with errors, the first of them here: a set's check reports at most 50", l[diag.MaxErrors].Error())
	assert.Equal(t, diag.Limit, l[diag.MaxErrors].Code)
}
