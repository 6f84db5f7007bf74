package intlit

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnits: every unit Value accepts multiplies, and a literal with a unit it does not accept
// is refused with a message that lists exactly the units it accepts (it used to leave out TiB).
func TestUnits(t *testing.T) {
	t.Parallel()
	for _, u := range units {
		v, msg := Value("3" + u.suffix)
		require.Empty(t, msg, u.suffix)
		assert.Equal(t, 3*u.mult, v, u.suffix)
	}
	_, msg := Value("4KB")
	assert.Equal(t, `invalid integer literal "4KB": unexpected 'K'; integers are written 42, 0x2a or 1_000, optionally followed by a unit KiB, MiB, GiB or TiB`, msg)
	for _, u := range units {
		assert.Equal(t, 1, strings.Count(msg, u.suffix), u.suffix)
	}
	_, msg = Value("4PiB")
	assert.Contains(t, msg, "unexpected 'P'")
}

func TestParse(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int64{"42": 42, "0x2a": 42, "1_000": 1000, "4KiB": 4096, "-4": -4, "1TiB": 1 << 40} {
		v, err := Parse(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, v, s)
	}
	_, err := Parse("8388608TiB")
	assert.ErrorContains(t, err, "overflows a 64-bit signed integer")
}

// TestFormat: Format writes each figure in the largest unit that divides it, and Parse reads it
// back.
func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1: "1", 2047: "2047", 2048: "2KiB", 18 << 10: "18KiB", 3 << 20: "3MiB",
		1536 << 20: "1536MiB", 5 << 40: "5TiB", 1 << 50: "1024TiB", -4096: "-4KiB"} {
		assert.Equal(t, want, Format(n), n)
		back, err := Parse(Format(n))
		require.NoError(t, err, n)
		assert.Equal(t, n, back, n)
	}
}

// TestParseExtremes: Parse reads every int64, the least (-2^63, whose magnitude is no int64)
// included, and refuses one past either end, saying which end.
func TestParseExtremes(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]int64{
		"-9223372036854775808": math.MinInt64, "-0x8000000000000000": math.MinInt64, "-8388608TiB": math.MinInt64,
		"9223372036854775807": math.MaxInt64, "-9223372036854775807": -math.MaxInt64, "0x7fff_ffff_ffff_ffff": math.MaxInt64, "-0": 0,
	} {
		v, err := Parse(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, v, s)
	}
	for s, want := range map[string]string{
		"9223372036854775808":   "integer literal 9223372036854775808 overflows a 64-bit signed integer (largest is 9223372036854775807)",
		"8388608TiB":            "integer literal 8388608TiB overflows a 64-bit signed integer (largest is 9223372036854775807)",
		"-9223372036854775809":  "integer literal -9223372036854775809 overflows a 64-bit signed integer (smallest is -9223372036854775808)",
		"-8388609TiB":           "integer literal -8388609TiB overflows a 64-bit signed integer (smallest is -9223372036854775808)",
		"-18446744073709551616": "integer literal -18446744073709551616 overflows a 64-bit signed integer (smallest is -9223372036854775808)",
	} {
		_, err := Parse(s)
		assert.EqualError(t, err, want, s)
	}
	_, msg := Value("9223372036854775808") // a literal in a plan: no minus sign is part of it
	assert.Contains(t, msg, "overflows")
}
