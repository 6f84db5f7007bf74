package elaborate

import (
	"fmt"
	"math"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
)

// scope is a chain of bindings (params, lets, vars, loop variables). Plans bind few names at
// a time, so a linear scan beats a map and allocates nothing. What few scopes need (flags,
// functions) is kept aside in ext, which keeps the scopes that loops and ifs make small.
type scope struct {
	names  []string
	values []int64
	parent *scope
	ext    *scopeExt // nil: no flags, no functions, not a call
	m      *meter    // counts the steps of the evaluations in it (steps.go); nil: none (run time)
}

// scopeExt is the rarely used part of a scope.
type scopeExt struct {
	flags []uint8 // flags[i]: what names[i] is (shorter: the rest have none)
	fns   *funcs  // the plan's functions, on the global scope only
	frame *frame  // the call whose arguments this scope binds, or nil
	memo  *memo   // the def results remembered while ranks are elaborated: a rank's top scope
	// tables holds the elements of the tables this scope binds (tables.go)
	tables [][]int64
}

const (
	flagBroken  = 1 << iota // declared, but its value failed (reported there)
	flagMutable             // a var
)

func (s *scope) extra() *scopeExt {
	if s.ext == nil {
		s.ext = &scopeExt{}
	}
	return s.ext
}

func (s *scope) flag(i int, f uint8) bool {
	return s.ext != nil && i < len(s.ext.flags) && s.ext.flags[i]&f != 0
}

func (s *scope) setFlag(i int, f uint8) {
	x := s.extra()
	for len(x.flags) <= i {
		x.flags = append(x.flags, 0)
	}
	x.flags[i] |= f
}

// find looks name up: its value, whether it is bound, and whether it is bound to a value that
// failed (bindBroken).
func (s *scope) find(name string) (v int64, found, broken bool) {
	if at, i := s.slot(name); at != nil {
		return at.values[i], true, at.flag(i, flagBroken)
	}
	return 0, false, false
}

// lookup returns the value of a name bound to one.
func (s *scope) lookup(name string) (int64, bool) {
	v, found, broken := s.find(name)
	return v, found && !broken
}

func (s *scope) has(name string) bool {
	for _, n := range s.names {
		if n == name {
			return true
		}
	}
	return false
}

func (s *scope) bind(name string, v int64) {
	s.names = append(s.names, name)
	s.values = append(s.values, v)
}

// bindBroken declares name without a value: its declaration failed and was reported, so an
// expression that uses it fails quietly (errQuiet) instead of cascading into more messages.
func (s *scope) bindBroken(name string) {
	s.bind(name, 0)
	s.setFlag(len(s.names)-1, flagBroken)
}

// slot finds the binding of name: the scope that holds it and its index, or nil.
func (s *scope) slot(name string) (*scope, int) {
	for ; s != nil; s = s.parent {
		for i := len(s.names) - 1; i >= 0; i-- {
			if s.names[i] == name {
				return s, i
			}
		}
	}
	return nil, 0
}

func (s *scope) isMutable(i int) bool { return s.flag(i, flagMutable) }
func (s *scope) isBroken(i int) bool  { return s.flag(i, flagBroken) }

// markBroken records that the value of binding i failed: its uses fail quietly.
func (s *scope) markBroken(i int) { s.setFlag(i, flagBroken) }

// reset empties the scope's own bindings, keeping their storage.
func (s *scope) reset() {
	s.names, s.values = s.names[:0], s.values[:0]
	if s.ext != nil {
		s.ext.flags = s.ext.flags[:0]
		clear(s.ext.tables)
		s.ext.tables = s.ext.tables[:0]
	}
}

// evalError is an expression error with the position of the offending sub-expression.
type evalError struct {
	pos   diag.Pos
	msg   string
	kind  string   // the format of msg: what failed, whatever the figures
	quiet bool     // the expression uses a name whose declaration failed: already reported
	stop  stopKind // the meter stopped the evaluation (steps.go): no mistake of the expression

	related []diag.Related // the calls the error happened in, innermost first
}

// errQuiet is the error of an expression that uses a broken name (scope.bindBroken).
var errQuiet = &evalError{msg: "uses a name whose declaration failed", quiet: true}

func (e *evalError) Error() string { return e.pos.String() + ": " + e.msg }

func errAt(n dsl.Node, format string, args ...any) *evalError {
	return errAtPos(n.Pos(), format, args...)
}

func errAtPos(pos diag.Pos, format string, args ...any) *evalError {
	return &evalError{pos: pos, msg: fmt.Sprintf(format, args...), kind: format}
}

// evalInt evaluates an integer expression with 64-bit signed arithmetic, floor division and
// modulo, and errors (not wrap-around) on overflow, division by zero, log2 of a non-power of
// two and negative shifts, as docs/language.md §7 (Integer semantics) requires. Each node
// counts walkSteps on s's meter (steps.go).
func evalInt(e dsl.Expr, s *scope) (int64, *evalError) {
	if m := s.m; m != nil {
		if m.left -= walkSteps; m.left < 0 {
			if err := m.poll(); err != nil {
				return 0, err
			}
		}
	}
	return evalExpr(e, s)
}

// evalExpr is evalInt of a node already counted.
func evalExpr(e dsl.Expr, s *scope) (int64, *evalError) {
	switch e := e.(type) {
	case *dsl.IntLit:
		return e.Value, nil
	case *dsl.FloatLit:
		return 0, errAt(e, "float literal %s in an integer expression: floats are allowed only in the init of an f32 or f64 buffer", e.Raw)
	case *dsl.Ident:
		if v, found, broken := s.find(e.Name); broken {
			return 0, errQuiet
		} else if found {
			return v, nil
		}
		if _, found, _ := s.table(e.Name); found {
			return 0, errAt(e, "%s is a table: read an element of it, %s[i] (len(%s) is its length)", e.Name, e.Name, e.Name)
		}
		if f := s.callFrame(); f != nil {
			return 0, errAt(e, "undefined: %s in function %s (a function sees its parameters, the params and the top-level lets that do not use rank: pass other values as arguments)", e.Name, f.def.Name.Name)
		}
		return 0, errAt(e, "undefined: %s (declare it with let, var or param, or bind it with for)", e.Name)
	case *dsl.ParenExpr: // no node of its own: counted as what it holds
		return evalExpr(e.X, s)
	case *dsl.CondExpr:
		c, err := evalInt(e.Cond, s)
		if err != nil {
			return 0, err
		}
		if c != 0 {
			return evalInt(e.Then, s)
		}
		return evalInt(e.Else, s)
	case *dsl.UnaryExpr:
		x, err := evalInt(e.X, s)
		if err != nil {
			return 0, err
		}
		return applyUnary(e, x)
	case *dsl.BinaryExpr:
		return evalBinary(e, s)
	case *dsl.CallExpr:
		return evalCall(e, s)
	case *dsl.InitExpr:
		return 0, errAt(e, "%s is an initial value: only the value of a general expect (expect BUF[SLICE] == VALUE) may use one", dsl.FormatExpr(e))
	case *dsl.IndexExpr:
		return evalIndex(e, s)
	case *dsl.TableExpr:
		return 0, errAt(e, "a table [ ... ] is the value of a let, not an integer: let NAME = [ ... ], then NAME[i]")
	}
	return 0, errAt(e, "unsupported expression")
}

// applyUnary is e's operator applied to x.
func applyUnary(e *dsl.UnaryExpr, x int64) (int64, *evalError) {
	switch e.Op {
	case "-":
		if x == math.MinInt64 {
			return 0, errAt(e, "integer overflow: -(%d) does not fit in 64 bits", x)
		}
		return -x, nil
	case "+":
		return x, nil
	case "!":
		return b2i(x == 0), nil
	case "^":
		return ^x, nil
	}
	return 0, errAt(e, "unknown unary operator %q", e.Op)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func evalBinary(e *dsl.BinaryExpr, s *scope) (int64, *evalError) {
	x, err := evalInt(e.X, s)
	if err != nil {
		return 0, err
	}
	switch e.Op { // short-circuit forms first: the right side may not be evaluable
	case "&&":
		if x == 0 {
			return 0, nil
		}
		y, err := evalInt(e.Y, s)
		return b2i(y != 0), err
	case "||":
		if x != 0 {
			return 1, nil
		}
		y, err := evalInt(e.Y, s)
		return b2i(y != 0), err
	}
	y, err := evalInt(e.Y, s)
	if err != nil {
		return 0, err
	}
	return applyBinary(e, binopOf(e.Op), x, y)
}

// binop is a binary operator, decoded once (compiled expressions keep it).
type binop uint8

const (
	opUnknown binop = iota
	opAdd
	opSub
	opMul
	opDiv
	opMod
	opPow
	opShl
	opShr
	opAnd
	opOr
	opXor
	opAndNot
	opEq
	opNe
	opLt
	opLe
	opGt
	opGe
	opLogAnd
	opLogOr
)

// binopOf decodes a binary operator as written.
func binopOf(op string) binop {
	switch op {
	case "+":
		return opAdd
	case "-":
		return opSub
	case "*":
		return opMul
	case "/":
		return opDiv
	case "%":
		return opMod
	case "**":
		return opPow
	case "<<":
		return opShl
	case ">>":
		return opShr
	case "&":
		return opAnd
	case "|":
		return opOr
	case "^":
		return opXor
	case "&^":
		return opAndNot
	case "==":
		return opEq
	case "!=":
		return opNe
	case "<":
		return opLt
	case "<=":
		return opLe
	case ">":
		return opGt
	case ">=":
		return opGe
	case "&&":
		return opLogAnd
	case "||":
		return opLogOr
	}
	return opUnknown
}

// applyBinary is x op y, e's operator op (not && or ||, which evaluate y only when needed).
func applyBinary(e *dsl.BinaryExpr, op binop, x, y int64) (int64, *evalError) {
	overflow := func() (int64, *evalError) {
		return 0, errAtPos(e.OpPos, "integer overflow: %d %s %d does not fit in 64 bits", x, e.Op, y)
	}
	switch op {
	case opAdd:
		r := x + y
		if (r > x) != (y > 0) {
			return overflow()
		}
		return r, nil
	case opSub:
		r := x - y
		if (r < x) != (y > 0) {
			return overflow()
		}
		return r, nil
	case opMul:
		r, ok := mulChecked(x, y)
		if !ok {
			return overflow()
		}
		return r, nil
	case opDiv, opMod:
		if y == 0 {
			return 0, errAtPos(e.OpPos, "division by zero in %d %s %d", x, e.Op, y)
		}
		if x == math.MinInt64 && y == -1 {
			if op == opMod {
				return 0, nil
			}
			return overflow()
		}
		q, r := x/y, x%y
		if r != 0 && (r < 0) != (y < 0) { // floor, not truncation
			q--
			r += y
		}
		if op == opDiv {
			return q, nil
		}
		return r, nil
	case opPow:
		if y < 0 {
			return 0, errAtPos(e.OpPos, "negative exponent in %d ** %d", x, y)
		}
		switch x { // the bases whose powers never overflow, however large y is
		case 0:
			return b2i(y == 0), nil
		case 1:
			return 1, nil
		case -1:
			return 1 - 2*(y&1), nil
		}
		r := int64(1)
		for i := int64(0); i < y; i++ { // |x| >= 2: at most 63 rounds before overflow
			var ok bool
			if r, ok = mulChecked(r, x); !ok {
				return overflow()
			}
		}
		return r, nil
	case opShl:
		if y < 0 {
			return 0, errAtPos(e.OpPos, "negative shift count in %d << %d", x, y)
		}
		if x == 0 {
			return 0, nil
		}
		if y >= 63 || x<<y>>y != x || (x > 0) != (x<<y > 0) {
			return overflow()
		}
		return x << y, nil
	case opShr:
		if y < 0 {
			return 0, errAtPos(e.OpPos, "negative shift count in %d >> %d", x, y)
		}
		if y > 63 {
			y = 63
		}
		return x >> y, nil
	case opAnd:
		return x & y, nil
	case opOr:
		return x | y, nil
	case opXor:
		return x ^ y, nil
	case opAndNot:
		return x &^ y, nil
	case opEq:
		return b2i(x == y), nil
	case opNe:
		return b2i(x != y), nil
	case opLt:
		return b2i(x < y), nil
	case opLe:
		return b2i(x <= y), nil
	case opGt:
		return b2i(x > y), nil
	case opGe:
		return b2i(x >= y), nil
	}
	return 0, errAtPos(e.OpPos, "unknown operator %q", e.Op)
}

// mulChecked multiplies and reports whether the product fits in 64 bits.
func mulChecked(x, y int64) (int64, bool) {
	if x == 0 || y == 0 {
		return 0, true
	}
	r := x * y
	if r/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
		return 0, false
	}
	return r, true
}

// hasFloat reports whether an expression contains a float literal; such an init expression is
// computed in float64.
func hasFloat(e dsl.Expr) bool {
	switch e := e.(type) {
	case *dsl.FloatLit:
		return true
	case *dsl.ParenExpr:
		return hasFloat(e.X)
	case *dsl.CondExpr:
		return hasFloat(e.Cond) || hasFloat(e.Then) || hasFloat(e.Else)
	case *dsl.UnaryExpr:
		return hasFloat(e.X)
	case *dsl.BinaryExpr:
		return hasFloat(e.X) || hasFloat(e.Y)
	case *dsl.CallExpr:
		for _, a := range e.Args {
			if hasFloat(a) {
				return true
			}
		}
	case *dsl.IndexExpr:
		return hasFloat(e.Index)
	}
	return false
}

// uses reports whether an expression refers to name.
func uses(e dsl.Expr, name string) bool {
	return usesAny(e, map[string]bool{name: true})
}

// usesAny reports whether an expression refers to any of names.
func usesAny(e dsl.Expr, names map[string]bool) bool {
	switch e := e.(type) {
	case *dsl.Ident:
		return names[e.Name]
	case *dsl.ParenExpr:
		return usesAny(e.X, names)
	case *dsl.CondExpr:
		return usesAny(e.Cond, names) || usesAny(e.Then, names) || usesAny(e.Else, names)
	case *dsl.UnaryExpr:
		return usesAny(e.X, names)
	case *dsl.BinaryExpr:
		return usesAny(e.X, names) || usesAny(e.Y, names)
	case *dsl.InitExpr:
		return usesAny(e.Index, names) || usesAny(e.Rank, names)
	case *dsl.CallExpr:
		for _, a := range e.Args {
			if usesAny(a, names) {
				return true
			}
		}
	case *dsl.IndexExpr:
		return names[e.Table.Name] || usesAny(e.Index, names)
	case *dsl.TableExpr:
		for _, x := range e.Elems {
			if usesAny(x, names) {
				return true
			}
		}
		if f := e.For; f != nil {
			return usesAny(f.From, names) || usesAny(f.To, names) || f.Step != nil && usesAny(f.Step, names) || f.Cond != nil && usesAny(f.Cond, names)
		}
	}
	return false
}

// firstFloat is the first float literal in e, or nil.
func firstFloat(e dsl.Expr) *dsl.FloatLit {
	switch e := e.(type) {
	case *dsl.FloatLit:
		return e
	case *dsl.ParenExpr:
		return firstFloat(e.X)
	case *dsl.UnaryExpr:
		return firstFloat(e.X)
	case *dsl.BinaryExpr:
		if f := firstFloat(e.X); f != nil {
			return f
		}
		return firstFloat(e.Y)
	case *dsl.CondExpr:
		for _, x := range []dsl.Expr{e.Cond, e.Then, e.Else} {
			if f := firstFloat(x); f != nil {
				return f
			}
		}
	case *dsl.CallExpr:
		for _, a := range e.Args {
			if f := firstFloat(a); f != nil {
				return f
			}
		}
	case *dsl.IndexExpr:
		return firstFloat(e.Index)
	}
	return nil
}

// needsInt is the error of a float operand x where an integer is needed: at the float literal
// that made x a float, and at what needed the integer.
func needsInt(x dsl.Expr, what string, at diag.Pos) *evalError {
	f := firstFloat(x)
	operand := dsl.FormatExpr(x)
	if len(operand) > 32 {
		operand = "an operand"
	}
	why := " (because of " + f.Raw + ")"
	if x == dsl.Expr(f) {
		why = ""
	}
	err := errAtPos(f.Pos(), "%s needs integers; %s is a float%s", what, operand, why)
	err.related = []diag.Related{{Pos: at, Label: what}}
	return err
}

// evalFloat evaluates an init expression of a float buffer. Typing is local: a sub-expression
// without a float literal is an integer one (evalInt: integer division, %, comparisons), and
// becomes a float only where an operator combines it with a float: `+ - * / **`, unary `-` and
// `+`, min and max, and the branches of a conditional. `/` between floats is true division.
func evalFloat(e dsl.Expr, s *scope) (float64, *evalError) {
	if !hasFloat(e) {
		v, err := evalInt(e, s)
		return float64(v), err
	}
	if m := s.m; m != nil {
		if m.left -= walkSteps; m.left < 0 {
			if err := m.poll(); err != nil {
				return 0, err
			}
		}
	}
	switch e := e.(type) {
	case *dsl.FloatLit:
		return e.Value, nil
	case *dsl.ParenExpr:
		return evalFloat(e.X, s)
	case *dsl.CondExpr:
		if hasFloat(e.Cond) {
			return 0, needsInt(e.Cond, "the condition of if-then-else", e.Pos())
		}
		c, err := evalInt(e.Cond, s)
		if err != nil {
			return 0, err
		}
		if c != 0 {
			return evalFloat(e.Then, s)
		}
		return evalFloat(e.Else, s)
	case *dsl.UnaryExpr:
		if e.Op != "-" && e.Op != "+" {
			return 0, needsInt(e.X, "operator "+e.Op, e.Pos())
		}
		x, err := evalFloat(e.X, s)
		if e.Op == "-" {
			x = -x
		}
		return x, err
	case *dsl.CallExpr:
		if (e.Fun.Name == "min" || e.Fun.Name == "max") && len(e.Args) == 2 {
			a, err := evalFloat(e.Args[0], s)
			if err != nil {
				return 0, err
			}
			b, err := evalFloat(e.Args[1], s)
			if err != nil {
				return 0, err
			}
			if e.Fun.Name == "min" {
				return math.Min(a, b), nil
			}
			return math.Max(a, b), nil
		}
		for _, a := range e.Args {
			if hasFloat(a) {
				return 0, needsInt(a, e.Fun.Name, e.Fun.Pos())
			}
		}
	case *dsl.BinaryExpr:
		switch e.Op {
		case "+", "-", "*", "/", "**":
		default:
			x := e.X
			if !hasFloat(x) {
				x = e.Y
			}
			return 0, needsInt(x, "operator "+e.Op, e.OpPos)
		}
		x, err := evalFloat(e.X, s)
		if err != nil {
			return 0, err
		}
		y, err := evalFloat(e.Y, s)
		if err != nil {
			return 0, err
		}
		switch e.Op {
		case "+":
			return x + y, nil
		case "-":
			return x - y, nil
		case "*":
			return x * y, nil
		case "/":
			if y == 0 {
				return 0, errAtPos(e.OpPos, "division by zero")
			}
			return x / y, nil
		}
		return math.Pow(x, y), nil
	}
	return 0, errAt(e, "unsupported expression")
}
