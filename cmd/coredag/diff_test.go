package main

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// applyDiff applies a unified diff produced by unifiedDiff to a, to check it independently of the
// library that made it.
func applyDiff(t *testing.T, a string, diff []byte) string {
	t.Helper()
	src := splitLines([]byte(a))
	var out []string
	lines := strings.SplitAfter(string(diff), "\n")
	next := 0 // next line of src not yet copied
	for _, l := range lines[2:] {
		switch {
		case l == "":
		case strings.HasPrefix(l, "@@"):
			var x0, n0 int
			_, err := fmt.Sscanf(l, "@@ -%d,%d", &x0, &n0)
			if err != nil {
				_, err = fmt.Sscanf(l, "@@ -%d", &x0)
				n0 = 1
			}
			require.NoError(t, err, l)
			if n0 > 0 {
				x0--
			}
			out = append(out, src[next:x0]...)
			next = x0
		case l[0] == ' ':
			require.Equal(t, src[next], l[1:])
			out = append(out, l[1:])
			next++
		case l[0] == '-':
			require.Equal(t, src[next], l[1:])
			next++
		case l[0] == '+':
			out = append(out, l[1:])
		}
	}
	out = append(out, src[next:]...)
	return strings.Join(out, "")
}

func TestUnifiedDiff(t *testing.T) {
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
