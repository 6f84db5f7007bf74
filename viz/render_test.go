package viz

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coredag/coredag/internal/drawtest"
	"github.com/coredag/coredag/planner"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// needDot skips a test that renders with Graphviz when its dot program is not available (fails
// it when CI is set).
func needDot(t testing.TB) {
	t.Helper()
	drawtest.NeedDot(t, DotProgram)
}

// fakeDot writes a shell script for a test to run as the dot program (RenderOptions.Dot) and
// returns its path.
func fakeDot(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-dot")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755))
	return path
}

// renderWith renders with opts and no deadline of its own.
func renderWith(opts RenderOptions, dotText string, format Format, w *bytes.Buffer) error {
	return RenderContext(context.Background(), []byte(dotText), format, w, opts)
}

// TestPlanSVGNodes: the SVG of a plan view has one node per chain entry (the example's check).
func TestPlanSVGNodes(t *testing.T) {
	t.Parallel()
	needDot(t)
	src, err := os.ReadFile("../plans/dissemination_barrier.dag")
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), "dissemination_barrier.dag", src, map[string]int64{"ranks": 2}, planner.Options{})
	require.NoError(t, err)
	p := compile(t, g)
	var svg bytes.Buffer
	require.NoError(t, Write(Plan(p, Options{}), SVG, &svg))
	assert.Equal(t, planEntries(p), strings.Count(svg.String(), `class="node"`))
	assert.Equal(t, 12, planEntries(p))
}

func TestDotProgram(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "dot")
	require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755))
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, nil, 0o644))

	t.Setenv(DotEnv, prog)
	p, err := DotProgram()
	require.NoError(t, err)
	assert.Equal(t, prog, p)

	for env, want := range map[string]string{
		"dot":                           `COREDAG_DOT="dot" is not an absolute path`,
		"bin/dot":                       `COREDAG_DOT="bin/dot" is not an absolute path`,
		filepath.Join(dir, "none"):      "none: no such file or directory",
		dir:                             "is a directory",
		plain:                           "plain is not executable",
		filepath.Join(plain, "sub/dot"): "not a directory",
	} {
		t.Setenv(DotEnv, env)
		_, err := DotProgram()
		require.ErrorIs(t, err, ErrNoDot, env)
		assert.Contains(t, err.Error(), want)
	}

	// Unset, dot comes from PATH; a PATH entry relative to the current directory is not used.
	t.Setenv(DotEnv, "")
	t.Setenv("PATH", dir)
	p, err = DotProgram()
	require.NoError(t, err)
	assert.Equal(t, prog, p)
	t.Chdir(dir)
	t.Setenv("PATH", ".")
	_, err = DotProgram()
	require.ErrorIs(t, err, ErrNoDot)
	assert.Contains(t, err.Error(), "only relative to the current directory")
	t.Setenv("PATH", t.TempDir())
	_, err = DotProgram()
	require.ErrorIs(t, err, ErrNoDot)
	assert.Contains(t, err.Error(), "not found in PATH")
}

// TestRenderNoDot: without a dot program, rendering says what is missing and how to get it, and
// writes nothing; DOT output does not need Graphviz. RenderOptions.Dot, else COREDAG_DOT, names
// the program to run.
func TestRenderNoDot(t *testing.T) {
	t.Setenv(DotEnv, "")
	t.Setenv("PATH", t.TempDir())
	var buf bytes.Buffer
	err := Render([]byte("digraph { a }"), SVG, &buf)
	require.ErrorIs(t, err, ErrNoDot)
	assert.Equal(t, "rendering SVG needs Graphviz's dot program: not found in PATH (install Graphviz, e.g. apt-get install graphviz, set COREDAG_DOT, or write .dot)", err.Error())
	assert.Zero(t, buf.Len())
	require.NoError(t, Render([]byte("digraph { a }"), DOT, &buf))
	assert.Equal(t, "digraph { a }", buf.String())

	buf.Reset()
	require.NoError(t, renderWith(RenderOptions{Dot: fakeDot(t, `cat >/dev/null; echo option`)}, "digraph { a }", SVG, &buf))
	assert.Equal(t, "option\n", buf.String())
	t.Setenv(DotEnv, fakeDot(t, `cat >/dev/null; echo env`))
	buf.Reset()
	require.NoError(t, Render([]byte("digraph { a }"), SVG, &buf))
	assert.Equal(t, "env\n", buf.String())
	buf.Reset()
	require.NoError(t, renderWith(RenderOptions{Dot: fakeDot(t, `cat >/dev/null; echo option`)}, "digraph { a }", SVG, &buf))
	assert.Equal(t, "option\n", buf.String(), "the option wins over COREDAG_DOT")
}

// TestRenderRunsDot: the DOT text goes to dot's stdin, the format is asked for with -T, and what
// dot writes is what Render writes.
func TestRenderRunsDot(t *testing.T) {
	t.Parallel()
	prog := fakeDot(t, `cat >"$0.stdin"; echo "$@" >"$0.args"; printf 'drawn\n'`)
	for _, f := range []Format{SVG, PNG} {
		var buf bytes.Buffer
		require.NoError(t, renderWith(RenderOptions{Dot: prog}, "digraph { a -> b }", f, &buf))
		assert.Equal(t, "drawn\n", buf.String())
		args, err := os.ReadFile(prog + ".args")
		require.NoError(t, err)
		assert.Equal(t, "-T"+string(f)+"\n", string(args))
		stdin, err := os.ReadFile(prog + ".stdin")
		require.NoError(t, err)
		assert.Equal(t, "digraph { a -> b }", string(stdin))
	}
}

// TestRenderDotFails: a failing dot's exit status and messages make the error, and w gets
// nothing, even when dot wrote some output before failing.
func TestRenderDotFails(t *testing.T) {
	t.Parallel()
	prog := fakeDot(t, `cat >/dev/null; echo '<svg>half'; echo 'Error: <stdin>: syntax error in line 1' >&2; echo 'second line' >&2; exit 3`)
	var buf bytes.Buffer
	err := renderWith(RenderOptions{Dot: prog}, "digraph {", SVG, &buf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rendering SVG: Graphviz's dot (")
	assert.Contains(t, err.Error(), "failed: exit status 3:\n    Error: <stdin>: syntax error in line 1\n    second line")
	assert.Zero(t, buf.Len())

	prog = fakeDot(t, `cat >/dev/null; exit 0`)
	err = renderWith(RenderOptions{Dot: prog}, "digraph {}", PNG, &buf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "wrote nothing")
	assert.Zero(t, buf.Len())

	// Only the start of a flood of messages is kept.
	prog = fakeDot(t, `cat >/dev/null; i=0; while [ $i -lt 1000 ]; do echo "Warning: message $i" >&2; i=$((i+1)); done; exit 1`)
	err = renderWith(RenderOptions{Dot: prog, MaxStderr: 100}, "digraph {}", SVG, &buf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Warning: message 0\n")
	assert.NotContains(t, err.Error(), "message 999")
	assert.True(t, strings.HasSuffix(err.Error(), "\n    ..."), "%q", err)
	assert.Less(t, len(err.Error()), 400)
	// By default, 16 KiB of them.
	err = renderWith(RenderOptions{Dot: prog}, "digraph {}", SVG, &buf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "message 700\n")
	assert.NotContains(t, err.Error(), "message 999")
	assert.True(t, strings.HasSuffix(err.Error(), "\n    ..."), "%q", err)
}

// TestRenderRetriesStraightEdges: when dot reports errors but writes a drawing (old Graphviz
// losing edges it cannot route), Render lays the graph out again with straight edges; if that
// fails too, the first failure is reported.
func TestRenderRetriesStraightEdges(t *testing.T) {
	t.Parallel()
	prog := fakeDot(t, `cat >/dev/null; echo "$@" >>"$0.args"
case "$*" in
*-Gsplines=line*) echo '<svg>straight</svg>' ;;
*) echo '<svg>lossy</svg>'; echo 'Error: lost n1 n2 edge' >&2; exit 1 ;;
esac`)
	var buf bytes.Buffer
	require.NoError(t, renderWith(RenderOptions{Dot: prog}, "digraph { n1 -> n2 }", SVG, &buf))
	assert.Equal(t, "<svg>straight</svg>\n", buf.String())
	args, err := os.ReadFile(prog + ".args")
	require.NoError(t, err)
	assert.Equal(t, "-Tsvg\n-Tsvg -Gsplines=line\n", string(args))

	// A failure without a drawing (a syntax error, say) is not retried.
	prog = fakeDot(t, `cat >/dev/null; echo "$@" >>"$0.args"; echo 'Error: syntax error' >&2; exit 1`)
	buf.Reset()
	err = renderWith(RenderOptions{Dot: prog}, "digraph {", SVG, &buf)
	require.ErrorContains(t, err, "syntax error")
	args, _ = os.ReadFile(prog + ".args")
	assert.Equal(t, "-Tsvg\n", string(args))

	prog = fakeDot(t, `cat >/dev/null
case "$*" in
*-Gsplines=line*) echo 'Error: second try' >&2; exit 2 ;;
*) echo '<svg>lossy</svg>'; echo 'Error: lost n1 n2 edge' >&2; exit 1 ;;
esac`)
	err = renderWith(RenderOptions{Dot: prog}, "digraph { n1 -> n2 }", SVG, &buf)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exit status 1:\n    Error: lost n1 n2 edge")
	assert.Zero(t, buf.Len())
}

// TestRenderTimeout: a dot that does not finish is stopped at the deadline, even when a child of
// it holds its output open, and the error says it timed out.
func TestRenderTimeout(t *testing.T) {
	t.Parallel()
	opts := RenderOptions{
		Dot:       fakeDot(t, `sleep 5; echo late`), // sh's child sleep keeps stdout open after sh is killed
		WaitDelay: 100 * time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	var buf bytes.Buffer
	start := time.Now()
	err := RenderContext(ctx, []byte("digraph { a }"), SVG, &buf, opts)
	elapsed := time.Since(start)
	require.ErrorIs(t, err, ErrTimeout)
	assert.Equal(t, "rendering SVG: Graphviz's dot did not finish in time and was stopped", err.Error())
	assert.Less(t, elapsed, 2*time.Second)
	assert.Zero(t, buf.Len())

	// A cancelled context is not a timeout.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	err = RenderContext(ctx, []byte("digraph { a }"), SVG, &buf, opts)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.Is(err, ErrTimeout))
}

// TestRenderOutputCap: a dot that writes more than the cap is stopped and its output refused.
func TestRenderOutputCap(t *testing.T) {
	t.Parallel()
	prog := fakeDot(t, `cat >/dev/null; exec yes drawing`) // never stops by itself
	var buf bytes.Buffer
	start := time.Now()
	err := renderWith(RenderOptions{Dot: prog, MaxOutput: 64 << 10}, "digraph { a }", PNG, &buf)
	require.Error(t, err)
	assert.Equal(t, "rendering PNG: Graphviz's dot wrote more than 64 KiB; refusing so large a drawing", err.Error())
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Zero(t, buf.Len())
}

// TestRenderOptionsDefaults: a zero field of RenderOptions is its default; others are kept.
func TestRenderOptionsDefaults(t *testing.T) {
	t.Parallel()
	assert.Equal(t, RenderOptions{MaxOutput: 256 << 20, MaxStderr: 16 << 10, WaitDelay: 2 * time.Second}, RenderOptions{}.withDefaults())
	o := RenderOptions{Dot: "/bin/dot", MaxOutput: 1, MaxStderr: 2, WaitDelay: 3}
	assert.Equal(t, o, o.withDefaults())
}

func TestByteSize(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "256 MiB", byteSize(256<<20))
	assert.Equal(t, "16 KiB", byteSize(16<<10))
	assert.Equal(t, "1000 bytes", byteSize(1000))
}
