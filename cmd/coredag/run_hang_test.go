package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/internal/drawtest"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/planner/verify"
	"github.com/coredag/coredag/viz"
)

// TestRunOnHangHealthy: --on-hang on a run that does not hang writes nothing and changes
// nothing; a drawing format it cannot write is a usage error before anything runs. (No plan the
// checker accepts hangs on the software NIC, so the drawing itself is tested on real hangs below,
// through the function the command calls.)
func TestRunOnHangHealthy(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "hang.svg")
	for _, engine := range []string{"offload", "poll"} {
		code, stdout, stderr := coredag(t, "", "run", "--engine", engine, "--on-hang", out, "-p", "ranks=4", "plans/ring_allreduce.dag")
		require.Equal(t, 0, code, "engine %s: %s", engine, stderr)
		assert.Contains(t, stdout, "memory matches the reference on every rank")
		assert.NotContains(t, stderr, "written")
		assert.NoFileExists(t, out)
	}
	code, stdout, stderr := coredag(t, "", "run", "--on-hang", "hang.txt", "plans/ring_allreduce.dag")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, `--on-hang: hang.txt: unknown drawing format ".txt"`)
}

// hangOffload runs ring_allreduce (2 ranks) on the offload engine after raising the count of
// rank 1's first management WAIT out of reach: the run must end with a HangError that places the
// stuck WAIT.
func hangOffload(t *testing.T) (*ir.Plan, *exec.HangError, exec.WQELoc) {
	t.Helper()
	path := filepath.Join("..", "..", "plans", "ring_allreduce.dag")
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), path, src, map[string]int64{"ranks": 2, "n": 4}, planner.Options{})
	require.NoError(t, err)
	target, err := ir.LookupTarget("connectx")
	require.NoError(t, err)
	plan, err := lower.Compile(t.Context(), g, target)
	require.NoError(t, err)
	rp := &plan.Ranks[1]
	stuck := exec.WQELoc{Rank: 1, Queue: rp.Mgmt, Index: -1}
	for k := range rp.Queues[rp.Mgmt].Chain {
		if w := &rp.Queues[rp.Mgmt].Chain[k]; w.Opcode == ir.OpcWait {
			w.Wait.Count += 100
			stuck.Index = k
			break
		}
	}
	require.GreaterOrEqual(t, stuck.Index, 0, "no WAIT in rank 1's management queue")
	_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{}),
		exec.Options{Engine: exec.Offload, HangTimeout: time.Second})
	var h *exec.HangError
	require.ErrorAs(t, err, &h, "%v", err)
	return plan, h, stuck
}

// hangPoll runs a graph the checker rejects (each rank sends only after its own receive, so
// neither receive is ever matched) on the polling engine. The compiler refuses that graph too, so
// the plan the hang is placed in is compiled from the same ops without the fatal edge, and given
// the graph's dependencies.
func hangPoll(t *testing.T) (*ir.Plan, *exec.HangError) {
	t.Helper()
	elaborate := func(after string) *ir.Graph {
		src := "plan deadlock\nparam ranks = 2\nbuffer d u32[4]\nqueue q to 1 - rank\nop rx = recv q d\nop tx = send q d" + after + "\n"
		f, err := dsl.Parse("deadlock.dag", []byte(src))
		require.NoError(t, err)
		g, err := elaborate.Elaborate(t.Context(), f, nil, elaborate.Options{})
		require.NoError(t, err)
		return g
	}
	g := elaborate(" after rx")
	require.Error(t, verify.Check(t.Context(), g).Err(), "the checker should reject this deadlock")
	target, err := ir.LookupTarget("generic")
	require.NoError(t, err)
	plan, err := lower.Compile(t.Context(), elaborate(""), target)
	require.NoError(t, err)
	plan.Graph = g
	// The polling engine walks the plan's dependencies: give it the fatal edge back.
	deps := &ir.Deps{PredStart: []int32{0}, SuccStart: []int32{0}}
	for o := range g.Ops {
		deps.PredList = append(deps.PredList, g.Preds(ir.OpID(o))...)
		deps.SuccList = append(deps.SuccList, g.Succs(ir.OpID(o))...)
		deps.PredStart = append(deps.PredStart, int32(len(deps.PredList)))
		deps.SuccStart = append(deps.SuccStart, int32(len(deps.SuccList)))
	}
	plan.Deps = deps
	_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{NoCrossChannel: true}),
		exec.Options{Engine: exec.Poll, Reference: exec.NewMemory(g), HangTimeout: time.Second})
	var h *exec.HangError
	require.ErrorAs(t, err, &h, "%v", err)
	return plan, h
}

// highlighted lists the labels of the nodes drawn in the highlight colour.
func highlighted(dotText string) []string {
	node := regexp.MustCompile(`(?m)^\s*n\d+\[(.*)\];$`)
	label := regexp.MustCompile(`label="((?:[^"\\]|\\.)*)"`)
	var labels []string
	for _, m := range node.FindAllStringSubmatch(dotText, -1) {
		if strings.Contains(m[1], `color="#d62728"`) {
			if l := label.FindStringSubmatch(m[1]); l != nil {
				labels = append(labels, strings.ReplaceAll(l[1], `\n`, " | "))
			}
		}
	}
	return labels
}

// entryLabel is how the plan view's label of a chain entry starts.
func entryLabel(plan *ir.Plan, l *exec.WQELoc) string {
	return fmt.Sprintf("[%d] %s", l.Index, plan.Ranks[l.Rank].Queues[l.Queue].Chain[l.Index].Opcode)
}

// TestWriteHangViewOffload: the drawing of an offload hang marks the stuck WAIT and the WQE it
// awaits, captions the diagnosis, and comes out in every format.
func TestWriteHangViewOffload(t *testing.T) {
	t.Parallel()
	plan, h, stuck := hangOffload(t)
	require.NotEmpty(t, h.Stuck)
	first := h.Stuck[0]
	require.NotNil(t, first.At, "the stuck WAIT is placed: %v", first)
	require.NotNil(t, first.ProducerAt, "the awaited WQE is placed: %v", first)
	assert.Equal(t, stuck, *first.At)
	assert.Equal(t, ir.OpcWait, plan.Ranks[1].Queues[first.At.Queue].Chain[first.At.Index].Opcode)

	dir := t.TempDir()
	dotFile := filepath.Join(dir, "hang.dot")
	require.NoError(t, writeHangView(dotFile, plan, h))
	text, err := os.ReadFile(dotFile)
	require.NoError(t, err)
	labels := highlighted(string(text))
	require.Len(t, labels, 2, "the stuck WAIT and the WQE it awaits: %q", labels)
	assert.Regexp(t, `^`+regexp.QuoteMeta(entryLabel(plan, first.At))+` \| \S+ >= 10\d \|`, labels[0]+labels[1])
	assert.Contains(t, labels[0]+labels[1], entryLabel(plan, first.ProducerAt))
	assert.Contains(t, string(text), "hung in iteration 0: rank 1: WAIT before")

	drawtest.NeedDot(t, viz.DotProgram)
	svgFile := filepath.Join(dir, "hang.svg")
	require.NoError(t, writeHangView(svgFile, plan, h))
	svg, err := os.ReadFile(svgFile)
	require.NoError(t, err)
	requireWellFormedXML(t, svg)
	assert.Contains(t, string(svg), "#d62728")
	assert.Contains(t, string(svg), "WAIT before")

	pngFile := filepath.Join(dir, "hang.png")
	require.NoError(t, writeHangView(pngFile, plan, h))
	png, err := os.ReadFile(pngFile)
	require.NoError(t, err)
	drawtest.CheckPNG(t, png, "#d62728") // the highlight
}

// TestWriteHangViewNoDot: without Graphviz, drawing a hang as SVG fails with the reason and
// leaves no file (run --on-hang prints the error and goes on); DOT needs no Graphviz.
func TestWriteHangViewNoDot(t *testing.T) {
	plan, h, _ := hangOffload(t)
	t.Setenv(viz.DotEnv, "")
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	svgFile := filepath.Join(dir, "hang.svg")
	err := writeHangView(svgFile, plan, h)
	require.ErrorIs(t, err, viz.ErrNoDot)
	assert.Contains(t, err.Error(), "rendering SVG needs Graphviz's dot program: not found in PATH")
	assert.NoFileExists(t, svgFile)
	require.NoError(t, writeHangView(filepath.Join(dir, "hang.dot"), plan, h))
}

// TestWriteHangViewPoll: the polling engine blames ops; Run places them in the plan, and the
// drawing marks them.
func TestWriteHangViewPoll(t *testing.T) {
	t.Parallel()
	plan, h := hangPoll(t)
	var placed int
	for _, s := range h.Stuck {
		if s.At != nil {
			placed++
			w := &plan.Ranks[s.At.Rank].Queues[s.At.Queue].Chain[s.At.Index]
			assert.Contains(t, s.What, plan.OpOf(w).Name, "At names the entry the diagnosis names")
		}
	}
	require.Positive(t, placed, "%v", h)
	dotFile := filepath.Join(t.TempDir(), "hang.dot")
	require.NoError(t, writeHangView(dotFile, plan, h))
	text, err := os.ReadFile(dotFile)
	require.NoError(t, err)
	assert.NotEmpty(t, highlighted(string(text)))
}
