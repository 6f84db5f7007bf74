package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/planner"
)

// runJSON runs `coredag run --json ARGS...` and decodes its report; it fails the test unless
// the exit code is want.
func runJSON(t *testing.T, want int, args ...string) runReport {
	t.Helper()
	code, stdout, stderr := coredag(t, "", append([]string{"run", "--json"}, args...)...)
	require.Equal(t, want, code, "coredag run --json %q\nstderr:\n%s", args, stderr)
	var rep runReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	return rep
}

// TestRunPlans: every plan in plans/ runs on the offload engine (managed and inline lowering)
// and on the polling engine, and its memory matches the reference on every rank.
func TestRunPlans(t *testing.T) {
	t.Parallel()
	for _, f := range plansFiles(t) {
		f = filepath.Join(repoRoot, f)
		for _, c := range []struct{ engine, target string }{{"offload", "connectx"}, {"offload", "connectx-inline"}, {"poll", "generic"}} {
			code, stdout, stderr := coredagIn(t, "", "run", "--engine", c.engine, "--target", c.target, "--iters", "2", f)
			assert.Equal(t, exitOK, code, "%s %s/%s:\n%s%s", f, c.engine, c.target, stdout, stderr)
			assert.Regexp(t, `^PASS `+regexp.QuoteMeta(f)+`: memory matches the reference on every rank \(4 ranks\)\n`, stdout)
			assert.Contains(t, stdout, fmt.Sprintf("%s engine, target %s, softnic, 2 iterations\n", c.engine, c.target))
		}
	}
}

func TestRunEngines(t *testing.T) {
	t.Parallel()
	const plan = "plans/ring_allreduce.dag"
	for _, c := range []struct {
		args           []string
		engine, target string
	}{
		{nil, "offload", "connectx"}, // auto: the software NIC has cross-channel
		{[]string{"--engine", "auto"}, "offload", "connectx"},
		{[]string{"--engine", "auto", "--target", "generic"}, "poll", "generic"}, // the target has none
		{[]string{"--engine", "offload"}, "offload", "connectx"},
		{[]string{"--engine", "offload", "--target", "connectx-inline"}, "offload", "connectx-inline"},
		{[]string{"--engine", "poll"}, "poll", "generic"},
	} {
		rep := runJSON(t, exitOK, append(c.args, plan)...)
		assert.True(t, rep.OK, "%q", c.args)
		assert.Equal(t, c.engine, rep.Engine, "%q", c.args)
		assert.Equal(t, c.target, rep.Target, "%q", c.args)
		assert.Equal(t, "softnic", rep.Provider)
		assert.Equal(t, "ring_allreduce", rep.Plan)
		assert.Equal(t, plan, rep.File)
		assert.Equal(t, 4, rep.Ranks)
		assert.Equal(t, 1, rep.Iters)
		assert.Empty(t, rep.Error)
		assert.Empty(t, rep.Mismatches)
		assert.Positive(t, rep.WQEs)
		assert.Positive(t, rep.CQEs)
		assert.Positive(t, rep.HostSteps, "the ring allreduce reduces on the CPU")
		for _, k := range []string{"min", "median", "p99"} {
			assert.Positive(t, rep.LatencyNS[k], "latency_ns.%s", k)
		}
		assert.LessOrEqual(t, rep.LatencyNS["min"], rep.LatencyNS["median"])
		assert.LessOrEqual(t, rep.LatencyNS["median"], rep.LatencyNS["p99"])
		if c.engine == "offload" {
			assert.Positive(t, rep.Waits, "the NIC executes WAITs")
			if c.target == "connectx" {
				// connectx-inline manages only the receive queues, and this plan holds no receive back
				assert.Positive(t, rep.Enables, "managed queues are released by ENABLEs")
			}
		} else {
			assert.Zero(t, rep.Waits, "the polling engine posts no WAIT")
			assert.Zero(t, rep.Enables)
		}
	}
}

// TestRunIters: counters add up over iterations; a persistent plan's second iteration posts
// as much as its first.
func TestRunIters(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"offload", "poll"} {
		one := runJSON(t, exitOK, "--engine", engine, "plans/pipeline_chain.dag")
		seven := runJSON(t, exitOK, "--engine", engine, "--iters", "7", "plans/pipeline_chain.dag")
		assert.Equal(t, 7, seven.Iters)
		assert.True(t, seven.OK)
		assert.Equal(t, 7*one.WQEs, seven.WQEs, engine)
		assert.Equal(t, 7*one.CQEs, seven.CQEs, engine)
		assert.Equal(t, 7*one.Waits, seven.Waits, engine)
		assert.Equal(t, 7*one.HostSteps, seven.HostSteps, engine)
	}
}

// TestRunParamsAndDump: -p changes the world and the sizes; --dump adds buffers.BUF[rank],
// one array per rank with the buffer's elements, equal to the plan's known result.
func TestRunParamsAndDump(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"offload", "poll"} {
		rep := runJSON(t, exitOK, "--engine", engine, "-p", "ranks=3", "-p", "n=5", "--dump", "data", "--dump", "tmp", "plans/ring_allreduce.dag")
		assert.Equal(t, 3, rep.Ranks)
		require.Contains(t, rep.Buffers, "data")
		require.Contains(t, rep.Buffers, "tmp")
		require.Len(t, rep.Buffers["tmp"], 3)
		assert.Len(t, rep.Buffers["tmp"][0], 2*5, "a slot of n per step")
		require.Len(t, rep.Buffers["data"], 3, "one array per rank")
		for r, vals := range rep.Buffers["data"] {
			require.Len(t, vals, 3*5, "rank %d: ranks chunks of n elements", r)
			for i, v := range vals {
				assert.EqualValues(t, 6, v, "%s: data[%d] on rank %d is ranks*(ranks+1)/2", engine, i, r)
			}
		}
	}

	// Integer buffers come out as JSON integers.
	rep := runJSON(t, exitOK, "-p", "ranks=2", "-p", "n=3", "--dump", "data", "plans/recursive_doubling_allreduce.dag")
	require.Len(t, rep.Buffers["data"], 2)
	for _, vals := range rep.Buffers["data"] {
		want := make([]any, 3)
		for i := range want {
			want[i] = float64(2*i + 1000) // ranks*i + 1000*ranks*(ranks-1)/2
		}
		assert.Equal(t, want, vals)
	}

	// Without --json, --dump prints one line per rank.
	code, stdout, _ := coredag(t, "", "run", "-p", "ranks=2", "-p", "n=2", "--dump", "data", "plans/ring_allgather.dag")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "data[rank 0] = [1 2 3 4]\ndata[rank 1] = [1 2 3 4]\n")
}

// TestRunSeeds: --seed selects one schedule of the software NIC, --explore K runs K of them.
func TestRunSeeds(t *testing.T) {
	t.Parallel()
	rep := runJSON(t, exitOK, "--seed", "5", "plans/atomic_fanin.dag")
	assert.EqualValues(t, 5, rep.Seed)
	assert.True(t, rep.OK)
	assert.Empty(t, rep.Runs, "one run lists no explored seeds")

	for _, engine := range []string{"offload", "poll"} {
		rep = runJSON(t, exitOK, "--engine", engine, "--explore", "4", "--seed", "10", "plans/pairwise_alltoall.dag")
		assert.True(t, rep.OK)
		assert.EqualValues(t, 10, rep.Seed, "the first explored seed")
		require.Len(t, rep.Runs, 4)
		for k, run := range rep.Runs {
			assert.EqualValues(t, 10+k, run.Seed)
			assert.True(t, run.OK)
			assert.Positive(t, run.MedianNS)
		}
	}

	rep = runJSON(t, exitOK, "--explore", "2", "plans/cas_handoff.dag")
	require.Len(t, rep.Runs, 2)
	assert.EqualValues(t, 1, rep.Runs[0].Seed, "without --seed, exploring starts at seed 1")

	code, stdout, _ := coredag(t, "", "run", "--explore", "3", "plans/cas_handoff.dag")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, ", 1 iteration, schedule seeds 1-3\n")
	assert.Contains(t, stdout, "(last run, seed 3)")
}

// TestRunText: the human-readable output is a scannable verdict line, then what ran, latency
// with units and the counters, with singular and plural nouns.
func TestRunText(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := coredag(t, "", "run", "plans/ring_allreduce.dag")
	assert.Equal(t, exitOK, code)
	assert.Empty(t, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 5, stdout)
	assert.Equal(t, "PASS plans/ring_allreduce.dag: memory matches the reference on every rank (4 ranks)", lines[0])
	assert.Equal(t, "  plan ring_allreduce, offload engine, target connectx, softnic, 1 iteration", lines[1])
	assert.Regexp(t, `^  latency \d+(\.\d+)? (ns|µs|ms|s)$`, lines[2])
	assert.Regexp(t, `^  totals: \d+ WQEs posted, \d+ CQEs polled, \d+ WAITs, \d+ ENABLEs, \d+ host steps, \d+ RNR retr(y|ies)$`, lines[3])
	assert.Equal(t, "  held: expect allreduce sum data", lines[4], "its postcondition, checked on the values")

	code, stdout, _ = coredag(t, "", "run", "--engine", "poll", "--iters", "3", "-p", "ranks=1", "plans/dissemination_barrier.dag")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "PASS plans/dissemination_barrier.dag: memory matches the reference on every rank (1 rank)\n")
	assert.Contains(t, stdout, ", 3 iterations\n")
	assert.Regexp(t, `\n  latency min \d+(\.\d+)? (ns|µs|ms|s), median \d+(\.\d+)? (ns|µs|ms|s), p99 \d+(\.\d+)? (ns|µs|ms|s)\n`, stdout)
	assert.Contains(t, stdout, "3 host steps, 0 RNR retries\n", "one nop per iteration")

	code, stdout, _ = coredag(t, "", "run", "-p", "ranks=1", "plans/dissemination_barrier.dag")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, ", 1 iteration\n")
	assert.Contains(t, stdout, ", 1 host step, ")
}

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"--engine", "nope"}, `--engine must be one of "auto","offload","poll"`},
		{[]string{"--iters", "0"}, "--iters 0: need at least 1"},
		{[]string{"--iters", "many"}, "--iters"},
		{[]string{"--seed", "-1"}, "--seed"},
		{[]string{"--dump", "nosuch"}, "--dump nosuch: plan ring_allreduce has no buffer nosuch"},
		{[]string{"--target", "nosuch"}, `unknown target "nosuch"`},
		{[]string{"-p", "ranks"}, "want NAME=VALUE"},
		{[]string{"--no-such-flag"}, "unknown flag"},
		{[]string{"--rank", "0"}, "--provider softnic runs every rank in this process (set the world size with -p ranks=N)"},
		{[]string{"--ranks", "4"}, "--rank, --ranks and --bootstrap run one rank per process"},
	} {
		code, stdout, stderr := coredag(t, "", append(append([]string{"run"}, c.args...), "plans/ring_allreduce.dag")...)
		assert.Equal(t, exitUsage, code, "%q: %s", c.args, stderr)
		assert.Contains(t, stderr, c.stderr, "%q", c.args)
		assert.Empty(t, stdout, "%q", c.args)
	}
	code, _, stderr := coredag(t, "", "run", "no/such/file.dag")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "no such file")

	// A plan with diagnostics: exit 1, positioned messages on stderr (on stdout with --json,
	// see TestRunEdgeCases), nothing run.
	bad := "plan p\nparam ranks = 2\nbuffer b u8[4]\nop c = copy b[0:2] to b[1:5]\n"
	for _, args := range [][]string{{"run", "-"}, {"run", "--engine", "poll", "-"}} {
		code, stdout, stderr := coredag(t, bad, args...)
		assert.Equal(t, exitFail, code, "%q", args)
		assert.Contains(t, stderr, "<stdin>:4:27: slice b[1:5] ends past the end of b (4 elements)", "%q", args)
		assert.NotContains(t, stdout, "PASS", "%q", args)
	}
	code, _, stderr = coredag(t, "", "run", "-p", "ranks=3", "plans/recursive_doubling_allreduce.dag")
	assert.Equal(t, exitFail, code)
	assert.Regexp(t, `plans/recursive_doubling_allreduce.dag:\d+:\d+: .*power of two`, stderr)

	// A plan read from stdin runs too.
	code, stdout, _ := coredag(t, "plan p\nparam ranks = 2\nbuffer b u8[4]\nop c = copy b[0:2] to b[2:4]\n", "run", "-")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "PASS <stdin>: memory matches the reference on every rank (2 ranks)\n")
}

// TestRunNoProgressBarOffTerminal: a run longer than a second draws a progress bar only on a
// terminal; with stderr a pipe, stderr stays empty.
func TestRunNoProgressBarOffTerminal(t *testing.T) {
	t.Parallel()
	endToEnd(t)
	if testing.Short() {
		t.Skip("runs for more than a second")
	}
	start := time.Now()
	code, stdout, stderr := coredag(t, "", "run", "--engine", "poll", "--iters", "120000", "plans/ring_allreduce.dag")
	assert.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "120000 iterations")
	assert.Empty(t, stderr, "no progress bar when stderr is not a terminal")
	if time.Since(start) < time.Second {
		t.Logf("the run took %v: too short to show that no bar appears", time.Since(start))
	}
}

func TestFmtDuration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0 ns"},
		{850, "850 ns"},
		{999, "999 ns"},
		{1000, "1.00 µs"},
		{35303, "35.3 µs"},
		{9996, "10.0 µs"},
		{99960, "100 µs"},
		{148_200, "148 µs"},
		{999_600, "1.00 ms"},
		{1_274_000, "1.27 ms"},
		{2_500_000_000, "2.50 s"},
		{1234 * time.Second, "1234 s"},
	} {
		assert.Equal(t, c.want, fmtDuration(c.d), "%d ns", int64(c.d))
	}
}

func TestRunEdgeCases(t *testing.T) {
	t.Parallel()
	// JSON has no infinities: they are dumped as strings and the report stays valid.
	inf := "plan p\nparam ranks = 1\nbuffer b f32[2] init 1e39\nbuffer c f32[2]\nop x = copy b to c\n"
	code, stdout, stderr := coredag(t, inf, "run", "--json", "--dump", "c", "-")
	require.Equal(t, exitOK, code, stderr)
	var rep struct {
		OK      bool               `json:"ok"`
		Buffers map[string][][]any `json:"buffers"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	assert.True(t, rep.OK)
	assert.Equal(t, [][]any{{"+Inf", "+Inf"}}, rep.Buffers["c"])

	// A plan with diagnostics still answers --json, on stdout.
	bad := "plan p\nparam ranks = 2\nbuffer b u8[4]\nop c = copy b[0:2] to b[1:5]\n"
	code, stdout, _ = coredag(t, bad, "run", "--json", "-")
	assert.Equal(t, exitFail, code)
	var diag checkReport
	require.NoError(t, json.Unmarshal([]byte(stdout), &diag), stdout)
	assert.False(t, diag.OK)
	require.Len(t, diag.Diagnostics, 1)
	assert.Equal(t, 4, diag.Diagnostics[0].Line)

	// The offload engine cannot run a plan compiled without cross-channel, nor the poll engine
	// one with WAIT/ENABLE chains: usage errors.
	code, _, stderr = coredag(t, "", "run", "--engine", "offload", "--target", "generic", "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--engine offload needs a cross-channel target")
	code, _, stderr = coredag(t, "", "run", "--engine", "poll", "--target", "connectx", "plans/ring_allreduce.dag")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--engine poll walks the DAG itself")
}

// TestRunTimeline: --timeline picks the poll engine and writes one completion event per op and
// iteration as trace-event JSON; it refuses the offload engine and --explore.
func TestRunTimeline(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "t.json")
	code, stdout, stderr := coredag(t, "", "run", "--timeline", out, "--iters", "3", "plans/pipeline_chain.dag")
	require.Equal(t, exitOK, code, stdout+stderr)
	assert.Contains(t, stdout, "poll engine, target generic")
	assert.Contains(t, stderr, "timeline of 3 iterations written to "+out)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var tf struct {
		TraceEvents []struct{ Ph string } `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(b, &tf))
	instants := 0
	for _, ev := range tf.TraceEvents {
		if ev.Ph == "i" {
			instants++
		}
	}
	src, err := os.ReadFile("../../plans/pipeline_chain.dag")
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), "pipeline_chain.dag", src, nil, planner.Options{})
	require.NoError(t, err)
	assert.Equal(t, 3*len(g.Ops), instants)

	for _, args := range [][]string{{"--engine", "offload"}, {"--explore", "2"}} {
		code, _, stderr = coredag(t, "", append(append([]string{"run", "--timeline", out}, args...), "plans/pipeline_chain.dag")...)
		assert.Equal(t, exitUsage, code, "%q", args)
		assert.Contains(t, stderr, "--timeline", "%q", args)
	}
}
