//go:build !unix

package atomicfile

import (
	"io/fs"
	"os"
)

// protectedLink: without Unix owners and sticky directories, links are followed.
func protectedLink(path, link, dir string, li fs.FileInfo) error { return nil }

// keepOwner: without Unix owners, a new file is the writer's.
func keepOwner(f *os.File, old fs.FileInfo) {}
