package ir

import (
	"fmt"
	"sync"

	"github.com/coredag/coredag/wait"
)

// This file defines the Plan: what Compile hands to the engines, the listing and the viz.
// A Plan is plain data. Every rank has work queues (the send and receive side of each graph
// queue, plus the management queue and the host-signal queue when the target needs them), one CQ
// per work queue, and per queue a chain of WQEs for one iteration. Counts in WAIT and ENABLE
// entries are absolute for iteration 0; iteration i adds i times the per-iteration count of the
// CQ or work queue they name, wrapping at 2^24 (CQ) and 2^16 (work queue) like the hardware
// producer indices do: package wait has the model (conditions, re-arm, the NIC's tests).

// Style is how a target enforces cross-queue dependencies.
type Style uint8

// Lowering styles (DESIGN.md, CORE-Direct in brief).
const (
	// StyleNone: no WAIT or ENABLE entries; the polling engine enforces dependencies on the CPU.
	StyleNone Style = iota
	// StyleManaged: all data queues are managed; a per-rank management queue holds WAIT and
	// ENABLE entries and walks the DAG.
	StyleManaged
	// StyleInline: WAITs sit in the data send queues right before the WQE they guard; receive
	// queues with dependencies are managed and enabled from their queue pair's send queue.
	StyleInline
)

var styleNames = [...]string{"none", "managed", "inline"}

func (s Style) String() string {
	if int(s) < len(styleNames) {
		return styleNames[s]
	}
	return fmt.Sprintf("Style(%d)", s)
}

// Target is a named NIC capability profile that Compile lowers for.
type Target struct {
	Name         string
	Description  string
	CrossChannel bool  // CQE_WAIT / SEND_EN / RECV_EN are available
	Style        Style // how dependencies are enforced
	// PrePost is true when whole chains are posted before an iteration starts (offload), so every
	// data queue's chain for one iteration must fit its declared depth.
	PrePost    bool
	MaxWQDepth int // largest work queue the NIC supports (WQEs)
	MaxCQDepth int // largest CQ the NIC supports (CQEs)
	MaxInline  int // largest inline payload in bytes (0: no inline sends)
	MaxSGE     int // most scatter/gather elements in one work request (a list's slices)
	// CanCalc reports that the NIC can reduce data itself (vector calc). Compile lowers every
	// reduce to a HOST step today; the flag describes the hardware.
	CanCalc bool
	// Trigger is set for triggered-operation targets (counters and thresholds instead of WAIT
	// and ENABLE, see trigger.go); their Style is StyleNone and CrossChannel false.
	Trigger *TriggerProfile
	// Order is what the target guarantees between the landings of two ops posted one after the
	// other on one queue (order.go); the race check proves a plan under it. OrderSource says
	// where the figure comes from, and which parts are guesses.
	Order       Order
	OrderSource string
}

// Opcode is what a WQE asks the NIC (or, for HOST, the CPU) to do.
type Opcode uint8

// WQE opcodes. The names are those of the verbs and MLNX_OFED experimental verbs they map to.
const (
	OpcSend       Opcode = iota // SEND (two-sided)
	OpcRecv                     // RECV (posted receive buffer)
	OpcWrite                    // RDMA_WRITE
	OpcWriteImm                 // RDMA_WRITE_IMM (notify write: consumes a recv at the peer)
	OpcRead                     // RDMA_READ
	OpcAtomicFAdd               // ATOMIC_FADD (8-byte fetch-and-add)
	OpcAtomicCAS                // ATOMIC_CAS (8-byte compare-and-swap)
	OpcNop                      // NOP (host-signal: completes to tell the NIC a CPU step is done)
	OpcWait                     // CQE_WAIT (cross-channel: stop until a CQ reached a count)
	OpcSendEnable               // SEND_EN (cross-channel: let a managed send queue run up to an index)
	OpcRecvEnable               // RECV_EN (cross-channel: let a managed receive queue run up to an index)
	OpcHost                     // HOST (a CPU step, e.g. reduce; never posted to the NIC)
	numOpcodes
)

var opcodeNames = [...]string{"SEND", "RECV", "RDMA_WRITE", "RDMA_WRITE_IMM", "RDMA_READ",
	"ATOMIC_FADD", "ATOMIC_CAS", "NOP", "CQE_WAIT", "SEND_EN", "RECV_EN", "HOST"}

func (o Opcode) String() string {
	if o < numOpcodes {
		return opcodeNames[o]
	}
	return fmt.Sprintf("Opcode(%d)", o)
}

// ParseOpcode maps an opcode name (as String prints it) back to its Opcode.
func ParseOpcode(s string) (Opcode, bool) {
	for i, n := range opcodeNames {
		if n == s {
			return Opcode(i), true
		}
	}
	return 0, false
}

// Posted reports whether WQEs with this opcode are posted to a NIC work queue (all but HOST).
func (o Opcode) Posted() bool { return o != OpcHost }

// IsData reports whether the opcode moves data (or consumes a message) for a graph op.
func (o Opcode) IsData() bool { return o <= OpcAtomicCAS }

// IsReadLike reports whether a later WQE of the same queue needs a fence to start only after
// this one completed (RDMA_READ and atomics write local memory late).
func (o Opcode) IsReadLike() bool {
	return o == OpcRead || o == OpcAtomicFAdd || o == OpcAtomicCAS
}

// Flags are per-WQE flags.
type Flags uint8

// WQE flags.
const (
	Signalled Flags = 1 << iota // produce a CQE (IBV_SEND_SIGNALED); receives always do
	Fence                       // start only after earlier READ/ATOMIC WQEs of the queue completed
	Inline                      // payload copied into the WQE (IBV_SEND_INLINE)
)

func (f Flags) String() string {
	s := ""
	for _, x := range []struct {
		bit  Flags
		name string
	}{{Signalled, "signalled"}, {Fence, "fence"}, {Inline, "inline"}} {
		if f&x.bit != 0 {
			if s != "" {
				s += ","
			}
			s += x.name
		}
	}
	return s
}

// Cond is a completion condition of a plan: wait.Cond (the rank-local CQ, an index into
// RankPlan.CQs, has produced at least Count completions, iteration 0) with the op whose
// completion the count stands for, which diagnostics name.
type Cond struct {
	wait.Cond
	Op OpID
}

// WQE is one entry of a work queue chain. A plan holds millions of them, so it keeps only what
// lowering decided: the op's name, position, scatter/gather list and atomic operands are in
// the Plan's Graph (Plan.OpOf, Plan.LocalSegs), and the operands carry no source positions.
//
// Operands by opcode:
//
//	SEND            Local: payload (may be absent)             Peer
//	RECV            Local: landing buffer (may be absent)
//	RDMA_WRITE(_IMM) Local: source, Remote: destination        Peer
//	RDMA_READ       Remote: source, Local: destination         Peer
//	ATOMIC_*        Remote: the 8-byte element, Local: fetched old value (may be absent)   Peer
//	                (the addend, compare and swap values are the op's A and B)
//	CQE_WAIT        Wait: the CQ and count (Wait.Op is the op awaited)
//	SEND_EN/RECV_EN Queue: the managed work queue, UpTo: WQEs [0, UpTo) may run (iteration 0)
//	HOST            Op: the graph op the CPU runs; Waits: completions it needs first
//	NOP             Op: the host op whose completion it signals
type WQE struct {
	Opcode Opcode
	Red    ReduceOp
	Flags  Flags
	// Op is the graph op the entry belongs to: for data WQEs, HOST and NOP the op itself; for
	// CQE_WAIT the op it holds back; for SEND_EN/RECV_EN the last op it enables.
	Op   OpID
	Peer int32 // peer rank for data WQEs, -1 otherwise
	// Enable is SEND_EN/RECV_EN's: Queue, the rank-local work queue index enabled (-1 on other
	// entries), and UpTo, the enabled producer index (exclusive), iteration 0.
	wait.Enable
	Wait Cond // CQE_WAIT only
	// Local and Remote are the operands; Remote lives on rank Peer. When the local operand is a
	// scatter/gather list (SEND, RECV, RDMA WRITE and READ), Local is its first segment and the
	// op's More the others (Plan.LocalSegs).
	Local, Remote Seg
	Waits         []Cond // HOST only: completions the CPU waits for before running the op
}

// Seg is a WQE operand: a graph Slice without its source position.
type Seg struct {
	Buf BufID
	Off int64 // first element
	Len int64 // elements
}

// NoSeg is the absent operand.
var NoSeg = Seg{Buf: None}

// Valid reports whether s names a buffer range.
func (s Seg) Valid() bool { return s.Buf != None }

// Slice returns s as a graph Slice (with no position).
func (s Seg) Slice() Slice { return Slice{Buf: s.Buf, Off: s.Off, Len: s.Len} }

// Seg returns the slice's range without its position.
func (s Slice) Seg() Seg { return Seg{Buf: s.Buf, Off: s.Off, Len: s.Len} }

// OpOf returns the graph op a WQE belongs to (see WQE.Op): its name and position are the WQE's.
func (p *Plan) OpOf(w *WQE) *Op { return &p.Graph.Ops[w.Op] }

// More returns the further segments of a data WQE's local scatter/gather list (its op's More;
// none for other WQEs). The slice is the graph's: read-only.
func (p *Plan) More(w *WQE) []Slice {
	if !w.Opcode.IsData() || !w.Local.Valid() || uint(w.Op) >= uint(len(p.Graph.Ops)) { // w.Op < 0 too
		return nil
	}
	return p.Graph.Ops[w.Op].More()
}

// LocalSegs returns the WQE's local SGE list: Local followed by More (none when Local is absent).
func (p *Plan) LocalSegs(w *WQE) []Slice {
	if !w.Local.Valid() {
		return nil
	}
	var more []Slice // p.More(w), written out so that LocalSegs inlines and its result can stay on the caller's stack
	if w.Opcode.IsData() && uint(w.Op) < uint(len(p.Graph.Ops)) {
		more = p.Graph.Ops[w.Op].More()
	}
	return append([]Slice{w.Local.Slice()}, more...)
}

// MaxSGE is the longest SGE list of rank r's work requests (1 when none is a list), what its
// QPs must be created for.
func (p *Plan) MaxSGE(r int) int {
	n := 1
	rp := &p.Ranks[r]
	for i := range rp.Queues {
		for k := range rp.Queues[i].Chain {
			n = max(n, 1+len(p.More(&rp.Queues[i].Chain[k])))
		}
	}
	return n
}

// Signalled reports whether the WQE carries the Signalled flag.
func (w *WQE) Signalled() bool { return w.Flags&Signalled != 0 }

// Completes reports whether the WQE produces a completion on its queue's CQ: it is posted, and
// signalled or a RECV (a receive always completes with a CQE, flag or not). Completion counts,
// WAIT counts included, count exactly these WQEs.
func (w *WQE) Completes() bool {
	return w.Opcode.Posted() && (w.Signalled() || w.Opcode == OpcRecv)
}

// QueueKind says what a work queue carries.
type QueueKind uint8

// Work queue kinds.
const (
	SendQueue       QueueKind = iota // the send side of a graph queue's QP
	RecvQueue                        // the receive side of a graph queue's QP
	MgmtQueue                        // the management (cross-channel master) queue of a rank
	HostSignalQueue                  // HOST steps (run by the CPU) and the NOPs that signal them
)

var queueKindNames = [...]string{"send", "recv", "mgmt", "host"}

func (k QueueKind) String() string {
	if int(k) < len(queueKindNames) {
		return queueKindNames[k]
	}
	return fmt.Sprintf("QueueKind(%d)", k)
}

// WorkQueue is one NIC work queue of a rank with its chain for one iteration.
type WorkQueue struct {
	Name    string // "right.sq", "right.rq", "mgmt", "host"
	Kind    QueueKind
	Queue   QueueID // the graph queue (None for mgmt and host)
	CQ      int     // rank-local CQ index, -1 when the queue needs none (host queue on generic)
	Managed bool    // runs only up to what SEND_EN/RECV_EN allow
	Depth   int     // work queue size to create (WQEs)
	Chain   []WQE
	// PerIteration is how many WQEs one iteration posts to the NIC (HOST entries excluded): the
	// amount re-arm adds to ENABLE indices of this queue per iteration.
	PerIteration uint32
}

// CQ is one completion queue of a rank; each serves exactly one work queue, so "the k-th
// completion" names exactly one WQE.
type CQ struct {
	Name  string // "right.scq", "right.rcq", "mgmt.cq", "host.cq"
	Queue int    // the rank-local work queue it serves
	Depth int    // CQ size to create
	// PerIteration is how many completions one iteration produces: the amount re-arm adds to
	// WAIT counts on this CQ per iteration.
	PerIteration uint32
}

// Loc is where a graph op landed in a Plan: the rank-local work queue and chain index of its
// data WQE (or of its HOST entry for host ops).
type Loc struct {
	Queue int
	Index int
}

// RankPlan is everything one rank posts.
type RankPlan struct {
	Rank   int
	Queues []WorkQueue
	CQs    []CQ
	Mgmt   int // index of the management queue in Queues, -1 if the style has none
	Host   int // index of the host-signal queue in Queues, -1 if the rank has no host ops
	// SendWQ and RecvWQ map the rank's graph queues (QueueID minus the rank's FirstQueue) to
	// the indices in Queues of their send and receive work queues.
	SendWQ, RecvWQ []int
	// Trig is the triggered form (counters, triggered work) on triggered targets, else nil.
	Trig *Triggered
}

// Stats summarises a compiled plan (all ranks, one iteration).
type Stats struct {
	WQEs         int // posted WQEs (data, NOP, WAIT, ENABLE)
	DataWQEs     int // data WQEs (send, recv, write, read, atomic)
	HostSteps    int // HOST entries
	NaiveWaits   int // WAITs a naive lowering emits: one per cross-queue dependency into NIC work
	Waits        int // CQE_WAIT entries after minimisation
	NaiveEnables int // ENABLEs a naive lowering emits: one per managed WQE
	Enables      int // SEND_EN + RECV_EN entries after merging
	HostWaits    int // completion conditions the CPU checks before HOST steps
	Fences       int // WQEs with the fence flag
	Signalled    int // posted WQEs that produce a completion
	CriticalPath int // ops on the longest dependency path (after edges, queue order, matching)
}

// Plan is a Graph compiled for a Target.
type Plan struct {
	Graph  *Graph
	Target Target
	Ranks  []RankPlan
	Loc    []Loc // indexed by OpID
	Stats  Stats
	// Deps is what the polling engine walks on the CPU: set for targets without cross-channel
	// (Style none), nil for the others, whose chains carry their dependencies as WAITs and ENABLEs.
	Deps *Deps
}

// Deps is the dependency graph of a plan's ops as a CPU engine enforces it: every op's explicit
// predecessors (the ops it is `after`, as Graph.Preds) and successors, in CSR form indexed by
// OpID. Queue order and message matching are not in it: the NIC keeps a work queue FIFO and
// matches messages with receives, and each work queue's Chain lists its ops in queue order.
// Compile computes it; the slices are shared, read-only.
type Deps struct {
	PredStart, PredList []int32 // predecessors of op o: PredList[PredStart[o]:PredStart[o+1]]
	SuccStart, SuccList []int32 // successors of op o: SuccList[SuccStart[o]:SuccStart[o+1]]
}

// NewDeps builds the CSR adjacency of edges over n ops. Past parallelDeps edges, the
// predecessors and the successors are built at once, the one beside the other.
func NewDeps(n int, edges []Edge) *Deps {
	d := &Deps{}
	preds := func() {
		d.PredStart, d.PredList = buildCSR(n, edges, true)
	}
	succs := func() {
		d.SuccStart, d.SuccList = buildCSR(n, edges, false)
	}
	if len(edges) < parallelDeps {
		preds()
		succs()
		return d
	}
	var wg sync.WaitGroup
	wg.Go(preds)
	succs()
	wg.Wait()
	return d
}

// parallelDeps is the least number of edges whose adjacency NewDeps builds on two goroutines.
const parallelDeps = 1 << 15

// Preds returns the ops o waits for.
func (d *Deps) Preds(o OpID) []int32 { return d.PredList[d.PredStart[o]:d.PredStart[o+1]] }

// Succs returns the ops that wait for o.
func (d *Deps) Succs(o OpID) []int32 { return d.SuccList[d.SuccStart[o]:d.SuccStart[o+1]] }

// NumPreds is how many ops o waits for: the initial value of its pending counter.
func (d *Deps) NumPreds(o OpID) int32 { return d.PredStart[o+1] - d.PredStart[o] }

// WQEOf returns the WQE an op was lowered to (the HOST entry for host ops).
func (p *Plan) WQEOf(id OpID) *WQE {
	r := p.Graph.Ops[id].Rank
	l := p.Loc[id]
	return &p.Ranks[r].Queues[l.Queue].Chain[l.Index]
}

// RankStats counts one rank's entries (naive counts and the critical path are plan-wide and
// stay zero).
func (p *Plan) RankStats(r int) Stats {
	var s Stats
	for _, q := range p.Ranks[r].Queues {
		for k := range q.Chain {
			e := &q.Chain[k]
			if e.Opcode.Posted() {
				s.WQEs++
				if e.Signalled() {
					s.Signalled++
				}
			}
			switch {
			case e.Opcode.IsData():
				s.DataWQEs++
			case e.Opcode == OpcHost:
				s.HostSteps++
				s.HostWaits += len(e.Waits)
			case e.Opcode == OpcWait:
				s.Waits++
			case e.Opcode == OpcSendEnable || e.Opcode == OpcRecvEnable:
				s.Enables++
			}
			if e.Flags&Fence != 0 {
				s.Fences++
			}
		}
	}
	return s
}
