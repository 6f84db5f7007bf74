package dsl

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/coredag/coredag/internal/boundedio"
)

// MaxSource is the largest plan text coredag reads, in bytes. Parsing takes about a kilobyte
// per token, so this bounds the memory and time a file can cost before the parser's own limits
// apply.
const MaxSource = 16 << 20

// ReadSource reads plan text from r, named name in its error, and refuses more than MaxSource
// bytes: a device such as /dev/zero never ends.
func ReadSource(r io.Reader, name string) ([]byte, error) {
	src, err := boundedio.ReadAll(r, MaxSource)
	var big *boundedio.TooLargeError
	switch {
	case errors.As(err, &big):
		return nil, fmt.Errorf("%s: %w: a plan file may be at most %s", name, err, big.LimitText())
	case err != nil:
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return src, nil
}

// ReadFile reads the plan file path, as ReadSource does.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadSource(f, path)
}
