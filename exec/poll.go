package exec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/ir"
)

// pollEngine walks the dependency graph on the CPU, as the plan's Deps give it. Every local op
// has a counter of unfinished explicit predecessors; successors come from the plan's flat CSR
// array; each queue side keeps its work
// requests prebuilt in queue order, so posting a run of ready ones is one PostSend of a
// sub-slice. The hot loop polls every CQ, resolves successors, runs host ops whose inputs are
// complete, and posts newly ready work requests in batches, without allocating or locking.
// On QPs that take triggers (TriggerQP), the coming requests of a send queue whose last missing
// predecessor is a completion are armed on its CQ and the driver posts them inside the Poll that
// returns it; a CQ that can hold completions (HoldCQ) learns how many of its coming ones only
// release armed requests, so a chain runs in the driver and the engine catches up in batches.
// Re-arming copies the initial counters back in place.
type pollEngine struct {
	g     *ir.Graph
	deps  *ir.Deps
	mem   *Memory
	res   []*rankRes
	prog  nic.Progresser
	hang  time.Duration
	watch stallWatch // with its wait set (nic.Blocker) when every CQ can block

	pending, initPending []int32 // by op: unfinished predecessors
	succStart, succList  []int32 // the plan's successors (Deps), in CSR form
	ready                []bool  // by op: predecessors done, waiting for its turn on the queue
	opSide               []int32 // by op: side index, -1 for host ops
	opSlot               []int32 // by op: position on its side
	roots                []int32 // local ops without predecessors, except receives
	recvRoots            []int32 // receives without predecessors: posted by prepost
	sides                []pollSide
	dirty                []int32 // sides that may post
	inDirty              []bool
	stack                []int32            // host ops ready to run
	gates                *gates             // what the wait ops wait for (nil: the plan has none)
	parked               []int32            // wait ops ready but for their gate
	drive                []nic.HostProgress // by rank: its context, when it moves data only in calls
	drivenAt             []uint64           // by rank: the driveParked call that progressed it
	drives               uint64             // driveParked calls
	cqs                  []pollCQ
	wc                   []nic.WC
	localOps             int
	left                 int     // local ops not complete this iteration
	flushed              error   // the first flushed completion of the iteration
	waiting              int     // sides with awaited > 0
	armedSides           []int32 // sides with requests armed on their trigger
	trigSides, holdCQs   []int32 // sides whose QP takes triggers; CQs that can hold completions
	scan                 int     // CQ scan offset (Options.Seed)

	notify  nic.CQNotifier   // nil: poll the CQs that owe completions every round
	cqIndex map[nic.CQ]int32 // with notify: index into cqs
	cqBuf   []nic.CQ
	toPoll  []int32 // with notify: the CQs this round polls, as listed

	posted, polled, hostSteps, triggered uint64

	times   []time.Duration // by op: completion time in this iteration (Options.Timeline), else nil
	t0, now int64           // with times: the iteration's start and the time of what completes now (Now)
}

// pollSide is one side (send or receive) of one graph queue on one rank.
type pollSide struct {
	qp          nic.QP
	recv        bool
	rank        int
	queue       ir.QueueID
	cq          int32 // index into pollEngine.cqs
	ops         []int32
	swr         []nic.SendWR
	rwr         []nic.RecvWR
	next, done  int32 // posted up to next, completed up to done (slots)
	depth       int32
	signalledAt []bool        // by slot: produces a completion
	sigBefore   []int32       // by slot (and one past the end): signalled slots before it
	sigFrom     []int32       // by slot: the first signalled slot at or after it (len(ops) if none)
	awaited     int32         // completions due from slots done..next-1
	trig        nic.TriggerQP // nil when the QP cannot post by itself (or triggers are off)
	armedTo     int32         // slots next..armedTo-1 are armed on trig
}

type pollCQ struct {
	cq   nic.CQ
	side int32
	name string
	rank int
	spin nic.SpinCQ // nil when the driver cannot spin by itself
	hold nic.HoldCQ // nil when Poll cannot hold completions
}

// newPoll sets up the polling engine on a plan compiled for a target without cross-channel
// (generic): the plan's Deps give every op's predecessors and successors, its chains give each
// queue side's ops in queue order, which of them are signalled and which sends go inline.
func newPoll(plan *ir.Plan, mem *Memory, res []*rankRes, p nic.Provider, opts Options) (*pollEngine, error) {
	g, deps := plan.Graph, plan.Deps
	if deps == nil || len(deps.PredStart) != len(g.Ops)+1 || len(deps.SuccStart) != len(g.Ops)+1 {
		return nil, fmt.Errorf("the poll engine needs a plan compiled for a target without cross-channel; target %s has none of the dependencies it walks (compile for generic)", plan.Target.Name)
	}
	n := len(g.Ops)
	e := &pollEngine{g: g, deps: deps, mem: mem, res: res, hang: opts.HangTimeout,
		pending: make([]int32, n), initPending: make([]int32, n), ready: make([]bool, n),
		opSide: make([]int32, n), opSlot: make([]int32, n), wc: make([]nic.WC, 64),
		succStart: deps.SuccStart, succList: deps.SuccList}
	e.prog, _ = p.(nic.Progresser)
	if e.notify, _ = p.(nic.CQNotifier); e.notify != nil {
		e.cqIndex = map[nic.CQ]int32{}
	}
	if opts.Timeline {
		e.times = make([]time.Duration, n)
	}
	for i := range e.opSide {
		e.opSide[i] = -1
	}
	for _, r := range res {
		first, end := g.RankOps(r.rank)
		for id := first; id < end; id++ {
			e.initPending[id] = deps.NumPreds(id)
			if e.initPending[id] == 0 {
				e.roots = append(e.roots, int32(id))
			}
			e.localOps++
		}
		rp := &plan.Ranks[r.rank]
		for qi, spec := range r.layout.qps {
			for _, recv := range []bool{false, true} {
				side := pollSide{qp: r.qps[qi], recv: recv, rank: r.rank, queue: spec.graphQueue, depth: int32(spec.sendDepth)}
				if t, ok := side.qp.(nic.TriggerQP); ok && !recv && p.Caps().Triggers && !opts.NoTriggers {
					side.trig = t
				}
				wq, cq := &rp.Queues[spec.sendWQ], spec.sendCQ
				if recv {
					wq, cq, side.depth = &rp.Queues[spec.recvWQ], spec.recvCQ, int32(spec.recvDepth)
				}
				si := int32(len(e.sides))
				side.cq = int32(len(e.cqs))
				pc := pollCQ{cq: r.cqs[cq], side: si, name: r.layout.cqs[cq].name, rank: r.rank}
				pc.spin, _ = pc.cq.(nic.SpinCQ)
				pc.hold, _ = pc.cq.(nic.HoldCQ)
				if st, ok := pc.cq.(nic.StampCQ); ok && opts.Timeline {
					st.Stamp(true)
				}
				if e.cqIndex != nil {
					e.cqIndex[pc.cq] = int32(len(e.cqs))
				}
				e.cqs = append(e.cqs, pc)
				for k := range wq.Chain {
					w := &wq.Chain[k]
					id := w.Op
					if !w.Opcode.IsData() || id < 0 || int(id) >= n || int(g.Ops[id].Rank) != r.rank {
						name := fmt.Sprintf("op #%d", id)
						if id >= 0 && int(id) < n {
							name = plan.OpOf(w).Name
						}
						return nil, fmt.Errorf("rank %d work queue %s: entry #%d is %s %s, not an op of the rank the poll engine can post (compile for generic)", r.rank, wq.Name, k, w.Opcode, name)
					}
					side.ops = append(side.ops, int32(id))
					e.opSide[id], e.opSlot[id] = si, int32(k)
					if recv {
						side.rwr = append(side.rwr, nic.RecvWR{ID: uint64(id), Local: r.local(g, w.Local), More: r.more(g, plan.More(w))})
						side.signalledAt = append(side.signalledAt, true)
						continue
					}
					sig := w.Signalled()
					wr := r.dataWR(g, id, w.Flags&ir.Inline != 0)
					if sig {
						wr.Flags |= nic.FlagSignaled
					}
					side.swr = append(side.swr, wr)
					side.signalledAt = append(side.signalledAt, sig)
				}
				side.countSignals()
				e.sides = append(e.sides, side)
			}
		}
	}
	roots := e.roots[:0:0]
	for _, id := range e.roots {
		if si := e.opSide[id]; si >= 0 && e.sides[si].recv {
			e.recvRoots = append(e.recvRoots, id)
		} else {
			roots = append(roots, id)
		}
	}
	e.roots = roots
	for si := range e.sides {
		if e.sides[si].trig != nil {
			e.trigSides = append(e.trigSides, int32(si))
		}
	}
	for ci := range e.cqs {
		if e.cqs[ci].hold != nil && len(e.trigSides) > 0 {
			e.holdCQs = append(e.holdCQs, int32(ci))
		}
	}
	var err error
	if e.gates, err = newGates(g, mem, res, p); err != nil {
		return nil, err
	}
	if e.prog == nil && e.gates.any() {
		// What a wait counts lands on the waiting rank's endpoints, whose CQs may owe nothing and
		// go unpolled for many rounds: such a rank's context is progressed while a wait is parked.
		for _, r := range res {
			if h, ok := r.dev.(nic.HostProgress); ok {
				if e.drive == nil {
					e.drive, e.drivenAt = make([]nic.HostProgress, g.Ranks), make([]uint64, g.Ranks)
				}
				e.drive[r.rank] = h
			}
		}
	}
	e.watch = stallWatch{prog: e.prog, limit: e.hang}
	// A wait op's gate (a landing counter, a memory word) changes without a completion on any CQ,
	// so a plan that has one keeps polling rather than sleeping on the CQs' descriptors.
	if b, ok := p.(nic.Blocker); ok && e.prog == nil && !e.gates.any() {
		cqs := make([]nic.CQ, len(e.cqs))
		for i := range e.cqs {
			cqs[i] = e.cqs[i].cq
		}
		e.watch.wait = b.WaitSet(cqs)
	}
	e.inDirty = make([]bool, len(e.sides))
	e.dirty = make([]int32, 0, len(e.sides))
	e.stack = make([]int32, 0, n)
	if len(e.cqs) > 0 {
		e.scan = int(opts.Seed % uint64(len(e.cqs)))
	}
	return e, nil
}

func (e *pollEngine) relocate(rank int, move func(*nic.SGE)) {
	for si := range e.sides {
		if s := &e.sides[si]; s.rank == rank {
			moveWRs(s.swr, s.rwr, move)
		}
	}
}

func (e *pollEngine) relocateRemote(peer int, move func(addr *uint64, rkey *uint32)) {
	for si := range e.sides {
		if s := &e.sides[si]; s.queue != ir.None && e.g.Queues[s.queue].PeerRank == peer {
			moveRemoteWRs(s.swr, move)
		}
	}
}

func (e *pollEngine) rearm(_ int, fresh bool) {
	copy(e.pending, e.initPending)
	e.parked = e.parked[:0]
	e.gates.next(fresh)
	clear(e.ready)
	e.disarm()
	for i := range e.sides {
		e.sides[i].next, e.sides[i].done, e.sides[i].awaited, e.sides[i].armedTo = 0, 0, 0, 0
	}
	e.left = e.localOps
	e.waiting = 0
	e.flushed = nil
	for i := range e.times {
		e.times[i] = -1
	}
}

// prepost posts the receives that wait for nothing, before the iteration starts: Run calls it
// after the memory reset and before the barrier that releases the peers, so their first messages
// find a receive (no receiver-not-ready NAK and retry timer), as persistent operations pre-post.
// The previous iteration completed every op on every rank, so no stale message can consume them.
func (e *pollEngine) prepost() error {
	for _, id := range e.recvRoots {
		e.markReady(id)
	}
	_, err := e.flush()
	return err
}

func (e *pollEngine) counters(r *Result) {
	r.WQEsPosted += e.posted
	r.CQEsPolled += e.polled
	r.HostSteps += e.hostSteps
	r.Triggered += e.triggered
	r.Blocks += e.watch.waits
	e.posted, e.polled, e.hostSteps, e.triggered, e.watch.waits = 0, 0, 0, 0, 0
}

func (e *pollEngine) timeline() []time.Duration { return e.times }

// markReady handles op id whose predecessors are all complete.
func (e *pollEngine) markReady(id int32) {
	si := e.opSide[id]
	if si < 0 {
		e.stack = append(e.stack, id)
		return
	}
	e.ready[id] = true
	e.touch(si)
}

func (e *pollEngine) touch(si int32) {
	if !e.inDirty[si] {
		e.inDirty[si] = true
		e.dirty = append(e.dirty, si)
	}
}

// complete records op id's completion and releases its successors.
func (e *pollEngine) complete(id int32) {
	e.left--
	if e.times != nil {
		e.times[id] = time.Duration(e.now - e.t0)
	}
	for _, s := range e.succList[e.succStart[id]:e.succStart[id+1]] {
		if e.pending[s]--; e.pending[s] == 0 {
			e.markReady(s)
		}
	}
}

// runHost runs ready host ops (and those they make ready).
func (e *pollEngine) runHost() error {
	for len(e.stack) > 0 {
		id := e.stack[len(e.stack)-1]
		e.stack = e.stack[:len(e.stack)-1]
		if e.gates.waits(ir.OpID(id)) && !e.gates.ready(ir.OpID(id)) {
			e.parked = append(e.parked, id) // polled again by unpark
			continue
		}
		if err := e.mem.RunHost(ir.OpID(id)); err != nil {
			return err
		}
		if e.times != nil {
			e.now = nic.Now()
		}
		e.hostSteps++
		e.complete(id)
	}
	return nil
}

// flush posts, per dirty side, the run of ready work requests at its head that fits its depth.
func (e *pollEngine) flush() (bool, error) {
	did := false
	for len(e.dirty) > 0 {
		si := e.dirty[len(e.dirty)-1]
		e.dirty = e.dirty[:len(e.dirty)-1]
		e.inDirty[si] = false
		s := &e.sides[si]
		lo, hi, n := s.next, s.next, int32(len(s.ops))
		for hi < n && hi-s.done < s.depth && e.ready[s.ops[hi]] {
			hi++
		}
		if hi == lo {
			continue
		}
		var k int
		var err error
		if s.recv {
			k, err = s.qp.PostRecv(s.rwr[lo:hi])
		} else {
			k, err = s.qp.PostSend(s.swr[lo:hi])
		}
		e.advanceSide(s, k)
		did = did || k > 0
		if err != nil {
			if errors.Is(err, nic.ErrQueueFull) {
				continue // retried when a completion frees a slot
			}
			return did, opErrorf(e.g, ir.OpID(s.ops[lo+int32(k)]), "post: %w", err)
		}
	}
	return did, nil
}

// advanceSide records that the k requests at s.next were posted.
func (e *pollEngine) advanceSide(s *pollSide, k int) {
	for _, sig := range s.signalledAt[s.next : s.next+int32(k)] {
		if sig {
			if s.awaited++; s.awaited == 1 {
				e.waiting++
			}
		}
	}
	s.next += int32(k)
	e.posted += uint64(k)
}

// arm extends, on each send queue whose QP takes triggers (TriggerQP), the run of armed requests
// from its head: a request is armed when the only predecessor it still waits for is a posted
// work request whose completion its CQ will return (or it waits for nothing, behind armed ones),
// so the driver posts it inside the Poll that returns that completion. Then it tells each CQ
// that can hold completions (HoldCQ) how many of its coming ones only release armed requests.
func (e *pollEngine) arm() {
	for _, si := range e.trigSides {
		s := &e.sides[si]
		s.armedTo = max(s.armedTo, s.next)
		from := s.armedTo
		for n := int32(len(s.ops)); s.armedTo < n && s.armedTo-s.next < nic.MaxArmed && s.armedTo-s.done < s.depth; s.armedTo++ {
			j := s.armedTo
			id := s.ops[j]
			c, after := &e.cqs[s.cq], 0
			if !e.ready[id] {
				var ok bool
				if c, after, ok = e.armable(id); !ok {
					break
				}
			} else if j == s.next {
				break // ready at the head: flush posts it
			}
			if s.trig.ArmSend(c.cq, after, &s.swr[j]) != nil {
				break
			}
		}
		if from == s.next && s.armedTo > from {
			e.armedSides = append(e.armedSides, int32(si))
		}
	}
	for _, ci := range e.holdCQs {
		c := &e.cqs[ci]
		c.hold.Hold(e.covered(&e.sides[c.side]))
	}
}

// armable says whether op id, not ready, waits for exactly one posted work request, and which
// CQ will return its completion after how many completions.
func (e *pollEngine) armable(id int32) (*pollCQ, int, bool) {
	if e.pending[id] != 1 {
		return nil, 0, false
	}
	p := int32(-1)
	for _, q := range e.deps.Preds(ir.OpID(id)) {
		if !e.opDone(q) {
			p = q
			break
		}
	}
	if p < 0 || e.opSide[p] < 0 {
		return nil, 0, false // a host op
	}
	ps := &e.sides[e.opSide[p]]
	// p completes with the first signalled slot at or after it, which must be posted.
	k := ps.sigFrom[e.opSlot[p]]
	if k >= ps.next {
		return nil, 0, false
	}
	return &e.cqs[ps.cq], int(ps.sigBefore[k+1] - ps.sigBefore[ps.done]), true
}

// countSignals fills sigBefore and sigFrom from signalledAt.
func (s *pollSide) countSignals() {
	n := len(s.signalledAt)
	s.sigBefore, s.sigFrom = make([]int32, n+1), make([]int32, n)
	for k, sig := range s.signalledAt {
		s.sigBefore[k+1] = s.sigBefore[k]
		if sig {
			s.sigBefore[k+1]++
		}
	}
	next := int32(n)
	for k := n - 1; k >= 0; k-- {
		if s.signalledAt[k] {
			next = int32(k)
		}
		s.sigFrom[k] = next
	}
}

// covered counts the coming completions of side s that only release armed or posted requests:
// nothing for the engine to do when they come, so the CQ may hold them.
func (e *pollEngine) covered(s *pollSide) int {
	n := 0
	for k := s.done; k < s.next; k++ {
		id := s.ops[k]
		succ := e.succList[e.succStart[id]:e.succStart[id+1]]
		if len(succ) == 0 {
			return n // its completion may end the iteration
		}
		for _, x := range succ {
			if xs := e.opSide[x]; xs < 0 || e.sides[xs].trig == nil || e.opSlot[x] >= e.sides[xs].armedTo {
				return n
			}
		}
		if s.signalledAt[k] {
			n++
		}
	}
	return n
}

// fired collects what the triggers posted during a Poll: it counts as posted before that Poll's
// completions are handled.
func (e *pollEngine) fired() error {
	w := e.armedSides[:0]
	var failed error
	for _, si := range e.armedSides {
		s := &e.sides[si]
		armed, k, err := s.trig.Fired()
		e.advanceSide(s, k)
		e.triggered += uint64(k)
		s.armedTo = s.next + int32(armed)
		if armed > 0 {
			w = append(w, si)
		} else {
			e.touch(si) // requests that were armed while ready are the engine's again
		}
		if err != nil && !errors.Is(err, nic.ErrQueueFull) && failed == nil {
			failed = opErrorf(e.g, ir.OpID(s.ops[s.next]), "post: %w", err)
		}
	}
	e.armedSides = w
	return failed
}

// disarm drops every armed request.
func (e *pollEngine) disarm() {
	for _, si := range e.armedSides {
		s := &e.sides[si]
		s.trig.Disarm()
		s.armedTo = s.next
	}
	e.armedSides = e.armedSides[:0]
	for _, ci := range e.holdCQs {
		e.cqs[ci].hold.Hold(0)
	}
}

// spinPolls is how many polls a SpinCQ makes in one call when the engine waits for it alone.
const spinPolls = 64

// idlePollEvery is how often, in rounds of the polling loop, a CQ that owes no completion is
// polled anyway.
const idlePollEvery = 64

// advance runs the host ops that are ready and posts the work requests that are. It reports
// whether it did either.
func (e *pollEngine) advance() (bool, error) {
	e.unpark()
	ran := len(e.stack) > 0
	if err := e.runHost(); err != nil {
		return ran, err
	}
	did, err := e.flush()
	return ran || did, err
}

// unpark moves the parked waits whose gates now allow them to the host ops ready to run.
func (e *pollEngine) unpark() {
	if len(e.parked) == 0 {
		return
	}
	if e.prog != nil && len(e.stack) == 0 {
		e.prog.Progress() // the writes a wait counts complete nothing this rank polls
	}
	kept := e.parked[:0]
	for _, id := range e.parked {
		if e.gates.ready(ir.OpID(id)) {
			e.stack = append(e.stack, id)
		} else {
			kept = append(kept, id)
		}
	}
	e.parked = kept
}

// driveParked progresses, once in a round, the context of each rank with a parked wait on a NIC
// that moves data only inside the host's calls (nic.HostProgress: libfabric with manual
// progress). The writes and atomic adds a wait counts complete nothing on the waiting rank, so no
// CQ of it owes a completion for them, and a round polls only the CQs that owe one: without this
// their data would move only in the full rounds, one in idlePollEvery, or when another request
// of the rank happened to complete (about ten times slower on counted_ring over sockets).
func (e *pollEngine) driveParked() error {
	if e.drive == nil || len(e.parked) == 0 {
		return nil
	}
	e.drives++
	for _, id := range e.parked {
		r := e.g.Ops[id].Rank
		if h := e.drive[r]; h != nil && e.drivenAt[r] != e.drives {
			e.drivenAt[r] = e.drives
			if err := h.DriveProgress(); err != nil {
				return fmt.Errorf("rank %d: progress while %s waits: %w", r, e.g.Ops[id].Name, err)
			}
		}
	}
	return nil
}

// handle processes one completion.
func (e *pollEngine) handle(c *pollCQ, wc *nic.WC) error {
	if wc.ID >= uint64(len(e.opSide)) {
		return fmt.Errorf("rank %d: CQ %s returned a completion for unknown work request %d", c.rank, c.name, wc.ID)
	}
	id := int32(wc.ID)
	if wc.Status != nic.StatusSuccess {
		err := opErrorf(e.g, ir.OpID(id), "completed with status %s on CQ %s", wc.Status, c.name)
		if wc.Status == nic.StatusFlushError {
			// A consequence of an error elsewhere: iterate looks for the cause first.
			if e.flushed == nil {
				e.flushed = err
			}
			return nil
		}
		return err
	}
	si := e.opSide[id]
	if si != c.side {
		return fmt.Errorf("rank %d: CQ %s returned a completion for %s, which is not on its queue", c.rank, c.name, e.g.OpString(ir.OpID(id)))
	}
	s := &e.sides[si]
	slot := e.opSlot[id]
	if slot < s.done || slot >= s.next {
		return opErrorf(e.g, ir.OpID(id), "completion on CQ %s out of queue order (slot %d, completed up to %d, posted up to %d)", c.name, slot, s.done, s.next)
	}
	if e.times != nil {
		// A driver's stamp is a calibrated reading, a few microseconds off at worst; the poll
		// that found the completion began after the iteration did, and so does its date.
		if e.now = wc.Time; e.now == 0 {
			e.now = nic.Now()
		} else if e.now < e.t0 {
			e.now = e.t0
		}
	}
	// A signalled completion implies every earlier request of the queue completed.
	if s.awaited--; s.awaited == 0 {
		e.waiting--
	}
	for s.done <= slot {
		e.complete(s.ops[s.done])
		s.done++
	}
	if s.next < int32(len(s.ops)) && e.ready[s.ops[s.next]] {
		e.touch(si)
	}
	return nil
}

func (e *pollEngine) iterate(ctx context.Context, iter int) error {
	if e.times != nil {
		e.t0 = nic.Now()
	}
	for _, id := range e.roots {
		e.markReady(id)
	}
	if _, err := e.advance(); err != nil {
		return err
	}
	e.arm()
	watch := &e.watch
	watch.reset(ctx)
	ncq := len(e.cqs)
	full := true     // poll every CQ this round, not only those that owe a completion
	stalled := false // the watch gave up; a full round without progress confirms it
	flushRound := false
	for round := 1; e.left > 0; round++ {
		if err := watch.worked(iter, 1); err != nil {
			return err
		}
		progress := false
		listed := e.notify != nil && !full
		if listed {
			// The NIC says which CQs have completions (an error one included): poll only those,
			// so a round costs what happened in it, not the number of CQs.
			steps := e.prog.Progress()
			watch.count(steps)
			progress = steps > 0
			e.listReady()
		}
		for j := 0; listed && j < len(e.toPoll) || !listed && j < ncq; j++ {
			var c *pollCQ
			if listed {
				c = &e.cqs[e.toPoll[j]]
			} else if c = &e.cqs[(j+e.scan)%ncq]; e.sides[c.side].awaited == 0 && !full {
				// A CQ that owes no completion can still hold the error completion of an
				// unsignalled request: it is polled only on full rounds.
				continue
			}
			var n int
			var err error
			if c.spin != nil && !full && e.waiting == 1 {
				// One CQ is all this round waits for: let the driver spin on it.
				n, err = c.spin.PollSpin(e.wc, spinPolls)
			} else {
				n, err = c.cq.Poll(e.wc)
			}
			if err != nil {
				return fmt.Errorf("rank %d: CQ %s: %w", c.rank, c.name, err)
			}
			if n == 0 {
				continue
			}
			if listed && n == len(e.wc) {
				e.toPoll = append(e.toPoll, e.toPoll[j]) // it may hold more: poll it again
			}
			progress = true
			e.polled += uint64(n)
			watch.count(n)
			if len(e.armedSides) > 0 {
				if err := e.fired(); err != nil {
					return err
				}
			}
			for k := 0; k < n; k++ {
				if err := e.handle(c, &e.wc[k]); err != nil {
					return err
				}
			}
			// Post what these completions made ready before polling on: on a dependency
			// chain, the next transfer starts one poll earlier.
			if _, err := e.advance(); err != nil {
				return err
			}
		}
		if err := e.driveParked(); err != nil {
			return err
		}
		if did, err := e.advance(); err != nil {
			return err
		} else if did {
			progress = true
		}
		if progress {
			e.arm()
		}
		if e.flushed != nil {
			// A queue was flushed: report the error that caused it if a round over every CQ
			// finds one, else the flush.
			if flushRound {
				return e.flushed
			}
			flushRound, full = true, true
			continue
		}
		wasFull := full
		full = e.notify == nil && round%idlePollEvery == 0
		if progress {
			stalled = false
			watch.progressed()
			continue
		}
		// The watch decides when nothing more can happen (a software NIC with nothing runnable,
		// or a NIC silent for the hang timeout); the engine diagnoses once a full round has found
		// nothing either.
		stuck, err := watch.quiet(ctx, iter)
		if err != nil {
			return err
		}
		if stuck || stalled {
			if wasFull {
				return e.diagnose(iter)
			}
			stalled, full = true, true
		}
	}
	return nil
}

// listReady sets toPoll to the CQs of this engine that the NIC lists as having completions.
func (e *pollEngine) listReady() {
	e.cqBuf = e.notify.ReadyCQs(e.cqBuf[:0])
	e.toPoll = e.toPoll[:0]
	for _, c := range e.cqBuf {
		if ci, ok := e.cqIndex[c]; ok {
			e.toPoll = append(e.toPoll, ci)
		}
	}
}

// diagnose describes why the iteration cannot finish: posted work requests whose completion
// never came, and the first unposted op of each queue side with the predecessors it waits for.
func (e *pollEngine) diagnose(iter int) error {
	h := &HangError{Iteration: iter}
	g := e.g
	type qpKey struct {
		rank int
		qpn  uint32 // numbered per context on some providers (ofi)
	}
	qpSide := map[qpKey]int32{}
	for si := range e.sides {
		s := &e.sides[si]
		if !s.recv {
			qpSide[qpKey{s.rank, s.qp.Num()}] = int32(si)
		}
		n := int32(len(s.ops))
		if s.done >= n {
			continue
		}
		q := &g.Queues[s.queue]
		cqName := e.cqs[s.cq].name
		if s.done < s.next {
			// The completion that would move this side on: the first signalled slot at or after
			// done (the last posted one if none is signalled: its error completion would come).
			// That slot's op is the one stuck: the unsignalled ones before it complete with it.
			// The counts are the CQ's completions in this iteration, one per signalled slot.
			k := min(s.sigFrom[s.done], s.next-1)
			id := ir.OpID(s.ops[k])
			reached, awaited := s.sigBefore[s.done], s.sigBefore[k+1]
			if awaited == reached {
				awaited++ // no signalled slot posted: the error completion of slot k
			}
			what := "post of " + g.Ops[id].Kind.String()
			producer, producerOp := opRef(g, id), id
			if s.recv {
				// A receive completes when its peer's matching send lands.
				what = "posted recv"
				producer, producerOp = recvProducer(g, id)
			}
			h.Stuck = append(h.Stuck, Stuck{Rank: s.rank, Queue: q.Name, CQ: cqName, Reached: uint64(reached), Awaited: uint64(awaited),
				Producer: producer, What: what + " " + g.Ops[id].Name,
				stuckOp: id, producerOp: producerOp, byOp: true})
			continue
		}
		id := ir.OpID(s.ops[s.next])
		var blockers []string
		first := ir.OpID(ir.None)
		for _, p := range e.deps.Preds(id) {
			if !e.opDone(p) {
				blockers = append(blockers, opRef(g, ir.OpID(p)))
				if first == ir.None {
					first = ir.OpID(p)
				}
			}
		}
		if len(blockers) > 0 {
			h.Stuck = append(h.Stuck, Stuck{Rank: s.rank, Queue: q.Name, CQ: cqName, Reached: uint64(s.done), Awaited: uint64(s.done + 1),
				Producer: fmt.Sprintf("%s, which waits for %s", opRef(g, id), joinMax(blockers, 3)), What: "unposted " + g.Ops[id].Kind.String() + " " + g.Ops[id].Name,
				stuckOp: id, producerOp: first, byOp: true})
		}
	}
	for _, id := range e.parked {
		h.Stuck = append(h.Stuck, Stuck{Rank: int(g.Ops[id].Rank), Queue: "host", What: e.gates.describe(ir.OpID(id)),
			Producer: "the writes or atomic adds that count for it", stuckOp: ir.OpID(id), producerOp: ir.OpID(id), byOp: true})
	}
	var det []string
	for _, st := range providerStalls(e.prog, e.res) {
		msg := st.String()
		if si, ok := qpSide[qpKey{st.Rank, st.QPN}]; ok && !st.Recv && st.ID < uint64(len(g.Ops)) {
			msg = fmt.Sprintf("%s (op %s, queue %s)", msg, opRef(g, ir.OpID(st.ID)), g.Queues[e.sides[si].queue].Name)
		}
		det = append(det, msg)
	}
	h.Detail = joinMax(det, 6)
	return h
}

// recvProducer names what receive id waits for: the send (or notify write) that matches it on
// the peer, and the rank it waits for, worded as Coll.blame words a peer in a hung World. The op
// is ir.None when nothing matches the receive.
func recvProducer(g *ir.Graph, id ir.OpID) (string, ir.OpID) {
	op := &g.Ops[id]
	if m := op.Match; m >= 0 && int(m) < len(g.Ops) {
		return fmt.Sprintf("%s: rank %d waits for rank %d", opRef(g, m), op.Rank, g.Ops[m].Rank), m
	}
	peer := op.Rank
	if op.Queue >= 0 && int(op.Queue) < len(g.Queues) {
		peer = int32(g.Queues[op.Queue].PeerRank)
	}
	return fmt.Sprintf("a send on rank %d, which no op matches: rank %d waits for rank %d", peer, op.Rank, peer), ir.None
}

// opDone reports whether local op p completed in this iteration.
func (e *pollEngine) opDone(p int32) bool {
	si := e.opSide[p]
	if si < 0 {
		return e.pending[p] == 0 && !e.inStack(p) && !slices.Contains(e.parked, p)
	}
	return e.opSlot[p] < e.sides[si].done
}

func (e *pollEngine) inStack(p int32) bool {
	for _, x := range e.stack {
		if x == p {
			return true
		}
	}
	return false
}

// opRef names an op with its position: "tx[2] on rank 1 (ring.dag:12:3)".
func opRef(g *ir.Graph, id ir.OpID) string {
	return fmt.Sprintf("%s (%s)", g.OpString(id), g.Ops[id].Pos)
}

func joinMax(s []string, n int) string {
	out := ""
	for i, x := range s {
		if i == n {
			return out + fmt.Sprintf("; and %d more", len(s)-n)
		}
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}
