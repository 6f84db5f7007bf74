// Package boundedio reads a file or a stream whole, up to a bound: what coredag reads from a path
// it is given may be a device such as /dev/zero or a pipe that never ends, so each reader (plans,
// plan sets, parameter files, the job secret) refuses more than it could need instead of reading
// until memory runs out.
package boundedio

import (
	"io"
	"math"
	"os"
	"strconv"
)

// TooLargeError is the error ReadAll and ReadFile return for input past their bound. Its text is
// "larger than 16 MiB"; the caller names the file and says what it expected.
type TooLargeError struct {
	Limit int64 // the bound, in bytes
}

func (e *TooLargeError) Error() string { return "larger than " + e.LimitText() }

// LimitText is the bound as the error writes it: "16 MiB", "4 KiB", "1000 bytes".
func (e *TooLargeError) LimitText() string { return sizeText(e.Limit) }

// ReadAll reads r to its end and returns what it held: at most limit bytes (limit >= 0). Past
// limit it stops, having read limit+1 bytes, and returns a *TooLargeError; a read error is
// returned as it is. Either way it returns no data.
func ReadAll(r io.Reader, limit int64) ([]byte, error) {
	if limit < 0 {
		panic("boundedio: negative limit " + strconv.FormatInt(limit, 10))
	}
	b, err := io.ReadAll(io.LimitReader(r, min(limit, math.MaxInt64-1)+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	return b, nil
}

// ReadFile opens path and reads it as ReadAll does. Errors from opening and reading are the os
// package's, which name the path; a *TooLargeError does not. Like os.Open, it waits for a writer
// on a FIFO; a directory fails on its read.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, limit)
}

// sizeText writes n bytes in the largest binary unit that divides it, so that the figure is
// exact: "16 MiB", "4 KiB", "1536 bytes", "1 byte".
func sizeText(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	for i := len(units) - 1; i >= 0; i-- {
		if u := int64(1) << (10 * (i + 1)); n >= u && n%u == 0 {
			return strconv.FormatInt(n/u, 10) + " " + units[i]
		}
	}
	if n == 1 {
		return "1 byte"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
