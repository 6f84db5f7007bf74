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
	params map[*dsl.DefStmt]defInfo
}

// defInfo is what the calls of one def share.
type defInfo struct {
	names []string // its parameter names
	id    int32    // its number, for the memo's keys
	memo  bool     // its calls are remembered: it may recurse (memoDefs)
}

// call is what one call of a def holds, allocated at once: the frame, the scope binding the
// arguments (up to four without another allocation) and, for an outermost call, the count of
// calls made under it.
type call struct {
	frame frame
	ext   scopeExt
	body  scope
	vals  [4]int64
	count callCount
}

// frame is a call of a def in progress.
type frame struct {
	def    *dsl.DefStmt
	call   *dsl.CallExpr
	parent *frame
	depth  int
	count  *callCount // shared by the calls under the outermost one
}

// callCount is what the calls made in the evaluation of one outermost call share.
type callCount struct {
	calls int   // calls made, a remembered call counted with every call its evaluation made
	deep  int   // the deepest nesting reached so far in the call being evaluated
	fresh bool  // a remembered result would pass a limit: evaluate every call, as without memo
	memo  *memo // the rank's memo (a def's body scope is not under the rank's scopes), or nil
}

// memo remembers what calls of defs returned while the ranks are elaborated, those made by
// other defs too. A def sees only its arguments and the globals, which are fixed by then, so a
// call returns the same value wherever it is made. What it changes is the time, never the
// result nor the limits: a remembered result keeps how many calls its evaluation made and how
// deep it nested, and counts them again where it is reused, so MaxCalls and MaxCallDepth are
// passed exactly where evaluating every call would pass them; where a reuse would pass one, the
// rest of the outermost call is evaluated call by call (callCount.fresh), so the error names the
// same chain of calls. Failed calls are not remembered. Each worker of a parallel elaboration
// has its own memo; a full one is emptied and starts again.
type memo struct {
	small map[smallKey]memoVal // calls of up to three arguments that fit in 32 bits
	big   map[memoKey]memoVal  // other calls of up to four arguments
	free  []*call              // calls that returned, to be reused (at most MaxCallDepth are in use)
}

// newCall returns a zeroed call, reused if m (which may be nil) has one.
func (m *memo) newCall() *call {
	if m == nil || len(m.free) == 0 {
		return &call{}
	}
	c := m.free[len(m.free)-1]
	m.free = m.free[:len(m.free)-1]
	*c = call{}
	return c
}

// freeCall gives back a call that returned.
func (m *memo) freeCall(c *call) {
	if m != nil && len(m.free) < MaxCallDepth {
		m.free = append(m.free, c)
	}
}

type smallKey struct {
	def, n     uint16
	a0, a1, a2 int32
}

type memoKey struct {
	def  int32
	n    int32
	args [4]int64
}

type memoVal struct {
	v      int64
	calls  int32 // calls its evaluation made, itself included
	height int32 // levels of calls it nested, itself included
}

// maxMemo bounds the results a memo keeps (about 32 bytes each with a small key, 56 with a big
// one, and the map's overhead).
const maxMemo = 1 << 22

// memoKeys is the memo.s key for a call of def number id with args; small tells which map.
func memoKeys(id int32, args []int64) (sk smallKey, bk memoKey, small bool) {
	if len(args) <= 3 && id < 1<<16 {
		small = true
		var a [3]int32
		for i, v := range args {
			if v != int64(int32(v)) {
				small = false
				break
			}
			a[i] = int32(v)
		}
		if small {
			return smallKey{def: uint16(id), n: uint16(len(args)), a0: a[0], a1: a[1], a2: a[2]}, bk, true
		}
	}
	bk = memoKey{def: id, n: int32(len(args))}
	copy(bk.args[:], args)
	return sk, bk, false
}

func (m *memo) get(sk smallKey, bk memoKey, small bool) (memoVal, bool) {
	if small {
		v, ok := m.small[sk]
		return v, ok
	}
	v, ok := m.big[bk]
	return v, ok
}

func (m *memo) put(sk smallKey, bk memoKey, small bool, v memoVal) {
	if len(m.small)+len(m.big) >= maxMemo {
		clear(m.small)
		clear(m.big)
	}
	if small {
		m.small[sk] = v
	} else {
		m.big[bk] = v
	}
}

// newMemo returns a memo, or nil when off (Options, for tests that compare with and without).
func newMemo(off bool) *memo {
	if off {
		return nil
	}
	return &memo{small: map[smallKey]memoVal{}, big: map[memoKey]memoVal{}}
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
var builtinNames = []string{"min", "max", "log2", "flog2", "clog2", "hibit", "lobit", "popcount", "nextpow2", "quo", "rem", "len"}

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
	if e.Fun.Name == "len" {
		return evalLen(e, s)
	}
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
	// The call is counted, its arguments evaluated (in the caller's scope) and its result looked
	// up before anything is allocated for it: most calls of a memoized def are remembered ones.
	caller := s.callFrame()
	info := fns.params[def]
	depth := 1
	var cnt *callCount // nil: an outermost call, whose count is allocated with it
	var rankMemo *memo
	if caller != nil {
		depth, cnt = caller.depth+1, caller.count
		if depth > MaxCallDepth {
			return 0, errAt(e, "calls nested more than %d deep: %s (a recursion that never reaches its base case?)", MaxCallDepth, chain(&frame{def: def, parent: caller}))
		}
		if cnt.calls++; cnt.calls > MaxCalls {
			return 0, errAt(e, "more than %d function calls in one expression: %s (a recursion that branches too much?)", MaxCalls, chain(&frame{def: def, parent: caller}))
		}
		rankMemo = cnt.memo
	} else {
		rankMemo = s.memoOf()
	}
	var argv [4]int64
	args := argv[:0]
	for _, a := range e.Args {
		v, err := evalInt(a, s)
		if err != nil {
			return 0, err
		}
		args = append(args, v)
	}
	var m *memo
	var sk smallKey
	var bk memoKey
	var small bool
	if info.memo && rankMemo != nil && (cnt == nil || !cnt.fresh) && len(args) <= len(bk.args) {
		m = rankMemo
		sk, bk, small = memoKeys(info.id, args)
		if r, ok := m.get(sk, bk, small); ok {
			if cnt == nil { // an outermost call stays within the limits it stayed within once
				return r.v, nil
			}
			calls, deep := cnt.calls+int(r.calls)-1, depth+int(r.height)-1
			if calls <= MaxCalls && deep <= MaxCallDepth {
				cnt.calls, cnt.deep = calls, max(cnt.deep, deep)
				return r.v, nil
			}
			cnt.fresh, m = true, nil // evaluating it passes a limit: let evaluation say where
		}
	}
	c := rankMemo.newCall()
	defer rankMemo.freeCall(c) // nothing keeps a call once it returned: its frame and scope are done
	if cnt == nil {
		c.count = callCount{calls: 1, memo: rankMemo}
		cnt = &c.count
	}
	f := &c.frame
	*f = frame{def: def, call: e, parent: caller, depth: depth, count: cnt}
	c.ext.frame = f
	names := info.names
	body := &c.body
	*body = scope{names: names[:len(names):len(names)], values: append(c.vals[:0], args...), parent: root, ext: &c.ext}
	calls0, deep0 := cnt.calls, cnt.deep
	cnt.deep = f.depth
	v, err := evalInt(def.Body, body)
	height := cnt.deep - f.depth + 1
	cnt.deep = max(cnt.deep, deep0)
	if m != nil && err == nil && !cnt.fresh {
		m.put(sk, bk, small, memoVal{v: v, calls: int32(cnt.calls - calls0 + 1), height: int32(height)})
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
	fns := &funcs{defs: map[string]*dsl.DefStmt{}, params: map[*dsl.DefStmt]defInfo{}}
	for _, st := range el.file.Stmts {
		d, ok := st.(*dsl.DefStmt)
		if !ok {
			continue
		}
		name := d.Name.Name
		if _, ok := builtins[name]; ok || name == "len" {
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
			fns.params[d] = defInfo{names: names, id: int32(len(fns.params))}
		}
	}
	for d, ok := range memoDefs(fns.defs) {
		info := fns.params[d]
		info.memo = ok
		fns.params[d] = info
	}
	return fns
}

// memoDefs tells which defs have their calls remembered: those that may recurse, directly or
// through the defs they call. Another def makes a bounded number of calls, and evaluating it
// again costs less than looking it up.
func memoDefs(defs map[string]*dsl.DefStmt) map[*dsl.DefStmt]bool {
	calls := map[*dsl.DefStmt][]*dsl.DefStmt{}
	for _, d := range defs {
		callees(d.Body, func(name string) {
			if c, ok := defs[name]; ok {
				calls[d] = append(calls[d], c)
			}
		})
	}
	// reaches reports whether to is reachable from the callees of from.
	reaches := func(from, to *dsl.DefStmt) bool {
		seen := map[*dsl.DefStmt]bool{}
		stack := append([]*dsl.DefStmt(nil), calls[from]...)
		for len(stack) > 0 {
			d := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if d == to {
				return true
			}
			if !seen[d] {
				seen[d] = true
				stack = append(stack, calls[d]...)
			}
		}
		return false
	}
	recursive := map[*dsl.DefStmt]bool{}
	for _, d := range defs {
		recursive[d] = reaches(d, d)
	}
	out := map[*dsl.DefStmt]bool{}
	for _, d := range defs {
		out[d] = recursive[d]
		for r, ok := range recursive {
			if ok && !out[d] && reaches(d, r) {
				out[d] = true
			}
		}
	}
	return out
}

// callees calls f with the name of every function e calls.
func callees(e dsl.Expr, f func(name string)) {
	switch e := e.(type) {
	case *dsl.CallExpr:
		f(e.Fun.Name)
		for _, a := range e.Args {
			callees(a, f)
		}
	case *dsl.ParenExpr:
		callees(e.X, f)
	case *dsl.UnaryExpr:
		callees(e.X, f)
	case *dsl.BinaryExpr:
		callees(e.X, f)
		callees(e.Y, f)
	case *dsl.CondExpr:
		callees(e.Cond, f)
		callees(e.Then, f)
		callees(e.Else, f)
	case *dsl.IndexExpr:
		callees(e.Index, f)
	}
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
