package prove

import (
	"encoding/binary"
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
// b's initial contents on q. Shapes are interned with the first initial-memory atom's v made 0
// (the rest goes into the segment's shift), so a copy to another offset only changes the shift,
// and a whole buffer, however large, is a few segments.

type atomKind uint8

const (
	atomInit   atomKind = iota // an element of the initial memory: rank, buf, v = offset delta
	atomConst                  // a constant: v
	atomOpaque                 // a value that depends on values (cas): v = the op that made it
)

type atom struct {
	kind atomKind
	rank int32
	buf  ir.BufID
	v    int64
}

func (a atom) less(b atom) bool {
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	if a.buf != b.buf {
		return a.buf < b.buf
	}
	return a.v < b.v
}

// plain is the operator of a shape with one atom.
const plain = ir.ReduceOp(0xff)

type shape struct {
	red   ir.ReduceOp // plain when len(atoms) == 1
	atoms []atom      // sorted; the first atomInit has v == 0
}

// idempotent reports whether x op x == x: such reductions are sets of atoms, the others multisets.
func idempotent(r ir.ReduceOp) bool {
	return r == ir.RedMin || r == ir.RedMax || r == ir.RedBand || r == ir.RedBor
}

// shapes interns shapes: equal values have equal ids.
type shapes struct {
	list  []shape
	index map[string]int32
	key   []byte
	buf   []atom // scratch for merge
}

func newShapes() *shapes { return &shapes{index: map[string]int32{}} }

// intern returns the id of the shape (red, atoms) and the shift that normalises it; atoms must
// be sorted and is copied when new.
func (s *shapes) intern(red ir.ReduceOp, atoms []atom) (int32, int64) {
	var shift int64
	for _, a := range atoms {
		if a.kind == atomInit {
			shift = a.v
			break
		}
	}
	if len(atoms) == 1 {
		red = plain
	}
	k := append(s.key[:0], byte(red))
	for _, a := range atoms {
		v := a.v
		if a.kind == atomInit {
			v -= shift
		}
		k = append(k, byte(a.kind))
		k = binary.AppendVarint(k, int64(a.rank))
		k = binary.AppendVarint(k, int64(a.buf))
		k = binary.AppendVarint(k, v)
	}
	s.key = k
	if id, ok := s.index[string(k)]; ok {
		return id, shift
	}
	own := slices.Clone(atoms)
	for i := range own {
		if own[i].kind == atomInit {
			own[i].v -= shift
		}
	}
	id := int32(len(s.list))
	s.list = append(s.list, shape{red: red, atoms: own})
	s.index[string(k)] = id
	return id, shift
}

// one is the id and shift of a single atom.
func (s *shapes) one(a atom) (int32, int64) { return s.intern(plain, []atom{a}) }

// merge is the shape of (a at shift sa) red (b at shift sb). A reduction whose operand is a
// reduction with another operator is opaque, made by op: the proof does not expand mixed
// operators.
func (s *shapes) merge(a int32, sa int64, b int32, sb int64, red ir.ReduceOp, op ir.OpID, rank int) (int32, int64) {
	A, B := &s.list[a], &s.list[b]
	if A.red != plain && A.red != red || B.red != plain && B.red != red {
		return s.one(atom{kind: atomOpaque, rank: int32(rank), v: int64(op)})
	}
	out := s.buf[:0]
	i, j := 0, 0
	at := func(x atom, shift int64) atom {
		if x.kind == atomInit {
			x.v += shift
		}
		return x
	}
	for i < len(A.atoms) || j < len(B.atoms) {
		var x atom
		switch {
		case j == len(B.atoms) || i < len(A.atoms) && !at(B.atoms[j], sb).less(at(A.atoms[i], sa)):
			x = at(A.atoms[i], sa)
			i++
		default:
			x = at(B.atoms[j], sb)
			j++
		}
		if idempotent(red) && len(out) > 0 && out[len(out)-1] == x {
			continue
		}
		out = append(out, x)
	}
	s.buf = out
	return s.intern(red, out)
}

// at returns the atoms of shape id displaced by shift (a new slice).
func (s *shapes) at(id int32, shift int64) (ir.ReduceOp, []atom) {
	sh := &s.list[id]
	out := slices.Clone(sh.atoms)
	for i := range out {
		if out[i].kind == atomInit {
			out[i].v += shift
		}
	}
	return sh.red, out
}
