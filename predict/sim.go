package predict

import (
	"context"
	"fmt"
	"math"

	"github.com/coredag/coredag/internal/minheap"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/wait"
)

// Result is the prediction of one iteration of a plan.
type Result struct {
	// Time is the predicted time of one iteration in nanoseconds: from the start, when the
	// engine posts the iteration's work, to the last completion or host step of any rank.
	Time float64
	// Last names the op whose completion ended the iteration ("ag[2] on rank 3").
	Last string
	// Events is how many events the simulation handled.
	Events int
	// CPUBusy and NICBusy are the largest total busy time of one rank's CPU and NIC (with
	// shared workers, of all ranks together), in nanoseconds: how close to bound by it the plan is.
	CPUBusy, NICBusy float64
}

// Options are the settings of a simulation beyond the machine's figures.
type Options struct {
	// Scale multiplies the bytes of every data transfer, reduce and copy (0 means 1): a plan
	// compiled with its size param at 1 and simulated with Scale n predicts the plan at n,
	// exactly when every slice of the plan is n times a constant (Linear checks it).
	Scale float64
}

// simPoll is how many events a simulation handles between two looks at its context: a
// millisecond or so.
const simPoll = 1 << 14

// Simulate predicts one iteration of a compiled plan under the parameters. The plan is not
// changed. An error says where the model found work that could never run (which a checked and
// compiled plan should never have), or is the cause of ctx's cancellation (context.Cause):
// Simulate looks at ctx as it starts and every simPoll events.
func Simulate(ctx context.Context, p *ir.Plan, par Params, opt Options) (Result, error) {
	if err := par.Validate(); err != nil {
		return Result{}, err
	}
	if p == nil || p.Graph == nil {
		return Result{}, fmt.Errorf("predict: no plan")
	}
	if opt.Scale < 0 || math.IsNaN(opt.Scale) || math.IsInf(opt.Scale, 0) {
		return Result{}, fmt.Errorf("predict: scale %v: must be a finite number >= 0", opt.Scale)
	}
	if err := stop.Cause(ctx); err != nil {
		return Result{}, err
	}
	scale := opt.Scale
	if scale == 0 {
		scale = 1
	}
	if miss := MissShare(p.Graph, par, scale); miss > 0 {
		par.B += miss * par.Mem
		par.Reduce += miss * par.Mem
		par.Copy += miss * par.Mem
	}
	par.B *= scale
	par.Reduce *= scale
	par.Copy *= scale
	s := newSim(p, par)
	s.start()
	poll := stop.Every(ctx, simPoll)
	for s.h.Len() > 0 {
		e := s.h.Pop()
		s.now = e.t
		s.events++
		s.handle(e)
		if err := poll.Step(); err != nil {
			return Result{}, err
		}
	}
	if err := s.finished(); err != nil {
		return Result{}, err
	}
	res := Result{Time: s.last, Events: s.events}
	if s.lastOp >= 0 {
		res.Last = p.Graph.OpString(s.lastOp)
	}
	for r := range s.ranks {
		res.CPUBusy = max(res.CPUBusy, s.ranks[r].cpuBusy)
		res.NICBusy = max(res.NICBusy, s.ranks[r].nicBusy)
	}
	if par.Workers > 0 {
		res.CPUBusy, res.NICBusy = 0, 0
		for r := range s.ranks {
			res.CPUBusy += s.ranks[r].cpuBusy
			res.NICBusy += s.ranks[r].nicBusy
		}
	}
	return res, nil
}

type evKind uint8

const (
	evQueue    evKind = iota // run the head of work queue q of rank r
	evPosted                 // work queue q of rank r has its first a entries posted (chain order)
	evArrive                 // a message arrived at receive work queue q of rank r
	evComplete               // entry a of work queue q of rank r completed
	evHostDone               // the host step at entry a of work queue q of rank r finished
	evPolled                 // polling engine: the CPU handled the completion of entry a of queue q
	evRaise                  // triggered: counter q of rank r is raised by a
	evSet                    // triggered: counter q of rank r is set to a
	evLand                   // the write or atomic of Graph.Lands[a] landed at its wait's rank
	evPoll                   // polled CQs: the engine's thread polls CQ a (global index)
)

type event struct {
	t    float64
	seq  uint64
	kind evKind
	r    int32
	q    int32
	a    int64
}

// eventLess orders the event queue by time; among equal times, by kind, queue and entry, then
// by sequence (FIFO). The order among equal times is the model's choice: this one does not
// depend on which rank scheduled its event first, so ranks a plan makes alike see their
// simultaneous events in the same order (the fold of a symmetric plan relies on it).
func eventLess(x, y *event) bool {
	switch {
	case x.t != y.t:
		return x.t < y.t
	case x.kind != y.kind:
		return x.kind < y.kind
	case x.q != y.q:
		return x.q < y.q
	case x.a != y.a:
		return x.a < y.a
	}
	return x.seq < y.seq
}

// waiter is something held until a CQ reaches a count: a queue's WAIT at its head, or the host
// chain's next step.
type waiter struct {
	count uint32
	queue int32 // the work queue to run again, or -1 for the host chain
}

type queueState struct {
	posted    []int32 // triggered targets: chain indices in the order they were posted
	postedN   int     // other targets: the chain's first postedN entries are posted
	head      int     // entries consumed (index into posted, or into the chain)
	prod      uint32  // posted WQEs consumed (the producer index of the head)
	enabled   uint32  // managed queues: entries [0, enabled) may run
	lastStart float64 // when the queue's last message started (the gap g)
	pending   bool    // an evQueue is scheduled
	// receive side: messages that arrived and receives the queue made available, matched in order
	msgs, avail []int64
	from        []int64 // polled CQs: the sender of each message (packRef)
	msgHead     int
	availHead   int
	// polling engine: next chain entry to post, and the last entry whose completion was handled
	postNext int
	covered  int
}

type rankState struct {
	cpu, nic         float64 // free at (Workers == 0)
	cpuBusy, nicBusy float64
	qs               []queueState
	cq               []uint32
	cqWait           [][]waiter
	hostHead         int  // offload: next entry of the host chain
	hostBusy         bool // offload: a host step is running
	cnt              []uint64
	cntWork          [][]int32 // triggered: per counter, its work in threshold (then submission) order
	cntNext          []int
}

type sim struct {
	p      *ir.Plan
	g      *ir.Graph
	par    Params
	now    float64
	h      *minheap.Heap[event] // by eventLess
	seq    uint64
	events int
	ranks  []rankState
	pool   []float64
	last   float64
	lastOp ir.OpID
	// polling engine
	pending []int32 // by op: explicit predecessors not yet complete
	ready   []bool  // by op: every predecessor complete
	wake    []waiter
	// polled CQs (Params.CQ): of each rank's thread, or of all ranks with shared workers
	ncq   []int
	allCQ int
	// rounds: one shared worker polls every CQ in turn (Params.CQ > 0, Workers 1): the work a
	// CQ's poll would find waits in visit for it, host steps in hostQ for the round's end
	rounds   bool
	cqBase   []int
	visit    [][]func()
	hostQ    []func()
	pendingN int
	other    int // events in the heap other than evPoll
	// wait ops (Graph.Lands): the edges from each landing op, the landings each wait still
	// needs, and the start of a wait's host step held until they are in
	landsFrom map[ir.OpID][]int32
	landLeft  map[ir.OpID]int
	held      map[ir.OpID]func(t float64)
	// triggered targets: by write, the remote-write counters (rank, counter) of its target's
	// regions it lands in, raised when it lands
	landCnt map[ir.OpID][][2]int32
}

func newSim(p *ir.Plan, par Params) *sim {
	s := &sim{p: p, g: p.Graph, par: par, ranks: make([]rankState, len(p.Ranks)), lastOp: ir.None,
		h: minheap.New(eventLess)}
	if lands := p.Graph.Lands; len(lands) > 0 {
		s.landsFrom, s.landLeft, s.held = map[ir.OpID][]int32{}, map[ir.OpID]int{}, map[ir.OpID]func(float64){}
		for i, e := range lands {
			s.landsFrom[e.From] = append(s.landsFrom[e.From], int32(i))
			s.landLeft[e.To]++
		}
	}
	if p.Target.Trigger != nil {
		s.landCnt = landCounters(p)
	}
	if par.Workers > 0 {
		s.pool = make([]float64, par.Workers)
	}
	s.ncq = make([]int, len(p.Ranks))
	s.cqBase = make([]int, len(p.Ranks))
	for r := range p.Ranks {
		s.ncq[r] = len(p.Ranks[r].CQs)
		s.cqBase[r] = s.allCQ
		s.allCQ += s.ncq[r]
	}
	if par.CQ > 0 && par.Workers == 1 && s.allCQ > 0 {
		s.rounds = true
		s.visit = make([][]func(), s.allCQ)
	}
	for r := range p.Ranks {
		rp := &p.Ranks[r]
		rs := &s.ranks[r]
		rs.qs = make([]queueState, len(rp.Queues))
		for i := range rs.qs {
			rs.qs[i].covered = -1
		}
		rs.cq = make([]uint32, len(rp.CQs))
		rs.cqWait = make([][]waiter, len(rp.CQs))
		if t := rp.Trig; t != nil {
			rs.cnt = make([]uint64, len(t.Counters))
			rs.cntWork = make([][]int32, len(t.Counters))
			rs.cntNext = make([]int, len(t.Counters))
			for i := range t.Work {
				if c := t.Work[i].Counter; c >= 0 {
					rs.cntWork[c] = append(rs.cntWork[c], int32(i))
				}
			}
			for c := range rs.cntWork {
				w := rs.cntWork[c]
				// stable insertion sort by threshold: the work is almost always in order already
				for i := 1; i < len(w); i++ {
					for j := i; j > 0 && t.Work[w[j]].Threshold < t.Work[w[j-1]].Threshold; j-- {
						w[j], w[j-1] = w[j-1], w[j]
					}
				}
			}
		}
	}
	return s
}

// lat is a message's latency from rank r to rank to: the wire's L, and half a round of CQ polls
// at each end (Params.CQ).
func (s *sim) lat(r, to int) float64 {
	if s.par.CQ == 0 || s.rounds {
		return s.par.L
	}
	if s.pool != nil {
		return s.par.L + s.par.CQ*float64(s.allCQ)
	}
	n := s.ncq[r]
	if to >= 0 && to < len(s.ncq) {
		n += s.ncq[to]
	} else {
		n *= 2
	}
	return s.par.L + s.par.CQ*float64(n)/2
}

// ack is what the acknowledgement of a message from rank from to rank to adds to the sender's
// completion beyond the wire: with polled CQs (Params.CQ), the receiver's poll that takes the
// message sends it, and the sender reads it at its next poll, half a round of its CQs later;
// 0 otherwise (the wire's return is in L, as the model has always taken it).
func (s *sim) ack(from, to int) float64 {
	if s.par.CQ == 0 {
		return 0
	}
	if s.pool != nil {
		return s.par.CQ * float64(s.allCQ) / 2
	}
	if to >= 0 && to < len(s.ncq) {
		return s.par.CQ * float64(s.ncq[to]) / 2
	}
	return s.par.CQ * float64(s.ncq[from]) / 2
}

func (s *sim) push(t float64, k evKind, r, q int, a int64) {
	if k != evPoll {
		s.other++
	}
	s.seq++
	s.h.Push(event{t: t, seq: s.seq, kind: k, r: int32(r), q: int32(q), a: a})
}

// use occupies rank r's CPU (or NIC) for d from t on, or the earliest free shared worker, and
// returns when the work ends.
func (s *sim) use(r int, nic bool, t, d float64) float64 {
	rs := &s.ranks[r]
	if nic {
		rs.nicBusy += d
	} else {
		rs.cpuBusy += d
	}
	if s.pool != nil {
		i := 0
		for j := range s.pool {
			if s.pool[j] < s.pool[i] {
				i = j
			}
		}
		st := max(t, s.pool[i])
		s.pool[i] = st + d
		return st + d
	}
	x := &rs.cpu
	if nic {
		x = &rs.nic
	}
	st := max(t, *x)
	*x = st + d
	return st + d
}

func (s *sim) mark(t float64, op ir.OpID) {
	if t > s.last || s.lastOp == ir.None {
		s.last, s.lastOp = max(t, s.last), op
	}
}

func (s *sim) triggered() bool { return s.p.Target.Trigger != nil }
func (s *sim) polling() bool   { return s.p.Deps != nil && !s.triggered() }

// start posts what the engine posts when the iteration starts.
func (s *sim) start() {
	if s.rounds {
		s.push(0, evPoll, 0, 0, 0)
	}
	switch {
	case s.triggered():
		for r := range s.p.Ranks {
			t := s.p.Ranks[r].Trig
			if t == nil {
				continue
			}
			for i := range t.Work {
				if t.Work[i].Counter == ir.Untriggered {
					end := s.use(r, false, 0, s.par.Post)
					s.fire(r, i, end)
				}
			}
			for c := range t.Counters {
				s.raise(r, c, 0, 0)
			}
		}
	case s.polling():
		s.pending = make([]int32, len(s.g.Ops))
		s.ready = make([]bool, len(s.g.Ops))
		for o := range s.g.Ops {
			s.pending[o] = s.p.Deps.NumPreds(ir.OpID(o))
		}
		for r := range s.p.Ranks {
			first, end := s.g.RankOps(r)
			for o := first; o < end; o++ {
				if s.pending[o] != 0 {
					continue
				}
				if s.g.Ops[o].Kind == ir.OpRecv { // pre-posted before the iteration, outside the time
					s.ready[o] = true
					l := s.p.Loc[o]
					q := &s.ranks[r].qs[l.Queue]
					if q.postNext == l.Index && q.postedN == l.Index {
						q.postNext++
						q.postedN++
					}
				}
			}
			for qi := range s.p.Ranks[r].Queues {
				s.kick(r, qi, 0)
			}
			for o := first; o < end; o++ {
				if s.pending[o] == 0 {
					s.opReady(o, 0)
				}
			}
		}
	default:
		for r := range s.p.Ranks {
			rp := &s.p.Ranks[r]
			t := 0.0
			for qi := range rp.Queues {
				q := &rp.Queues[qi]
				if q.Kind == ir.HostSignalQueue {
					continue
				}
				if len(q.Chain) > 0 {
					t = s.use(r, false, t, s.par.Post*float64(len(q.Chain)))
					s.push(t, evPosted, r, qi, int64(len(q.Chain)))
				}
			}
			if rp.Host >= 0 {
				s.runHost(r)
			}
		}
	}
}

func (s *sim) handle(e event) {
	r, q := int(e.r), int(e.q)
	if e.kind != evPoll {
		s.other--
	}
	switch e.kind {
	case evPoll:
		s.poll(int(e.a))
	case evQueue:
		if e.a == 0 && s.gate(r, q, func() {
			s.ranks[r].qs[q].pending = false
			s.runQueue(r, q)
		}) {
			return // it runs when the engine polls the queue's CQ (still pending till then)
		}
		s.ranks[r].qs[q].pending = false
		s.runQueue(r, q)
	case evPosted:
		qs := &s.ranks[r].qs[q]
		qs.postedN = max(qs.postedN, int(e.a))
		s.kick(r, q, s.now)
	case evArrive:
		qs := &s.ranks[r].qs[q]
		qs.msgs = append(qs.msgs, int64(math.Float64bits(s.now)))
		if s.rounds {
			qs.from = append(qs.from, e.a)
			s.gate(r, q, func() { s.match(r, q) })
			return
		}
		s.match(r, q)
	case evComplete:
		s.complete(r, q, int(e.a))
	case evHostDone:
		s.hostDone(r, q, int(e.a))
	case evPolled:
		s.polled(r, q, int(e.a))
	case evRaise:
		s.raise(r, q, uint64(e.a), s.now)
	case evSet:
		rs := &s.ranks[r]
		rs.cnt[q] = uint64(e.a)
		s.raise(r, q, 0, s.now)
	case evLand:
		to := s.g.Lands[e.a].To
		if s.landLeft[to]--; s.landLeft[to] == 0 {
			if start := s.held[to]; start != nil {
				delete(s.held, to)
				start(s.now)
			}
		}
	}
}

// landed: op o's data (a write's, an atomic's) is in place at its target at t; the waits that
// need it hear of it then, and on a triggered target the remote-write counters of the regions
// it lands in rise.
func (s *sim) landed(o ir.OpID, t float64) {
	for _, i := range s.landsFrom[o] {
		s.push(t, evLand, int(s.g.Ops[s.g.Lands[i].To].Rank), 0, int64(i))
	}
	for _, rc := range s.landCnt[o] {
		s.push(t, evRaise, int(rc[0]), int(rc[1]), 1)
	}
}

// landCounters maps each write of triggered plan p to the remote-write counters (ir.CntLand) of
// its target rank whose regions it lands in; nil when the plan has none.
func landCounters(p *ir.Plan) map[ir.OpID][][2]int32 {
	g := p.Graph
	var out map[ir.OpID][][2]int32
	var writesTo [][]ir.OpID // by rank: the writes that land in its memory
	for r := range p.Ranks {
		t := p.Ranks[r].Trig
		if t == nil {
			continue
		}
		for c := range t.Counters {
			cn := &t.Counters[c]
			if cn.Kind != ir.CntLand {
				continue
			}
			if writesTo == nil {
				out, writesTo = map[ir.OpID][][2]int32{}, make([][]ir.OpID, len(p.Ranks))
				for i := range g.Ops {
					if op := &g.Ops[i]; op.Kind == ir.OpWrite {
						peer := g.Queues[op.Queue].PeerRank
						writesTo[peer] = append(writesTo[peer], ir.OpID(i))
					}
				}
			}
			reg := cn.Region
			for _, o := range writesTo[r] {
				d := g.Ops[o].Dst
				if d.Buf == reg.Buf && d.Off >= reg.Off && d.Off+d.Len <= reg.Off+reg.Len {
					out[o] = append(out[o], [2]int32{int32(r), int32(c)})
				}
			}
		}
	}
	return out
}

// hostStep starts the host step of op o at t by start, or, for a wait whose landings are not all
// in yet, when the last of them lands.
func (s *sim) hostStep(o ir.OpID, t float64, start func(t float64)) {
	if s.rounds {
		// the engine runs host steps after a round's polls
		run := start
		start = func(float64) {
			s.pendingN++
			s.hostQ = append(s.hostQ, func() { run(s.now) })
		}
	}
	if s.landLeft[o] > 0 {
		s.held[o] = start
		return
	}
	start(t)
}

// kick schedules a run of queue q's head at t unless one is scheduled.
func (s *sim) kick(r, q int, t float64) {
	qs := &s.ranks[r].qs[q]
	if qs.pending || s.p.Ranks[r].Queues[q].Kind == ir.HostSignalQueue {
		return
	}
	qs.pending = true
	s.push(max(t, s.now), evQueue, r, q, 0)
}

// headEntry returns the chain index of queue q's head, if it is posted.
func (s *sim) headEntry(r, q int) (int, bool) {
	qs := &s.ranks[r].qs[q]
	if s.triggered() {
		if qs.head < len(qs.posted) {
			return int(qs.posted[qs.head]), true
		}
		return 0, false
	}
	if qs.head < qs.postedN {
		return qs.head, true
	}
	return 0, false
}

// runQueue runs the head entry of work queue q on rank r's NIC, if it can run now.
func (s *sim) runQueue(r, q int) {
	rp := &s.p.Ranks[r]
	wq := &rp.Queues[q]
	qs := &s.ranks[r].qs[q]
	idx, ok := s.headEntry(r, q)
	if !ok {
		return
	}
	if wq.Managed && !wait.Enabled(uint64(qs.prod), qs.enabled) {
		return
	}
	w := &wq.Chain[idx]
	now := s.now
	next := now // when the queue may run its next entry
	switch w.Opcode {
	case ir.OpcWait:
		if !s.reached(r, int(w.Wait.CQ), w.Wait.Count) {
			s.ranks[r].cqWait[w.Wait.CQ] = append(s.ranks[r].cqWait[w.Wait.CQ], waiter{count: w.Wait.Count, queue: int32(q)})
			return
		}
		next = s.use(r, true, now, s.par.Ctrl)
		s.done(r, q, idx, next)
	case ir.OpcSendEnable, ir.OpcRecvEnable:
		next = s.use(r, true, now, s.par.Ctrl)
		tq := int(w.Enable.Queue)
		ts := &s.ranks[r].qs[tq]
		ts.enabled = wait.Raise(ts.enabled, w.Enable.UpTo)
		s.kick(r, tq, next)
		s.done(r, q, idx, next)
	case ir.OpcNop:
		next = s.use(r, true, now, s.par.Ctrl)
		s.done(r, q, idx, next)
	case ir.OpcRecv:
		qs.avail = append(qs.avail, int64(idx))
		s.match(r, q)
	case ir.OpcHost:
		// never on a NIC queue
	default:
		bytes := float64(s.dataBytes(w))
		d := s.par.O + bytes*s.par.B
		if w.Opcode == ir.OpcWriteImm {
			d += s.par.Imm
		}
		next = s.use(r, true, max(now, qs.lastStart+s.par.G), d)
		qs.lastStart = next - d
		land := next + s.lat(r, int(w.Peer))
		s.landed(w.Op, land)
		switch w.Opcode {
		case ir.OpcSend, ir.OpcWriteImm:
			peer := int(w.Peer)
			op := &s.g.Ops[w.Op]
			pq := s.g.Queues[op.Queue].Peer
			pwq := s.p.Ranks[peer].RecvWQ[int(pq)-int(s.g.Rank[peer].FirstQueue)]
			if s.rounds {
				// the receiver's poll that takes the message acknowledges it (match)
				s.push(land, evArrive, peer, pwq, packRef(r, q, idx))
			} else {
				s.push(land, evArrive, peer, pwq, 0)
				s.done(r, q, idx, land+s.ack(peer, r))
			}
		case ir.OpcWrite:
			s.done(r, q, idx, land+s.ack(int(w.Peer), r))
		default: // read, atomics: the reply comes back
			s.done(r, q, idx, land+s.lat(int(w.Peer), r))
		}
	}
	qs.head++
	if w.Opcode.Posted() {
		qs.prod++
	}
	qs.pending = true
	s.push(next, evQueue, r, q, 1) // the queue goes on with its next entry (not gated)
}

// dataBytes is what a data WQE moves.
func (s *sim) dataBytes(w *ir.WQE) int64 {
	switch w.Opcode {
	case ir.OpcAtomicFAdd, ir.OpcAtomicCAS:
		return 8
	}
	n := s.g.Bytes(w.Local.Slice())
	for _, m := range s.p.More(w) {
		n += s.g.Bytes(m)
	}
	if !w.Local.Valid() && w.Remote.Valid() {
		n = s.g.Bytes(w.Remote.Slice())
	}
	return n
}

// done schedules the completion of entry idx of queue q at t (every entry: the engines learn of
// unsignalled ones through later ones, which complete after them).
func (s *sim) done(r, q, idx int, t float64) {
	s.push(t, evComplete, r, q, int64(idx))
}

// match pairs the messages that arrived at receive queue q with its available receives, in order.
func (s *sim) match(r, q int) {
	qs := &s.ranks[r].qs[q]
	for qs.msgHead < len(qs.msgs) && qs.availHead < len(qs.avail) {
		arr := math.Float64frombits(uint64(qs.msgs[qs.msgHead]))
		idx := int(qs.avail[qs.availHead])
		from := int64(-1)
		if s.rounds {
			from = qs.from[qs.msgHead]
		}
		qs.msgHead++
		qs.availHead++
		end := s.use(r, true, max(arr, s.now), s.par.O)
		s.done(r, q, idx, end)
		if from >= 0 {
			// the acknowledgement: the sender learns of its completion at its next poll of the
			// sending queue's CQ
			sr, sq, si := unpackRef(from)
			if !s.gate(sr, sq, func() { s.done(sr, sq, si, s.now) }) {
				s.done(sr, sq, si, end)
			}
		}
	}
}

func (s *sim) reached(r, cq int, count uint32) bool {
	return wait.Satisfied(uint64(s.ranks[r].cq[cq]), count)
}

// complete handles the completion of entry idx of work queue q.
func (s *sim) complete(r, q, idx int) {
	rp := &s.p.Ranks[r]
	wq := &rp.Queues[q]
	w := &wq.Chain[idx]
	s.mark(s.now, w.Op)
	if !w.Completes() {
		return
	}
	rs := &s.ranks[r]
	polled := s.use(r, false, s.now, s.par.Poll)
	s.mark(polled, w.Op) // the engine learns of it when it polls it
	if cq := wq.CQ; cq >= 0 {
		rs.cq[cq]++
		ws := rs.cqWait[cq]
		keep := ws[:0]
		wake := s.wake[:0]
		for _, x := range ws {
			if wait.Satisfied(uint64(rs.cq[cq]), x.count) {
				wake = append(wake, x)
			} else {
				keep = append(keep, x)
			}
		}
		rs.cqWait[cq] = keep
		s.wake = wake
		host := false
		for _, x := range wake {
			if x.queue < 0 {
				host = true
			} else {
				s.kick(r, int(x.queue), s.now)
			}
		}
		if host {
			s.runHost(r)
		}
	}
	switch {
	case s.triggered():
		if t := rp.Trig; t != nil && q < len(t.SendCnt) && t.SendCnt[q] >= 0 {
			s.raise(r, t.SendCnt[q], 1, s.now)
		}
	case s.polling():
		s.push(polled, evPolled, r, q, int64(idx))
	}
}

// hostSteps is the CPU time of host op o.
func (s *sim) hostCost(o ir.OpID) float64 {
	op := &s.g.Ops[o]
	d := s.par.Host
	switch op.Kind {
	case ir.OpReduce:
		d += float64(s.g.SegsBytes(op.DstSegs())) * s.par.Reduce
	case ir.OpCopy:
		d += float64(s.g.SegsBytes(op.DstSegs())) * s.par.Copy
	}
	return d
}

// runHost runs the offload engine's host chain of rank r from its head, as far as it can.
func (s *sim) runHost(r int) {
	rp := &s.p.Ranks[r]
	rs := &s.ranks[r]
	if rp.Host < 0 || rs.hostBusy || s.triggered() || s.polling() {
		return
	}
	chain := rp.Queues[rp.Host].Chain
	for rs.hostHead < len(chain) {
		w := &chain[rs.hostHead]
		if w.Opcode != ir.OpcHost {
			// the NOP that tells the NIC the step before it is done: posted by the CPU
			t := s.use(r, false, s.now, s.par.Post)
			t = s.use(r, true, t, s.par.Ctrl)
			s.done(r, rp.Host, rs.hostHead, t)
			rs.hostHead++
			continue
		}
		for _, c := range w.Waits {
			if !s.reached(r, int(c.CQ), c.Count) {
				rs.cqWait[c.CQ] = append(rs.cqWait[c.CQ], waiter{count: c.Count, queue: -1})
				return
			}
		}
		rs.hostBusy = true
		o, idx := w.Op, rs.hostHead
		s.hostStep(o, s.now, func(t float64) {
			end := s.use(r, false, t, s.hostCost(o))
			s.push(end, evHostDone, r, rp.Host, int64(idx))
		})
		return
	}
}

// hostDone ends the host step at entry idx of queue q.
func (s *sim) hostDone(r, q, idx int) {
	rp := &s.p.Ranks[r]
	w := &rp.Queues[q].Chain[idx]
	s.mark(s.now, w.Op)
	switch {
	case s.triggered():
		if t := rp.Trig; t != nil && t.HostCnt >= 0 {
			s.raise(r, t.HostCnt, 1, s.now)
		}
	case s.polling():
		s.opDone(w.Op)
	default:
		s.ranks[r].hostBusy = false
		s.ranks[r].hostHead = idx + 1
		s.runHost(r)
	}
}

// raise adds d to counter c of rank r and fires the work whose threshold it reached.
func (s *sim) raise(r, c int, d uint64, t float64) {
	rs := &s.ranks[r]
	tr := s.p.Ranks[r].Trig
	rs.cnt[c] += d
	work := rs.cntWork[c]
	for rs.cntNext[c] < len(work) && tr.Work[work[rs.cntNext[c]]].Threshold <= rs.cnt[c] {
		i := int(work[rs.cntNext[c]])
		rs.cntNext[c]++
		s.fire(r, i, s.use(r, true, t, s.par.Ctrl))
	}
}

// fire carries out triggered entry i of rank r at t.
func (s *sim) fire(r, i int, t float64) {
	rp := &s.p.Ranks[r]
	e := &rp.Trig.Work[i]
	switch e.Kind {
	case ir.TrigOp:
		w := &rp.Queues[e.Loc.Queue].Chain[e.Loc.Index]
		if w.Opcode == ir.OpcHost {
			loc := e.Loc
			s.hostStep(w.Op, t, func(t float64) {
				end := s.use(r, false, t, s.hostCost(w.Op))
				s.push(end, evHostDone, r, loc.Queue, int64(loc.Index))
			})
			return
		}
		qs := &s.ranks[r].qs[e.Loc.Queue]
		qs.posted = append(qs.posted, int32(e.Loc.Index))
		s.kick(r, e.Loc.Queue, t)
	case ir.TrigAdd:
		s.push(t, evRaise, r, e.Target, int64(e.Value))
	case ir.TrigSet:
		s.push(t, evSet, r, e.Target, int64(e.Value))
	}
}

// opReady handles op o of the polling engine whose predecessors all completed at s.now (or t).
func (s *sim) opReady(o ir.OpID, t float64) {
	op := &s.g.Ops[o]
	r := int(op.Rank)
	if !op.Kind.OnQueue() {
		s.hostStep(o, t, func(t float64) {
			end := s.use(r, false, t, s.hostCost(o))
			l := s.p.Loc[o]
			s.push(end, evHostDone, r, l.Queue, int64(l.Index))
		})
		return
	}
	s.ready[o] = true
	l := s.p.Loc[o]
	qs := &s.ranks[r].qs[l.Queue]
	chain := s.p.Ranks[r].Queues[l.Queue].Chain
	k := qs.postNext
	for k < len(chain) && s.ready[chain[k].Op] {
		k++
	}
	if k > qs.postNext {
		end := s.use(r, false, t, s.par.Post*float64(k-qs.postNext))
		qs.postNext = k
		s.push(end, evPosted, r, l.Queue, int64(k))
	}
}

// polled: the polling engine handled the completion of entry idx of queue q, which covers the
// queue's earlier unsignalled entries too.
func (s *sim) polled(r, q, idx int) {
	qs := &s.ranks[r].qs[q]
	chain := s.p.Ranks[r].Queues[q].Chain
	for k := qs.covered + 1; k <= idx; k++ {
		s.opDone(chain[k].Op)
	}
	qs.covered = max(qs.covered, idx)
}

// opDone: op o completed (polling engine); its successors may be ready.
func (s *sim) opDone(o ir.OpID) {
	for _, x := range s.p.Deps.Succs(o) {
		s.pending[x]--
		if s.pending[x] == 0 {
			s.opReady(ir.OpID(x), s.now)
		}
	}
}

// finished reports work the simulation never ran.
func (s *sim) finished() error {
	for r := range s.p.Ranks {
		rp := &s.p.Ranks[r]
		for qi := range rp.Queues {
			wq := &rp.Queues[qi]
			qs := &s.ranks[r].qs[qi]
			if wq.Kind == ir.HostSignalQueue {
				if !s.triggered() && !s.polling() && s.ranks[r].hostHead < len(wq.Chain) {
					return s.stall(r, wq, s.ranks[r].hostHead)
				}
				continue
			}
			n := len(wq.Chain)
			if s.triggered() && len(qs.posted) < n {
				return s.stall(r, wq, -1)
			}
			if qs.head < n {
				idx, _ := s.headEntry(r, qi)
				if !s.triggered() {
					idx = qs.head
				}
				return s.stall(r, wq, idx)
			}
			if wq.Kind == ir.RecvQueue && qs.availHead < len(qs.avail) {
				return s.stall(r, wq, int(qs.avail[qs.availHead]))
			}
		}
	}
	return nil
}

func (s *sim) stall(r int, wq *ir.WorkQueue, idx int) error {
	if idx < 0 || idx >= len(wq.Chain) {
		return fmt.Errorf("predict: the model stalled: rank %d queue %s has work that was never posted", r, wq.Name)
	}
	return fmt.Errorf("predict: the model stalled: rank %d queue %s entry %d (%s, op %s) never ran", r, wq.Name, idx, wq.Chain[idx].Opcode, s.g.OpString(wq.Chain[idx].Op))
}

// MissShare is the share of the bytes a plan moves that miss the caches under par (Params.Mem):
// 1 - CacheBytes / footprint, where the footprint is the bytes of every buffer (times scale) of
// one rank, or of every rank when they share workers.
func MissShare(g *ir.Graph, par Params, scale float64) float64 {
	if par.Mem == 0 {
		return 0
	}
	var fp float64
	for i := range g.Buffers {
		fp += float64(g.Buffers[i].Bytes())
	}
	fp *= scale
	if par.Workers > 0 {
		fp *= float64(g.Ranks)
	}
	if fp <= par.CacheBytes || fp == 0 {
		return 0
	}
	return 1 - par.CacheBytes/fp
}

// Linear reports whether graph b is graph a with every slice length multiplied by k: the same
// ops on the same buffers, each slice k times as long and at k times the offset. Then a plan
// compiled from a simulates b with Options.Scale k (times a's own scale). When it is not, the
// reason names the first op that differs.
func Linear(a, b *ir.Graph, k int64) (bool, string) {
	if len(a.Ops) != len(b.Ops) || a.Ranks != b.Ranks {
		return false, fmt.Sprintf("the plan has %d ops at one size and %d at the other", len(a.Ops), len(b.Ops))
	}
	same := func(x, y ir.Slice) bool {
		if !x.Valid() || !y.Valid() {
			return x.Valid() == y.Valid()
		}
		return x.Buf == y.Buf && y.Len == k*x.Len && y.Off == k*x.Off
	}
	for i := range a.Ops {
		x, y := &a.Ops[i], &b.Ops[i]
		if x.Kind != y.Kind || x.Queue != y.Queue || !same(x.Src, y.Src) || !same(x.Dst, y.Dst) {
			return false, fmt.Sprintf("op %s does not scale with the size", b.OpString(ir.OpID(i)))
		}
		xm, ym := x.More(), y.More()
		if len(xm) != len(ym) {
			return false, fmt.Sprintf("op %s does not scale with the size", b.OpString(ir.OpID(i)))
		}
		for j := range xm {
			if !same(xm[j], ym[j]) {
				return false, fmt.Sprintf("op %s does not scale with the size", b.OpString(ir.OpID(i)))
			}
		}
	}
	return true, ""
}

// packRef packs a queue entry (rank, queue, chain index) into an event's argument.
func packRef(r, q, idx int) int64 { return int64(r)<<42 | int64(q)<<24 | int64(idx) }

func unpackRef(a int64) (r, q, idx int) {
	return int(a >> 42), int(a >> 24 & (1<<18 - 1)), int(a & (1<<24 - 1))
}

// gate holds fn, the work of queue q of rank r that needs the engine to poll the queue's CQ,
// until that poll (polled CQs); it reports false, doing nothing, when the model does not poll.
func (s *sim) gate(r, q int, fn func()) bool {
	if !s.rounds {
		return false
	}
	cq := s.p.Ranks[r].Queues[q].CQ
	if cq < 0 {
		return false
	}
	k := s.cqBase[r] + int(cq)
	s.visit[k] = append(s.visit[k], fn)
	s.pendingN++
	return true
}

// poll is the engine's thread polling CQ k (polled CQs): the poll takes cq_ns of the thread, then
// the work it finds runs; after the last CQ, the round's host steps. The thread goes round while
// anything is left to happen.
func (s *sim) poll(k int) {
	r := 0
	for r+1 < len(s.cqBase) && s.cqBase[r+1] <= k {
		r++
	}
	s.now = s.use(r, false, s.now, s.par.CQ)
	fns := s.visit[k]
	s.visit[k] = nil
	s.pendingN -= len(fns)
	for _, fn := range fns {
		fn()
	}
	k++
	if k == s.allCQ {
		k = 0
		hs := s.hostQ
		s.hostQ = nil
		s.pendingN -= len(hs)
		for _, fn := range hs {
			s.now = max(s.now, s.pool[0])
			fn()
		}
	}
	t := max(s.now, s.pool[0])
	if s.pendingN == 0 && s.other > 0 && s.h.Len() > 0 && s.h.Min().t > t {
		// nothing to find until the next event: the thread goes round empty till then
		n := math.Floor((s.h.Min().t - t) / s.par.CQ)
		k = int((float64(k) + n) - math.Floor((float64(k)+n)/float64(s.allCQ))*float64(s.allCQ))
		t += n * s.par.CQ
	}
	if s.other > 0 || s.pendingN > 0 {
		s.push(t, evPoll, 0, 0, int64(k))
	}
}
