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
	t.Parallel()
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
	t.Parallel()
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

// TestMerge merges random shapes over a few ranks and elements, some overlapping in ranks and
// some not, and checks every result against the multiset (or, for an idempotent operator, the
// set) of the operands' atoms.
func TestMerge(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	const ranks = 8
	type key struct {
		kind atomKind
		v    int64
	}
	keys := []key{{atomInit, 0}, {atomInit, 1}, {atomInit, 5}, {atomConst, 2}}
	// random makes a canonical shape: per element, counts by rank, in maximal runs.
	random := func(s *shapes, red ir.ReduceOp) (int32, int64) {
		var terms []term
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				continue
			}
			lo := int32(rng.IntN(ranks))
			hi := lo + int32(rng.IntN(ranks-int(lo)))
			for r := lo; r <= hi; r++ {
				if rng.IntN(4) == 0 {
					continue // a hole: the ranks come in several runs
				}
				n := int32(1)
				if !idempotent(red) {
					n += int32(rng.IntN(2))
				}
				if p := len(terms) - 1; p >= 0 && terms[p].v == k.v && terms[p].kind() == k.kind && terms[p].hi+1 == r && terms[p].n == n {
					terms[p].hi = r
					continue
				}
				terms = append(terms, term{elem: elemOf(k.kind, 0), v: k.v, lo: r, hi: r, n: n})
			}
		}
		if len(terms) == 0 {
			terms = []term{{elem: elemOf(atomInit, 0), lo: 0, hi: 0, n: 1}}
		}
		return s.make(red, terms)
	}
	disjoint := 0
	for range 3000 {
		red := ir.RedSum
		if rng.IntN(3) == 0 {
			red = ir.RedMax
		}
		s := newShapes(4)
		a, sa := random(s, red)
		b, sb := random(s, red)
		sa += int64(rng.IntN(3))
		sb += int64(rng.IntN(3))
		want := expanded(s, a, sa)
		got := expanded(s, b, sb)
		want = append(want, got...)
		slices.SortFunc(want, func(x, y atom) int {
			if x.less(y) {
				return -1
			}
			if y.less(x) {
				return 1
			}
			return 0
		})
		if idempotent(red) {
			want = slices.Compact(want)
		}
		m, sm := s.merge(a, sa, b, sb, red, 0, 0)
		gotRed, _, _ := s.at(m, sm)
		atoms := expanded(s, m, sm)
		require.Equal(t, want, atoms)
		if len(want) > 1 {
			require.Equal(t, red, gotRed)
		}
		// The result is canonical: its terms are maximal (none continues the one before).
		ts := s.termsOf(m)
		for i := 1; i < len(ts); i++ {
			p, q := ts[i-1], ts[i]
			require.True(t, termLess(&p, &q))
			require.False(t, p.sameElem(&q) && (p.hi >= q.lo || p.hi+1 == q.lo && p.n == q.n), "terms %v", ts)
		}
		if _, ok := interleave(nil, term{}, s.termsOf(a), s.termsOf(b), false); ok {
			disjoint++
		}
	}
	require.Greater(t, disjoint, 300, "the disjoint case is tested")
}

// expanded is the atoms of shape id at shift, each as many times as it counts.
func expanded(s *shapes, id int32, shift int64) []atom {
	_, cs, whole := s.at(id, shift)
	if !whole {
		panic("a test shape too large to list")
	}
	var out []atom
	for _, c := range cs {
		for range c.n {
			out = append(out, c.atom)
		}
	}
	return out
}

// TestMergeCountsChecked: a sum that would count one atom past maxCount is atomTooMany, which
// equals no other shape, instead of a count that wraps (2^32 + 1 copies of a0 were a0); an
// idempotent operator's counts stay 1, and atomTooMany terms do not add up either.
func TestMergeCountsChecked(t *testing.T) {
	t.Parallel()
	s := newShapes(0)
	a0, _ := s.one(atom{kind: atomInit, rank: 0})
	big, _ := s.make(ir.RedSum, []term{{elem: elemOf(atomInit, 0), lo: 0, hi: 0, n: maxCount}})
	half, _ := s.make(ir.RedSum, []term{{elem: elemOf(atomInit, 0), lo: 0, hi: 0, n: maxCount/2 + 1}})

	m, _ := s.merge(half, 0, half, 0, ir.RedSum, 7, 3)
	ts := s.termsOf(m)
	require.Len(t, ts, 1)
	require.Equal(t, atomTooMany, ts[0].kind(), "2^31 copies")
	require.Equal(t, int64(7), ts[0].v, "made by op 7")
	require.Equal(t, int32(3), ts[0].lo, "on rank 3")
	require.False(t, s.equal(m, a0))
	_, ok := s.tooMany(m)
	require.True(t, ok)

	m2, _ := s.merge(m, 0, m, 0, ir.RedSum, 8, 3)
	require.Equal(t, []term{{elem: elemOf(atomTooMany, 0), v: 7, lo: 3, hi: 3, n: 1}}, s.termsOf(m2))

	mx, _ := s.merge(a0, 0, a0, 0, ir.RedMax, 9, 0)
	for range 40 {
		mx, _ = s.merge(mx, 0, mx, 0, ir.RedMax, 9, 0)
	}
	require.Equal(t, []term{{elem: elemOf(atomInit, 0), lo: 0, hi: 0, n: 1}}, s.termsOf(mx), "max keeps one copy")
	ok2, _ := s.merge(half, 0, a0, 0, ir.RedSum, 10, 0)
	require.Equal(t, int32(maxCount/2+2), s.termsOf(ok2)[0].n)
	over, _ := s.merge(big, 0, a0, 0, ir.RedSum, 11, 0)
	_, ok = s.tooMany(over)
	require.True(t, ok, "maxCount + 1")
}
