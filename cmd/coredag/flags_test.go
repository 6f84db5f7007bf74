package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --rank means the same in compile and dot: the ranks to show, repeatable or comma-separated.
func TestRankFlagLists(t *testing.T) {
	t.Parallel()
	heads := regexp.MustCompile(`(?m)^rank (\d+)$`)
	for _, args := range [][]string{{"--rank", "0,2"}, {"--rank", "0", "--rank", "2"}} {
		code, stdout, stderr := coredag(t, "", append(append([]string{"compile"}, args...), "-p", "ranks=4", "plans/ring_allgather.dag")...)
		require.Equal(t, exitOK, code, stderr)
		var got []string
		for _, m := range heads.FindAllStringSubmatch(stdout, -1) {
			got = append(got, m[1])
		}
		assert.Equal(t, []string{"0", "2"}, got, "%v", args)
	}
	code, stdout, stderr := coredag(t, "", "dot", "--rank", "0,2", "-p", "ranks=4", "plans/ring_allgather.dag")
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "rank 0")
	code, _, stderr = coredag(t, "", "compile", "--rank", "0,7", "-p", "ranks=4", "plans/ring_allgather.dag")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--rank 7: plan ring_allgather has ranks 0..3")
}

// A flag that a command would not use with the others given, or whose value no use of it takes,
// is a usage error rather than silently ignored; one given twice counts once.
func TestFlagsNotIgnored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dot", "--target", "nosuch", "plans/ring_allreduce.dag"}, `--target: unknown target "nosuch"`},
		{[]string{"check", "--msccl-type", "bogus", "plans/ring_allreduce.dag"}, "--msccl-type bogus: want one of u8 i32 u32 i64 u64 f32 f64"},
		{[]string{"run", "--no-triggers", "--engine", "offload", "plans/ring_allreduce.dag"}, "it has no effect with --engine offload"},
		{[]string{"predict", "-p", "n=4", "--sizes", "64B,1KiB", "plans/ring_allreduce.dag"}, "-p n=4: --sizes sets n (--size-param) at each size: drop the -p"},
		{[]string{"predict", "--sizes", "9223372036854775807", "plans/ring_allreduce.dag"}, "takes sizes in steps of 16 B, and this many steps pass the largest integer"},
	} {
		code, _, stderr := coredag(t, "", tc.args...)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, stderr)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
	}

	code, stdout, stderr := coredag(t, "", "run", "--json", "--dump", "data", "--dump", "data", "-p", "n=1", "plans/ring_allreduce.dag")
	require.Equal(t, exitOK, code, stderr)
	assert.Equal(t, 1, strings.Count(stdout, `"data"`), "one dump of data: %s", stdout)
	assert.Regexp(t, `"data":\s*\[(\s*\[[^\]]*\],?){4}\s*\]`, stdout, "4 ranks, once each")

	code, stdout, stderr = coredag(t, "", "predict", "--sizes", "1KiB,64B,64B", "plans/ring_allreduce.dag")
	require.Equal(t, exitOK, code, stderr)
	assert.Regexp(t, `(?s)64 B.*\n\s*1 KiB`, stdout, "sizes sorted, once each")
	assert.Equal(t, 1, strings.Count(stdout, "64 B"), stdout)
}
