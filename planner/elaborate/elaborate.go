// Package elaborate is the first pass of the planner: syntax to Graph. It evaluates the SPMD
// text of a parsed plan (package dsl) for every rank into an ir.Graph (buffers, queues, ops and
// `after` edges, all with source positions) and runs the front-end checks on the way: names,
// shapes and bounds, access flags, queue pairing and send/recv matching, and buffer inits proven
// to evaluate. The Graph it returns is frozen; package verify checks it next.
//
// The language's rules are in the files named after what they elaborate: elaborate.go (the
// header, ranks, blocks, loops, queues and ops), stmts.go (asserts, lets, vars), ops.go
// (operations and their slices), expr.go and cexpr.go (expressions), funcs.go (defs and
// built-ins), names.go (indexed names), resolve.go (references, queue pairing, message
// matching), init.go and initrange.go (buffer inits), expect.go (postconditions), cascade.go
// (what a failed declaration silences), limits.go (the limits and the memory budget), steps.go
// (the evaluation budget, and cancellation). How the work is split and memory is taken is apart:
// parallel.go elaborates the ranks past the first in shards, and alloc.go gathers what an
// elaborator allocates from, whose tactics (values in chunks, interned names, arrays grown
// ahead and prefaulted, windows joined) are in package internal/arena.
package elaborate

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/planner/elaborate/internal/arena"
)

// Limits that keep a mistaken plan (a loop to 1e18, a million ranks) from exhausting the machine:
// exceeding one is an error, never a hang.
const (
	MaxRanks      = 1 << 16
	MaxOps        = 1 << 24 // ops over all ranks (16M); the memory budget lowers it (Options, BytesPerOp)
	MaxInitChecks = 1 << 22 // per-element init evaluations done while checking (the rest at run time)
	MaxIterations = 1 << 24 // loop iterations over all ranks
	DefaultDepth  = 128
)

// Elaborate evaluates the SPMD text of f for every rank into a Graph and runs the front-end
// checks (names, shapes, matching), within opt's limits. params overrides declared params
// (`coredag -p`). The error, if any, is a diag.List holding every diagnostic of the first phase
// that found some, a *budget.Error when the Graph would not fit in opt.Budget, or, once ctx is
// cancelled, its cause (context.Cause): ctx is looked at every millisecond or so of evaluation
// and between ranks.
func Elaborate(ctx context.Context, f *dsl.File, params map[string]int64, opt Options) (*ir.Graph, error) {
	g, _, err := elaborate(ctx, f, params, opt)
	return g, err
}

type elaborator struct {
	// The plan: its text, the Graph being built, the settings and what was found.
	file      *dsl.File
	g         *ir.Graph
	overrides map[string]int64 // the params set by -p
	opt       Options          // the settings of this elaboration (limits, budget)
	diag      [numPhases]diags
	refusal   *budget.Error // an array the budget refused (room): the elaboration's error

	// What every rank shares, read by header.
	globals       *scope                   // params, ranks and the top-level lets that do not depend on rank
	globalAsserts map[*dsl.AssertStmt]bool // top-level asserts that do not use rank, checked once by header
	globalTables  map[*dsl.LetStmt]bool    // top-level tables that do not use rank, bound once by header
	refused       bool                     // a global assert failed: the parameter set is refused
	bufIdx        map[string]ir.BufID      // buffer name -> id
	badBuf        map[string]bool          // buffers whose declaration failed (and was reported)
	perElem       map[ir.BufID]bool        // buffer -> its init depends on the element index i
	memo          *memo                    // def results, for the ranks this elaborator elaborates

	// The limits (limits.go) and what is left of them.
	maxOps    int    // the op limit: MaxOps, or lower (Options), or what the budget leaves for ops (room)
	whyMaxOps string // why the limit is lower, for its diagnostic
	budgetOps bool   // the memory budget sets the limit: passing it is a refusal (tooManyOps)
	iters     int64  // loop iterations so far
	countWork int    // what is left of maxCountWork
	truncated bool   // a limit was passed: the rest is not elaborated
	cancelled bool   // the context was cancelled: the elaboration stopped (result)

	// The evaluation budget (steps.go): el's meter, and what its diagnostic tells of the work.
	work       *meter
	at         dsl.Stmt  // the statement being elaborated
	loops      []loopRun // the loops in progress, outermost first
	ranksDone  int       // the ranks el elaborated
	ranksStart int64     // the count when el began the first of them
	rankStart  int64     // the count when el began the current one

	// The rank being elaborated: reset for each.
	rank     int
	opIdx    map[string]ir.OpID                // op names kept by their text (names.go)
	queueIdx map[string]ir.QueueID             // queue names kept by their text
	opNames  map[string]bool                   // base names of ops declared on this rank (for hints), made by lookupOp
	pending  []pendingRef                      // `after` references, resolved at the end of the rank
	splits   []split                           // this rank's reduces and copies over lists (pairs.go)
	splitOf  map[ir.OpID]int                   // a split's index in splits, by its nop
	opQueue  []ref                             // per op of this rank: its queue reference
	broken   struct{ ops, queues brokenNames } // declarations of this rank that failed (cascade.go)
	stopped  bool                              // an assert of this rank failed: the rest of its text is not elaborated
	cur      *stmtCode                         // the op statement being elaborated: its compiled slices

	peerRefs []queueRef // per queue el made: its peer queue reference, resolved by pairQueues
	names    nameTables // what el keeps per name of the text and per base name (names.go)

	// The ranks el elaborates and where their ops go (parallel.go): all of them into the Graph,
	// or a shard's into its windows of the Graph's arrays.
	first, end int        // the ranks whose ops g holds: first .. end-1
	shard      *shard     // the shard el elaborates, nil: the whole plan
	pool       *pool      // what it shares with the other shards
	opBase     ir.OpID    // the id of g.Ops[0]: 0, but in a shard, where it is its window's
	queueBase  ir.QueueID // the id of g.Queues[0], likewise

	mem allocs // where el's allocations come from (alloc.go)

	// only, when not nil, are the only ranks elaborated (ElaborateRanks), ascending; outside is
	// the index in it of a rank outside the world, or -1.
	only    []int
	outside int
}

// extra returns op's OpExtra, giving it one if it has none (a plan of atomics has one per op).
func (el *elaborator) extra(op *ir.Op) *ir.OpExtra {
	if op.X == nil {
		op.X = el.mem.extras.New()
		op.X.Fetch = ir.NoSlice
	}
	return op.X
}

// pendingRef is a dependency edge by name, resolved once the whole rank is elaborated because
// references may name ops declared later. The waiting side is an op id (an `after` clause) or,
// in a dependency statement, another name.
type pendingRef struct {
	from ref
	to   ir.OpID // the op that waits, or None
	toBy ref     // the waiting op's name when to is None
}

// queueRef names a queue, resolved at the end of the rank like op references.
type queueRef struct {
	name, base string
	pos        diag.Pos
}

// errorf reports a mistake of the current rank.
func (el *elaborator) errorf(ph phase, code diag.Code, pos diag.Pos, format string, args ...any) {
	el.report(ph, el.rank, diag.Errorf(code, pos, format, args...), format)
}

// globalErrorf reports a mistake that does not depend on the rank.
func (el *elaborator) globalErrorf(ph phase, code diag.Code, pos diag.Pos, format string, args ...any) {
	el.report(ph, -1, diag.Errorf(code, pos, format, args...), format)
}

// errorOn reports a mistake of rank.
func (el *elaborator) errorOn(ph phase, rank int, code diag.Code, pos diag.Pos, format string, args ...any) {
	el.report(ph, rank, diag.Errorf(code, pos, format, args...), format)
}

// report adds d, found on rank (-1: not about a rank), to the diagnostics of phase ph. kind
// identifies the check that failed (usually the format of the message): the same mistake on
// several ranks, at the same places, is one diagnostic (diag.Group).
func (el *elaborator) report(ph phase, rank int, d *diag.Diagnostic, kind string) {
	if rank < 0 {
		el.diag[ph].Add(d, kind)
	} else {
		el.diag[ph].Add(d, kind, rank)
	}
}

// firstDeclaration labels the first declaration of a name declared twice, at first; the second
// is at again. In a loop they are the same statement.
func firstDeclaration(name string, first, again diag.Pos) string {
	if first == again {
		return "the first declaration of " + name + ", by an earlier pass of this statement"
	}
	return "the first declaration of " + name
}

func (el *elaborator) result() error {
	if el.cancelled {
		return context.Cause(el.work.ctx)
	}
	if el.refusal != nil {
		return el.refusal
	}
	for ph := range el.diag {
		if l := el.diag[ph].list(el.g.Ranks); len(l) > 0 {
			return l
		}
	}
	return nil
}

// run elaborates the plan; it reports whether the ranks past the first were elaborated in
// shards (parallel.go).
func (el *elaborator) run() (sharded bool) {
	el.header()
	if el.result() != nil || el.g.Ranks == 0 {
		return false
	}
	el.checkInits()
	el.g.Spots = map[diag.Pos]ir.Spot{}
	spots(el.file.Stmts, el.g.Spots)
	el.g.Rank = make([]ir.RankSpan, el.g.Ranks)
	el.opIdx = map[string]ir.OpID{}
	el.queueIdx = map[string]ir.QueueID{}
	el.names = newNameTables(el.file)
	el.mem = newAllocs()
	el.first, el.end = 0, el.g.Ranks
	if el.only != nil { // ElaborateRanks
		el.runOnly()
		return false
	}
	for r := 0; r < el.g.Ranks && !el.truncated && !el.stopCancelled(); r++ {
		el.elaborateRank(r)
		if r == 0 && el.g.Ranks > 1 && !el.truncated { // SPMD: other ranks are as large, so grow once (growOps if not)
			want := min(len(el.g.Ops)*el.g.Ranks, el.maxOps)
			if !el.room(heldOps, diag.Pos{}, want, unsafe.Sizeof(ir.Op{}), "ops") {
				break
			}
			el.g.Ops = append(make([]ir.Op, 0, want), el.g.Ops...)
			if sharded = el.parallel(); sharded { // the other ranks are done, without a diagnostic
				break
			}
		}
	}
	if el.result() != nil {
		return sharded
	}
	el.pairQueues()
	if el.result() != nil {
		return sharded
	}
	// Freeze builds the adjacency from the Edges alone, which matching leaves as they are: it
	// runs beside matching (a Graph with a mismatch is dropped, frozen or not).
	var frozen sync.WaitGroup
	frozen.Go(func() { el.g.Freeze() })
	el.matchMessages()
	frozen.Wait()
	return sharded
}

// declaresRanks reports whether the file sets the world size with a top-level `param ranks`.
func declaresRanks(f *dsl.File) bool {
	for _, st := range f.Stmts {
		if p, ok := st.(*dsl.ParamStmt); ok && p.Name.Name == "ranks" {
			return true
		}
	}
	return false
}

// header reads what is global: the plan name, params (with -p overrides) and buffers.
func (el *elaborator) header() {
	g := el.g
	el.globals = &scope{m: el.work}
	el.globals.extra().fns = el.defs()
	el.globalAsserts = map[*dsl.AssertStmt]bool{}
	el.globalTables = map[*dsl.LetStmt]bool{}
	declared := map[string]diag.Pos{}
	perRank := map[string]bool{"rank": true} // top-level lets whose value depends on the rank
	seenPlan := false
	if !declaresRanks(el.file) {
		el.globals.bind("ranks", 1) // the default world size, usable from the first statement
	}
	for i, st := range el.file.Stmts {
		el.at = st
		switch st := st.(type) {
		case *dsl.PlanStmt:
			switch {
			case seenPlan:
				el.globalErrorf(phaseNames, diag.Name, st.Pos(), "second plan statement: a file holds one plan, named once at its top")
			case i != 0:
				el.globalErrorf(phaseNames, diag.Name, st.Pos(), "plan %s must be the first statement of the file", st.Name.Name)
			}
			seenPlan = true
			g.Name = st.Name.Name
		case *dsl.ParamStmt:
			name := st.Name.Name
			if p, dup := declared[name]; dup {
				el.report(phaseNames, -1, diag.Errorf(diag.Name, st.Name.Pos(), "param %s declared twice", name).Relate(p, firstDeclaration(name, p, st.Name.Pos())), "param declared twice")
				continue
			}
			declared[name] = st.Name.Pos()
			v, err := evalInt(st.Value, el.globals)
			if err != nil {
				el.evalFailed(-1, err)
				el.globals.bindBroken(name) // reported once here: its uses must not cascade
				continue
			}
			if ov, ok := el.overrides[name]; ok {
				v = ov
			}
			el.globals.bind(name, v)
			g.Params = append(g.Params, ir.Param{Name: name, Value: v, Pos: st.Name.Pos()})
		case *dsl.LetStmt:
			// A top-level let that does not depend on the rank is a global constant: buffer
			// counts may use it. The others are evaluated per rank.
			if usesAny(st.Value, perRank) || el.globals.has(st.Name.Name) || el.globals.has(tableKey(st.Name.Name)) {
				perRank[st.Name.Name] = true
				continue
			}
			if t, ok := st.Value.(*dsl.TableExpr); ok {
				vals, err := evalTable(t, el.globals)
				if err != nil {
					el.evalFailed(-1, err)
					el.globals.bindBroken(tableKey(st.Name.Name))
				} else {
					el.globals.bindTable(st.Name.Name, vals)
				}
				el.globalTables[st] = true // bound once here, for every rank and function
				continue
			}
			v, err := evalInt(st.Value, el.globals)
			if err != nil {
				el.evalFailed(-1, err)
				el.globals.bindBroken(st.Name.Name) // reported once here: its uses must not cascade
				continue
			}
			el.globals.bind(st.Name.Name, v)
		case *dsl.VarStmt:
			perRank[st.Name.Name] = true // a var may change: it is per rank
		case *dsl.AssertStmt:
			// An assert that does not depend on the rank guards the params: checked once here,
			// and a failing one refuses the parameter set before anything else is evaluated.
			if usesAny(st.Cond, perRank) {
				continue
			}
			el.globalAsserts[st] = true
			if !el.assert(st, el.globals, -1) {
				el.refused = true
			}
		}
		if el.refused {
			break
		}
	}
	if !seenPlan {
		pos := diag.At(el.file.Name, 1, 1)
		if len(el.file.Stmts) > 0 {
			pos = el.file.Stmts[0].Pos()
		}
		el.globalErrorf(phaseNames, diag.Name, pos, "missing plan statement: start the file with `plan NAME`")
	}
	var unknown []string
	for name := range el.overrides {
		if _, ok := declared[name]; !ok {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		names := make([]string, 0, len(g.Params))
		for _, p := range g.Params {
			names = append(names, p.Name)
		}
		hint := "the plan declares no params"
		if len(names) > 0 {
			hint = "declared params: " + strings.Join(names, ", ")
		}
		el.globalErrorf(phaseNames, diag.Name, diag.InFile(el.file.Name), "%s = %d: the plan has no param %s (%s)", name, el.overrides[name], name, hint)
	}
	g.Ranks = 1
	if el.refused {
		return
	}
	if v, ok := el.globals.lookup("ranks"); ok {
		if v < 1 || v > MaxRanks {
			el.globalErrorf(phaseNames, diag.Limit, declared["ranks"], "ranks = %d: the world size must be between 1 and %d", v, MaxRanks)
			g.Ranks = 0
			return
		}
		g.Ranks = int(v)
	}
	el.bufIdx = map[string]ir.BufID{}
	el.badBuf = map[string]bool{}
	el.perElem = map[ir.BufID]bool{}
	for _, st := range el.file.Stmts {
		if st, ok := st.(*dsl.BufferStmt); ok {
			el.at = st
			el.buffer(st, perRank)
		}
	}
	for _, st := range el.file.Stmts {
		if st, ok := st.(*dsl.ExpectStmt); ok {
			el.at = st
			el.expect(st)
		}
	}
}

func (el *elaborator) buffer(st *dsl.BufferStmt, perRank map[string]bool) {
	name := st.Name.Name
	if id, dup := el.bufIdx[name]; dup {
		el.report(phaseNames, -1, diag.Errorf(diag.Name, st.Name.Pos(), "buffer %s declared twice", name).Relate(el.g.Buffers[id].Pos, firstDeclaration(name, el.g.Buffers[id].Pos, st.Name.Pos())), "buffer declared twice")
		return
	}
	// A declaration that fails is reported here; its uses then say nothing more of it.
	declared := false
	defer func() {
		if !declared {
			el.badBuf[name] = true
		}
	}()
	b := ir.Buffer{Name: name, Extern: st.Extern, Pos: st.Name.Pos()}
	t, ok := ir.ParseElemType(st.Type.Name)
	if !ok {
		el.globalErrorf(phaseNames, diag.Name, st.Type.Pos(), "unknown element type %s (one of u8 i32 u32 i64 u64 f32 f64)", st.Type.Name)
		return
	}
	b.Type = t
	if usesAny(st.Count, perRank) {
		el.globalErrorf(phaseNames, diag.Shape, st.Count.Pos(), "the count of buffer %s depends on rank: buffers are symmetric, every rank has the same ones", name)
		return
	}
	n, err := evalInt(st.Count, el.globals)
	if err != nil {
		el.evalFailed(-1, err)
		return
	}
	if n <= 0 || n > (1<<40)/t.Size() {
		el.globalErrorf(phaseShapes, diag.Limit, st.Count.Pos(), "buffer %s has %d elements of %d bytes: a buffer needs at least 1 element and at most 1 TiB", name, n, t.Size())
		return
	}
	b.Count = n
	for _, a := range st.Access {
		switch a.Name {
		case "remote_read":
			b.Access |= ir.RemoteRead
		case "remote_write":
			b.Access |= ir.RemoteWrite
		case "remote_atomic":
			b.Access |= ir.RemoteAtomic
		default:
			el.globalErrorf(phaseNames, diag.Name, a.Pos(), "unknown access flag %s (remote_read, remote_write or remote_atomic)", a.Name)
		}
	}
	if st.Init != nil {
		if hasFloat(st.Init) && !t.IsFloat() {
			el.globalErrorf(phaseShapes, diag.Shape, st.Init.Pos(), "float init for %s buffer %s: use an integer expression, or make the buffer f32 or f64", t, name)
			return
		}
		b.Init = el.initFunc(st.Init, t)
		el.perElem[ir.BufID(len(el.g.Buffers))] = uses(st.Init, "i")
	}
	el.bufIdx[name] = ir.BufID(len(el.g.Buffers))
	el.g.Buffers = append(el.g.Buffers, b)
	declared = true
}

// elaborateRank walks the whole text as rank r sees it.
func (el *elaborator) elaborateRank(r int) {
	g := el.g
	el.rank = r
	el.names.gen++
	clear(el.opIdx)
	clear(el.queueIdx)
	el.opNames = nil
	el.broken.ops.reset()
	el.broken.queues.reset()
	el.pending = el.pending[:0]
	el.splits = el.splits[:0]
	if el.splitOf == nil {
		el.splitOf = map[ir.OpID]int{}
	}
	clear(el.splitOf)
	el.opQueue = el.opQueue[:0]
	g.Rank[r] = ir.RankSpan{FirstOp: el.nextOp(), FirstQueue: el.nextQueue()}
	if el.memo == nil {
		el.memo = newMemo(el.opt.noMemo)
	}
	top := &scope{parent: el.globals, ext: &scopeExt{memo: el.memo}, m: el.work}
	top.bind("rank", int64(r))
	el.stopped = false
	if el.rankStart = el.work.steps(); el.ranksDone == 0 {
		el.ranksStart = el.rankStart
	}
	el.block(el.names.code, top, true)
	el.ranksDone++
	g.Rank[r].EndOp, g.Rank[r].EndQueue = el.nextOp(), el.nextQueue()
	if !el.stopped { // after a failed assert, the missing declarations are no news
		el.resolveRank()
	}
}

func (el *elaborator) eval(e dsl.Expr, s *scope) (int64, bool) {
	v, err := evalInt(e, s)
	if err != nil {
		el.evalFailed(el.rank, err)
		return 0, false
	}
	return v, true
}

// evalc is eval of a compiled expression.
func (el *elaborator) evalc(c *cexpr, s *scope) (int64, bool) {
	err := c.charge(s)
	var v int64
	if err == nil {
		v, err = c.eval(s)
	}
	if err != nil {
		el.evalFailed(el.rank, err)
		return 0, false
	}
	return v, true
}

// evalFailed reports an expression error on rank (-1: on every rank), unless the expression
// failed because it uses a name whose own declaration failed, which was reported there.
func (el *elaborator) evalFailed(rank int, err *evalError) {
	if err.stop != stopNone {
		el.evalStopped(err)
		return
	}
	if err.quiet {
		return
	}
	el.report(phaseNames, rank, &diag.Diagnostic{Code: diag.Expr, Pos: err.pos, Msg: err.msg, Related: err.related}, err.kind)
}

// block elaborates a list of statements in a new scope layer s.
func (el *elaborator) block(c *code, s *scope, top bool) {
	for i, st := range c.stmts {
		if el.truncated || el.stopped {
			return
		}
		el.at = st
		switch st := st.(type) {
		case *dsl.DefStmt:
			if !top {
				el.globalErrorf(phaseNames, diag.Name, st.Pos(), "def %s inside a block: functions are defined at the top level", st.Name.Name)
			}
		case *dsl.AssertStmt:
			if !el.globalAsserts[st] && !el.assert(st, s, el.rank) {
				el.stopped = true
			}
		case *dsl.VarStmt:
			el.declare(st.Name, c.at[i].x, s, flagMutable)
		case *dsl.AssignStmt:
			el.assign(st, c.at[i].x, s)
		case *dsl.PlanStmt:
			if !top {
				el.globalErrorf(phaseNames, diag.Name, st.Pos(), "plan statement inside a block: put it first in the file")
			}
		case *dsl.ParamStmt:
			if !top {
				el.globalErrorf(phaseNames, diag.Name, st.Pos(), "param %s inside a block: params are declared at the top level", st.Name.Name)
			}
		case *dsl.BufferStmt:
			if !top {
				el.globalErrorf(phaseNames, diag.Name, st.Pos(), "buffer %s inside a block: buffers are symmetric and declared at the top level", st.Name.Name)
			}
		case *dsl.ExpectStmt:
			if !top {
				el.globalErrorf(phaseNames, diag.Name, st.Pos(), "expect inside a block: postconditions are about the whole plan and stated at the top level")
			}
		case *dsl.LetStmt:
			if t, ok := st.Value.(*dsl.TableExpr); ok {
				switch {
				case el.globalTables[st]:
				case top && el.globals.has(tableKey(st.Name.Name)):
					el.errorf(phaseNames, diag.Name, st.Name.Pos(), "%s is already defined in this block", st.Name.Name)
				default:
					el.declareTable(st.Name, t, s)
				}
				continue
			}
			el.declare(st.Name, c.at[i].x, s, 0)
		case *dsl.QueueStmt:
			el.queue(st, &c.at[i], s)
		case *dsl.OpStmt:
			el.op(st, &c.at[i], s)
		case *dsl.DepStmt:
			el.dep(&c.at[i], s)
		case *dsl.ForStmt:
			el.loop(st, &c.at[i], s)
		case *dsl.IfStmt:
			el.cond(st, &c.at[i], s)
		}
	}
}

func (el *elaborator) loop(st *dsl.ForStmt, at *stmtCode, s *scope) {
	from, ok1 := el.evalc(at.x, s)
	to, ok2 := el.evalc(at.y, s)
	step := int64(1)
	ok3 := true
	if st.Step != nil {
		step, ok3 = el.evalc(at.z, s)
		if ok3 && step <= 0 {
			el.errorf(phaseNames, diag.Expr, st.Step.Pos(), "for step %d: the step must be positive", step)
			ok3 = false
		}
	}
	if !ok1 || !ok2 || !ok3 {
		el.skipped(st.Body)
		return
	}
	left := int64(el.opsLeft())
	if n := el.loopOps(st, from, to, step, s, left); n > left {
		el.tooManyOps(st.Pos(), n)
		el.skipped(st.Body)
		return
	}
	trips := tripCount(from, to, step)
	if trips > el.itersLeft() { // fail now, not after the iterations
		el.errorf(phaseNames, diag.Limit, st.Pos(), "the plan runs more than %d loop iterations: is a bound wrong?", MaxIterations)
		el.truncated = true
		el.skipped(st.Body)
		return
	}
	body := el.child(s)
	defer el.release(body)
	k := len(el.loops)
	steps := el.work.steps()
	el.loops = append(el.loops, loopRun{st: st, trips: int64(trips), start: steps, passStart: steps})
	defer func() { el.loops = el.loops[:k] }()
	for v := from; v < to && !el.truncated; v += step {
		if el.iters++; el.iters > MaxIterations {
			el.errorf(phaseNames, diag.Limit, st.Pos(), "the plan runs more than %d loop iterations: is a bound wrong?", MaxIterations)
			el.truncated = true
			return
		}
		lp := &el.loops[k]
		lp.pass++
		lp.passStart = el.work.steps()
		body.reset()
		body.bind(st.Var.Name, v)
		el.block(at.body, body, false)
		if v > math.MaxInt64-step {
			break
		}
	}
}

func (el *elaborator) cond(st *dsl.IfStmt, at *stmtCode, s *scope) {
	c, ok := el.evalc(at.x, s)
	if !ok {
		el.skipped(st.Then)
		el.skipped(st.Else)
		return
	}
	body := at.body
	if c == 0 {
		if st.Else == nil {
			return
		}
		body = at.els
	}
	inner := el.child(s)
	el.block(body, inner, false)
	el.release(inner)
}

// child returns an empty scope layer under s, from the scopes released before: an if's branch
// is elaborated once per pass, and nothing keeps its scope past the block.
func (el *elaborator) child(s *scope) *scope {
	c := el.mem.scopes.Get()
	if c == nil {
		return &scope{parent: s, m: s.m}
	}
	c.reset()
	c.parent, c.m = s, s.m
	return c
}

// release gives back a scope from child once its block is done.
func (el *elaborator) release(c *scope) { el.mem.scopes.Put(c) }

func (el *elaborator) queue(st *dsl.QueueStmt, at *stmtCode, s *scope) {
	g := el.g
	r, ok := el.name(at.name, s)
	if !ok {
		el.broken.queues.add("", st.Name.Ident.Name)
		return
	}
	name := el.text(&r)
	id, fresh := claim(el, el.queueIdx, r, el.nextQueue())
	if !fresh {
		first := el.queueOf(id).Pos
		el.report(phaseNames, el.rank, diag.Errorf(diag.Name, st.Name.Pos(), "queue %s declared twice", name).Relate(first, firstDeclaration(name, first, st.Name.Pos())), "queue declared twice")
		return
	}
	// A queue whose declaration fails is reported here; the ops on it are then not.
	fail := func() {
		unclaim(el, el.queueIdx, r)
		el.broken.queues.add(name, "")
	}
	peer, ok := el.eval(st.To, s)
	if !ok {
		fail()
		return
	}
	if peer < 0 || peer >= int64(g.Ranks) {
		el.errorf(phaseShapes, diag.Shape, st.To.Pos(), "queue %s connects to rank %d, outside 0..%d (wrap it with %% ranks?)", name, peer, g.Ranks-1)
		fail()
		return
	}
	depth := int64(DefaultDepth)
	if st.Depth != nil {
		if depth, ok = el.eval(st.Depth, s); !ok {
			fail()
			return
		}
		if depth < 1 || depth > 1<<15 {
			el.errorf(phaseShapes, diag.Limit, st.Depth.Pos(), "queue %s depth %d: must be between 1 and 32768", name, depth)
			fail()
			return
		}
	}
	peerName, peerPos := name, st.Name.Pos() // by default the peer's queue of the same name
	if st.Peer != nil {
		pr, ok := el.name(at.peer, s)
		if !ok {
			fail()
			return
		}
		peerName = el.text(&pr)
		peerPos = st.Peer.Pos()
	}
	// Queues past one op's worth of memory count against the budget; the first few ride in the
	// estimate of an op, so that a budget below one op is refused at the op, with its hint.
	if n := len(g.Queues) + 1; n*BytesPerQueue > BytesPerOp && !el.room(heldQueues, st.Name.Pos(), n, BytesPerQueue, "queues") {
		fail()
		return
	}
	g.Queues = append(g.Queues, ir.Queue{Name: name, Rank: el.rank, PeerRank: int(peer), Peer: ir.None, Depth: int(depth), Pos: st.Name.Pos()})
	el.peerRefs = append(el.peerRefs, queueRef{name: peerName, pos: peerPos})
}

func (el *elaborator) op(st *dsl.OpStmt, at *stmtCode, s *scope) {
	g := el.g
	r, ok := el.name(at.name, s)
	if !ok {
		el.broken.ops.add("", st.Name.Ident.Name)
		return
	}
	if listed(st.Op) {
		el.opList(st, at, s, r)
		return
	}
	id := el.nextOp()
	if first, fresh := claim(el, el.opIdx, r, id); !fresh {
		name, pos := el.text(&r), el.opOf(first).Pos
		el.report(phaseNames, el.rank, diag.Errorf(diag.Name, st.Name.Pos(), "op %s declared twice on this rank: give each op its own name or index", name).
			Relate(pos, firstDeclaration(name, pos, st.Name.Pos())), "op declared twice")
		return
	}
	if !el.opRoom() {
		unclaim(el, el.opIdx, r)
		el.tooManyOps(st.Pos(), 0)
		return
	}
	op := ir.Op{Site: el.site(&r), Rank: int32(el.rank), Queue: ir.None, Src: ir.NoSlice, Dst: ir.NoSlice, Match: ir.None, Index: -1}
	var qref ref
	el.cur = at
	ok = el.operation(st.Op, at.peer, s, &op, &qref)
	if !ok {
		unclaim(el, el.opIdx, r)
		el.broken.ops.add(op.Name, "") // reported: references to it are not
		return
	}
	el.growOps()
	g.Ops = append(g.Ops, op)
	el.opQueue = append(el.opQueue, qref)
	el.refs(at.after, s, id)
}

// nextOp is the id of the next op el makes, nextQueue of its next queue.
func (el *elaborator) nextOp() ir.OpID       { return el.opBase + ir.OpID(len(el.g.Ops)) }
func (el *elaborator) nextQueue() ir.QueueID { return el.queueBase + ir.QueueID(len(el.g.Queues)) }

// opOf is the op of id, one that el made; queueOf is the queue of id.
func (el *elaborator) opOf(id ir.OpID) *ir.Op          { return &el.g.Ops[id-el.opBase] }
func (el *elaborator) queueOf(id ir.QueueID) *ir.Queue { return &el.g.Queues[id-el.queueBase] }

// growOps makes room for one more op. Past its first rank, Ops was sized for ranks as large as
// it; when a rank is larger, the room grows by an estimate of what the remaining ranks need (the
// ops per rank so far, and an eighth more), not by doubling: the Graph keeps what Ops allocates.
// The new room is prefaulted (arena.Prefault).
func (el *elaborator) growOps() {
	g := el.g
	if el.rank == el.first || len(g.Ops) < cap(g.Ops) {
		return
	}
	per := len(g.Ops)/(el.rank-el.first+1) + 1
	more := per * (el.end - el.rank) * 9 / 8
	g.Ops = arena.Grow(g.Ops, max(min(more, el.maxOps-len(g.Ops)), 1), touchOp)
}

// refs records `after` references: op waiter waits for every op named by after.
func (el *elaborator) refs(after []*nameInfo, s *scope, waiter ir.OpID) {
	for _, a := range after {
		if r, ok := el.name(a, s); ok && el.pendingRoom(a.n.Pos()) {
			el.pending = append(el.pending, pendingRef{from: r, to: waiter})
		}
	}
}

// pendingRoom makes room for one more pending reference, doubling, if the memory budget holds
// it (room); it reports false, and the elaboration stops, if not.
func (el *elaborator) pendingRoom(pos diag.Pos) bool {
	if len(el.pending) < cap(el.pending) {
		return true
	}
	n := max(2*cap(el.pending), 64)
	if !el.room(heldRefs, pos, n, unsafe.Sizeof(pendingRef{}), fmt.Sprintf("`after` references on rank %d", el.rank)) {
		return false
	}
	el.pending = arena.GrowTo(el.pending, n)
	return true
}

func (el *elaborator) dep(at *stmtCode, s *scope) {
	after := el.mem.after[:0] // the after names evaluated so far: the same for every waiter
	for _, o := range at.ops {
		waiter, ok := el.name(o, s)
		if !ok {
			continue
		}
		for j := range at.after {
			if j == len(after) {
				r, ok := el.name(at.after[j], s)
				after = append(after, evaluated{r, ok})
			} else if !after[j].ok { // evaluated again, to report again as it did
				after[j].r, after[j].ok = el.name(at.after[j], s)
			}
			if after[j].ok {
				if !el.pendingRoom(at.after[j].n.Pos()) {
					return
				}
				el.pending = append(el.pending, pendingRef{from: after[j].r, to: ir.None, toBy: waiter})
			}
		}
	}
	el.mem.after = after
}

// evaluated is a name evaluated by dep, and whether it could be.
type evaluated struct {
	r  ref
	ok bool
}
