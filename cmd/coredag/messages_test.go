package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/exec"
)

// TestInitCheckedWhole: check proves an init on every element of a large buffer, so the element
// that fails is a diagnostic of check; what it cannot prove within its budget it says in a note,
// and then `run --json` reports the failure with its position.
func TestInitCheckedWhole(t *testing.T) {
	t.Parallel()
	failsLate := "plan big\nbuffer a u8[8MiB] init 1 / (i - 5000000)\nop n = nop\n"
	code, _, stderr := coredag(t, failsLate, "check", "-")
	assert.Equal(t, exitFail, code, stderr)
	assert.Contains(t, stderr, "<stdin>:2:26: division by zero in 1 / 0 in the init of buffer a at element 5000000\n")

	if testing.Short() {
		t.Skip("evaluates 12M init elements")
	}
	endToEnd(t) // check runs out of its budget, then run evaluates all 8M elements: seconds of CPU
	// A divisor that range analysis cannot tell from zero: check evaluates it element by element
	// until its budget runs out, then says what it left.
	unproven := "plan big\nbuffer a u8[8MiB] init 1 / ((i % 7) + (i % 7 == 0) * (i < 8000000))\nop n = nop\n"
	code, stdout, _ := coredag(t, unproven, "check", "--json", "-")
	assert.Equal(t, exitOK, code)
	var reports []checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &reports), stdout)
	require.Len(t, reports[0].Notes, 1)
	n := reports[0].Notes[0]
	assert.Equal(t, []any{"<stdin>", 2, 24}, []any{n.File, n.Line, n.Col})
	assert.Regexp(t, `^the init of buffer a is checked only in part: from element \d+ on rank 0, \d+ elements are left to run time`, n.Message)

	code, stdout, _ = coredag(t, unproven, "run", "--json", "-")
	assert.Equal(t, exitFail, code)
	var r checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &r), stdout)
	require.Len(t, r.Diagnostics, 1)
	assert.Equal(t, diag.JSON{Code: diag.Expr, File: "<stdin>", Line: 2, Col: 26,
		Message: "division by zero in 1 / 0 in the init of buffer a at element 8000006 on rank 0"}, r.Diagnostics[0])
}

// TestDiagnosticsJSONPositions: every diagnostic in JSON carries its position, whatever form
// the error took on its way (a list, one diagnostic, an op's runtime fault).
func TestDiagnosticsJSONPositions(t *testing.T) {
	t.Parallel()
	at := diag.At("p.dag", 3, 4)
	for _, err := range []error{
		diag.List{{Code: diag.Name, Pos: at, Msg: "boom"}},
		&diag.Diagnostic{Code: diag.Name, Pos: at, Msg: "boom"},
		fmt.Errorf("reference: %w", &diag.Diagnostic{Code: diag.Name, Pos: at, Msg: "boom"}),
	} {
		assert.Equal(t, []diag.JSON{{Code: diag.Name, File: "p.dag", Line: 3, Col: 4, Message: "boom"}}, diagnosticsJSON(err), "%T", err)
	}
	op := &exec.OpError{Op: "w", Rank: 1, Queue: "q", Pos: at, Err: errors.New("remote access error")}
	assert.Equal(t, []diag.JSON{{Code: diag.Fault, File: "p.dag", Line: 3, Col: 4, Message: "op w on rank 1, queue q: remote access error"}}, diagnosticsJSON(op))
}

// TestNoTerminalEscapes: neither a plan's text nor a file name reaches the terminal raw: an
// error on a line whose comment holds an OSC sequence, and a file name with a colour sequence.
func TestNoTerminalEscapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plan := "plan p\nparam ranks = 2\nop a = nop after zz   # \x1b]0;pwned\x07\n"
	path := filepath.Join(dir, "x\x1b[31m.dag")
	require.NoError(t, os.WriteFile(path, []byte(plan), 0o644))
	for _, args := range [][]string{{"check", path}, {"run", path}, {"compile", path}, {"check", "-"}} {
		code, stdout, stderr := coredag(t, plan, args...)
		assert.Equal(t, exitFail, code, "%q", args)
		for _, out := range []string{stdout, stderr} {
			assert.NotContains(t, out, "\x1b", "%q", args)
			assert.NotContains(t, out, "\x07", "%q", args)
		}
		assert.Contains(t, stderr, `:3:18: unknown op zz`, "%q", args)
		assert.Contains(t, stderr, `    op a = nop after zz   # \x1b]0;pwned\x07`+"\n                     ^\n", "%q", args)
	}
	code, _, stderr := coredag(t, "", "check", path)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, strconv.Quote(path)+":3:18: unknown op zz")

	// A clean plan under that name, and a name that does not exist.
	require.NoError(t, os.WriteFile(path, []byte("plan p\nop a = nop\n"), 0o644))
	code, stdout, _ := coredag(t, "", "check", path)
	assert.Equal(t, exitOK, code)
	assert.Equal(t, strconv.Quote(path)+": ok (plan p, 1 rank, 1 op)\n", stdout)
	code, stdout, _ = coredag(t, "", "run", path)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "PASS "+strconv.Quote(path)+": ")
	code, _, stderr = coredag(t, "", "check", path+"\x07missing")
	assert.Equal(t, exitUsage, code)
	assert.NotContains(t, stderr, "\x1b")
	assert.NotContains(t, stderr, "\x07")
	assert.Contains(t, stderr, `\x1b[31m.dag\x07missing`)
}

// TestParamUsageErrors: a -p the plan cannot take is a mistake in the command line: exit 2, for
// every command that reads a plan.
func TestParamUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"check", "-p", "nosuch=1", "plans/ring_allreduce.dag"},
		{"check", "--json", "-p", "nosuch=1", "plans/ring_allreduce.dag"},
		{"run", "-p", "nosuch=1", "plans/ring_allreduce.dag"},
		{"run", "--json", "-p", "ranks=0", "plans/ring_allreduce.dag"},
		{"compile", "-p", "ranks=70000", "plans/ring_allreduce.dag"},
		{"dot", "-p", "nosuch=1", "plans/ring_allreduce.dag"},
	} {
		code, _, stderr := coredag(t, "", args...)
		assert.Equal(t, exitUsage, code, "%q: %s", args, stderr)
		assert.Regexp(t, `coredag: plans/ring_allreduce.dag: (nosuch = -?\d+: the plan has no param nosuch|ranks = -?\d+: the world size must be between 1 and 65536)`, stderr, "%q", args)
	}
	// A value the plan takes but then fails with is the plan's diagnostic: exit 1.
	code, _, stderr := coredag(t, "", "run", "-p", "ranks=3", "plans/recursive_doubling_allreduce.dag")
	assert.Equal(t, exitFail, code, stderr)
}

// TestTargetLimitGrouped: a queue too shallow on every rank, by different amounts, is one
// diagnostic worded with the largest need, the other ranks listed as likewise.
func TestTargetLimitGrouped(t *testing.T) {
	t.Parallel()
	plan := writeTemp(t, "shallow.dag", `plan t
param ranks = 3
buffer a u8[64] remote_write
queue right to (rank + 1) % ranks peer left depth 2
queue left to (rank - 1) % ranks peer right depth 2
for s in 0 .. 3 + rank {
  op w[s] = write right a[0:8] to a[8:16]
  if s > 0 { w[s] after w[s - 1] }
}
`)
	code, _, stderr := coredag(t, "", "compile", plan)
	assert.Equal(t, exitFail, code, stderr)
	assert.Equal(t, 1, strings.Count(stderr, "one iteration posts"), stderr)
	assert.Contains(t, stderr, "shallow.dag:4:7: right.sq: one iteration posts 5 WQEs on its send side but its depth is 2, and target connectx posts whole chains before it runs (declare `depth 5` or more on the queue, or compile for --target generic) (on rank 2; likewise on ranks 0, 1)\n")

	// The depth named is the least that works: it compiles, and one less does not.
	src, err := os.ReadFile(plan)
	require.NoError(t, err)
	for depth, want := range map[string]int{"depth 5": exitOK, "depth 4": exitFail} {
		fixed := writeTemp(t, "shallow_"+strings.ReplaceAll(depth, " ", "")+".dag", strings.ReplaceAll(string(src), "depth 2", depth))
		code, _, stderr := coredag(t, "", "compile", "-o", filepath.Join(t.TempDir(), "out.txt"), fixed)
		assert.Equal(t, want, code, "%s: %s", depth, stderr)
	}
}
