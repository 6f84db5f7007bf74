package prove

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coredag/coredag/ir"
)

// TestSegList replaces runs of a gap buffer at random places, near the last one and far from
// it, and checks its list, its length and find at every offset against a plain slice.
func TestSegList(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const count = 64
	model := []seg{{lo: 0, hi: count}}
	l := segList{s: []cell{{hi: count}}, gap: 1}
	last := 0
	for step := range 2000 {
		// Cut [lo, hi) into 1 to 3 new segments, starting near the last write or anywhere.
		lo := int64(rng.IntN(count))
		if rng.IntN(2) == 0 {
			lo = min(int64(last+rng.IntN(3)), count-1)
		}
		hi := lo + 1 + int64(rng.IntN(int(count-lo)))
		var repl []seg
		for at := lo; at < hi; {
			end := min(hi, at+1+int64(rng.IntN(8)))
			repl = append(repl, seg{lo: at, hi: end, by: ir.OpID(step)})
			at = end
		}
		i := slices.IndexFunc(model, func(s seg) bool { return s.hi > lo })
		j := slices.IndexFunc(model, func(s seg) bool { return s.lo >= hi })
		if j < 0 {
			j = len(model)
		}
		// Keep the cut parts of the first and last segments, as put does.
		v := slices.Clone(repl)
		if first := model[i]; first.lo < lo {
			first.hi = lo
			v = append([]seg{first}, v...)
		}
		if end := model[j-1]; end.hi > hi {
			end.lo = hi
			v = append(v, end)
		}
		require.Equal(t, i, l.find(lo), "step %d: find(%d)", step, lo)
		model = slices.Replace(model, i, j, v...)
		l.replace(i, j, v)
		last = i
		require.Equal(t, len(model), l.len(), "step %d", step)
		for k := range model {
			require.Equal(t, model[k], l.seg(k), "step %d: segment %d", step, k)
		}
		for off := int64(0); off < count; off++ {
			want := slices.IndexFunc(model, func(s seg) bool { return s.hi > off })
			require.Equal(t, want, l.find(off), "step %d: find(%d) with the gap at %d", step, off, l.gap)
		}
	}
}

// TestShapesEqual: shapes are not interned, so equal values made apart have different ids, and
// equal tells them the same; it tells different values apart however they differ.
func TestShapesEqual(t *testing.T) {
	s := newShapes(0)
	a0, _ := s.one(atom{kind: atomInit, rank: 0})
	a1, _ := s.one(atom{kind: atomInit, rank: 1})
	a2, _ := s.one(atom{kind: atomInit, rank: 2})
	sum01, sh01 := s.merge(a0, 0, a1, 0, ir.RedSum, 0, 0)
	sum10, sh10 := s.merge(a1, 0, a0, 0, ir.RedSum, 1, 1)
	require.NotEqual(t, sum01, sum10)
	require.True(t, s.equal(sum01, sum10), "a sum is the same whatever the order of its terms")
	require.Equal(t, sh01, sh10)
	all, _ := s.all(ir.RedSum, 0, 2)
	require.True(t, s.equal(sum01, all), "ranks 0 and 1 added are the sum over 2 ranks")

	max01, _ := s.merge(a0, 0, a1, 0, ir.RedMax, 2, 0)
	sum02, _ := s.merge(a0, 0, a2, 0, ir.RedSum, 3, 0)
	twice, _ := s.merge(sum01, 0, a0, 0, ir.RedSum, 4, 0)
	other, _ := s.merge(a0, 0, a1, 5, ir.RedSum, 5, 0) // rank 1's element 5 on
	buf1, _ := s.one(atom{kind: atomInit, rank: 0, buf: 1})
	for _, d := range []int32{max01, sum02, twice, other, a0, buf1} {
		require.False(t, s.equal(sum01, d), "shape %d", d)
		require.False(t, s.equal(d, sum01), "shape %d", d)
	}
	require.False(t, s.equal(a0, buf1))
	require.False(t, s.equal(a0, a1))
}
