package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/predict"
)

// calibrate measures the micro-benchmarks on the software NIC and writes figures that predict
// reads back.
func TestCalibrateSoftnic(t *testing.T) {
	t.Parallel()
	endToEnd(t) // runs the micro-benchmarks: 4.5 s of CPU
	out := filepath.Join(t.TempDir(), "softnic.json")
	code, _, errOut := coredag(t, "", "calibrate", "--iters", "3", "-o", out)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "pingpong 1 MiB")
	assert.Regexp(t, `reduce 1 MiB\s+\S+ [µm]s\s+\S+ [µm]s\s+[-+]\d+%`, errOut)
	par, err := predict.ReadParams(out)
	require.NoError(t, err)
	assert.Equal(t, "softnic", par.Provider)
	assert.Equal(t, 1, par.Workers)
	// A megabyte takes time to move. Which figure carries it (the wire's B, or the per-byte
	// costs of the copies that move it on the software NIC) is the fit's choice: with 3 noisy
	// iterations under the race detector it once put all of it in the copies, B = 0.
	ring := func(n int64) float64 {
		r, err := predict.Simulate(t.Context(), ringPlan(t, par.Target, 2, n), par, predict.Options{Scale: 1})
		require.NoError(t, err)
		return r.Time
	}
	small, large := ring(256), ring(256<<10) // 1 KiB and 1 MiB chunks of f32
	assert.Greater(t, large, small+float64(time.Microsecond), "the fitted figures move 1 MiB chunks no slower than 1 KiB ones: %+v", par)
	code, stdout, errOut := coredag(t, "", "predict", "--params", out, "--sizes", "1KiB", "plans/ring_allreduce.dag")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, stdout, "figures: softnic (1 shared worker(s))")
}

// The CPU clock times each iteration on the thread that runs it: never more than its wall time,
// and not nothing.
func TestMeasureClocks(t *testing.T) {
	t.Parallel()
	plan := ringPlan(t, "connectx", 4, 256)
	p, _, err := openRunProvider("softnic", "")
	require.NoError(t, err)
	defer p.Close()
	wall, cpu, err := measureClocks(context.Background(), plan, p, 20, true)
	require.NoError(t, err)
	require.Len(t, wall, 20)
	require.Len(t, cpu, 20)
	for i := range wall {
		assert.Positive(t, cpu[i], "iteration %d", i)
		// the thread CPU clock ticks in microseconds on some kernels: allow one tick
		assert.LessOrEqual(t, cpu[i], wall[i]+time.Microsecond, "iteration %d", i)
	}
	assert.LessOrEqual(t, pick(cpu, "min"), pick(cpu, "median"))
}

// ringPlan compiles plans/ring_allreduce.dag for ranks and n on target.
func ringPlan(t *testing.T, target string, ranks, n int64) *ir.Plan {
	t.Helper()
	g, err := planner.Load(t.Context(), "ring.dag", mustRead(t, "../../plans/ring_allreduce.dag"), map[string]int64{"ranks": ranks, "n": n}, planner.Options{})
	require.NoError(t, err)
	tg, err := ir.LookupTarget(target)
	require.NoError(t, err)
	plan, err := planner.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	return plan
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func TestCalibrateErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--provider", "nosuch"}, "unknown provider"},
		{[]string{"--iters", "0"}, "--iters 0"},
		{[]string{"--target", "nosuch"}, "--target"},
		{[]string{"--clock", "sundial"}, "--clock"},
		{[]string{"-o", filepath.Join(os.TempDir(), "no", "such", "dir", "x.json")}, "x.json"},
	} {
		code, _, errOut := coredag(t, "", append([]string{"calibrate"}, c.args...)...)
		assert.Equal(t, 2, code, c.args)
		assert.Contains(t, errOut, c.want, c.args)
	}
}
