package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// interrupt starts coredag with args in dir, waits until ready reports true (or 60 s), sends
// sig, and returns the exit code and stderr; coredag must exit within 10 s of the signal.
func interrupt(t *testing.T, dir string, env []string, sig syscall.Signal, ready func() bool, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); !ready(); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("coredag %q ended before the signal: %v\n%s", args, err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("coredag %q: not ready in 60 s\n%s", args, stderr.String())
		}
	}
	require.NoError(t, cmd.Process.Signal(sig))
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "coredag %q: %v", args, err)
		require.True(t, ee.Exited(), "coredag %q was killed by the signal: it did not handle it", args)
		return ee.ExitCode(), stderr.String()
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("coredag %q did not exit within 10 s of %v", args, sig)
	}
	return 0, ""
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestSignalStopsDot: SIGTERM or SIGINT while Graphviz's dot runs (a wrapper script whose own
// child sleeps) kills dot and its child, says what was stopped and exits 143 or 130, leaving no
// file; before, dot ran on for minutes after coredag had gone.
func TestSignalStopsDot(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see the processes left")
	}
	for _, c := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGTERM, "SIGTERM", 143}, {syscall.SIGINT, "SIGINT", 130}} {
		dir := t.TempDir()
		copyPlan(t, dir, "ring_allreduce.dag")
		pids := filepath.Join(dir, "pids")
		slow := fakeDot(t, "cat >/dev/null; sleep 60 & echo $$ $! > "+pids+".new; mv "+pids+".new "+pids+"; wait\n")
		ready := func() bool { _, err := os.Stat(pids); return err == nil }
		code, stderr := interrupt(t, dir, []string{"COREDAG_DOT=" + slow}, c.sig, ready,
			"dot", "-o", "x.svg", "ring_allreduce.dag")
		assert.Equal(t, c.code, code, stderr)
		assert.Equal(t, "coredag: dot interrupted by "+c.name+"\ncoredag: rendering SVG: Graphviz's dot was stopped (interrupted by "+c.name+")\n", stderr)
		data, err := os.ReadFile(pids)
		require.NoError(t, err)
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			require.NoError(t, err)
			gone := false
			for range 100 { // the kernel may take a moment to reap
				if gone = !alive(pid); gone {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			assert.True(t, gone, "process %d of the dot script still runs", pid)
		}
		assert.ElementsMatch(t, []string{"ring_allreduce.dag", "pids"}, entries(t, dir), "no drawing, no temporary file")
	}
}

// TestSignalMidWrite: SIGTERM while compile -o writes a large listing removes the unfinished
// temporary file, leaves the old file as it was, says so and exits 143; before, the temporary
// file stayed (500 MB in one run).
func TestSignalMidWrite(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	dir := t.TempDir()
	copyPlan(t, dir, "ring_allreduce.dag")
	out := filepath.Join(dir, "out.txt")
	require.NoError(t, os.WriteFile(out, []byte("old listing\n"), 0o644))
	// The listing's temporary file once it holds something: an empty one may be the probe with
	// which the command checks, before its work, that -o can be written, and a SIGTERM then
	// comes before any write, with nothing to report.
	writing := func() bool {
		for _, n := range entries(t, dir) {
			if fi, err := os.Stat(filepath.Join(dir, n)); strings.HasPrefix(n, ".out.txt.tmp") && err == nil && fi.Size() > 0 {
				return true
			}
		}
		return false
	}
	code, stderr := interrupt(t, dir, nil, syscall.SIGTERM, writing, "compile", "-p", "ranks=256", "-o", "out.txt", "ring_allreduce.dag")
	assert.Equal(t, 143, code, stderr)
	assert.True(t, strings.HasPrefix(stderr, "coredag: compile interrupted by SIGTERM\n"), stderr)
	// compile stops its listing and removes it, or (in the middle of its checks) is left behind
	// while coredag removes the file and exits.
	assert.Contains(t, stderr, "out.txt left as it was", stderr)
	assert.Equal(t, "old listing\n", string(readFile(t, out)))
	assert.ElementsMatch(t, []string{"ring_allreduce.dag", "out.txt"}, entries(t, dir))
}

// slowChecks is a plan of 40000 ops whose checks take minutes: rank 0 sends one buffer 20000
// times, and the race sweep keeps every send's read of it in one antichain.
const slowChecks = "plan reads\nparam ranks = 2\nparam n = 20000\nbuffer b f32[4]\nbuffer d f32[4 * n]\n" +
	"queue q to 1 - rank peer q depth 32768\n" +
	"if rank == 0 {\n  for i in 0 .. n { op s[i] = send q b }\n} else {\n  for i in 0 .. n { op r[i] = recv q d[4 * i : 4 * i + 4] }\n}\n"

// TestSignalStopsWork: SIGTERM while a command works stops the work at once and exits 143, and
// the interruption is all the command says (no verdict, no set, no predictions). Before, each
// of these looked at the signal nowhere or too late, and the grace period ended the process.
func TestSignalStopsWork(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	// a loop whose passes each call a recursive def: seconds before the evaluation budget stops it
	evaluation := "plan x\ndef f(x, y) = if x == 0 then y % 7 else f(x-1, 2*y) + f(x-1, 2*y+1)\nvar s = 0\nfor i in 0 .. 1000000 {\n  s += f(15, i)\n}\n"
	set := "collective broadcast\nplan reads.dag sizes 0.. ranks 2\n"
	for _, c := range []struct {
		name  string
		files map[string]string // written in the command's directory; "" copies the plan from plans/
		after time.Duration     // how long the command works before the signal
		args  []string
	}{
		{"elaboration", map[string]string{"x.dag": evaluation}, 300 * time.Millisecond, []string{"check", "x.dag"}},
		{"run", map[string]string{"ring_allreduce.dag": ""}, 500 * time.Millisecond, []string{"run", "--iters", "100000000", "ring_allreduce.dag"}},
		{"overlap", map[string]string{"ring_allreduce.dag": ""}, 500 * time.Millisecond, []string{"run", "--overlap", "--iters", "1000000", "ring_allreduce.dag"}},
		{"checks", map[string]string{"reads.dag": slowChecks}, 500 * time.Millisecond, []string{"check", "reads.dag"}},
		{"set check", map[string]string{"reads.dag": slowChecks, "x.set": set}, 500 * time.Millisecond, []string{"check", "x.set"}},
		{"set select", map[string]string{"reads.dag": slowChecks, "x.set": set}, 500 * time.Millisecond, []string{"select", "x.set", "--size", "64", "-p", "ranks=2"}},
		// the ring at 256 ranks op by op: seconds of simulation per size
		{"predict", map[string]string{"ring_allreduce.dag": ""}, 2 * time.Second, []string{"predict", "--model", "ops", "-p", "ranks=256", "ring_allreduce.dag"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, text := range c.files {
				if text == "" {
					copyPlan(t, dir, name)
				} else {
					require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
				}
			}
			start := time.Now()
			working := func() bool { return time.Since(start) > c.after }
			code, stderr := interrupt(t, dir, nil, syscall.SIGTERM, working, c.args...)
			assert.Equal(t, 143, code, stderr)
			assert.Equal(t, "coredag: "+c.args[0]+" interrupted by SIGTERM\n", stderr)
		})
	}
}

// TestSignalStopsExplainRaces: SIGTERM while check --explain-races searches and proves the
// fixes of a ring whose every receive races with the reduce of the step before (256 ranks:
// seconds of search) stops it and exits 143, with no fixes; before, the search ran to its end,
// and check printed its fixes after the interruption.
func TestSignalStopsExplainRaces(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	dir := t.TempDir()
	src := string(readFile(t, filepath.Join("..", "..", "testdata", "scale", "ring_allreduce.dag")))
	racy := strings.Replace(src, "tx[s], rx[s] after red[s - 1]", "tx[s] after red[s - 1]", 1)
	require.NotEqual(t, src, racy)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "racy.dag"), []byte(racy), 0o644))
	start := time.Now()
	explaining := func() bool { return time.Since(start) > 1500*time.Millisecond }
	code, stderr := interrupt(t, dir, nil, syscall.SIGTERM, explaining, "check", "--explain-races", "-p", "ranks=256", "racy.dag")
	assert.Equal(t, 143, code, stderr)
	assert.NotContains(t, stderr, "add these orderings")
	assert.True(t, strings.HasSuffix(stderr, "coredag: check interrupted by SIGTERM\n"), stderr)
}
