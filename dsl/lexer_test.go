package dsl

import (
	"strings"
	"testing"

	"github.com/alecthomas/participle/v2/lexer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
)

// TestBlankLinesOneToken: a run of line breaks, blank lines between, is one separator at its
// last break, as the grammar saw it when each break was a token; ";" stays a token of its own.
func TestBlankLinesOneToken(t *testing.T) {
	var errs diag.List
	sc := scan("t.dag", []byte("plan p\n\n  \n\t\r\n\rlet a = 1;\n\nlet b = (1 +\n\n 2)\n"), &errs)
	require.Empty(t, errs)
	var got []string
	for _, tk := range sc.toks {
		if tk.Type == tokSep || tk.Type == lexer.EOF {
			got = append(got, tokPos(tk).String()+" "+describe(tk))
		}
	}
	assert.Equal(t, []string{
		"t.dag:5:1 end of line", // the lone CR ending line 5
		`t.dag:6:10 ";"`,        // kept over the line breaks after it; those in (...) are dropped
		"t.dag:11:1 end of file",
	}, got)

	// A file of blank lines is lexed as one token: one pass of the lexer, whatever its size.
	_, err := Parse("t.dag", []byte("plan p\n"+strings.Repeat("\n \r\n", 1<<20)+"let a = 1\n"))
	require.NoError(t, err)
}
