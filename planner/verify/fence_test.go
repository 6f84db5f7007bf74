package verify

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFences: which barriers around an iteration a plan makes unnecessary.
func TestFences(t *testing.T) {
	cases := []struct {
		name, src           string
		start, landed, done bool
	}{
		{"two-sided only", `plan p
param ranks = 2
buffer a u64[4]
buffer b u64[4]
queue q to 1 - rank
op tx = send q a
op rx = recv q b
`, false, false, false},
		// A plain write: nothing of its target precedes or follows it.
		{"bare write", `plan p
param ranks = 2
buffer a u64[4] remote_write
queue q to 1 - rank
if rank == 0 { op w = write q a to a }
`, true, true, true},
		// The target asks for the data and learns of its arrival: no barrier, but the write's
		// completion at the writer follows nothing of the target.
		{"requested notify write", `plan p
param ranks = 2
buffer a u64[4] remote_write
buffer t u64[1]
queue q to 1 - rank
if rank == 1 { op ask = send q t }
if rank == 0 { op go = recv q t }
if rank == 0 { op w = write q a to a notify after go }
if rank == 1 { op got = recv q }
`, false, false, true},
		// The writer acknowledges the write after its completion: every barrier can go.
		{"acknowledged write", `plan p
param ranks = 2
buffer a u64[4] remote_write
buffer t u64[1]
queue q to 1 - rank
if rank == 1 { op ask = send q t }
if rank == 0 { op go = recv q t }
if rank == 0 { op w = write q a to a after go }
if rank == 0 { op ack = send q t after w }
if rank == 1 { op acked = recv q t after ask }
`, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := graphOf(t, c.src)
			require.Empty(t, Check(t.Context(), g))
			start, landed, done := Fences(g)
			assert.Equal(t, [3]bool{c.start, c.landed, c.done}, [3]bool{start, landed, done})
		})
	}
	src, err := os.ReadFile("../../plans/ring_allreduce.dag")
	require.NoError(t, err)
	start, landed, done := Fences(graphOf(t, string(src)))
	assert.Equal(t, [3]bool{false, false, true}, [3]bool{start, landed, done}, "ring allreduce")
}
