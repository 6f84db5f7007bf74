package elaborate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
)

// assert checks an assert statement in s for rank (-1: for every rank, a global assert). A
// false condition is an error at the statement that quotes its message and the params the
// condition reads, marking those set by -p: the parameter set is refused. It reports whether the
// condition held (a condition that fails to evaluate is reported as such, and counts as held).
func (el *elaborator) assert(st *dsl.AssertStmt, s *scope, rank int) bool {
	c, err := evalInt(st.Cond, s)
	if err != nil {
		el.evalFailed(rank, err)
		return true
	}
	if c != 0 {
		return true
	}
	msg := dsl.FormatExpr(st.Cond)
	if st.Msg != nil {
		msg = st.Msg.Value
	}
	var params []string
	for _, p := range el.g.Params {
		if uses(st.Cond, p.Name) {
			v := fmt.Sprintf("%s = %d", p.Name, p.Value)
			if _, ok := el.overrides[p.Name]; ok {
				v += " as given" // by -p, the library's params, or predict's sizes
			}
			params = append(params, v)
		}
	}
	sort.Strings(params)
	text := "assertion failed: " + msg
	if len(params) > 0 {
		text += " (with " + strings.Join(params, ", ") + ")"
	}
	el.report(phaseNames, rank, &diag.Diagnostic{Code: diag.Assert, Pos: st.Pos(), Msg: text}, "assert")
	return false
}

// declare binds a let (flags 0) or a var (flagMutable) in s. A value that fails is reported,
// and the name is bound broken, so that its uses do not cascade into more errors.
func (el *elaborator) declare(id *dsl.Ident, value *cexpr, s *scope, flags uint8) {
	if s.has(id.Name) || s.has(tableKey(id.Name)) {
		el.errorf(phaseNames, diag.Name, id.Pos(), "%s is already defined in this block", id.Name)
		return
	}
	v, ok := el.evalc(value, s)
	s.bind(id.Name, v)
	if !ok {
		flags |= flagBroken
	}
	if flags != 0 {
		s.setFlag(len(s.names)-1, flags)
	}
}

// declareTable binds a table in s (a let of [ ... ]).
func (el *elaborator) declareTable(id *dsl.Ident, t *dsl.TableExpr, s *scope) {
	if s.has(id.Name) || s.has(tableKey(id.Name)) {
		el.errorf(phaseNames, diag.Name, id.Pos(), "%s is already defined in this block", id.Name)
		return
	}
	vals, err := evalTable(t, s)
	if err != nil {
		el.evalFailed(el.rank, err)
		s.bindBroken(tableKey(id.Name))
		return
	}
	s.bindTable(id.Name, vals)
}

// assign runs `NAME = EXPR` or `NAME op= EXPR` on a var in scope; value is its value
// compiled (assignValue).
func (el *elaborator) assign(st *dsl.AssignStmt, value *cexpr, s *scope) {
	name := st.Name.Name
	at, i := s.slot(name)
	switch {
	case at == nil:
		if v := closestVar(name, s); v != "" {
			el.errorf(phaseNames, diag.Name, st.Name.Pos(), "assignment to undeclared %s (did you mean %s?)", name, v)
			return
		}
		el.errorf(phaseNames, diag.Name, st.Name.Pos(), "assignment to undeclared %s: declare it first with var %s = ...", name, name)
		return
	case at.isBroken(i):
		return // its declaration failed, and was reported
	case !at.isMutable(i):
		el.errorf(phaseNames, diag.Name, st.Name.Pos(), "cannot assign to %s: it is a constant (a let, param or loop variable); declare it with var to change it", name)
		return
	}
	v, ok := el.evalc(value, s)
	if !ok {
		at.markBroken(i)
		return
	}
	at.values[i] = v
}

// assignValue is the value an assignment gives its var: EXPR, or NAME op EXPR.
func assignValue(st *dsl.AssignStmt) dsl.Expr {
	if st.Op == "=" {
		return st.Value
	}
	return &dsl.BinaryExpr{Span: st.Span, Op: strings.TrimSuffix(st.Op, "="), OpPos: st.OpPos, X: st.Name, Y: st.Value}
}

// assigned adds to names every name that an assignment in stmts (or nested blocks) changes.
func assigned(stmts []dsl.Stmt, names map[string]bool) {
	for _, st := range stmts {
		switch st := st.(type) {
		case *dsl.AssignStmt:
			names[st.Name.Name] = true
		case *dsl.ForStmt:
			assigned(st.Body, names)
		case *dsl.IfStmt:
			assigned(st.Then, names)
			assigned(st.Else, names)
		}
	}
}

// closestVar suggests a visible var for a misspelt assignment.
func closestVar(name string, s *scope) string {
	var vars []string
	for ; s != nil; s = s.parent {
		for i, n := range s.names {
			if s.isMutable(i) {
				vars = append(vars, n)
			}
		}
	}
	return dsl.Closest(name, vars)
}
