package elaborate

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
)

// The vector postconditions (allgatherv, gatherv, scatterv, alltoallv, and reduce_scatter with
// counts): their blocks differ per rank, as MPI's counts and displacements say. The tables are
// top-level tables that do not use rank (evaluated once, in header); each has one element per
// rank, or for alltoallv one row of ranks elements per rank.

// vectorSides reports whether kind divides its destination and its source into per-rank blocks
// with counts (reduce_scatter: its destination, optionally).
func vectorSides(kind ir.ExpectKind) (dst, src bool) {
	switch kind {
	case ir.ExpectAllgatherv, ir.ExpectGatherv:
		return true, false
	case ir.ExpectScatterv:
		return false, true
	case ir.ExpectAlltoallv:
		return true, true
	}
	return false, false
}

// countsPlaced checks that the counts of a statement are where its form needs them: after the
// destination for the blocks of the destination, after the source for those of the source.
func (el *elaborator) countsPlaced(st *dsl.ExpectStmt, kind ir.ExpectKind) bool {
	needDst, needSrc := vectorSides(kind)
	name := func(id *dsl.Ident, def string) string {
		if id == nil {
			return def
		}
		return id.Name
	}
	dst, src := name(st.Dst, "DST"), name(st.Src, "SRC")
	switch {
	case !kind.Vector() && kind != ir.ExpectReduceScatter && (st.DstCounts != nil || st.SrcCounts != nil):
		at := st.DstCounts
		if at == nil {
			at = st.SrcCounts
		}
		hint := "its blocks are equal"
		switch kind {
		case ir.ExpectAllgather, ir.ExpectGather, ir.ExpectScatter, ir.ExpectAlltoall:
			hint = fmt.Sprintf("its blocks are equal; the form with per-rank counts is %sv", kind)
		}
		el.globalErrorf(phaseNames, diag.Name, at.Pos(), "expect %s takes no counts: %s", kind, hint)
	case kind == ir.ExpectReduceScatter && st.SrcCounts != nil:
		el.globalErrorf(phaseNames, diag.Name, st.SrcCounts.Pos(), "expect reduce_scatter: the counts go after the destination, as MPI's recvcounts: expect reduce_scatter %s %s counts %s from %s", st.Op.Name, dst, st.SrcCounts.Name, src)
	case kind == ir.ExpectReduceScatter && st.DstDispls != nil:
		el.globalErrorf(phaseNames, diag.Name, st.DstDispls.Pos(), "expect reduce_scatter takes no displs: the blocks of the source are packed in rank order, as MPI's recvcounts say")
	case needDst && st.DstCounts == nil && st.SrcCounts != nil && !needSrc:
		el.globalErrorf(phaseNames, diag.Name, st.SrcCounts.Pos(), "expect %s: the counts go after the destination, whose blocks they are: expect %s %s counts C [displs D] from %s", kind, kind, dst, src)
	case needDst && st.DstCounts == nil:
		el.globalErrorf(phaseNames, diag.Name, st.Dst.End(), "expect %s needs the counts of %s's blocks, one per rank: add `counts C [displs D]` after %s", kind, dst, dst)
	case !needDst && st.DstCounts != nil && kind.Vector():
		el.globalErrorf(phaseNames, diag.Name, st.DstCounts.Pos(), "expect %s: the counts go after the source, which is split: expect %s %s from %s counts %s", kind, kind, dst, src, st.DstCounts.Name)
	case needSrc && st.Src == nil:
		el.globalErrorf(phaseNames, diag.Name, st.End(), "expect %s needs a source and its counts: add `from BUF counts C [displs D]`", kind)
	case needSrc && st.SrcCounts == nil:
		el.globalErrorf(phaseNames, diag.Name, st.Src.End(), "expect %s needs the counts of %s's blocks, one per rank: add `counts C [displs D]` after %s", kind, src, src)
	default:
		return true
	}
	return false
}

// vecTable is the table a vector expect names (nil for nil), checked: a top-level table that
// does not use rank, of one element per rank (or ranks * ranks when rows is true), none
// negative. what is "count" or "displacement".
func (el *elaborator) vecTable(kind ir.ExpectKind, id *dsl.Ident, what string, rows bool) ([]int64, bool) {
	if id == nil {
		return nil, true
	}
	vals, found, broken := el.globals.table(id.Name)
	switch {
	case broken:
		return nil, false // reported at its declaration
	case !found:
		if _, ok := el.globals.lookup(id.Name); ok {
			el.globalErrorf(phaseNames, diag.Name, id.Pos(), "expect %s: %s is not a table: counts and displs name tables (let %s = [ ... ])", kind, id.Name, id.Name)
			return nil, false
		}
		for _, st := range el.file.Stmts {
			if l, ok := st.(*dsl.LetStmt); ok && l.Name.Name == id.Name {
				if _, ok := l.Value.(*dsl.TableExpr); ok {
					el.globalErrorf(phaseNames, diag.Name, id.Pos(), "expect %s: table %s uses rank, and a postcondition is about every rank: give each rank's %ss in one top-level table that does not use rank", kind, id.Name, what)
					return nil, false
				}
			}
		}
		el.globalErrorf(phaseNames, diag.Name, id.Pos(), "expect %s: undefined table %s (declare it at the top level with let %s = [ ... ])", kind, id.Name, id.Name)
		return nil, false
	}
	ranks := el.g.Ranks
	if n := len(vals); n != ranks && (!rows || n != ranks*ranks) {
		need := fmt.Sprintf("one per rank (%d)", ranks)
		if rows {
			need += fmt.Sprintf(", or a row of %d for each rank (%d)", ranks, ranks*ranks)
		}
		el.globalErrorf(phaseShapes, diag.Shape, id.Pos(), "expect %s: table %s has %d elements, but its %ss need %s", kind, id.Name, n, what, need)
		return nil, false
	}
	for i, v := range vals {
		if v < 0 {
			el.globalErrorf(phaseShapes, diag.Shape, id.Pos(), "expect %s: %s[%d] is %d: a %s cannot be negative", kind, id.Name, i, v, what)
			return nil, false
		}
	}
	return vals, true
}

// packed is the displacements of blocks of counts packed in rank order, row by row (saturated
// past the largest int64: such a block is past any buffer, and reported so).
func packed(counts []int64, ranks int) []int64 {
	out := make([]int64, len(counts))
	for i := range counts {
		if i%ranks != 0 {
			out[i] = out[i-1] + counts[i-1]
			if out[i] < 0 {
				out[i] = math.MaxInt64
			}
		}
	}
	return out
}

// side is one divided buffer of a vector expect, for the checks and their messages.
type side struct {
	buf            *ir.Buffer
	counts, displs []int64
	cid, did       *dsl.Ident // the tables' names in the statement; did nil: packed
}

// elem names element q of rank r's row of a table: "c[3]" (or "the packed displacement 6").
func (sd *side) elem(t []int64, id *dsl.Ident, ranks, r, q int) string {
	i := q
	if len(t) > ranks {
		i = r*ranks + q
	}
	if id == nil {
		return fmt.Sprintf("%d (packed in rank order)", t[i])
	}
	return fmt.Sprintf("%s[%d] = %d", id.Name, i, t[i])
}

// fits checks that the blocks of rank r's row of sd lie inside the buffer and, when disjoint,
// do not overlap; whose(q) words block q ("rank 2's block").
func (el *elaborator) fits(kind ir.ExpectKind, sd *side, r int, disjoint bool, whose func(q int) string) bool {
	ranks := el.g.Ranks
	at := sd.cid
	if sd.did != nil {
		at = sd.did
	}
	type blk struct{ d, c int64 }
	var bs []blk
	var qs []int
	for q := 0; q < ranks; q++ {
		d, c := ir.VecAt(sd.displs, ranks, r, q), ir.VecAt(sd.counts, ranks, r, q)
		if d > sd.buf.Count || c > sd.buf.Count-d {
			el.globalErrorf(phaseShapes, diag.Shape, at.Pos(), "expect %s: %s of %s, %s elements at %s, is past the %d elements of %s",
				kind, whose(q), sd.buf.Name, sd.elem(sd.counts, sd.cid, ranks, r, q), sd.elem(sd.displs, sd.did, ranks, r, q), sd.buf.Count, sd.buf.Name)
			return false
		}
		if c > 0 {
			bs, qs = append(bs, blk{d, c}), append(qs, q)
		}
	}
	if !disjoint {
		return true
	}
	order := make([]int, len(bs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return int(bs[i].d - bs[j].d) })
	for k := 1; k < len(order); k++ {
		a, b := bs[order[k-1]], bs[order[k]]
		if a.d+a.c > b.d {
			qa, qb := qs[order[k-1]], qs[order[k]]
			el.globalErrorf(phaseShapes, diag.Shape, at.Pos(), "expect %s: %s and %s overlap in %s: [%d:%d] and [%d:%d] (%s, %s): two blocks cannot land on one element",
				kind, whose(qa), whose(qb), sd.buf.Name, a.d, a.d+a.c, b.d, b.d+b.c, sd.elem(sd.displs, sd.did, ranks, r, qa), sd.elem(sd.displs, sd.did, ranks, r, qb))
			return false
		}
	}
	return true
}

// vectorShapes checks and records the counts and displacements of a vector expect (e's
// buffers, types and root are checked): e.Vec.
func (el *elaborator) vectorShapes(st *dsl.ExpectStmt, e *ir.Expect) bool {
	g := el.g
	ranks := g.Ranks
	kind := e.Kind
	rows := kind == ir.ExpectAlltoallv
	v := &ir.Vector{}
	for _, t := range []struct {
		to   *[]int64
		id   *dsl.Ident
		what string
	}{{&v.DstCounts, st.DstCounts, "count"}, {&v.DstDispls, st.DstDispls, "displacement"}, {&v.SrcCounts, st.SrcCounts, "count"}, {&v.SrcDispls, st.SrcDispls, "displacement"}} {
		var ok bool
		if *t.to, ok = el.vecTable(kind, t.id, t.what, rows); !ok {
			return false // one diagnostic per statement
		}
	}
	if v.DstCounts != nil && v.DstDispls == nil {
		v.DstDispls = packed(v.DstCounts, ranks)
	}
	if v.SrcCounts != nil && v.SrcDispls == nil {
		v.SrcDispls = packed(v.SrcCounts, ranks)
	}
	dst, src := &g.Buffers[e.Dst], &g.Buffers[e.Src]
	dsd := &side{buf: dst, counts: v.DstCounts, displs: v.DstDispls, cid: st.DstCounts, did: st.DstDispls}
	ssd := &side{buf: src, counts: v.SrcCounts, displs: v.SrcDispls, cid: st.SrcCounts, did: st.SrcDispls}
	srcAt := st.Dst.Pos()
	if st.Src != nil {
		srcAt = st.Src.Pos()
	}
	own := func(q int) string { return fmt.Sprintf("rank %d's block", q) }
	switch kind {
	case ir.ExpectAllgatherv, ir.ExpectGatherv:
		if !el.fits(kind, dsd, 0, true, own) {
			return false
		}
		if !e.SrcBlock {
			for q := 0; q < ranks; q++ {
				if c := v.DstCounts[q]; c > src.Count {
					el.globalErrorf(phaseShapes, diag.Shape, srcAt, "expect %s: %s has %d elements, but rank %d sends %s", kind, src.Name, src.Count, q, dsd.elem(v.DstCounts, st.DstCounts, ranks, 0, q))
					return false
				}
			}
		}
	case ir.ExpectScatterv:
		if !el.fits(kind, ssd, e.Root, false, own) {
			return false
		}
		for q := 0; q < ranks; q++ {
			if c := ir.VecAt(v.SrcCounts, ranks, e.Root, q); c > dst.Count {
				el.globalErrorf(phaseShapes, diag.Shape, st.Dst.Pos(), "expect scatterv: %s has %d elements, but rank %d receives %s", dst.Name, dst.Count, q, ssd.elem(v.SrcCounts, st.SrcCounts, ranks, e.Root, q))
				return false
			}
		}
	case ir.ExpectAlltoallv:
		for r := 0; r < ranks; r++ {
			from := func(q int) string { return fmt.Sprintf("the block rank %d receives from rank %d", r, q) }
			to := func(q int) string { return fmt.Sprintf("the block rank %d sends rank %d", r, q) }
			if !el.fits(kind, dsd, r, true, from) || !el.fits(kind, ssd, r, false, to) {
				return false
			}
		}
		for r := 0; r < ranks; r++ {
			for q := 0; q < ranks; q++ {
				if rc, sc := ir.VecAt(v.DstCounts, ranks, r, q), ir.VecAt(v.SrcCounts, ranks, q, r); rc != sc {
					el.globalErrorf(phaseShapes, diag.Shape, st.SrcCounts.Pos(), "expect alltoallv: rank %d receives %s elements from rank %d, but rank %d sends it %s: the counts of a pair must agree",
						r, dsd.elem(v.DstCounts, st.DstCounts, ranks, r, q), q, q, ssd.elem(v.SrcCounts, st.SrcCounts, ranks, q, r))
					return false
				}
			}
		}
	case ir.ExpectReduceScatter:
		v.SrcCounts, v.SrcDispls = v.DstCounts, packed(v.DstCounts, ranks)
		ssd = &side{buf: src, counts: v.SrcCounts, displs: v.SrcDispls, cid: st.DstCounts}
		if !el.fits(kind, ssd, 0, false, own) {
			return false
		}
		if e.Src != e.Dst {
			for q := 0; q < ranks; q++ {
				if c := v.DstCounts[q]; c > dst.Count {
					el.globalErrorf(phaseShapes, diag.Shape, st.Dst.Pos(), "expect reduce_scatter: %s has %d elements, but rank %d receives %s", dst.Name, dst.Count, q, dsd.elem(v.DstCounts, st.DstCounts, ranks, 0, q))
					return false
				}
			}
		}
	}
	v.Text = vectorText(st, e)
	e.Vec = v
	return true
}

// vectorText writes a vector expect as the language does, with its root evaluated.
func vectorText(st *dsl.ExpectStmt, e *ir.Expect) string {
	var b strings.Builder
	b.WriteString("expect " + e.Kind.String())
	if st.Op != nil {
		b.WriteString(" " + st.Op.Name)
	}
	b.WriteString(" " + st.Dst.Name)
	tables := func(c, d *dsl.Ident) {
		if c != nil {
			b.WriteString(" counts " + c.Name)
		}
		if d != nil {
			b.WriteString(" displs " + d.Name)
		}
	}
	tables(st.DstCounts, st.DstDispls)
	if st.Src != nil {
		b.WriteString(" from " + st.Src.Name)
		tables(st.SrcCounts, st.SrcDispls)
	}
	if e.Kind.Rooted() {
		fmt.Fprintf(&b, " root %d", e.Root)
	}
	return b.String()
}
