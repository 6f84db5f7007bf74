package elaborate

import (
	"context"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/budget"
	"github.com/coredag/coredag/internal/english"
	"github.com/coredag/coredag/ir"
)

// BytesPerOp is about what one op of a plan costs in memory from elaboration to a run: the op,
// its name, the happens-before and race checks, the compiled WQEs and the engines' state. A
// memory budget divided by it caps the ops of a plan (Limits).
const BytesPerOp = 2 << 10

// BytesPerQueue is about what one queue of a plan costs in memory from elaboration through
// the checks: the queue, its name, its pairing and FIFO state (320 to 400 bytes measured on
// plans of a quarter to a million queues, rounded up). A run's queue pairs are its own to count.
const BytesPerQueue = 512

// Options are the settings of one elaboration: limits below the package's, and the budget.
// The zero value elaborates within the package's limits and no budget.
type Options struct {
	// MaxOps, when positive and below MaxOps, is the most ops the plan may have over all ranks.
	MaxOps int
	// Why says where MaxOps comes from, for the diagnostic (e.g. the memory budget).
	Why string
	// Budget, when its Bytes are positive, is the memory budget of the command: the Graph's
	// arrays that are sized ahead for the ranks to come (ops, queues, edges) are checked
	// against it before they are allocated, and refused with a *budget.Error past it. The
	// proof takes its share of it too (prove.Options).
	Budget budget.Budget
	// MaxInitChecks, when positive and below MaxInitChecks, is the most per-element init
	// evaluations done while checking.
	MaxInitChecks int
	// MaxSteps, when positive and below MaxSteps, is the most evaluation steps of the plan
	// over all ranks (steps.go).
	MaxSteps int

	// Workers is the number of goroutines that elaborate ranks (and match messages) at once;
	// 0: one per CPU. The Graph does not depend on it.
	Workers int

	// Test hooks: with byIndexSet, the name tables keep at most maxByIndexLen entries
	// (names.go); with parallelSet, parallelOps replaces the least plan size worth shards
	// (parallel.go); noMemo turns the memos of def results off (funcs.go).
	byIndexSet    bool
	maxByIndexLen int
	parallelSet   bool
	parallelOps   int
	noMemo        bool
}

// Within returns the options that cap a plan's ops so that checking, compiling and running it
// fit in the memory budget b (BytesPerOp each), and count its ops, queues and edges against b
// together.
func Within(b budget.Budget) Options {
	n := b.Bytes / BytesPerOp
	if b.Bytes <= 0 || n >= MaxOps {
		return Options{Budget: b}
	}
	return Options{Budget: b, MaxOps: int(n), Why: fmt.Sprintf("a plan takes about %s per op to check, compile and run, and the memory budget is %s (%s)",
		budget.Format(BytesPerOp), budget.Format(b.Bytes), b.Source())}
}

// newElaborator returns an elaborator of f within opt's limits, which ctx stops (steps.go).
func newElaborator(ctx context.Context, f *dsl.File, params map[string]int64, opt Options) *elaborator {
	el := &elaborator{file: f, g: &ir.Graph{File: f.Name}, overrides: params, maxOps: MaxOps, countWork: maxCountWork, opt: opt}
	if opt.MaxOps > 0 && opt.MaxOps < MaxOps {
		el.maxOps, el.whyMaxOps = opt.MaxOps, opt.Why
	}
	// The op limit is the budget's when Within set it, or when the budget holds fewer ops (a
	// budget given without Within's limit, or one below BytesPerOp, which holds none: MaxOps 0
	// is no limit): passing it is then a refusal for the budget.
	el.budgetOps = opt.Budget.Bytes > 0 && el.whyMaxOps != ""
	if b := opt.Budget.Bytes; b > 0 && b/BytesPerOp < int64(el.maxOps) {
		el.maxOps, el.budgetOps = int(b/BytesPerOp), true
	}
	steps := int64(MaxSteps)
	if opt.MaxSteps > 0 && opt.MaxSteps < MaxSteps {
		steps = int64(opt.MaxSteps)
	}
	el.work = newMeter(ctx, steps, 0)
	return el
}

// elaborate is Elaborate that also reports whether the ranks were elaborated in shards
// (parallel.go).
func elaborate(ctx context.Context, f *dsl.File, params map[string]int64, opt Options) (*ir.Graph, bool, error) {
	el := newElaborator(ctx, f, params, opt)
	sharded := el.run()
	el.globals.m = nil // the Graph's inits evaluate in the globals at run time, unmetered
	if err := el.result(); err != nil {
		return nil, sharded, err
	}
	return el.g, sharded, nil
}

// tooManyOps reports that the plan passes the op limit, at pos; loop, when positive, is the
// least the loop at pos makes (loopOps). When the memory budget set the limit (Within), that is
// a refusal for the budget (a *budget.Error, which the command reports as it does a flag the
// machine cannot honour), not a mistake in the plan.
func (el *elaborator) tooManyOps(pos diag.Pos, loop int64) {
	detail := ""
	if loop > 0 {
		detail = fmt.Sprintf(" (this loop alone makes at least %d)", loop)
	}
	if el.budgetOps {
		if el.refusal == nil {
			el.refusal = el.opsRefusal(pos, loop, detail)
		}
		el.truncated = true
		return
	}
	why := "is a loop bound or the rank count wrong?"
	if el.whyMaxOps != "" {
		why = el.whyMaxOps
	}
	el.globalErrorf(phaseNames, diag.Limit, pos, "the plan has more than %s over all its ranks%s: %s", english.Plural(el.maxOps, "op"), detail, why)
	el.truncated = true
}

// opsRefusal is the refusal for the memory budget of the ops past the limit it sets, at pos:
// what the plan's queues and edges hold counts beside them (held). A budget below BytesPerOp
// holds no op at all: the refusal then says so, with the least budget that holds one and the
// least that holds the loop's ops, rather than that the plan has more than 0 ops.
func (el *elaborator) opsRefusal(pos diag.Pos, loop int64, detail string) *budget.Error {
	b, per := el.opt.Budget, budget.Format(BytesPerOp)
	h := el.held()
	h[heldOps] = holding{}
	others := h.total()
	besides := ""
	if others > 0 {
		besides = ", besides " + h.list()
	}
	switch {
	case el.maxOps > 0:
		need := budget.Add(budget.Mul(int64(el.maxOps)+1, BytesPerOp), others)
		if others > 0 {
			besides += ": " + el.figure(need) + " in all"
		}
		return &budget.Error{Pos: pos, Need: need, Budget: b,
			What: fmt.Sprintf("the plan has more than %s over all its ranks%s, and a plan takes about %s per op to check, compile and run%s",
				english.Plural(el.maxOps, "op"), detail, per, besides),
			Hint: "is a loop bound or the rank count wrong? Else lower the ranks param or the plan's size"}
	case others > 0: // the plan's queues and edges left no room for its first op
		need := budget.Add(BytesPerOp, others)
		return &budget.Error{Pos: pos, Need: need, Budget: b,
			What: fmt.Sprintf("the plan's first op does not fit%s: a plan takes about %s per op to check, compile and run%s: %s in all",
				detail, per, besides, el.figure(need)),
			Hint: "lower the ranks param or the plan's size"}
	}
	need := budget.Mul(max(loop, 1), BytesPerOp)
	least := func(n int64) string {
		if set := b.Setting(n); set != "" {
			return fmt.Sprintf("at least %s (%s)", budget.Format(n), set)
		}
		return "at least " + budget.Format(n)
	}
	hint := "one op needs " + least(BytesPerOp)
	switch {
	case need == math.MaxInt64: // no budget holds the loop
		hint += "; is a loop bound or the rank count wrong?"
	case loop > 1:
		hint += ", this loop's ops " + least(need)
	}
	return &budget.Error{Pos: pos, Need: need, Budget: b,
		What: fmt.Sprintf("the memory budget is too small for even one op: a plan takes about %s per op to check, compile and run%s", per, detail),
		Hint: hint}
}

// What a plan holds of the memory budget, by kind (held). The budget is one running total of
// them: each check adds what the next thing needs to what the others already hold.
const (
	heldOps    = iota // its ops, BytesPerOp each (the op limit), or the room of the Graph's Ops if more
	heldQueues        // its queues, BytesPerQueue each, or the room of Queues if more (rides)
	heldEdges         // the room of its `after` edges
	heldRefs          // the room of the `after` references waiting for the end of a rank (pendingRoom)
	numHeld
)

// heldNames names the kinds for the refusals: "32 MiB for its ops (16384 of 2 KiB each)".
var heldNames = [numHeld]string{"ops", "queues", "`after` edges", "`after` references"}

// holding is what one kind holds: n things of size bytes each.
type holding struct{ n, size int64 }

func (h holding) bytes() int64 { return budget.Mul(h.n, h.size) }

// larger is the larger holding of a and b: a kind holds the larger of its estimate and the
// room of its array.
func larger(a, b holding) holding {
	if b.bytes() > a.bytes() {
		return b
	}
	return a
}

// rides is what queues holding h hold of the budget: nothing while they fit in one op's
// estimate, so that a budget below one op is refused at the op, with its hint.
func rides(h holding) holding {
	if h.bytes() <= BytesPerOp {
		return holding{}
	}
	return h
}

// holdings is what a plan holds, by kind.
type holdings [numHeld]holding

// total is what h holds in all.
func (h *holdings) total() int64 {
	var t int64
	for _, k := range h {
		t = budget.Add(t, k.bytes())
	}
	return t
}

// list says what h holds, kind by kind, leaving out the kinds that hold nothing: "32 MiB for its
// ops (16384 of 2 KiB each) and 1 MiB for its `after` edges (52429 of 20 bytes each)".
func (h *holdings) list() string {
	var parts []string
	for k, x := range h {
		if x.bytes() > 0 {
			parts = append(parts, fmt.Sprintf("%s for its %s (%d of %s each)", budget.Format(x.bytes()), heldNames[k], x.n, budget.Format(x.size)))
		}
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// held is what the plan holds of the memory budget so far, one rank after the other (in a shard,
// the pool counts: shardRoom).
func (el *elaborator) held() holdings {
	g := el.g
	var h holdings
	h[heldOps] = larger(holding{int64(len(g.Ops)), BytesPerOp}, holding{int64(cap(g.Ops)), int64(unsafe.Sizeof(ir.Op{}))})
	h[heldQueues] = rides(larger(holding{int64(len(g.Queues)), BytesPerQueue}, holding{int64(cap(g.Queues)), int64(unsafe.Sizeof(ir.Queue{}))}))
	h[heldEdges] = holding{int64(cap(g.Edges)), int64(unsafe.Sizeof(ir.Edge{}))}
	h[heldRefs] = holding{int64(cap(el.pending)), int64(unsafe.Sizeof(pendingRef{}))}
	return h
}

// figure prints n bytes for a refusal: budget.Format, and the bytes when it rounds to what the
// budget does, which would not tell them apart.
func (el *elaborator) figure(n int64) string {
	s := budget.Format(n)
	if s == budget.Format(el.opt.Budget.Bytes) {
		s += fmt.Sprintf(" (%d bytes)", n)
	}
	return s
}

// room reports whether n elements of size bytes each, the plan's of kind (heldQueues, ...; what
// says of what for the refusal: "queues", "`after` edges on 16 ranks"), fit in the memory budget
// beside what its other kinds already hold (held); if not, the elaboration stops and returns the
// refusal (a *budget.Error at pos) instead of diagnostics. What fits lowers the op limit to what
// the budget leaves for ops. Without a budget everything fits.
func (el *elaborator) room(kind int, pos diag.Pos, n int, size uintptr, what string) bool {
	b := el.opt.Budget.Bytes
	if b <= 0 {
		return true
	}
	if el.shard != nil {
		return el.shardRoom(kind, n, size)
	}
	h := el.held()
	h[kind] = larger(h[kind], holding{int64(n), int64(size)})
	if kind == heldQueues {
		h[kind] = rides(h[kind])
	}
	need := h.total()
	if need <= b {
		if left := (b - need + h[heldOps].bytes()) / BytesPerOp; left < int64(el.maxOps) {
			el.maxOps, el.budgetOps = int(left), true
		}
		return true
	}
	switch {
	case el.refusal != nil:
	case b < BytesPerOp: // a budget below one op: that is the news, with the least that holds one
		el.refusal = el.opsRefusal(pos, 0, "")
	default:
		mine := h[kind]
		h[kind] = holding{}
		figure, besides := el.figure(need), ""
		if h.total() > 0 { // the figure that tipped the total over, then the total
			figure, besides = budget.Format(mine.bytes()), " besides "+h.list()+": "+el.figure(need)+" in all"
		}
		el.refusal = &budget.Error{Pos: pos, Need: need, Budget: el.opt.Budget,
			What: fmt.Sprintf("the plan's %s need %s (%d of %d bytes each)%s", what, figure, mine.n, mine.size, besides),
			Hint: "lower the ranks param or the plan's size"}
	}
	el.truncated = true
	return false
}

// ranksLeft is how many of the ranks from the current one on can be as large as it is (ops
// ops) within the op limit: at least the current rank, at most the ranks left. The Graph's
// arrays grow for so many at once.
func (el *elaborator) ranksLeft(ops int) int {
	left := el.end - el.rank
	if ops > 0 {
		left = min(left, 1+max(0, el.opsLeft())/ops)
	}
	return max(left, 1)
}

// maxCountWork bounds the statements that counting ops (loopOps) may walk through while it
// simulates loop passes, over one elaboration: a fraction of a second.
const maxCountWork = 1 << 22

// loopOps is, before a loop runs, a lower bound of the ops it will make, counted without making
// them; counting pass by pass stops once it passes limit. Counting first lets a loop to 10**9 fail at once
// rather than after building millions of ops.
func (el *elaborator) loopOps(st *dsl.ForStmt, from, to, step int64, s *scope, limit int64) int64 {
	c := opCounter{el: el, limit: limit}
	unknown := map[string]bool{}
	assigned(st.Body, unknown) // vars the loop changes: their values now say nothing of later passes
	n, _ := c.loop(st, from, to, step, s, unknown)
	return n
}

// opCounter counts the ops statements will make, as a lower bound: an op statement counts once
// per pass, ops under an if do not count, and a loop counts its trips times the ops of a pass.
// When a pass's count depends on the loop variable (an inner loop's bound does), the passes are
// simulated one by one, while el.countWork lasts.
type opCounter struct {
	el    *elaborator
	limit int64
}

// block counts the ops of one pass over stmts in scope s. unknown holds the names whose value
// the count does not know; exact reports that no loop was left out for want of a value.
func (c *opCounter) block(stmts []dsl.Stmt, s *scope, unknown map[string]bool) (n int64, exact bool) {
	exact = true
	local := &scope{parent: s, m: s.m}
	var marked []string
	defer func() {
		for _, name := range marked {
			delete(unknown, name)
		}
	}()
	for _, st := range stmts {
		switch st := st.(type) {
		case *dsl.LetStmt:
			name := st.Name.Name
			if unknown[name] {
				continue
			}
			var v int64
			var err *evalError
			if !usesAny(st.Value, unknown) {
				v, err = evalInt(st.Value, local)
			}
			if err != nil || usesAny(st.Value, unknown) {
				unknown[name] = true
				marked = append(marked, name)
				continue
			}
			local.bind(name, v)
		case *dsl.VarStmt:
			if !unknown[st.Name.Name] {
				unknown[st.Name.Name] = true
				marked = append(marked, st.Name.Name)
			}
		case *dsl.OpStmt:
			n = budget.Add(n, 1)
		case *dsl.IfStmt: // never counted, known condition or not: a pass by pass count adds nothing
		case *dsl.ForStmt:
			if usesAny(st.From, unknown) || usesAny(st.To, unknown) || (st.Step != nil && usesAny(st.Step, unknown)) {
				exact = false
				continue
			}
			from, err1 := evalInt(st.From, local)
			to, err2 := evalInt(st.To, local)
			step := int64(1)
			var err3 *evalError
			if st.Step != nil {
				step, err3 = evalInt(st.Step, local)
			}
			if err1 != nil || err2 != nil || err3 != nil || step <= 0 {
				exact = false
				continue
			}
			k, ex := c.loop(st, from, to, step, local, unknown)
			n, exact = budget.Add(n, k), exact && ex
		}
	}
	return n, exact
}

// loop counts the ops of a loop over from .. to: a pass counted without the variable's value,
// times the trips when that count is exact, else pass by pass.
func (c *opCounter) loop(st *dsl.ForStmt, from, to, step int64, s *scope, unknown map[string]bool) (int64, bool) {
	trips := int64(min(tripCount(from, to, step), math.MaxInt64)) // a lower bound, like the count
	if trips == 0 {
		return 0, true
	}
	name := st.Var.Name
	was := unknown[name]
	unknown[name] = true
	per, exact := c.block(st.Body, s, unknown)
	if !was {
		delete(unknown, name)
	}
	total := budget.Mul(trips, per)
	if exact || total > c.limit {
		return total, exact
	}
	if was { // the variable shadows an unknown name: inside, it is known
		delete(unknown, name)
		defer func() { unknown[name] = true }()
	}
	var n int64
	exact = true
	body := &scope{parent: s, m: s.m}
	v := from
	for i := int64(0); i < trips; i++ {
		if c.el.countWork <= 0 || n > c.limit {
			return max(n, total), false
		}
		c.el.countWork -= 1 + len(st.Body)
		body.names, body.values = body.names[:0], body.values[:0]
		body.bind(name, v)
		k, ex := c.block(st.Body, body, unknown)
		n, exact = budget.Add(n, k), exact && ex
		v += step
	}
	return max(n, total), exact
}

// tripCount is how many times `for v in from .. to step step` runs (step > 0): the values from,
// from + step, ... below to. It is exact for every from, to and step, as it counts in uint64:
// to - 1 - from (how far the greatest value below to is from from) fits in it whatever the
// bounds, and so does the count (at most 2**64 - 1, the whole range of int64 by 1). An int64
// does not hold them: the whole range by 2**63 - 1 is 3 passes, though its span overflows.
func tripCount(from, to, step int64) uint64 {
	if to <= from {
		return 0
	}
	return (uint64(to)-uint64(from)-1)/uint64(step) + 1
}

// itersLeft is how many more loop iterations the plan may run (MaxIterations over all ranks).
func (el *elaborator) itersLeft() uint64 {
	return uint64(max(0, MaxIterations-el.iters))
}
