package prove

import (
	"math"
	"slices"

	"github.com/coredag/coredag/ir"
)

// The symbolic values of the proof. An element's value is a shape: either one atom (a plain
// value) or a reduction with one operator over a multiset of atoms. An atom is an element of some
// rank's initial memory, a constant (an atomic add's addend) or an opaque value (what a
// compare-and-swap leaves, which depends on the values themselves).
//
// A run of memory holds one shape at every element, displaced by the element's offset: the atom
// (rank q, buffer b, v) at offset off of a segment with shift s stands for element off + v + s of
// b's initial contents on q. Shapes are kept with the first initial-memory atom's v made 0
// (the rest goes into the segment's shift), so a copy to another offset only changes the shift,
// and a whole buffer, however large, is a few segments.
//
// A shape stores its atoms as terms: the same element (kind, buf, v) on a range of consecutive
// ranks, each counted n times. The sum over all ranks of one element is one term, so shapes stay
// small however many ranks there are.

type atomKind uint8

const (
	atomInit   atomKind = iota // an element of the initial memory: rank, buf, v = offset delta
	atomConst                  // a constant: v
	atomOpaque                 // a value that depends on values (cas): v = the op that made it
	// a reduction that would count some atom more than maxCount times, made by op v on rank:
	// the proof cannot say what it is, and no postcondition asks for it
	atomTooMany
)

// maxCount is the most times a shape counts one atom (a term's n). A reduction past it is
// atomTooMany: a count that wrapped would claim a value the plan does not compute (a0 added
// 2^32+1 times is not a0).
const maxCount = math.MaxInt32

// atom is one contribution, for messages: terms expanded.
type atom struct {
	kind atomKind
	rank int32
	buf  ir.BufID
	v    int64
}

// less orders atoms as their terms are ordered (termLess).
func (a atom) less(b atom) bool {
	x, y := a.term(), b.term()
	return termLess(&x, &y)
}

// term is a as a term of one rank.
func (a atom) term() term {
	return term{elem: elemOf(a.kind, a.buf), v: a.v, lo: a.rank, hi: a.rank, n: 1}
}

// term is atoms (kind, buf, v) of ranks lo..hi (inclusive), each counted n times. A shape is
// made of terms, and there is one shape per reduce: a term is kept in 24 bytes.
type term struct {
	v      int64
	lo, hi int32
	n      int32
	elem   uint32 // elemOf(kind, buf)
}

// elemOf packs an atom's kind and buffer, ordered as the pair (kind, buf). A graph has fewer
// than 2^30 buffers: each takes far more than 4 bytes of memory.
func elemOf(k atomKind, b ir.BufID) uint32 { return uint32(k)<<30 | uint32(b) }

func (a *term) kind() atomKind { return atomKind(a.elem >> 30) }
func (a *term) buf() ir.BufID  { return ir.BufID(a.elem & (1<<30 - 1)) }

// sameElem reports whether a and b are about the same element (they may differ in ranks).
func (a term) sameElem(b *term) bool { return a.elem == b.elem && a.v == b.v }

// plain is the operator of a shape with one atom.
const plain = ir.ReduceOp(0xff)

type shape struct {
	// terms[at : at+n] of the table's arena: sorted by (kind, buf, v, lo), disjoint, maximal;
	// the first atomInit has v == 0.
	at, n int32
	red   ir.ReduceOp // plain when it is one atom
}

// idempotent reports whether x op x == x: such reductions are sets of atoms, the others multisets.
func idempotent(r ir.ReduceOp) bool {
	return r == ir.RedMin || r == ir.RedMax || r == ir.RedBand || r == ir.RedBor
}

// shapes is the table of shapes. A shape is added once made and never changes; it is not
// interned (an index of every shape would grow with the ops and cost a cache miss per lookup):
// two ids may name equal shapes, and equal compares them. Since shapes are canonical, equal
// values have equal shapes.
type shapes struct {
	list  []shape
	terms []term  // the arena of every shape's terms
	buf   []term  // scratch for merge
	cuts  []int32 // scratch for merge
	over  bool    // combine met a count past maxCount

	// maxTerms is the most terms the table may hold; make sets full rather than pass it.
	maxTerms int
	full     bool
	renamed  []int32 // scratch of keep
}

// keep keeps only the shapes ids names and renames each id of ids to its shape's new id. The
// table is compacted in place: shapes are made in the order of their terms, so a kept shape
// moves down in both lists, never over one still to be moved.
func (s *shapes) keep(ids []int32) {
	renamed := s.renamed[:0]
	renamed = append(renamed, make([]int32, len(s.list))...) // old id -> new id + 1; 0: dropped
	for _, id := range ids {
		renamed[id] = 1
	}
	list, terms := s.list[:0], s.terms[:0]
	for id := range renamed {
		if renamed[id] == 0 {
			continue
		}
		old := s.list[id]
		at := int32(len(terms))
		terms = append(terms, s.terms[old.at:old.at+old.n]...)
		list = append(list, shape{at: at, n: old.n, red: old.red})
		renamed[id] = int32(len(list))
	}
	for i, id := range ids {
		ids[i] = renamed[id] - 1
	}
	s.list, s.terms, s.renamed = list, terms, renamed
}

// newShapes makes a table for about n shapes, of up to 2 terms each (a sum over a range of ranks
// that wraps around is 2).
func newShapes(n int) *shapes {
	return &shapes{list: make([]shape, 0, n), terms: make([]term, 0, 2*n)}
}

// termsOf returns the terms of shape id (valid until the next shape is made).
func (s *shapes) termsOf(id int32) []term {
	sh := &s.list[id]
	return s.terms[sh.at : sh.at+sh.n]
}

// equal reports whether shapes a and b are the same value.
func (s *shapes) equal(a, b int32) bool {
	if a == b {
		return true
	}
	A, B := &s.list[a], &s.list[b]
	return A.red == B.red && A.n == B.n && slices.Equal(s.termsOf(a), s.termsOf(b))
}

// make adds the shape (red, terms) and returns its id and the shift that normalises it; terms
// must be canonical (sorted, disjoint, maximal) and are copied.
func (s *shapes) make(red ir.ReduceOp, terms []term) (int32, int64) {
	var shift int64
	for _, t := range terms {
		if t.kind() == atomInit {
			shift = t.v
			break
		}
	}
	if len(terms) == 1 && terms[0].lo == terms[0].hi && terms[0].n == 1 {
		red = plain
	}
	if s.maxTerms > 0 && len(s.terms)+len(terms) > s.maxTerms {
		s.full = true // the replay stops after this op: what it makes meanwhile is not kept
		return 0, 0
	}
	at := len(s.terms)
	s.terms = append(s.terms, terms...)
	for i := at; i < len(s.terms); i++ {
		if s.terms[i].kind() == atomInit {
			s.terms[i].v -= shift
		}
	}
	id := int32(len(s.list))
	s.list = append(s.list, shape{red: red, at: int32(at), n: int32(len(terms))})
	return id, shift
}

// one is the id and shift of a single atom.
func (s *shapes) one(a atom) (int32, int64) {
	return s.make(plain, []term{a.term()})
}

// merge is the shape of (a at shift sa) red (b at shift sb). A reduction whose operand is a
// reduction with another operator is opaque, made by op on rank: the proof does not expand
// mixed operators.
func (s *shapes) merge(a int32, sa int64, b int32, sb int64, red ir.ReduceOp, op ir.OpID, rank int) (int32, int64) {
	ra, rb := s.list[a].red, s.list[b].red
	if ra != plain && ra != red || rb != plain && rb != red {
		return s.one(atom{kind: atomOpaque, rank: int32(rank), v: int64(op)})
	}
	at := func(t term, shift int64) term {
		if t.kind() == atomInit {
			t.v += shift
		}
		return t
	}
	A, B := s.termsOf(a), s.termsOf(b)
	out := s.buf[:0]
	i, j := 0, 0
	for i < len(A) || j < len(B) {
		// The next element, and every term of A and of B about it.
		var x term
		switch {
		case j == len(B):
			x = at(A[i], sa)
		case i == len(A):
			x = at(B[j], sb)
		default:
			x = at(A[i], sa)
			if y := at(B[j], sb); termLess(&y, &x) {
				x = y
			}
		}
		i0, j0 := i, j
		for i < len(A) && at(A[i], sa).sameElem(&x) {
			i++
		}
		for j < len(B) && at(B[j], sb).sameElem(&x) {
			j++
		}
		out = s.combine(out, x, A[i0:i], B[j0:j], idempotent(red) || x.kind() == atomTooMany)
	}
	s.buf = out
	if s.over {
		s.over = false
		return s.one(atom{kind: atomTooMany, rank: int32(rank), v: int64(op)})
	}
	return s.make(red, out)
}

// termLess orders terms by element, then by first rank.
func termLess(a, b *term) bool {
	if a.elem != b.elem {
		return a.elem < b.elem
	}
	if a.v != b.v {
		return a.v < b.v
	}
	return a.lo < b.lo
}

// combine appends to out the terms of element x that a and b (x's terms in each operand) make
// together: counts add up, or, for an idempotent operator, are 1.
func (s *shapes) combine(out []term, x term, a, b []term, idem bool) []term {
	if out, ok := interleave(out, x, a, b, idem); ok {
		return out
	}
	cuts := s.cuts[:0]
	for _, ts := range [2][]term{a, b} {
		for _, t := range ts {
			cuts = append(cuts, t.lo, t.hi+1)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	s.cuts = cuts
	count := func(ts []term, r int32) int32 {
		for _, t := range ts {
			if t.lo <= r && r <= t.hi {
				return t.n
			}
		}
		return 0
	}
	for k := 0; k+1 < len(cuts); k++ {
		lo, hi := cuts[k], cuts[k+1]-1
		sum := int64(count(a, lo)) + int64(count(b, lo))
		if sum == 0 {
			continue
		}
		if idem {
			sum = 1
		}
		if sum > maxCount {
			s.over = true
			sum = maxCount
		}
		n := int32(sum)
		if p := len(out) - 1; p >= 0 && out[p].sameElem(&x) && out[p].hi+1 == lo && out[p].n == n {
			out[p].hi = hi
			continue
		}
		t := x
		t.lo, t.hi, t.n = lo, hi, n
		out = append(out, t)
	}
	return out
}

// interleave is combine when no rank is in both a and b (the common case: a reduction adds a
// range of ranks next to its own), where no count adds up: the terms of a and b in order of
// rank, joined where they meet with the same count. It reports false, and appends nothing, when
// a rank is in both.
func interleave(out []term, x term, a, b []term, idem bool) ([]term, bool) {
	n0 := len(out)
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var t term
		if j == len(b) || i < len(a) && a[i].lo < b[j].lo {
			t, i = a[i], i+1
		} else {
			t, j = b[j], j+1
		}
		if idem {
			t.n = 1
		}
		if p := len(out) - 1; p >= n0 {
			if out[p].hi >= t.lo {
				return out[:n0], false
			}
			if out[p].hi+1 == t.lo && out[p].n == t.n {
				out[p].hi = t.hi
				continue
			}
		}
		u := x
		u.lo, u.hi, u.n = t.lo, t.hi, t.n
		out = append(out, u)
	}
	return out, true
}

// counted is an atom counted n times, for messages.
type counted struct {
	atom
	n int64
}

// maxListed bounds the atoms at lists: a message names a few of them.
const maxListed = 1 << 16

// at returns the atoms of shape id displaced by shift, one per rank with its count, sorted (for
// messages); whole is false when there were more than maxListed and the list stops there.
func (s *shapes) at(id int32, shift int64) (red ir.ReduceOp, out []counted, whole bool) {
	for _, t := range s.termsOf(id) {
		v := t.v
		if t.kind() == atomInit {
			v += shift
		}
		for r := t.lo; r <= t.hi; r++ {
			if len(out) == maxListed {
				return s.list[id].red, out, false
			}
			out = append(out, counted{atom{kind: t.kind(), rank: r, buf: t.buf(), v: v}, int64(t.n)})
		}
	}
	return s.list[id].red, out, true
}

// tooMany returns the atomTooMany term of shape id, if it has one.
func (s *shapes) tooMany(id int32) (term, bool) {
	for _, t := range s.termsOf(id) {
		if t.kind() == atomTooMany {
			return t, true
		}
	}
	return term{}, false
}

// all is the reduction with red over every rank of element 0 of buf: what an allreduce asks.
func (s *shapes) all(red ir.ReduceOp, buf ir.BufID, ranks int) (int32, int64) {
	return s.make(red, []term{{elem: elemOf(atomInit, buf), lo: 0, hi: int32(ranks - 1), n: 1}})
}
