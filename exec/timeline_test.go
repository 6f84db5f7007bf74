package exec_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
)

// TestTimeline: with Options.Timeline, the polling engine records for every op of every plan in
// plans/ a completion time within its iteration, never before the completion of an op it depends
// on, with or without QP triggers; the offload engine refuses it.
func TestTimeline(t *testing.T) {
	files, err := filepath.Glob("../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	const iters = 2
	for _, f := range files {
		g, ok := loadPlan(t, f, 4)
		if !ok {
			continue
		}
		plan, err := compileFor(g, "generic")
		require.NoError(t, err)
		for _, trig := range []bool{false, true} {
			nic := softnic.New(softnic.Options{NoCrossChannel: true, Triggers: trig})
			res, err := exec.Run(context.Background(), plan, nic, exec.Options{Engine: exec.Poll, Iters: iters, Timeline: true})
			name := strings.TrimSuffix(filepath.Base(f), ".dag")
			require.NoError(t, err, name)
			require.True(t, res.OK, res.Summary())
			require.Len(t, res.Timeline, iters, name)
			for it, at := range res.Timeline {
				require.Len(t, at, len(g.Ops))
				for id := range g.Ops {
					op := ir.OpID(id)
					require.GreaterOrEqual(t, at[id], time.Duration(0), "%s iteration %d: %s has no time", name, it, g.OpString(op))
					require.LessOrEqual(t, at[id], res.Latency.All[it], "%s iteration %d: %s after the iteration ended", name, it, g.OpString(op))
					for _, p := range g.Preds(op) {
						require.GreaterOrEqual(t, at[id], at[p], "%s iteration %d: %s completed before its predecessor %s", name, it, g.OpString(op), g.OpString(ir.OpID(p)))
					}
				}
			}
		}
	}

	g, _ := loadPlan(t, "../plans/ring_allreduce.dag", 2)
	plan, err := compileFor(g, "connectx")
	require.NoError(t, err)
	_, err = exec.Run(context.Background(), plan, softnic.New(softnic.Options{}), exec.Options{Engine: exec.Offload, Timeline: true})
	require.ErrorContains(t, err, "timeline needs the poll engine")
}
