package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/drawtest"
	"github.com/coredag/coredag/viz"
)

// TestDotStdoutDeterministic: DOT on stdout is the same bytes on every run, in both views.
func TestDotStdoutDeterministic(t *testing.T) {
	t.Parallel()
	for _, view := range []string{"graph", "plan"} {
		code1, out1, stderr := coredag(t, "", "dot", "--view", view, "-p", "ranks=4", "plans/ring_allreduce.dag")
		require.Equal(t, 0, code1, stderr)
		code2, out2, _ := coredag(t, "", "dot", "--view", view, "-p", "ranks=4", "plans/ring_allreduce.dag")
		require.Equal(t, 0, code2)
		assert.True(t, bytes.HasPrefix([]byte(out1), []byte("digraph ")), "%s view: %.40q", view, out1)
		assert.Equal(t, out1, out2, "%s view differs between two runs", view)
	}
}

// TestDotSVG: -o x.svg writes well-formed XML that names the plan's ops.
func TestDotSVG(t *testing.T) {
	t.Parallel()
	drawtest.NeedDot(t, viz.DotProgram)
	out := filepath.Join(t.TempDir(), "ring.svg")
	code, stdout, stderr := coredag(t, "", "dot", "-p", "ranks=2", "-o", out, "plans/ring_allreduce.dag")
	require.Equal(t, 0, code, stderr)
	assert.Empty(t, stdout)
	svg, err := os.ReadFile(out)
	require.NoError(t, err)
	requireWellFormedXML(t, svg)
	for _, op := range []string{"tx[0]", "rx[0]", "red[0]", "ag[0]", "got[0]"} {
		assert.Contains(t, string(svg), ">"+op+"<", "op %s", op)
	}
}

// TestDotPNG: -o x.png writes a PNG with filled, outlined shapes, in both views.
func TestDotPNG(t *testing.T) {
	t.Parallel()
	drawtest.NeedDot(t, viz.DotProgram)
	for _, view := range []string{"plan", "graph"} {
		out := filepath.Join(t.TempDir(), "ring.png")
		code, stdout, stderr := coredag(t, "", "dot", "--view", view, "-p", "ranks=2", "-o", out, "plans/ring_allreduce.dag")
		require.Equal(t, 0, code, stderr)
		assert.Empty(t, stdout)
		png, err := os.ReadFile(out)
		require.NoError(t, err)
		drawtest.CheckPNG(t, png, "#d6e6fa", "#d9f0d3") // sends and receives, writes
	}
}

// TestDotUsageErrors: an output format coredag cannot write, a rank the plan lacks and a
// non-positive limit are usage errors (exit 2) that write nothing.
func TestDotUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", filepath.Join(dir, "ring.jpg")}, `unknown drawing format ".jpg"`},
		{[]string{"--rank", "9"}, "--rank 9: plan ring_allreduce has ranks 0..3"},
		{[]string{"--limit", "0"}, "--limit 0"},
		{[]string{"--timeout", "0s"}, "--timeout 0s: want a positive duration"},
	} {
		args := append([]string{"dot", "-p", "ranks=4"}, tt.args...)
		code, stdout, stderr := coredag(t, "", append(args, "plans/ring_allreduce.dag")...)
		assert.Equal(t, 2, code, "%q: %s", tt.args, stderr)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, tt.want)
	}
	assert.NoFileExists(t, filepath.Join(dir, "ring.jpg"))
}

// TestDotPlanGeneric: the plan view compiles for the target asked for; the generic target has no
// WAIT or ENABLE entries.
func TestDotPlanGeneric(t *testing.T) {
	t.Parallel()
	code, generic, stderr := coredag(t, "", "dot", "--view", "plan", "--target", "generic", "-p", "ranks=2", "plans/ring_allreduce.dag")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, generic, "target generic")
	assert.Contains(t, generic, "SEND")
	assert.NotContains(t, generic, "CQE_WAIT")
	assert.NotContains(t, generic, "SEND_EN")
	code, connectx, stderr := coredag(t, "", "dot", "--view", "plan", "-p", "ranks=2", "plans/ring_allreduce.dag")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, connectx, "CQE_WAIT")
	code, _, stderr = coredag(t, "", "dot", "--view", "plan", "--target", "nosuch", "plans/ring_allreduce.dag")
	assert.Equal(t, 2, code, stderr)
}

// TestDotWithoutGraphviz: with no usable dot program, drawing SVG or PNG fails with exit 1 and a
// message saying what is missing, writes no file and does not panic; DOT output still works.
func TestDotWithoutGraphviz(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	noDot := "PATH=" + t.TempDir()
	for _, tt := range []struct {
		env  []string
		want string
	}{
		{[]string{"COREDAG_DOT=", noDot}, "coredag: rendering SVG needs Graphviz's dot program: not found in PATH (install Graphviz, e.g. apt-get install graphviz, set COREDAG_DOT, or write .dot)\n"},
		{[]string{"COREDAG_DOT=/nonexistent/dot"}, "coredag: rendering SVG needs Graphviz's dot program: COREDAG_DOT=/nonexistent/dot: no such file or directory (install Graphviz"},
		{[]string{"COREDAG_DOT=/nonexistent/dot", noDot}, "COREDAG_DOT=/nonexistent/dot: no such file or directory"},
		{[]string{"COREDAG_DOT=dot"}, `COREDAG_DOT="dot" is not an absolute path`},
	} {
		for _, ext := range []string{"svg", "png"} {
			out := filepath.Join(dir, "x."+ext)
			code, stdout, stderr := coredagEnv(t, tt.env, "", "dot", "-o", out, "plans/ring_allreduce.dag")
			assert.Equal(t, 1, code, "%q: %s", tt.env, stderr)
			assert.Empty(t, stdout)
			want := strings.ReplaceAll(tt.want, "SVG", strings.ToUpper(ext))
			assert.Contains(t, stderr, want, "%q", tt.env)
			assert.NotContains(t, stderr, "panic")
			assert.NotContains(t, stderr, "goroutine")
			assert.NoFileExists(t, out)
		}
	}
	code, stdout, stderr := coredagEnv(t, []string{"COREDAG_DOT=", noDot}, "", "dot", "-o", filepath.Join(dir, "x.dot"), "plans/ring_allreduce.dag")
	assert.Equal(t, 0, code, stderr)
	assert.Empty(t, stdout)
	assert.FileExists(t, filepath.Join(dir, "x.dot"))
}

// fakeDot writes a shell script to stand in for Graphviz's dot and returns its path.
func fakeDot(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-dot")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755))
	return path
}

// TestDotFailingGraphviz: a dot that fails has its messages shown, one that takes too long is
// stopped at --timeout with advice naming --limit; either way exit 1 and no file.
func TestDotFailingGraphviz(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "x.svg")
	failing := fakeDot(t, "cat >/dev/null; echo 'Error: out of cheese' >&2; exit 2\n")
	code, _, stderr := coredagEnv(t, []string{"COREDAG_DOT=" + failing}, "", "dot", "-o", out, "plans/ring_allreduce.dag")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, "coredag: rendering SVG: Graphviz's dot ("+failing+") failed: exit status 2:\n    Error: out of cheese\n")
	assert.NoFileExists(t, out)

	slow := fakeDot(t, "exec sleep 30\n")
	start := time.Now()
	code, _, stderr = coredagEnv(t, []string{"COREDAG_DOT=" + slow}, "", "dot", "--timeout", "300ms", "-o", out, "plans/ring_allreduce.dag")
	assert.Equal(t, 1, code, stderr)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Contains(t, stderr, "coredag: rendering SVG: Graphviz's dot did not finish in time and was stopped (--timeout 300ms)\n")
	assert.Contains(t, stderr, "--limit")
	assert.NotContains(t, stderr, "panic")
	assert.NoFileExists(t, out)
}

// TestDotRefusesLargeLayout: an SVG or PNG of more nodes than Graphviz lays out in about 10 s is
// refused before dot starts, naming the count, the bound and --limit; DOT output is not bounded.
func TestDotRefusesLargeLayout(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "dot-ran")
	spy := fakeDot(t, "touch "+marker+"; cat >/dev/null; exit 1\n")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--full"}, "coredag: the graph view of ring_allreduce has 20224 nodes; Graphviz lays out at most about 4000 of this view in 10 s: fold it without --full (--limit 4000 or less)"},
		{[]string{"--limit", "30000"}, "has 20224 nodes; Graphviz lays out at most about 4000 of this view in 10 s: fold it with --limit 4000 or less, draw fewer ranks with --rank, or write .dot"},
		{[]string{"--view", "plan", "--full"}, "coredag: the plan view of ring_allreduce has"},
	} {
		out := filepath.Join(dir, "x.svg")
		args := append([]string{"dot", "-p", "ranks=64", "-o", out}, tt.args...)
		code, stdout, stderr := coredagEnv(t, []string{"COREDAG_DOT=" + spy}, "", append(args, "plans/ring_allreduce.dag")...)
		assert.Equal(t, 1, code, stderr)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, tt.want, "%v", tt.args)
		assert.NoFileExists(t, out)
		assert.NoFileExists(t, marker, "dot must not start")
	}
	out := filepath.Join(dir, "x.dot")
	code, _, stderr := coredagEnv(t, []string{"COREDAG_DOT=" + spy}, "", "dot", "-p", "ranks=64", "--full", "-o", out, "plans/ring_allreduce.dag")
	assert.Equal(t, 0, code, stderr)
	assert.FileExists(t, out)
}

// TestDotRefusesManyEdges: a view of few nodes but many edges (141 ops, each after all earlier
// ones: 9,870 edges, which dot lays out for minutes) is refused before dot starts, naming both
// counts, the edge bound and --limit.
func TestDotRefusesManyEdges(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "dot-ran")
	spy := fakeDot(t, "touch "+marker+"; cat >/dev/null; exit 1\n")
	var plan strings.Builder
	plan.WriteString("plan dense\nparam ranks = 1\nbuffer b u8[8]\n")
	for i := range 141 {
		fmt.Fprintf(&plan, "op o%d = nop", i)
		for j := range i {
			sep := ", "
			if j == 0 {
				sep = " after "
			}
			fmt.Fprintf(&plan, "%so%d", sep, j)
		}
		plan.WriteString("\n")
	}
	src := filepath.Join(dir, "dense.dag")
	require.NoError(t, os.WriteFile(src, []byte(plan.String()), 0o644))
	out := filepath.Join(dir, "x.svg")
	code, stdout, stderr := coredagEnv(t, []string{"COREDAG_DOT=" + spy}, "", "dot", "-o", out, src)
	assert.Equal(t, 1, code, stderr)
	assert.Empty(t, stdout)
	assert.Equal(t, "coredag: the graph view of dense has 141 nodes and 9870 edges; Graphviz lays out at most about 8000 edges of this view in 10 s: fold it with --limit 114 or less, draw fewer ranks with --rank, or write .dot and lay it out yourself\n", stderr)
	assert.NoFileExists(t, out)
	assert.NoFileExists(t, marker, "dot must not start")
}

// TestDotFullBudget: dot --full draws every op, about 4 KiB of memory each, and is refused up
// front past the memory budget (it took 1.3 GB under --mem 1GiB for a 256-rank ring); the ranks
// it draws are what count.
func TestDotFullBudget(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := coredag(t, "", "dot", "--full", "--mem", "64MiB", "-p", "ranks=64", "-p", "n=1", "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code, stderr)
	assert.Empty(t, stdout)
	assert.Equal(t, "coredag: plans/ring_allreduce.dag: --full draws 20160 ops, about 78.8 MiB of memory (4 KiB each); "+
		"the memory budget is 64 MiB (set with --mem): fold the view without --full, or draw fewer ranks with --rank\n", stderr)
	code, stdout, stderr = coredag(t, "", "dot", "--full", "--mem", "64MiB", "--rank", "0", "-p", "ranks=64", "-p", "n=1", "plans/ring_allreduce.dag")
	assert.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "digraph")
}
