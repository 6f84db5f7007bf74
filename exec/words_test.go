package exec_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec"
	"github.com/coredag/coredag/exec/softnic"
	"github.com/coredag/coredag/planner"
)

// wordInitSrc: rank 1 adds 1 to a word of rank 0 that starts at 5, and rank 0 waits for 6.
const wordInitSrc = `plan word_init
param ranks = 2
buffer word u64[1] remote_atomic init 5
queue q to 1 - rank peer q
if rank == 1 {
  op bump = atomic add q word[0] 1
}
if rank == 0 {
  op got = wait word[0] >= 6
}
`

// TestOpWordStartsAtInit: in an Op, whose starts reset no buffer, a watched word starts at its
// init, as check proved its waits from (the word's buffer is never extern, so nobody else sets
// it); it then grows by its adds every start, on every engine.
func TestOpWordStartsAtInit(t *testing.T) {
	g, err := planner.Load(t.Context(), "word_init.dag", []byte(wordInitSrc), nil, planner.Options{})
	require.NoError(t, err, "the plan passes check")
	for _, c := range engineCases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := compileFor(g, c.target)
			require.NoError(t, err)
			nic := softnic.New(softnic.Options{NoCrossChannel: !c.cross, Triggers: c.trig})
			op, err := exec.NewOp(plan, nic, exec.Options{Engine: c.engine, HangTimeout: 2 * time.Second})
			require.NoError(t, err)
			defer op.Close()
			for i := range 3 {
				require.NoError(t, op.Start(), "start %d", i+1)
				require.NoError(t, op.Wait(context.Background()), "start %d", i+1)
				word, ok := exec.BufferByName(g, "word")
				require.True(t, ok)
				require.Equal(t, uint64(6+i), op.MemoryForTest().Elem(0, word, 0), "the word after start %d", i+1)
			}
		})
	}
}
