package main

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad flags are refused before SimGrid is looked for.
func TestSimulateUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fat-tree", "2;4;1,4;1,1"}, "--fat-tree: fat tree \"2;4;1,4;1,1\": down counts \"4\": want 2 numbers"},
		{[]string{"--fat-tree", "2;2,2;1,2;1,1", "-p", "ranks=8"}, "--fat-tree 2;2,2;1,2;1,1: 4 hosts, and the plan has 8 ranks"},
		{[]string{"--params", "/nonexistent.json"}, "--params"},
		{[]string{"--engine", "ns3"}, "--engine"},
		{[]string{"--timeout", "0s"}, "--timeout 0s: must be positive"},
	} {
		args := append(append([]string{"simulate"}, c.args...), "plans/recursive_doubling_allreduce.dag")
		code, _, errOut := coredag(t, "", args...)
		assert.Equal(t, 2, code, "%v: %s", c.args, errOut)
		assert.Contains(t, errOut, c.want, c.args)
	}
}

// A plan runs on SimGrid and the simulated time is compared with predict's; without a compiler
// the error says what to install.
func TestSimulateSimGrid(t *testing.T) {
	endToEnd(t)
	code, out, errOut := coredag(t, "", "simulate", "-p", "ranks=16", "plans/recursive_doubling_allreduce.dag")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "plan recursive_doubling_allreduce, 16 ranks")
	assert.Contains(t, out, "platform: fat tree 2;4,4;1,4;1,1, 16 hosts")
	m := regexp.MustCompile(`(?m)^simgrid: +([0-9.]+) µs \(last: \S+ on rank \d+;`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	assert.Greater(t, v, 4*1.5, "four steps of at least the latency: %s", out) // log2(16) hops of L = 1.5 µs
	assert.Regexp(t, `(?m)^predict: +[0-9.]+ µs \(last: .*target connectx`, out)
	assert.Regexp(t, `(?m)^simgrid / predict - 1: [-+][0-9.]+%$`, out)

	code, _, errOut = coredagEnv(t, []string{"CXX=no-such-compiler-for-coredag", "XDG_CACHE_HOME=" + t.TempDir()}, "",
		"simulate", "--no-predict", "-p", "ranks=4", "plans/recursive_doubling_allreduce.dag")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "no-such-compiler-for-coredag was not found")
	assert.Contains(t, errOut, "apt-get install g++ libsimgrid-dev")

	// SimGrid's memory is within the budget: past it, a refusal that names it, exit 2.
	code, _, errOut = coredag(t, "", "simulate", "--no-predict", "--mem", "64MiB", "-p", "ranks=256", "plans/recursive_doubling_allreduce.dag")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "SimGrid needed more than its 64 MiB of memory (8192 activities): over the memory budget; raise it (--mem)")
}
