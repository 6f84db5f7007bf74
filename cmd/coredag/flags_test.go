package main

import (
	"regexp"
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
