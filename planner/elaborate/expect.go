package elaborate

import (
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
)

// expect evaluates an `expect` statement into g.Expects, checking its form (the operator and the
// root it needs, a known collective), its buffers and their sizes. The proof itself is
// planner/prove's.
func (el *elaborator) expect(st *dsl.ExpectStmt) {
	g := el.g
	if st.Value != nil {
		el.expectValue(st)
		return
	}
	kind, ok := ir.ParseExpectKind(st.Kind.Name)
	if !ok {
		el.globalErrorf(phaseNames, diag.Name, st.Kind.Pos(), "unknown collective %s in expect (one of %s; or the general form, expect BUF[SLICE] == VALUE)", st.Kind.Name, strings.Join(ir.ExpectKinds(), ", "))
		return
	}
	e := ir.Expect{Kind: kind, Src: ir.None, Pos: st.Pos()}
	if kind == ir.ExpectBarrier {
		if st.Op != nil || st.Dst != nil || st.Root != nil {
			el.globalErrorf(phaseNames, diag.Name, st.Kind.End(), "expect barrier takes nothing after it: it is about when the ranks leave, not about a buffer")
			return
		}
		e.Dst, e.Src = ir.None, ir.None
		g.Expects = append(g.Expects, e)
		return
	}
	if st.Dst == nil {
		el.globalErrorf(phaseNames, diag.Name, st.End(), "expect %s needs a buffer: expect %s %sBUF", kind, kind, map[bool]string{true: "sum ", false: ""}[kind.Reduces()])
		return
	}
	switch {
	case kind.Reduces() && st.Op == nil:
		el.globalErrorf(phaseNames, diag.Name, st.Dst.Pos(), "expect %s needs a reduction operator before the buffer: expect %s sum %s", kind, kind, st.Dst.Name)
		return
	case !kind.Reduces() && st.Op != nil:
		el.globalErrorf(phaseNames, diag.Name, st.Op.Pos(), "expect %s takes no reduction operator", kind)
		return
	case kind.Rooted() && st.Root == nil:
		el.globalErrorf(phaseNames, diag.Name, st.End(), "expect %s needs a root: add `root R`", kind)
		return
	case !kind.Rooted() && st.Root != nil:
		el.globalErrorf(phaseNames, diag.Name, st.Root.Pos(), "expect %s takes no root: every rank takes part alike", kind)
		return
	case !el.countsPlaced(st, kind):
		return
	case (kind == ir.ExpectAlltoall || kind == ir.ExpectScatter) && st.Src == nil:
		el.globalErrorf(phaseNames, diag.Name, st.End(), "expect %s needs a source: add `from BUF`", kind)
		return
	case kind == ir.ExpectUnchanged && st.Src != nil:
		el.globalErrorf(phaseNames, diag.Name, st.Src.Pos(), "expect unchanged takes no source: the buffer is compared with its own initial contents")
		return
	}
	if st.Op != nil {
		e.Red, _ = ir.ParseReduceOp(st.Op.Name) // the grammar admits operators only
	}
	buf := func(id *dsl.Ident) (ir.BufID, bool) {
		b, ok := el.bufIdx[id.Name]
		if !ok && !el.badBuf[id.Name] {
			el.globalErrorf(phaseNames, diag.Name, id.Pos(), "unknown buffer %s in expect", id.Name)
		}
		return b, ok
	}
	var okDst, okSrc bool
	e.Dst, okDst = buf(st.Dst)
	okSrc = true
	if st.Src != nil {
		e.Src, okSrc = buf(st.Src)
	}
	if st.Root != nil {
		v, err := evalInt(st.Root, el.globals)
		switch {
		case err != nil:
			el.evalFailed(-1, err)
			return
		case v < 0 || v >= int64(g.Ranks):
			el.globalErrorf(phaseShapes, diag.Shape, st.Root.Pos(), "root %d is not a rank: ranks are 0 to %d", v, g.Ranks-1)
			return
		}
		e.Root = int(v)
	}
	if !okDst || !okSrc {
		return
	}
	if e.Src == ir.None {
		e.Src = e.Dst
		e.SrcBlock = kind == ir.ExpectAllgather || kind == ir.ExpectGather || kind == ir.ExpectAllgatherv || kind == ir.ExpectGatherv
	}
	if el.expectShapes(st, &e) {
		g.Expects = append(g.Expects, e)
	}
}

// expectShapes checks the sizes of an expect's buffers against each other and the world size.
func (el *elaborator) expectShapes(st *dsl.ExpectStmt, e *ir.Expect) bool {
	g := el.g
	dst, src := &g.Buffers[e.Dst], &g.Buffers[e.Src]
	at := st.Dst.Pos()
	srcAt := at
	if st.Src != nil {
		srcAt = st.Src.Pos()
	}
	ranks := int64(g.Ranks)
	if dst.Type != src.Type {
		el.globalErrorf(phaseShapes, diag.Shape, srcAt, "expect %s: %s is %s but %s is %s: the source and the destination must have one element type", e.Kind, src.Name, src.Type, dst.Name, dst.Type)
		return false
	}
	if e.Kind.Reduces() && e.Red >= ir.RedBand && dst.Type.IsFloat() {
		el.globalErrorf(phaseShapes, diag.Shape, st.Op.Pos(), "expect %s %s on %s buffer %s: bitwise reductions need integer types", e.Kind, e.Red, dst.Type, dst.Name)
		return false
	}
	if st.DstCounts != nil || st.SrcCounts != nil {
		return el.vectorShapes(st, e)
	}
	if e.Kind == ir.ExpectReduceScatter && e.Src != e.Dst && src.Count == dst.Count*ranks {
		e.DstBlock = true // MPI's receive buffer: one block, rank r's of the reduction
		return true
	}
	blocked := e.Kind == ir.ExpectAllgather || e.Kind == ir.ExpectReduceScatter || e.Kind == ir.ExpectAlltoall || e.Kind == ir.ExpectGather
	if blocked && dst.Count%ranks != 0 {
		el.globalErrorf(phaseShapes, diag.Shape, at, "expect %s: %s has %d elements, which do not divide into %d equal blocks (one per rank)", e.Kind, dst.Name, dst.Count, ranks)
		return false
	}
	if e.Kind == ir.ExpectScatter && src.Count%ranks != 0 {
		el.globalErrorf(phaseShapes, diag.Shape, srcAt, "expect scatter: %s has %d elements, which do not divide into %d equal blocks (one per rank)", src.Name, src.Count, ranks)
		return false
	}
	want, what := dst.Count, "as many elements as "+dst.Name
	switch e.Kind {
	case ir.ExpectReduceScatter:
		if e.Src != e.Dst {
			what += ", or ranks times as many (" + dst.Name + " is then rank r's block)"
		}
	case ir.ExpectAllgather, ir.ExpectGather:
		if e.SrcBlock {
			return true
		}
		want, what = dst.Count/ranks, "one block of "+dst.Name+" (its elements / ranks)"
	case ir.ExpectScatter:
		want, what = dst.Count*ranks, dst.Name+"'s elements times ranks"
	}
	if src.Count != want {
		el.globalErrorf(phaseShapes, diag.Shape, srcAt, "expect %s: %s has %d elements but must have %s: %d", e.Kind, src.Name, src.Count, what, want)
		return false
	}
	return true
}
