//go:build unix

package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// protectedLink refuses to follow the symbolic link at link (li, its Lstat), in the directory
// dir (without links), where the kernel's fs.protected_symlinks would refuse it: in a sticky
// world-writable directory such as /tmp, only a link of the caller's or of the directory's
// owner is followed. Otherwise another user could plant a link there to a file the caller may
// write and the planter may not. The rule is applied whatever the system's setting, since the
// links are followed here, not by the kernel.
func protectedLink(path, link, dir string, li fs.FileInfo) error {
	ls, ok := li.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	di, err := os.Stat(dir)
	if err != nil {
		return err
	}
	ds, ok := di.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	m := di.Mode()
	if m&fs.ModeSticky == 0 || m.Perm()&0o002 == 0 || ls.Uid == uint32(os.Geteuid()) || ls.Uid == ds.Uid {
		return nil
	}
	what := "the symbolic link " + link + " belongs to "
	if link == filepath.Clean(path) {
		what = "is a symbolic link of "
	}
	return &TargetError{Path: path, Err: syscall.EACCES, Reason: fmt.Sprintf(
		"%s%s, and in %s, a sticky world-writable directory, only your own links and those of its owner (%s) are followed (the rule of the kernel's fs.protected_symlinks)",
		what, owner(ls.Uid), dir, owner(ds.Uid))}
}

// owner names a user id: "alice (uid 1001)", or "uid 1001" for an id without a name.
func owner(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil && u.Username != "" {
		return u.Username + " (uid " + id + ")"
	}
	return "uid " + id
}

// keepOwner gives f the owner and group of the file it replaces (old, its Lstat), as far as the
// writer may: a refusal (EPERM for a user who is not root) leaves f the writer's.
func keepOwner(f *os.File, old fs.FileInfo) {
	st, ok := old.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) == os.Geteuid() && int(st.Gid) == os.Getegid()) {
		return
	}
	if f.Chown(int(st.Uid), int(st.Gid)) != nil {
		f.Chown(-1, int(st.Gid)) // the group alone, where the writer belongs to it
	}
}
