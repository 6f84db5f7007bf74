package elaborate

import (
	"context"
	"fmt"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
	"github.com/coredag/coredag/internal/stop"
)

// The evaluation budget. Each limit bounds one factor of the work of a plan: loop passes
// (MaxIterations), calls in one expression (MaxCalls), operators in one statement (the
// parser's), ranks. Nothing in them bounds their product: a loop of a million passes that
// calls a recursive def making 65535 calls, or that evaluates an expression of 10000
// operators, passes every one of them and takes hours. So an elaboration counts its evaluation
// steps, over all ranks, and stops past MaxSteps of them with a diagnostic at the statement it
// was evaluating.
//
// A step is a node of an expression evaluated: an operand, an operator, a call; a def's body
// counts its nodes at each call that evaluates it. The count stands for time, so what costs
// more counts more: a call counts callSteps beside its node (finding the function, its frame,
// the memo's lookup), and a node evaluated by walking the syntax (evalInt: asserts, the
// operands of ops, queues, tables) counts walkSteps, against 1 for a node of a compiled
// expression (cexpr). Parentheses are no node; a compiled sub-expression folded into a
// constant counts the nodes it stands for. A call whose result is remembered (funcs.go) counts
// as a call, its body not evaluated, as it takes no longer: which calls are remembered depends
// a little on how the ranks are split among the workers of a parallel elaboration (a call
// site's last call is a worker's own, a result two workers compute at once is computed twice),
// so the count of a plan that calls defs may differ by a few calls from one run to another;
// MaxSteps is far above what a plan meant to pass counts.
//
// The steps are counted by a meter that every scope of the elaboration points to (scope.m): a
// countdown that reaches zero every pollSteps steps, where the meter checks the budget and the
// elaboration's context (the ctx of Elaborate). A compiled expression counts its nodes at once
// before it is evaluated, and the nodes of a branch (of if-then-else, && and ||) before it is
// taken (cexpr.charge): nothing is counted node by node on the hot path. A walked node counts
// as it is evaluated, a call as it is made. Once the meter stops the evaluation, every
// evaluation on it fails at once with the same error, which the elaborator reports
// (evalStopped).

// MaxSteps bounds the evaluation steps of a plan over all ranks. The plans of plans/,
// examples/mpi/ and testdata/ count at most about 32,000 at their params; a ring allreduce
// counts about 17 per op, so the op limit comes first, and the Swing allreduce and Bruck's
// alltoall (recursive defs and long scatter/gather lists) about 315M at 512 ranks. Reaching it
// takes about 4 seconds on one core.
const MaxSteps = 1 << 29

// callSteps is what a call counts beside its node: finding the function, a frame and the
// memo's lookup cost about as much as that many nodes.
const callSteps = 8

// walkSteps is what a node counts when it is evaluated by walking the syntax (evalInt) rather
// than compiled (cexpr): about as long.
const walkSteps = 4

// pollSteps is how many steps a meter counts between two checks of the budget and the context:
// about a millisecond.
const pollSteps = 1 << 16

// meter counts the evaluation steps of one elaborator (each worker of a parallel elaboration
// has its own, see pool.steps).
type meter struct {
	left    int64 // steps until the next poll: decremented by every step
	granted int64 // the count when left reaches 0: the count is granted - left
	limit   int64 // the budget: MaxSteps, or lower (Options)
	ctx     context.Context
	err     *evalError // once the budget ran out or ctx was cancelled: the error of every evaluation

	// Where the steps ran out: the outermost call of a def being evaluated (set as the error
	// leaves it), to report.
	call *dsl.CallExpr
	def  string
}

// stopKind says why a meter stopped the evaluation (evalError.stop).
type stopKind uint8

const (
	stopNone      stopKind = iota
	stopSteps              // the budget ran out
	stopCancelled          // the context was cancelled
)

// newMeter returns a meter of limit steps that polls ctx, its count at from.
func newMeter(ctx context.Context, limit, from int64) *meter {
	m := &meter{limit: limit, ctx: ctx}
	m.grant(from)
	return m
}

// forWorker returns a meter for a worker of a parallel elaboration, counting on from m's count.
func (m *meter) forWorker() *meter { return newMeter(m.ctx, m.limit, m.steps()) }

// steps is the count so far.
func (m *meter) steps() int64 { return m.granted - m.left }

// grant lets the count run on from used until the next poll: pollSteps more, or the limit.
func (m *meter) grant(used int64) {
	m.left = max(min(pollSteps, m.limit-used), 0)
	m.granted = used + m.left
}

// charge counts n steps at once (a call, a range analysis): the error, if they pass the limit
// or the context was cancelled.
func (m *meter) charge(n int64) *evalError {
	if m.left -= n; m.left < 0 {
		return m.poll()
	}
	return nil
}

// poll is called when the countdown passed zero: it checks the budget and the context, and
// grants the next steps, or returns the error that stops the evaluation.
func (m *meter) poll() *evalError {
	if m.err != nil {
		return m.err
	}
	used := m.steps()
	switch {
	case used > m.limit:
		m.err = &evalError{msg: "evaluation too long", quiet: true, stop: stopSteps}
	case m.cancelled():
		m.err = &evalError{msg: "elaboration cancelled", quiet: true, stop: stopCancelled}
	default:
		m.grant(used)
		return nil
	}
	return m.err
}

// cancelled reports whether m's context is cancelled (polled between ranks too).
func (m *meter) cancelled() bool { return stop.Cause(m.ctx) != nil }

// noteCall records e, a call of def, as the outermost call in progress when the meter (which
// may be nil) stopped the evaluation: the first one the error leaves.
func (m *meter) noteCall(e *dsl.CallExpr, def string) {
	if m != nil && m.call == nil && m.err != nil && m.err.stop == stopSteps {
		m.call, m.def = e, def
	}
}

// exprNodes is the number of nodes of e, parentheses aside.
func exprNodes(e dsl.Expr) int64 {
	switch e := e.(type) {
	case *dsl.ParenExpr:
		return exprNodes(e.X)
	case *dsl.UnaryExpr:
		return 1 + exprNodes(e.X)
	case *dsl.BinaryExpr:
		return 1 + exprNodes(e.X) + exprNodes(e.Y)
	case *dsl.CondExpr:
		return 1 + exprNodes(e.Cond) + exprNodes(e.Then) + exprNodes(e.Else)
	case *dsl.CallExpr:
		n := int64(1)
		for _, a := range e.Args {
			n += exprNodes(a)
		}
		return n
	case *dsl.IndexExpr:
		return 1 + exprNodes(e.Index)
	}
	return 1
}

// loopRun is a loop of the rank being elaborated, in progress: what the diagnostic of the
// budget says of the work it multiplies.
type loopRun struct {
	st        *dsl.ForStmt
	trips     int64 // its passes
	pass      int64 // the pass in progress, from 1
	start     int64 // the count when it started
	passStart int64 // the count when the pass in progress started
}

// evalStopped handles an evaluation the meter stopped: the elaboration stops, reporting the
// budget or, when cancelled, returning the context's cause (result).
func (el *elaborator) evalStopped(err *evalError) {
	if el.truncated {
		return
	}
	el.truncated = true
	if err.stop == stopCancelled {
		el.cancelled = true
		return
	}
	el.stepsExceeded()
}

// stopCancelled reports whether the elaboration's context is cancelled, and stops it if so: a
// check between ranks, for those that evaluate little.
func (el *elaborator) stopCancelled() bool {
	if !el.work.cancelled() {
		return false
	}
	el.truncated, el.cancelled = true, true
	return true
}

// stepsExceeded reports that the plan passed the evaluation budget: at the outermost call being
// evaluated, or else at the statement, naming what multiplies the work: the outermost loop in
// progress past its first pass, or the ranks.
func (el *elaborator) stepsExceeded() {
	m := el.work
	pos := diag.InFile(el.file.Name)
	switch {
	case m.call != nil:
		pos = m.call.Pos()
	case el.at != nil:
		pos = el.at.Pos()
	}
	d := &diag.Diagnostic{Code: diag.Limit, Pos: pos}
	var what, hint string
	var lp *loopRun
	for i := range el.loops {
		if el.loops[i].pass > 1 {
			lp = &el.loops[i]
			break
		}
	}
	switch {
	case lp != nil:
		per := (lp.passStart - lp.start) / (lp.pass - 1)
		what = fmt.Sprintf("a loop of %d passes, about %d steps each", lp.trips, per)
		hint = "is a loop bound wrong?"
		d.Relate(lp.st.Pos(), fmt.Sprintf("the loop, on pass %d of %d", lp.pass, lp.trips))
	case el.ranksDone > 0 && el.g.Ranks > 1:
		per := (el.rankStart - el.ranksStart) / int64(el.ranksDone)
		what = fmt.Sprintf("%d ranks, about %d steps each", el.g.Ranks, per)
		hint = "is the rank count wrong?"
	case m.call != nil:
		what = "in one call of " + m.def
		hint = "a recursion that branches too much?"
	default:
		what = "in one statement"
		hint = "split the work, or simplify it"
	}
	d.Msg = fmt.Sprintf("evaluation too long: more than %d steps over all ranks (%s); %s", m.limit, what, hint)
	el.report(phaseNames, -1, d, "evaluation too long")
}
