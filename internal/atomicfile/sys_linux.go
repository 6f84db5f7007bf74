package atomicfile

import (
	"errors"
	"os"
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

// kernelFS names the filesystem of dir if it is one of the kernel's (procfs, sysfs), where
// files cannot be created; otherwise it returns "".
func kernelFS(dir string) string {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return ""
	}
	switch st.Type {
	case unix.PROC_SUPER_MAGIC:
		return "procfs"
	case unix.SYSFS_MAGIC:
		return "sysfs"
	}
	return ""
}

// alignedBuffer returns n bytes of page-aligned memory outside the Go heap, for direct writes.
func alignedBuffer(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
}

func freeBuffer(b []byte) { unix.Munmap(b[:cap(b)]) }

// setDirect turns O_DIRECT on or off for f's writes; the kernel refuses it with EINVAL on a
// filesystem that cannot do direct I/O.
func setDirect(f *os.File, on bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) {
		var flags int
		if flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0); ferr != nil {
			return
		}
		if on {
			flags |= unix.O_DIRECT
		} else {
			flags &^= unix.O_DIRECT
		}
		_, ferr = unix.FcntlInt(fd, unix.F_SETFL, flags)
	})
	if err != nil {
		return err
	}
	return ferr
}
