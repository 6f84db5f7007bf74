package exec

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner"
)

// driveCount is a context that moves data only inside the host's calls (nic.HostProgress),
// counting them.
type driveCount struct {
	n   int
	err error
}

func (d *driveCount) DriveProgress() error { d.n++; return d.err }

// TestDriveParked: while waits are parked on a NIC that moves data only inside the host's calls,
// each round progresses the context of every rank with a parked wait, once however many of its
// waits are parked, and no other; a failed progress names the rank and the wait.
func TestDriveParked(t *testing.T) {
	const path = "../docs/examples/counted_ring.dag"
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	g, err := planner.Load(t.Context(), path, src, map[string]int64{"ranks": 3}, planner.Options{})
	require.NoError(t, err)
	waits := map[int32][]int32{}
	for id := range g.Ops {
		if op := &g.Ops[id]; op.Kind == ir.OpWait {
			waits[op.Rank] = append(waits[op.Rank], int32(id))
		}
	}
	require.GreaterOrEqual(t, len(waits[0]), 2)
	require.NotEmpty(t, waits[2])

	devs := []*driveCount{{}, {}, {}}
	e := &pollEngine{g: g, drive: []nic.HostProgress{devs[0], devs[1], devs[2]}, drivenAt: make([]uint64, 3)}
	require.NoError(t, e.driveParked())
	assert.Equal(t, []int{0, 0, 0}, []int{devs[0].n, devs[1].n, devs[2].n}, "nothing parked, nothing driven")

	e.parked = []int32{waits[0][0], waits[2][0], waits[0][1]}
	for range 3 {
		require.NoError(t, e.driveParked())
	}
	assert.Equal(t, []int{3, 0, 3}, []int{devs[0].n, devs[1].n, devs[2].n}, "one progress per round of each rank with a parked wait")

	e.drive[2] = nil // a context that progresses by itself
	require.NoError(t, e.driveParked())
	assert.Equal(t, []int{4, 0, 3}, []int{devs[0].n, devs[1].n, devs[2].n})

	devs[0].err = nic.ErrClosed
	err = e.driveParked()
	require.Error(t, err)
	assert.True(t, errors.Is(err, nic.ErrClosed), err)
	assert.Contains(t, err.Error(), "rank 0")
	assert.Contains(t, err.Error(), g.Ops[waits[0][0]].Name)
}
