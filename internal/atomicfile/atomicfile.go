// Package atomicfile writes files so that a failed or interrupted write never leaves a torn or
// truncated file behind.
//
// Guarantees, for a target that is a regular file or does not exist yet:
//
//   - The data goes to a new temporary file in the target's directory, which is synced to disk,
//     given the old file's permission bits (a new file gets 0666 less the umask, as os.Create
//     gives it), and renamed over the target; then the directory is synced.
//   - Until that rename, the target is untouched: a write error (a full disk, EFBIG under
//     `ulimit -f`), a failed sync or an Abort removes the temporary file and leaves the old
//     content byte for byte. The Go runtime catches SIGXFSZ, so a write past RLIMIT_FSIZE returns
//     EFBIG instead of killing the process with its temporary file in place.
//   - A reader that opens the target while it is being written sees the old file or the new one,
//     complete, never a mix.
//   - A symbolic link is followed: the file it resolves to is replaced and the link stays a link.
//     But in a sticky world-writable directory (/tmp), a link that belongs neither to the caller
//     nor to the directory's owner is refused, as the kernel's fs.protected_symlinks refuses it:
//     the links are followed here, so the kernel's setting would not protect the caller from a
//     link another user planted to a file only the caller may write.
//     A file with several hard links is replaced under the one name only (the other names keep
//     the old content), as with any editor that writes by renaming.
//   - A target that is not a regular file (a character device such as /dev/null or /dev/stdout,
//     a FIFO) cannot be replaced: it is opened and written directly, with none of the above.
//   - A regular file the caller may not write (mode 0444 for a non-root user) is refused as
//     os.WriteFile would refuse it, even though the directory would allow the rename.
//
// A file larger than a few MiB is written mostly around the page cache (O_DIRECT, see direct.go):
// a listing of a gigabyte then costs the kernel no copy and Commit's sync no long wait.
//
// The old file's owner and group are carried over where the writer may set them (root may;
// another user keeps a group it belongs to); extended attributes and ACLs are not: the new file
// has the directory's defaults.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
)

// TargetError says why a path cannot be written, before anything is written.
type TargetError struct {
	Path   string // the path as given
	Reason string // e.g. "directory out does not exist"
	Err    error  // the underlying error, for errors.Is (fs.ErrNotExist, syscall.EISDIR, ...)
}

func (e *TargetError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}
func (e *TargetError) Unwrap() error { return e.Err }

// target is where a write to a path goes.
type target struct {
	path   string      // the path as given (for messages; direct writes open it)
	real   string      // the file to rename over, symbolic links resolved (rename mode)
	direct bool        // not a regular file: write through path itself
	exists bool        // real exists (rename mode)
	perm   fs.FileMode // real's permission bits, when it exists
	info   fs.FileInfo // real's Lstat, when it exists (its owner)
}

// maxLinks bounds how many symbolic links resolve follows, as the kernel does.
const maxLinks = 40

// resolve finds where a write to path goes, following symbolic links as the kernel would with
// fs.protected_symlinks set (see protectedLink), whatever the system's setting.
func resolve(path string) (*target, error) {
	if path == "" {
		return nil, &TargetError{Path: path, Reason: "empty file name", Err: fs.ErrInvalid}
	}
	// Find the name to rename over, link by link, so that a dangling link still leads to the
	// file it names, and a link that another user planted in a shared directory is not followed.
	p := path
	for range maxLinks {
		dir, err := directory(path, filepath.Dir(p))
		if err != nil {
			return nil, err
		}
		p = filepath.Join(dir, filepath.Base(p))
		li, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return &target{path: path, real: p}, nil
		}
		if err != nil {
			return nil, err
		}
		switch m := li.Mode(); {
		case m.IsRegular():
			return &target{path: path, real: p, exists: true, perm: m.Perm(), info: li}, nil
		case m.IsDir():
			return nil, &TargetError{Path: path, Reason: "is a directory", Err: syscall.EISDIR}
		case m&fs.ModeSymlink == 0: // a device, a FIFO, a socket: written in place
			return &target{path: path, direct: true}, nil
		}
		if err := protectedLink(path, p, dir, li); err != nil {
			return nil, err
		}
		if onProcFS(dir) { // a magic link (/proc/self/fd/1): only the kernel knows where it leads
			return &target{path: path, direct: true}, nil
		}
		link, err := os.Readlink(p)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(dir, link) // dir has no links left, so ".." in link is safe to clean
		}
		p = link
	}
	return nil, &fs.PathError{Op: "open", Path: path, Err: syscall.ELOOP}
}

// directory resolves dir, the directory a write to path goes to, to a path without symbolic
// links; it must exist and be a directory.
func directory(path, dir string) (string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err == nil {
		var info fs.FileInfo
		if info, err = os.Stat(real); err == nil && !info.IsDir() {
			err = syscall.ENOTDIR
		}
	}
	switch {
	case err == nil:
		return real, nil
	case errors.Is(err, fs.ErrNotExist):
		return "", &TargetError{Path: path, Reason: fmt.Sprintf("directory %s does not exist", dir), Err: err}
	case errors.Is(err, syscall.ENOTDIR):
		return "", &TargetError{Path: path, Reason: fmt.Sprintf("%s is not a directory", dir), Err: err}
	}
	return "", err
}

// Check reports whether path can be written, without writing anything: its directory exists,
// path is not a directory, and the caller may write the file (or create one in the directory).
// Commands call it before their work, so that a bad output path is reported first.
func Check(path string) error {
	t, err := resolve(path)
	if err != nil {
		return err
	}
	if err := t.writable(); err != nil || t.direct {
		return err
	}
	// Permissions are not all: a filesystem may refuse new files (procfs, sysfs), which only
	// creating one finds out.
	f, err := t.createTemp()
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// writable checks permissions the kernel would not check itself when renaming over the target.
func (t *target) writable() error {
	switch {
	case t.direct:
		return accessible(t.path, "", t.path)
	case t.exists:
		if err := accessible(t.real, "", t.path); err != nil {
			return err
		}
	}
	return accessible(filepath.Dir(t.real), "cannot create files in "+filepath.Dir(t.real), t.path)
}

// File is a write in progress: the data written goes to a temporary file until Commit renames it
// over the target (or, for a target that is not a regular file, straight to the target).
type File struct {
	t    *target
	f    *os.File
	tmp  string // the temporary file's name ("" for a direct write)
	err  error  // the first write error
	done bool   // committed or aborted

	n        int64   // bytes written
	d        *direct // the direct writer, past o.directAfter bytes (see direct.go)
	noDirect bool    // direct writes were tried and cannot be done
	o        options // with the defaults filled in
}

// options are the settings of one write. The zero value is what Create and WriteFile use; tests
// pass others.
type options struct {
	directAfter int64      // bytes written through the cache before direct writes (see direct.go)
	chunkSize   int        // bytes per direct write
	temps       *tempFiles // where the temporary file is registered: nil is the process's, unfinished
}

// withDefaults returns o with its zero fields set to the defaults.
func (o options) withDefaults() options {
	if o.directAfter <= 0 {
		o.directAfter = defaultDirectAfter
	}
	if o.chunkSize <= 0 {
		o.chunkSize = defaultChunkSize
	}
	if o.temps == nil {
		o.temps = unfinished
	}
	return o
}

// Create starts a write to path. The caller writes the data and then calls Commit, or Abort to
// leave the target as it was; deferring Abort is safe, it does nothing after Commit.
func Create(path string) (*File, error) {
	return create(path, options{})
}

func create(path string, o options) (*File, error) {
	o = o.withDefaults()
	t, err := resolve(path)
	if err != nil {
		return nil, err
	}
	if err := t.writable(); err != nil {
		return nil, err
	}
	if t.direct {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return nil, err
		}
		return &File{t: t, f: f, o: o}, nil
	}
	f, err := t.createTemp()
	if err != nil {
		return nil, err
	}
	if !o.temps.add(f.Name(), path) {
		f.Close()
		os.Remove(f.Name())
		return nil, &TargetError{Path: path, Reason: "not written: the program is being interrupted", Err: ErrInterrupted}
	}
	if t.exists {
		keepOwner(f, t.info) // before Chmod: a change of owner clears set-id bits
		if err := f.Chmod(t.perm); err != nil {
			f.Close()
			o.temps.remove(f.Name())
			os.Remove(f.Name())
			return nil, asTarget(err, path)
		}
	}
	return &File{t: t, f: f, tmp: f.Name(), o: o}, nil
}

// ErrInterrupted is the error of a Create after RemoveUnfinished.
var ErrInterrupted = errors.New("interrupted")

// unfinished are the temporary files of the writes in progress in the process, for
// RemoveUnfinished.
var unfinished = newTempFiles()

// tempFiles is a registry of the temporary files of writes in progress.
type tempFiles struct {
	mu     sync.Mutex
	names  map[string]string // temporary file -> the path given to Create
	closed bool              // RemoveUnfinished was called: no more writes
}

func newTempFiles() *tempFiles { return &tempFiles{names: map[string]string{}} }

func (t *tempFiles) add(tmp, path string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.names[tmp] = path
	}
	return !t.closed
}

func (t *tempFiles) remove(tmp string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.names, tmp)
}

// RemoveUnfinished removes the temporary files of every write in progress in the process, whose
// targets are thus left as they were, and makes every later Create fail with ErrInterrupted. A
// program that is interrupted by a signal calls it just before it exits, when its writes may still
// be under way in other goroutines: it returns the paths whose writes it removed, sorted. (A
// write that commits meanwhile either renames its file first, and its target is complete, or
// finds it gone, and its target is as it was.)
func RemoveUnfinished() []string {
	return unfinished.removeAll()
}

// removeAll removes the temporary files registered, refuses later ones, and returns the paths
// whose files it removed, sorted.
func (t *tempFiles) removeAll() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	var paths []string
	for tmp, path := range t.names {
		if os.Remove(tmp) == nil {
			paths = append(paths, path)
		}
		delete(t.names, tmp)
	}
	slices.Sort(paths)
	return paths
}

// createTemp creates a new file beside the target, named after it. A new target's mode comes
// from the umask, as with os.Create; an existing one's is set by the caller, and until then only
// the owner can read the file.
func (t *target) createTemp() (*os.File, error) {
	f, err := createTemp(t.real, t.exists)
	if err == nil {
		return f, nil
	}
	dir := filepath.Dir(t.real)
	reason := "cannot create files in " + dir
	var pe *fs.PathError
	if errors.As(err, &pe) {
		reason += ": " + pe.Err.Error()
	}
	if kfs := kernelFS(dir); kfs != "" {
		reason += fmt.Sprintf(" (%s holds the kernel's files only, and an atomic write needs a new file beside its target)", kfs)
	}
	return nil, &TargetError{Path: t.path, Reason: reason, Err: err}
}

func createTemp(real string, exists bool) (*os.File, error) {
	dir, base := filepath.Split(real)
	if len(base) > 200 { // leave room for the suffix in a 255-byte name
		base = base[:200]
	}
	perm := fs.FileMode(0o666)
	if exists {
		perm = 0o600
	}
	for range 10000 {
		name := filepath.Join(dir, "."+base+".tmp"+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, &fs.PathError{Op: "create", Path: real, Err: fs.ErrExist}
}

// Write writes to the temporary file (or the direct target). After an error every later Write
// fails with the same error, and Commit returns it.
func (f *File) Write(p []byte) (int, error) {
	if f.done {
		return 0, fs.ErrClosed
	}
	if f.err != nil {
		return 0, f.err
	}
	written := 0
	for len(p) > 0 && f.err == nil {
		q := p
		if after := f.o.directAfter; f.d == nil && !f.noDirect && f.tmp != "" { // cached writes, until after bytes
			if f.n == after {
				f.d = startDirect(f.f, f.o.chunkSize)
				f.noDirect = f.d == nil
			} else if f.n < after && int64(len(q)) > after-f.n {
				q = q[:after-f.n] // up to the aligned offset where direct writes begin
			}
		}
		var n int
		var err error
		if f.d != nil {
			n, err = f.d.write(q)
		} else {
			n, err = f.f.Write(q)
		}
		written += n
		f.n += int64(n)
		p = p[n:]
		if err != nil {
			f.err = asTarget(err, f.t.path)
		}
	}
	return written, f.err
}

// endDirect ends direct writes, if they began; with keep, it writes what they hold.
func (f *File) endDirect(keep bool) {
	if f.d == nil {
		return
	}
	if err := f.d.finish(keep); err != nil && f.err == nil {
		f.err = asTarget(err, f.t.path)
	}
	f.d = nil
}

// Name returns the path given to Create.
func (f *File) Name() string { return f.t.path }

// Commit finishes the write: it syncs the temporary file, renames it over the target and syncs
// the directory. If anything fails before the rename, the temporary file is removed, the target
// is left as it was and the error is returned. A direct write is just closed.
func (f *File) Commit() error {
	if f.done {
		return fs.ErrClosed
	}
	f.endDirect(true)
	if f.err != nil {
		f.Abort()
		return f.err
	}
	if f.tmp == "" {
		f.done = true
		return asTarget(f.f.Close(), f.t.path)
	}
	if err := f.f.Sync(); err != nil {
		f.Abort()
		return asTarget(err, f.t.path)
	}
	f.done = true
	defer f.o.temps.remove(f.tmp)
	if err := f.f.Close(); err != nil {
		os.Remove(f.tmp)
		return asTarget(err, f.t.path)
	}
	if err := os.Rename(f.tmp, f.t.real); err != nil {
		os.Remove(f.tmp)
		return asTarget(err, f.t.path)
	}
	return syncDir(filepath.Dir(f.t.real), f.t.path)
}

// Abort ends the write without touching the target and removes the temporary file. It does
// nothing after Commit or an earlier Abort. (A direct write has already reached the target.)
func (f *File) Abort() error {
	if f.done {
		return nil
	}
	f.endDirect(false)
	f.done = true
	err := f.f.Close()
	if f.tmp != "" {
		if rerr := os.Remove(f.tmp); rerr != nil {
			err = rerr
		}
		f.o.temps.remove(f.tmp)
	}
	return err
}

// WriteFile writes data to path as Create, Write and Commit do: the target holds either its old
// content or data, whatever happens.
func WriteFile(path string, data []byte) error {
	return writeFile(path, data, options{})
}

func writeFile(path string, data []byte, o options) error {
	f, err := create(path, o)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// syncDir makes a rename in dir durable. Filesystems that cannot sync a directory say EINVAL,
// which is not an error here.
func syncDir(dir, path string) error {
	d, err := os.Open(dir)
	if err != nil {
		return asTarget(err, path)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("%s written, but syncing its directory failed: %w", path, err)
	}
	return nil
}

// asTarget makes an error about the temporary file name the target instead, which is what the
// user asked to write.
func asTarget(err error, path string) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return &fs.PathError{Op: pe.Op, Path: path, Err: pe.Err}
	case errors.As(err, &le):
		return &fs.PathError{Op: le.Op, Path: path, Err: le.Err}
	}
	return err
}
