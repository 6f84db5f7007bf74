package elaborate

import (
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
)

// Functions: the built-in integer helpers, and the plan's own pure functions (def). A def's
// body is one expression evaluated in a scope of its parameters over the globals (params and
// the top-level lets that do not use rank), so a function never sees a rank's lets or vars
// unless they are passed. Recursion is allowed, bounded by MaxCallDepth nested calls and
// MaxCalls calls per evaluated expression: a conditional expression ends it.
const (
	MaxCallDepth = 64
	MaxCalls     = 1 << 16
)

// funcs are the plan's defs; the global scope holds them.
type funcs struct {
	defs   map[string]*dsl.DefStmt
	params map[*dsl.DefStmt][]string // each def's parameter names, shared by its calls
}

// call is what one call of a def holds, allocated at once: the frame, the scope binding the
// arguments (up to four without another allocation) and, for an outermost call, the count of
// calls made under it.
type call struct {
	frame frame
	ext   scopeExt
	body  scope
	vals  [4]int64
	calls int
}

// frame is a call of a def in progress.
type frame struct {
	def    *dsl.DefStmt
	call   *dsl.CallExpr
	parent *frame
	depth  int
	calls  *int // calls made in the evaluation of the outermost expression
}

// memo remembers what outermost calls of defs (those made by a rank's statements, not by other
// defs) returned while the ranks are elaborated. A def sees only its arguments and the globals,
// which are fixed by then, so such a call returns the same value on every rank; and it starts
// its count of calls and its depth afresh, so one that stayed within MaxCalls and MaxCallDepth
// once always does. Failed calls are not remembered. Each worker of a parallel elaboration has
// its own.
type memo struct {
	m map[memoKey]int64
}

type memoKey struct {
	def  *dsl.DefStmt
	n    int
	args [4]int64
}

// maxMemo bounds the results a memo keeps.
const maxMemo = 1 << 16

// newMemo returns a memo, or nil when off (Options, for tests that compare with and without).
func newMemo(off bool) *memo {
	if off {
		return nil
	}
	return &memo{m: map[memoKey]int64{}}
}

// memoOf finds the memo of the rank being elaborated, if s is under one.
func (s *scope) memoOf() *memo {
	for ; s != nil; s = s.parent {
		if s.ext != nil && s.ext.memo != nil {
			return s.ext.memo
		}
	}
	return nil
}

// builtin is a built-in function of fixed arity.
type builtin struct {
	args int
	f    func(e *dsl.CallExpr, a []int64) (int64, *evalError)
}

// builtinNames lists the built-in functions in the order of docs/language.md.
var builtinNames = []string{"min", "max", "log2", "flog2", "clog2", "hibit", "lobit", "popcount", "nextpow2", "quo", "rem"}

var builtins = map[string]builtin{
	"min": {2, func(_ *dsl.CallExpr, a []int64) (int64, *evalError) { return min(a[0], a[1]), nil }},
	"max": {2, func(_ *dsl.CallExpr, a []int64) (int64, *evalError) { return max(a[0], a[1]), nil }},
	"log2": {1, func(e *dsl.CallExpr, a []int64) (int64, *evalError) {
		if x := a[0]; x <= 0 || x&(x-1) != 0 {
			return 0, errAt(e, "log2(%d): the argument must be a positive power of two (flog2 and clog2 round down and up)", x)
		}
		return int64(bits.TrailingZeros64(uint64(a[0]))), nil
	}},
	"flog2": {1, func(e *dsl.CallExpr, a []int64) (int64, *evalError) {
		if a[0] <= 0 {
			return 0, errAt(e, "flog2(%d): the argument must be positive", a[0])
		}
		return int64(bits.Len64(uint64(a[0])) - 1), nil
	}},
	"clog2": {1, func(e *dsl.CallExpr, a []int64) (int64, *evalError) {
		if a[0] <= 0 {
			return 0, errAt(e, "clog2(%d): the argument must be positive", a[0])
		}
		return int64(bits.Len64(uint64(a[0] - 1))), nil
	}},
	"hibit": {1, func(e *dsl.CallExpr, a []int64) (int64, *evalError) {
		if a[0] < 0 {
			return 0, errAt(e, "hibit(%d): the argument must not be negative", a[0])
		}
		if a[0] == 0 {
			return 0, nil
		}
		return 1 << (bits.Len64(uint64(a[0])) - 1), nil
	}},
	"lobit": {1, func(e *dsl.CallExpr, a []int64) (int64, *evalError) {
		if a[0] < 0 {
			return 0, errAt(e, "lobit(%d): the argument must not be negative", a[0])
		}
		return a[0] & -a[0], nil
	}},
	"popcount": {1, func(e *dsl.CallExpr, a []int64) (int64, *evalError) {
		if a[0] < 0 {
			return 0, errAt(e, "popcount(%d): the argument must not be negative", a[0])
		}
		return int64(bits.OnesCount64(uint64(a[0]))), nil
	}},
	"nextpow2": {1, func(e *dsl.CallExpr, a []int64) (int64, *evalError) {
		if a[0] <= 1 {
			return 1, nil
		}
		if a[0] > 1<<62 {
			return 0, errAt(e, "integer overflow: nextpow2(%d) does not fit in 64 bits", a[0])
		}
		return 1 << bits.Len64(uint64(a[0]-1)), nil
	}},
	"quo": {2, func(e *dsl.CallExpr, a []int64) (int64, *evalError) {
		if a[1] == 0 {
			return 0, errAt(e, "division by zero in quo(%d, %d)", a[0], a[1])
		}
		if a[0] == math.MinInt64 && a[1] == -1 {
			return 0, errAt(e, "integer overflow: quo(%d, %d) does not fit in 64 bits", a[0], a[1])
		}
		return a[0] / a[1], nil
	}},
	"rem": {2, func(e *dsl.CallExpr, a []int64) (int64, *evalError) {
		if a[1] == 0 {
			return 0, errAt(e, "division by zero in rem(%d, %d)", a[0], a[1])
		}
		if a[1] == -1 {
			return 0, nil
		}
		return a[0] % a[1], nil
	}},
}

// root is the outermost scope of s: the globals, which hold the defs.
func (s *scope) root() *scope {
	for s.parent != nil {
		s = s.parent
	}
	return s
}

// frame is the call in progress that s belongs to, or nil outside functions.
func (s *scope) callFrame() *frame {
	for ; s != nil; s = s.parent {
		if s.ext != nil && s.ext.frame != nil {
			return s.ext.frame
		}
	}
	return nil
}

func evalCall(e *dsl.CallExpr, s *scope) (int64, *evalError) {
	if b, ok := builtins[e.Fun.Name]; ok {
		if len(e.Args) != b.args {
			return 0, errAt(e, "%s takes %d argument(s), got %d", e.Fun.Name, b.args, len(e.Args))
		}
		var args [2]int64
		for i, a := range e.Args {
			v, err := evalInt(a, s)
			if err != nil {
				return 0, err
			}
			args[i] = v
		}
		return b.f(e, args[:b.args])
	}
	root := s.root()
	var def *dsl.DefStmt
	var fns *funcs
	if root.ext != nil && root.ext.fns != nil {
		fns = root.ext.fns
		def = fns.defs[e.Fun.Name]
	}
	if def == nil {
		if c := closestFunc(e.Fun.Name, fns); c != "" {
			return 0, errAt(e.Fun, "unknown function %s (did you mean %s?)", e.Fun.Name, c)
		}
		return 0, errAt(e.Fun, "unknown function %s (the built-in functions are %s; declare others with def)", e.Fun.Name, strings.Join(builtinNames, ", "))
	}
	if len(e.Args) != len(def.Params) {
		err := errAt(e, "%s takes %d argument(s) (%s), got %d", def.Name.Name, len(def.Params), paramList(def), len(e.Args))
		err.related = append(err.related, diag.Related{Pos: def.Name.Pos(), Label: "the definition of " + def.Name.Name})
		return 0, err
	}
	caller := s.callFrame()
	c := &call{}
	f := &c.frame
	*f = frame{def: def, call: e, parent: caller, depth: 1}
	if caller != nil {
		f.depth, f.calls = caller.depth+1, caller.calls
	} else {
		f.calls = &c.calls
	}
	if f.depth > MaxCallDepth {
		return 0, errAt(e, "calls nested more than %d deep: %s (a recursion that never reaches its base case?)", MaxCallDepth, chain(f))
	}
	if *f.calls++; *f.calls > MaxCalls {
		return 0, errAt(e, "more than %d function calls in one expression: %s (a recursion that branches too much?)", MaxCalls, chain(f))
	}
	c.ext.frame = f
	names := fns.params[def]
	body := &c.body
	*body = scope{names: names[:len(names):len(names)], values: c.vals[:0], parent: root, ext: &c.ext}
	for _, a := range e.Args {
		v, err := evalInt(a, s)
		if err != nil {
			return 0, err
		}
		body.values = append(body.values, v)
	}
	var m *memo
	var key memoKey
	if caller == nil && len(body.values) <= len(key.args) {
		m = s.memoOf()
		key = memoKey{def: def, n: len(body.values)}
		copy(key.args[:], body.values)
	}
	if m != nil {
		if v, ok := m.m[key]; ok {
			return v, nil
		}
	}
	v, err := evalInt(def.Body, body)
	if m != nil && err == nil && len(m.m) < maxMemo {
		m.m[key] = v
	}
	if err != nil && !err.quiet && len(err.related) < 4 && e.Pos() != err.pos && !slices.ContainsFunc(err.related, func(r diag.Related) bool { return r.Pos == e.Pos() }) {
		err.related = append(err.related, diag.Related{Pos: e.Pos(), Label: "in this call of " + def.Name.Name})
	}
	return v, err
}

// paramList is "a, b": the parameters of def.
func paramList(def *dsl.DefStmt) string {
	names := make([]string, len(def.Params))
	for i, p := range def.Params {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// chain names the calls in progress, outermost first: "f -> g -> f -> ...".
func chain(f *frame) string {
	var names []string
	for ; f != nil; f = f.parent {
		names = append(names, f.def.Name.Name)
	}
	for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
		names[i], names[j] = names[j], names[i]
	}
	if len(names) > 6 {
		names = append(names[:5:5], "...")
	}
	return strings.Join(names, " -> ")
}

// defs checks the top-level def statements of f and returns them by name; a def inside a
// block is reported by block.
func (el *elaborator) defs() *funcs {
	fns := &funcs{defs: map[string]*dsl.DefStmt{}, params: map[*dsl.DefStmt][]string{}}
	for _, st := range el.file.Stmts {
		d, ok := st.(*dsl.DefStmt)
		if !ok {
			continue
		}
		name := d.Name.Name
		if _, ok := builtins[name]; ok {
			el.globalErrorf(phaseNames, diag.Name, d.Name.Pos(), "def %s: %s is a built-in function; pick another name", name, name)
			continue
		}
		if first, dup := fns.defs[name]; dup {
			el.report(phaseNames, -1, diag.Errorf(diag.Name, d.Name.Pos(), "function %s defined twice", name).Relate(first.Name.Pos(), "the first definition of "+name), "def twice")
			continue
		}
		seen := map[string]diag.Pos{}
		ok = true
		for _, p := range d.Params {
			if at, dup := seen[p.Name]; dup {
				el.report(phaseNames, -1, diag.Errorf(diag.Name, p.Pos(), "parameter %s of %s declared twice", p.Name, name).Relate(at, "the first parameter "+p.Name), "def param twice")
				ok = false
			}
			seen[p.Name] = p.Pos()
		}
		if ok {
			fns.defs[name] = d
			names := make([]string, len(d.Params))
			for i, p := range d.Params {
				names[i] = p.Name
			}
			fns.params[d] = names
		}
	}
	return fns
}

// closestFunc suggests a function for a misspelt call.
func closestFunc(name string, fns *funcs) string {
	names := append([]string(nil), builtinNames...)
	if fns != nil {
		for n := range fns.defs {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return dsl.Closest(name, names)
}
