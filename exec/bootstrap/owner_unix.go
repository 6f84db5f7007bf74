//go:build unix

package bootstrap

import (
	"os"
	"syscall"
)

// fileOwner returns the uid of a file's owner.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}
