package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/e2e"
)

// binary is the coredag command built once for the tests that run it as a user would.
var binary string

// binaryTags are the build tags binary is built with: the tags of the test, for the tests of
// providers behind one (set by an init of a tagged test file).
var binaryTags string

func TestMain(m *testing.M) {
	dir, temp, err := binaryDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binary = filepath.Join(dir, "coredag")
	if out, err := exec.Command("go", "build", "-tags", binaryTags, "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building coredag: %v\n%s", err, out)
		os.Exit(2)
	}
	code := m.Run()
	if temp {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// binaryDir returns the directory to build the binary in: one kept in the user's cache, named
// after this package's directory and binaryTags, where go build finds last run's binary and
// links again only if a source changed (linking took 3 s of CPU, before any test could start);
// or a temporary one (temp true) when there is no user cache.
func binaryDir() (dir string, temp bool, err error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", false, err
	}
	if cache, err := os.UserCacheDir(); err == nil {
		sum := sha256.Sum256([]byte(wd + "\x00" + binaryTags))
		dir := filepath.Join(cache, "coredag-test", fmt.Sprintf("%x", sum[:8]))
		if err := os.MkdirAll(dir, 0o700); err == nil {
			return dir, false, nil
		}
	}
	dir, err = os.MkdirTemp("", "coredag-test")
	return dir, true, err
}

// endToEnd marks a slow end-to-end test (the limits of files, memory and layouts, signals): it
// runs under CI (CI set, as .ci/run does) or with COREDAG_E2E=1, and is skipped by a plain
// `go test ./...`, which stays quick for a contributor.
func endToEnd(t *testing.T) {
	t.Helper()
	if !e2e.Enabled() {
		t.Skip("end-to-end: runs under CI, or with COREDAG_E2E=1")
	}
}

// coredag runs the built binary from the repository root and returns its exit code and output.
// Every run is bounded: a hang is a test failure, not a stuck CI.
func coredag(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return coredagEnv(t, nil, stdin, args...)
}

// coredagEnv is coredag with env ("NAME=value" entries) added to the test's environment.
func coredagEnv(t *testing.T, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runBounded(t, exec.Command(binary, args...), env, stdin)
}

// repoRoot is the repository root seen from this package's directory, where the tests run.
var repoRoot = filepath.Join("..", "..")

// coredagIn runs coredag's run in this process and returns its exit code and output: for the
// tests that run many small commands (the error files, the docs examples, the asserts of the
// plans), where starting a process for each cost most of their time. Under CI or with
// COREDAG_E2E=1 it runs the built binary instead, so that the same cases also go through the
// process (its exit code, a panic on any goroutine). Either way the command runs in this
// package's directory, not the repository root: give paths under repoRoot, and expect them in
// the output. A run still going after 2 minutes, or a panic, fails the test.
func coredagIn(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if e2e.Enabled() {
		cmd := exec.Command(binary, args...)
		cmd.Dir = "."
		return runBounded(t, cmd, nil, stdin)
	}
	type result struct {
		code         int
		out, errb    bytes.Buffer
		panic, stack any
	}
	done := make(chan *result, 1)
	go func() {
		r := &result{code: -1}
		defer func() {
			if p := recover(); p != nil {
				r.panic, r.stack = p, string(debug.Stack())
			}
			done <- r
		}()
		r.code = run(args, bytes.NewBufferString(stdin), &r.out, &r.errb)
	}()
	select {
	case r := <-done:
		if r.panic != nil {
			t.Fatalf("coredag %q panicked: %v\n%s", args, r.panic, r.stack)
		}
		return r.code, r.out.String(), r.errb.String()
	case <-time.After(2 * time.Minute):
		t.Fatalf("coredag %q did not finish in 2 minutes", args)
	}
	return
}

// runBounded runs cmd from the repository root with env added to the test's environment, and
// returns its exit code and output; a command still running after 2 minutes fails the test.
func runBounded(t *testing.T, cmd *exec.Cmd, env []string, stdin string) (code int, stdout, stderr string) {
	t.Helper()
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if cmd.Dir == "" {
		cmd.Dir = repoRoot
	}
	cmd.Stdin = bytes.NewBufferString(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("%q did not finish in 2 minutes", cmd.Args)
	}
	return code, out.String(), errb.String()
}

func plansFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join("..", "..", "plans", "*.dag"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 8, "the plan library has at least eight plans")
	for i, f := range files {
		files[i], _ = filepath.Rel(filepath.Join("..", ".."), f)
	}
	return files
}

// TestPlansCheck: every plan in plans/ is accepted for ranks 2, 3, 4 and 8, except that a plan
// needing a power of two refuses 3 with a positioned error saying so.
// Every plan of the library checks at 2, 3, 4 and 8 ranks (the power-of-two plans refuse 3 with
// their assert), without a warning: the plans shown to newcomers are written as an expert would.
func TestPlansCheck(t *testing.T) {
	t.Parallel()
	files := plansFiles(t)
	for _, ranks := range []int{2, 3, 4, 8} {
		code, stdout, stderr := coredag(t, "", append([]string{"check", "-p", fmt.Sprintf("ranks=%d", ranks)}, files...)...)
		refused := 0
		for _, f := range files {
			if ranks == 3 && regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(f)+`:\d+:\d+: .*power of two`).MatchString(stderr) {
				refused++
				continue
			}
			assert.Contains(t, stdout, f+": ok", "ranks=%d:\n%s", ranks, stderr)
		}
		assert.NotContains(t, stderr, "warning:", "ranks=%d", ranks)
		if refused == 0 {
			assert.Equal(t, exitOK, code, "ranks=%d:\n%s", ranks, stderr)
		}
	}
}

func TestCheckExitCodesAndJSON(t *testing.T) {
	t.Parallel()
	code, _, stderr := coredag(t, "")
	assert.Equal(t, exitUsage, code, stderr)

	code, _, stderr = coredag(t, "", "check", "no/such/file.dag")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "no such file")

	code, _, stderr = coredag(t, "", "check", "-p", "ranks", "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "want NAME=VALUE")

	bad := "plan p\nparam ranks = 2\nbuffer b u8[4]\nop c = copy b[0:2] to b[1:5]\n"
	code, _, stderr = coredag(t, bad, "check", "-")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "<stdin>:4:27: slice b[1:5] ends past the end of b (4 elements)")
	assert.Contains(t, stderr, "\n    op c = copy b[0:2] to b[1:5]\n                              ^\n", "source line and caret")

	code, stdout, _ := coredag(t, bad, "check", "--json", "-")
	assert.Equal(t, exitFail, code)
	var reports []checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &reports), stdout)
	require.Len(t, reports, 1)
	assert.False(t, reports[0].OK)
	require.Len(t, reports[0].Diagnostics, 1)
	assert.Equal(t, diag.JSON{Code: diag.Shape, File: "<stdin>", Line: 4, Col: 27, Message: "slice b[1:5] ends past the end of b (4 elements)"}, reports[0].Diagnostics[0])

	code, stdout, _ = coredag(t, "", "check", "-p", "ranks=0x8", "-p", "n=1KiB", "plans/ring_allreduce.dag")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "8 ranks")

	code, stdout, _ = coredag(t, "", "--version")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "coredag ")
}

func TestFmt(t *testing.T) {
	t.Parallel()
	messy := "plan   x\nparam ranks=2 # c\nbuffer b u8[4]\nop a=copy b[0:2] to b[2:4]\n"
	tidy := "plan x\nparam ranks = 2 # c\nbuffer b u8[4]\nop a = copy b[0:2] to b[2:4]\n"
	code, stdout, _ := coredag(t, messy, "fmt")
	assert.Equal(t, exitOK, code)
	assert.Equal(t, tidy, stdout)

	dir := t.TempDir()
	f, clean := filepath.Join(dir, "messy.dag"), filepath.Join(dir, "sub", "tidy.dag")
	require.NoError(t, os.WriteFile(f, []byte(messy), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Dir(clean), 0o755))
	require.NoError(t, os.WriteFile(clean, []byte(tidy), 0o644))

	code, stdout, _ = coredag(t, "", "fmt", "-l", dir)
	assert.Equal(t, exitOK, code)
	assert.Equal(t, f+"\n", stdout, "-l lists only the file that would change")

	code, stdout, _ = coredag(t, "", "fmt", "-d", f)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "-op a=copy b[0:2] to b[2:4]\n+op a = copy b[0:2] to b[2:4]\n")

	code, _, _ = coredag(t, "", "fmt", "-w", dir)
	assert.Equal(t, exitOK, code)
	got, err := os.ReadFile(f)
	require.NoError(t, err)
	assert.Equal(t, tidy, string(got))

	broken := filepath.Join(dir, "broken.dag")
	require.NoError(t, os.WriteFile(broken, []byte("plan p\nop a = = nop\n"), 0o644))
	code, _, stderr := coredag(t, "", "fmt", "-w", broken)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "broken.dag:2:")
	got, err = os.ReadFile(broken)
	require.NoError(t, err)
	assert.Equal(t, "plan p\nop a = = nop\n", string(got), "a file with syntax errors is left as it was")
}

// TestFmtRefusesMSCCL: fmt formats .dag plans; an MSCCL-IR .xml algorithm, which the other
// commands read as a plan, gets one usage error naming import msccl, not a screen of .dag
// syntax errors, and no file of the command line is written.
func TestFmtRefusesMSCCL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	xml, messy := filepath.Join(dir, "ring.xml"), filepath.Join(dir, "messy.dag")
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "msccl", "ring_allreduce_4.xml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(xml, src, 0o644))
	require.NoError(t, os.WriteFile(messy, []byte("plan   x\n"), 0o644))
	want := "coredag: fmt formats .dag plans, and " + xml + " is an MSCCL-IR .xml algorithm: to get a formatted .dag plan from it, run coredag import msccl " + xml + " -o " + filepath.Join(dir, "ring.dag") + "\n"
	for _, args := range [][]string{{"fmt", xml}, {"fmt", "-w", messy, xml}, {"fmt", "-l", xml}} {
		code, stdout, stderr := coredag(t, "", args...)
		assert.Equal(t, exitUsage, code, "%v", args)
		assert.Empty(t, stdout, "%v", args)
		assert.Equal(t, want, stderr, "%v", args)
	}
	got, err := os.ReadFile(messy)
	require.NoError(t, err)
	assert.Equal(t, "plan   x\n", string(got), "fmt refused its command line: nothing is written")

	// The command it names gives a plan fmt leaves as it is; a directory's .xml files are not
	// plans to format.
	plan := filepath.Join(dir, "ring.dag")
	code, _, stderr := coredag(t, "", "import", "msccl", xml, "-o", plan)
	require.Equal(t, exitOK, code, stderr)
	require.NoError(t, os.Remove(messy))
	code, stdout, stderr := coredag(t, "", "fmt", "-l", plan, dir)
	assert.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stdout)
}

func TestCheckExplainRaces(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "scale", "ring_allreduce.dag")) // one receive slot
	require.NoError(t, err)
	racy := bytes.Replace(src, []byte("tx[s], rx[s] after red[s - 1]"), []byte("tx[s] after red[s - 1]"), 1)
	require.NotEqual(t, src, racy)

	code, _, stderr := coredag(t, string(racy), "check", "-")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "race on rank")
	assert.NotContains(t, stderr, "to make the plan race-free")

	code, _, stderr = coredag(t, string(racy), "check", "--explain-races", "-")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "to make the plan race-free")
	assert.Contains(t, stderr, "rx[1] after red[0]   # on ranks 0-3")

	code, stdout, _ := coredag(t, string(racy), "check", "--explain-races", "--json", "-")
	assert.Equal(t, exitFail, code)
	var reports []checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &reports))
	assert.Contains(t, reports[0].Fixes, jsonFix{Op: "rx[1]", After: "red[0]", Ranks: []int{0, 1, 2, 3}})

	// The credit of a segmented ring waits for the read of its slot (issue 30: the hint was a
	// loop of waits around the ring).
	code, _, stderr = coredag(t, "", "check", "--explain-races", "testdata/fixes/seg_ring_credits.dag")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "(add `crd_tx[0] after red[0]` on every rank)")
	assert.Contains(t, stderr, "add these orderings (as `after` clauses or dependency statements; checked: they leave no deadlock):\n  crd_tx[0] after red[0]   # on ranks 0-3\n")

	// Writes from two ranks that no message orders: no edge, said plainly.
	code, _, stderr = coredag(t, `plan p
param ranks = 3
buffer d u64[4] remote_write
buffer e u64[4]
if rank == 0 {
  for p in 1 .. ranks { queue inq[p] to p peer up }
} else {
  queue up to 0 peer inq[rank]
  op w = write up e to d
}
`, "check", "--explain-races", "-")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, "<stdin>: no single `after` edge fixes these races (see their diagnostics):\n  <stdin>:9:24: race on rank 0's d between write w on rank 1 and write w on rank 2\n")
	assert.NotContains(t, stderr, "add these orderings")
	code, stdout, _ = coredag(t, "plan p\nparam ranks = 3\nbuffer d u64[4] remote_write\nbuffer e u64[4]\nif rank == 0 {\n  for p in 1 .. ranks { queue inq[p] to p peer up }\n} else {\n  queue up to 0 peer inq[rank]\n  op w = write up e to d\n}\n", "check", "--explain-races", "--json", "-")
	assert.Equal(t, exitFail, code)
	reports = nil
	require.NoError(t, json.Unmarshal([]byte(stdout), &reports))
	assert.Empty(t, reports[0].Fixes)
	assert.Equal(t, []string{"<stdin>:9:24: race on rank 0's d between write w on rank 1 and write w on rank 2"}, reports[0].Unfixed)
}

func TestCheckManyFiles(t *testing.T) {
	t.Parallel()
	// An unreadable file does not stop the others from being checked; it makes the exit 2.
	code, stdout, stderr := coredag(t, "", "check", "plans/ring_allreduce.dag", "no/such.dag", "plans/pipeline_chain.dag")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "no/such.dag")
	assert.Contains(t, stdout, "plans/ring_allreduce.dag: ok")
	assert.Contains(t, stdout, "plans/pipeline_chain.dag: ok")

	code, stdout, _ = coredag(t, "", "check", "--json", "plans/ring_allreduce.dag", "no/such.dag")
	assert.Equal(t, exitUsage, code)
	var reports []checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &reports), stdout)
	require.Len(t, reports, 2)
	assert.True(t, reports[0].OK)
	assert.False(t, reports[1].OK)

	code, stdout, _ = coredag(t, "plan p\nop a = nop\n", "check", "-")
	assert.Equal(t, exitOK, code)
	assert.Equal(t, "<stdin>: ok (plan p, 1 rank, 1 op)\n", stdout)
}

func TestCompileJSONDiagnostics(t *testing.T) {
	t.Parallel()
	bad := "plan p\nparam ranks = 2\nbuffer b u8[4]\nop c = copy b[0:2] to b[1:5]\n"
	code, stdout, _ := coredag(t, bad, "compile", "--format", "json", "-")
	assert.Equal(t, exitFail, code)
	var r checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &r), stdout)
	require.Len(t, r.Diagnostics, 1)
	assert.Equal(t, 4, r.Diagnostics[0].Line)
}

// requireWellFormedXML fails the test unless data (an SVG) parses as XML to its end.
func requireWellFormedXML(t *testing.T, data []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			return
		}
		require.NoError(t, err, "not well-formed XML")
	}
}

// --cpuprofile and --memprofile write pprof profiles (gzipped protocol buffers) of the command;
// a profile that cannot be written is refused before the command runs.
func TestProfiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	code, _, stderr := coredag(t, "", "check", "--cpuprofile", cpu, "--memprofile", mem, "-p", "ranks=16", "plans/ring_allreduce.dag")
	require.Equal(t, 0, code, stderr)
	for _, p := range []string{cpu, mem} {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Greater(t, len(b), 2)
		assert.Equal(t, []byte{0x1f, 0x8b}, b[:2], "%s is not gzipped", p)
	}
	code, stdout, stderr := coredag(t, "", "check", "--cpuprofile", filepath.Join(dir, "no", "cpu.prof"), "plans/ring_allreduce.dag")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout, "the command must not run")
	assert.Contains(t, stderr, "does not exist")
}

// TestCommandPanic: a panic of a command is a bug, reported as one: exit 3, the panic's value
// and stack, instead of Go's crash (whose exit code, 2, reads as a usage error).
func TestCommandPanic(t *testing.T) {
	err, intr := runInterruptible(func(context.Context) error { panic("boom") })
	require.Nil(t, intr)
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, exitBug, ee.code)
	assert.Contains(t, ee.err.Error(), "internal error: boom\nThis is a bug in coredag; please report it")
	assert.Contains(t, ee.err.Error(), "TestCommandPanic")
}
