package dsl

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPrintErrorEscapes: a plan's line or a file name cannot send escape sequences to the
// terminal through a diagnostic; the caret stays under the column.
func TestPrintErrorEscapes(t *testing.T) {
	src := []byte("plan p\nop a = nop after zz   # \x1b]0;pwned\x07\n")
	err := ErrorList{{Pos: Pos{File: "x\x1b[31m.dag", Line: 2, Col: 18}, Msg: "unknown op zz"}}
	var out bytes.Buffer
	PrintError(&out, err, Sources{"x\x1b[31m.dag": src})
	assert.Equal(t, `"x\x1b[31m.dag":2:18: unknown op zz`+"\n"+
		`    op a = nop after zz   # \x1b]0;pwned\x07`+"\n"+
		"                     ^\n", out.String())
	assert.NotContains(t, out.String(), "\x1b")
	assert.NotContains(t, out.String(), "\x07")

	// The caret counts an escape as what it prints.
	out.Reset()
	PrintError(&out, &Error{Pos: Pos{File: "p.dag", Line: 1, Col: 4}, Msg: "here"}, Sources{"p.dag": []byte("\x1b\tx$")})
	assert.Equal(t, "p.dag:1:4: here\n    \\x1b    x$\n             ^\n", out.String())

	// Other errors and messages: line breaks and tabs stay, the rest is escaped.
	out.Reset()
	PrintError(&out, errors.New("open \x1b[31m.dag:\n\tno such file \u202e"), nil)
	assert.Equal(t, "open \\x1b[31m.dag:\n\tno such file \\u202e\n", out.String())
}

func TestQuoteName(t *testing.T) {
	assert.Equal(t, "plans/ring.dag", QuoteName("plans/ring.dag"))
	assert.Equal(t, "plans/çà.dag", QuoteName("plans/çà.dag"), "printable Unicode is left alone")
	assert.Equal(t, `"a\x1b[31m.dag"`, QuoteName("a\x1b[31m.dag"))
	assert.Equal(t, `"a\nb.dag"`, QuoteName("a\nb.dag"))
	assert.Equal(t, `"a\u202eb.dag"`, QuoteName("a\u202eb.dag"))
	assert.Equal(t, `"\xff.dag"`, QuoteName("\xff.dag"))
	assert.Equal(t, `"x\x1b.dag":3:4`, Pos{File: "x\x1b.dag", Line: 3, Col: 4}.String())
}

// TestInvalidCharacterEscaped: the lexer's message about an escape character quotes it.
func TestInvalidCharacterEscaped(t *testing.T) {
	_, err := Parse("p.dag", []byte("plan p\nparam \x1b]0;pwned\x07 = 1\n"))
	require.Error(t, err)
	var out bytes.Buffer
	PrintError(&out, err, Sources{"p.dag": []byte("plan p\nparam \x1b]0;pwned\x07 = 1\n")})
	assert.NotContains(t, out.String(), "\x1b")
	assert.NotContains(t, out.String(), "\x07")
	assert.Contains(t, out.String(), `p.dag:2:7: invalid character '\x1b'`)
}
