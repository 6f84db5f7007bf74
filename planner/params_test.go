package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseParams(t *testing.T) {
	got, err := ParseParams([]string{"ranks=8", " n = 4KiB ", "root=-1", "m=0x2a", "k=1_000"})
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"ranks": 8, "n": 4096, "root": -1, "m": 42, "k": 1000}, got)
	for _, bad := range []string{"ranks", "=3", "n=", "n=abc", "n=1.5", "n=99999999999999999999", "n=0b101"} {
		_, err := ParseParams([]string{bad})
		assert.Error(t, err, bad)
	}
}
