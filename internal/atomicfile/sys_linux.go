package atomicfile

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// accessible reports a target the caller may not write: name (the file, or its directory when
// what says so) denies write permission or is on a read-only filesystem. Other errors are left
// for the write itself to report.
func accessible(name, what, path string) error {
	err := unix.Access(name, unix.W_OK)
	if err == nil || !(errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EROFS)) {
		return nil
	}
	reason := err.Error()
	if what != "" {
		reason = what + ": " + reason
	}
	return &TargetError{Path: path, Reason: reason, Err: err}
}

// onProcFS reports whether dir is on procfs, whose symbolic links (/proc/self/fd/1) only the
// kernel can follow.
func onProcFS(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}
