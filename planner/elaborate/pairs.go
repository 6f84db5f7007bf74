package elaborate

import (
	"slices"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
)

// A reduce or copy whose sides are lists of blocks (`reduce sum {data[...] for ...} from
// {tmp[...] for ...}`) pairs the blocks in order. It is elaborated into one host op per pair
// (its parts), and a nop under the op's name that waits for them all: what waits for the op
// waits for every part, and the op's own `after` list, and dependency statements naming it as
// the waiter, hold back every part (split). The parts share the op's name and position.

// split is a listed op of the rank being elaborated: its nop and its parts.
type split struct {
	join  ir.OpID
	parts []ir.OpID
	pos   diag.Pos
}

// listed reports whether o is a reduce or copy over lists.
func listed(o dsl.Operation) bool {
	switch o := o.(type) {
	case *dsl.ReduceOp:
		return dsl.Listed(o.Dst, o.DstMore) || dsl.Listed(o.Src, o.SrcMore)
	case *dsl.CopyOp:
		return dsl.Listed(o.Src, o.SrcMore) || dsl.Listed(o.Dst, o.DstMore)
	}
	return false
}

// blocks evaluates one side of a listed op: its blocks and where each was written, in order,
// neither merged nor dropped (they pair one by one).
func (el *elaborator) blocks(first *dsl.Slice, more []*dsl.Slice, s *scope) ([]ir.Slice, []diag.Pos, bool) {
	el.mem.segs, el.mem.segPos = el.mem.segs[:0], el.mem.segPos[:0]
	ok := el.listItem(first, s, true)
	for _, it := range more {
		ok = el.listItem(it, s, ok)
	}
	return slices.Clone(el.mem.segs), slices.Clone(el.mem.segPos), ok
}

// opList elaborates a reduce or copy over lists (listed) named r.
func (el *elaborator) opList(st *dsl.OpStmt, at *stmtCode, s *scope, r ref) {
	g := el.g
	el.cur = at
	kind, red, what := ir.OpCopy, ir.ReduceOp(0), "copy"
	var dst, src []ir.Slice
	var dstPos, srcPos []diag.Pos
	var srcAt diag.Pos
	ok1, ok2 := true, true
	var dstOne, srcOne bool // a side written as one plain slice: cut to the other side's blocks
	switch o := st.Op.(type) {
	case *dsl.ReduceOp:
		dstOne, srcOne = !dsl.Listed(o.Dst, o.DstMore), !dsl.Listed(o.Src, o.SrcMore)
		var known bool
		if red, known = ir.ParseReduceOp(o.Op.Name); !known {
			el.errorf(phaseNames, diag.Name, o.Op.Pos(), "unknown reduction %s (sum prod min max band bor bxor)", o.Op.Name)
			el.broken.ops.add(el.site(&r).Name, "")
			return
		}
		kind, what = ir.OpReduce, "reduce "+red.String()
		dst, dstPos, ok1 = el.blocks(o.Dst, o.DstMore, s)
		src, srcPos, ok2 = el.blocks(o.Src, o.SrcMore, s)
		srcAt = o.Src.Pos()
	case *dsl.CopyOp:
		dstOne, srcOne = !dsl.Listed(o.Dst, o.DstMore), !dsl.Listed(o.Src, o.SrcMore)
		src, srcPos, ok1 = el.blocks(o.Src, o.SrcMore, s)
		dst, dstPos, ok2 = el.blocks(o.Dst, o.DstMore, s)
		srcAt = o.Src.Pos()
	}
	if ok1 && ok2 {
		switch {
		case dstOne && len(src) != 1:
			dst, dstPos, ok1 = el.cut(what, dst[0], dstPos[0], src)
		case srcOne && len(dst) != 1:
			src, srcPos, ok2 = el.cut(what, src[0], srcPos[0], dst)
		}
	}
	if !ok1 || !ok2 || !el.pairsFit(kind, red, what, dst, src, dstPos, srcPos, srcAt) {
		el.broken.ops.add(el.site(&r).Name, "")
		return
	}
	var pairs []int // the pairs that move something
	for i := range dst {
		if dst[i].Len > 0 {
			pairs = append(pairs, i)
		}
	}
	join := el.nextOp() + ir.OpID(len(pairs))
	if first, fresh := claim(el, el.opIdx, r, join); !fresh {
		name, pos := el.text(&r), el.opOf(first).Pos
		el.report(phaseNames, el.rank, diag.Errorf(diag.Name, st.Name.Pos(), "op %s declared twice on this rank: give each op its own name or index", name).
			Relate(pos, firstDeclaration(name, pos, st.Name.Pos())), "op declared twice")
		return
	}
	site := el.site(&r)
	sp := split{join: join, pos: st.Name.Pos()}
	for _, i := range pairs {
		if !el.opRoom() {
			unclaim(el, el.opIdx, r)
			el.tooManyOps(st.Pos(), 0)
			return
		}
		id := el.nextOp()
		el.growOps()
		g.Ops = append(g.Ops, ir.Op{Site: site, Rank: int32(el.rank), Kind: kind, Red: red, Queue: ir.None, Src: src[i], Dst: dst[i], Match: ir.None, Index: -1})
		el.opQueue = append(el.opQueue, ref{})
		el.refs(at.after, s, id)
		sp.parts = append(sp.parts, id)
	}
	if !el.opRoom() {
		unclaim(el, el.opIdx, r)
		el.tooManyOps(st.Pos(), 0)
		return
	}
	el.growOps()
	g.Ops = append(g.Ops, ir.Op{Site: site, Rank: int32(el.rank), Kind: ir.OpNop, Queue: ir.None, Src: ir.NoSlice, Dst: ir.NoSlice, Match: ir.None, Index: -1})
	el.opQueue = append(el.opQueue, ref{})
	if len(sp.parts) == 0 {
		el.refs(at.after, s, join)
		return
	}
	el.splitOf[join] = len(el.splits)
	el.splits = append(el.splits, sp)
}

// pairsFit checks the pairs of a listed op; each mistake is reported at its block.
func (el *elaborator) pairsFit(kind ir.OpKind, red ir.ReduceOp, what string, dst, src []ir.Slice, dstPos, srcPos []diag.Pos, srcAt diag.Pos) bool {
	g := el.g
	if len(dst) != len(src) {
		el.errorf(phaseShapes, diag.Shape, srcAt, "%s of %s from %s: the lists pair their blocks in order, so they need as many",
			what, english.Plural(len(dst), "destination block"), english.Plural(len(src), "source block"))
		return false
	}
	ok := true
	for i := range dst {
		d, sr := dst[i], src[i]
		db, sb := &g.Buffers[d.Buf], &g.Buffers[sr.Buf]
		switch {
		case kind == ir.OpReduce && db.Type != sb.Type:
			el.errorf(phaseShapes, diag.Shape, srcPos[i], "block %d of the lists: %s into %s from %s: both sides need the same type (%s and %s)",
				i, what, g.SliceString(d), g.SliceString(sr), db.Type, sb.Type)
			ok = false
		case kind == ir.OpReduce && d.Len != sr.Len:
			el.errorf(phaseShapes, diag.Shape, srcPos[i], "block %d of the lists: %s of %d elements (%s) from %d elements (%s): paired blocks need the same count",
				i, what, d.Len, g.SliceString(d), sr.Len, g.SliceString(sr))
			ok = false
		case kind == ir.OpReduce && red >= ir.RedBand && db.Type.IsFloat():
			el.errorf(phaseShapes, diag.Shape, dstPos[i], "%s on %s buffer %s: bitwise reductions need integer types", what, db.Type, db.Name)
			ok = false
		case kind == ir.OpCopy && g.SegsBytes([]ir.Slice{d}) != g.SegsBytes([]ir.Slice{sr}):
			el.errorf(phaseShapes, diag.Shape, srcPos[i], "block %d of the lists: copy of %d bytes (%s) into %d bytes (%s): paired blocks need the same length in bytes",
				i, g.SegsBytes([]ir.Slice{sr}), g.SliceString(sr), g.SegsBytes([]ir.Slice{d}), g.SliceString(d))
			ok = false
		}
	}
	if !ok {
		return false
	}
	for j := range dst {
		if dst[j].Len == 0 {
			continue
		}
		for i := range j {
			if a, b := dst[i], dst[j]; a.Len > 0 && a.Overlaps(b) {
				el.errorf(phaseShapes, diag.Shape, dstPos[j], "%s writes %s and %s, which overlap: the destination blocks of a list must be disjoint",
					what, g.SliceString(a), g.SliceString(b))
				return false
			}
		}
		for i := range src {
			if src[i].Len > 0 && dst[j].Overlaps(src[i]) {
				el.errorf(phaseShapes, diag.Shape, dstPos[j], "%s writes %s, which overlaps its source block %s: use disjoint ranges or a temporary buffer",
					what, g.SliceString(dst[j]), g.SliceString(src[i]))
				return false
			}
		}
	}
	return true
}

// cut splits one, a side written as one slice (at pos), into consecutive blocks as long in
// bytes as those of the other side's list, in order: a copy packs a list into one slice, or
// unpacks one.
func (el *elaborator) cut(what string, one ir.Slice, pos diag.Pos, other []ir.Slice) ([]ir.Slice, []diag.Pos, bool) {
	g := el.g
	size := g.Bytes(ir.Slice{Buf: one.Buf, Len: 1})
	var total int64
	for _, o := range other {
		total += g.Bytes(o)
	}
	if total != g.Bytes(one) || total%size != 0 {
		el.errorf(phaseShapes, diag.Shape, pos, "%s between %s (%d bytes) and a list of %s (%d bytes): the one slice is cut into the list's blocks, so the lengths must match",
			what, g.SliceString(one), g.Bytes(one), english.Plural(len(other), "block"), total)
		return nil, nil, false
	}
	out := make([]ir.Slice, 0, len(other))
	at := make([]diag.Pos, 0, len(other))
	off := one.Off
	for _, o := range other {
		b := g.Bytes(o)
		if b%size != 0 {
			el.errorf(phaseShapes, diag.Shape, pos, "%s between %s and a block of %d bytes (%s): the blocks must be whole elements of %s",
				what, g.SliceString(one), b, g.SliceString(o), g.Buffers[one.Buf].Name)
			return nil, nil, false
		}
		out = append(out, ir.Slice{Buf: one.Buf, Off: off, Len: b / size})
		at = append(at, pos)
		off += b / size
	}
	return out, at, true
}
