package ir

import (
	"fmt"

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
)

var counterKindNames = [...]string{"send", "recv", "host", "join", "post"}

func (k CounterKind) String() string {
	if int(k) < len(counterKindNames) {
		return counterKindNames[k]
	}
	return fmt.Sprintf("CounterKind(%d)", k)
}

// Counter is one completion counter of a rank (libfabric fi_cntr).
type Counter struct {
	Name  string // "right.scnt", "left.rcnt", "host.cnt", "join.red[1]", "left.post"
	Kind  CounterKind
	Queue int  // CntSend, CntRecv: the rank-local work queue whose CQ it counts; -1 otherwise
	Op    OpID // CntJoin: the op it gates; None otherwise
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
	// Source says where the figures come from and which are guesses.
	Source string
}
