package lower_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate"
	"github.com/coredag/coredag/planner/lower"
)

// TestCycle: a Graph that deadlocks (each rank's send waits for its receive, which completes
// only once the peer's send lands) is not checked here, only elaborated: Compile itself finds
// the ops that never run, on the loop or behind it, and reports the first five; the op before
// the loop is not among them.
func TestCycle(t *testing.T) {
	t.Parallel()
	src := `plan cyc
param ranks = 2
buffer x f32[4] remote_write
buffer y f32[4]
queue q to (rank + 1) % ranks peer q
op free = copy y to x
op b = recv q x after free
op a = send q x after b
op h = copy x to y after a
`
	f, err := dsl.Parse("cyc.dag", []byte(src))
	require.NoError(t, err)
	g, err := elaborate.Elaborate(t.Context(), f, nil, elaborate.Options{})
	require.NoError(t, err)
	for _, target := range []string{"connectx", "connectx-inline", "generic"} {
		tg, err := ir.LookupTarget(target)
		require.NoError(t, err)
		_, err = lower.Compile(t.Context(), g, tg)
		require.Error(t, err, target)
		var list diag.List
		require.ErrorAs(t, err, &list, target)
		var got []string
		for _, d := range list {
			require.Equal(t, diag.Cycle, d.Code)
			require.Contains(t, d.Msg, "can never start: it is on a dependency cycle")
			got = append(got, fmt.Sprintf("%s %s", d.Pos, strings.Fields(d.Msg)[0:4]))
		}
		// At most five, in op order: the copy h is behind the loop, free before it.
		require.Equal(t, []string{"cyc.dag:7:4 [b on rank 0]", "cyc.dag:8:4 [a on rank 0]", "cyc.dag:9:4 [h on rank 0]",
			"cyc.dag:7:4 [b on rank 1]", "cyc.dag:8:4 [a on rank 1]"}, got, target)
	}
}
