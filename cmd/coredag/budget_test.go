package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// capped runs the built binary as a user would, but with its address space limited to 4 GiB
// (ulimit -v) and 20 s of CPU (ulimit -t), so a regression that allocates without bound, or a
// refusal that does the work it refuses, fails the test instead of taking the machine down. The
// CPU budget holds whatever the machine's load, where the wall-clock bounds it replaces did not.
// stdin is a file name ("" for none); env adds variables. It returns the exit code and the
// combined output.
func capped(t *testing.T, stdin string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", `ulimit -v 4194304 && ulimit -t 20 && exec timeout 120 "$0" "$@"`, binary}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), env...)
	if stdin != "" {
		f, err := os.Open(stdin)
		require.NoError(t, err)
		defer f.Close()
		cmd.Stdin = f
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	require.NotEqual(t, 124, code, "coredag %q ran out of time:\n%s", args, out.String())
	// timeout passes on the signal that killed coredag: SIGXCPU or SIGKILL past 20 s of CPU.
	require.False(t, code < 0 || code > 128, "coredag %q was killed (exit %d): more than 20 s of CPU?\n%s", args, code, out.String())
	noCrash(t, out.String())
	return code, out.String()
}

// noCrash fails when Go runtime crash output reached the user.
func noCrash(t *testing.T, out string) {
	t.Helper()
	for _, s := range []string{"panic", "goroutine", "fatal error", "out of memory"} {
		assert.NotContains(t, out, s)
	}
}

// firstLine is the first line of s, cut to 400 bytes (a refused expression's source line is long).
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line[:min(len(line), 400)]
}

// writeTemp writes text into a file of the test's temporary directory.
func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

// TestRunBudgetFlags: iterations and explored runs whose records would not fit are refused up
// front with the figure (they used to panic in makeslice or die allocating), and a negative
// --explore is a usage error.
func TestRunBudgetFlags(t *testing.T) {
	t.Parallel()
	const plan = "plans/ring_allreduce.dag"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--iters", "4611686018427387904"}, "coredag: plans/ring_allreduce.dag: 4611686018427387904 iterations need more than 8 EiB for their latency samples (16 bytes each); the memory budget is "},
		{[]string{"--iters", "1099511627776"}, "coredag: plans/ring_allreduce.dag: 1099511627776 iterations need 16 TiB for their latency samples (16 bytes each); the memory budget is "},
		{[]string{"--explore", "100000000000"}, "coredag: plans/ring_allreduce.dag: --explore 100000000000 keeps a record of every run: 2.18 TiB (24 bytes each); the memory budget is "},
		{[]string{"--explore", "100000000000", "--json"}, "coredag: plans/ring_allreduce.dag: --explore 100000000000 keeps a record of every run: 12.3 TiB (135 bytes each)"},
		{[]string{"--explore=-5"}, "coredag: --explore -5: need a number of runs, at least 1"},
		{[]string{"--iters", "0"}, "coredag: --iters 0: need at least 1"},
	} {
		code, out := capped(t, "", nil, append(append([]string{"run"}, tc.args...), plan)...)
		assert.Equal(t, exitUsage, code, "%q: %s", tc.args, out)
		assert.Equal(t, tc.want, firstLine(out)[:min(len(firstLine(out)), len(tc.want))], "%q", tc.args)
		if strings.Contains(tc.want, "budget") {
			assert.Contains(t, out, "(set with --mem or COREDAG_MEM)")
		}
	}
}

// TestRunBudgetTimeline: a timeline whose records would not fit is refused before the run (it
// used to print PASS, grow to gigabytes and crash without writing the trace); one that fits is
// written, its text streamed to the file, in memory that does not grow with the iterations.
func TestRunBudgetTimeline(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "t.json")
	code, text := capped(t, "", nil, "run", "--mem", "64MiB", "--iters", "20000", "-p", "ranks=16", "--timeline", out, "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code, text)
	assert.Contains(t, firstLine(text), "the memory budget is 64 MiB (set with --mem)")
	assert.NotContains(t, text, "PASS")
	assert.NoFileExists(t, out)

	code, text = capped(t, "", nil, "run", "--iters", "20", "-p", "ranks=16", "--timeline", out, "plans/ring_allreduce.dag")
	assert.Equal(t, exitOK, code, text)
	assert.FileExists(t, out)
}

// TestRunBudgetBuffers: buffers that do not fit are refused at their declaration with the
// figure, before anything is allocated (a 1 GiB buffer passed check and then died in the Go
// runtime); check still accepts the plan.
func TestRunBudgetBuffers(t *testing.T) {
	t.Parallel()
	plan := writeTemp(t, "big.dag", "plan big\nparam ranks = 4\nbuffer a u64[1GiB]\nbuffer b u8[16]\n")
	code, out := capped(t, "", nil, "check", plan)
	assert.Equal(t, exitOK, code, out)

	code, out = capped(t, "", nil, "run", plan)
	assert.Equal(t, exitUsage, code, out)
	assert.Regexp(t, `^.*big\.dag:3:8: buffers need 64 GiB in this process \(4 ranks × 8 GiB registered with softnic, plus 32 GiB for the reference copy\); the largest, a, takes 8 GiB per rank; the memory budget is .* \(set with --mem or COREDAG_MEM\): lower the buffer sizes or the ranks param$`, firstLine(out))
	assert.Contains(t, out, "\n    buffer a u64[1GiB]\n           ^\n", "the declaration and a caret")

	code, out = capped(t, "", nil, "run", "--mem", "1GiB", "-p", "n=64MiB", "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code, out)
	assert.Equal(t, "plans/ring_allreduce.dag:25:8: buffers need 14 GiB in this process (4 ranks × 1.75 GiB registered with softnic, plus 7 GiB for the reference copy); "+
		"the largest, data, takes 1 GiB per rank; the memory budget is 1 GiB (set with --mem): lower the buffer sizes or the ranks param", firstLine(out))

	code, out = capped(t, "", nil, "run", "--mem", "1GiB", "-p", "n=4MiB", "--dump", "data", "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code, out)
	assert.Equal(t, "coredag: plans/ring_allreduce.dag: --dump of 1 buffer needs 4.88 GiB: 4 GiB for the printed values (64 bytes per element and rank) "+
		"besides 896 MiB for the run; the memory budget is 1 GiB (set with --mem): dump smaller buffers", firstLine(out))
}

// TestRunDefaultBudget: a normal run passes within the default budget (here the 4 GiB address
// space); a tiny budget refuses it with the figure, from the flag or the environment.
func TestRunDefaultBudget(t *testing.T) {
	t.Parallel()
	code, out := capped(t, "", nil, "run", "plans/ring_allreduce.dag")
	assert.Equal(t, exitOK, code, out)
	assert.True(t, strings.HasPrefix(out, "PASS plans/ring_allreduce.dag"), out)

	// The op limit the budget sets is a refusal for the budget: exit 2, as for the buffers.
	code, out = capped(t, "", nil, "run", "--mem", "4KiB", "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code, out)
	assert.Equal(t, "coredag: plans/ring_allreduce.dag:30:1: the plan has more than 2 ops over all its ranks (this loop alone makes at least 9), "+
		"and a plan takes about 2 KiB per op to check, compile and run; the memory budget is 4 KiB (set with --mem): "+
		"is a loop bound or the rank count wrong? Else lower the ranks param or the plan's size", firstLine(out))

	code, out = capped(t, "", []string{"COREDAG_MEM=1MiB"}, "run", "-p", "n=64KiB", "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code, out)
	assert.Contains(t, firstLine(out), "buffers need 14 MiB in this process (4 ranks × 1.75 MiB registered with softnic, plus 7 MiB for the reference copy)")
	assert.Contains(t, firstLine(out), "the memory budget is 1 MiB (set with COREDAG_MEM)")

	for _, bad := range []string{"lots", "0", "-5MiB"} {
		code, out = capped(t, "", nil, "run", "--mem="+bad, "plans/ring_allreduce.dag")
		assert.Equal(t, exitUsage, code, out)
		assert.Contains(t, firstLine(out), "coredag: --mem "+bad+": ")
	}
}

// TestMemFlagExtremes: --mem below one op says so, with the least --mem that holds one op
// and the loop's ops; one op's worth counts it in the singular; 0, negative, malformed and
// overflowing figures are usage errors that say what to write; the largest int64 works.
func TestMemFlagExtremes(t *testing.T) {
	t.Parallel()
	plan := "plans/ring_allreduce.dag"
	for _, tc := range []struct {
		mem  string
		code int
		want string
	}{
		{"1", exitUsage, "coredag: plans/ring_allreduce.dag:30:1: the memory budget is too small for even one op: a plan takes about 2 KiB per op to check, compile and run " +
			"(this loop alone makes at least 9); the memory budget is 1 byte (set with --mem): one op needs at least 2 KiB (--mem 2KiB), this loop's ops at least 18 KiB (--mem 18KiB)"},
		{"1KiB", exitUsage, "coredag: plans/ring_allreduce.dag:30:1: the memory budget is too small for even one op: a plan takes about 2 KiB per op to check, compile and run " +
			"(this loop alone makes at least 9); the memory budget is 1 KiB (set with --mem): one op needs at least 2 KiB (--mem 2KiB), this loop's ops at least 18 KiB (--mem 18KiB)"},
		{"2047", exitUsage, "coredag: plans/ring_allreduce.dag:30:1: the memory budget is too small for even one op: a plan takes about 2 KiB per op to check, compile and run " +
			"(this loop alone makes at least 9); the memory budget is 2 KiB (2047 bytes) (set with --mem): one op needs at least 2 KiB (--mem 2KiB), this loop's ops at least 18 KiB (--mem 18KiB)"},
		{"2KiB", exitUsage, "coredag: plans/ring_allreduce.dag:30:1: the plan has more than 1 op over all its ranks (this loop alone makes at least 9), " +
			"and a plan takes about 2 KiB per op to check, compile and run; the memory budget is 2 KiB (set with --mem): " +
			"is a loop bound or the rank count wrong? Else lower the ranks param or the plan's size"},
		{"0", exitUsage, "coredag: --mem 0: the memory budget must be positive (write a size such as 8GiB or 512MiB)"},
		{"-1", exitUsage, "coredag: --mem -1: the memory budget must be positive (write a size such as 8GiB or 512MiB)"},
		{"-1GiB", exitUsage, "coredag: --mem -1GiB: the memory budget must be positive (write a size such as 8GiB or 512MiB)"},
		{"1.5GiB", exitUsage, "coredag: --mem 1.5GiB: invalid integer literal \"1.5GiB\": unexpected '.'"},
		{"9223372036854775808", exitUsage, "coredag: --mem 9223372036854775808: integer literal 9223372036854775808 overflows a 64-bit signed integer (largest is 9223372036854775807)"},
		{"8388608TiB", exitUsage, "coredag: --mem 8388608TiB: integer literal 8388608TiB overflows a 64-bit signed integer"},
		// The largest figure is lowered to what ulimit -v leaves, with a note, and works.
		{"9223372036854775807", exitOK, "coredag: note: --mem asks for more than 8 EiB, more than the address-space limit (ulimit -v) leaves: the memory budget is "},
	} {
		code, out := capped(t, "", nil, "check", "--mem="+tc.mem, plan)
		assert.Equal(t, tc.code, code, "--mem %s: %s", tc.mem, out)
		assert.True(t, strings.HasPrefix(out, tc.want), "--mem %s: %s", tc.mem, firstLine(out))
	}
	// The environment variable is refused alike, and its hint names it.
	code, out := capped(t, "", []string{"COREDAG_MEM=100"}, "check", plan)
	assert.Equal(t, exitUsage, code, out)
	assert.Contains(t, firstLine(out), "the memory budget is 100 bytes (set with COREDAG_MEM): one op needs at least 2 KiB (COREDAG_MEM=2KiB), this loop's ops at least 18 KiB (COREDAG_MEM=18KiB)")
}

// TestMemOneTotal: a plan's ops, queues and `after` edges count against --mem together: any
// two of them fit here, all three used to pass as well (each was checked against the whole
// budget alone), and are now refused at what tips the total over, with what the rest holds.
func TestMemOneTotal(t *testing.T) {
	t.Parallel()
	const (
		queues = "for p in 0 .. ranks {\n  for k in 0 .. 50 { queue link[p, k] to p peer link[rank, k] }\n}\n"
		ops    = "for j in 0 .. 40 { op a[j] = nop }\nfor j in 0 .. 35 { op b[j] = nop }\n"
		edges  = "for i in 0 .. 35 {\n  for j in 0 .. 40 { b[i] after a[j] }\n}\n"
	)
	two := writeTemp(t, "two.dag", "plan two\nparam ranks = 4\n"+queues+ops)
	code, out := capped(t, "", nil, "check", "--mem", "1MiB", two)
	assert.Equal(t, exitOK, code, out)

	all := writeTemp(t, "all.dag", "plan all\nparam ranks = 4\n"+queues+ops+edges)
	code, out = capped(t, "", nil, "check", "--mem", "1MiB", all)
	assert.Equal(t, exitUsage, code, out)
	line, _, _ := strings.Cut(out, "\n") // longer than firstLine's 400 bytes
	assert.Equal(t, "coredag: "+all+":4:28: the plan's queues need 321 KiB (642 of 512 bytes each) besides 450 KiB for its ops (225 of 2 KiB each), "+
		"109 KiB for its `after` edges (5600 of 20 bytes each) and 144 KiB for its `after` references (2048 of 72 bytes each): 1 MiB (1048960 bytes) in all; "+
		"the memory budget is 1 MiB (set with --mem): lower the ranks param or the plan's size", line)
}

// TestInputSizeLimit: files, devices and stdin are read up to 16 MiB; past that the command
// stops with exit 2 instead of reading forever.
func TestInputSizeLimit(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"check", "/dev/zero"}, "coredag: /dev/zero: larger than 16 MiB: a plan file may be at most 16 MiB"},
		{"/dev/zero", []string{"check", "-"}, "coredag: <stdin>: larger than 16 MiB: a plan file may be at most 16 MiB"},
		{"", []string{"fmt", "/dev/urandom"}, "coredag: /dev/urandom: larger than 16 MiB: a plan file may be at most 16 MiB"},
		{"/dev/zero", []string{"fmt"}, "coredag: <stdin>: larger than 16 MiB"},
		{"/dev/zero", []string{"run", "-"}, "coredag: <stdin>: larger than 16 MiB"},
	} {
		code, out := capped(t, tc.stdin, nil, tc.args...)
		assert.Equal(t, exitUsage, code, "%q: %s", tc.args, out)
		assert.True(t, strings.HasPrefix(out, tc.want), "%q: %s", tc.args, firstLine(out))
	}
	// A set's plan files are read with the same bound.
	set := writeTemp(t, "zero.set", "collective allreduce\nplan /dev/zero sizes 0.. ranks 1..\n")
	for _, args := range [][]string{{"check", set}, {"select", set, "--size", "1KiB", "-p", "ranks=2"}} {
		code, out := capped(t, "", nil, args...)
		assert.Equal(t, exitFail, code, "%q: %s", args, out)
		assert.Contains(t, firstLine(out), "plan /dev/zero at ranks=1: /dev/zero: larger than 16 MiB", "%q", args)
	}
	// Exactly 16 MiB is read (and then parsed: here, refused for its tokens).
	big := writeTemp(t, "big.dag", "plan p\n"+strings.Repeat("#", 16<<20-8)+"\n")
	code, out := capped(t, "", nil, "check", big)
	assert.Equal(t, exitOK, code, firstLine(out))
}

// TestPlanSizeFailsFast: a loop to 10**9 and a 2^20-term expression fail before the work they
// ask for (within capped's CPU budget, which enumerating the loop would exceed many times over),
// positioned and in the language's words.
func TestPlanSizeFailsFast(t *testing.T) {
	t.Parallel()
	loop := writeTemp(t, "loop.dag", "plan p\nfor j in 0 .. 10**9 { op x[j] = nop }\n")
	code, out := capped(t, loop, nil, "check", "-")
	assert.Equal(t, exitUsage, code, out) // the budget of ulimit -v 4 GiB sets the op limit
	assert.Regexp(t, `^coredag: <stdin>:2:1: the plan has more than \d+ ops over all its ranks \(this loop alone makes at least 1000000000\), and `, firstLine(out))

	expr := writeTemp(t, "expr.dag", "plan p\nlet a = "+strings.Repeat("1+", 1<<20)+"1\n")
	code, out = capped(t, expr, nil, "check", "-")
	assert.Equal(t, exitFail, code, firstLine(out))
	assert.Equal(t, "<stdin>:2:1: expression too long: more than 16384 operators in one statement; split it with let", firstLine(out))
	assert.NotContains(t, out, "GBinary")
}
