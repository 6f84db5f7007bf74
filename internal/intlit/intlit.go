// Package intlit reads integers written as the plan language writes literals (42, 0x2a, 1_000,
// 4KiB). It sits below dsl so that what reads numbers outside a plan (the memory budget, the
// command line) shares the language's words without depending on the parser.
package intlit

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Byte units accepted after an integer: a multiplier, so 4KiB is 4096.
var units = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10},
	{"MiB", 1 << 20},
	{"GiB", 1 << 30},
	{"TiB", 1 << 40},
}

// UnitNames lists the units Value accepts, for a message: "KiB, MiB, GiB or TiB".
func UnitNames() string {
	var b strings.Builder
	for i, u := range units {
		switch {
		case i == len(units)-1 && i > 0:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString(u.suffix)
	}
	return b.String()
}

// Format writes n as Parse reads it back: in the largest unit that divides it (18KiB, 3MiB), or
// in plain digits (2047, 0).
func Format(n int64) string {
	for i := len(units) - 1; i >= 0; i-- {
		if u := units[i]; n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// Parse reads an integer written as the language writes literals (42, 0x2a, 1_000, 4KiB),
// with an optional leading minus sign: values given outside a plan, as in `coredag -p n=4KiB`.
// It reads every 64-bit signed integer, -9223372036854775808 included.
func Parse(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	v, msg := value(strings.TrimPrefix(s, "-"), neg)
	if msg != "" {
		return 0, errors.New(msg)
	}
	return v, nil
}

// Value returns the value of an integer literal (42, 0x2a, 1_000, 4KiB) or a message saying
// what is wrong with it.
func Value(raw string) (int64, string) { return value(raw, false) }

// value reads the literal raw, negated when neg: its magnitude may then be 2^63, the least
// int64's, which no literal reaches alone.
func value(raw string, neg bool) (int64, string) {
	digits, mult := raw, uint64(1)
	for _, u := range units {
		if strings.HasSuffix(raw, u.suffix) && len(raw) > len(u.suffix) {
			digits, mult = raw[:len(raw)-len(u.suffix)], uint64(u.mult)
			break
		}
	}
	base, body := 10, digits
	if len(digits) > 1 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X') {
		base, body = 16, digits[2:]
	}
	if msg := checkDigits(body, base); msg != "" {
		return 0, fmt.Sprintf("invalid integer literal %q: %s", raw, msg)
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++ // 2^63
	}
	u, err := strconv.ParseUint(strings.ReplaceAll(body, "_", ""), base, 64)
	switch {
	case (err != nil || u > limit/mult) && neg:
		return 0, fmt.Sprintf("integer literal -%s overflows a 64-bit signed integer (smallest is %d)", raw, int64(math.MinInt64))
	case err != nil || u > limit/mult:
		return 0, fmt.Sprintf("integer literal %s overflows a 64-bit signed integer (largest is %d)", raw, int64(math.MaxInt64))
	case neg:
		return int64(-(u * mult)), "" // -2^63 wraps to itself, the least int64
	}
	return int64(u * mult), ""
}

// checkDigits checks the digits of a literal in base (underscores only between digits).
func checkDigits(body string, base int) string {
	if body == "" {
		return "no digits after 0x"
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '_':
			if i == 0 && base == 10 || i == len(body)-1 || body[i+1] == '_' {
				return "'_' must separate digits, as in 1_000"
			}
		case '0' <= c && c <= '9', base == 16 && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F'):
		default:
			if base == 10 && i > 0 && strings.ContainsAny(body, "xXbBoO") && body[0] == '0' {
				return "only decimal and 0x hexadecimal integers are supported"
			}
			return fmt.Sprintf("unexpected %q; integers are written 42, 0x2a or 1_000, optionally followed by a unit %s", c, UnitNames())
		}
	}
	return ""
}
