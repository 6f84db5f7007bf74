package minheap

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The heap gives the least value first, pushes and pops mixed, duplicates included.
func TestHeap(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 0))
	h := NewOrdered[uint64]()
	var want []uint64
	for range 2000 {
		if len(want) > 0 && rng.IntN(3) == 0 {
			slices.Sort(want)
			require.Equal(t, want[0], h.Min())
			require.Equal(t, want[0], h.Pop())
			want = want[1:]
			continue
		}
		x := rng.Uint64N(500)
		h.Push(x)
		want = append(want, x)
	}
	slices.Sort(want)
	for _, x := range want {
		require.Equal(t, x, h.Pop())
	}
	require.Zero(t, h.Len())
}

// Under a total order on structs the heap sorts them: ties on the first key are broken by the
// second, whatever the order of the pushes.
func TestHeapStructs(t *testing.T) {
	t.Parallel()
	type ev struct {
		t   float64
		seq int
	}
	rng := rand.New(rand.NewPCG(3, 1))
	h := New(func(x, y *ev) bool {
		if x.t != y.t {
			return x.t < y.t
		}
		return x.seq < y.seq
	})
	var in []ev
	for i := range 500 {
		in = append(in, ev{t: float64(rng.IntN(20)), seq: i})
	}
	rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
	for _, e := range in {
		h.Push(e)
	}
	var out []ev
	for h.Len() > 0 {
		out = append(out, h.Pop())
	}
	require.True(t, slices.IsSortedFunc(out, func(x, y ev) int {
		if x.t != y.t {
			if x.t < y.t {
				return -1
			}
			return 1
		}
		return x.seq - y.seq
	}))
	require.Len(t, out, 500)
}
