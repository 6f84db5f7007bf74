package dsl

import (
	"runtime"
	"strings"
	"testing"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/race"
)

// parseCost parses src and returns the error and the bytes allocated.
func parseCost(t *testing.T, src string) (error, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Parse("t.dag", []byte(src))
	runtime.ReadMemStats(&after)
	return err, after.TotalAlloc - before.TotalAlloc
}

// TestExpressionTooLong: a statement with more operators than the limit is refused at its
// start, in the language's words, before the parser spends a kilobyte per token on it (a 2^20
// term sum used to take 1.5 GB and end with the parser's "too many iterations of GBinary*").
func TestExpressionTooLong(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"sum of 2^20 terms", "plan p\nlet a = " + strings.Repeat("1+", 1<<20) + "1\n",
			"t.dag:2:1: expression too long: more than 16384 operators in one statement; split it with let"},
		{"prefix operators", "plan p\nparam n = " + strings.Repeat("- ", 1<<20) + "1\n",
			"t.dag:2:1: expression too long: more than 16384 operators"},
		{"inside a block", "plan p\nfor i in 0 .. 2 {\n  op x[" + strings.Repeat("i*", 20000) + "1] = nop\n}\n",
			"t.dag:3:3: expression too long: more than 16384 operators"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, alloc := parseCost(t, tc.src)
			require.Error(t, err)
			assert.Equal(t, tc.want, strings.SplitN(err.Error(), "\n", 2)[0][:len(tc.want)])
			assert.NotContains(t, err.Error(), "GBinary")
			if !race.Enabled {
				assert.Less(t, alloc, uint64(64<<20), "allocated bytes")
			}
		})
	}
	// At the limit the statement parses.
	_, err := Parse("t.dag", []byte("plan p\nlet a = "+strings.Repeat("1+", 1<<14)+"1\n"))
	assert.NoError(t, err)
	// Separate statements each have their own count.
	line := "let a = " + strings.Repeat("1+", 1<<13) + "1\n"
	_, err = Parse("t.dag", []byte("plan p\n"+strings.Replace(line, "a", "b", 1)+line))
	assert.NoError(t, err)
}

// TestTooManyTokens: a file past the token limit is refused at the first token past it.
func TestTooManyTokens(t *testing.T) {
	var b strings.Builder
	b.WriteString("plan p\n")
	for i := 0; b.Len() < 4<<20; i++ {
		b.WriteString("let a = 1 + 2 * 3 - 4\n") // ten tokens, the separator included
	}
	err, alloc := parseCost(t, b.String())
	require.Error(t, err)
	assert.Regexp(t, `^t\.dag:\d+:\d+: the file has more than 262144 tokens \(words, numbers and symbols\): write repeated statements as for loops`, err.Error())
	if !race.Enabled {
		assert.Less(t, alloc, uint64(256<<20), "allocated bytes")
	}
}

// TestRepetitionLimitMessage: should the parser's own repetition limit ever be reached, its
// message does not name the grammar's structs.
func TestRepetitionLimitMessage(t *testing.T) {
	perr := participle.Errorf(lexer.Position{Filename: "t.dag", Line: 2, Column: 9, Offset: 15}, "too many iterations of GBinary* (> 1000000)")
	e := syntaxError("t.dag", &scanned{}, perr)
	assert.Equal(t, "t.dag:2:9: statement too long: more than a million repetitions of one element; split it", e.Error())
}
