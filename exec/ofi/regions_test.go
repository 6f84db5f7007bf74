//go:build linux

package ofi

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadPid returns the id of a process that has ended and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	return cmd.ProcessState.Pid()
}

func regionFile(t *testing.T, dir string, pid int, seq int, age time.Duration, now time.Time) string {
	t.Helper()
	name := "cd" + strconv.FormatInt(int64(pid), 36) + "." + strconv.Itoa(seq)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("region"), 0o600))
	require.NoError(t, os.Chtimes(filepath.Join(dir, name), now.Add(-age), now.Add(-age)))
	return name
}

func TestSweepRegions(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	dead, self := deadPid(t), os.Getpid()
	old := 2 * staleAge

	gone := regionFile(t, dir, dead, 1, old, now)
	mine := regionFile(t, dir, self, 1, old, now) // a process of this id before this one
	fresh := regionFile(t, dir, dead, 2, time.Second, now)
	alive := regionFile(t, dir, os.Getppid(), 1, old, now)
	locked := regionFile(t, dir, dead, 3, old, now)
	other := "vader_segment.vm.0.1"
	require.NoError(t, os.WriteFile(filepath.Join(dir, other), nil, 0o600))
	require.NoError(t, os.Chtimes(filepath.Join(dir, other), now.Add(-old), now.Add(-old)))
	link := "cd" + strconv.FormatInt(int64(dead), 36) + ".4"
	require.NoError(t, os.Symlink(filepath.Join(dir, other), filepath.Join(dir, link)))
	sub := "cd" + strconv.FormatInt(int64(dead), 36) + ".5"
	require.NoError(t, os.Mkdir(filepath.Join(dir, sub), 0o700))

	hold, err := holdRegion(dir, locked)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{gone, mine}, sweepRegions(dir, self, now))
	for _, kept := range []string{fresh, alive, locked, other, link, sub} {
		_, err := os.Lstat(filepath.Join(dir, kept))
		assert.NoError(t, err, kept)
	}
	assert.NoFileExists(t, filepath.Join(dir, gone))

	// The lock's owner ends: its file goes at the next sweep; so does the fresh one, once old.
	require.NoError(t, hold.Close())
	assert.ElementsMatch(t, []string{locked, fresh}, sweepRegions(dir, self, now.Add(staleAge)))
}

func TestHoldRegionMissing(t *testing.T) {
	_, err := holdRegion(t.TempDir(), "cd1.1")
	assert.Error(t, err, "a provider that names endpoints without a file")
}

func TestSweepRegionsNoDir(t *testing.T) {
	assert.Empty(t, sweepRegions(filepath.Join(t.TempDir(), "none"), os.Getpid(), time.Now()))
}
