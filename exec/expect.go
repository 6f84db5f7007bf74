package exec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/coredag/coredag/ir"
)

// Postconditions on values: what `run` checks besides comparing memory with the reference. A
// plan's own inits often make misplaced data invisible (`init rank + 1` is the same in every
// element of a rank), so the check runs the plan once more from DistinctInits, where every
// (rank, buffer, element) starts with its own value.

// DistinctInits returns a copy of g whose every buffer starts with a value of its own at every
// element of every rank: a hash of (rank, buffer, element), an integer of the buffer's type
// with sparse bits (one in eight for 64-bit types, one in four for 32-bit ones), so that an or
// or and over ranks still shows a missing contribution (for floats, a whole number below 1024, so that sums stay exact). g is not
// changed.
//
// A buffer that holds the word of a wait (wait WORD >= VALUE) keeps its own init: where the
// word starts decides when the wait completes, and what the check proved of it.
func DistinctInits(g *ir.Graph) *ir.Graph {
	out := g.Clone()
	waits := g.WordWaits()
	for b := range out.Buffers {
		if waits[b] != ir.None {
			continue
		}
		buf := &out.Buffers[b]
		t, id := buf.Type, uint64(b)
		buf.Init = func(rank int, dst []byte) error {
			sz := int(t.Size())
			for i := 0; i*sz < len(dst); i++ {
				h := mix(uint64(rank)<<40 ^ id<<32 ^ uint64(i))
				switch t { // sparse bits: an or over ranks does not fill the word
				case ir.I64, ir.U64:
					h &= mix(h) & mix(^h) // one bit in eight
				case ir.I32, ir.U32:
					h &= mix(h) // one in four
				}
				e := dst[i*sz : (i+1)*sz]
				switch t {
				case ir.F32:
					binary.LittleEndian.PutUint32(e, math.Float32bits(float32(1+h%1023)))
				case ir.F64:
					binary.LittleEndian.PutUint64(e, math.Float64bits(float64(1+h%1023)))
				default:
					var w [8]byte
					binary.LittleEndian.PutUint64(w[:], h)
					copy(e, w[:])
				}
			}
			return nil
		}
	}
	return out.Freeze()
}

// WithGivens returns a copy of g whose buffers start as in g except at the elements of given
// (the preconditions of an expect, ir.Given), which hold their values. g is not changed.
func WithGivens(g *ir.Graph, given []ir.Given) *ir.Graph {
	out := g.Clone()
	for b := range out.Buffers {
		buf := &out.Buffers[b]
		base, t, id := buf.Init, buf.Type, ir.BufID(b)
		buf.Init = func(rank int, dst []byte) error {
			if base == nil {
				clear(dst)
			} else if err := base(rank, dst); err != nil {
				return err
			}
			for _, x := range given {
				if x.Buf == id && x.Rank == rank {
					putInt(dst, t, x.Elem, x.Value)
				}
			}
			return nil
		}
	}
	return out.Freeze()
}

// GivensHold reports whether memory m (before a run) meets the preconditions given.
func GivensHold(g *ir.Graph, m *Memory, given []ir.Given) bool {
	for _, x := range given {
		t := g.Buffers[x.Buf].Type
		w := make([]byte, t.Size())
		putInt(w, t, 0, x.Value)
		sz := t.Size()
		if !bytes.Equal(w, m.Bytes(x.Rank, x.Buf)[x.Elem*sz:(x.Elem+1)*sz]) {
			return false
		}
	}
	return true
}

// putInt stores v as element i of data, of type t (an integer's low bits; a float's value).
func putInt(data []byte, t ir.ElemType, i, v int64) {
	sz := t.Size()
	e := data[i*sz : (i+1)*sz]
	switch t {
	case ir.F32:
		binary.LittleEndian.PutUint32(e, math.Float32bits(float32(v)))
	case ir.F64:
		binary.LittleEndian.PutUint64(e, math.Float64bits(float64(v)))
	default:
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], uint64(v))
		copy(e, w[:])
	}
}

// mix is splitmix64's finaliser: distinct inputs give unrelated outputs.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// ExpectResult is the outcome of one postcondition on values.
type ExpectResult struct {
	Expect ir.Expect
	Held   bool
	Detail string // the first wrong element, when not held
}

// CheckExpects checks g's postconditions on values: init is the memory before the plan ran,
// final after (both of g, every rank held).
func CheckExpects(g *ir.Graph, init, final *Memory) []ExpectResult {
	out := make([]ExpectResult, 0, len(g.Expects))
	for _, e := range g.Expects {
		r := ExpectResult{Expect: e, Held: true}
		if detail := checkExpect(g, &e, init, final); detail != "" {
			r.Held, r.Detail = false, detail
		}
		out = append(out, r)
	}
	return out
}

// checkExpect returns "" when e holds, else the first wrong element.
func checkExpect(g *ir.Graph, e *ir.Expect, init, final *Memory) string {
	switch e.Kind {
	case ir.ExpectBarrier:
		return "" // about when ops happen, which memory does not show: check proves it
	case ir.ExpectValue:
		return checkValue(g, e, init, final)
	}
	dst := &g.Buffers[e.Dst]
	t, sz := dst.Type, dst.Type.Size()
	n := dst.Count
	blk := n / int64(g.Ranks)
	src := func(q int, off, count int64) []byte { return init.Bytes(q, e.Src)[off*sz : (off+count)*sz] }
	reduced := func(off, count int64) []byte {
		acc := bytes.Clone(src(0, off, count))
		for q := 1; q < g.Ranks; q++ {
			_ = Reduce(t, e.Red, acc, src(q, off, count)) // elaboration checked the type
		}
		return acc
	}
	compare := func(r int, at int64, want []byte) string {
		got := final.Bytes(r, e.Dst)[at*sz : at*sz+int64(len(want))]
		for i := int64(0); i*sz < int64(len(want)); i++ {
			w, v := want[i*sz:(i+1)*sz], got[i*sz:(i+1)*sz]
			if !sameElem(t, w, v, g.Ranks) {
				return fmt.Sprintf("%s[%d] on rank %d is %v, want %v", dst.Name, at+i, r, elemValue(t, got, i), elemValue(t, want, i))
			}
		}
		return ""
	}
	if e.Vec != nil { // per-rank blocks, each from one rank's source or reduced over all
		var pieces []ir.Piece
		for r := 0; r < g.Ranks; r++ {
			pieces = e.Pieces(pieces[:0], g.Ranks, r)
			for _, p := range pieces {
				want := func() []byte {
					if p.From < 0 {
						return reduced(p.At, p.Hi-p.Lo)
					}
					return src(p.From, p.At, p.Hi-p.Lo)
				}()
				if bad := compare(r, p.Lo, want); bad != "" {
					return bad
				}
			}
		}
		return ""
	}
	var all []byte // the reduction of every rank's whole source, computed once
	if e.Kind == ir.ExpectAllreduce {
		all = reduced(0, n)
	}
	for r := 0; r < g.Ranks; r++ {
		var bad string
		switch e.Kind {
		case ir.ExpectAllreduce:
			bad = compare(r, 0, all)
		case ir.ExpectReduce:
			if r == e.Root {
				bad = compare(r, 0, reduced(0, n))
			}
		case ir.ExpectReduceScatter:
			if e.DstBlock { // all of Dst is block r of the reduction
				bad = compare(r, 0, reduced(int64(r)*n, n))
				break
			}
			bad = compare(r, int64(r)*blk, reduced(int64(r)*blk, blk))
		case ir.ExpectBroadcast:
			bad = compare(r, 0, src(e.Root, 0, n))
		case ir.ExpectUnchanged:
			bad = compare(r, 0, src(r, 0, n))
		case ir.ExpectAllgather, ir.ExpectGather:
			if e.Kind == ir.ExpectGather && r != e.Root {
				break
			}
			for b := 0; b < g.Ranks && bad == ""; b++ {
				from := int64(0)
				if e.SrcBlock {
					from = int64(b) * blk
				}
				bad = compare(r, int64(b)*blk, src(b, from, blk))
			}
		case ir.ExpectAlltoall:
			for q := 0; q < g.Ranks && bad == ""; q++ {
				bad = compare(r, int64(q)*blk, src(q, int64(r)*blk, blk))
			}
		case ir.ExpectScatter:
			bad = compare(r, 0, src(e.Root, int64(r)*n, n))
		}
		if bad != "" {
			return bad
		}
	}
	return ""
}

// sameElem compares one element; floats within the rounding a different order of a reduction
// over ranks can make.
func sameElem(t ir.ElemType, want, got []byte, ranks int) bool {
	if bytes.Equal(want, got) || !t.IsFloat() {
		return bytes.Equal(want, got)
	}
	var w, v, eps float64
	if t == ir.F32 {
		w, v = float64(math.Float32frombits(binary.LittleEndian.Uint32(want))), float64(math.Float32frombits(binary.LittleEndian.Uint32(got)))
		eps = 1e-6
	} else {
		w, v = math.Float64frombits(binary.LittleEndian.Uint64(want)), math.Float64frombits(binary.LittleEndian.Uint64(got))
		eps = 1e-14
	}
	return math.Abs(w-v) <= eps*float64(ranks)*max(math.Abs(w), math.Abs(v))
}

// checkValue is checkExpect for the general form: each element it states is computed from the
// initial memory, in the arithmetic of the buffer's type (integers wrap; floats are summed in
// float64 and compared as reductions are).
func checkValue(g *ir.Graph, e *ir.Expect, init, final *Memory) string {
	dst := &g.Buffers[e.Dst]
	t, sz := dst.Type, dst.Type.Size()
	n := e.Hi - e.Lo
	want := make([]byte, sz)
	for k, r := range e.Ranks {
		got := final.Bytes(r, e.Dst)
		for j := range n {
			v := &e.Want[int64(k)*n+j]
			if t.IsFloat() {
				f := float64(v.Const)
				for _, x := range v.Terms {
					f += float64(x.N) * elemValue(t, init.Bytes(x.Rank, x.Buf), x.Elem).(float64)
				}
				if t == ir.F32 {
					binary.LittleEndian.PutUint32(want, math.Float32bits(float32(f)))
				} else {
					binary.LittleEndian.PutUint64(want, math.Float64bits(f))
				}
			} else {
				u := uint64(v.Const)
				for _, x := range v.Terms {
					u += uint64(x.N) * intElem(init.Bytes(x.Rank, x.Buf), x.Elem, sz)
				}
				var w [8]byte
				binary.LittleEndian.PutUint64(w[:], u)
				copy(want, w[:sz])
			}
			off := (e.Lo + j) * sz
			if !sameElem(t, want, got[off:off+sz], g.Ranks) {
				return fmt.Sprintf("%s[%d] on rank %d is %v, want %v", dst.Name, e.Lo+j, r, elemValue(t, got, e.Lo+j), elemValue(t, want, 0))
			}
		}
	}
	return ""
}

// intElem is element i of an integer buffer of elements of sz bytes, its bits zero-extended
// (sums wrap alike whatever the sign).
func intElem(data []byte, i, sz int64) uint64 {
	var w [8]byte
	copy(w[:], data[i*sz:(i+1)*sz])
	return binary.LittleEndian.Uint64(w[:])
}
