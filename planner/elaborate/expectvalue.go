package elaborate

import (
	"slices"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/ir"
)

// MaxValueElems bounds the elements (times the ranks) a general expect states: it is evaluated
// and proven element by element.
const MaxValueElems = 1 << 16

// expectValue evaluates the general form, `expect BUF[SLICE] == VALUE [on rank R | on ranks LO
// .. HI]`, into g.Expects: VALUE at every element of the slice on every rank it names, as a sum
// of initial elements (BUF[INDEX]@RANK) and a constant.
func (el *elaborator) expectValue(st *dsl.ExpectStmt) {
	g := el.g
	sl := st.Slice
	if sl.For != nil {
		el.globalErrorf(phaseShapes, diag.Shape, sl.Pos(), "expect: a list of slices cannot be compared with a value: write one slice, BUF[LO:HI]")
		return
	}
	b, ok := el.bufIdx[sl.Buf.Name]
	if !ok {
		if !el.badBuf[sl.Buf.Name] {
			el.globalErrorf(phaseNames, diag.Name, sl.Buf.Pos(), "unknown buffer %s in expect", sl.Buf.Name)
		}
		return
	}
	buf := &g.Buffers[b]
	e := ir.Expect{Kind: ir.ExpectValue, Dst: b, Src: b, Pos: st.Pos(), Text: dsl.FormatStmt(st)}
	eval := func(x dsl.Expr) (int64, bool) {
		v, err := evalInt(x, el.globals)
		if err != nil {
			el.evalFailed(-1, err)
		}
		return v, err == nil
	}
	switch sl.Kind {
	case dsl.SliceWhole:
		e.Lo, e.Hi = 0, buf.Count
	case dsl.SliceElem:
		v, ok := eval(sl.Lo)
		if !ok {
			return
		}
		if v < 0 || v >= buf.Count { // before v + 1, which overflows for the greatest index
			el.globalErrorf(phaseShapes, diag.Shape, sl.Lo.Pos(), "expect: index %d is out of range for %s (%d elements: 0..%d)", v, buf.Name, buf.Count, buf.Count-1)
			return
		}
		e.Lo, e.Hi = v, v+1
	case dsl.SliceRange:
		lo, ok1 := eval(sl.Lo)
		hi, ok2 := eval(sl.Hi)
		if !ok1 || !ok2 {
			return
		}
		e.Lo, e.Hi = lo, hi
	}
	if e.Lo < 0 || e.Hi > buf.Count || e.Lo >= e.Hi {
		el.globalErrorf(phaseShapes, diag.Shape, sl.Pos(), "expect: %s[%d:%d] is not a slice of %s, which has %d elements (0 <= lo < hi <= %d)", buf.Name, e.Lo, e.Hi, buf.Name, buf.Count, buf.Count)
		return
	}
	switch {
	case st.OnRank != nil:
		r, ok := eval(st.OnRank)
		if !ok {
			return
		}
		if r < 0 || r >= int64(g.Ranks) {
			el.globalErrorf(phaseShapes, diag.Shape, st.OnRank.Pos(), "expect: rank %d is not a rank: ranks are 0 to %d", r, g.Ranks-1)
			return
		}
		e.Ranks = []int{int(r)}
	case st.OnLo != nil:
		lo, ok1 := eval(st.OnLo)
		hi, ok2 := eval(st.OnHi)
		if !ok1 || !ok2 {
			return
		}
		if lo < 0 || hi > int64(g.Ranks) || lo > hi {
			el.globalErrorf(phaseShapes, diag.Shape, st.OnLo.Pos(), "expect: ranks %d .. %d is not a range of ranks: 0 <= lo <= hi <= %d", lo, hi, g.Ranks)
			return
		}
		for r := lo; r < hi; r++ {
			e.Ranks = append(e.Ranks, int(r))
		}
	default:
		for r := range g.Ranks {
			e.Ranks = append(e.Ranks, r)
		}
	}
	if n := e.Hi - e.Lo; n*int64(len(e.Ranks)) > MaxValueElems {
		el.globalErrorf(phaseNames, diag.Limit, st.Pos(), "expect: %d elements on %d ranks: a general expect states at most %d elements over its ranks, as it is proven element by element (state a smaller slice, or use a collective form)", n, len(e.Ranks), MaxValueElems)
		return
	}
	if st.If != nil {
		var err *evalError
		if e.Given, err = el.givens(st.If, nil); err != nil {
			el.evalFailed(-1, err)
			return
		}
	}
	e.Want = make([]ir.Linear, 0, (e.Hi-e.Lo)*int64(len(e.Ranks)))
	s := &scope{parent: el.globals, m: el.work}
	s.bind("rank", 0)
	s.bind("i", 0)
	for _, r := range e.Ranks {
		s.values[0] = int64(r)
		for i := e.Lo; i < e.Hi; i++ {
			s.values[1] = i
			v, err := el.linear(st.Value, s, buf)
			if err != nil {
				el.evalFailed(-1, err)
				return
			}
			e.Want = append(e.Want, v.done())
		}
	}
	g.Expects = append(g.Expects, e)
}

// lin is a value under construction: a constant and counted initial elements.
type lin struct {
	c     int64
	terms []ir.Term
}

// done sorts l's terms, adds up those about one element and drops those counted 0 times.
func (l lin) done() ir.Linear {
	ts := slices.Clone(l.terms)
	slices.SortFunc(ts, func(a, b ir.Term) int {
		switch {
		case a.Buf != b.Buf:
			return int(a.Buf) - int(b.Buf)
		case a.Elem != b.Elem:
			if a.Elem < b.Elem {
				return -1
			}
			return 1
		}
		return a.Rank - b.Rank
	})
	out := ts[:0]
	for _, t := range ts {
		if k := len(out) - 1; k >= 0 && out[k].Buf == t.Buf && out[k].Elem == t.Elem && out[k].Rank == t.Rank {
			out[k].N += t.N
			if out[k].N == 0 {
				out = out[:k]
			}
			continue
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		out = nil
	}
	return ir.Linear{Const: l.c, Terms: out}
}

func (l lin) scale(k int64) lin {
	out := lin{c: l.c * k}
	for _, t := range l.terms {
		t.N *= k
		out.terms = append(out.terms, t)
	}
	return out
}

// hasInit reports whether e uses an initial value.
func hasInit(e dsl.Expr) bool {
	switch e := e.(type) {
	case *dsl.InitExpr:
		return true
	case *dsl.ParenExpr:
		return hasInit(e.X)
	case *dsl.CondExpr:
		return hasInit(e.Cond) || hasInit(e.Then) || hasInit(e.Else)
	case *dsl.UnaryExpr:
		return hasInit(e.X)
	case *dsl.BinaryExpr:
		return hasInit(e.X) || hasInit(e.Y)
	case *dsl.CallExpr:
		return slices.ContainsFunc(e.Args, hasInit)
	}
	return false
}

// linear evaluates the value of a general expect of buffer dst: integer arithmetic as
// everywhere, with initial values (BUF[INDEX]@RANK, of dst's element type) that may only be
// added, subtracted, negated and multiplied by integers.
func (el *elaborator) linear(e dsl.Expr, s *scope, dst *ir.Buffer) (lin, *evalError) {
	if !hasInit(e) {
		v, err := evalInt(e, s)
		return lin{c: v}, err
	}
	switch e := e.(type) {
	case *dsl.InitExpr:
		b, ok := el.bufIdx[e.Buf.Name]
		if !ok {
			return lin{}, errAt(e.Buf, "unknown buffer %s in an initial value", e.Buf.Name)
		}
		buf := &el.g.Buffers[b]
		if dst != nil && buf.Type != dst.Type {
			return lin{}, errAt(e.Buf, "%s is %s but %s is %s: an expect's value is in the element type of its buffer", buf.Name, buf.Type, dst.Name, dst.Type)
		}
		idx, err := evalInt(e.Index, s)
		if err != nil {
			return lin{}, err
		}
		if idx < 0 || idx >= buf.Count {
			return lin{}, errAt(e.Index, "index %d is outside %s, which has %d elements", idx, buf.Name, buf.Count)
		}
		r, err := evalInt(e.Rank, s)
		if err != nil {
			return lin{}, err
		}
		if r < 0 || r >= int64(el.g.Ranks) {
			return lin{}, errAt(e.Rank, "rank %d is not a rank: ranks are 0 to %d", r, el.g.Ranks-1)
		}
		return lin{terms: []ir.Term{{Buf: b, Elem: idx, Rank: int(r), N: 1}}}, nil
	case *dsl.ParenExpr:
		return el.linear(e.X, s, dst)
	case *dsl.CondExpr:
		if hasInit(e.Cond) {
			break
		}
		c, err := evalInt(e.Cond, s)
		if err != nil {
			return lin{}, err
		}
		if c != 0 {
			return el.linear(e.Then, s, dst)
		}
		return el.linear(e.Else, s, dst)
	case *dsl.UnaryExpr:
		x, err := el.linear(e.X, s, dst)
		switch {
		case err != nil:
			return lin{}, err
		case e.Op == "+":
			return x, nil
		case e.Op == "-":
			return x.scale(-1), nil
		}
	case *dsl.BinaryExpr:
		switch e.Op {
		case "+", "-":
			x, err := el.linear(e.X, s, dst)
			if err != nil {
				return lin{}, err
			}
			y, err := el.linear(e.Y, s, dst)
			if err != nil {
				return lin{}, err
			}
			if e.Op == "-" {
				y = y.scale(-1)
			}
			return lin{c: x.c + y.c, terms: append(x.terms, y.terms...)}, nil
		case "*":
			if hasInit(e.X) && hasInit(e.Y) {
				break
			}
			x, err := el.linear(e.X, s, dst)
			if err != nil {
				return lin{}, err
			}
			y, err := el.linear(e.Y, s, dst)
			if err != nil {
				return lin{}, err
			}
			if len(x.terms) == 0 {
				return y.scale(x.c), nil
			}
			return x.scale(y.c), nil
		}
	}
	return lin{}, errAt(e, "%s: initial values (BUF[INDEX]@RANK) may only be added, subtracted and multiplied by integers in an expect's value", dsl.FormatExpr(e))
}

// givens appends to out the preconditions of a general expect: BUF[INDEX]@RANK == VALUE, joined
// by &&, evaluated once (they may not use rank or i).
func (el *elaborator) givens(e dsl.Expr, out []ir.Given) ([]ir.Given, *evalError) {
	for {
		p, ok := e.(*dsl.ParenExpr)
		if !ok {
			break
		}
		e = p.X
	}
	b, ok := e.(*dsl.BinaryExpr)
	if ok && b.Op == "&&" {
		out, err := el.givens(b.X, out)
		if err != nil {
			return nil, err
		}
		return el.givens(b.Y, out)
	}
	if ok && b.Op == "==" {
		at, x := b.X, b.Y
		if !hasInit(at) {
			at, x = x, at
		}
		if ref, ok := at.(*dsl.InitExpr); ok && !hasInit(x) {
			s := &scope{parent: el.globals, m: el.work}
			v, err := el.linear(ref, s, nil)
			if err != nil {
				return nil, err
			}
			want, err := evalInt(x, s)
			if err != nil {
				return nil, err
			}
			t := v.terms[0]
			g := ir.Given{Buf: t.Buf, Elem: t.Elem, Rank: t.Rank, Value: want}
			for _, h := range out {
				if h.Buf == g.Buf && h.Elem == g.Elem && h.Rank == g.Rank && h.Value != g.Value {
					return nil, errAt(b, "%s cannot start as both %d and %d", dsl.FormatExpr(ref), h.Value, want)
				}
			}
			return append(out, g), nil
		}
	}
	return nil, errAt(e, "%s: a precondition says what elements of the initial memory hold: BUF[INDEX]@RANK == VALUE, several joined by &&", dsl.FormatExpr(e))
}
