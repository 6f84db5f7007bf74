package main

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// applyDiff applies a unified diff produced by unifiedDiff to a, to check it independently of the
// library that made it. Each hunk header must agree with the hunk: its old start is where the hunk
// applies, its new start the line of the output it begins at, its counts the lines it spans.
func applyDiff(t *testing.T, a string, diff []byte) string {
	t.Helper()
	src := splitLines([]byte(a))
	var out []string
	lines := strings.SplitAfter(string(diff), "\n")
	next := 0            // next line of src not yet copied
	header := ""         // the current hunk's header
	var want0, want1 int // the old and new lines the current hunk's header counts
	var got0, got1 int   // the old and new lines the hunk has had so far
	endHunk := func() {
		if header != "" {
			require.Equal(t, [2]int{want0, want1}, [2]int{got0, got1}, "line counts of %s", header)
		}
	}
	for _, l := range lines[2:] {
		switch {
		case l == "":
		case strings.HasPrefix(l, "@@"):
			endHunk()
			x0, n0, x1, n1 := parseHunk(t, l)
			if n0 > 0 {
				x0--
			}
			out = append(out, src[next:x0]...)
			next = x0
			if n1 > 0 {
				x1--
			}
			require.Equal(t, len(out), x1, "new-file start of %s", l)
			header, want0, want1, got0, got1 = l, n0, n1, 0, 0
		case l[0] == ' ':
			require.Equal(t, src[next], l[1:])
			out = append(out, l[1:])
			next++
			got0++
			got1++
		case l[0] == '-':
			require.Equal(t, src[next], l[1:])
			next++
			got0++
		case l[0] == '+':
			out = append(out, l[1:])
			got1++
		}
	}
	endHunk()
	out = append(out, src[next:]...)
	return strings.Join(out, "")
}

// parseHunk reads a hunk header "@@ -x0,n0 +x1,n1 @@", where a count of 1 may be left out.
func parseHunk(t *testing.T, l string) (x0, n0, x1, n1 int) {
	t.Helper()
	m := hunkHeader.FindStringSubmatch(l)
	require.NotNil(t, m, "hunk header %q", l)
	num := func(s string, def int) int {
		if s == "" {
			return def
		}
		v, err := strconv.Atoi(s)
		require.NoError(t, err, l)
		return v
	}
	return num(m[1], 0), num(m[2], 1), num(m[3], 0), num(m[4], 1)
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

func TestUnifiedDiff(t *testing.T) {
	t.Parallel()
	assert.Empty(t, unifiedDiff("f", []byte("a\nb\n"), []byte("a\nb\n")))
	d := unifiedDiff("f.dag", []byte("a\nb\nc\n"), []byte("a\nB\nc\n"))
	assert.Equal(t, "--- f.dag.orig\n+++ f.dag\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n", string(d))

	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 300; i++ {
		var a, b []string
		for j := rng.Intn(30); j > 0; j-- {
			l := fmt.Sprintf("l%d\n", rng.Intn(6))
			switch rng.Intn(4) {
			case 0:
				a = append(a, l)
			case 1:
				b = append(b, l)
			default:
				a, b = append(a, l), append(b, l)
			}
		}
		as, bs := strings.Join(a, ""), strings.Join(b, "")
		d := unifiedDiff("f", []byte(as), []byte(bs))
		if as == bs {
			assert.Empty(t, d)
			continue
		}
		assert.Equal(t, bs, applyDiff(t, as, d), "case %d: %q -> %q\n%s", i, as, bs, d)
	}
}

// splitLines cuts b into lines that keep their newline; a last line without one is marked as
// unified diffs mark it.
func splitLines(b []byte) []string {
	s := string(b)
	var lines []string
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s+"\n\\ No newline at end of file\n")
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// TestUnifiedDiffHeaders: the hunk headers are those of diff -u on the same files (go-udiff before
// v0.4.2 did not advance the new-file line over the unchanged lines inside a hunk that joins
// nearby edits, so every later hunk started too early). Against diff itself when it is installed,
// and always against the headers it printed for the first case.
func TestUnifiedDiffHeaders(t *testing.T) {
	t.Parallel()
	type pair struct{ name, a, b string }
	var pairs []pair
	// Two edits close enough to share a hunk, then more hunks: diff -u prints
	// @@ -1,12 +1,11 @@ @@ -22,7 +21,7 @@ @@ -34,6 +33,7 @@.
	var a, b []string
	for i := 1; i <= 40; i++ {
		l := fmt.Sprintf("line %d\n", i)
		switch i {
		case 4:
			a = append(a, l)
		case 9, 25:
			a, b = append(a, l), append(b, "new "+l)
		case 36:
			a, b = append(a, l), append(b, l, "added\n")
		default:
			a, b = append(a, l), append(b, l)
		}
	}
	joined := pair{"joined", strings.Join(a, ""), strings.Join(b, "")}
	pairs = append(pairs, joined)
	got := hunkHeaders(unifiedDiff("joined", []byte(joined.a), []byte(joined.b)))
	assert.Equal(t, []string{"@@ -1,12 +1,11 @@", "@@ -22,7 +21,7 @@", "@@ -34,6 +33,7 @@"}, got)

	// What coredag fmt -d shows: the messy inputs of the formatter against their formatting.
	inputs, err := filepath.Glob(filepath.Join("..", "..", "testdata", "fmt", "*.dag"))
	require.NoError(t, err)
	require.NotEmpty(t, inputs)
	for _, in := range inputs {
		src, err := os.ReadFile(in)
		require.NoError(t, err)
		golden := filepath.Join("..", "..", "testdata", "fmt", "golden", "testdata", "fmt", filepath.Base(in)+".golden")
		want, err := os.ReadFile(golden)
		require.NoError(t, err)
		pairs = append(pairs, pair{filepath.Base(in), string(src), string(want)})
	}
	// Random edits of a 60-line file.
	rng := rand.New(rand.NewSource(7))
	for i := range 40 {
		var a, b []string
		for j := range 60 {
			l := fmt.Sprintf("l%d\n", j)
			switch rng.Intn(14) {
			case 0:
				a = append(a, l)
			case 1:
				b = append(b, l)
			case 2:
				a, b = append(a, l), append(b, "x"+l)
			default:
				a, b = append(a, l), append(b, l)
			}
		}
		pairs = append(pairs, pair{fmt.Sprintf("random%d", i), strings.Join(a, ""), strings.Join(b, "")})
	}

	diff, err := exec.LookPath("diff")
	if err != nil {
		t.Log("no diff program: the hunk headers are only checked against the hunks")
	}
	dir := t.TempDir()
	for _, p := range pairs {
		d := unifiedDiff(p.name, []byte(p.a), []byte(p.b))
		require.NotEmpty(t, d, p.name)
		assert.Equal(t, p.b, applyDiff(t, p.a, d), p.name)
		if diff == "" {
			continue
		}
		fa, fb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		require.NoError(t, os.WriteFile(fa, []byte(p.a), 0o644))
		require.NoError(t, os.WriteFile(fb, []byte(p.b), 0o644))
		out, err := exec.Command(diff, "-u", fa, fb).Output()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "diff -u of %s", p.name) // 1: the files differ
		require.Equal(t, 1, exit.ExitCode(), "diff -u of %s", p.name)
		assert.Equal(t, hunkHeaders(out), hunkHeaders(d), "%s: diff -u\n%s\nunifiedDiff\n%s", p.name, out, d)
	}
}

// hunkHeaders returns the "@@ ... @@" headers of a unified diff.
func hunkHeaders(d []byte) []string {
	var hs []string
	for _, l := range strings.Split(string(d), "\n") {
		if m := hunkHeader.FindString(l); m != "" {
			hs = append(hs, m)
		}
	}
	return hs
}
