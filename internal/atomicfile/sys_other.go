//go:build !linux

package atomicfile

import (
	"errors"
	"os"
)

// accessible leaves permission checks to the write itself.
func accessible(name, what, path string) error { return nil }

// onProcFS: only Linux has /proc links that point nowhere (elsewhere /dev/fd/N are devices).
func onProcFS(dir string) bool { return false }

func kernelFS(dir string) string { return "" }

// Direct writes are Linux's O_DIRECT only; elsewhere every write goes through the cache.
func alignedBuffer(n int) ([]byte, error) { return nil, errors.ErrUnsupported }

func freeBuffer(b []byte) {}

func setDirect(f *os.File, on bool) error {
	if on {
		return errors.ErrUnsupported
	}
	return nil
}
