package atomicfile

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// directEnv makes helperMain write past small direct-write thresholds.
const directEnv = "ATOMICFILE_TEST_DIRECT"

// directWorks reports whether files in dir can be switched to direct writes (tmpfs cannot).
func directWorks(t *testing.T, dir string) bool {
	f, err := os.CreateTemp(dir, "probe")
	require.NoError(t, err)
	defer os.Remove(f.Name())
	defer f.Close()
	return setDirect(f, true) == nil
}

// pattern is n bytes that differ from chunk to chunk, so a chunk written twice or out of place
// shows.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/4093)
	}
	return b
}

// TestLargeFileWrittenDirectly: past the threshold, writes of any size (a byte, odd pieces, one
// larger than a chunk) reach the file byte for byte, through the direct writer where the
// filesystem allows it; the tail after the last whole chunk too.
func TestLargeFileWrittenDirectly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "big.lst")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o640))
	data := pattern(200<<10 + 123)
	w, err := create(path, options{directAfter: 16 << 10, chunkSize: 8 << 10})
	require.NoError(t, err)
	defer w.Abort()
	rest := data
	for _, n := range []int{1, 999, 16<<10 - 1000, 3, 5000, 50 << 10, 4096, 7} {
		_, err := w.Write(rest[:n])
		require.NoError(t, err)
		rest = rest[n:]
	}
	if directWorks(t, dir) {
		assert.NotNil(t, w.d, "past %d bytes the writes are direct", w.o.directAfter)
	} else {
		t.Logf("%s cannot do direct I/O: the writes go through the cache", dir)
		assert.True(t, w.noDirect)
	}
	n, err := w.Write(rest)
	require.NoError(t, err)
	assert.Equal(t, len(rest), n)
	require.NoError(t, w.Commit())
	assert.Nil(t, w.d, "the direct writer is finished")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, got), "content: %d bytes written, %d read", len(data), len(got))
	assert.Equal(t, os.FileMode(0o640), mode(t, path).Perm())
	assert.Equal(t, []string{"big.lst"}, names(t, dir))
}

// TestLargeFileAbort: an Abort while chunks are being written directly leaves the old content
// and no temporary file.
func TestLargeFileAbort(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "big.lst")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	w, err := create(path, options{directAfter: 8 << 10, chunkSize: 4 << 10})
	require.NoError(t, err)
	_, err = w.Write(pattern(100 << 10))
	require.NoError(t, err)
	require.NoError(t, w.Abort())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got))
	assert.Equal(t, []string{"big.lst"}, names(t, dir))
}

// TestLargeFileSizeLimit: a direct write that reaches `ulimit -f` fails with EFBIG, as a cached
// one does, and the target keeps its old content.
func TestLargeFileSizeLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if !directWorks(t, dir) {
		t.Skipf("%s cannot do direct I/O (TestFileSizeLimit covers cached writes)", dir)
	}
	f := filepath.Join(dir, "big.lst")
	require.NoError(t, os.WriteFile(f, []byte("old\n"), 0o644))
	// 200 blocks (of 512 or 1024 bytes) is past the 16 KiB of cached writes and short of 1 MiB.
	cmd := exec.Command("sh", "-c", `ulimit -f 200 && exec "$0"`, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+f, directEnv+"=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, 3, ee.ExitCode(), "EFBIG, not a signal: %v\n%s", ee, out)
	assert.Equal(t, "write "+f+": file too large\n", string(out), "the error names the target")
	got, err := os.ReadFile(f)
	require.NoError(t, err)
	assert.Equal(t, "old\n", string(got))
	assert.Equal(t, []string{"big.lst"}, names(t, dir), "no temporary file left")
}

// TestOptionsDefaults: Create's writes go direct past 8 MiB, in chunks of 4 MiB, and register
// with the process's registry; a test's own figures are kept.
func TestOptionsDefaults(t *testing.T) {
	t.Parallel()
	assert.Equal(t, options{directAfter: 8 << 20, chunkSize: 4 << 20, temps: unfinished}, options{}.withDefaults())
	temps := newTempFiles()
	o := options{directAfter: 1, chunkSize: 2, temps: temps}
	assert.Equal(t, o, o.withDefaults())
	w, err := Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	defer w.Abort()
	assert.Equal(t, options{}.withDefaults(), w.o)
}
