package dsl

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
)

const bom = "\ufeff"

// plan is a small plan written with LF line breaks; the tests rewrite its line breaks.
const encodingPlan = "plan p   # first\nparam ranks = 2\n# a comment\nbuffer b u8[4]\nop c = copy b[0:2] to b[2:4]\n"

// TestByteOrderMark: a leading UTF-8 byte-order mark is skipped, and columns on the first line
// count from the first character after it.
func TestByteOrderMark(t *testing.T) {
	src := []byte(bom + encodingPlan)
	f, err := Parse("b.dag", src)
	require.NoError(t, err)
	first := f.Stmts[0].(*PlanStmt)
	assert.Equal(t, diag.At("b.dag", 1, 1), first.Pos())
	assert.EqualValues(t, 6, first.Name.Pos().Col)
	assert.EqualValues(t, 10, f.Comments[0].Pos().Col)
	assert.Equal(t, string(Format(mustParse(t, encodingPlan))), string(Format(f)), "fmt drops the mark")

	_, err = Parse("b.dag", []byte(bom+"plan p $\n"))
	require.Error(t, err)
	assert.Equal(t, "b.dag:1:8: invalid character '$': not part of the language (comments start with #)", err.Error())
	var out bytes.Buffer
	diag.Print(&out, err, diag.Sources{"b.dag": []byte(bom + "plan p $\n")})
	assert.Equal(t, "b.dag:1:8: invalid character '$': not part of the language (comments start with #)\n    plan p $\n           ^\n", out.String())

	// Only at the start: elsewhere it is an invisible character, and an error.
	_, err = Parse("b.dag", []byte("plan p\n"+bom+"param ranks = 2\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "b.dag:2:1: invalid character '\\ufeff'")
}

func mustParse(t *testing.T, src string) *File {
	t.Helper()
	f, err := Parse("m.dag", []byte(src))
	require.NoError(t, err)
	return f
}

// TestLineBreaks: LF, CRLF and a lone CR (old Mac files) all end a line, with the same line
// numbers and columns; fmt writes LF.
func TestLineBreaks(t *testing.T) {
	want := Format(mustParse(t, encodingPlan))
	for name, eol := range map[string]string{"LF": "\n", "CRLF": "\r\n", "CR": "\r"} {
		t.Run(name, func(t *testing.T) {
			src := strings.ReplaceAll(encodingPlan, "\n", eol)
			f, err := Parse("e.dag", []byte(src))
			require.NoError(t, err)
			require.Len(t, f.Stmts, 4)
			op := f.Stmts[3].(*OpStmt)
			assert.EqualValues(t, 5, op.Pos().Line)
			assert.EqualValues(t, 4, op.Name.Pos().Col)
			assert.Equal(t, "# first", f.Comments[0].Text, "a comment ends before the line break")
			assert.Equal(t, string(want), string(Format(f)), "fmt normalises line breaks to LF")

			bad := strings.ReplaceAll("plan p\nparam ranks = 2\nbuffer b u8[4] $\n", "\n", eol)
			_, err = Parse("e.dag", []byte(bad))
			require.Error(t, err)
			assert.Contains(t, err.Error(), "e.dag:3:16: invalid character '$'")
			var out bytes.Buffer
			diag.Print(&out, err, diag.Sources{"e.dag": []byte(bad)})
			assert.Contains(t, out.String(), "\n    buffer b u8[4] $\n                   ^\n")

			line, ok := diag.Sources{"e.dag": []byte(bad)}.Line("e.dag", 2)
			assert.True(t, ok)
			assert.Equal(t, "param ranks = 2", line)
		})
	}
	// Mixed breaks count one line each; CRLF is one break, not two.
	f, err := Parse("m.dag", []byte("plan p\r\nparam ranks = 2\rbuffer b u8[4]\nop c = copy b[0:2] to b[2:4]\r\n"))
	require.NoError(t, err)
	assert.EqualValues(t, 4, f.Stmts[3].Pos().Line)
	// A newline inside brackets does not end a statement, whichever break it is.
	_, err = Parse("m.dag", []byte("plan p\rlet x = (1 +\r 2)\r"))
	require.NoError(t, err)
}
