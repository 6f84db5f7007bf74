package chunktest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
)

const sample = `plan a
op x = nop ### "first"
---
plan b
let y = 1   ### 5 "col five" ### "an( other)?"
---

plan c
`

func TestParseChunks(t *testing.T) {
	t.Parallel()
	cases, err := Parse("s.dag", []byte(sample))
	require.NoError(t, err)
	require.Len(t, cases, 3)

	assert.Equal(t, 1, cases[0].Line)
	assert.Equal(t, "plan a\nop x = nop ### \"first\"\n", string(cases[0].Src))
	require.Len(t, cases[0].Want, 1)
	assert.Equal(t, Want{Line: 2, Pattern: "first", Re: cases[0].Want[0].Re}, cases[0].Want[0])

	assert.Equal(t, 4, cases[1].Line)
	assert.Equal(t, 1, cases[1].Index)
	assert.True(t, strings.HasPrefix(string(cases[1].Src), "\n\n\nplan b\n"), "padded to the file's lines")
	require.Len(t, cases[1].Want, 2)
	assert.Equal(t, 5, cases[1].Want[0].Line)
	assert.Equal(t, 5, cases[1].Want[0].Col)
	assert.Equal(t, 0, cases[1].Want[1].Col)
	assert.Equal(t, "an( other)?", cases[1].Want[1].Pattern)

	assert.Equal(t, 7, cases[2].Line)
	assert.Empty(t, cases[2].Want)
	assert.Equal(t, "s.dag:7", cases[2].Name())
}

func TestParseBadMarkers(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"op x = nop ### first",
		"op x = nop ### \"unclosed",
		"op x = nop ### 0 \"zero column\"",
		"op x = nop ### \"(\"",
		"op x = nop ### \"a\" trailing",
	} {
		_, err := Parse("b.dag", []byte(src))
		assert.Error(t, err, src)
		assert.Contains(t, err.Error(), "b.dag:1:")
	}
}

func diagAt(line, col int, msg string) *diag.Diagnostic {
	return &diag.Diagnostic{Pos: diag.At("s.dag", line, col), Msg: msg}
}

func TestMismatches(t *testing.T) {
	t.Parallel()
	cases, err := Parse("s.dag", []byte(sample))
	require.NoError(t, err)
	c := cases[1]
	tests := []struct {
		name  string
		diags []*diag.Diagnostic
		want  []string
	}{
		{"exact", []*diag.Diagnostic{diagAt(5, 5, "col five"), diagAt(5, 9, "another")}, nil},
		{"order free", []*diag.Diagnostic{diagAt(5, 1, "an"), diagAt(5, 5, "the col five here")}, nil},
		{"wrong column", []*diag.Diagnostic{diagAt(5, 6, "col five"), diagAt(5, 9, "an")}, []string{
			"missing diagnostic 5:5: /col five/; on that line got: 5:6: col five | 5:9: an",
			"unexpected diagnostic 5:6: col five",
		}},
		{"wrong line", []*diag.Diagnostic{diagAt(5, 5, "col five"), diagAt(6, 1, "an")}, []string{
			"missing diagnostic 5: /an( other)?/; on that line got: 5:5: col five",
			"unexpected diagnostic 6:1: an",
		}},
		{"extra", []*diag.Diagnostic{diagAt(5, 5, "col five"), diagAt(5, 1, "an"), diagAt(5, 1, "an")}, []string{
			"unexpected diagnostic 5:1: an",
		}},
		{"none", nil, []string{"missing diagnostic 5:5: /col five/", "missing diagnostic 5: /an( other)?/"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Mismatches(tt.diags, c))
		})
	}
	assert.Empty(t, Mismatches(nil, cases[2]), "a clean chunk with no diagnostics")
}

func TestDiagnostics(t *testing.T) {
	t.Parallel()
	d := diagAt(1, 2, "m")
	got, other := Diagnostics(diag.List{d})
	assert.Equal(t, []*diag.Diagnostic{d}, got)
	assert.NoError(t, other)
	got, _ = Diagnostics(d)
	assert.Equal(t, []*diag.Diagnostic{d}, got)
	got, other = Diagnostics(nil)
	assert.Nil(t, got)
	assert.NoError(t, other)
	_, other = Diagnostics(assert.AnError)
	assert.Equal(t, assert.AnError, other)
}

func TestParseOutput(t *testing.T) {
	t.Parallel()
	out := "plans/x.dag:3:7: expected \"to\" after the source slice of write, got \"data\"\n" +
		"    op a = write q data data\n" +
		"                        ^\n" +
		"    plans/x.dag:2:1: the queue\n" +
		"x.dag:10:1: unknown op rx: see x.dag:2:3: here\n" +
		"    x.dag:2:3: here\n" +
		"2 errors\n"
	got := ParseOutput(out)
	require.Len(t, got, 2)
	assert.Equal(t, []diag.Related{{Pos: diag.At("plans/x.dag", 2, 1), Label: "the queue"}}, got[0].Related)
	assert.Equal(t, []diag.Related{{Pos: diag.At("x.dag", 2, 3), Label: "here"}}, got[1].Related)
	assert.Equal(t, diag.At("plans/x.dag", 3, 7), got[0].Pos)
	assert.Equal(t, `expected "to" after the source slice of write, got "data"`, got[0].Msg)
	assert.Equal(t, diag.At("x.dag", 10, 1), got[1].Pos)
	assert.Equal(t, "unknown op rx: see x.dag:2:3: here", got[1].Msg)
}
