package viz_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
	"github.com/coredag/coredag/viz"
)

type traceFile struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
}

// TestTimeline: the trace of a recorded run holds one completion event per op and iteration, at
// the recorded time after the iterations before it, on the track of the op's queue side, and one
// span per rank and iteration.
func TestTimeline(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../plans/ring_allreduce.dag")
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), "ring_allreduce.dag", src, map[string]int64{"ranks": 3}, planner.Options{})
	require.NoError(t, err)
	const iters = 2
	generic, err := ir.LookupTarget("generic")
	require.NoError(t, err)
	plan, err := lower.Compile(t.Context(), g, generic)
	require.NoError(t, err)
	res, err := exec.Run(context.Background(), plan, softnic.New(softnic.Options{NoCrossChannel: true}),
		exec.Options{Engine: exec.Poll, Iters: iters, Timeline: true})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, viz.Timeline(&buf, g, res.Latency.All, res.Timeline))
	var tf traceFile
	require.NoError(t, json.Unmarshal(buf.Bytes(), &tf), buf.String())

	byName := map[string]int{}
	tracks := map[[2]int]string{}
	spans := 0
	for _, ev := range tf.TraceEvents {
		switch ev.Ph {
		case "M":
			if ev.Name == "thread_name" {
				tracks[[2]int{ev.Pid, ev.Tid}] = ev.Args["name"].(string)
			}
		case "X":
			spans++
		case "i":
			it := int(ev.Args["iteration"].(float64))
			id := opByName(t, g, ev.Pid, ev.Name)
			var start time.Duration
			for _, d := range res.Latency.All[:it] {
				start += d
			}
			assert.InDelta(t, float64(start+res.Timeline[it][id])/1e3, ev.Ts, 1e-3, "%s iteration %d", ev.Name, it)
			op := &g.Ops[id]
			want := "host ops"
			if op.Queue != ir.None {
				want = g.Queues[op.Queue].Name + " send"
				if op.Kind.IsRecvSide() {
					want = g.Queues[op.Queue].Name + " recv"
				}
			}
			assert.Contains(t, tracks[[2]int{ev.Pid, ev.Tid}], want, "track of %s", ev.Name)
			byName[g.OpString(id)]++
		}
	}
	assert.Len(t, byName, len(g.Ops))
	for name, n := range byName {
		assert.Equal(t, iters, n, name)
	}
	assert.Equal(t, iters*g.Ranks, spans)

	err = viz.Timeline(&buf, g, res.Latency.All[:1], res.Timeline)
	assert.ErrorContains(t, err, "1 iterations timed but 2 recorded")
}

func opByName(t *testing.T, g *ir.Graph, rank int, name string) ir.OpID {
	first, end := g.RankOps(rank)
	for id := first; id < end; id++ {
		if g.Ops[id].Name == name {
			return id
		}
	}
	t.Fatalf("no op %s on rank %d", name, rank)
	return ir.None
}
