//go:build linux

package ofi

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counted is a measurement that returns c and counts its calls.
func counted(c float64, ok bool, calls *atomic.Int32) func() (float64, bool) {
	return func() (float64, bool) { calls.Add(1); return c, ok }
}

// TestSharedCMACostOnce: of processes (here goroutines, each with its own open file, as flock
// sees separate processes) that start together, one measures and the others read its figure,
// and so does a later one; a record of another boot is measured again.
func TestSharedCMACostOnce(t *testing.T) {
	dir := t.TempDir()
	var calls atomic.Int32
	var wg sync.WaitGroup
	got := make([]float64, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, ok := sharedCMACost(dir, "boot-a", time.Second, counted(1.83, true, &calls))
			assert.True(t, ok)
			got[i] = c
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 1, calls.Load(), "one measures")
	for _, c := range got {
		assert.InDelta(t, 1.83, c, 1e-9)
	}
	c, ok := sharedCMACost(dir, "boot-a", time.Second, counted(3.5, true, &calls))
	assert.True(t, ok)
	assert.InDelta(t, 1.83, c, 1e-9, "a later process reads the record")
	assert.EqualValues(t, 1, calls.Load())

	c, ok = sharedCMACost(dir, "boot-b", time.Second, counted(3.5, true, &calls))
	assert.True(t, ok)
	assert.InDelta(t, 3.5, c, 1e-9, "another boot measures again")
	assert.EqualValues(t, 2, calls.Load())
	b, err := os.ReadFile(cmaRecordPath(dir))
	require.NoError(t, err)
	assert.Equal(t, "boot-b 3.5\n", string(b))
	fi, err := os.Stat(cmaRecordPath(dir))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// TestSharedCMACostUnusable: a record that does not parse is measured again and rewritten;
// a failed measurement is not recorded; without a boot id, through a link (symbolic or hard),
// in a file others may write, or with the lock held past its bound, the process measures on
// its own and leaves the file as it was.
func TestSharedCMACostUnusable(t *testing.T) {
	for _, junk := range []string{"", "boot-a\n", "boot-a x\n", "boot-a -1\n", "boot-a 1.5", "boot-a 1.5\nmore\n", "boot-a NaN\n", "boot-a 1e300\n"} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(cmaRecordPath(dir), []byte(junk), 0o600))
		var calls atomic.Int32
		c, ok := sharedCMACost(dir, "boot-a", time.Second, counted(2.25, true, &calls))
		assert.True(t, ok)
		assert.InDelta(t, 2.25, c, 1e-9, "%q", junk)
		assert.EqualValues(t, 1, calls.Load(), "%q", junk)
		b, _ := os.ReadFile(cmaRecordPath(dir))
		assert.Equal(t, "boot-a 2.25\n", string(b), "%q is rewritten", junk)
	}

	dir := t.TempDir()
	var calls atomic.Int32
	_, ok := sharedCMACost(dir, "boot-a", time.Second, counted(0, false, &calls))
	assert.False(t, ok)
	b, _ := os.ReadFile(cmaRecordPath(dir))
	assert.Empty(t, b, "a failed measurement is not recorded")

	_, _ = sharedCMACost(dir, "", time.Second, counted(1.5, true, &calls))
	_, _ = sharedCMACost(dir, "a b", time.Second, counted(1.5, true, &calls))
	b, _ = os.ReadFile(cmaRecordPath(dir))
	assert.Empty(t, b, "no boot id: nothing recorded")

	// The figure is recorded exactly: a reader decides as the process that measured it did,
	// even next to the limit (with three decimals 2.5004 was read back as 2.5).
	exact := t.TempDir()
	c, _ := sharedCMACost(exact, "boot-a", time.Second, counted(2.5004, true, &calls))
	r, _ := sharedCMACost(exact, "boot-a", time.Second, counted(1, true, &calls))
	assert.Equal(t, c, r)

	// A hard link to another file of the user's, or a record others may write, is not used.
	hard := t.TempDir()
	other := filepath.Join(hard, "other")
	require.NoError(t, os.WriteFile(other, []byte("keep"), 0o600))
	require.NoError(t, os.Link(other, cmaRecordPath(hard)))
	c, _ = sharedCMACost(hard, "boot-a", time.Second, counted(2, true, &calls))
	assert.InDelta(t, 2, c, 1e-9)
	b, _ = os.ReadFile(other)
	assert.Equal(t, "keep", string(b), "a hard link is not written through")
	open := t.TempDir()
	require.NoError(t, os.WriteFile(cmaRecordPath(open), []byte("boot-a 9\n"), 0o600))
	require.NoError(t, os.Chmod(cmaRecordPath(open), 0o622))
	c, _ = sharedCMACost(open, "boot-a", time.Second, counted(2, true, &calls))
	assert.InDelta(t, 2, c, 1e-9, "a record others may write is not read")
	b, _ = os.ReadFile(cmaRecordPath(open))
	assert.Equal(t, "boot-a 9\n", string(b), "nor written")

	link := t.TempDir()
	target := filepath.Join(link, "target")
	require.NoError(t, os.WriteFile(target, []byte("keep"), 0o600))
	require.NoError(t, os.Symlink(target, cmaRecordPath(link)))
	c, ok = sharedCMACost(link, "boot-a", time.Second, counted(1.5, true, &calls))
	assert.True(t, ok)
	assert.InDelta(t, 1.5, c, 1e-9)
	b, _ = os.ReadFile(target)
	assert.Equal(t, "keep", string(b), "a link is not followed")

	held := t.TempDir()
	f, err := os.OpenFile(cmaRecordPath(held), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	t0 := time.Now()
	c, ok = sharedCMACost(held, "boot-a", 20*time.Millisecond, counted(1.7, true, &calls))
	assert.True(t, ok)
	assert.InDelta(t, 1.7, c, 1e-9)
	assert.Less(t, time.Since(t0), 10*time.Second)
	b, _ = os.ReadFile(cmaRecordPath(held))
	assert.Empty(t, b, "a process locked out records nothing")
}
