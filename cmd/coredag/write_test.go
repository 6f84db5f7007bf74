package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/predict"
)

// The tests of this file run coredag in a directory of their own, where they check what it
// writes and what it leaves.

// invocation is one run of the built coredag.
type invocation struct {
	dir    string // working directory
	stdin  []byte
	limit  int  // with limit > 0, run under `ulimit -f limit` (blocks of sh's unit: 512 or 1024 bytes)
	nobody bool // as root, run as user nobody (root may write anywhere)
	bin    string
}

func (in invocation) run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := binary
	if in.bin != "" {
		bin = in.bin
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	if in.limit > 0 {
		cmd = exec.CommandContext(ctx, "sh", append([]string{"-c", fmt.Sprintf(`ulimit -f %d && exec "$0" "$@"`, in.limit), bin}, args...)...)
	}
	if in.nobody && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		// go-graphviz caches its compiled module under $TMPDIR at start; root's cache in /tmp
		// is closed to other users.
		tmp := filepath.Join(t.TempDir(), "tmp")
		require.NoError(t, os.Mkdir(tmp, 0o777))
		require.NoError(t, os.Chmod(tmp, 0o777))
		require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
		require.NoError(t, os.Chmod(filepath.Dir(filepath.Dir(tmp)), 0o755))
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	}
	cmd.Dir = in.dir
	cmd.Stdin = bytes.NewReader(in.stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "coredag %q did not finish in 2 minutes", args)
	if ee, ok := err.(*exec.ExitError); ok {
		require.True(t, ee.Exited(), "coredag %q: %v", args, ee) // not killed by a signal (SIGXFSZ)
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, out.String(), errb.String()
}

// entries lists the names in dir: a failed write must leave no temporary file.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// copyPlan copies plans/NAME into dir as name and returns its content.
func copyPlan(t *testing.T, dir, name string) []byte {
	t.Helper()
	src := readFile(t, filepath.Join("..", "..", "plans", name))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), src, 0o644))
	return src
}

// bigMessyPlan is a valid plan of ops ops, none formatted as coredag fmt would.
func bigMessyPlan(ops int) []byte {
	var b bytes.Buffer
	b.WriteString("plan   big\nparam ranks=2\nbuffer b u8[64]\n")
	for i := range ops {
		fmt.Fprintf(&b, "op    a%d=copy   b[0:8]  to b[8:16]", i)
		if i > 0 {
			fmt.Fprintf(&b, "   after a%d", i-1)
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

// TestFmtWriteFileSizeLimit: `ulimit -f 100; coredag fmt -w big.dag` on a plan whose formatted
// text passes the limit fails with a message and leaves the plan byte for byte, with no
// temporary file beside it. Without the limit the same command formats it and keeps its mode.
func TestFmtWriteFileSizeLimit(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	dir := t.TempDir()
	src := bigMessyPlan(4000)
	f := filepath.Join(dir, "big.dag")
	require.NoError(t, os.WriteFile(f, src, 0o600))
	require.NoError(t, os.Chmod(f, 0o640))
	code, tidy, stderr := invocation{dir: dir}.run(t, "fmt", "big.dag")
	require.Equal(t, exitOK, code, stderr)
	require.Greater(t, len(tidy), 100*1024, "the formatted plan passes the limit in either unit")
	require.NotEqual(t, string(src), tidy)

	code, stdout, stderr := invocation{dir: dir, limit: 100}.run(t, "fmt", "-w", "big.dag")
	assert.Equal(t, exitFail, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "coredag: fmt -w: write big.dag: file too large (big.dag left as it was)\n", stderr)
	assert.True(t, bytes.Equal(src, readFile(t, f)), "big.dag changed")
	assert.Equal(t, []string{"big.dag"}, entries(t, dir))

	code, _, stderr = invocation{dir: dir}.run(t, "fmt", "-w", "big.dag")
	assert.Equal(t, exitOK, code, stderr)
	assert.True(t, tidy == string(readFile(t, f)), "big.dag formatted")
	info, err := os.Stat(f)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o640), info.Mode(), "the plan keeps its mode")
	assert.Equal(t, []string{"big.dag"}, entries(t, dir))
}

// TestOutputFileSizeLimit: compile -o, dot -o and run --timeline over an existing file, under a
// file size limit their output passes: exit 1, a message, the old file as it was.
func TestOutputFileSizeLimit(t *testing.T) {
	t.Parallel()
	const limit = 4 // blocks: 2 or 4 KiB
	for _, c := range []struct {
		name, out string
		args      []string
		stderr    string
	}{
		{"compile", "out.txt", []string{"compile", "-p", "ranks=8", "-o", "out.txt", "ring_allreduce.dag"},
			"coredag: writing the listing: write out.txt: file too large (out.txt left as it was)\n"},
		{"dot", "out.dot", []string{"dot", "-p", "ranks=8", "-o", "out.dot", "ring_allreduce.dag"},
			"coredag: writing the drawing: write out.dot: file too large (out.dot left as it was)\n"},
		{"timeline", "t.json", []string{"run", "--timeline", "t.json", "--iters", "5", "ring_allreduce.dag"},
			"ring_allreduce.dag: --timeline: write t.json: file too large (t.json left as it was)\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyPlan(t, dir, "ring_allreduce.dag")
			out := filepath.Join(dir, c.out)
			code, _, stderr := invocation{dir: dir}.run(t, c.args...)
			require.Equal(t, exitOK, code, stderr)
			require.Greater(t, len(readFile(t, out)), limit*1024, "the output passes the limit")

			old := []byte("old output\n")
			require.NoError(t, os.WriteFile(out, old, 0o644))
			code, stdout, stderr := invocation{dir: dir, limit: limit}.run(t, c.args...)
			assert.Equal(t, exitFail, code)
			assert.Equal(t, c.stderr, stderr)
			if c.name == "timeline" {
				assert.Contains(t, stdout, "PASS ring_allreduce.dag", "the run's report comes first")
			}
			assert.Equal(t, old, readFile(t, out))
			assert.ElementsMatch(t, []string{"ring_allreduce.dag", c.out}, entries(t, dir))
		})
	}
}

// TestOutputIsInput: an output that is the command's input, by name, through a symbolic or a
// hard link, or as the file on stdin, is refused before anything runs: exit 2, plan untouched.
func TestOutputIsInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := copyPlan(t, dir, "ring_allreduce.dag")
	plan := filepath.Join(dir, "ring_allreduce.dag")
	require.NoError(t, os.Symlink("ring_allreduce.dag", filepath.Join(dir, "sym.dag")))
	require.NoError(t, os.Link(plan, filepath.Join(dir, "hard.dag")))
	fig := predict.Default().Encode()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fig.json"), fig, 0o644))
	f, err := os.Open(plan)
	require.NoError(t, err)
	defer f.Close()
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"compile", "-o", "ring_allreduce.dag", "ring_allreduce.dag"}, "coredag: -o ring_allreduce.dag: is the same file as the input, ring_allreduce.dag\n"},
		{[]string{"compile", "-o", "sym.dag", "ring_allreduce.dag"}, "coredag: -o sym.dag: is the same file as the input, ring_allreduce.dag\n"},
		{[]string{"compile", "-o", "ring_allreduce.dag", "sym.dag"}, "coredag: -o ring_allreduce.dag: is the same file as the input, sym.dag\n"},
		{[]string{"compile", "-o", "hard.dag", "ring_allreduce.dag"}, "coredag: -o hard.dag: is the same file as the input, ring_allreduce.dag\n"},
		{[]string{"dot", "-o", "x.dot", "x.dot"}, "coredag: -o x.dot: is the same file as the input, x.dot\n"},
		{[]string{"run", "--timeline", "sym.dag", "ring_allreduce.dag"}, "coredag: --timeline sym.dag: is the same file as the input, ring_allreduce.dag\n"},
		{[]string{"run", "--on-hang", "x.dot", "x.dot"}, "coredag: --on-hang x.dot: is the same file as the input, x.dot\n"},
		{[]string{"run", "--on-hang", "h.svg", "--timeline", "./h.svg", "ring_allreduce.dag"}, "coredag: --on-hang and --timeline both write ./h.svg\n"},
		{[]string{"check", "--cpuprofile", "x.dot", "ring_allreduce.dag"}, "coredag: --cpuprofile x.dot: the file exists and is not a profile: give the profile a file name of its own\n"},
		{[]string{"check", "--memprofile", "sym.dag", "ring_allreduce.dag"}, "coredag: --memprofile sym.dag: the file exists and is not a profile: give the profile a file name of its own\n"},
		{[]string{"export", "goal", "--params", "fig.json", "-o", "fig.json", "ring_allreduce.dag"}, "coredag: -o fig.json: is the same file as the input, fig.json\n"},
		{[]string{"tune", "--params", "fig.json", "-o", "fig.json", "ring_allreduce.dag"}, "coredag: -o fig.json: is the same file as the input, fig.json\n"},
	} {
		x := filepath.Join(dir, "x.dot")
		require.NoError(t, os.WriteFile(x, src, 0o644)) // a plan under a drawing's name
		code, stdout, stderr := invocation{dir: dir}.run(t, c.args...)
		assert.Equal(t, exitUsage, code, "%q", c.args)
		assert.Empty(t, stdout, "%q", c.args)
		assert.Equal(t, c.stderr, stderr, "%q", c.args)
		assert.Equal(t, src, readFile(t, plan))
		assert.Equal(t, src, readFile(t, x))
		assert.Equal(t, fig, readFile(t, filepath.Join(dir, "fig.json")))
	}
	cmd := exec.Command(binary, "compile", "-o", "hard.dag", "-")
	cmd.Dir, cmd.Stdin = dir, f
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, exitUsage, ee.ExitCode())
	assert.Equal(t, "coredag: -o hard.dag: is the same file as the input, the standard input\n", string(out))
	assert.Equal(t, src, readFile(t, plan))
	assert.ElementsMatch(t, []string{"ring_allreduce.dag", "sym.dag", "hard.dag", "x.dot", "fig.json"}, entries(t, dir))
}

// TestOutputPathErrors: an output path that cannot be written is a usage error, found before
// the work (run prints no report).
func TestOutputPathErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyPlan(t, dir, "ring_allreduce.dag")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"compile", "-o", "nodir/x.txt", "ring_allreduce.dag"}, "coredag: -o nodir/x.txt: directory nodir does not exist\n"},
		{[]string{"compile", "-o", ".", "ring_allreduce.dag"}, "coredag: -o .: is a directory\n"},
		{[]string{"compile", "-o", "file/x.txt", "ring_allreduce.dag"}, "coredag: -o file/x.txt: file is not a directory\n"},
		{[]string{"dot", "-o", "nodir/x.svg", "ring_allreduce.dag"}, "coredag: -o nodir/x.svg: directory nodir does not exist\n"},
		{[]string{"run", "--timeline", "nodir/t.json", "ring_allreduce.dag"}, "coredag: --timeline nodir/t.json: directory nodir does not exist\n"},
		{[]string{"run", "--on-hang", "nodir/h.svg", "ring_allreduce.dag"}, "coredag: --on-hang nodir/h.svg: directory nodir does not exist\n"},
	} {
		code, stdout, stderr := invocation{dir: dir}.run(t, c.args...)
		assert.Equal(t, exitUsage, code, "%q", c.args)
		assert.Empty(t, stdout, "%q", c.args)
		assert.Equal(t, c.stderr, stderr, "%q", c.args)
	}
	assert.ElementsMatch(t, []string{"ring_allreduce.dag", "file"}, entries(t, dir))
}

// TestOutputNotRegular: a device is written directly, never replaced; a symbolic link is
// followed and stays a link.
func TestOutputNotRegular(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyPlan(t, dir, "ring_allreduce.dag")
	code, stdout, stderr := invocation{dir: dir}.run(t, "compile", "-o", "/dev/null", "ring_allreduce.dag")
	assert.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stdout)
	assert.Empty(t, stderr)
	info, err := os.Lstat("/dev/null")
	require.NoError(t, err)
	assert.Equal(t, fs.ModeDevice|fs.ModeCharDevice, info.Mode().Type(), "/dev/null is still a character device")

	// /dev/stdout leads (through /proc) to the pipe coredag's stdout is.
	code, listing, stderr := invocation{dir: dir}.run(t, "compile", "ring_allreduce.dag")
	require.Equal(t, exitOK, code, stderr)
	code, stdout, stderr = invocation{dir: dir}.run(t, "compile", "-o", "/dev/stdout", "ring_allreduce.dag")
	assert.Equal(t, exitOK, code, stderr)
	assert.Equal(t, listing, stdout)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "real.txt"), []byte("old"), 0o644))
	require.NoError(t, os.Symlink("real.txt", filepath.Join(dir, "link.txt")))
	code, _, stderr = invocation{dir: dir}.run(t, "compile", "-o", "link.txt", "ring_allreduce.dag")
	assert.Equal(t, exitOK, code, stderr)
	assert.Equal(t, listing, string(readFile(t, filepath.Join(dir, "real.txt"))))
	info, err = os.Lstat(filepath.Join(dir, "link.txt"))
	require.NoError(t, err)
	assert.Equal(t, fs.ModeSymlink, info.Mode().Type(), "the link stays a link")
	assert.ElementsMatch(t, []string{"ring_allreduce.dag", "real.txt", "link.txt"}, entries(t, dir))
}

// TestFmtStdin: `fmt -` formats stdin to stdout; -w and -l have no file to write or name.
func TestFmtStdin(t *testing.T) {
	t.Parallel()
	messy := "plan   x\nparam ranks=2 # c\nbuffer b u8[4]\nop a=copy b[0:2] to b[2:4]\n"
	tidy := "plan x\nparam ranks = 2 # c\nbuffer b u8[4]\nop a = copy b[0:2] to b[2:4]\n"
	dir := t.TempDir()
	in := invocation{dir: dir, stdin: []byte(messy)}
	code, stdout, stderr := in.run(t, "fmt", "-")
	assert.Equal(t, exitOK, code, stderr)
	assert.Equal(t, tidy, stdout)

	code, stdout, _ = in.run(t, "fmt", "-d", "-")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "-op a=copy b[0:2] to b[2:4]\n+op a = copy b[0:2] to b[2:4]\n")

	for _, args := range [][]string{{"fmt", "-w", "-"}, {"fmt", "-l", "-"}} {
		code, stdout, stderr = in.run(t, args...)
		assert.Equal(t, exitUsage, code, "%q", args)
		assert.Empty(t, stdout)
		assert.Equal(t, "coredag: fmt: - (stdin) goes to stdout: it takes neither -w nor -l\n", stderr)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.dag"), []byte(messy), 0o644))
	code, _, stderr = in.run(t, "fmt", "-", "a.dag")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "coredag: fmt: - (stdin) must be the only path\n", stderr)
	assert.Equal(t, []string{"a.dag"}, entries(t, dir), "no file named -")
}

// TestTimelineReadOnlyDirectory: --timeline into a directory coredag may not write is refused
// before the run (exit 2, no report) and leaves the old trace. Root may write anywhere, so as
// root coredag runs as user nobody.
func TestTimelineReadOnlyDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "coredag") // the built binary may sit in a directory only root can enter
	// A link where it can be: a copy's descriptor, open for writing while a parallel test forks,
	// made the exec fail with "text file busy".
	if os.Link(binary, bin) != nil {
		require.NoError(t, os.WriteFile(bin, readFile(t, binary), 0o755))
	}
	copyPlan(t, dir, "ring_allreduce.dag")
	ro := filepath.Join(dir, "ro")
	require.NoError(t, os.Mkdir(ro, 0o755))
	old := []byte("old trace\n")
	require.NoError(t, os.WriteFile(filepath.Join(ro, "t.json"), old, 0o644))
	require.NoError(t, os.Chmod(filepath.Join(ro, "t.json"), 0o666))
	require.NoError(t, os.Chmod(ro, 0o555))
	defer os.Chmod(ro, 0o755)

	code, stdout, stderr := invocation{dir: dir, nobody: true, bin: bin}.run(t, "run", "--timeline", "ro/t.json", "ring_allreduce.dag")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout, "refused before the run")
	assert.Equal(t, "coredag: --timeline ro/t.json: cannot create files in ro: permission denied\n", stderr)
	assert.Equal(t, old, readFile(t, filepath.Join(ro, "t.json")))
	assert.Equal(t, []string{"t.json"}, entries(t, ro))
	assert.False(t, strings.Contains(stderr, ".tmp"))
}

// TestWriteHangViewReplaces: the --on-hang drawing replaces its file by renaming a new one over
// it (a hard link to the old file keeps the old drawing, which a write in place would have
// changed), and a missing directory is an error that creates nothing.
func TestWriteHangViewReplaces(t *testing.T) {
	t.Parallel()
	plan, h := hangPoll(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "hang.dot")
	require.NoError(t, os.WriteFile(out, []byte("old drawing\n"), 0o644))
	require.NoError(t, os.Link(out, filepath.Join(dir, "old.dot")))
	require.NoError(t, writeHangView(out, plan, h))
	assert.Contains(t, string(readFile(t, out)), "digraph")
	assert.Equal(t, "old drawing\n", string(readFile(t, filepath.Join(dir, "old.dot"))))
	assert.ElementsMatch(t, []string{"hang.dot", "old.dot"}, entries(t, dir))

	missing := filepath.Join(dir, "nodir", "hang.dot")
	err := writeHangView(missing, plan, h)
	require.Error(t, err)
	assert.Equal(t, missing+": directory "+filepath.Join(dir, "nodir")+" does not exist", err.Error())
	assert.ElementsMatch(t, []string{"hang.dot", "old.dot"}, entries(t, dir))
}

// TestCompileOutputKeptOnlyIfChecked: compile -o writes its listing while the race search and
// the proof still run; a plan that then fails them, or a bad --rank, leaves the old file as it
// was and no temporary file beside it.
func TestCompileOutputKeptOnlyIfChecked(t *testing.T) {
	t.Parallel()
	racy := "plan p\nbuffer a i32[1024]\nfor i in 0 .. 256 { op x[i] = copy a[i:i+1] to a[512+i:513+i] }\n" +
		"op y = copy a[512:513] to a[0:1]\n"
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"race", []string{"compile", "-o", "out.txt", "racy.dag"}, exitFail, "race on rank 0's a"},
		{"rank", []string{"compile", "-o", "out.txt", "--rank", "9", "racy.dag"}, exitFail, "race on rank 0's a"},
		{"bad rank", []string{"compile", "-o", "out.txt", "--rank", "9", "-p", "ranks=4", "ring_allreduce.dag"}, exitUsage, "--rank 9: plan ring_allreduce has ranks 0..3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			copyPlan(t, dir, "ring_allreduce.dag")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "racy.dag"), []byte(racy), 0o644))
			out := filepath.Join(dir, "out.txt")
			old := []byte("old output\n")
			require.NoError(t, os.WriteFile(out, old, 0o644))
			code, _, stderr := invocation{dir: dir}.run(t, c.args...)
			assert.Equal(t, c.code, code, stderr)
			assert.Contains(t, stderr, c.msg)
			assert.Equal(t, old, readFile(t, out))
			assert.ElementsMatch(t, []string{"ring_allreduce.dag", "racy.dag", "out.txt"}, entries(t, dir))
		})
	}
}
