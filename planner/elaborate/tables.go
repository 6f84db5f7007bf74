package elaborate

import (
	"math"

	"github.com/coredag/coredag/dsl"
)

// Tables: `let NAME = [ ... ]` binds an immutable integer table, read as NAME[INDEX]. A table is
// bound in its scope under tableKey(NAME), a key no identifier can spell, so a table and a
// constant never hide each other; its value there is the table's place in the scope's tables.

// MaxTable bounds the elements of one table, and the passes of the loop that builds it.
const MaxTable = 1 << 20

// tableKey is the binding name of table name.
func tableKey(name string) string { return "[]" + name }

// bindTable binds table name to vals in s.
func (s *scope) bindTable(name string, vals []int64) {
	x := s.extra()
	s.bind(tableKey(name), int64(len(x.tables)))
	x.tables = append(x.tables, vals)
}

// table looks table name up: its elements, whether it is bound, and whether its declaration
// failed.
func (s *scope) table(name string) (vals []int64, found, broken bool) {
	at, i := s.slot(tableKey(name))
	if at == nil {
		return nil, false, false
	}
	if at.isBroken(i) {
		return nil, true, true
	}
	return at.ext.tables[at.values[i]], true, false
}

// evalTable builds the elements of a table.
func evalTable(e *dsl.TableExpr, s *scope) ([]int64, *evalError) {
	if e.For == nil {
		if len(e.Elems) > MaxTable {
			return nil, errAt(e, "a table of %d elements: tables hold at most %d", len(e.Elems), MaxTable)
		}
		out := make([]int64, 0, len(e.Elems))
		for _, x := range e.Elems {
			v, err := evalInt(x, s)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	f := e.For
	if len(e.Elems) != 1 { // reported by the parser
		return nil, errQuiet
	}
	from, err := evalInt(f.From, s)
	if err != nil {
		return nil, err
	}
	to, err := evalInt(f.To, s)
	if err != nil {
		return nil, err
	}
	step := int64(1)
	if f.Step != nil {
		if step, err = evalInt(f.Step, s); err != nil {
			return nil, err
		}
		if step <= 0 {
			return nil, errAt(f.Step, "for step %d: the step must be positive", step)
		}
	}
	if n := tripCount(from, to, step); n > MaxTable {
		return nil, errAt(e, "the loop of this table runs %d passes: tables hold at most %d elements", n, MaxTable)
	}
	body := &scope{parent: s, m: s.m}
	var out []int64
	for v := from; v < to; v += step {
		body.reset()
		body.bind(f.Var.Name, v)
		if f.Cond != nil {
			c, err := evalInt(f.Cond, body)
			if err != nil {
				return nil, err
			}
			if c == 0 {
				continue
			}
		}
		x, err := evalInt(e.Elems[0], body)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
		if v > math.MaxInt64-step {
			break
		}
	}
	return out, nil
}

// evalIndex is NAME[INDEX].
func evalIndex(e *dsl.IndexExpr, s *scope) (int64, *evalError) {
	name := e.Table.Name
	vals, found, broken := s.table(name)
	switch {
	case broken:
		return 0, errQuiet
	case !found:
		if _, ok := s.lookup(name); ok {
			return 0, errAt(e.Table, "%s is not a table: only a let of [ ... ] can be indexed", name)
		}
		if f := s.callFrame(); f != nil {
			return 0, errAt(e.Table, "undefined table %s in function %s (a function sees the tables of the top-level lets that do not use rank)", name, f.def.Name.Name)
		}
		return 0, errAt(e.Table, "undefined table %s (declare it with let %s = [ ... ])", name, name)
	}
	i, err := evalInt(e.Index, s)
	if err != nil {
		return 0, err
	}
	if i < 0 || i >= int64(len(vals)) {
		if len(vals) == 0 {
			return 0, errAt(e.Index, "index %d is out of range for table %s, which is empty", i, name)
		}
		return 0, errAt(e.Index, "index %d is out of range for table %s (%d elements: 0..%d)", i, name, len(vals), len(vals)-1)
	}
	return vals[i], nil
}

// evalLen is len(NAME): the number of elements of a table.
func evalLen(e *dsl.CallExpr, s *scope) (int64, *evalError) {
	if len(e.Args) != 1 {
		return 0, errAt(e, "len takes 1 argument (a table), got %d", len(e.Args))
	}
	id, ok := e.Args[0].(*dsl.Ident)
	if !ok {
		return 0, errAt(e.Args[0], "len takes the name of a table, as in len(blocks)")
	}
	vals, found, broken := s.table(id.Name)
	switch {
	case broken:
		return 0, errQuiet
	case !found:
		return 0, errAt(id, "len(%s): %s is not a table (declare it with let %s = [ ... ])", id.Name, id.Name, id.Name)
	}
	return int64(len(vals)), nil
}
