package main

import (
	"bytes"
	"crypto/sha256"
	endian "encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// Commands that draw nothing must not start a renderer: they run in little address space, and
// they neither read nor write a renderer's cache in the temporary directory. (coredag once linked
// a Graphviz library that compiled WebAssembly in a package init, kept the native code in
// $TMPDIR/go-graphviz and panicked when it could not.)

// TestCheckUnderAddressLimit: check (and dot writing DOT text) work under ulimit -v 1 GiB, every
// time: each command runs 15 times, because glibc's per-thread malloc arenas (64 MB of address
// space each, see arena_linux.go) made about one start in twenty run out of memory.
func TestCheckUnderAddressLimit(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	var cmds [][]string
	for range 15 {
		cmds = append(cmds, []string{"check", "plans/ring_allreduce.dag"}, []string{"dot", "plans/ring_allreduce.dag"})
	}
	for _, args := range cmds {
		cmd := exec.Command("sh", append([]string{"-c", `ulimit -v 1048576 && exec "$@"`, "sh", binary}, args...)...)
		code, stdout, stderr := runBounded(t, cmd, nil, "")
		assert.Equal(t, 0, code, "%q under ulimit -v 1048576:\n%s", args, stderr)
		for _, bad := range []string{"panic", "goroutine", "fatal error", "runtime/cgo"} {
			assert.NotContains(t, stdout+stderr, bad, "%q", args)
		}
		if args[0] == "check" {
			assert.Contains(t, stdout, "plans/ring_allreduce.dag: ok")
		} else {
			assert.True(t, strings.HasPrefix(stdout, "digraph "), "%.40q", stdout)
		}
	}
}

// TestCheckIgnoresPlantedCache: with TMPDIR holding a go-graphviz directory another user planted
// (mode 0777, owned by nobody when the test runs as root, with a cache file in it), check opens,
// reads, creates and changes nothing there, as inotify and a before/after listing both show.
func TestCheckIgnoresPlantedCache(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	planted := filepath.Join(tmp, "go-graphviz")
	cacheDir := filepath.Join(planted, "wazero-v1.10.1-amd64-linux")
	require.NoError(t, os.MkdirAll(cacheDir, 0o777))
	entry := filepath.Join(cacheDir, "65d05e8bbea8a6610d0686e4cb2ab62ff93a257de48b3587eb75f15ddf3c84ca")
	require.NoError(t, os.WriteFile(entry, []byte("planted native code"), 0o666))
	for _, p := range []string{planted, cacheDir, entry} {
		require.NoError(t, os.Chmod(p, 0o777))
		if os.Geteuid() == 0 {
			require.NoError(t, os.Chown(p, 65534, 65534))
		}
	}
	before := listTree(t, tmp)

	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	const mask = unix.IN_ACCESS | unix.IN_OPEN | unix.IN_CREATE | unix.IN_MODIFY | unix.IN_ATTRIB |
		unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO
	watched := map[int]string{}
	for _, dir := range []string{tmp, planted, cacheDir} {
		wd, err := unix.InotifyAddWatch(fd, dir, mask)
		require.NoError(t, err)
		watched[wd] = dir
	}

	code, stdout, stderr := coredagEnv(t, []string{"TMPDIR=" + tmp}, "", "check", "plans/ring_allreduce.dag")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "plans/ring_allreduce.dag: ok")

	assert.Empty(t, inotifyEvents(t, fd, watched), "check touched the temporary directory")
	assert.Equal(t, before, listTree(t, tmp), "check changed the temporary directory")
}

// listTree describes every file and directory under root: path, owner, mode, size, modification
// time and a digest of the contents.
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		line := fmt.Sprintf("%s uid=%d mode=%o size=%d mtime=%d.%09d", path, st.Uid, st.Mode, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
		if d.Type().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" sha256=%x", sha256.Sum256(data))
		}
		out = append(out, line)
		return nil
	})
	require.NoError(t, err)
	return out
}

// inotifyEvents drains the events queued on fd, as "dir/name: mask" lines.
func inotifyEvents(t *testing.T, fd int, watched map[int]string) []string {
	t.Helper()
	var events []string
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EAGAIN {
			return events
		}
		require.NoError(t, err)
		for b := buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			wd := int32(endian.NativeEndian.Uint32(b[0:]))
			m := endian.NativeEndian.Uint32(b[4:])
			nameLen := int(endian.NativeEndian.Uint32(b[12:]))
			name := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+nameLen], "\x00"))
			events = append(events, fmt.Sprintf("%s: %#x", filepath.Join(watched[int(wd)], name), m))
			b = b[unix.SizeofInotifyEvent+nameLen:]
		}
	}
}
