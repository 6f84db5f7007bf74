package elaborate

import (
	"unsafe"

	"github.com/coredag/coredag/dsl"
)

// Compiled expressions: the expressions that a rank's statements evaluate pass after pass (loop
// bounds, conditions, lets, name indices, slice bounds) are kept beside their statement (code)
// as a tree of cexprs, evaluated as evalInt would, with the same values and errors. What they
// save is the walk: operators are decoded once, and an identifier remembers where in the scope
// chain it was found, checking only that the binding there still has its name. A statement's
// expression always meets scopes of the same shape: each layer binds, before it, the same names
// in the same order (a redeclaration is refused on every pass alike), so the binding found once
// is the innermost one every time. A call is evaluated by evalCall, its arguments from their
// trees; a def's body is compiled too, once per memo (funcs.go). What the tree does not handle
// (floats, tables) is evalInt's.
type cexpr struct {
	kind  ckind
	op    binop
	size  int32 // the steps it counts (steps.go): its nodes evaluated whenever it is, branches aside
	e     dsl.Expr
	val   int64  // cLit
	name  string // cIdent
	hops  int32  // cIdent: the layers above the scope where it was found, or -1
	idx   int32  // cIdent: its index in that layer
	bound *byte  // cIdent: the text of the name bound there (a binding compared by pointer)
	bin   *dsl.BinaryExpr
	un    *dsl.UnaryExpr
	x, y  *cexpr // operands; a condition's condition and then
	z     *cexpr // a condition's else
	call  *dsl.CallExpr
	args  []*cexpr  // cCall: the arguments
	def   *defInfo  // cCall: the def called, once found
	cache siteCache // cCall: its last call
}

type ckind uint8

const (
	cOther ckind = iota // evalInt
	cLit
	cIdent
	cBinary
	cUnary
	cCond
	cCall
)

// compileExpr compiles e (nil: nil).
func compileExpr(e dsl.Expr) *cexpr {
	if e == nil {
		return nil
	}
	c := &cexpr{e: e, hops: -1, size: 1}
	switch e := e.(type) {
	case *dsl.IntLit:
		c.kind, c.val = cLit, e.Value
	case *dsl.Ident:
		c.kind, c.name = cIdent, e.Name
	case *dsl.ParenExpr: // evaluated as what it holds: no node of its own
		return compileExpr(e.X)
	case *dsl.BinaryExpr:
		c.kind, c.bin, c.op, c.x, c.y = cBinary, e, binopOf(e.Op), compileExpr(e.X), compileExpr(e.Y)
		c.size += c.x.size
		if c.op != opLogAnd && c.op != opLogOr { // else y counts when it is evaluated
			c.size += c.y.size
		}
	case *dsl.UnaryExpr:
		c.kind, c.un, c.x = cUnary, e, compileExpr(e.X)
		c.size += c.x.size
	case *dsl.CondExpr: // the branch counts when it is taken
		c.kind, c.x, c.y, c.z = cCond, compileExpr(e.Cond), compileExpr(e.Then), compileExpr(e.Else)
		c.size += c.x.size
	case *dsl.CallExpr: // the body counts when it is evaluated (evalCallAt)
		if len(e.Args) <= maxArgs {
			c.kind, c.call, c.args = cCall, e, compileExprs(e.Args)
			for _, a := range c.args {
				c.size += a.size
			}
		}
	}
	return c
}

func compileExprs(es []dsl.Expr) []*cexpr {
	out := make([]*cexpr, len(es))
	for i, e := range es {
		out[i] = compileExpr(e)
	}
	return out
}

// charge counts c's steps on s's meter, if it has one (steps.go): the nodes that its
// evaluation, about to start, evaluates whatever the branches taken. The rest counts as it is
// evaluated.
func (c *cexpr) charge(s *scope) *evalError {
	if m := s.m; m != nil {
		return m.charge(int64(c.size))
	}
	return nil
}

// eval is evalInt(c.e, s). The caller charged c's steps (charge).
func (c *cexpr) eval(s *scope) (int64, *evalError) {
	switch c.kind {
	case cLit:
		return c.val, nil
	case cIdent:
		if at := c.binding(s); at != nil {
			if at.flag(int(c.idx), flagBroken) {
				return 0, errQuiet
			}
			v := at.values[c.idx]
			if at.parent == nil && !at.isMutable(int(c.idx)) {
				c.kind, c.val = cLit, v // a param or a global let: the same for every rank
			}
			return v, nil
		}
		v, err := evalExpr(c.e, s)
		c.remember(s)
		return v, err
	case cBinary:
		x, err := c.x.eval(s)
		if err != nil {
			return 0, err
		}
		switch c.op { // short-circuit forms first: the right side may not be evaluable
		case opLogAnd:
			if x == 0 {
				return 0, nil
			}
			if err := c.y.charge(s); err != nil {
				return 0, err
			}
			y, err := c.y.eval(s)
			return b2i(y != 0), err
		case opLogOr:
			if x != 0 {
				return 1, nil
			}
			if err := c.y.charge(s); err != nil {
				return 0, err
			}
			y, err := c.y.eval(s)
			return b2i(y != 0), err
		}
		y, err := c.y.eval(s)
		if err != nil {
			return 0, err
		}
		v, ok := quickBinary(c.op, x, y)
		if !ok {
			v, err = applyBinary(c.bin, c.op, x, y)
		}
		c.fold(v, err, c.x, c.y)
		return v, err
	case cUnary:
		x, err := c.x.eval(s)
		if err != nil {
			return 0, err
		}
		v, err := applyUnary(c.un, x)
		c.fold(v, err, c.x, c.x)
		return v, err
	case cCond:
		v, err := c.x.eval(s)
		if err != nil {
			return 0, err
		}
		branch := c.z
		if v != 0 {
			branch = c.y
		}
		if m := s.m; m != nil { // branch.charge, inlined: most calls of a recursive def pass here
			if m.left -= int64(branch.size); m.left < 0 {
				if err := m.poll(); err != nil {
					return 0, err
				}
			}
		}
		return branch.eval(s)
	case cCall:
		return evalCallAt(c.call, s, c)
	}
	return evalExpr(c.e, s)
}

// quickBinary is applyBinary for the operators and operands that index ops and slices: +, -, *
// without overflow, / and % by a positive divisor, comparisons. It reports false for the rest,
// and for anything applyBinary would refuse.
func quickBinary(op binop, x, y int64) (int64, bool) {
	switch op {
	case opAdd:
		r := x + y
		return r, (r > x) == (y > 0)
	case opSub:
		r := x - y
		return r, (r < x) == (y > 0)
	case opMul:
		if x == int64(int32(x)) && y == int64(int32(y)) { // the product fits in 64 bits
			return x * y, true
		}
	case opDiv, opMod:
		if y > 0 {
			q, r := x/y, x%y
			if r < 0 { // floor, not truncation
				q, r = q-1, r+y
			}
			if op == opDiv {
				return q, true
			}
			return r, true
		}
	case opEq:
		return b2i(x == y), true
	case opNe:
		return b2i(x != y), true
	case opLt:
		return b2i(x < y), true
	case opLe:
		return b2i(x <= y), true
	case opGt:
		return b2i(x > y), true
	case opGe:
		return b2i(x >= y), true
	}
	return 0, false
}

// fold makes c the literal v, the value it evaluated to without error from operands x and y,
// when those are literals: c is then a constant (which counts the steps of the nodes it stands
// for: its size is kept).
func (c *cexpr) fold(v int64, err *evalError, x, y *cexpr) {
	if err == nil && x.kind == cLit && y.kind == cLit {
		c.kind, c.val = cLit, v
	}
}

// binding is the scope layer where an identifier was found before, if it still binds the name
// at the same index.
func (c *cexpr) binding(s *scope) *scope {
	if c.hops < 0 {
		return nil
	}
	for h := c.hops; h > 0 && s != nil; h-- {
		s = s.parent
	}
	if s == nil || int(c.idx) >= len(s.names) {
		return nil
	}
	if n := s.names[c.idx]; len(n) == len(c.name) && (unsafe.StringData(n) == c.bound || n == c.name) {
		return s
	}
	return nil
}

// remember notes where an identifier is bound in s, if it is.
func (c *cexpr) remember(s *scope) {
	at, i := s.slot(c.name)
	if at == nil {
		return
	}
	hops := int32(0)
	for ; s != at; s = s.parent {
		hops++
	}
	c.hops, c.idx, c.bound = hops, int32(i), unsafe.StringData(at.names[i])
}
