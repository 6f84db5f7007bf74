//go:build ofi && linux

package coredag

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOFIRingAllreduce runs the ring allreduce on the caller's arrays over libfabric's sockets
// provider, every rank in this process, on both engines: the caller's memory registered with
// fi_mr_reg (RegisterMR), fresh data each iteration.
func TestOFIRingAllreduce(t *testing.T) {
	t.Setenv("FI_SOCKETS_IFACE", "lo")
	for _, tc := range []struct{ engine, target string }{{"offload", "triggered-sockets"}, {"poll", "generic"}} {
		t.Run(tc.engine, func(t *testing.T) {
			const ranks, n, iters = 3, 256, 10
			p, err := Open("plans/ring_allreduce.dag", Options{Params: map[string]int64{"ranks": ranks, "n": n},
				Provider: "ofi", OFIProvider: "sockets", Engine: tc.engine, Target: tc.target, HangTimeout: 10 * time.Second})
			require.NoError(t, err)
			c, err := p.Init(context.Background(), nil)
			require.NoError(t, err)
			defer c.Close()
			data := make([][]float32, ranks)
			for r := range data {
				data[r] = make([]float32, ranks*n)
				require.NoError(t, BindSlice(c, r, "data", data[r]))
			}
			want := make([]float32, ranks*n)
			peer := make([]float32, ranks*n)
			for it := 0; it < iters; it++ {
				clear(want)
				for r := range data {
					fill(data[r], r, it)
					fill(peer, r, it)
					for i := range want {
						want[i] += peer[i]
					}
				}
				require.NoError(t, c.Start())
				require.NoError(t, c.Wait(context.Background()))
				for r := range data {
					assert.Equal(t, want, data[r], "rank %d iteration %d", r, it)
				}
			}
		})
	}
}

// TestOFIWorlds runs the ring allreduce as one Coll per rank, each with its own libfabric
// provider (sockets), connected through channel Worlds as separate processes would be; a rank
// rebinds the buffer its peer writes into, and the new key reaches the peer at the next start.
func TestOFIWorlds(t *testing.T) {
	t.Setenv("FI_SOCKETS_IFACE", "lo")
	for _, tc := range []struct{ engine, target string }{{"offload", "triggered-sockets"}, {"poll", "generic"}} {
		t.Run(tc.engine, func(t *testing.T) {
			const ranks, n = 2, 64
			p, err := Open("plans/ring_allreduce.dag", Options{Params: map[string]int64{"ranks": ranks, "n": n},
				Provider: "ofi", OFIProvider: "sockets", Engine: tc.engine, Target: tc.target, HangTimeout: 10 * time.Second})
			require.NoError(t, err)
			colls := initWorlds(t, p, ranks)
			d := [][]float32{make([]float32, ranks*n), make([]float32, ranks*n)}
			for r, c := range colls {
				require.NoError(t, BindSlice(c, r, "data", d[r]))
			}
			step := func(it int) {
				want := make([]float32, ranks*n)
				for r := range d {
					fill(d[r], r, it)
					x := make([]float32, ranks*n)
					fill(x, r, it)
					for i := range want {
						want[i] += x[i]
					}
				}
				startAll(t, colls)
				for r := range d {
					assert.Equal(t, want, d[r], "rank %d iteration %d", r, it)
				}
			}
			step(0)
			step(1)
			d[1] = make([]float32, ranks*n)
			require.NoError(t, BindSlice(colls[1], 1, "data", d[1]))
			step(2)
			step(3)
		})
	}
}
