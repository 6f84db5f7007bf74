package elaborate

import (
	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
)

// spots adds to into where each op statement of stmts, and of the blocks in them, writes its
// slices (ir.Graph.Spots): it is the same on every rank, so the Graph keeps it once per
// statement rather than once per op.
func spots(stmts []dsl.Stmt, into map[diag.Pos]ir.Spot) {
	for _, st := range stmts {
		switch st := st.(type) {
		case *dsl.ForStmt:
			spots(st.Body, into)
		case *dsl.IfStmt:
			spots(st.Then, into)
			spots(st.Else, into)
		case *dsl.OpStmt:
			if sp, ok := spotOf(st.Op); ok {
				into[st.Name.Pos()] = sp
			}
		}
	}
}

// spotOf is where an operation writes its slices; ok is false when it has none.
func spotOf(o dsl.Operation) (sp ir.Spot, ok bool) {
	switch o := o.(type) {
	case *dsl.SendOp:
		sp.Src = first(o.Slice)
	case *dsl.RecvOp:
		sp.Dst = first(o.Slice)
	case *dsl.WriteOp:
		sp.Src, sp.Dst = first(o.Src), at(o.Dst)
	case *dsl.ReadOp:
		sp.Src, sp.Dst = at(o.Src), first(o.Dst)
	case *dsl.AtomicOp:
		sp.Dst, sp.Fetch = at(o.Target), at(o.To)
	case *dsl.ReduceOp:
		sp.Src, sp.Dst = first(o.Src), first(o.Dst)
	case *dsl.CopyOp:
		sp.Src, sp.Dst = first(o.Src), first(o.Dst)
	case *dsl.WaitOp:
		sp.Dst = at(o.Region)
		if o.Word != nil {
			sp.Dst = at(o.Word)
		}
	default:
		return sp, false
	}
	return sp, true
}

// at is where sl is written; none for a nil slice.
func at(sl *dsl.Slice) diag.Pos {
	if sl == nil {
		return diag.Pos{}
	}
	return sl.Pos()
}

// first is where the first slice of a list starting with sl is written: inside a
// `{SLICE for ...}`, its SLICE.
func first(sl *dsl.Slice) diag.Pos {
	for sl != nil && sl.For != nil {
		sl = sl.For.Slice
	}
	return at(sl)
}
