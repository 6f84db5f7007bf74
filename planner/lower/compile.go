// Package lower is the last pass of the planner: ir.Graph to ir.Plan for an ir.Target. It
// places every op on its work queue, orders each rank's events, adds the WAIT and ENABLE entries
// (waits.go) that make the NIC honour the Graph's dependencies, then chooses signalling and
// checks the chains against the target's limits (signal.go). It reads a verified Graph, never
// changes it, and knows nothing of the syntax.
package lower

import (
	"context"
	"errors"
	"fmt"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/stop"
	"github.com/coredag/coredag/ir"
)

// Compile lowers a checked Graph for a Target into a Plan: per rank, one work queue per queue
// side, one CQ per work queue, the management queue (managed style), the host-signal queue, and
// WQE chains with the WAIT and ENABLE entries, fences and signalling that make the NIC honour
// every dependency of the Graph.
//
// The lowering walks one global order of events (the start and the end of every op, over all
// ranks) that is a topological order of the happens-before graph: `after` edges, queue order,
// and the two halves of every message (in the inline style also "a message starts only once its
// receive is posted": see eventOrder). WAIT and ENABLE entries are appended to a queue in that
// order, and the CPU runs a rank's HOST steps one at a time in that order, so a queue that blocks
// on a WAIT only ever waits for an event that comes earlier: no chain can block forever unless
// the Graph itself deadlocks. Starts are taken before ends whenever possible, which puts ENABLEs
// early and WAITs late.
//
// Errors (a diag.List) report chains that do not fit the target's depth limits, inline
// payloads above its limit, and dependency cycles the checker should have caught. Once ctx is
// cancelled, Compile stops, while it orders the events or between the ranks it lowers, and
// returns ctx's cause (context.Cause); so do the other functions of the package that take a ctx.
func Compile(ctx context.Context, g *ir.Graph, t ir.Target) (*ir.Plan, error) {
	c, order, err := start(ctx, g, t, true, true)
	return finish(ctx, c, order, err, nil, true)
}

// CompileEach is Compile for plans too large to hold whole (a listing of every rank, say): it
// calls each for every rank as soon as the rank is lowered, on the goroutine that lowered it,
// so calls for different ranks may run at once, and it calls the function each returns (nil
// for none) in rank order, one at a time; then it drops the rank's chains, so memory holds
// about two ranks per CPU. each and the function it returns read p.Ranks[r] only, and only
// during the call. The Plan returned has the Stats and Deps of Compile's, and no Ranks or Loc
// (it would locate ops in chains that are gone).
// Ranks handed over before Compile would have failed are of no use then: CompileEach returns
// the same errors, else the first error of the functions each returned, after which it calls
// each no more. On a triggered target, whose trigger budgets need every rank's chains, the
// Plan is built whole first, as Compile builds it, and keeps its Ranks. A nil each is as in
// Prepared.CompileEach.
func CompileEach(ctx context.Context, g *ir.Graph, t ir.Target, each func(p *ir.Plan, r int) (emit func() error)) (*ir.Plan, error) {
	return PrepareEach(ctx, g, t).CompileEach(ctx, each)
}

// Prepared is CompileEach begun: the Graph's inputs checked and the events of all its ranks
// ordered, the one part of the lowering that walks the whole Graph on one core. That needs only
// the Graph, so it can be done while other passes still read it (planner.Options.Beside), and
// the rest, rank by rank on every core, later.
type Prepared struct {
	c     *compiler
	order []int32
	err   error
	used  bool
	keep  bool // CompileEach's Plan keeps every rank (KeepRanks)
}

// PrepareEach begins CompileEach(ctx, g, t, ...); the Prepared's CompileEach does the rest. It
// stops ordering the events once ctx is cancelled: the Prepared then holds ctx's cause as its
// error (context.Cause). ctx bounds the preparation only: the methods of the Prepared take
// their own.
func PrepareEach(ctx context.Context, g *ir.Graph, t ir.Target) *Prepared {
	c, order, err := start(ctx, g, t, t.Trigger != nil, true) // a Loc only when the Plan is whole
	return &Prepared{c: c, order: order, err: err}
}

// CompileEach is CompileEach(ctx, g, t, each) for the Graph and target p was prepared for. A
// Prepared compiles once. A nil each is a callback that does nothing: the ranks are still
// streamed, and the Plan has no Ranks (Compile keeps them).
func (p *Prepared) CompileEach(ctx context.Context, each func(p *ir.Plan, r int) (emit func() error)) (*ir.Plan, error) {
	if each == nil {
		each = func(*ir.Plan, int) func() error { return nil }
	}
	if p.used {
		return nil, errUsed
	}
	c, order, err, keep := p.c, p.order, p.err, p.keep
	*p = Prepared{used: true} // the order is the Plan's size: let it go with the call
	return finish(ctx, c, order, err, each, keep)
}

// KeepRanks makes the Plan CompileEach returns keep every rank's chains, as Compile's does, for
// a check of the whole plan once it is listed (replay), at the cost of holding them all.
func (p *Prepared) KeepRanks() { p.keep = true }

// CheckLimits is CheckLimits(ctx, g, t) for the Graph and target p was prepared for, on p's
// event order; p can compile after it.
func (p *Prepared) CheckLimits(ctx context.Context) error {
	if p.used {
		return errUsed
	}
	if p.err != nil {
		return p.err
	}
	return checkLimits(ctx, newCompiler(p.c.g, p.c.t, p.c.t.Trigger != nil), p.order)
}

var errUsed = errors.New("compile: a Prepared lowering compiles once")

// finish lowers every rank of a started compilation (start) and completes its Plan, handing
// each rank to each as it is done (streamed) or, on a triggered target, once all are. Streamed
// ranks are dropped once handed over unless keep is set. Once ctx is cancelled, it returns
// ctx's cause.
func finish(ctx context.Context, c *compiler, order []int32, err error, each func(*ir.Plan, int) func() error, keep bool) (*ir.Plan, error) {
	if err != nil {
		return nil, err
	}
	g, t := c.g, c.t
	stream := each != nil && t.Trigger == nil
	var eachErr error
	if stream {
		eachErr = c.lowerRanks(ctx, order, keep, each)
	} else {
		c.lowerRanks(ctx, order, true, nil)
	}
	if err := stop.Cause(ctx); err != nil { // ranks were left out
		return nil, err
	}
	if t.Trigger != nil && len(c.errs) == 0 {
		c.trigger(order)
	}
	if len(c.errs) > 0 {
		c.errs.Sort()
		return nil, c.errs
	}
	if eachErr != nil {
		return nil, eachErr
	}
	c.plan.Stats.NaiveWaits, c.plan.Stats.NaiveEnables = c.naiveWaits, c.naiveEnables
	if t.Style == ir.StyleNone {
		c.plan.Deps = ir.NewDeps(len(g.Ops), g.Edges)
	}
	if each != nil && !stream {
		for r := range c.plan.Ranks {
			if emit := each(c.plan, r); emit != nil {
				if err := emit(); err != nil {
					return nil, err
				}
			}
		}
	}
	return c.plan, nil
}

// CheckLimits reports what Compile would refuse for target t, with the same diagnostics, without
// keeping the Plan: each rank is lowered, signalled and checked against the target's limits,
// then dropped, so memory holds one rank's chains at a time. On a triggered target the trigger
// budgets need every rank's chains, so the Plan is built whole there, as Compile does.
func CheckLimits(ctx context.Context, g *ir.Graph, t ir.Target) error {
	c, order, err := start(ctx, g, t, t.Trigger != nil, false)
	if err != nil {
		return err
	}
	return checkLimits(ctx, c, order)
}

// checkLimits is CheckLimits past start.
func checkLimits(ctx context.Context, c *compiler, order []int32) error {
	t := c.t
	c.lowerRanks(ctx, order, t.Trigger != nil, nil)
	if err := stop.Cause(ctx); err != nil { // ranks were left out: their limits are unknown
		return err
	}
	if t.Trigger != nil && len(c.errs) == 0 {
		c.trigger(order)
	}
	if len(c.errs) > 0 {
		c.errs.Sort()
		return c.errs
	}
	return nil
}

// start checks the inputs of Compile and CheckLimits and orders the events of g. The Plan gets
// a Loc only if loc is set, and its critical path only if critical is: CheckLimits keeps no
// more than one rank's lowering. Once ctx is cancelled, it stops with ctx's cause.
func start(ctx context.Context, g *ir.Graph, t ir.Target, loc, critical bool) (*compiler, []int32, error) {
	if g == nil {
		return nil, nil, fmt.Errorf("compile: nil graph")
	}
	if t.Style != ir.StyleNone && !t.CrossChannel {
		return nil, nil, fmt.Errorf("compile: target %q uses the %s style but has no cross-channel support", t.Name, t.Style)
	}
	if !g.Frozen() {
		return nil, nil, fmt.Errorf("compile: the graph is not frozen (whoever builds a Graph calls Freeze when it is complete)")
	}
	c := newCompiler(g, t, loc)
	c.errs = c.checkInputs()
	if len(c.errs) > 0 {
		c.errs.Sort()
		return nil, nil, c.errs
	}
	order, path, err := c.eventOrder(ctx, critical)
	if err != nil {
		return nil, nil, err
	}
	c.plan.Stats.CriticalPath = path
	return c, order, nil
}

// newCompiler is a compiler of g for t with an empty Plan, which gets a Loc if loc is set.
func newCompiler(g *ir.Graph, t ir.Target, loc bool) *compiler {
	c := &compiler{g: g, t: t}
	c.plan = &ir.Plan{Graph: g, Target: t}
	if loc {
		c.plan.Loc = make([]ir.Loc, len(g.Ops))
	}
	return c
}

// compiler holds the state of one Compile call.
type compiler struct {
	g    *ir.Graph
	t    ir.Target
	plan *ir.Plan
	errs diag.List

	naiveWaits, naiveEnables int
}

// orderPoll is how many events eventOrder places between two looks at the context: a
// millisecond or so.
const orderPoll = 1 << 16

// checkInputs reports problems of the Graph that no lowering can fix for this target.
func (c *compiler) checkInputs() diag.List {
	var errs diag.List
	g := c.g
	for i := range g.Queues {
		q := &g.Queues[i]
		if q.Depth < 1 {
			errs.Add(diag.Target, q.Pos, "queue %s on rank %d has depth %d: a queue needs room for at least one WQE (declare `depth 1` or more)", q.Name, q.Rank, q.Depth)
		} else if q.Depth > c.t.MaxWQDepth {
			errs.Add(diag.Target, q.Pos, "queue %s on rank %d has depth %d, above the %d WQEs target %s supports (lower its `depth`)", q.Name, q.Rank, q.Depth, c.t.MaxWQDepth, c.t.Name)
		}
	}
	// Lowering takes a rank's ops to be its span's, the spans tiling the ops in rank order.
	tiled := len(g.Rank) == g.Ranks
	for r, end := 0, ir.OpID(0); tiled && r < g.Ranks; r++ {
		tiled = g.Rank[r].FirstOp == end && g.Rank[r].EndOp >= end
		end = g.Rank[r].EndOp
		tiled = tiled && (r < g.Ranks-1 || int(end) == len(g.Ops))
	}
	if !tiled {
		errs.Add(diag.Match, diag.InFile(g.File), "the rank spans of graph %s do not cover its ops in rank order (the graph was not elaborated)", g.Name)
		return errs
	}
	for i := range g.Ops {
		op := &g.Ops[i]
		if r := int(op.Rank); r < 0 || r >= g.Ranks || ir.OpID(i) < g.Rank[r].FirstOp || ir.OpID(i) >= g.Rank[r].EndOp {
			errs.Add(diag.Match, op.Pos, "%s is outside the span of its rank %d (the graph was not elaborated)", op.Name, r)
			return errs
		}
		if op.Inline {
			if n := g.SegsBytes(op.SrcSegs()); n > int64(c.t.MaxInline) {
				errs.Add(diag.Target, op.Pos, "%s sends %d bytes inline, above the %d-byte inline limit of target %s (drop `inline` or send fewer bytes)", op.Name, n, c.t.MaxInline, c.t.Name)
			}
		}
		if segs := 1 + len(op.More()); len(op.More()) > 0 && segs > c.t.MaxSGE {
			errs.Add(diag.Target, g.PartPos(ir.OpID(i), ir.PartMore+ir.Part(min(c.t.MaxSGE, len(op.More()))-1)), "%s has a scatter/gather list of %d slices, above the %d SGEs per work request of target %s (split the op, or copy the pieces together first)", op.Name, segs, c.t.MaxSGE, c.t.Name)
		}
		if op.Kind.OnQueue() && (op.Queue < 0 || int(op.Queue) >= len(g.Queues)) {
			errs.Add(diag.Match, op.Pos, "%s is not on a valid queue (the graph was not elaborated)", g.OpString(ir.OpID(i)))
		} else if op.Kind.OnQueue() { // lowering finds an op's neighbours on its side by its Index
			if side := sideOps(g, op); op.Index < 0 || int(op.Index) >= len(side) || side[op.Index] != ir.OpID(i) {
				errs.Add(diag.Match, op.Pos, "%s is not listed by its queue at its index (the graph was not elaborated)", g.OpString(ir.OpID(i)))
				return errs
			}
		}
	}
	for i := range g.Queues {
		q := &g.Queues[i]
		for _, side := range [2][]ir.OpID{q.SendOps, q.RecvOps} {
			for _, o := range side {
				if o < 0 || int(o) >= len(g.Ops) {
					errs.Add(diag.Match, q.Pos, "queue %s on rank %d lists an op that does not exist (the graph was not elaborated)", q.Name, q.Rank)
					return errs
				}
			}
		}
	}
	return errs
}

// Events: op o has start event 2o and end event 2o+1.
func startEv(o ir.OpID) int32 { return int32(o) * 2 }
func endEv(o ir.OpID) int32   { return int32(o)*2 + 1 }

// sideOps is the queue side that queue op op sits on, in queue order.
func sideOps(g *ir.Graph, op *ir.Op) []ir.OpID {
	if op.Kind.IsRecvSide() {
		return g.Queues[op.Queue].RecvOps
	}
	return g.Queues[op.Queue].SendOps
}

// prevOnSide is the op before o on its queue side (None for the first and for host ops).
func (c *compiler) prevOnSide(o ir.OpID) ir.OpID {
	op := &c.g.Ops[o]
	if !op.Kind.OnQueue() || op.Index == 0 {
		return ir.None
	}
	return sideOps(c.g, op)[op.Index-1]
}

// eventOrder computes a topological order of all events (Kahn's algorithm, starts first, a
// rank's host ops serialised) and returns it grouped by rank, each rank's events in that order
// (all that lowering a rank needs), with the critical path length in ops if critical is set
// (else 0). The ops of a rank are those of its span (g.Rank), as everywhere in lowering. Beside
// the order, it keeps O(ops) bytes only for the in-degrees (and the path lengths): the events
// ready to be taken wait in rings as large as the frontier of the walk. Once ctx is cancelled,
// it returns ctx's cause.
func (c *compiler) eventOrder(ctx context.Context, critical bool) (order []int32, path int, err error) {
	g := c.g
	n := len(g.Ops)
	// In the inline style a message (SEND, or a notify write) also starts only after the start
	// of the receive it consumes. RC retries a message whose receive is not posted at the head
	// of its send queue (receiver not ready), so nothing behind it in that queue runs until the
	// peer posts the receive; and the inline style hosts the RECV_ENs of managed receive queues
	// in send queues. Without this edge a RECV_EN could land behind a send whose peer's RECV_EN
	// sits, symmetrically, behind a send that needs the first receive: a deadlock. With it, every
	// entry of a send queue (a WAIT for an end, a RECV_EN at a receive's start, a message after
	// its receive's start) is appended at an event whose own conditions all come earlier in the
	// order, so induction over the order shows every chain runs to its end. The edge adds no
	// cycle: everything a message's start leads to is after the end of that message or of its
	// receive, and both already follow the receive's start. The managed style needs no such edge:
	// its management queue holds only WAITs and ENABLEs, never a message, so nothing there queues
	// behind a receiver-not-ready retry; a WAIT for a message's completion is placed after that
	// end in the order, which already follows the start (posting) of its receive.
	postFirst := c.t.Style == ir.StyleInline
	if n >= endDeg {
		return nil, 0, fmt.Errorf("compile: graph %s has %d ops, more than lowering can order (%d)", g.Name, n, endDeg-1)
	}
	if g.Ranks > maxRank {
		return nil, 0, fmt.Errorf("compile: graph %s has %d ranks, more than lowering can order (%d)", g.Name, g.Ranks, maxRank)
	}
	st := orderState(g, postFirst)
	landStart, landList := landsByFrom(g, st)
	var dist []int32 // longest path (in ends) reaching each event
	if critical {
		dist = make([]int32, 2*n)
	}
	// Ranks are lowered one by one: each event goes straight to its rank's part of order, where
	// the rank's events keep their order.
	order = make([]int32, 2*n)
	at := rankStarts(g)
	placed := 0
	poll := stop.Every(ctx, orderPoll)
	var starts, ends ring
	hostBusy := make([]bool, g.Ranks)
	parked := make([]ring, g.Ranks)
	readyStart := func(ev int32) {
		if s := &st[ev/2]; s.info&onQueue == 0 {
			r := s.info & rankMask
			if hostBusy[r] {
				parked[r].push(ev)
				return
			}
			hostBusy[r] = true
		}
		starts.push(ev)
	}
	for o := range st {
		if st[o].deg%endDeg == 0 {
			readyStart(int32(2 * o))
		}
	}
	relax := func(from, to int32) {
		if dist != nil {
			w := from & 1 // ends weigh one op
			if d := dist[from] + w; d > dist[to] {
				dist[to] = d
			}
		}
		s := &st[to/2]
		if to&1 == 0 {
			if s.deg--; s.deg%endDeg == 0 {
				readyStart(to)
			}
		} else if s.deg -= endDeg; s.deg < endDeg {
			ends.push(to)
		}
	}
	for starts.len() > 0 || ends.len() > 0 {
		var ev int32
		if starts.len() > 0 {
			ev = starts.pop()
		} else {
			ev = ends.pop()
		}
		o := ir.OpID(ev / 2)
		s := st[o]
		r := s.info & rankMask
		order[at[r]] = ev
		at[r]++
		placed++
		if err := poll.Step(); err != nil {
			return nil, 0, err
		}
		if ev&1 == 0 {
			relax(ev, ev+1)
			if s.next != ir.None {
				relax(ev, startEv(s.next))
			}
			if landStart != nil {
				for _, w := range landList[landStart[o]:landStart[o+1]] {
					relax(ev, startEv(ir.OpID(w)))
				}
			}
			if s.match != ir.None {
				relax(ev, endEv(s.match))
				if postFirst && s.info&recvSide != 0 {
					relax(ev, startEv(s.match))
				}
			}
		} else {
			if dist != nil {
				path = max(path, int(dist[ev])+1)
			}
			for _, x := range g.Succs(o) {
				relax(ev, startEv(ir.OpID(x)))
			}
			if s.next != ir.None {
				relax(ev, endEv(s.next))
			}
			if s.info&onQueue == 0 {
				hostBusy[r] = false
				if parked[r].len() > 0 {
					hostBusy[r] = true
					starts.push(parked[r].pop())
				}
			}
		}
	}
	if placed < 2*n {
		var errs diag.List
		for o := 0; o < n; o++ {
			if st[o].deg > 0 {
				errs.Add(diag.Cycle, g.Ops[o].Pos, "%s can never start: it is on a dependency cycle through `after` edges, queue order and message matching (run `coredag check` to see the cycle, then remove one of its edges)", g.OpString(ir.OpID(o)))
				if len(errs) >= 5 {
					break
				}
			}
		}
		return nil, 0, errs
	}
	return order, path, nil
}

// endDeg is the unit of an end event's in-degree in eventOrder's words of degrees.
const endDeg = 1 << 30

// opState is what eventOrder reads and keeps of an op, packed (16 bytes, four to a cache line)
// so that relaxing an event costs one miss, not one in each of the Graph's Ops, Queues and the
// degrees.
type opState struct {
	// The in-degrees of the op's start and end events, in one word: the end's (at most 3: its
	// start, the previous end on its queue side, its message's other half) in its top two bits,
	// the start's below (fewer than endDeg).
	deg   uint32
	info  uint32  // the op's rank, and its onQueue and recvSide bits
	next  ir.OpID // the op after it on its queue side, or None
	match ir.OpID // the other half of its message, or None
}

// The bits of opState.info.
const (
	onQueue  = 1 << 31
	recvSide = 1 << 30
	rankMask = recvSide - 1
	maxRank  = rankMask
)

// orderState is the opState of every op of g, in one pass over its ops in order and one over
// its queues. A message's start also waits for its receive's start if postFirst is set (see
// eventOrder).
func orderState(g *ir.Graph, postFirst bool) []opState {
	st := make([]opState, len(g.Ops))
	for o := range g.Ops {
		op := &g.Ops[o]
		s := opState{info: uint32(op.Rank), next: ir.None, match: op.Match}
		has := uint32(0)
		if op.Kind.OnQueue() {
			s.info |= onQueue
			if op.Index > 0 { // prevOnSide(o) != None
				has = 1
			}
		}
		if op.Kind.IsRecvSide() {
			s.info |= recvSide
		}
		start, end := uint32(len(g.Preds(ir.OpID(o))))+has, 1+has
		if op.Match != ir.None {
			end++
			if postFirst && !op.Kind.IsRecvSide() {
				start++
			}
		}
		s.deg = end*endDeg + start
		st[o] = s
	}
	for i := range g.Queues {
		q := &g.Queues[i]
		for _, side := range [2][]ir.OpID{q.SendOps, q.RecvOps} {
			for k := 1; k < len(side); k++ {
				st[side[k-1]].next = side[k]
			}
		}
	}
	return st
}

// ring is a FIFO of events, in a ring buffer that grows as needed.
type ring struct {
	buf       []int32 // its length is 0 or a power of 2
	head, num int
}

func (q *ring) len() int { return q.num }

func (q *ring) push(ev int32) {
	if q.num == len(q.buf) {
		buf := make([]int32, max(64, 2*len(q.buf)))
		k := copy(buf, q.buf[q.head:])
		copy(buf[k:], q.buf[:q.head])
		q.buf, q.head = buf, 0
	}
	q.buf[(q.head+q.num)&(len(q.buf)-1)] = ev
	q.num++
}

// pop takes the oldest event; the ring must not be empty.
func (q *ring) pop() int32 {
	ev := q.buf[q.head]
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.num--
	return ev
}

// rankStarts returns where each rank's events start in an order grouped by rank (two per op of
// the rank), and the end.
func rankStarts(g *ir.Graph) []int {
	start := make([]int, g.Ranks+1)
	for r := 0; r < g.Ranks; r++ {
		start[r+1] = start[r] + 2*int(g.Rank[r].EndOp-g.Rank[r].FirstOp)
	}
	return start
}
