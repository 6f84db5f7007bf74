package main

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunOverlap: run --overlap prints the overlap figures after the verdict, with memory
// checked after the phases that ran the plan, on both engines, in text and in JSON. The figures
// are timings: only their presence and consistency are checked.
func TestRunOverlap(t *testing.T) {
	t.Parallel()
	const plan = "plans/ring_allreduce.dag"
	for _, engine := range []string{"offload", "poll"} {
		code, stdout, stderr := coredag(t, "", "run", "--overlap", "--engine", engine, "--iters", "3", "-p", "n=64", plan)
		require.Equal(t, exitOK, code, "%s\n%s", stdout, stderr)
		assert.Regexp(t, `^PASS `+regexp.QuoteMeta(plan)+`: memory matches the reference on every rank \(4 ranks\)\n`, stdout)
		assert.Contains(t, stdout, engine+" engine")
		assert.Regexp(t, `\n  overlap \d+\.\d% \(middle half of the rounds \d+\.\d% to \d+\.\d%\): communication alone [\d.]+ .s, compute alone [\d.]+ .s, both [\d.]+ .s \(medians of 3 rounds on \d+ CPUs?; compute loop of \d+ units\)\n`, stdout)
		assert.Regexp(t, `\n  CPU time per iteration: communication alone [\d.]+ .s \(the process\); both: compute thread [\d.]+ .s, rest of the process [\d.]+ .s`, stdout)

		rep := runJSON(t, exitOK, "--overlap", "--engine", engine, "--iters", "3", "-p", "n=64", plan)
		assert.True(t, rep.OK)
		assert.Equal(t, engine, rep.Engine)
		require.NotNil(t, rep.Overlap)
		o := rep.Overlap
		assert.Equal(t, 3, o.Iters)
		assert.Positive(t, o.PureNS)
		assert.Positive(t, o.ComputeNS)
		assert.Positive(t, o.TotalNS)
		assert.Positive(t, o.Units)
		assert.Positive(t, o.CPUs)
		assert.GreaterOrEqual(t, o.Percent, 0.0)
		assert.LessOrEqual(t, o.Percent, 100.0)
		assert.LessOrEqual(t, o.Spread[0], o.Spread[1])
		assert.LessOrEqual(t, o.Spread[1], 100.0)
		require.NotNil(t, o.CPU)
		assert.Positive(t, o.CPU.ComputeThread)
		// The report's latency is the communication-alone phase's, timed around pure_ns's region.
		assert.GreaterOrEqual(t, rep.LatencyNS["median"], o.PureNS)
	}
}

// Without --iters, --overlap measures 200 rounds, not one, and the plan's postconditions are
// checked and listed as a plain run does.
func TestRunOverlapDefaults(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := coredag(t, "", "run", "--overlap", "-p", "n=16", "plans/ring_allreduce.dag")
	require.Equal(t, exitOK, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "(medians of 200 rounds on ")
	assert.Contains(t, stdout, "\n  held: expect allreduce sum data\n")
}

// TestRunOverlapRefusals: what --overlap cannot measure is a usage error, before anything runs.
func TestRunOverlapRefusals(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--explore", "2"},
		{"--dump", "data"},
		{"--timeline", "t.json"},
		{"--provider", "verbs"},
	} {
		code, _, stderr := coredag(t, "", append(append([]string{"run", "--overlap"}, args...), "plans/ring_allreduce.dag")...)
		assert.Equal(t, exitUsage, code, "%q: %s", args, stderr)
		assert.Contains(t, stderr, "--overlap", "%q", args)
	}
}
