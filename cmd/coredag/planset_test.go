package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tune writes a set from predictions that loads, and select picks from it with the reason.
func TestTuneSelect(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	set := filepath.Join(dir, "allreduce.set")
	code, _, errOut := coredag(t, "", "tune", "--ranks", "4,8", "--sizes", "8B..4MiB", "-o", set,
		"plans/ring_allreduce.dag", "plans/recursive_doubling_allreduce.dag", "plans/rabenseifner_allreduce.dag")
	require.Equal(t, 0, code, errOut)
	b, err := os.ReadFile(set)
	require.NoError(t, err)
	text := string(b)
	assert.Contains(t, text, "collective allreduce\n")
	assert.Contains(t, text, "sizes 0..")
	assert.Regexp(t, `(?m)sizes \S+\.\. ranks 8$`, text)
	// with the guessed figures, recursive doubling serves the small sizes
	assert.Regexp(t, `(?m)^plan \S*recursive_doubling_allreduce.dag sizes 0\.\.`, text)
	code, out, errOut := coredag(t, "", "select", set, "--size", "8B", "-p", "ranks=8")
	require.Equal(t, 0, code, errOut)
	// n as the library's Set.Open sets it: one i64 element for 8 B
	assert.Contains(t, out, "recursive_doubling_allreduce.dag -p ranks=8 -p n=1\nwhy: ")
	assert.Contains(t, out, "size 8 is in 0..")
	code, out, errOut = coredag(t, "", "select", set, "--size", "12B", "-p", "ranks=8")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "recursive_doubling_allreduce.dag -p ranks=8\nwhy: ")
	assert.Contains(t, out, "note: n is not set: ")
	assert.Contains(t, out, "a message of 12 B is not a multiple of it; pad it to 16 B")
	code, _, errOut = coredag(t, "", "select", set, "--size", "8B", "-p", "ranks=64")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "serves ranks 4..8")
}

// TestSelectPinnedSize: a line that sets the size param itself runs the message that gives,
// and select says so rather than let --size seem obeyed.
func TestSelectPinnedSize(t *testing.T) {
	t.Parallel()
	plan, err := filepath.Abs("../../plans/ring_allreduce.dag")
	require.NoError(t, err)
	set := writeTemp(t, "n.set", "collective allreduce\nplan "+plan+" sizes 0.. ranks 1.. -p n=16\n")
	code, out, errOut := coredag(t, "", "select", set, "--size", "1MiB", "-p", "ranks=4")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "ring_allreduce.dag -p n=16 -p ranks=4\n")
	assert.Contains(t, out, "note: the line sets n=16: the plan's message is what that gives, not --size\n")
}

// TestTuneRefusesPath: a set names its plans without quotes, so tune refuses a plan whose path
// would not read back (a space, a #), rather than write a set that check rejects.
func TestTuneRefusesPath(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "my plans")
	require.NoError(t, os.Mkdir(dir, 0o755))
	src, err := os.ReadFile("../../plans/ring_allreduce.dag")
	require.NoError(t, err)
	plan := filepath.Join(dir, "ring #1.dag")
	require.NoError(t, os.WriteFile(plan, src, 0o644))
	code, out, errOut := coredag(t, "", "tune", plan, "plans/recursive_doubling_allreduce.dag")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "ring #1.dag: a plan set names its plans without quotes, so their paths may not hold spaces or #")
}

// A set with a gap, and one whose plan computes another collective, are refused at their lines.
func TestSetRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	plan := func(name string) string { return filepath.Join(root, "plans", name) }
	set := filepath.Join(dir, "gap.set")
	require.NoError(t, os.WriteFile(set, []byte("collective allreduce\n"+
		"plan "+plan("recursive_doubling_allreduce.dag")+" sizes 0..16KiB ranks 8\n"+
		"plan "+plan("ring_allreduce.dag")+" sizes 64KiB.. ranks 8\n"+
		"plan "+plan("ring_allgather.dag")+" sizes 0.. ranks 16\n"), 0o644))
	code, _, errOut := coredag(t, "", "select", set, "--size", "1KiB", "-p", "ranks=8")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, set+":3:")
	assert.Contains(t, errOut, "a gap: no plan serves sizes 16KiB..64KiB at ranks 8")
	assert.Contains(t, errOut, set+":4:1: ")
	assert.Contains(t, errOut, "computes allgather (its expect), not the set's collective allreduce")
	assert.Contains(t, errOut, "a gap: no plan serves ranks 9..15")
	// usage mistakes
	for _, args := range [][]string{{"--size", "x", "-p", "ranks=8"}, {"--size", "8B"}, {"--size", "8B", "-p", "ranks=8", "-p", "n=3"}} {
		code, _, errOut := coredag(t, "", append([]string{"select", set}, args...)...)
		assert.Equal(t, 2, code, "%v: %s", args, errOut)
	}
	// check reports the same, at the same positions, beside the plans it checks
	code, out, errOut := coredag(t, "", "check", set, "plans/ring_allreduce.dag", "examples/mpi/shm.set")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, set+":3:")
	assert.Contains(t, errOut, "a gap: no plan serves sizes 16KiB..64KiB at ranks 8")
	assert.Contains(t, out, "plans/ring_allreduce.dag: ok")
	assert.Contains(t, out, "examples/mpi/shm.set: ok (plan set for allreduce, 4 plans)")
	code, out, _ = coredag(t, "", "check", "--json", set)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, `"message": "a gap: no plan serves sizes 16KiB..64KiB at ranks 8"`)
	code, _, errOut = coredag(t, "", "check", "-p", "ranks=4", "examples/mpi/shm.set")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "a plan set's lines set their own")
	// the commands that take a plan say what to do with a set
	for _, cmd := range []string{"run", "compile", "dot", "fmt", "predict"} {
		code, _, errOut = coredag(t, "", cmd, "examples/mpi/shm.set")
		assert.Equal(t, 2, code, "%s: %s", cmd, errOut)
		assert.Contains(t, errOut, "examples/mpi/shm.set is a plan set, not a plan: `coredag select examples/mpi/shm.set --size SIZE -p ranks=R`", cmd)
	}
	// whatever their names: a set by its first statement, a plan by its `plan NAME`
	txt := filepath.Join(dir, "allreduce.txt")
	require.NoError(t, os.WriteFile(txt, []byte("# plans by size\ncollective allreduce\nplan "+plan("ring_allreduce.dag")+" sizes 0.. ranks 2..\n"), 0o644))
	code, out, errOut = coredag(t, "", "check", txt)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, txt+": ok (plan set for allreduce, 1 plan)")
	code, _, errOut = coredag(t, "", "run", txt)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, txt+" is a plan set, not a plan")
	b, err := os.ReadFile(txt)
	require.NoError(t, err)
	code, _, errOut = coredag(t, string(b), "compile", "-")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "<stdin> is a plan set, not a plan: save it to a file; `coredag select FILE --size SIZE")
	code, _, errOut = coredag(t, "", "select", plan("ring_allreduce.dag"), "--size", "1KiB", "-p", "ranks=4")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "ring_allreduce.dag:19:1: this is a plan (`plan ring_allreduce`), not a plan set")
	assert.Equal(t, 1, strings.Count(errOut, "not a plan set"), errOut)
	code, _, errOut = coredag(t, "", "tune", "plans/ring_allreduce.dag", "plans/ring_allgather.dag")
	assert.Equal(t, 2, code)
	assert.True(t, strings.Contains(errOut, "computes allgather"), errOut)
}

// TestSetPlanErrorsCapped: check reports the plans of a set that do not load (here 100
// missing, 100 that do not parse) for the first 50 of them, then one line that counts the rest,
// as it does the gaps and overlaps.
func TestSetPlanErrorsCapped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("collective allreduce\n")
	for i := range 200 {
		name := fmt.Sprintf("missing_%d.dag", i)
		if i%2 == 1 {
			name = fmt.Sprintf("broken_%d.dag", i)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("plan p\nop x = nothing\n"), 0o644))
		}
		fmt.Fprintf(&b, "plan %s sizes 0.. ranks %d\n", name, i+1)
	}
	set := filepath.Join(dir, "x.set")
	require.NoError(t, os.WriteFile(set, []byte(b.String()), 0o644))
	code, _, errOut := coredag(t, "", "check", set)
	assert.Equal(t, exitFail, code, errOut)
	shown := 0 // diagnostics: their related positions and quoted lines are indented
	for _, line := range strings.Split(errOut, "\n") {
		if strings.HasPrefix(line, set+":") {
			shown++
		}
	}
	assert.Equal(t, 51, shown, errOut)
	assert.Contains(t, errOut, set+":3:1: plan broken_1.dag at ranks=2: "+filepath.Join(dir, "broken_1.dag")+":2:8: expected an operation")
	assert.Contains(t, errOut, "\n"+set+":51:1: plan broken_49.dag at ranks=50: ")
	assert.Contains(t, errOut, "\n"+set+":52:1: and 150 more plans with errors, the first of them here: a set's check reports at most 50\n")
	assert.NotContains(t, errOut, "missing_50.dag at")
}
