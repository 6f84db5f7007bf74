package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/exec"
)

// TestCheckJSONRace: a race in --json carries its code, both accesses (the primary position and
// a related one), the ranks and the suggested fix.
func TestCheckJSONRace(t *testing.T) {
	t.Parallel()
	racy := "plan racy\nparam ranks = 2\nbuffer data f32[4] init rank + 1\nbuffer tmp f32[4]\n" +
		"queue q to (rank + 1) % ranks\nop tx = send q data\nop rx = recv q tmp\nop red = reduce sum data from tmp after rx\n"
	code, stdout, stderr := coredag(t, racy, "check", "--json", "-")
	require.Equal(t, exitFail, code, stderr)
	var reports []checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &reports), stdout)
	require.Len(t, reports, 1)
	require.Len(t, reports[0].Diagnostics, 1)
	d := reports[0].Diagnostics[0]
	assert.Equal(t, diag.Race, d.Code)
	assert.Equal(t, []any{"<stdin>", 6, 16}, []any{d.File, d.Line, d.Col}, "the send's read")
	require.Len(t, d.Related, 1)
	assert.Equal(t, diag.JSONRelated{File: "<stdin>", Line: 8, Col: 21, Label: "reduce red on rank 0 reduces into it"}, d.Related[0])
	assert.Equal(t, []int{0, 1}, d.Ranks)
	require.NotNil(t, d.Fix)
	assert.Equal(t, "add `red after tx` on every rank", d.Fix.Message)
	assert.True(t, strings.HasPrefix(d.Message, "race on rank 0's data: "), d.Message)

	// The raw shape: the keys a tool reads.
	var raw []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &raw))
	first := raw[0]["diagnostics"].([]any)[0].(map[string]any)
	for _, k := range []string{"code", "file", "line", "col", "message", "ranks", "related", "fix"} {
		assert.Contains(t, first, k)
	}
}

// TestCheckJSONMisspelt: a misspelt name comes with a fix that replaces it.
func TestCheckJSONMisspelt(t *testing.T) {
	t.Parallel()
	code, stdout, _ := coredag(t, "plan p\nbuffer data u8[4]\nop c = copy date[0:2] to data[2:4]\n", "check", "--json", "-")
	require.Equal(t, exitFail, code)
	var reports []checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &reports), stdout)
	require.Len(t, reports[0].Diagnostics, 1)
	d := reports[0].Diagnostics[0]
	assert.Equal(t, diag.Name, d.Code)
	require.NotNil(t, d.Fix)
	assert.Equal(t, []diag.JSONEdit{{File: "<stdin>", Line: 3, Col: 13, EndLine: 3, EndCol: 17, NewText: "data"}}, d.Fix.Edits)
	assert.Empty(t, d.Ranks, "the same on every rank")

	// An unreadable file is an entry too, with its code.
	code, stdout, _ = coredag(t, "", "check", "--json", filepath.Join(t.TempDir(), "missing.dag"))
	assert.Equal(t, exitUsage, code)
	require.NoError(t, json.Unmarshal([]byte(stdout), &reports), stdout)
	assert.Equal(t, diag.Input, reports[0].Diagnostics[0].Code)
}

// TestRunDiagnostics: a failed run's error, in run --json, carries a code and the positions the
// engine could place: an op's fault at the op, a hang at the stuck entry with what it waits for.
func TestRunDiagnostics(t *testing.T) {
	t.Parallel()
	at := diag.At("p.dag", 3, 4)
	op := &exec.OpError{Op: "w", Rank: 1, Queue: "q", Pos: at, Err: errors.New("remote access error")}
	assert.Equal(t, []diag.JSON{{Code: diag.Fault, File: "p.dag", Line: 3, Col: 4, Message: "op w on rank 1, queue q: remote access error"}},
		runDiagnostics(op, nil))
	assert.Equal(t, []diag.JSON{{Code: diag.Fault, Message: "boom"}}, runDiagnostics(errors.New("boom"), nil))

	plan, h, _ := hangOffload(t)
	got := runDiagnostics(h, plan)
	require.Len(t, got, 1)
	d := got[0]
	assert.Equal(t, diag.Hang, d.Code)
	assert.Equal(t, filepath.Join("..", "..", "plans", "ring_allreduce.dag"), d.File)
	assert.Positive(t, d.Line)
	assert.Contains(t, d.Message, "iteration 0: run stopped making progress: rank 1: WAIT")
	require.NotEmpty(t, d.Related, "the WQE the WAIT awaits")
	assert.Contains(t, d.Related[0].Label, "expected to complete the WAIT before")
	src, err := os.ReadFile(filepath.Join("..", "..", "plans", "ring_allreduce.dag"))
	require.NoError(t, err)
	assert.LessOrEqual(t, d.Line, strings.Count(string(src), "\n")+1)
}
