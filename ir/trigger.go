package ir

import (
	"errors"
	"fmt"
	"math"

	"github.com/coredag/coredag/diag"
)

// This file holds the triggered-operation form of a Plan (target family "triggered"): per rank a
// set of completion counters and a list of triggered work in submission order. The work queue
// chains stay as on the generic target (plain data WQEs and HOST entries, every data WQE
// signalled); what orders them is TriggeredOp entries, not WAIT or ENABLE entries.
//
// Re-arm: thresholds are monotonic. A counter is never reset; iteration i uses threshold
// Threshold + i*PerIteration of its counter. A reset (counter-set) between iterations would race
// with a faster peer whose next-iteration messages already raise a receive counter, and would
// need a barrier the NIC cannot express; monotonic thresholds need none. The price is that a
// counter grows by PerIteration every iteration, which TriggerProfile.MaxCounter bounds.

// CounterKind is what raises a counter.
type CounterKind uint8

// Counter kinds.
const (
	CntSend CounterKind = iota // completions of a queue's send side (send, write, read, atomics)
	CntRecv                    // completions of a queue's receive side (messages and notify writes consumed)
	CntHost                    // HOST steps the CPU finished (the CPU adds 1 after each)
	CntJoin                    // counter-add work of one joining op: one add per predecessor condition
	CntPost                    // receive postings of a queue side: an add fires right after each triggered receive
	CntLand                    // remote writes that land in a region of the rank's memory (FI_RMA_EVENT, a counter bound to the region for FI_REMOTE_WRITE)
)

var counterKindNames = [...]string{"send", "recv", "host", "join", "post", "land"}

// Counts says what a counter of kind k counts, in the plural, for messages and drawings:
// "completions", "host steps done", "counter-adds", "receive postings", "landings (remote
// writes)".
func (k CounterKind) Counts() string {
	switch k {
	case CntHost:
		return "host steps done"
	case CntJoin:
		return "counter-adds"
	case CntPost:
		return "receive postings"
	case CntLand:
		return "landings (remote writes)"
	}
	return "completions"
}

func (k CounterKind) String() string {
	if int(k) < len(counterKindNames) {
		return counterKindNames[k]
	}
	return fmt.Sprintf("CounterKind(%d)", k)
}

// Counter is one completion counter of a rank (libfabric fi_cntr).
type Counter struct {
	Name  string // "right.scnt", "left.rcnt", "host.cnt", "join.red[1]", "left.post", "ring[0:4].land"
	Kind  CounterKind
	Queue int  // CntSend, CntRecv: the rank-local work queue whose CQ it counts; -1 otherwise
	Op    OpID // CntJoin: the op it gates; CntLand: the first wait that counts the region; None otherwise
	// Region is the slice of the rank's memory whose landed writes a CntLand counter counts
	// (the region of its waits, `wait N writes to REGION`); read only for that kind.
	Region Slice
	// PerIteration is how much one iteration raises the counter: the amount re-arm adds to every
	// threshold on it per iteration.
	PerIteration uint64
}

// TrigKind is what a triggered entry does when its counter reaches its threshold.
type TrigKind uint8

// Triggered entry kinds.
const (
	TrigOp  TrigKind = iota // start the op's WQE (post it), or for a HOST op let the CPU run it
	TrigAdd                 // add Value to counter Target
	TrigSet                 // set counter Target to Value
)

var trigKindNames = [...]string{"op", "counter-add", "counter-set"}

func (k TrigKind) String() string {
	if int(k) < len(trigKindNames) {
		return trigKindNames[k]
	}
	return fmt.Sprintf("TrigKind(%d)", k)
}

// Untriggered is the Counter of a TriggeredOp that is posted at once when the iteration starts.
const Untriggered = -1

// TriggeredOp is one entry of a rank's triggered work, in submission order. Entries with equal
// (Counter, Threshold) fire in submission order.
type TriggeredOp struct {
	Kind TrigKind
	// Op is the graph op the entry belongs to: for TrigOp the op started; for counter work the
	// op whose completion condition it forwards (Cause) into the join counter of op For.
	Op   OpID
	Name string
	Pos  diag.Pos
	// Counter (index into RankPlan.Counters) and Threshold (iteration 0): the entry fires once
	// the counter reached the threshold. Counter is Untriggered for work posted at once.
	Counter   int
	Threshold uint64
	// TrigOp: where the op's WQE (or HOST entry) is.
	Loc Loc
	// TrigAdd, TrigSet: the counter changed and the value.
	Target int
	Value  uint64
	// Cause is the op whose completion the trigger condition stands for (None when the counter is
	// a join or post counter, or the entry is untriggered).
	Cause OpID
}

// Triggered is the triggered form of one rank: its counters and its triggered work.
type Triggered struct {
	Counters []Counter
	Work     []TriggeredOp
	// SendCnt and RecvCnt map the rank's work queues to their completion counters (-1: none);
	// HostCnt is the host-step counter (-1 when the rank has no host ops).
	SendCnt []int // by work queue index: the counter of its CQ (send or receive side)
	HostCnt int
}

// TriggerProfile is the budget of a triggered NIC.
type TriggerProfile struct {
	// Provider names the NIC family the figures come from.
	Provider string
	// MaxOutstanding bounds the triggered work (ops and counter work) queued and not yet fired at
	// once on one rank, in units; 0: no limit known.
	MaxOutstanding int
	// CounterWorkCost is how many units one counter-add or counter-set costs (1 if unset).
	CounterWorkCost int
	// RecvThresholdZero: triggered receives are only allowed at threshold 0, i.e. receives are
	// posted when the iteration starts and may not wait for anything.
	RecvThresholdZero bool
	// MaxCounters bounds the counters of one rank; 0: no limit known.
	MaxCounters int
	// MaxCounter is the largest value a counter may reach over a run.
	MaxCounter uint64
	// Guesses are the figures that are guesses, not documented provider figures.
	Guesses Figure
	// Source says where the figures come from and which are guesses.
	Source string
}

// Figure names one figure of a TriggerProfile, for saying which are guesses.
type Figure uint8

// Profile figures.
const (
	FigMaxOutstanding Figure = 1 << iota
	FigCounterWorkCost
	FigMaxCounters
	FigMaxCounter
)

var figureNames = []struct {
	f    Figure
	name string
}{{FigMaxOutstanding, "max_outstanding"}, {FigCounterWorkCost, "counter_work_cost"}, {FigMaxCounters, "max_counters"}, {FigMaxCounter, "max_counter"}}

// Names lists the figures of f by their JSON names (max_outstanding, counter_work_cost,
// max_counters, max_counter), in that order.
func (f Figure) Names() []string {
	out := []string{}
	for _, n := range figureNames {
		if f&n.f != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// Guess reports whether figure f of the profile is a guess rather than a documented figure.
func (p *TriggerProfile) Guess(f Figure) bool { return p.Guesses&f != 0 }

// WorkCost is what one counter-add or counter-set costs against MaxOutstanding (at least 1).
func (p *TriggerProfile) WorkCost() int { return max(p.CounterWorkCost, 1) }

// Units is what entry w of rank plan rp costs against the profile's MaxOutstanding: nothing for
// work posted at once and for HOST steps (the CPU runs them), 1 for a triggered op, WorkCost for
// counter work.
func (p *TriggerProfile) Units(rp *RankPlan, w *TriggeredOp) int {
	switch {
	case w.Counter == Untriggered:
		return 0
	case w.Kind != TrigOp:
		return p.WorkCost()
	case w.Loc.Queue == rp.Host:
		return 0
	}
	return 1
}

// NoIterationLimit is the iteration limit of a counter that never grows.
const NoIterationLimit = math.MaxUint64

// Iterations is how many iterations counter c can run before it would pass max: iteration i
// (from 0) needs the counter to reach first + i*PerIteration, where first is the larger of its
// per-iteration amount (what the counter counts to in iteration 0) and the highest threshold or
// set value on it. 0 when iteration 0 already passes max; NoIterationLimit for a counter that
// does not grow. It divides rather than multiplies, so no figure can overflow.
func (t *Triggered) Iterations(c int, max uint64) uint64 {
	amount := t.Counters[c].PerIteration
	first := amount
	for i := range t.Work {
		w := &t.Work[i]
		if w.Counter == c && w.Threshold > first {
			first = w.Threshold
		}
		if w.Kind == TrigSet && w.Target == c && w.Value > first {
			first = w.Value
		}
	}
	switch {
	case first > max:
		return 0
	case amount == 0:
		return NoIterationLimit
	}
	return (max-first)/amount + 1 // first >= amount >= 1: the sum stays below MaxUint64
}

// AllIterations is Iterations of every counter, in one pass over the work (Iterations of each
// counter in turn passes over it once per counter).
func (t *Triggered) AllIterations(max uint64) []uint64 {
	first := make([]uint64, len(t.Counters))
	for c := range t.Counters {
		first[c] = t.Counters[c].PerIteration
	}
	for i := range t.Work {
		w := &t.Work[i]
		if w.Counter >= 0 && w.Counter < len(first) && w.Threshold > first[w.Counter] {
			first[w.Counter] = w.Threshold
		}
		if w.Kind == TrigSet && w.Target >= 0 && w.Target < len(first) && w.Value > first[w.Target] {
			first[w.Target] = w.Value
		}
	}
	out := first // reused: first[c] is read before out[c] is written
	for c := range t.Counters {
		amount := t.Counters[c].PerIteration
		switch {
		case first[c] > max:
			out[c] = 0
		case amount == 0:
			out[c] = NoIterationLimit
		default:
			out[c] = (max-first[c])/amount + 1
		}
	}
	return out
}

// CounterLimit is the counter of a triggered plan that limits how many iterations it can run.
type CounterLimit struct {
	Rank, Counter int
	Name          string
	PerIteration  uint64 // how much the counter grows per iteration
	Max           uint64 // the profile's MaxCounter
	Iterations    uint64 // the most iterations that keep it within Max; NoIterationLimit if none
}

// RankCounterLimit is the counter of rank r that runs out first (Counter -1 and
// NoIterationLimit when no counter grows). r must be a rank of a triggered plan.
func (p *Plan) RankCounterLimit(r int) CounterLimit {
	prof := p.Target.Trigger
	tr := p.Ranks[r].Trig
	out := CounterLimit{Rank: r, Counter: -1, Max: prof.MaxCounter, Iterations: NoIterationLimit}
	for c, n := range tr.AllIterations(prof.MaxCounter) {
		if n < out.Iterations {
			out.Counter, out.Name, out.PerIteration, out.Iterations = c, tr.Counters[c].Name, tr.Counters[c].PerIteration, n
		}
	}
	return out
}

// CounterLimit is RankCounterLimit over all ranks: the counter that runs out first (the lowest
// rank among equals). ok is false for a plan that is not triggered.
func (p *Plan) CounterLimit() (lim CounterLimit, ok bool) {
	if p.Target.Trigger == nil {
		return CounterLimit{}, false
	}
	lim = CounterLimit{Rank: -1, Counter: -1, Max: p.Target.Trigger.MaxCounter, Iterations: NoIterationLimit}
	for r := range p.Ranks {
		if p.Ranks[r].Trig == nil {
			continue
		}
		if l := p.RankCounterLimit(r); l.Iterations < lim.Iterations {
			lim = l
		}
	}
	return lim, true
}

// ErrIterationLimit is matched (errors.Is) by the refusals of CheckIterations and
// WordLimit.Check: one more iteration would overflow a triggered plan's counter or wrap a
// watched word, neither of which is reset between iterations. Only a fresh start of the plan
// (a new session, whose counters and words begin again) runs more.
var ErrIterationLimit = errors.New("iteration limit")

// limitError is a refusal past the iteration limit: its message, matching ErrIterationLimit.
type limitError struct{ msg string }

func (e limitError) Error() string        { return e.msg }
func (e limitError) Is(target error) bool { return target == ErrIterationLimit }

// CheckIterations returns an error when running iters iterations (counted from the first of the
// plan's life: counters are never reset) would take a counter of a triggered plan past the
// profile's MaxCounter. It names the counter, its per-iteration amount, the limit and the most
// iterations that fit, and matches ErrIterationLimit. Plans of other targets always pass.
func (p *Plan) CheckIterations(iters uint64) error {
	lim, ok := p.CounterLimit()
	if !ok || iters <= lim.Iterations {
		return nil
	}
	guess := ""
	if p.Target.Trigger.Guess(FigMaxCounter) {
		guess = ", a guess"
	}
	return limitError{fmt.Sprintf("%d iterations would overflow counter %s on rank %d: it grows by %d per iteration and never resets, and target %s's counters stop at %d (profile figure MaxCounter%s): at most %d iterations fit",
		iters, lim.Name, lim.Rank, lim.PerIteration, p.Target.Name, lim.Max, guess, lim.Iterations)}
}

// TriggerLoad is one rank's triggered work for one iteration, as its profile counts it.
type TriggerLoad struct {
	Counters int // counters of the rank
	Entries  int // triggered entries that wait on the NIC (not posted at once, not HOST steps)
	Units    int // what they cost against MaxOutstanding (counter work costs WorkCost)
}

// Load is what rank plan rp's triggered work costs against the profile.
func (p *TriggerProfile) Load(rp *RankPlan) TriggerLoad {
	l := TriggerLoad{Counters: len(rp.Trig.Counters)}
	for i := range rp.Trig.Work {
		if u := p.Units(rp, &rp.Trig.Work[i]); u > 0 {
			l.Entries++
			l.Units += u
		}
	}
	return l
}

// HostWait is the remote-write counter and count that the CPU waits for before it runs HOST
// step o: for a wait for the writes that land in a region (`wait N writes to REGION`), the
// rank's CntLand counter of that region and N; ok is false for any other op, or when the rank
// has no such counter.
func (t *Triggered) HostWait(g *Graph, o OpID) (counter int, count uint64, ok bool) {
	op := &g.Ops[o]
	if op.Kind != OpWait || op.WaitsWord() {
		return -1, 0, false
	}
	for k := range t.Counters {
		if c := &t.Counters[k]; c.Kind == CntLand && c.Region == op.Dst {
			return k, uint64(op.A()), true
		}
	}
	return -1, 0, false
}
