package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/internal/e2e"
)

// helperEnv makes the test binary, started again by a test, run helperMain instead of the tests;
// unfinishedEnv makes it run unfinishedMain.
const (
	helperEnv     = "ATOMICFILE_TEST_HELPER"
	unfinishedEnv = "ATOMICFILE_TEST_UNFINISHED"
)

func TestMain(m *testing.M) {
	if arg := os.Getenv(helperEnv); arg != "" {
		os.Exit(helperMain(arg))
	}
	if arg := os.Getenv(unfinishedEnv); arg != "" {
		os.Exit(unfinishedMain(arg))
	}
	os.Exit(m.Run())
}

// helperMain writes 64 KiB to the file named by arg (1 MiB, mostly by direct writes, when
// directEnv is set) and exits 0 if that worked, 3 if the write failed with EFBIG, 4 if it failed
// with EACCES and 1 otherwise; the error goes to stderr.
func helperMain(path string) int {
	size := 64 << 10
	var o options
	if os.Getenv(directEnv) != "" {
		o, size = options{directAfter: 16 << 10, chunkSize: 16 << 10}, 1<<20
	}
	err := writeFile(path, bytes.Repeat([]byte("new content\n"), size/12), o)
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, err)
	switch {
	case errors.Is(err, syscall.EFBIG):
		return 3
	case errors.Is(err, syscall.EACCES):
		return 4
	}
	return 1
}

// names lists the entries of dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	info, err := os.Lstat(path)
	require.NoError(t, err)
	return info.Mode()
}

func TestWriteFileKeepsMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "plan.dag")
	require.NoError(t, os.WriteFile(f, []byte("old"), 0o600))
	require.NoError(t, os.Chmod(f, 0o640))
	require.NoError(t, WriteFile(f, []byte("new")))
	got, err := os.ReadFile(f)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
	assert.Equal(t, fs.FileMode(0o640), mode(t, f), "the old file's mode")

	require.NoError(t, os.Chmod(f, 0o755))
	require.NoError(t, WriteFile(f, []byte("newer")))
	assert.Equal(t, fs.FileMode(0o755), mode(t, f))
	assert.Equal(t, []string{"plan.dag"}, names(t, dir), "no temporary file left")
}

func TestNewFileModeFollowsUmask(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	dir := t.TempDir()
	f := filepath.Join(dir, "new.txt")
	require.NoError(t, WriteFile(f, []byte("x")))
	assert.Equal(t, fs.FileMode(0o640), mode(t, f), "0666 less the umask, as os.Create")
	syscall.Umask(0)
	g := filepath.Join(dir, "new2.txt")
	require.NoError(t, WriteFile(g, []byte("x")))
	assert.Equal(t, fs.FileMode(0o666), mode(t, g))
}

// TestAbortLeavesOld: a write abandoned half-way (as after an error in the code producing the
// data) leaves the old content and no temporary file; the temporary file is not the target.
func TestAbortLeavesOld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "out.txt")
	require.NoError(t, os.WriteFile(f, []byte("old content"), 0o644))
	w, err := Create(f)
	require.NoError(t, err)
	_, err = w.Write([]byte("half of the new"))
	require.NoError(t, err)
	got, err := os.ReadFile(f)
	require.NoError(t, err)
	assert.Equal(t, "old content", string(got), "nothing reaches the target before Commit")
	assert.Len(t, names(t, dir), 2, "the data goes to a temporary file beside the target")
	require.NoError(t, w.Abort())
	require.NoError(t, w.Abort(), "a second Abort does nothing")
	assert.ErrorIs(t, w.Commit(), fs.ErrClosed)
	got, err = os.ReadFile(f)
	require.NoError(t, err)
	assert.Equal(t, "old content", string(got))
	assert.Equal(t, []string{"out.txt"}, names(t, dir))

	w, err = Create(f)
	require.NoError(t, err)
	defer w.Abort() // does nothing after Commit
	_, err = w.Write([]byte("new"))
	require.NoError(t, err)
	require.NoError(t, w.Commit())
	got, err = os.ReadFile(f)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
}

// TestFileSizeLimit: under `ulimit -f` the kernel fails the write with EFBIG and sends SIGXFSZ,
// whose default action kills a process (the check on `head` shows that the limit and the signal
// are real here). A Go program catches SIGXFSZ, so WriteFile returns EFBIG, removes its temporary
// file and leaves the old content byte for byte.
func TestFileSizeLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	killed := filepath.Join(dir, "killed")
	out, err := exec.Command("sh", "-c", `ulimit -f 8 && head -c 100000 /dev/zero > "$0"`, killed).CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	ws, ok := ee.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGXFSZ || ws.ExitStatus() == 128+int(syscall.SIGXFSZ), "head dies of SIGXFSZ: %v", ee)
	require.NoError(t, os.Remove(killed))

	f := filepath.Join(dir, "big.dag")
	old := bytes.Repeat([]byte("old\n"), 1000) // 4000 bytes, below the limit of 8 blocks
	require.NoError(t, os.WriteFile(f, old, 0o644))
	cmd := exec.Command("sh", "-c", `ulimit -f 8 && exec "$0"`, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+f)
	out, err = cmd.CombinedOutput()
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, 3, ee.ExitCode(), "EFBIG, not a signal: %v\n%s", ee, out)
	assert.Equal(t, "write "+f+": file too large\n", string(out), "the error names the target")
	got, err := os.ReadFile(f)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(old, got), "old content intact (%d bytes now)", len(got))
	assert.Equal(t, []string{"big.dag"}, names(t, dir), "no temporary file left")
}

func TestSymlinkFollowed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	real := filepath.Join(sub, "real.txt")
	require.NoError(t, os.WriteFile(real, []byte("old"), 0o600))
	link := filepath.Join(dir, "link.txt")
	require.NoError(t, os.Symlink("sub/real.txt", link))
	// and a link to the link, through a linked directory
	require.NoError(t, os.Symlink("sub", filepath.Join(dir, "subl")))
	link2 := filepath.Join(sub, "link2.txt")
	require.NoError(t, os.Symlink("../link.txt", link2))

	require.NoError(t, WriteFile(link, []byte("new")))
	assert.Equal(t, fs.ModeSymlink, mode(t, link)&fs.ModeSymlink, "the link stays a link")
	got, err := os.ReadFile(real)
	require.NoError(t, err)
	assert.Equal(t, "new", string(got))
	assert.Equal(t, fs.FileMode(0o600), mode(t, real))

	require.NoError(t, WriteFile(filepath.Join(dir, "subl", "link2.txt"), []byte("newer")))
	got, err = os.ReadFile(real)
	require.NoError(t, err)
	assert.Equal(t, "newer", string(got))
	assert.Equal(t, fs.ModeSymlink, mode(t, link2)&fs.ModeSymlink)
	assert.ElementsMatch(t, []string{"real.txt", "link2.txt"}, names(t, sub))

	// A dangling link leads to the file it names, which is created.
	dangling := filepath.Join(dir, "dangling")
	require.NoError(t, os.Symlink("sub/made.txt", dangling))
	require.NoError(t, WriteFile(dangling, []byte("made")))
	assert.Equal(t, fs.ModeSymlink, mode(t, dangling)&fs.ModeSymlink)
	got, err = os.ReadFile(filepath.Join(sub, "made.txt"))
	require.NoError(t, err)
	assert.Equal(t, "made", string(got))
}

func TestDevNullWrittenDirectly(t *testing.T) {
	t.Parallel()
	require.NoError(t, WriteFile("/dev/null", []byte("discarded")))
	require.NoError(t, Check("/dev/null"))
	info, err := os.Lstat("/dev/null")
	require.NoError(t, err)
	assert.Equal(t, fs.ModeDevice|fs.ModeCharDevice, info.Mode().Type(), "/dev/null is still a character device")
	for _, n := range names(t, "/dev") {
		assert.False(t, strings.HasPrefix(n, ".null.tmp"), "temporary file /dev/%s", n)
	}
}

func TestFIFOWrittenDirectly(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "pipe")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	got := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- []byte(err.Error())
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- b
	}()
	data := bytes.Repeat([]byte("through the pipe\n"), 10000) // more than a pipe's buffer
	require.NoError(t, WriteFile(fifo, data))
	assert.Equal(t, data, <-got)
	assert.Equal(t, fs.ModeNamedPipe, mode(t, fifo).Type(), "the FIFO is still a FIFO")
}

func TestBadTargets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, c := range []struct {
		path, msg string
		is        error
	}{
		{dir, dir + ": is a directory", syscall.EISDIR},
		{".", ".: is a directory", syscall.EISDIR},
		{"/", "/: is a directory", syscall.EISDIR},
		{filepath.Join(dir, "nodir", "x.txt"), filepath.Join(dir, "nodir", "x.txt") + ": directory " + filepath.Join(dir, "nodir") + " does not exist", fs.ErrNotExist},
		{filepath.Join(file, "x.txt"), filepath.Join(file, "x.txt") + ": " + file + " is not a directory", syscall.ENOTDIR},
		{"", "empty file name", fs.ErrInvalid},
	} {
		err := Check(c.path)
		require.Error(t, err, c.path)
		assert.Equal(t, c.msg, err.Error())
		assert.ErrorIs(t, err, c.is, c.path)
		_, err = Create(c.path)
		assert.ErrorIs(t, err, c.is, c.path)
	}
	assert.Equal(t, []string{"file"}, names(t, dir), "nothing created")
}

// TestReadOnlyDirectory: a directory the caller may not write is refused by Check and by
// Create, and nothing is left in it. Root may write anywhere, so as root the test runs the
// write in a helper process as user nobody.
func TestReadOnlyDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	ro := filepath.Join(dir, "ro")
	require.NoError(t, os.Mkdir(ro, 0o755))
	f := filepath.Join(ro, "out.txt")
	require.NoError(t, os.WriteFile(f, []byte("old"), 0o644))
	require.NoError(t, os.Chmod(f, 0o666)) // the file may be written: only the directory may not
	require.NoError(t, os.Chmod(ro, 0o555))
	defer os.Chmod(ro, 0o755)

	if os.Geteuid() != 0 {
		err := Check(f)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "cannot create files in "+ro+": permission denied")
		assert.ErrorIs(t, WriteFile(f, []byte("new")), syscall.EACCES)
		assert.ErrorIs(t, WriteFile(filepath.Join(ro, "new.txt"), []byte("new")), syscall.EACCES)
	} else {
		if runtime.GOOS != "linux" {
			t.Skip("runs the helper as nobody on Linux only")
		}
		bin := filepath.Join(dir, "helper.test") // the test binary may sit in a directory only root can enter
		data, err := os.ReadFile(os.Args[0])
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(bin, data, 0o755))
		for _, target := range []string{f, filepath.Join(ro, "new.txt")} {
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), helperEnv+"="+target)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s", out)
			assert.Equal(t, 4, ee.ExitCode(), "EACCES: %s", out)
			assert.Equal(t, target+": cannot create files in "+ro+": permission denied\n", string(out))
		}
	}
	got, err := os.ReadFile(f)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
	assert.Equal(t, []string{"out.txt"}, names(t, ro), "nothing left in the directory")
}

// TestReadOnlyFile: a file the caller may not write is not replaced, although the directory
// would allow the rename (as root, nothing is read-only).
func TestReadOnlyFile(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root may write any file")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "out.txt")
	require.NoError(t, os.WriteFile(f, []byte("old"), 0o444))
	assert.ErrorIs(t, WriteFile(f, []byte("new")), syscall.EACCES)
	got, err := os.ReadFile(f)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
}

// TestConcurrentReaders: while a file is rewritten over and over, readers only ever see one of
// the complete versions (os.WriteFile, which truncates and then writes, fails this at once).
func TestConcurrentReaders(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "plan.dag")
	versions := [][]byte{
		bytes.Repeat([]byte("op a = nop # version A\n"), 4000),
		bytes.Repeat([]byte("op b=nop\n"), 9000),
	}
	require.NoError(t, os.WriteFile(f, versions[0], 0o644))
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads, torn atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				b, err := os.ReadFile(f)
				if err != nil || !bytes.Equal(b, versions[0]) && !bytes.Equal(b, versions[1]) {
					torn.Add(1)
				}
				reads.Add(1)
			}
		}()
	}
	for i := range e2e.Cases(100, 30) { // the readers spin meanwhile: fewer writes in a plain go test
		require.NoError(t, WriteFile(f, versions[(i+1)%2]))
	}
	stop.Store(true)
	wg.Wait()
	assert.Zero(t, torn.Load(), "reads that saw a torn or missing file, of %d", reads.Load())
	assert.Positive(t, reads.Load())
}

// TestProtectedSymlinks: in a sticky world-writable directory, a link planted by another user
// is not followed (it would let that user overwrite a file only the caller may write), as the
// kernel's fs.protected_symlinks refuses it, whatever that setting is; the caller's own links,
// the directory owner's, and links in other directories are followed. The links are given
// another owner with Lchown, which needs root.
func TestProtectedSymlinks(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("giving a link another owner needs root")
	}
	const other = 65534 // nobody
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("root's"), 0o600))
	pub := filepath.Join(dir, "pub")
	require.NoError(t, os.Mkdir(pub, 0o755))
	require.NoError(t, os.Chmod(pub, 0o1777|fs.ModeSticky))
	require.Equal(t, fs.ModeSticky, mode(t, pub)&fs.ModeSticky)
	plant := func(name, to string, uid int) string {
		link := filepath.Join(pub, name)
		require.NoError(t, os.Symlink(to, link))
		require.NoError(t, os.Lchown(link, uid, uid))
		return link
	}

	for _, to := range []string{secret, "/dev/null"} { // a file to replace, a device to write
		link := plant("out"+filepath.Base(to), to, other)
		for name, err := range map[string]error{"Check": Check(link), "WriteFile": WriteFile(link, []byte("pwned"))} {
			require.Error(t, err, name)
			assert.ErrorIs(t, err, syscall.EACCES, name)
			assert.Equal(t, link+": is a symbolic link of "+owner(other)+", and in "+pub+", a sticky world-writable directory, only your own links and those of its owner ("+owner(0)+") are followed (the rule of the kernel's fs.protected_symlinks)",
				err.Error(), name)
		}
	}
	// Also as the last link of a chain that starts elsewhere.
	mine := filepath.Join(dir, "mine")
	require.NoError(t, os.Symlink(filepath.Join(pub, "outsecret"), mine))
	err := WriteFile(mine, []byte("pwned"))
	assert.ErrorIs(t, err, syscall.EACCES)
	assert.ErrorContains(t, err, mine+": the symbolic link "+filepath.Join(pub, "outsecret")+" belongs to "+owner(other)+", and in "+pub+", ")
	got, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "root's", string(got), "the file behind the link is intact")
	assert.ElementsMatch(t, []string{"outsecret", "outnull"}, names(t, pub), "nothing created")

	// The caller's own link is followed.
	require.NoError(t, WriteFile(plant("own", secret, 0), []byte("own link")))
	got, _ = os.ReadFile(secret)
	assert.Equal(t, "own link", string(got))

	// So is the directory owner's, and anyone's in a directory that is not sticky or not
	// world-writable.
	require.NoError(t, os.Chown(pub, other, other))
	require.NoError(t, WriteFile(filepath.Join(pub, "outsecret"), []byte("owner's link")))
	got, _ = os.ReadFile(secret)
	assert.Equal(t, "owner's link", string(got))
	require.NoError(t, os.Chown(pub, 0, 0))
	require.NoError(t, os.Chmod(pub, 0o777))
	require.NoError(t, WriteFile(filepath.Join(pub, "outsecret"), []byte("not sticky")))
	got, _ = os.ReadFile(secret)
	assert.Equal(t, "not sticky", string(got))
	require.NoError(t, os.Chmod(pub, 0o1775|fs.ModeSticky))
	require.NoError(t, WriteFile(filepath.Join(pub, "outsecret"), []byte("not world-writable")))
	got, _ = os.ReadFile(secret)
	assert.Equal(t, "not world-writable", string(got))
}

// TestKernelFilesystem: a file on procfs cannot be replaced; Check says so, with the reason,
// before any work (it said nothing, and the write failed with "no such file or directory").
func TestKernelFilesystem(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("procfs is Linux's")
	}
	if _, err := os.Stat("/proc/version"); err != nil {
		t.Skip("no /proc/version")
	}
	for name, err := range map[string]error{"Check": Check("/proc/version"), "WriteFile": WriteFile("/proc/version", []byte("x"))} {
		require.Error(t, err, name)
		assert.ErrorIs(t, err, fs.ErrNotExist, name)
		assert.Equal(t, "/proc/version: cannot create files in /proc: no such file or directory (procfs holds the kernel's files only, and an atomic write needs a new file beside its target)", err.Error(), name)
	}
}

// TestRemoveUnfinished: what an interrupted program calls before it exits removes the temporary
// files of the writes under way, leaves their targets as they were, and stops later writes.
// The writes register with a registry of the test's own, which stands for the process's.
func TestRemoveUnfinished(t *testing.T) {
	t.Parallel()
	temps := newTempFiles()
	o := options{temps: temps}
	dir := t.TempDir()
	old := filepath.Join(dir, "old.txt")
	require.NoError(t, os.WriteFile(old, []byte("old"), 0o644))
	var files []*File
	for _, name := range []string{old, filepath.Join(dir, "new.txt")} {
		f, err := create(name, o)
		require.NoError(t, err)
		_, err = f.Write([]byte("half"))
		require.NoError(t, err)
		files = append(files, f)
	}
	done := filepath.Join(dir, "done.txt")
	require.NoError(t, writeFile(done, []byte("done"), o)) // committed: not unfinished
	require.Len(t, names(t, dir), 4)                       // two of them temporary

	assert.Equal(t, []string{filepath.Join(dir, "new.txt"), old}, temps.removeAll()) // sorted
	assert.ElementsMatch(t, []string{"old.txt", "done.txt"}, names(t, dir), "temporary files removed")
	got, err := os.ReadFile(old)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
	_, err = create(filepath.Join(dir, "later.txt"), o)
	assert.ErrorIs(t, err, ErrInterrupted)
	assert.ElementsMatch(t, []string{"old.txt", "done.txt"}, names(t, dir))
	for _, f := range files {
		assert.Error(t, f.Commit(), "the temporary file is gone")
	}
	got, _ = os.ReadFile(old)
	assert.Equal(t, "old", string(got))
	assert.Empty(t, temps.removeAll())
}

// unfinishedMain starts a write in dir, calls RemoveUnfinished and prints what it returns, then
// tries another write; it exits 0 if that one was refused with ErrInterrupted.
func unfinishedMain(dir string) int {
	f, err := Create(filepath.Join(dir, "out.txt"))
	if err == nil {
		_, err = f.Write([]byte("half"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(RemoveUnfinished())
	if _, err := Create(filepath.Join(dir, "later.txt")); !errors.Is(err, ErrInterrupted) {
		fmt.Fprintln(os.Stderr, "a write after RemoveUnfinished:", err)
		return 1
	}
	return 0
}

// TestRemoveUnfinishedProcess: Create registers with the process's registry, which
// RemoveUnfinished empties and closes (in a process of its own, as it cannot be undone).
func TestRemoveUnfinishedProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), unfinishedEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "["+filepath.Join(dir, "out.txt")+"]\n", string(out))
	assert.Empty(t, names(t, dir), "the temporary file is removed")
}

// TestKeepsOwner: root rewriting another user's file leaves it that user's (as `fmt -w` on a
// colleague's plan must), with its mode.
func TestKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root may give a file to another user")
	}
	path := filepath.Join(t.TempDir(), "plan.dag")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o640))
	require.NoError(t, os.Chown(path, 1234, 4321))
	require.NoError(t, WriteFile(path, []byte("new")))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	st := fi.Sys().(*syscall.Stat_t)
	assert.Equal(t, [2]uint32{1234, 4321}, [2]uint32{st.Uid, st.Gid})
	assert.Equal(t, fs.FileMode(0o640), fi.Mode().Perm())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "new", string(b))
}
