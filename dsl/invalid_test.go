package dsl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/race"
)

// parseErrs parses src and returns its diagnostics.
func parseErrs(t *testing.T, src string) diag.List {
	t.Helper()
	_, err := Parse("t.dag", []byte(src))
	require.Error(t, err)
	l, ok := err.(diag.List)
	require.True(t, ok, "%T", err)
	return l
}

// TestInvalidRun: a run of characters that start no token is one diagnostic at its start,
// quoting at most 16 of them; single characters keep their own messages.
func TestInvalidRun(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"a short run", "plan p\nlet a = 1 $$$$ + 2\n",
			`t.dag:2:11: invalid characters "$$$$": not part of the language (comments start with #)`},
		{"a long run", "plan p\nlet a = " + strings.Repeat("$", 1<<20) + "\n",
			`t.dag:2:9: invalid characters "$$$$$$$$$$$$$$$$"… (1048576 in a row): not part of the language (comments start with #)`},
		{"characters, not bytes", "plan p\nparam 名前 = 1\n",
			`t.dag:2:7: invalid characters "名前": not part of the language (comments start with #)`},
		{"a long run of multibyte characters", "plan p\n" + strings.Repeat("÷", 100) + "\n",
			`t.dag:2:1: invalid characters "` + strings.Repeat("÷", 16) + `"… (100 in a row): not part of the language (comments start with #)`},
		{"a byte that is not UTF-8, where it is", "plan p\nlet a = $$\xff\xfe$\n",
			"t.dag:2:11: invalid byte 0xff: a .dag file is UTF-8 text"},
		{"one character", "plan p\nlet a = $\n",
			"t.dag:2:9: invalid character '$': not part of the language (comments start with #)"},
		{"a lone dot", "plan p\nlet a = 1 . 2\n",
			"t.dag:2:11: invalid character '.': not part of the language (comments start with #)"},
		{"an unterminated string", "plan p\nassert 1, \"no end\n",
			`t.dag:2:11: unterminated string: close it with " on the same line`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := parseErrs(t, tc.src)
			require.Len(t, l, 1, "one diagnostic: %v", l)
			assert.Equal(t, tc.want, l[0].Error())
		})
	}
	// Runs end at anything that starts a token: each run is one diagnostic.
	l := parseErrs(t, "plan p\nlet a = $$ + $$$ ? 1\n")
	require.Len(t, l, 3)
	assert.Equal(t, "t.dag:2:9: invalid characters \"$$\": not part of the language (comments start with #)", l[0].Error())
	assert.Equal(t, "t.dag:2:14: invalid characters \"$$$\": not part of the language (comments start with #)", l[1].Error())
	assert.Equal(t, "t.dag:2:18: invalid character '?': not part of the language (comments start with #)", l[2].Error())
}

// TestLexerTooManyErrors: the lexer stops after diag.MaxErrors diagnostics with one "too many
// errors" where it stopped, printed last; a file of a million bad lines costs no more than the
// first ones.
func TestLexerTooManyErrors(t *testing.T) {
	for _, sep := range []string{"\n", " ", ";"} {
		src := strings.Repeat("$"+sep, 1<<20)
		err, alloc := parseCost(t, src)
		require.Error(t, err)
		l := err.(diag.List)
		require.Len(t, l, diag.MaxErrors+1)
		for i, d := range l[:diag.MaxErrors] {
			assert.Equal(t, diag.Syntax, d.Code)
			assert.Contains(t, d.Msg, "invalid character '$'", "diagnostic %d", i)
		}
		last := l[len(l)-1]
		assert.Equal(t, diag.Limit, last.Code)
		assert.Equal(t, fmt.Sprintf("too many errors: stopped after the first %d", diag.MaxErrors), last.Msg)
		if sep == "\n" {
			assert.Equal(t, diag.At("t.dag", diag.MaxErrors+1, 1), last.Pos)
		}
		if !race.Enabled {
			assert.Less(t, alloc, uint64(64<<20), "allocated bytes") // the source is 2 MiB; it was 600 MB
		}
	}
	// Unclosed brackets count too.
	l := parseErrs(t, "plan p\nlet a = "+strings.Repeat("(", 150)+"\n")
	assert.Len(t, l, diag.MaxErrors+1)
	assert.True(t, l.Capped())
}

// TestManyComments: comments cost no parse but each is a node of the File; a file is refused
// past maxComments, at the first one past it, before it costs half a gigabyte.
func TestManyComments(t *testing.T) {
	f, err := Parse("t.dag", []byte("plan p\n"+strings.Repeat("# a comment\n", 10000)+"let a = 1 # last\n"))
	require.NoError(t, err)
	require.Len(t, f.Comments, 10001)
	assert.Equal(t, "# a comment", f.Comments[9999].Text)
	assert.Equal(t, diag.At("t.dag", 10001, 1), f.Comments[9999].Pos())
	assert.Equal(t, "# last", f.Comments[10000].Text)
	assert.EqualValues(t, 11, f.Comments[10000].Pos().Col)

	src := "plan p\n" + strings.Repeat("#\n", maxComments+1000)
	err, alloc := parseCost(t, src)
	require.Error(t, err)
	l := err.(diag.List)
	require.Len(t, l, 1)
	assert.Equal(t, fmt.Sprintf("t.dag:%d:1: the file has more than %d comments: keep the comments a reader needs", maxComments+2, maxComments), l[0].Error())
	assert.Equal(t, diag.Limit, l[0].Code)
	if !race.Enabled {
		assert.Less(t, alloc, uint64(96<<20), "allocated bytes")
	}
	// At the limit the file parses.
	_, err = Parse("t.dag", []byte("plan p\n"+strings.Repeat("#\n", maxComments)))
	assert.NoError(t, err)
}
