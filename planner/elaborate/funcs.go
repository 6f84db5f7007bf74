package elaborate

import (
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

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
	byName map[string]*defInfo // the defs with what their calls share, by name
}

// defInfo is what the calls of one def share.
type defInfo struct {
	def   *dsl.DefStmt
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
	vals  [maxArgs]int64
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
// same chain of calls. Failed calls are not remembered.
//
// The results are kept in blocks of blockSize calls of one def whose arguments differ only in
// the low bits of the last one: a loop that calls a def with its loop variable last (Swing's
// reach(q, s, b) for every block b) finds its results side by side, in a block it has just
// used, found again in recent without a lookup in the table of all blocks. The table is shared
// by the workers of a parallel elaboration (each result is then evaluated once, not once per
// worker); recent and the calls are a worker's own.
type memo struct {
	table  *memoTable
	recent []recentBlock // the blocks used last, by a hash of their key: recentSize, once used
	slab   []block       // blocks allocated ahead, a slab at a time
	free   []*call       // calls that returned, to be reused (at most MaxCallDepth are in use)
	bodies []*cexpr      // the defs' bodies compiled, by number, as they are called
}

// body returns the compiled body of def info. The scope of a def's body always has the same
// shape (its parameters, then the globals), as a compiled expression needs.
func (m *memo) body(info *defInfo) *cexpr {
	for int(info.id) >= len(m.bodies) {
		m.bodies = append(m.bodies, nil)
	}
	if m.bodies[info.id] == nil {
		m.bodies[info.id] = compileExpr(info.def.Body)
	}
	return m.bodies[info.id]
}

// memoTable holds the blocks in an open-addressing table of pointers that the workers read
// and fill without a lock: a block is published whole (its key written first) by a
// compare-and-swap into an empty slot, and a slot once filled never changes. The table starts
// small and is replaced by one twice as large, its blocks copied, when it is half full; at
// maxBlocks it is replaced by an empty one. A block put into a table being replaced may be
// missing from the next: its results are right, but lost, as are those a worker still writes
// into a block of a replaced table.
type memoTable struct {
	cur atomic.Pointer[blockTable]
	mu  sync.Mutex // held by the worker that replaces cur
}

// blockTable is one generation of a memoTable: len(slots) is a power of two.
type blockTable struct {
	slots []atomic.Pointer[block]
	shift uint8        // a hash's top bits index the slots: 64 - log2(len(slots))
	n     atomic.Int32 // the blocks put into it
}

// firstSlots is the size of a memoTable's first blockTable.
const firstSlots = 1 << 10

// forWorker returns a memo for another worker sharing m's table (nil for nil).
func (m *memo) forWorker() *memo {
	if m == nil {
		return nil
	}
	return &memo{table: m.table}
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

const (
	blockBits  = 6
	blockSize  = 1 << blockBits
	recentBits = 12
	recentSize = 1 << recentBits
	slabSize   = 32
)

// blockKey names a block: the def's number, the number of arguments, and the arguments, the
// last one without its low blockBits bits.
type blockKey struct {
	def, n int32
	args   [maxArgs]int64
}

// block holds the results of blockSize calls: vals[i] is the call whose last argument has low
// bits i, known when bit i of have is set. The worker that sets bit i of claim first writes
// vals[i], then sets bit i of have: a worker that sees the bit in have reads a written value.
type block struct {
	key         blockKey
	have, claim atomic.Uint64
	vals        [blockSize]memoVal
}

type recentBlock struct {
	key blockKey
	b   *block
}

type memoVal struct {
	v      int64
	calls  int32 // calls its evaluation made, itself included
	height int32 // levels of calls it nested, itself included
}

// maxBlocks bounds the blocks a memo table keeps (about 1 KiB each, and two slots).
const maxBlocks = 1 << 16

// memoKey is the block and the slot in it of a call of def number id with args.
func memoKey(id int32, args []int64) (blockKey, int) {
	k := blockKey{def: id, n: int32(len(args))}
	copy(k.args[:], args)
	slot := 0
	if n := len(args); n > 0 {
		slot = int(args[n-1] & (blockSize - 1))
		k.args[n-1] >>= blockBits
	}
	return k, slot
}

// hash mixes the key's words; its top bits index a memo's recent blocks and a blockTable's
// slots (its low bits depend on the low bits of the words alone).
func (k *blockKey) hash() uint64 {
	h := uint64(k.def)<<32 ^ uint64(k.n)
	for _, a := range k.args {
		h = (h ^ uint64(a)) * 0x9e3779b97f4a7c15
	}
	return h
}

// block returns the block of key k, made if it is new.
func (m *memo) block(k *blockKey) *block {
	h := k.hash()
	if m.recent == nil {
		m.recent = make([]recentBlock, recentSize)
	}
	r := &m.recent[h>>(64-recentBits)]
	if r.b != nil && r.key == *k {
		return r.b
	}
	b := m.table.find(m, k, h)
	r.key, r.b = *k, b
	return b
}

// find returns the block of key k (whose hash is h) in t, put there if it is new, with the
// blocks allocated from m's slab.
func (t *memoTable) find(m *memo, k *blockKey, h uint64) *block {
	bt := t.cur.Load()
	mask := uint64(len(bt.slots) - 1)
	for i, probes := h>>bt.shift, 0; ; i, probes = (i+1)&mask, probes+1 {
		if probes == len(bt.slots) { // full, by workers that filled it while it was replaced
			return &block{key: *k} // the results are right, but not kept
		}
		sl := &bt.slots[i]
		b := sl.Load()
		if b == nil {
			if len(m.slab) == 0 {
				m.slab = make([]block, slabSize)
			}
			nb := &m.slab[0]
			nb.key = *k
			if !sl.CompareAndSwap(nil, nb) {
				b = sl.Load() // another worker filled the slot first: nb stays in the slab
			} else {
				m.slab = m.slab[1:]
				if int(bt.n.Add(1)) > len(bt.slots)/2 {
					t.replace(bt)
				}
				return nb
			}
		}
		if b.key == *k {
			return b
		}
	}
}

// replace puts a new blockTable in place of old, unless another worker did: twice as large,
// with old's blocks, or empty once old holds maxBlocks.
func (t *memoTable) replace(old *blockTable) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur.Load() != old {
		return
	}
	if len(old.slots) >= 2*maxBlocks {
		t.cur.Store(newBlockTable(len(old.slots)))
		return
	}
	bt := newBlockTable(2 * len(old.slots))
	mask := uint64(len(bt.slots) - 1)
	for i := range old.slots {
		b := old.slots[i].Load()
		if b == nil {
			continue
		}
		j := b.key.hash() >> bt.shift
		for bt.slots[j].Load() != nil {
			j = (j + 1) & mask
		}
		bt.slots[j].Store(b)
		bt.n.Add(1)
	}
	t.cur.Store(bt)
}

func newBlockTable(slots int) *blockTable {
	return &blockTable{slots: make([]atomic.Pointer[block], slots), shift: uint8(64 - bits.TrailingZeros(uint(slots)))}
}

// siteCache is what a call site (a compiled call) keeps of its last call while the memo is
// on: for a remembered def, the block it used; for another def, its arguments and result. A
// loop that calls a def with its loop variable last finds the block without a lookup, and a
// def's body that calls another def with the same arguments as its previous evaluation did
// (Swing's partner(r, s) for every block b) finds the result without evaluating it. Each
// worker compiles its own sites, so a site is a worker's own.
type siteCache struct {
	key  blockKey // the block's key, for a remembered def; the arguments (key.n of them) for another
	b    *block
	val  memoVal
	have bool // val is the result of a call with key's arguments
}

// get returns the result of the last call, if its arguments were args.
func (c *siteCache) get(args []int64) (memoVal, bool) {
	if !c.have || int(c.key.n) != len(args) {
		return memoVal{}, false
	}
	for i, a := range args {
		if c.key.args[i] != a {
			return memoVal{}, false
		}
	}
	return c.val, true
}

// put keeps v, the result of a call with args.
func (c *siteCache) put(args []int64, v memoVal) {
	c.key.n = int32(copy(c.key.args[:], args))
	c.val, c.have = v, true
}

// get returns the remembered result of slot i of b, if there is one.
func (b *block) get(i int) (memoVal, bool) {
	if b.have.Load()&(1<<i) == 0 {
		return memoVal{}, false
	}
	return b.vals[i], true
}

// put remembers v in slot i of b, unless another worker is remembering it.
func (b *block) put(i int, v memoVal) {
	if b.claim.Or(1<<i)&(1<<i) != 0 {
		return
	}
	b.vals[i] = v
	b.have.Or(1 << i)
}

// newMemo returns a memo, or nil when off (Options, for tests that compare with and without).
func newMemo(off bool) *memo {
	if off {
		return nil
	}
	t := &memoTable{}
	t.cur.Store(newBlockTable(firstSlots))
	return &memo{table: t}
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

// evalBuiltin is evalCall of a function that is not one of the plan's defs (fns, which may be
// nil): a built-in one, or an unknown one.
func evalBuiltin(e *dsl.CallExpr, s *scope, fns *funcs, site *cexpr) (int64, *evalError) {
	if e.Fun.Name == "len" {
		return evalLen(e, s)
	}
	if b, ok := builtins[e.Fun.Name]; ok {
		if len(e.Args) != b.args {
			return 0, errAt(e, "%s takes %d argument(s), got %d", e.Fun.Name, b.args, len(e.Args))
		}
		var args [2]int64
		for i, a := range e.Args {
			var v int64
			var err *evalError
			if site != nil { // compiled, and counted with it
				v, err = site.args[i].eval(s)
			} else {
				v, err = evalInt(a, s)
			}
			if err != nil {
				return 0, err
			}
			args[i] = v
		}
		return b.f(e, args[:b.args])
	}
	if c := closestFunc(e.Fun.Name, fns); c != "" {
		return 0, errAt(e.Fun, "unknown function %s (did you mean %s?)", e.Fun.Name, c)
	}
	return 0, errAt(e.Fun, "unknown function %s (the built-in functions are %s; declare others with def)", e.Fun.Name, strings.Join(builtinNames, ", "))
}

func evalCall(e *dsl.CallExpr, s *scope) (int64, *evalError) {
	return evalCallAt(e, s, nil)
}

// maxArgs is the most arguments a call is compiled with (cexpr) and its result remembered with.
const maxArgs = 4

// evalCallAt is evalCall at a compiled call site, or at e itself when site is nil. A site
// evaluates the arguments of a def's call from their compiled trees, keeps the def once it is
// found (the globals, and so the defs, are those of one plan) and, while the memo is on,
// remembers its last call (siteCache).
func evalCallAt(e *dsl.CallExpr, s *scope, site *cexpr) (int64, *evalError) {
	// One walk up the scopes finds the globals (which hold the defs), the call in progress and
	// the memo of the rank being elaborated. A def's name is never a built-in's (defs).
	var caller *frame
	var scopeMemo *memo
	root := s
	for {
		if x := root.ext; x != nil {
			if caller == nil {
				caller = x.frame
			}
			if scopeMemo == nil {
				scopeMemo = x.memo
			}
		}
		if root.parent == nil {
			break
		}
		root = root.parent
	}
	m := s.m // counts the steps (steps.go)
	var fns *funcs
	var info *defInfo
	switch {
	case site != nil && site.def != nil:
		info = site.def
	case root.ext != nil && root.ext.fns != nil:
		fns = root.ext.fns
		info = fns.byName[e.Fun.Name]
		if site != nil {
			site.def = info
		}
	}
	if info == nil {
		if err := chargeCall(m, callSteps, e, nil, caller); err != nil {
			return 0, err
		}
		return evalBuiltin(e, s, fns, site)
	}
	def := info.def
	if len(e.Args) != len(def.Params) {
		err := errAt(e, "%s takes %d argument(s) (%s), got %d", def.Name.Name, len(def.Params), paramList(def), len(e.Args))
		err.related = append(err.related, diag.Related{Pos: def.Name.Pos(), Label: "the definition of " + def.Name.Name})
		return 0, err
	}
	// The call is counted, its arguments evaluated (in the caller's scope) and its result looked
	// up before anything is allocated for it: most calls of a memoized def are remembered ones.
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
		rankMemo = scopeMemo
	}
	var argv [maxArgs]int64
	args := argv[:0]
	for i, a := range e.Args {
		var v int64
		var err *evalError
		if site != nil {
			v, err = site.args[i].eval(s)
		} else {
			v, err = evalInt(a, s)
		}
		if err != nil {
			return 0, err
		}
		args = append(args, v)
	}
	var b *block // the memo's block for the call, if it is remembered
	var slot int
	var last *siteCache // the site's last call, if it is kept there
	if rankMemo != nil && (cnt == nil || !cnt.fresh) && len(args) <= maxArgs {
		var r memoVal
		var ok bool
		switch {
		case info.memo:
			var k blockKey
			k, slot = memoKey(info.id, args)
			if site != nil && site.cache.b != nil && site.cache.key == k {
				b = site.cache.b
			} else {
				b = rankMemo.block(&k)
				if site != nil {
					site.cache.key, site.cache.b = k, b
				}
			}
			r, ok = b.get(slot)
		case site != nil:
			last = &site.cache
			r, ok = last.get(args)
		}
		if ok {
			if cnt == nil { // an outermost call stays within the limits it stayed within once
				return r.v, chargeCall(m, callSteps, e, def, caller)
			}
			calls, deep := cnt.calls+int(r.calls)-1, depth+int(r.height)-1
			if calls <= MaxCalls && deep <= MaxCallDepth {
				cnt.calls, cnt.deep = calls, max(cnt.deep, deep)
				return r.v, chargeCall(m, callSteps, e, def, caller)
			}
			cnt.fresh, b, last = true, nil, nil // evaluating it passes a limit: let evaluation say where
		}
	}
	var cb *cexpr // the body, compiled while the memo is on
	steps := int64(callSteps)
	if rankMemo != nil {
		cb = rankMemo.body(info)
		steps += int64(cb.size)
	}
	if err := chargeCall(m, steps, e, def, caller); err != nil {
		return 0, err
	}
	c := rankMemo.newCall()
	if cnt == nil {
		c.count = callCount{calls: 1, memo: rankMemo}
		cnt = &c.count
	}
	f := &c.frame
	*f = frame{def: def, call: e, parent: caller, depth: depth, count: cnt}
	c.ext.frame = f
	names := info.names
	body := &c.body
	*body = scope{names: names[:len(names):len(names)], values: append(c.vals[:0], args...), parent: root, ext: &c.ext, m: m}
	calls0, deep0 := cnt.calls, cnt.deep
	cnt.deep = f.depth
	var v int64
	var err *evalError
	if cb != nil {
		v, err = cb.eval(body)
	} else {
		v, err = evalInt(def.Body, body)
	}
	height := cnt.deep - f.depth + 1
	cnt.deep = max(cnt.deep, deep0)
	rankMemo.freeCall(c) // nothing keeps a call once it returned: its frame and scope are done
	if err == nil && !cnt.fresh {
		r := memoVal{v: v, calls: int32(cnt.calls - calls0 + 1), height: int32(height)}
		switch {
		case b != nil:
			b.put(slot, r) // a block dropped since (maxBlocks) is written in vain
		case last != nil:
			last.put(args, r)
		}
	}
	if err != nil && err.stop != stopNone && caller == nil {
		m.noteCall(e, def.Name.Name)
	}
	if err != nil && !err.quiet && len(err.related) < 4 && e.Pos() != err.pos && !slices.ContainsFunc(err.related, func(r diag.Related) bool { return r.Pos == e.Pos() }) {
		err.related = append(err.related, diag.Related{Pos: e.Pos(), Label: "in this call of " + def.Name.Name})
	}
	return v, err
}

// chargeCall counts on m (nil: none) the steps of a call at e, of def (nil: a built-in
// function), made in the call caller (nil: an outermost call): callSteps and, when its body is
// compiled, the steps the body charges (cexpr.charge).
func chargeCall(m *meter, steps int64, e *dsl.CallExpr, def *dsl.DefStmt, caller *frame) *evalError {
	if m == nil {
		return nil
	}
	if m.left -= steps; m.left >= 0 {
		return nil
	}
	return m.pollCall(e, def, caller)
}

// pollCall is m.poll for a call at e of def (nil: a built-in function) made in the call caller
// (nil: an outermost call), which it notes if the evaluation stops there.
func (m *meter) pollCall(e *dsl.CallExpr, def *dsl.DefStmt, caller *frame) *evalError {
	err := m.poll()
	if err != nil && caller == nil && def != nil {
		m.noteCall(e, def.Name.Name)
	}
	return err
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
			fns.params[d] = defInfo{def: d, names: names, id: int32(len(fns.params))}
		}
	}
	for d, ok := range memoDefs(fns.defs) {
		info := fns.params[d]
		info.memo = ok
		fns.params[d] = info
	}
	fns.byName = map[string]*defInfo{}
	for d, info := range fns.params {
		fns.byName[d.Name.Name] = &info
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
