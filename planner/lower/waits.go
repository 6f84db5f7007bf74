package lower

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
	"github.com/coredag/coredag/wait"
)

// Wait insertion and minimisation. Each rank is lowered on its own, walking its events in the
// global order Compile computed. At the start of a NIC op, each predecessor on another work queue
// needs a WAIT for its completion, placed in the queue that holds the op back (the management
// queue in the managed style, the data send queue in the inline style). A WAIT is skipped when it
// is already implied:
//   - by FIFO order: the predecessor is on the same work queue (a fence covers READ/ATOMIC);
//   - by an earlier WAIT of the same placing queue, or transitively: the placing queue keeps a
//     knowledge vector (per work queue of the rank, how many of its ops are known complete), and
//     every op carries the vector its completion implies (what was known when it started, plus
//     its queue predecessors, plus itself);
//   - by another WAIT of the same op whose completion implies this one.
// HOST steps get the same treatment, with the CPU as the placing queue: the CPU runs a rank's
// host steps one after another, so a host step's completion implies all earlier ones.

// impLimit bounds the per-rank implication table (ops × work queues). Beyond it, knowledge is
// tracked per waited op only: still correct, merely less minimal.
const impLimit = 1 << 24

// lowerRanks lowers every rank in the event order (grouped by rank), chooses its signalling and
// checks it against the target's limits. Unless keep is set, a rank's chains are dropped once
// checked. If each is not nil, it is called for every rank once the rank is lowered, before its
// chains are dropped, and the function it returns is called in rank order; the first error of
// those is returned, and after it, or once a rank breaks a limit (Compile then fails), each is
// no longer called. Once ctx is cancelled the ranks left are not lowered (the caller looks at
// ctx).
func (c *compiler) lowerRanks(ctx context.Context, order []int32, keep bool, each func(*ir.Plan, int) func() error) error {
	g := c.g
	start := rankStarts(g)
	c.plan.Ranks = make([]ir.RankPlan, g.Ranks)
	// Ranks are lowered independently: workers take them in turn, and their findings are
	// joined in rank order, so the result does not depend on the number of workers. A worker
	// emits its rank only once every earlier rank has been emitted, so no worker runs more than
	// one rank ahead of the emitted ones.
	workers := make([]worker, max(1, min(runtime.GOMAXPROCS(0), g.Ranks)))
	var (
		wg      sync.WaitGroup
		next    atomic.Int64
		halt    atomic.Bool // a rank broke a limit, or an emit failed
		mu      sync.Mutex
		turn    = sync.NewCond(&mu)
		emitted int   // ranks emitted (or passed over) so far
		emitErr error // the first error of an emit
	)
	handOver := func(r int) {
		var emit func() error
		if !halt.Load() {
			emit = each(c.plan, r)
		}
		mu.Lock()
		for emitted != r { // the worker of rank emitted is past lowering it: the wait ends
			turn.Wait()
		}
		mu.Unlock()
		var err error
		if emit != nil && !halt.Load() {
			err = emit()
		}
		mu.Lock()
		if err != nil && emitErr == nil {
			emitErr = err
			halt.Store(true)
		}
		emitted++
		turn.Broadcast()
		mu.Unlock()
	}
	for i := range workers {
		w := &workers[i]
		w.c = c
		wg.Go(func() {
			for r := int(next.Add(1) - 1); r < g.Ranks; r = int(next.Add(1) - 1) {
				if stop.Cause(ctx) != nil { // the caller returns the cause; the ranks left are not lowered
					halt.Store(true)
					if each != nil {
						handOver(r)
					}
					continue
				}
				w.lowerRank(r, order[start[r]:start[r+1]])
				if len(w.found) > 0 {
					halt.Store(true)
				}
				if each != nil {
					handOver(r)
				}
				w.chains.settle(&c.plan.Ranks[r], keep)
				if !keep {
					c.plan.Ranks[r] = ir.RankPlan{}
					w.scratch.conds = w.scratch.conds[:0]
				}
			}
		})
	}
	wg.Wait()
	var found limitFinds
	for i := range workers {
		w := &workers[i]
		found = append(found, w.found...)
		c.naiveWaits += w.naiveWaits
		c.naiveEnables += w.naiveEnables
		addStats(&c.plan.Stats, w.stats)
	}
	// Each rank's findings are together, in the order they were found: in rank order, they are
	// what one worker lowering every rank would have found.
	slices.SortStableFunc(found, func(a, b limitFind) int { return a.rank - b.rank })
	c.addLimitErrors(found)
	return emitErr
}

// worker lowers ranks. Workers share the compiler's read-only state and write disjoint parts
// of the rest: the plans of their ranks, and the Loc and waited marks of their ranks' ops.
type worker struct {
	c       *compiler
	chains  chainBufs // the chains of the rank being lowered
	scratch scratch
	found   limitFinds
	stats   ir.Stats // of the ranks lowered, naive counts aside

	naiveWaits, naiveEnables int
}

// lowerRank lowers rank r, whose events in order are evs, chooses its signalling, checks it
// against the target's limits and counts its WQEs.
func (w *worker) lowerRank(r int, evs []int32) {
	c := w.c
	l := w.newRankLower(r)
	for _, ev := range evs {
		if ev&1 == 0 {
			l.start(ir.OpID(ev / 2))
		} else {
			l.end(ir.OpID(ev / 2))
		}
	}
	w.splitMgmt(r)
	c.signalRank(r, &w.scratch)
	c.checkRankLimits(r, &w.found)
	addStats(&w.stats, c.plan.RankStats(r))
}

// scratch is memory reused from rank to rank.
type scratch struct {
	imp, hostOrd, stamp []int32
	count               []uint32
	// Of the rank being lowered, by op - first: whether something observes the op's completion
	// (a WAIT, a HOST step, or on the generic target the polling engine), so its WQE must be
	// signalled; and where it sits in the chains: the rank's part of the Plan's Loc, or, when
	// the Plan has none (CheckLimits), of locs.
	first  ir.OpID
	waited []bool
	loc    []ir.Loc
	locs   []ir.Loc
	// conds holds the Waits of the rank's HOST entries, in chunks; unless the rank is kept, its
	// last chunk is reused by the next rank.
	conds []ir.Cond
}

// wait marks that something observes the completion of o.
func (s *scratch) wait(o ir.OpID) { s.waited[o-s.first] = true }

// condsOf returns room for n conditions.
func (s *scratch) condsOf(n int) []ir.Cond {
	if len(s.conds)+n > cap(s.conds) {
		s.conds = make([]ir.Cond, 0, max(n, 1024))
	}
	k := len(s.conds)
	s.conds = s.conds[:k+n]
	return s.conds[k : k+n : k+n]
}

// reuse returns buf's first n elements, cleared, growing buf if it is shorter.
func reuse[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n)
	}
	s := (*buf)[:n]
	clear(s)
	return s
}

// chainBufs are the chains of the rank being lowered, by work queue index, reused from rank to
// rank: a chain grows in its buffer while its WAITs and ENABLEs are placed (their number is known
// only then). A kept chain that fills its buffer (to 1/16) is handed over as it is, and the next
// rank's chain of that queue starts in a new buffer of the same size: the ranks of an SPMD plan
// have chains of alike lengths, so a large plan is mostly built in place, without copies. Any
// other kept chain is copied out exactly, so a large plan keeps no growth slack, and the next
// rank's chain starts in a buffer of its length.
type chainBufs [][]ir.WQE

// get is the empty chain of work queue wi.
func (b *chainBufs) get(wi int) []ir.WQE {
	for len(*b) <= wi {
		*b = append(*b, nil)
	}
	return (*b)[wi][:0]
}

// settle takes rp's chains back into the buffers, or if keep, hands them to rp.
func (b chainBufs) settle(rp *ir.RankPlan, keep bool) {
	for wi := range rp.Queues {
		q := &rp.Queues[wi]
		n, c := len(q.Chain), cap(q.Chain)
		switch {
		case !keep:
			b[wi], q.Chain = q.Chain[:0], nil
		case c-n <= n/16:
			b[wi], q.Chain = make([]ir.WQE, 0, c), q.Chain[:n:n]
		default:
			b[wi], q.Chain = make([]ir.WQE, 0, n), append(make([]ir.WQE, 0, n), q.Chain...)
		}
	}
}

// enableRef remembers the last ENABLE emitted for a managed work queue, so that consecutive
// ENABLEs with no WAIT between them merge into one.
type enableRef struct {
	placer, index, seq int
}

type rankLower struct {
	c       *compiler
	w       *worker
	g       *ir.Graph
	rp      *ir.RankPlan
	firstOp ir.OpID
	firstQ  ir.QueueID
	nq      int
	dims    int     // tracked work queues: 2 per graph queue, plus the host chain
	imp     []int32 // (op - firstOp) * dims: what an op's completion implies; nil if too large
	hostOrd []int32
	nHost   int

	kMgmt, kHost []int32
	kSQ          [][]int32 // inline style: knowledge of each data send queue
	waitSeq      []int     // WAITs emitted so far, per placing work queue
	lastEn       []enableRef
	rqManaged    []bool
	stamp        []int32
	stampVal     int32
	pending      []ir.OpID
}

func (w *worker) newRankLower(r int) *rankLower {
	c, g := w.c, w.c.g
	span := g.Rank[r]
	l := &rankLower{c: c, w: w, g: g, rp: &c.plan.Ranks[r], firstOp: span.FirstOp, firstQ: span.FirstQueue}
	l.nq = int(span.EndQueue - span.FirstQueue)
	l.dims = 2*l.nq + 1
	nops := int(span.EndOp - span.FirstOp)
	if c.t.Style != ir.StyleNone && nops*l.dims <= impLimit {
		l.imp = reuse(&w.scratch.imp, nops*l.dims)
	}
	l.hostOrd = reuse(&w.scratch.hostOrd, nops)
	l.stamp = reuse(&w.scratch.stamp, nops)
	sc := &w.scratch
	sc.first = span.FirstOp
	sc.waited = reuse(&sc.waited, nops)
	if c.plan.Loc != nil {
		sc.loc = c.plan.Loc[span.FirstOp:span.EndOp]
	} else {
		sc.loc = reuse(&sc.locs, nops)
	}
	l.kMgmt = make([]int32, l.dims)
	l.kHost = make([]int32, l.dims)
	l.rqManaged = make([]bool, l.nq)
	nHost := 0
	for o := span.FirstOp; o < span.EndOp; o++ {
		op := &g.Ops[o]
		if !op.Kind.OnQueue() {
			nHost++
			continue
		}
		if op.Kind.IsRecvSide() {
			for _, p := range g.Preds(o) {
				if l.dim(ir.OpID(p)) != l.dim(o) {
					l.rqManaged[op.Queue-span.FirstQueue] = true
				}
			}
		}
	}
	rp := l.rp
	rp.Rank, rp.Mgmt, rp.Host = r, -1, -1
	rp.SendWQ = make([]int, l.nq)
	rp.RecvWQ = make([]int, l.nq)
	rp.Queues = make([]ir.WorkQueue, 0, 2*l.nq+2) // the queues' sides, mgmt, host
	rp.CQs = make([]ir.CQ, 0, 2*l.nq+2)
	style := c.t.Style
	// Chains start with room for their data WQEs (the host chain: a HOST and, with cross-channel,
	// its NOP per host op), so that growing them leaves no garbage behind on large plans; only
	// WAITs and ENABLEs, whose number minimisation decides, are appended past that.
	for i := 0; i < l.nq; i++ {
		q := &g.Queues[span.FirstQueue+ir.QueueID(i)]
		rp.SendWQ[i], rp.RecvWQ[i] = 2*i, 2*i+1
		rp.Queues = append(rp.Queues,
			ir.WorkQueue{Name: q.Name + ".sq", Kind: ir.SendQueue, Queue: span.FirstQueue + ir.QueueID(i), CQ: 2 * i,
				Managed: style == ir.StyleManaged, Depth: q.Depth},
			ir.WorkQueue{Name: q.Name + ".rq", Kind: ir.RecvQueue, Queue: span.FirstQueue + ir.QueueID(i), CQ: 2*i + 1,
				Managed: style == ir.StyleManaged || (style == ir.StyleInline && l.rqManaged[i]), Depth: q.Depth})
		rp.CQs = append(rp.CQs, ir.CQ{Name: q.Name + ".scq", Queue: 2 * i}, ir.CQ{Name: q.Name + ".rcq", Queue: 2*i + 1})
	}
	if style == ir.StyleInline {
		l.kSQ = make([][]int32, l.nq)
		for i := range l.kSQ {
			l.kSQ[i] = make([]int32, l.dims)
		}
	}
	if style == ir.StyleManaged {
		rp.Mgmt = len(rp.Queues)
		rp.Queues = append(rp.Queues, ir.WorkQueue{Name: "mgmt", Kind: ir.MgmtQueue, Queue: ir.None, CQ: len(rp.CQs)})
		rp.CQs = append(rp.CQs, ir.CQ{Name: "mgmt.cq", Queue: rp.Mgmt})
	}
	if nHost > 0 {
		rp.Host = len(rp.Queues)
		wq := ir.WorkQueue{Name: "host", Kind: ir.HostSignalQueue, Queue: ir.None, CQ: -1}
		if style != ir.StyleNone {
			wq.CQ = len(rp.CQs)
			rp.CQs = append(rp.CQs, ir.CQ{Name: "host.cq", Queue: rp.Host})
		}
		rp.Queues = append(rp.Queues, wq)
	}
	for wi := range rp.Queues {
		rp.Queues[wi].Chain = w.chains.get(wi)
	}
	l.waitSeq = make([]int, len(rp.Queues))
	l.lastEn = make([]enableRef, len(rp.Queues))
	for i := range l.lastEn {
		l.lastEn[i].index = -1
	}
	return l
}

// dim is the tracked work queue of an op: 2i or 2i+1 for graph queue i's sides, 2nq for host.
func (l *rankLower) dim(o ir.OpID) int {
	op := &l.g.Ops[o]
	if !op.Kind.OnQueue() {
		return l.dims - 1
	}
	d := 2 * int(op.Queue-l.firstQ)
	if op.Kind.IsRecvSide() {
		d++
	}
	return d
}

// ord is an op's position among the ops of its tracked work queue.
func (l *rankLower) ord(o ir.OpID) int32 {
	op := &l.g.Ops[o]
	if !op.Kind.OnQueue() {
		return l.hostOrd[o-l.firstOp]
	}
	return int32(op.Index)
}

func (l *rankLower) row(o ir.OpID) []int32 {
	i := int(o-l.firstOp) * l.dims
	return l.imp[i : i+l.dims]
}

func (l *rankLower) known(k []int32, o ir.OpID) bool { return k[l.dim(o)] > l.ord(o) }

// learn records in k that o has completed, with everything its completion implies.
func (l *rankLower) learn(k []int32, o ir.OpID) {
	if l.imp != nil {
		for j, v := range l.row(o) {
			k[j] = max(k[j], v)
		}
		return
	}
	d := l.dim(o)
	k[d] = max(k[d], l.ord(o)+1)
}

// implies reports whether a's completion implies b's.
func (l *rankLower) implies(a, b ir.OpID) bool {
	if l.imp != nil {
		return l.row(a)[l.dim(b)] > l.ord(b)
	}
	return l.dim(a) == l.dim(b) && l.ord(a) > l.ord(b)
}

// needs collects into l.pending the predecessors of o that the placing queue's knowledge k does
// not already cover, minimised, and reports whether o needs a fence for a same-queue READ or
// ATOMIC predecessor. k == nil means nothing is placed (the generic target).
func (l *rankLower) needs(o ir.OpID, k []int32, counted *int) (fence bool) {
	l.stampVal++
	l.pending = l.pending[:0]
	d := l.dim(o)
	for _, p := range l.g.Preds(o) {
		x := ir.OpID(p)
		if l.stamp[x-l.firstOp] == l.stampVal {
			continue
		}
		l.stamp[x-l.firstOp] = l.stampVal
		if k == nil && l.c.t.Style == ir.StyleNone {
			// The polling engine counts every predecessor, on this queue or not, so it must
			// see each one's completion.
			l.w.scratch.wait(x)
		}
		if l.dim(x) == d {
			if l.g.Ops[x].Kind == ir.OpRead || l.g.Ops[x].Kind.IsAtomic() {
				fence = fence || k == nil || !l.known(k, x)
			}
			continue
		}
		*counted++
		if k == nil {
			l.w.scratch.wait(x)
			continue
		}
		if !l.known(k, x) {
			l.pending = append(l.pending, x)
		}
	}
	n := 0
	for i, x := range l.pending {
		implied := false
		for j, y := range l.pending {
			if i != j && l.implies(y, x) {
				implied = true
				break
			}
		}
		if !implied {
			l.pending[n] = x
			n++
		}
	}
	l.pending = l.pending[:n]
	return fence
}

func (l *rankLower) start(o ir.OpID) {
	op := &l.g.Ops[o]
	if !op.Kind.OnQueue() {
		l.startHost(o)
		return
	}
	c := l.c
	wq := l.dim(o) // work queue index equals the tracked dimension for data queues
	qi := int(op.Queue - l.firstQ)
	place, k := -1, []int32(nil)
	enable := false
	switch c.t.Style {
	case ir.StyleManaged:
		place, k, enable = l.rp.Mgmt, l.kMgmt, true
	case ir.StyleInline:
		if !op.Kind.IsRecvSide() {
			place, k = wq, l.kSQ[qi]
		} else if l.rqManaged[qi] {
			// The RECV_EN goes to the queue pair's send queue at this receive's start; the
			// event order puts the start of every message after the start of its receive
			// (eventOrder), so no send ahead of it here waits for a receive enabled later.
			place, k, enable = l.rp.SendWQ[qi], l.kSQ[qi], true
		}
	}
	fence := l.needs(o, k, &l.w.naiveWaits)
	if place >= 0 {
		for _, x := range l.pending {
			l.emitWait(place, o, x)
			l.learn(k, x)
		}
	}
	e := dataWQE(l.g, o)
	if autoInline(&c.t, l.g, o) {
		e.Flags |= ir.Inline
	}
	if fence {
		e.Flags |= ir.Fence
	}
	q := &l.rp.Queues[wq]
	l.w.scratch.loc[o-l.firstOp] = ir.Loc{Queue: wq, Index: len(q.Chain)}
	q.Chain = append(q.Chain, e)
	if enable {
		l.w.naiveEnables++
		l.emitEnable(place, wq, o)
	}
	if l.imp != nil {
		r := l.row(o)
		if k != nil {
			copy(r, k)
		} else {
			clear(r)
		}
	}
}

func (l *rankLower) end(o ir.OpID) {
	op := &l.g.Ops[o]
	host := !op.Kind.OnQueue()
	if l.imp != nil {
		r := l.row(o)
		if p := l.c.prevOnSide(o); p != ir.None {
			for j, v := range l.row(ir.OpID(p)) {
				r[j] = max(r[j], v)
			}
		}
		d := l.dim(o)
		r[d] = max(r[d], l.ord(o)+1)
	}
	if host {
		l.learn(l.kHost, o)
	}
}

func (l *rankLower) startHost(o ir.OpID) {
	c := l.c
	ord := int32(l.nHost)
	l.hostOrd[o-l.firstOp] = ord
	l.nHost++
	var k []int32
	if c.t.Style != ir.StyleNone {
		k = l.kHost
	}
	var naive int
	l.needs(o, k, &naive)
	op := &l.g.Ops[o]
	e := ir.WQE{Opcode: ir.OpcHost, Op: o, Peer: -1, Red: op.Red,
		Local: ir.NoSeg, Remote: ir.NoSeg, Wait: noCond, Enable: noEnable}
	if k != nil && len(l.pending) > 0 {
		e.Waits = l.w.scratch.condsOf(len(l.pending))
		for i, x := range l.pending {
			e.Waits[i] = condOn(x)
			l.w.scratch.wait(x)
			l.learn(k, x)
		}
	}
	hq := &l.rp.Queues[l.rp.Host]
	l.w.scratch.loc[o-l.firstOp] = ir.Loc{Queue: l.rp.Host, Index: len(hq.Chain)}
	hq.Chain = append(hq.Chain, e)
	if c.t.Style != ir.StyleNone {
		hq.Chain = append(hq.Chain, ir.WQE{Opcode: ir.OpcNop, Op: o, Peer: -1,
			Local: ir.NoSeg, Remote: ir.NoSeg, Flags: ir.Signalled, Wait: noCond, Enable: noEnable})
	}
	if l.imp != nil {
		if k != nil {
			copy(l.row(o), k)
		} else {
			clear(l.row(o))
		}
	}
}

// noCond is the condition of entries other than CQE_WAIT, and noEnable the Enable of entries
// other than SEND_EN and RECV_EN.
var (
	noCond   = ir.Cond{Cond: wait.Cond{CQ: -1}, Op: ir.None}
	noEnable = wait.Enable{Queue: -1}
)

// condOn is a condition on x's completion, its CQ and count to be filled in once signalling is
// known.
func condOn(x ir.OpID) ir.Cond { return ir.Cond{Cond: wait.Cond{CQ: -1}, Op: x} }

// emitWait appends a CQE_WAIT for x's completion to work queue place, holding back o. Its CQ and
// count are filled in once signalling is known.
func (l *rankLower) emitWait(place int, o, x ir.OpID) {
	q := &l.rp.Queues[place]
	q.Chain = append(q.Chain, ir.WQE{Opcode: ir.OpcWait, Op: o, Peer: -1,
		Local: ir.NoSeg, Remote: ir.NoSeg, Wait: condOn(x), Enable: noEnable})
	l.w.scratch.wait(x)
	l.waitSeq[place]++
}

// emitEnable lets managed work queue wq run up to and including o, merging with the previous
// ENABLE of wq when no WAIT was placed since.
func (l *rankLower) emitEnable(place, wq int, o ir.OpID) {
	op := &l.g.Ops[o]
	q := &l.rp.Queues[place]
	upTo := uint32(op.Index + 1)
	le := &l.lastEn[wq]
	if le.index >= 0 && le.placer == place && le.seq == l.waitSeq[place] {
		e := &q.Chain[le.index]
		e.UpTo, e.Op = upTo, o
		return
	}
	opc := ir.OpcSendEnable
	if op.Kind.IsRecvSide() {
		opc = ir.OpcRecvEnable
	}
	*le = enableRef{placer: place, index: len(q.Chain), seq: l.waitSeq[place]}
	q.Chain = append(q.Chain, ir.WQE{Opcode: opc, Op: o, Peer: -1,
		Local: ir.NoSeg, Remote: ir.NoSeg, Wait: noCond, Enable: wait.Enable{Queue: int32(wq), UpTo: upTo}})
}

// autoInline reports that a send or write of op o goes inline although the plan does not say so:
// on a target that posts each WQE only once its inputs are complete (no pre-posting), copying a
// small payload into the WQE at post time reads the same bytes the NIC would, and saves the NIC a
// DMA read of the buffer.
func autoInline(t *ir.Target, g *ir.Graph, o ir.OpID) bool {
	op := &g.Ops[o]
	if t.PrePost || (op.Kind != ir.OpSend && op.Kind != ir.OpWrite) {
		return false
	}
	n := g.SegsBytes(op.SrcSegs())
	return n > 0 && n <= int64(t.MaxInline)
}

// dataWQE is the data WQE of a queue op, with its operands.
func dataWQE(g *ir.Graph, o ir.OpID) ir.WQE {
	op := &g.Ops[o]
	e := ir.WQE{Op: o, Local: ir.NoSeg, Remote: ir.NoSeg,
		Peer: int32(g.Queues[op.Queue].PeerRank), Wait: noCond, Enable: noEnable}
	switch op.Kind {
	case ir.OpSend:
		e.Opcode, e.Local = ir.OpcSend, op.Src.Seg()
		if op.Inline {
			e.Flags |= ir.Inline
		}
	case ir.OpRecv:
		e.Opcode, e.Local = ir.OpcRecv, op.Dst.Seg()
	case ir.OpWrite:
		e.Opcode, e.Local, e.Remote = ir.OpcWrite, op.Src.Seg(), op.Dst.Seg()
		if op.Notify {
			e.Opcode = ir.OpcWriteImm
		}
	case ir.OpRead:
		e.Opcode, e.Remote, e.Local = ir.OpcRead, op.Src.Seg(), op.Dst.Seg()
	case ir.OpAtomicAdd:
		e.Opcode, e.Remote, e.Local = ir.OpcAtomicFAdd, op.Dst.Seg(), op.Fetch().Seg()
	case ir.OpAtomicCAS:
		e.Opcode, e.Remote, e.Local = ir.OpcAtomicCAS, op.Dst.Seg(), op.Fetch().Seg()
	}
	return e
}
