package elaborate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/english"
)

func TestParseParams(t *testing.T) {
	t.Parallel()
	got, err := ParseParams([]string{"ranks=8", " n = 4KiB ", "root=-1", "m=0x2a", "k=1_000"})
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"ranks": 8, "n": 4096, "root": -1, "m": 42, "k": 1000}, got)
	for _, bad := range []string{"ranks", "=3", "n=", "n=abc", "n=1.5", "n=99999999999999999999", "n=0b101"} {
		_, err := ParseParams([]string{bad})
		assert.Error(t, err, bad)
	}
	_, err = ParseParams([]string{"n=1", "ranks=4", "n=2"})
	assert.EqualError(t, err, "n=2: n is given twice (n=1 before)")
}

func TestPlural(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "0 RNR retries", 1: "1 RNR retry", 2: "2 RNR retries"} {
		assert.Equal(t, want, english.Plural(n, "RNR retry"))
	}
	assert.Equal(t, "1 iteration", english.Plural(1, "iteration"))
	assert.Equal(t, "3 iterations", english.Plural(3, "iteration"))
	assert.Equal(t, "2 mismatches", english.Plural(2, "mismatch"))
	assert.Equal(t, "12 host steps", english.Plural(12, "host step"))
	assert.Equal(t, "0 WQEs", english.Plural(0, "WQE"))
	assert.Equal(t, "2 entries", english.Plural(2, "entry"))
	assert.Equal(t, "2 keys", english.Plural(2, "key"))
}
