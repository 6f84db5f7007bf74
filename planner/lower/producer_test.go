package lower_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/lower"
)

// TestProducerOfCompiledWaits checks Producer against the counts the compiler gave WAITs and
// HOST steps: every condition's producer is a WQE of the op it stands for (the NOP after the
// HOST entry for a host op).
func TestProducerOfCompiledWaits(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	// A plan may need no condition on a target (onesided_allgather's ops wait only for their
	// queue's order and for host steps): the plans together must have some on each.
	conds := map[string]int{}
	for _, f := range files {
		g := load(t, f, nil)
		for _, tg := range ir.Targets() {
			if tg.Trigger != nil {
				continue // no WAITs or host waits: triggered work names its cause (trigger_test.go)
			}
			p, err := lower.Compile(t.Context(), g, tg)
			require.NoError(t, err, "%s %s", f, tg.Name)
			for r := range p.Ranks {
				rp := &p.Ranks[r]
				for wi := range rp.Queues {
					for k := range rp.Queues[wi].Chain {
						e := &rp.Queues[wi].Chain[k]
						var cs []ir.Cond
						switch e.Opcode {
						case ir.OpcWait:
							cs = []ir.Cond{e.Wait}
						case ir.OpcHost:
							cs = e.Waits
						}
						for _, c := range cs {
							conds[tg.Name]++
							at := fmt.Sprintf("%s %s rank %d %s[%d]", f, tg.Name, r, rp.Queues[wi].Name, k)
							q, i, ok := p.Producer(r, int(c.CQ), c.Count)
							require.True(t, ok, at)
							w := &rp.Queues[q].Chain[i]
							assert.True(t, w.Completes(), at)
							assert.Equal(t, c.Op, w.Op, at)
							assert.Equal(t, q, rp.CQs[c.CQ].Queue, at)
						}
					}
				}
			}
		}
	}
	for _, tg := range ir.Targets() {
		if tg.CrossChannel {
			assert.NotZero(t, conds[tg.Name], "%s: no condition checked", tg.Name)
		}
	}
}
