package exec

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/planner/lower"
)

// cancelingNIC is the software NIC that, once armed, cancels a context when an engine first asks
// it to progress: the context ends while the iteration runs.
type cancelingNIC struct {
	*softnic.NIC
	cancel func()
}

func (n *cancelingNIC) Progress() int {
	if n.cancel != nil {
		n.cancel()
		n.cancel = nil
	}
	return n.NIC.Progress()
}

// TestCancelInsideIteration: a context cancelled as an iteration starts, or while it runs,
// stops it long before its end, with the context's cause, on both engines. The iteration is one
// of 100,000 ops on the software NIC, which keeps moving all along, so the watch never sees a
// quiet round: the engine looks at the context every ctxEvery of its work (the offload engine
// while it posts its chains too), and the NIC's Progress returns every few thousand steps (the
// offload engine has posted every chain, and the NIC could run them all in one call).
func TestCancelInsideIteration(t *testing.T) {
	const ops = 100_000
	for _, c := range []struct {
		engine  Engine
		target  string
		running bool // cancelled when the engine first asks the NIC to progress, else at the start
	}{{Poll, "generic", false}, {Poll, "generic", true}, {Offload, "connectx", false}, {Offload, "connectx", true}} {
		name := c.engine.String() + "/start"
		if c.running {
			name = c.engine.String() + "/running"
		}
		t.Run(name, func(t *testing.T) {
			g := dispatchPlan(ops)
			for i := range g.Queues {
				if c.engine == Offload {
					g.Queues[i].Depth = 1 << 14 // connectx posts whole chains: 12,500 requests each
				}
			}
			plan, err := lower.Compile(context.Background(), g, mustTarget(t, c.target))
			require.NoError(t, err)
			p := &cancelingNIC{NIC: softnic.New(softnic.Options{NoCrossChannel: c.engine == Poll})}
			s, err := Prepare(context.Background(), plan, p, Options{Engine: c.engine})
			require.NoError(t, err)
			defer s.Close()
			stop := errors.New("stopped by the test")
			ctx, cancel := context.WithCancelCause(context.Background())
			res, err := s.RunTimed(ctx, 1, func(iterate func() error) error {
				if c.running {
					p.cancel = func() { cancel(stop) }
				} else {
					cancel(stop) // after RunTimed looked between iterations
				}
				return iterate()
			})
			// Only cancel(stop) gives this cause: when running, the NIC's Progress did.
			require.ErrorIs(t, err, stop)
			t.Logf("of %d ops: %d requests posted, %d completions polled", ops, res.WQEsPosted, res.CQEsPolled)
			assert.Contains(t, err.Error(), "iteration 0")
			assert.Less(t, res.CQEsPolled, uint64(ops/10), "completions before the iteration stopped")
			if c.engine == Poll || !c.running {
				assert.Less(t, res.WQEsPosted, uint64(ops/4), "requests posted before the iteration stopped")
			}
		})
	}
}
