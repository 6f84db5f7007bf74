package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExportGOALTriggered(t *testing.T) {
	t.Parallel()
	code, out, errOut := coredag(t, "", "export", "goal", "--target", "triggered", "-p", "ranks=4", "plans/recursive_doubling_allreduce.dag")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "compiled for triggered: LogGOPSim2 counters")
	assert.Contains(t, out, "num_ranks 4\n")
	assert.Regexp(t, `(?m)^// ct 0: hop\[0\]\.sq\.scnt \(send\)$`, out)
	assert.Regexp(t, `(?m)^w\d+: tput 2048b to \d when \d+ reaches \d+ ct \d+ tag \d+$`, out)
	assert.Regexp(t, `(?m)^w\d+: append 2048b to priority_list allowed \d ct \d+ use_once tag \d+$`, out)

	code, _, errOut = coredag(t, "", "export", "goal", "--target", "connectx", "plans/recursive_doubling_allreduce.dag")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--target connectx: not a triggered target")
	code, _, errOut = coredag(t, "", "export", "goal", "--target", "nosuch", "plans/recursive_doubling_allreduce.dag")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--target")
}
