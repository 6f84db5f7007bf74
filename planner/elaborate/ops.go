package elaborate

import (
	"fmt"
	"math"
	"slices"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
)

// operation fills op from the right-hand side of an op statement and records its queue
// reference (qinfo: what is kept of the queue's name). It reports false when the op could not be evaluated (the error is recorded).
func (el *elaborator) operation(o dsl.Operation, qinfo *nameInfo, s *scope, op *ir.Op, qref *ref) bool {
	ok := true
	queue := func() { // the queue the operation is on (qinfo)
		r, good := el.name(qinfo, s)
		ok = ok && good
		*qref = r
	}
	slice := func(sl *dsl.Slice) ir.Slice {
		if sl == nil {
			return ir.NoSlice
		}
		v, good := el.slice(sl, s)
		ok = ok && good
		return v
	}
	// list evaluates a scatter/gather list into its first segment and the others, which go to
	// op's OpExtra. listPos is where the segments were written.
	var listPos []diag.Pos
	list := func(first *dsl.Slice, more []*dsl.Slice) ir.Slice {
		if first == nil {
			return ir.NoSlice
		}
		segs, pos, good := el.sliceList(first, more, s)
		listPos = pos
		ok = ok && good
		if !good || len(segs) == 0 {
			return ir.NoSlice
		}
		if len(segs) > ir.MaxListSegs {
			el.errorf(phaseShapes, diag.Shape, first.Pos(), "a scatter/gather list of %d slices: lists take at most %d (split the op, or copy the pieces together first)", len(segs), ir.MaxListSegs)
			ok = false
			return ir.NoSlice
		}
		if len(segs) > 1 {
			x := el.extra(op)
			x.More, x.MorePos = slices.Clone(segs[1:]), slices.Clone(pos[1:]) // both are scratch
		}
		return segs[0]
	}
	switch o := o.(type) {
	case *dsl.SendOp:
		op.Kind, op.Inline = ir.OpSend, o.Inline
		queue()
		op.Src = list(o.Slice, o.More)
	case *dsl.RecvOp:
		op.Kind = ir.OpRecv
		queue()
		op.Dst = list(o.Slice, o.More)
		if ok {
			el.scatterDisjoint(op.DstSegs(), listPos)
		}
	case *dsl.WriteOp:
		op.Kind, op.Notify = ir.OpWrite, o.Notify
		queue()
		op.Src = list(o.Src, o.More)
		op.Dst = slice(o.Dst)
		if ok {
			el.sameBytes(op, o.Pos(), "write", op.SrcSegs(), op.DstSegs())
			el.remote(op.Dst, o.Dst.Pos(), ir.RemoteWrite, "write to")
		}
	case *dsl.ReadOp:
		op.Kind = ir.OpRead
		queue()
		op.Src = slice(o.Src)
		op.Dst = list(o.Dst, o.More)
		if ok {
			el.scatterDisjoint(op.DstSegs(), listPos)
			el.sameBytes(op, o.Pos(), "read", op.SrcSegs(), op.DstSegs())
			el.remote(op.Src, o.Src.Pos(), ir.RemoteRead, "read from")
		}
	case *dsl.AtomicOp:
		op.Kind = ir.OpAtomicAdd
		if o.Kind.Name == "cas" {
			op.Kind = ir.OpAtomicCAS
		}
		queue()
		op.Dst = slice(o.Target)
		x := el.extra(op)
		x.Fetch = slice(o.To)
		var good bool
		if x.A, good = el.eval(o.A, s); !good {
			ok = false
		}
		if o.B != nil {
			if x.B, good = el.eval(o.B, s); !good {
				ok = false
			}
		}
		if ok {
			el.atomicSlice(op.Dst, o.Target.Pos(), "target")
			if op.Fetch().Valid() {
				el.atomicSlice(op.Fetch(), o.To.Pos(), "fetch destination")
			}
			el.remote(op.Dst, o.Target.Pos(), ir.RemoteAtomic, "atomic on")
		}
	case *dsl.ReduceOp:
		op.Kind = ir.OpReduce
		red, known := ir.ParseReduceOp(o.Op.Name)
		if !known {
			el.errorf(phaseNames, diag.Name, o.Op.Pos(), "unknown reduction %s (sum prod min max band bor bxor)", o.Op.Name)
			return false
		}
		op.Red = red
		op.Dst, op.Src = slice(o.Dst), slice(o.Src)
		if ok {
			el.reduceShapes(op, o)
		}
	case *dsl.CopyOp:
		op.Kind = ir.OpCopy
		op.Src, op.Dst = slice(o.Src), slice(o.Dst)
		if ok {
			el.sameBytes(op, o.Pos(), "copy", []ir.Slice{op.Src}, []ir.Slice{op.Dst})
			el.noOverlap(op.Src, op.Dst, o.Dst.Pos(), "copy")
		}
	case *dsl.NopOp:
		op.Kind = ir.OpNop
	case *dsl.WaitOp:
		op.Kind = ir.OpWait
		x := el.extra(op)
		var good bool
		if o.Word != nil {
			x.Word = true
			op.Dst = slice(o.Word)
			if x.A, good = el.eval(o.Value, s); !good {
				ok = false
			}
			if ok {
				el.atomicSlice(op.Dst, o.Word.Pos(), "word of wait")
				el.remote(op.Dst, o.Word.Pos(), ir.RemoteAtomic, "atomic adds to the word of wait on")
			}
			break
		}
		op.Dst = slice(o.Region)
		if x.A, good = el.eval(o.Count, s); !good {
			ok = false
		}
		if ok {
			if x.A < 1 {
				el.errorf(phaseShapes, diag.Shape, o.Count.Pos(), "wait for %d writes: the count must be at least 1 (an op that waits for nothing needs no wait)", x.A)
			}
			el.remote(op.Dst, o.Region.Pos(), ir.RemoteWrite, "writes to the region of wait in")
		}
	default:
		el.errorf(phaseNames, diag.Name, o.Pos(), "unsupported operation")
		return false
	}
	return ok
}

// scatterDisjoint reports the segments of a scatter list (a recv's or read's landing slices)
// that overlap an earlier one: the NIC would write the same bytes twice in no defined order.
// pos[i] is where segs[i] was written.
func (el *elaborator) scatterDisjoint(segs []ir.Slice, pos []diag.Pos) {
	for j := 1; j < len(segs); j++ {
		for i := 0; i < j; i++ {
			a, b := segs[i], segs[j]
			if a.Overlaps(b) {
				el.errorf(phaseShapes, diag.Shape, pos[j], "scatter list lands %s and %s, which overlap: the segments of a receiving list must be disjoint",
					el.g.SliceString(a), el.g.SliceString(b))
			}
		}
	}
}

// sliceList evaluates a scatter/gather list, first then more: its slices, and those every
// `{SLICE for ...}` in it makes, in order. Adjacent slices of one buffer (the next starting
// where the last ends) are one segment, and empty slices are dropped unless the list has nothing
// else (then its first slice stays, empty). pos holds where each segment was written (a merged
// one: where its first slice was). Both are el's scratch, valid until the next call.
func (el *elaborator) sliceList(first *dsl.Slice, more []*dsl.Slice, s *scope) (segs []ir.Slice, pos []diag.Pos, ok bool) {
	el.mem.segs, el.mem.segPos = el.mem.segs[:0], el.mem.segPos[:0]
	ok = el.listItem(first, s, true)
	for _, it := range more {
		ok = el.listItem(it, s, ok)
	}
	out, at := el.mem.segs, el.mem.segPos
	if !ok || len(out) < 2 {
		return out, at, ok
	}
	n := 0 // merged in place: out[:n] never passes the element read
	for i, x := range out {
		if x.Len == 0 {
			continue
		}
		if n > 0 && out[n-1].Buf == x.Buf && out[n-1].Off+out[n-1].Len == x.Off {
			out[n-1].Len += x.Len
			continue
		}
		out[n], at[n] = x, at[i]
		n++
	}
	return out[:max(n, 1)], at[:max(n, 1)], true
}

// listItem appends to el.mem.segs (and their positions to el.mem.segPos) the slices that one item of a
// scatter/gather list makes; ok is false once an earlier item failed (its loops then make
// nothing more) and stays false.
func (el *elaborator) listItem(sl *dsl.Slice, s *scope, ok bool) bool {
	f := sl.For
	if f == nil {
		v, good := el.slice(sl, s)
		if good {
			el.mem.segs, el.mem.segPos = append(el.mem.segs, v), append(el.mem.segPos, sl.Pos())
		}
		return ok && good
	}
	from, ok1 := el.eval(f.From, s)
	to, ok2 := el.eval(f.To, s)
	step, ok3 := int64(1), true
	if f.Step != nil {
		if step, ok3 = el.eval(f.Step, s); ok3 && step <= 0 {
			el.errorf(phaseNames, diag.Expr, f.Step.Pos(), "for step %d: the step must be positive", step)
			ok3 = false
		}
	}
	if !ok1 || !ok2 || !ok3 {
		return false
	}
	if tripCount(from, to, step) > el.itersLeft() {
		el.errorf(phaseNames, diag.Limit, sl.Pos(), "the plan runs more than %d loop iterations: is a bound wrong?", MaxIterations)
		return false
	}
	body := el.child(s)
	defer el.release(body)
	for v := from; v < to && ok; v += step {
		el.iters++
		body.reset()
		body.bind(f.Var.Name, v)
		if f.Cond != nil {
			c, good := el.eval(f.Cond, body)
			if !good {
				return false
			}
			if c == 0 {
				continue
			}
		}
		ok = el.listItem(f.Slice, body, ok)
		if v > math.MaxInt64-step {
			break
		}
	}
	return ok
}

// slice evaluates a slice and checks it is in bounds; buf[k:k] is an empty slice (nothing to
// move: the op still runs, and still orders what is after it).
func (el *elaborator) slice(sl *dsl.Slice, s *scope) (ir.Slice, bool) {
	if sl.For != nil {
		el.errorf(phaseShapes, diag.Shape, sl.Pos(), "a list of slices {... for ...} stands only where a scatter/gather list may: after send or recv, as a write's source or a read's destination, or on both sides of a reduce or copy")
		return ir.NoSlice, false
	}
	cs := el.compiled(sl)
	id := cs.buf
	if id == ir.None {
		var ok bool
		if id, ok = el.bufIdx[sl.Buf.Name]; !ok {
			if !el.badBuf[sl.Buf.Name] {
				el.unknownName(sl.Buf.Pos(), sl.Buf.Name, sl.Buf.Name, sl.Buf.Name, el.bufferNames(), "unknown buffer %s%s")
			}
			return ir.NoSlice, false
		}
		cs.buf = id // buffers are all declared by now
	}
	b := &el.g.Buffers[id]
	out := ir.Slice{Buf: id, Len: b.Count}
	clo, chi := cs.lo, cs.hi
	switch sl.Kind {
	case dsl.SliceElem:
		i, ok := el.evalc(clo, s)
		if !ok {
			return ir.NoSlice, false
		}
		if i < 0 || i >= b.Count {
			el.errorf(phaseShapes, diag.Shape, sl.Lo.Pos(), "index %d is out of range for %s (%d elements: 0..%d)", i, b.Name, b.Count, b.Count-1)
			return ir.NoSlice, false
		}
		out.Off, out.Len = i, 1
	case dsl.SliceRange:
		lo, ok1 := el.evalc(clo, s)
		hi, ok2 := el.evalc(chi, s)
		if !ok1 || !ok2 {
			return ir.NoSlice, false
		}
		switch {
		case lo < 0 || lo > b.Count:
			el.errorf(phaseShapes, diag.Shape, sl.Lo.Pos(), "slice %s[%d:%d] starts out of range (%s has %d elements)", b.Name, lo, hi, b.Name, b.Count)
			return ir.NoSlice, false
		case hi > b.Count:
			el.errorf(phaseShapes, diag.Shape, sl.Hi.Pos(), "slice %s[%d:%d] ends past the end of %s (%d elements)", b.Name, lo, hi, b.Name, b.Count)
			return ir.NoSlice, false
		case hi < lo:
			el.errorf(phaseShapes, diag.Shape, sl.Pos(), "slice %s[%d:%d] ends before it starts: slices need lo <= hi (lo == hi is empty)", b.Name, lo, hi)
			return ir.NoSlice, false
		}
		out.Off, out.Len = lo, hi-lo
	}
	return out, true
}

// compiled returns the compiled sl, a slice of the op statement being elaborated.
func (el *elaborator) compiled(sl *dsl.Slice) *cslice {
	for i := range el.cur.slices { // a few: one or two per slice of the op
		if c := &el.cur.slices[i]; c.sl == sl {
			return c
		}
	}
	return compileSlice(sl) // not one of them: compiled for this once
}

func (el *elaborator) bufferNames() []string {
	names := make([]string, len(el.g.Buffers))
	for i := range el.g.Buffers {
		names[i] = el.g.Buffers[i].Name
	}
	return names
}

func (el *elaborator) sameBytes(op *ir.Op, pos diag.Pos, what string, a, b []ir.Slice) {
	if na, nb := el.g.SegsBytes(a), el.g.SegsBytes(b); na != nb {
		el.errorf(phaseShapes, diag.Shape, pos, "%s of %d bytes (%s) into %d bytes (%s): the two slices must have the same length in bytes",
			what, na, el.g.SegsString(a), nb, el.g.SegsString(b))
	}
}

func (el *elaborator) remote(sl ir.Slice, pos diag.Pos, flag ir.Access, what string) {
	b := &el.g.Buffers[sl.Buf]
	if b.Access&flag == 0 {
		el.errorf(phaseShapes, diag.Access, pos, "remote %s %s, which lacks %s: add %s to `buffer %s`", what, b.Name, flag, flag, b.Name)
	}
}

func (el *elaborator) atomicSlice(sl ir.Slice, pos diag.Pos, what string) {
	b := &el.g.Buffers[sl.Buf]
	switch {
	case b.Type != ir.U64 && b.Type != ir.I64:
		el.errorf(phaseShapes, diag.Shape, pos, "atomic %s %s is %s: atomics work on 8-byte integers, make the buffer u64 or i64", what, el.g.SliceString(sl), b.Type)
	case sl.Len != 1:
		el.errorf(phaseShapes, diag.Shape, pos, "atomic %s %s has %d elements: an atomic works on one 8-byte element, e.g. %s[%d]", what, el.g.SliceString(sl), sl.Len, b.Name, sl.Off)
	}
}

func (el *elaborator) reduceShapes(op *ir.Op, o *dsl.ReduceOp) {
	dst, src := &el.g.Buffers[op.Dst.Buf], &el.g.Buffers[op.Src.Buf]
	switch {
	case dst.Type != src.Type:
		el.errorf(phaseShapes, diag.Shape, o.Src.Pos(), "reduce %s into %s from %s: both sides need the same type (%s and %s)", op.Red, dst.Name, src.Name, dst.Type, src.Type)
	case op.Dst.Len != op.Src.Len:
		el.errorf(phaseShapes, diag.Shape, o.Src.Pos(), "reduce %s of %d elements (%s) from %d elements (%s): counts must match",
			op.Red, op.Dst.Len, el.g.SliceString(op.Dst), op.Src.Len, el.g.SliceString(op.Src))
	case op.Red >= ir.RedBand && dst.Type.IsFloat():
		el.errorf(phaseShapes, diag.Shape, o.Op.Pos(), "reduce %s on %s buffer %s: bitwise reductions need integer types", op.Red, dst.Type, dst.Name)
	default:
		el.noOverlap(op.Src, op.Dst, o.Src.Pos(), "reduce")
	}
}

func (el *elaborator) noOverlap(a, b ir.Slice, pos diag.Pos, what string) {
	if a.Overlaps(b) {
		el.errorf(phaseShapes, diag.Shape, pos, "%s between overlapping slices %s and %s: use disjoint ranges or a temporary buffer", what, el.g.SliceString(a), el.g.SliceString(b))
	}
}

// unknownName reports an unknown name on the current rank, worded by format with shown (the
// name as evaluated, "%s%s": the name, then the hint). The closest of known to target is the
// hint and, when word (the identifier written at pos) is target itself, a fix that replaces it.
func (el *elaborator) unknownName(pos diag.Pos, word, target, shown string, known []string, format string) {
	best := dsl.Closest(target, known)
	hint := ""
	if best != "" {
		hint = " (did you mean " + best + "?)"
	}
	d := diag.Errorf(diag.Name, pos, format, shown, hint)
	if best != "" && word == target {
		end := pos
		end.Col += uint32(len(word))
		d.Fix = &diag.Fix{Msg: fmt.Sprintf("replace %s with %s", word, best), Edits: []diag.Edit{{Pos: pos, End: end, New: best}}}
	}
	el.report(phaseNames, el.rank, d, format)
}
