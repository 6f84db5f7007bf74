package exec

import (
	"errors"
	"fmt"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/ir"
)

// OpError is a runtime fault of one op: it names the op, its rank and queue, and the source line
// the op (and the WQE made from it) came from, so a person can find it in the .dag file.
type OpError struct {
	Op    string   // op name with indices, e.g. "tx[2]"
	Rank  int      // the rank that posted it
	Queue string   // queue name, "" for host ops
	Pos   diag.Pos // the op statement
	Err   error    // what went wrong
}

func (e *OpError) Error() string {
	where := fmt.Sprintf("op %s on rank %d", e.Op, e.Rank)
	if e.Queue != "" {
		where += fmt.Sprintf(", queue %s", e.Queue)
	}
	return fmt.Sprintf("%s: %s: %v", e.Pos, where, e.Err)
}

// Unwrap returns the underlying cause.
func (e *OpError) Unwrap() error { return e.Err }

// opError wraps err as a fault of op id of g.
func opError(g *ir.Graph, id ir.OpID, err error) *OpError {
	op := &g.Ops[id]
	q := ""
	if op.Queue != ir.None {
		q = g.Queues[op.Queue].Name
	}
	return &OpError{Op: op.Name, Rank: int(op.Rank), Queue: q, Pos: op.Pos, Err: err}
}

func opErrorf(g *ir.Graph, id ir.OpID, format string, args ...any) *OpError {
	return opError(g, id, fmt.Errorf(format, args...))
}

// ErrHang is wrapped by the error of a run that stopped making progress; the HangError says
// where.
var ErrHang = errors.New("run stopped making progress")

// Stuck is one blocked item of a hung run: a WAIT that never saw its count, or an op whose
// completion never came.
type Stuck struct {
	Rank    int
	Queue   string // the queue that is blocked (the one holding the WAIT, or the op's queue)
	CQ      string // the CQ waited on or polled
	Reached uint64 // completions seen on CQ (or what Unit names)
	Awaited uint64 // completions needed (or what Unit names)
	// Unit is what Reached and Awaited count when CQ is a counter (ir.CounterKind.Counts):
	// landings for a counter of the writes that land in a region. "" for a CQ's completions.
	Unit     string
	Producer string // the op expected to produce the awaited completion, with its position
	What     string // "WAIT", "post", "recv", ...
	// At is the blocked chain entry in the compiled plan (the WAIT, the HOST step, the WQE whose
	// completion never came or that was never posted), and ProducerAt the WQE expected to
	// produce the awaited completion; nil where they cannot be placed.
	At, ProducerAt *WQELoc
	// stuckOp and producerOp are the ops an engine that walks ops (the polling engine) blames
	// (byOp set); Session.Run places them in the plan.
	stuckOp, producerOp ir.OpID
	byOp                bool
}

// WQELoc names one chain entry of a compiled plan: entry Index of the chain of work queue Queue
// (an index into the rank's planner.RankPlan.Queues) on rank Rank.
type WQELoc struct {
	Rank, Queue, Index int
}

// locOf is where op id landed in plan, or nil.
func locOf(plan *ir.Plan, id ir.OpID) *WQELoc {
	if plan == nil {
		return nil
	}
	r, l, ok := plan.Place(id)
	if !ok {
		return nil
	}
	return &WQELoc{Rank: r, Queue: l.Queue, Index: l.Index}
}

// awaitedLoc is the WQE whose completion condition c of rank r counts: the one producing the
// c.Count-th completion of the CQ's work queue (iteration 0), else where c.Op landed.
func awaitedLoc(plan *ir.Plan, r int, c ir.Cond) *WQELoc {
	if q, i, ok := plan.Producer(r, int(c.CQ), c.Count); ok {
		return &WQELoc{Rank: r, Queue: q, Index: i}
	}
	return locOf(plan, c.Op)
}

// locate places the ops an engine that walks ops blamed.
func (e *HangError) locate(plan *ir.Plan) {
	for i := range e.Stuck {
		s := &e.Stuck[i]
		if !s.byOp {
			continue
		}
		if s.At == nil {
			s.At = locOf(plan, s.stuckOp)
		}
		if s.ProducerAt == nil {
			s.ProducerAt = locOf(plan, s.producerOp)
		}
	}
}

func (s Stuck) String() string {
	msg := fmt.Sprintf("rank %d: %s on queue %s is stuck", s.Rank, s.What, s.Queue)
	switch {
	case s.Unit != "":
		msg += fmt.Sprintf(": %s reached %d of %d %s", s.CQ, s.Reached, s.Awaited, s.Unit)
	case s.CQ != "":
		msg += fmt.Sprintf(": CQ %s reached %d of %d completions", s.CQ, s.Reached, s.Awaited)
	}
	// With neither, the wait the CPU checks says in What how far it got (gates.describe).
	if s.Producer != "" {
		msg += "; expected from " + s.Producer
	}
	return msg
}

// HangError reports a run that made no progress for the hang timeout, with every stuck item
// (first the ones that block others).
type HangError struct {
	Iteration int // counted over the Session's life: earlier Runs' iterations come first
	Stuck     []Stuck
	Detail    string // the provider's own stall diagnosis, if it gave one
}

func (e *HangError) Error() string {
	msg := fmt.Sprintf("iteration %d: %v", e.Iteration, ErrHang)
	for i, s := range e.Stuck {
		if i == 6 {
			msg += fmt.Sprintf("\n  ... and %d more", len(e.Stuck)-i)
			break
		}
		msg += "\n  " + s.String()
	}
	if e.Detail != "" {
		msg += "\n  NIC: " + e.Detail
	}
	return msg
}

// Unwrap lets errors.Is(err, ErrHang) recognise a hang.
func (e *HangError) Unwrap() error { return ErrHang }
