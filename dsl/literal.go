package dsl

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/coredag/coredag/internal/intlit"
)

// ParseInt reads an integer written as the language writes literals (42, 0x2a, 1_000, 4KiB),
// with an optional leading minus sign: values given outside a plan, as in `coredag -p n=4KiB`.
func ParseInt(s string) (int64, error) { return intlit.Parse(s) }

// parseFloat returns the value of a float literal (0.5, 1e-3) or a message saying what is wrong.
func parseFloat(raw string) (float64, string) {
	v, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 0, fmt.Sprintf("float literal %s is out of the range of a 64-bit float", raw)
		}
		return 0, fmt.Sprintf("invalid float literal %q: write floats as 0.5, 2.0 or 1e-3", raw)
	}
	return v, ""
}
