package replay

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
	"github.com/coredag/coredag/planner/lower"
)

// The abstract execution on its own (without the necessity graph's cycle check, which catches
// the same plan first) must also see that a SEND waits for the peer's receive to be posted, and
// that the RECV_EN behind it never runs.
func TestProgressModelsReceiverNotReady(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../testdata/compile/exchange.dag")
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), "exchange.dag", src, nil, planner.Options{})
	require.NoError(t, err)
	tg, err := ir.LookupTarget("connectx-inline")
	require.NoError(t, err)
	p, err := lower.Compile(t.Context(), g, tg)
	require.NoError(t, err)
	progress := func() *checker {
		c := &checker{p: p, g: g, opt: Options{Iterations: 2, FirstIter: 1<<16 - 1}}
		c.index()
		c.checkProgress(t.Context())
		return c
	}
	require.Empty(t, progress().errs)
	for r := range p.Ranks {
		chain := p.Ranks[r].Queues[p.Ranks[r].SendWQ[0]].Chain
		require.Equal(t, ir.OpcRecvEnable, chain[0].Opcode)
		chain[0], chain[1] = chain[1], chain[0] // SEND tx, then RECV_EN rx
	}
	c := progress()
	require.NotEmpty(t, c.errs)
	msg := c.errs[0].Msg
	assert.Contains(t, msg, "never finishes")
	assert.Contains(t, msg, "rank 0 q.sq[0] SEND (tx) is retried (receiver not ready) until its peer rank 1 q.rq[0] RECV is posted")
	assert.Contains(t, msg, "rank 1 q.sq[0] SEND (tx) is retried (receiver not ready) until its peer rank 0 q.rq[0] RECV is posted")
}
