package exec

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/wait"
)

// offloadEngine posts every rank's compiled chains, WAIT and ENABLE entries included, and lets
// the NIC walk them. The CPU polls the CQs (counting completions, checking statuses), runs the
// HOST entries of each rank's host-signal chain once the completions they wait for exist, and
// posts the signalled NOP that follows each one, which is how WAITs order NIC work after CPU work.
// Between iterations it re-arms the chains: WAIT counts move by the CQ's per-iteration
// completions and ENABLE indices by the target queue's per-iteration WQEs, cyclically.
//
// Each round does work in proportion to what happened, not to the size of the plan: it polls the
// CQs that have completions when the NIC says which (nic.CQNotifier; every CQ otherwise), runs the
// host chains of the ranks whose CQs returned completions, and posts again only the chains a full
// queue cut short. A count of what is left (e.left) says when the iteration is over.
type offloadEngine struct {
	g     *ir.Graph
	plan  *ir.Plan
	mem   *Memory
	prog  nic.Progresser
	watch stallWatch
	ranks []offRank
	wc    []nic.WC
	gates *gates // what the wait ops wait for (nil: the plan has none)

	ready   nic.CQNotifier      // nil: poll every CQ each round
	cqAt    map[nic.CQ][2]int32 // with ready: rank index and CQ index of each CQ
	cqBuf   []nic.CQ
	dirty   []int32    // ranks whose CQs returned completions since their host chain last ran
	marked  []bool     // by rank index: in dirty
	short   [][2]int32 // rank and work queue indices of chains a full queue left unposted
	trigged []int32    // ranks of triggered plans: counters gate their host steps, so they run every round
	left    int        // host entries, chain entries to post and completions to poll in this iteration, triggered ranks apart

	// owedOnly: the triggered ranks' rounds poll only the CQs that owe completions this
	// iteration, and every CQ once in fullEvery rounds (round counts them). See poll.
	owedOnly bool
	round    uint32
	// unobserved decides which sends may complete before their message is delivered
	// (two-sided triggered plans without waits); nil otherwise.
	unobserved *unobservedSends

	posted, polled, hostSteps, waits, enables uint64
	iter                                      int
}

// fullEvery is how often, in rounds, an engine that polls only the CQs owing completions polls
// every CQ: a CQ with nothing owed may still report a failed request, and its endpoints' progress
// may be what a peer waits for.
const fullEvery = 8

type offRank struct {
	rp  *ir.RankPlan
	res *rankRes
	wqs []offWQ // by plan work queue
	cqs []offCQ // by plan CQ
	// host chain cursor
	hostNext int
	trig     *trigRank // triggered plans only
	gated    bool      // the host chain stopped at a wait whose gate does not allow it yet
	// order is the order poll visits the CQs in. With owedOnly (two-sided plans), those of
	// receive queues first: on libfabric's sockets a send CQ's poll also reads the endpoint's
	// sockets, for acknowledgements, and a message waiting there costs it a look that only the
	// receive side may act on. Otherwise the plan's order, so that a failed write or read is
	// reported before the flushed receives that follow from it.
	order []int32
}

type offWQ struct {
	wq     *ir.WorkQueue
	qp     nic.QP // nil for a host queue without CQ
	recv   bool   // a receive queue
	host   bool   // the host-signal queue: its NOPs are posted by the CPU
	swr    []nic.SendWR
	rwr    []nic.RecvWR
	next   int           // chain entries posted (or run, for HOST) this iteration
	waitAt []int32       // chain indices of CQE_WAIT entries
	waitC  []wait.Cond   // their conditions (iteration 0)
	waitP  []uint32      // per-iteration completions of the CQ they wait on
	enAt   []int32       // chain indices of SEND_EN / RECV_EN entries
	enE    []wait.Enable // their enables (iteration 0)
	enP    []uint32      // per-iteration WQEs of the queue they enable
}

type offCQ struct {
	cq     nic.CQ
	name   string
	wq     int
	count  uint64 // completions polled over the run
	target uint64 // count at the end of the current iteration
	per    uint64
}

const offloadTag = uint64(1) << 62

// A work request ID of the offload engine packs under offloadTag, from the top, the rank, the
// index of the work queue in the rank's plan and the index of the entry in its chain, each in a
// field of fixed width (offIDRoom refuses a plan whose numbers do not fit).
const (
	offIdxBits  = 24
	offWQBits   = 16
	offRankBits = 62 - offWQBits - offIdxBits
)

func offID(rank, wq, idx int) uint64 {
	return offloadTag | uint64(rank)<<(offWQBits+offIdxBits) | uint64(wq)<<offIdxBits | uint64(idx)
}

// splitOffID undoes offID.
func splitOffID(id uint64) (rank, wq, idx int) {
	return int(id >> (offWQBits + offIdxBits) & (1<<offRankBits - 1)), int(id >> offIdxBits & (1<<offWQBits - 1)), int(id & (1<<offIdxBits - 1))
}

// offIDRoom refuses rank of a plan when offID cannot tell its work requests apart: a rank
// numbered past its field, more work queues than the queue field numbers, or a chain (longest,
// of work queue wq) with more entries than the entry field numbers. A number too large would
// spill into the field above it, and a failed completion or a stall would then be blamed on
// another op, queue or rank.
func offIDRoom(rank, queues, longest int, wq string) error {
	const hint = "run it on the polling engine (--engine poll)"
	switch {
	case rank >= 1<<offRankBits:
		return fmt.Errorf("the plan has rank %s, past the offload engine's %s ranks (its work request IDs hold a rank in %d bits): %s",
			thousands(rank), thousands(1<<offRankBits), offRankBits, hint)
	case queues > 1<<offWQBits:
		return fmt.Errorf("the plan has %s work queues on rank %d, more than the offload engine's %s (its work request IDs hold a work queue index in %d bits): %s",
			thousands(queues), rank, thousands(1<<offWQBits), offWQBits, hint)
	case longest > 1<<offIdxBits:
		return fmt.Errorf("the plan's chain of work queue %s on rank %d has %s entries, more than the offload engine's %s (its work request IDs hold a chain index in %d bits): %s",
			wq, rank, thousands(longest), thousands(1<<offIdxBits), offIdxBits, hint)
	}
	return nil
}

// thousands formats n (not negative) with its digits grouped by commas: 65,536.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func newOffload(plan *ir.Plan, mem *Memory, res []*rankRes, p nic.Provider, opts Options) (*offloadEngine, error) {
	g := plan.Graph
	e := &offloadEngine{g: g, plan: plan, mem: mem, wc: make([]nic.WC, 64)}
	e.prog, _ = p.(nic.Progresser)
	e.watch = stallWatch{prog: e.prog, limit: opts.HangTimeout}
	var err error
	if e.gates, err = newGates(g, mem, res, p); err != nil {
		return nil, err
	}
	if e.ready, _ = p.(nic.CQNotifier); e.ready != nil {
		e.cqAt = map[nic.CQ][2]int32{}
	}
	// plain: every transfer is two-sided and nothing waits on memory (owedOnly, unobserved).
	plain := !e.gates.any() && twoSided(plan)
	if plain && triggered(plan) {
		e.unobserved = newUnobservedSends(plan.Graph)
	}
	for _, r := range res {
		rp := &plan.Ranks[r.rank]
		or := offRank{rp: rp, res: r, wqs: make([]offWQ, len(rp.Queues)), cqs: make([]offCQ, len(rp.CQs))}
		for ci := range rp.CQs {
			or.cqs[ci] = offCQ{name: rp.CQs[ci].Name, wq: rp.CQs[ci].Queue, per: uint64(rp.CQs[ci].PerIteration)}
		}
		for qi, spec := range r.layout.qps {
			if spec.sendWQ >= 0 {
				or.wqs[spec.sendWQ].qp = r.qps[qi]
			}
			if spec.recvWQ >= 0 {
				or.wqs[spec.recvWQ].qp = r.qps[qi]
				or.wqs[spec.recvWQ].recv = true
			}
		}
		for ci := range rp.CQs {
			or.cqs[ci].cq = r.cqs[ci] // offloadLayout creates the plan's CQs in order
		}
		for wi := range rp.Queues {
			wq := &rp.Queues[wi]
			o := &or.wqs[wi]
			o.wq = wq
			o.host = wi == rp.Host
			if o.recv || wq.Kind == ir.RecvQueue {
				o.recv = true
				o.rwr = make([]nic.RecvWR, 0, len(wq.Chain))
				for k := range wq.Chain {
					w := &wq.Chain[k]
					o.rwr = append(o.rwr, nic.RecvWR{ID: offID(r.rank, wi, k), Local: r.local(g, w.Local), More: r.more(g, e.plan.More(w))})
				}
				continue
			}
			o.swr = make([]nic.SendWR, 0, len(wq.Chain))
			for k := range wq.Chain {
				w := &wq.Chain[k]
				wr, err := e.buildWR(r, rp, &or, wi, k, w)
				if err != nil {
					return nil, err
				}
				o.swr = append(o.swr, wr)
			}
			if o.qp == nil && len(o.swr) > 0 && !o.host {
				return nil, fmt.Errorf("rank %d: work queue %s has a chain but no QP", r.rank, wq.Name)
			}
		}
		if rp.Trig != nil {
			if err := e.setupTrig(&or); err != nil {
				return nil, err
			}
			e.trigged = append(e.trigged, int32(len(e.ranks)))
		}
		if e.cqAt != nil {
			for ci := range or.cqs {
				if c := or.cqs[ci].cq; c != nil {
					e.cqAt[c] = [2]int32{int32(len(e.ranks)), int32(ci)}
				}
			}
		}
		e.ranks = append(e.ranks, or)
	}
	e.marked = make([]bool, len(e.ranks))
	e.owedOnly = len(e.trigged) > 0 && plain
	for ri := range e.ranks {
		or := &e.ranks[ri]
		for _, recv := range []bool{true, false} {
			for ci := range or.cqs {
				q := or.cqs[ci].wq
				isRecv := e.owedOnly && q >= 0 && q < len(or.wqs) && or.wqs[q].recv
				if isRecv == recv {
					or.order = append(or.order, int32(ci))
				}
			}
		}
	}
	return e, nil
}

// twoSided reports whether no rank of plan reads, writes or runs an atomic on another's memory:
// then every transfer completes a receive its target polls for, and a rank's CQs that owe nothing
// need no polling for a peer's sake.
func twoSided(plan *ir.Plan) bool {
	for ri := range plan.Ranks {
		for wi := range plan.Ranks[ri].Queues {
			for k := range plan.Ranks[ri].Queues[wi].Chain {
				switch plan.Ranks[ri].Queues[wi].Chain[k].Opcode {
				case ir.OpcWrite, ir.OpcWriteImm, ir.OpcRead, ir.OpcAtomicFAdd, ir.OpcAtomicCAS:
					return false
				}
			}
		}
	}
	return true
}

// triggered reports whether plan is in triggered form (every rank has triggered work).
func triggered(plan *ir.Plan) bool {
	for ri := range plan.Ranks {
		if plan.Ranks[ri].Trig == nil {
			return false
		}
	}
	return len(plan.Ranks) > 0
}

// maxUnobservedOps bounds the ops of a receiving rank unobservedSends looks through.
const maxUnobservedOps = 1 << 14

// unobservedSends decides, send by send, whether a send may complete as soon as its payload has
// left the local buffer rather than once its message is delivered (the language's meaning of a
// send's completion), in a plan whose transfers are all two-sided: the message still arrives,
// in order with the queue's other messages, and the only rank that can see whether it has is
// the receiver, through the memory its matching recv fills. So it may, when every op of the
// receiving rank that touches that memory is ordered before the recv or after it by the
// receiving rank's own dependencies: none of them is ordered only through a chain that starts
// at the send's completion. And only when the sender also receives from that rank each
// iteration, which keeps it from running more than an iteration ahead of the receiver (a send
// completing at once no longer waits for the receiver).
type unobservedSends struct {
	g     *ir.Graph
	mark  []uint8           // scratch: by op of the receiving rank, reached forwards (1) or backwards (2)
	stack []ir.OpID         // scratch
	hears map[[2]int32]bool // hearsFrom by (rank, peer), computed once
}

func newUnobservedSends(g *ir.Graph) *unobservedSends {
	return &unobservedSends{g: g, hears: map[[2]int32]bool{}}
}

// send reports whether send s may complete before its message is delivered.
func (u *unobservedSends) send(s ir.OpID) bool {
	g := u.g
	op := &g.Ops[s]
	if op.Kind != ir.OpSend || op.Match == ir.None {
		return false
	}
	r := op.Match
	rop := &g.Ops[r]
	first, end := g.RankOps(int(rop.Rank))
	n := int(end - first)
	if n > maxUnobservedOps {
		return false
	}
	if !u.hearsFrom(op.Rank, rop.Rank) {
		// Nothing from the receiver paces the sender: completing its sends at once could let it
		// run iterations ahead, the provider buffering its messages at the receiver.
		return false
	}
	dst := rop.DstSegs()
	if len(dst) == 0 {
		return true // an empty message fills nothing
	}
	if cap(u.mark) < n {
		u.mark = make([]uint8, n)
	}
	mark := u.mark[:n]
	clear(mark)
	// Walk the receiving rank's dependencies from the recv, forwards and backwards.
	for dir, next := range []func(ir.OpID) []int32{g.Succs, g.Preds} {
		bit := uint8(1) << dir
		stack := append(u.stack[:0], r)
		for len(stack) > 0 {
			o := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, x := range next(o) {
				if ir.OpID(x) < first || ir.OpID(x) >= end || mark[ir.OpID(x)-first]&bit != 0 {
					continue // another rank's op, or seen
				}
				mark[ir.OpID(x)-first] |= bit
				stack = append(stack, ir.OpID(x))
			}
		}
		u.stack = stack
	}
	for o := first; o < end; o++ {
		if o == r || mark[o-first] != 0 {
			continue
		}
		if touches(&g.Ops[o], dst) {
			return false
		}
	}
	return true
}

// hearsFrom reports whether rank a receives, in every iteration, a message rank p sends: then
// a cannot finish an iteration before p has begun it.
func (u *unobservedSends) hearsFrom(a, p int32) bool {
	key := [2]int32{a, p}
	if h, ok := u.hears[key]; ok {
		return h
	}
	g, h := u.g, false
	first, end := g.RankOps(int(a))
	for o := first; o < end && !h; o++ {
		op := &g.Ops[o]
		h = op.Kind == ir.OpRecv && op.Match != ir.None && g.Ops[op.Match].Rank == p
	}
	u.hears[key] = h
	return h
}

// touches reports whether op reads or writes any element of segs (slices of one rank).
func touches(op *ir.Op, segs []ir.Slice) bool {
	over := func(a ir.Slice) bool {
		if !a.Valid() {
			return false
		}
		for _, b := range segs {
			if a.Overlaps(b) {
				return true
			}
		}
		return false
	}
	if over(op.Src) || over(op.Dst) {
		return true
	}
	if op.X != nil {
		if over(op.X.Fetch) {
			return true
		}
		for _, m := range op.X.More {
			if over(m) {
				return true
			}
		}
	}
	return false
}

// buildWR lowers one chain entry to a work request for iteration 0.
func (e *offloadEngine) buildWR(r *rankRes, rp *ir.RankPlan, or *offRank, wi, k int, w *ir.WQE) (nic.SendWR, error) {
	g := e.g
	o := &or.wqs[wi]
	wr := nic.SendWR{ID: offID(r.rank, wi, k)}
	if w.Flags&ir.Signalled != 0 {
		wr.Flags |= nic.FlagSignaled
	}
	if w.Flags&ir.Fence != 0 {
		wr.Flags |= nic.FlagFence
	}
	remote := func(s ir.Seg) { wr.RemoteAddr, wr.RKey = r.remote(g, int(w.Peer), s) }
	wr.More = r.more(g, e.plan.More(w))
	switch w.Opcode {
	case ir.OpcSend:
		wr.Op, wr.Local = nic.OpSend, r.local(g, w.Local)
		if e.unobserved != nil && e.unobserved.send(w.Op) {
			wr.Flags |= nic.FlagLocalComplete
		}
		// An inline payload is copied when the WQE is posted, and chains are posted before the
		// iteration runs: only a send with no predecessors can be sure its data is final then
		// (anything writing its slice would have to be ordered before it).
		if w.Flags&ir.Inline != 0 && nic.SGLen(wr.Local, wr.More) <= uint64(r.layout.maxInline) && len(g.Preds(w.Op)) == 0 {
			wr.Flags |= nic.FlagInline
		}
	case ir.OpcWrite, ir.OpcWriteImm:
		wr.Op, wr.Local = nic.OpRDMAWrite, r.local(g, w.Local)
		if w.Opcode == ir.OpcWriteImm {
			wr.Op, wr.Imm = nic.OpRDMAWriteImm, uint32(w.Op)
		}
		wr.RemoteAddr, wr.RKey = r.remoteWrite(g, int(w.Peer), w.Remote)
	case ir.OpcRead:
		wr.Op, wr.Local = nic.OpRDMARead, r.local(g, w.Local)
		remote(w.Remote)
	case ir.OpcAtomicFAdd, ir.OpcAtomicCAS:
		wr.Op, wr.Local = nic.OpAtomicFAdd, r.local(g, w.Local)
		if w.Opcode == ir.OpcAtomicCAS {
			wr.Op = nic.OpAtomicCAS
		}
		op := e.plan.OpOf(w)
		wr.CompareAdd, wr.Swap = uint64(op.A()), uint64(op.B())
		remote(w.Remote)
	case ir.OpcNop:
		wr.Op = nic.OpNop
	case ir.OpcWait:
		if w.Wait.CQ < 0 || int(w.Wait.CQ) >= len(rp.CQs) || or.cqs[w.Wait.CQ].cq == nil {
			return wr, fmt.Errorf("%s: rank %d %s: WAIT names CQ #%d, which the rank does not have", e.plan.OpOf(w).Pos, r.rank, rp.Queues[wi].Name, w.Wait.CQ)
		}
		wr.Op, wr.WaitCQ, wr.Count = nic.OpCQEWait, or.cqs[w.Wait.CQ].cq.Num(), w.Wait.Count
		o.waitAt = append(o.waitAt, int32(k))
		o.waitC = append(o.waitC, w.Wait.Cond)
		o.waitP = append(o.waitP, rp.CQs[w.Wait.CQ].PerIteration)
	case ir.OpcSendEnable, ir.OpcRecvEnable:
		if w.Queue < 0 || int(w.Queue) >= len(rp.Queues) || or.wqs[w.Queue].qp == nil {
			return wr, fmt.Errorf("%s: rank %d %s: ENABLE names work queue #%d, which the rank does not have", e.plan.OpOf(w).Pos, r.rank, rp.Queues[wi].Name, w.Queue)
		}
		wr.Op = nic.OpSendEnable
		if w.Opcode == ir.OpcRecvEnable {
			wr.Op = nic.OpRecvEnable
		}
		wr.TargetQP, wr.Count = or.wqs[w.Queue].qp.Num(), w.UpTo
		o.enAt = append(o.enAt, int32(k))
		o.enE = append(o.enE, w.Enable)
		o.enP = append(o.enP, rp.Queues[w.Queue].PerIteration)
	case ir.OpcHost:
		// run by the CPU, never posted
	default:
		return wr, fmt.Errorf("%s: rank %d %s: unexpected %s entry", e.plan.OpOf(w).Pos, r.rank, rp.Queues[wi].Name, w.Opcode)
	}
	return wr, nil
}

func (e *offloadEngine) relocate(rank int, move func(*nic.SGE)) {
	for ri := range e.ranks {
		if or := &e.ranks[ri]; or.res.rank == rank {
			for wi := range or.wqs {
				moveWRs(or.wqs[wi].swr, or.wqs[wi].rwr, move)
			}
		}
	}
}

func (e *offloadEngine) relocateRemote(peer int, move func(addr *uint64, rkey *uint32)) {
	for ri := range e.ranks {
		or := &e.ranks[ri]
		for wi := range or.wqs {
			o := &or.wqs[wi]
			for k := range o.swr {
				if k < len(o.wq.Chain) && int(o.wq.Chain[k].Peer) == peer {
					moveRemoteWRs(o.swr[k:k+1], move)
				}
			}
		}
	}
}

// prepost has nothing to do: the offload engine posts each iteration's chains in iterate.
func (e *offloadEngine) prepost() error { return nil }

func (e *offloadEngine) rearm(iter int, fresh bool) {
	e.iter = iter
	e.left = 0
	e.short = e.short[:0]
	e.gates.next(fresh)
	for ri := range e.ranks {
		or := &e.ranks[ri]
		or.hostNext, or.gated = 0, false
		if or.trig != nil {
			or.trig.submitted = false
		} else if or.rp.Host >= 0 {
			e.left += len(or.rp.Queues[or.rp.Host].Chain)
		}
		for wi := range or.wqs {
			o := &or.wqs[wi]
			o.next = 0
			if or.trig == nil && !o.host && o.qp != nil {
				e.left += len(o.wq.Chain)
			}
			for j, k := range o.waitAt {
				o.swr[k].Count = o.waitC[j].At(o.waitP[j], uint64(iter))
			}
			for j, k := range o.enAt {
				o.swr[k].Count = o.enE[j].At(o.enP[j], uint64(iter))
			}
		}
		for ci := range or.cqs {
			c := &or.cqs[ci]
			c.target = uint64(iter+1) * c.per
			if or.trig == nil {
				e.left += int(c.owed())
			}
		}
	}
}

// owed is the number of completions c still owes this iteration.
func (c *offCQ) owed() uint64 {
	if c.count >= c.target {
		return 0
	}
	return c.target - c.count
}

// timeline is not recorded: Run refuses Options.Timeline on the offload engine.
func (e *offloadEngine) timeline() []time.Duration { return nil }

func (e *offloadEngine) counters(r *Result) {
	r.WQEsPosted += e.posted
	r.CQEsPolled += e.polled
	r.HostSteps += e.hostSteps
	r.Waits += e.waits
	r.Enables += e.enables
	e.posted, e.polled, e.hostSteps, e.waits, e.enables = 0, 0, 0, 0, 0
}

// postAll posts every NIC chain at iteration start (triggered plans: hands the NIC their
// triggered work); what a full queue refuses is left in e.short for postShort. The requests it
// posts count as the iteration's work (stallWatch.worked): a plan of very many ops takes a while
// to post.
func (e *offloadEngine) postAll(ctx context.Context, iter int) error {
	for ri := range e.ranks {
		or := &e.ranks[ri]
		if or.trig != nil {
			if _, err := e.submitTrig(or); err != nil {
				return err
			}
			continue
		}
		for wi := range or.wqs {
			posted := e.posted
			if _, err := e.postWQ(ri, wi); err != nil {
				return err
			}
			if err := e.watch.worked(iter, int(e.posted-posted)); err != nil {
				return err
			}
		}
	}
	return nil
}

// postShort posts more of the chains a full queue cut short, and of triggered plans whatever
// their NIC refused.
func (e *offloadEngine) postShort() (bool, error) {
	did := false
	short := e.short
	e.short = e.short[len(short):] // postWQ appends the chains still short after it
	for _, s := range short {
		d, err := e.postWQ(int(s[0]), int(s[1]))
		if err != nil {
			return did, err
		}
		did = did || d
	}
	e.short = append(short[:0], e.short...)
	for _, ri := range e.trigged {
		d, err := e.submitTrig(&e.ranks[ri])
		if err != nil {
			return did, err
		}
		did = did || d
	}
	return did, nil
}

// postWQ posts what remains of chain wi of rank index ri, as much as the queue takes; a chain
// left short is added to e.short.
func (e *offloadEngine) postWQ(ri, wi int) (bool, error) {
	or := &e.ranks[ri]
	o := &or.wqs[wi]
	if o.host || o.qp == nil {
		return false, nil
	}
	var n int
	var err error
	if o.recv {
		if o.next >= len(o.rwr) {
			return false, nil
		}
		n, err = o.qp.PostRecv(o.rwr[o.next:])
	} else {
		if o.next >= len(o.swr) {
			return false, nil
		}
		n, err = o.qp.PostSend(o.swr[o.next:])
		for k := o.next; k < o.next+n; k++ {
			switch o.wq.Chain[k].Opcode {
			case ir.OpcWait:
				e.waits++
			case ir.OpcSendEnable, ir.OpcRecvEnable:
				e.enables++
			}
		}
	}
	o.next += n
	e.posted += uint64(n)
	e.left -= n
	if err != nil && !errors.Is(err, nic.ErrQueueFull) {
		return n > 0, e.wqeError(or, wi, o.next, fmt.Errorf("post: %w", err))
	}
	if o.next < len(o.wq.Chain) {
		e.short = append(e.short, [2]int32{int32(ri), int32(wi)})
	}
	return n > 0, nil
}

// wqeError names the op behind chain entry k of work queue wi.
func (e *offloadEngine) wqeError(or *offRank, wi, k int, err error) error {
	wq := &or.rp.Queues[wi]
	if k < 0 || k >= len(wq.Chain) {
		return fmt.Errorf("rank %d work queue %s: %w", or.rp.Rank, wq.Name, err)
	}
	w := &wq.Chain[k]
	return &OpError{Op: e.plan.OpOf(w).Name, Rank: or.rp.Rank, Queue: wq.Name, Pos: e.plan.OpOf(w).Pos, Err: fmt.Errorf("%s entry #%d: %w", w.Opcode, k, err)}
}

// runHost runs the rank's host chain as far as the completions allow: HOST entries whose waits
// hold, and the NOPs that signal them.
func (e *offloadEngine) runHost(or *offRank, iter int) (bool, error) {
	if or.rp.Host < 0 {
		return false, nil
	}
	wi := or.rp.Host
	o := &or.wqs[wi]
	chain := o.wq.Chain
	did := false
	for or.hostNext < len(chain) {
		k := or.hostNext
		w := &chain[k]
		switch w.Opcode {
		case ir.OpcHost:
			if or.trig != nil {
				ok, err := e.hostTrig(or, k, w)
				if !ok || err != nil {
					return did, err
				}
				break
			}
			for _, c := range w.Waits {
				if c.CQ < 0 || int(c.CQ) >= len(or.cqs) {
					return did, e.wqeError(or, wi, k, fmt.Errorf("waits on CQ #%d, which the rank does not have", c.CQ))
				}
				cq := &or.cqs[c.CQ]
				if !c.SatisfiedBy(cq.count, uint32(cq.per), uint64(iter)) {
					return did, nil
				}
			}
			if e.gates.waits(w.Op) && !e.gates.ready(w.Op) {
				or.gated = true // runHosts comes back to it every round
				return did, nil
			}
			or.gated = false
			if err := e.mem.RunHost(w.Op); err != nil {
				return did, err
			}
			e.hostSteps++
		case ir.OpcNop:
			if o.qp == nil {
				return did, e.wqeError(or, wi, k, errors.New("NOP on a host queue without QP"))
			}
			n, err := o.qp.PostSend(o.swr[k : k+1])
			if n == 0 {
				if err != nil && !errors.Is(err, nic.ErrQueueFull) {
					return did, e.wqeError(or, wi, k, fmt.Errorf("post: %w", err))
				}
				return did, nil
			}
			e.posted++
		default:
			return did, e.wqeError(or, wi, k, fmt.Errorf("unexpected %s entry on the host queue", w.Opcode))
		}
		or.hostNext++
		if or.trig == nil {
			e.left--
		}
		did = true
	}
	return did, nil
}

// finished reports whether the iteration is over: nothing left to run, post or poll.
func (e *offloadEngine) finished() bool {
	if e.left > 0 {
		return false
	}
	for _, ri := range e.trigged {
		if !e.rankDone(&e.ranks[ri]) {
			return false
		}
	}
	return true
}

// rankDone reports whether a rank has run its host chain, posted its chains and polled its
// completions for this iteration.
func (e *offloadEngine) rankDone(or *offRank) bool {
	if or.rp.Host >= 0 && or.hostNext < len(or.rp.Queues[or.rp.Host].Chain) {
		return false
	}
	for ci := range or.cqs {
		if or.cqs[ci].count < or.cqs[ci].target {
			return false
		}
	}
	for wi := range or.wqs {
		o := &or.wqs[wi]
		if !o.host && o.qp != nil && o.next < len(o.wq.Chain) {
			return false
		}
	}
	return true
}

// poll polls the CQs that have completions (every CQ without a nic.CQNotifier) and marks the
// ranks they belong to for runHost.
func (e *offloadEngine) poll() (bool, error) {
	did := false
	if e.ready == nil {
		e.round++
		owed := e.owedOnly && e.round%fullEvery != 0
		for ri := range e.ranks {
			cqs := e.ranks[ri].cqs
			for _, ci := range e.ranks[ri].order {
				if owed && e.ranks[ri].trig != nil && (cqs[ci].count >= cqs[ci].target || !e.liveCQ(&e.ranks[ri], int(ci))) {
					continue
				}
				n, err := e.pollCQ(ri, int(ci))
				if err != nil {
					return did, err
				}
				did = did || n > 0
			}
		}
		return did, nil
	}
	steps := e.prog.Progress()
	e.watch.count(steps)
	did = steps > 0
	e.cqBuf = e.ready.ReadyCQs(e.cqBuf[:0])
	for _, c := range e.cqBuf {
		at, ok := e.cqAt[c]
		if !ok {
			continue // another session's
		}
		for { // until a poll finds fewer than it can take: another would only move the fabric
			n, err := e.pollCQ(int(at[0]), int(at[1]))
			if err != nil {
				return did, err
			}
			did = did || n > 0
			if n < len(e.wc) {
				break
			}
		}
	}
	return did, nil
}

// pollCQ polls CQ ci of rank index ri once, counts its completions and checks their statuses;
// it returns how many it found.
func (e *offloadEngine) pollCQ(ri, ci int) (int, error) {
	or := &e.ranks[ri]
	c := &or.cqs[ci]
	if c.cq == nil {
		return 0, nil
	}
	n, err := c.cq.Poll(e.wc)
	if err != nil {
		return 0, fmt.Errorf("rank %d: CQ %s: %w", or.rp.Rank, c.name, err)
	}
	if n == 0 {
		return 0, nil
	}
	owed := c.owed()
	c.count += uint64(n)
	e.polled += uint64(n)
	e.watch.count(n)
	if or.trig == nil {
		e.left -= int(owed - c.owed())
		if !e.marked[ri] {
			e.marked[ri] = true
			e.dirty = append(e.dirty, int32(ri))
		}
	}
	for k := 0; k < n; k++ {
		wc := &e.wc[k]
		if wc.Status == nic.StatusSuccess {
			continue
		}
		_, wi, idx := splitOffID(wc.ID)
		if wc.ID&offloadTag == 0 || wi >= len(or.wqs) {
			return n, fmt.Errorf("rank %d: CQ %s: work request %d failed with status %s", or.rp.Rank, c.name, wc.ID, wc.Status)
		}
		return n, e.wqeError(or, wi, idx, fmt.Errorf("completed with status %s on CQ %s", wc.Status, c.name))
	}
	return n, nil
}

// runHosts runs the host chains of the ranks marked by poll, and of every triggered rank.
func (e *offloadEngine) runHosts(iter int) (bool, error) {
	did := false
	for i := 0; i < len(e.dirty); i++ {
		ri := e.dirty[i]
		e.marked[ri] = false
		d, err := e.runHost(&e.ranks[ri], iter)
		if err != nil {
			e.dirty = e.dirty[:0]
			return did, err
		}
		did = did || d
	}
	e.dirty = e.dirty[:0]
	if e.gates != nil {
		for ri := range e.ranks {
			if or := &e.ranks[ri]; or.gated {
				if e.prog != nil {
					e.prog.Progress() // the writes a wait counts complete nothing this rank polls
				}
				d, err := e.runHost(or, iter)
				if err != nil {
					return did, err
				}
				did = did || d
			}
		}
	}
	for _, ri := range e.trigged {
		d, err := e.runHost(&e.ranks[ri], iter)
		if err != nil {
			return did, err
		}
		did = did || d
	}
	return did, nil
}

func (e *offloadEngine) iterate(ctx context.Context, iter int) (err error) {
	defer func() {
		if err != nil {
			e.cancelTrig()
		}
	}()
	watch := &e.watch
	watch.reset(ctx)
	if err := e.postAll(ctx, iter); err != nil {
		return err
	}
	for ri := range e.ranks { // a host chain may start with steps that wait for nothing
		if e.ranks[ri].trig == nil && !e.marked[ri] {
			e.marked[ri] = true
			e.dirty = append(e.dirty, int32(ri))
		}
	}
	for !e.finished() {
		if err := watch.worked(iter, 1); err != nil {
			return err
		}
		progress, err := e.poll()
		if err != nil {
			return err
		}
		did, err := e.runHosts(iter)
		if err != nil {
			return err
		}
		progress = progress || did
		did, err = e.postShort()
		if err != nil {
			return err
		}
		if progress || did {
			watch.progressed()
			continue
		}
		if stuck, err := watch.quiet(ctx, iter); err != nil {
			return err
		} else if stuck {
			return e.diagnose(iter)
		}
	}
	return nil
}

// diagnose names, per rank, the WAITs whose CQ has not reached its count, the HOST step the CPU
// is waiting to run, and the CQs short of their per-iteration completions with the op expected to
// produce the next one. It adds the NIC's own view of every stuck queue head where the NIC has one
// (nic.Staller: a software NIC, or a driver that holds requests).
func (e *offloadEngine) diagnose(iter int) error {
	h := &HangError{Iteration: iter}
	e.diagnoseTrig(h, iter)
	for ri := range e.ranks {
		or := &e.ranks[ri]
		rp := or.rp
		rank := rp.Rank
		if rp.Host >= 0 && or.hostNext < len(rp.Queues[rp.Host].Chain) {
			w := &rp.Queues[rp.Host].Chain[or.hostNext]
			if or.gated {
				h.Stuck = append(h.Stuck, Stuck{Rank: rank, Queue: rp.Queues[rp.Host].Name, What: e.gates.describe(w.Op),
					Producer: "the writes or atomic adds that count for it", At: &WQELoc{Rank: rank, Queue: rp.Host, Index: or.hostNext}})
			}
			for _, c := range w.Waits {
				cq := &or.cqs[c.CQ]
				if !c.SatisfiedBy(cq.count, uint32(cq.per), uint64(iter)) {
					need := c.Target(uint32(cq.per), uint64(iter))
					h.Stuck = append(h.Stuck, Stuck{Rank: rank, Queue: rp.Queues[rp.Host].Name, CQ: cq.name, Reached: cq.count, Awaited: need,
						Producer: e.opRef(c.Op), What: fmt.Sprintf("HOST %s (%s)", e.plan.OpOf(w).Name, e.plan.OpOf(w).Pos),
						At: &WQELoc{Rank: rank, Queue: rp.Host, Index: or.hostNext}, ProducerAt: awaitedLoc(e.plan, rank, c)})
				}
			}
		}
		for ci := range or.cqs {
			cq := &or.cqs[ci]
			if cq.count >= cq.target {
				continue
			}
			// The chain entry that would produce the next completion of this CQ.
			wq := &rp.Queues[cq.wq]
			seen := cq.count - uint64(iter)*cq.per
			what, producer := "completions", ""
			var at *WQELoc
			var n uint64
			for k := range wq.Chain {
				w := &wq.Chain[k]
				if w.Opcode == ir.OpcHost || (wq.Kind != ir.RecvQueue && !w.Signalled()) {
					continue
				}
				if n == seen {
					producer = fmt.Sprintf("%s %s (%s)", w.Opcode, e.plan.OpOf(w).Name, e.plan.OpOf(w).Pos)
					at = &WQELoc{Rank: rank, Queue: cq.wq, Index: k}
					if wq.Kind == ir.RecvQueue && w.Op >= 0 && int(w.Op) < len(e.g.Ops) {
						// The receive is the stuck entry; its completion comes from the peer's
						// matching send. (ProducerAt stays nil: a drawing of the hang marks the
						// WAITs and HOST steps with what they await, not every short CQ.)
						what = producer
						producer, _ = recvProducer(e.g, w.Op)
					}
					break
				}
				n++
			}
			// The WAIT in any queue of the rank that blocks on this CQ, if one does.
			h.Stuck = append(h.Stuck, Stuck{Rank: rank, Queue: wq.Name, CQ: cq.name, Reached: cq.count, Awaited: cq.target,
				Producer: producer, What: what, At: at})
		}
	}
	res := make([]*rankRes, len(e.ranks))
	for i := range e.ranks {
		res[i] = e.ranks[i].res
	}
	if sts := providerStalls(e.prog, res); len(sts) > 0 {
		var det []string
		for _, st := range sts {
			msg := st.String()
			if w, or := e.wqeOf(st.ID); w != nil {
				msg += fmt.Sprintf(" = %s %s (%s)", w.Opcode, e.plan.OpOf(w).Name, e.plan.OpOf(w).Pos)
				if w.Opcode == ir.OpcWait {
					cq := &or.cqs[w.Wait.CQ]
					_, wi, idx := splitOffID(st.ID)
					h.Stuck = append([]Stuck{{Rank: or.rp.Rank, Queue: or.rp.Queues[wi].Name, CQ: cq.name,
						Reached: st.Reached, Awaited: st.Awaited, Producer: e.opRef(w.Wait.Op), What: "WAIT before " + e.plan.OpOf(w).Name,
						At:         &WQELoc{Rank: or.rp.Rank, Queue: wi, Index: idx},
						ProducerAt: awaitedLoc(e.plan, or.rp.Rank, w.Wait)}}, h.Stuck...)
				}
			}
			det = append(det, msg)
		}
		h.Detail = joinMax(det, 6)
	}
	return h
}

func (e *offloadEngine) opRef(id ir.OpID) string {
	if id < 0 || int(id) >= len(e.g.Ops) {
		return ""
	}
	return opRef(e.g, id)
}

// wqeOf maps a work request ID back to its chain entry.
func (e *offloadEngine) wqeOf(id uint64) (*ir.WQE, *offRank) {
	if id&offloadTag == 0 {
		return nil, nil
	}
	rank, wi, k := splitOffID(id)
	for ri := range e.ranks {
		or := &e.ranks[ri]
		if or.rp.Rank == rank && wi < len(or.rp.Queues) && k < len(or.rp.Queues[wi].Chain) {
			return &or.rp.Queues[wi].Chain[k], or
		}
	}
	return nil, nil
}

// WQEOfID maps the ID of a work request the offload engine posted back to its chain entry in
// plan, for trace checkers and diagnostics.
func WQEOfID(plan *ir.Plan, id uint64) (*ir.WQE, bool) {
	if id&offloadTag == 0 {
		return nil, false
	}
	rank, wi, k := splitOffID(id)
	if rank >= len(plan.Ranks) || wi >= len(plan.Ranks[rank].Queues) || k >= len(plan.Ranks[rank].Queues[wi].Chain) {
		return nil, false
	}
	return &plan.Ranks[rank].Queues[wi].Chain[k], true
}
