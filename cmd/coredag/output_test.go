package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOutputThroughPlantedLink: another user's link in a sticky world-writable directory
// (pub/out.x -> a root-owned mode-600 file) is refused by every output flag, before the work,
// and the file behind it is left as it was; the kernel's fs.protected_symlinks would not help,
// since coredag follows the links itself. Giving the link another owner needs root.
func TestOutputThroughPlantedLink(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("giving a link another owner needs root")
	}
	dir := t.TempDir()
	copyPlan(t, dir, "ring_allreduce.dag")
	xml, err := filepath.Abs("../../testdata/msccl/ring_allreduce_4.xml")
	require.NoError(t, err)
	secret := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("root's secret"), 0o600))
	pub := filepath.Join(dir, "pub")
	require.NoError(t, os.Mkdir(pub, 0o755))
	require.NoError(t, os.Chmod(pub, 0o777|fs.ModeSticky))
	for _, args := range [][]string{
		{"dot", "-o", "pub/out.dot", "ring_allreduce.dag"},
		{"compile", "-o", "pub/out.txt", "ring_allreduce.dag"},
		{"import", "msccl", "-o", "pub/out.dag", xml},
		{"run", "--timeline", "pub/out.json", "ring_allreduce.dag"},
	} {
		link := args[len(args)-2]
		require.NoError(t, os.Symlink(secret, filepath.Join(dir, link)))
		require.NoError(t, os.Lchown(filepath.Join(dir, link), 65534, 65534))
		code, stdout, stderr := invocation{dir: dir}.run(t, args...)
		assert.Equal(t, exitUsage, code, "%q: %s", args, stdout)
		assert.Regexp(t, `^coredag: (-o|--timeline) `+link+`: is a symbolic link of (nobody \()?uid 65534\)?, and in pub, a sticky world-writable directory, only your own links and those of its owner \((root \()?uid 0\)?\) are followed \(the rule of the kernel's fs.protected_symlinks\)\n$`, stderr, "%q", args)
		assert.Equal(t, "root's secret", string(readFile(t, secret)), "%q", args)
	}
	assert.ElementsMatch(t, []string{"out.dot", "out.txt", "out.dag", "out.json"}, entries(t, pub))
}

// TestOutputOnKernelFS: an output on procfs is refused with the reason before the work (it
// said "no such file or directory" once the work was done).
func TestOutputOnKernelFS(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/version"); err != nil {
		t.Skip("no /proc/version")
	}
	const reason = "/proc/version: cannot create files in /proc: no such file or directory (procfs holds the kernel's files only, and an atomic write needs a new file beside its target)\n"
	for _, args := range [][]string{
		{"compile", "-o", "/proc/version", "plans/ring_allreduce.dag"},
		{"import", "msccl", "-o", "/proc/version", "testdata/msccl/ring_allreduce_4.xml"},
	} {
		code, stdout, stderr := coredag(t, "", args...)
		assert.Equal(t, exitUsage, code, "%q", args)
		assert.Empty(t, stdout, "%q", args)
		assert.Equal(t, "coredag: -o "+reason, stderr, "%q", args)
	}
}
