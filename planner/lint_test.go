package planner

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/planner/verify"
)

// The lints run beside the checks give what verify.RNR gives on its own; a plan that fails
// gets none.
func TestLoadLint(t *testing.T) {
	for _, name := range []string{"ring_allreduce", "pipeline_chain", "pairwise_alltoall"} {
		src, err := os.ReadFile("../plans/" + name + ".dag")
		require.NoError(t, err)
		var got diag.List
		called := false
		g, err := LoadWith(name+".dag", src, map[string]int64{"ranks": 6}, Options{Lint: func(l diag.List) { got, called = l, true }})
		require.NoError(t, err)
		require.True(t, called, name)
		assert.Equal(t, verify.RNR(g), got, name)
	}
	called := false
	_, err := LoadWith("racy.dag", []byte(`plan p
buffer a i32[8]
op x = copy a[0:4] to a[4:8]
op y = copy a[4:8] to a[0:4]
`), nil, Options{Lint: func(diag.List) { called = true }})
	require.Error(t, err)
	assert.False(t, called, "a racy plan is not linted")
}
