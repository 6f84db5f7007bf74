package dsl

import (
	"fmt"
	"io"
	"os"
)

// MaxSource is the largest plan text coredag reads, in bytes. Parsing takes about a kilobyte
// per token, so this bounds the memory and time a file can cost before the parser's own limits
// apply.
const MaxSource = 16 << 20

// ReadSource reads plan text from r, named name in its error, and refuses more than MaxSource
// bytes: a device such as /dev/zero never ends.
func ReadSource(r io.Reader, name string) ([]byte, error) {
	src, err := io.ReadAll(io.LimitReader(r, MaxSource+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(src) > MaxSource {
		return nil, fmt.Errorf("%s: larger than 16 MiB: a plan file may be at most 16 MiB", name)
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
