package exec

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/ir"
)

// Region is memory the caller owns: Len bytes at Addr.
type Region struct {
	Addr unsafe.Pointer
	Len  int
}

// fits says why m cannot be buffer b's memory (no address, another size, an address not
// aligned to b's elements), nil if it can. Its errors match ErrRegion.
func fits(b *ir.Buffer, m Region) error {
	switch {
	case m.Addr == nil:
		return regionError(fmt.Sprintf("%s: buffer %s: no memory given", b.Pos, b.Name))
	case int64(m.Len) != b.Bytes():
		return regionError(fmt.Sprintf("%s: buffer %s is %d bytes (%d %s), the memory given is %d bytes",
			b.Pos, b.Name, b.Bytes(), b.Count, b.Type, m.Len))
	case uintptr(m.Addr)%uintptr(b.Type.Size()) != 0:
		return regionError(fmt.Sprintf("%s: buffer %s holds %s: its memory must be aligned to %d bytes, the address given is %#x",
			b.Pos, b.Name, b.Type, b.Type.Size(), uintptr(m.Addr)))
	}
	return nil
}

// regionError is fits's error: its message, matching ErrRegion.
type regionError string

func (e regionError) Error() string        { return string(e) }
func (e regionError) Is(target error) bool { return target == ErrRegion }

// Bound gives the caller's memory of an extern buffer on a rank (Options.Bound): false when
// the caller gave none.
type Bound func(rank int, b ir.BufID) (Region, bool)

func (f Bound) region(rank int, b ir.BufID) (Region, bool) {
	if f == nil {
		return Region{}, false
	}
	return f(rank, b)
}

// Errors of the persistent operation (Op); test with errors.Is.
var (
	// ErrUnbound: Start before every extern buffer of the local ranks is bound.
	ErrUnbound = errors.New("extern buffer not bound")
	// ErrInFlight: Start, or a bind, while a start is in flight.
	ErrInFlight = errors.New("a start is in flight")
	// ErrRebindRemote: rebinding a buffer peers access one-sidedly, after its key went to them.
	ErrRebindRemote = errors.New("cannot rebind a remotely accessed buffer")
	// ErrRegion: memory given for an extern buffer (Op.Bind, Options.Bound, Session.Rebind)
	// that cannot be its memory: no address, another size, or misaligned for its elements.
	ErrRegion = errors.New("memory does not fit the buffer")
	// ErrPanic: a panic inside an iteration, recovered.
	ErrPanic = errors.New("panic in the engine")
)

// Rebind replaces the memory of extern buffer b on local rank with the caller's region, between
// runs: it registers the region, moves every prebuilt work request of the rank that names the
// old region to the new one (same offsets), and releases the old registration. When peers access
// the buffer one-sidedly (remote write, read or atomic), they must learn its new address and
// key: with every rank local that is done at once; across processes the next step does it
// (Options.Sync tells every process that one rebound, then Options.Exchange hands the new
// descriptors round). A session without Sync refuses such a rebind (ErrRebindRemote).
func (s *Session) Rebind(rank int, b ir.BufID, m Region) error {
	g := s.plan.Graph
	if s.closed {
		return fmt.Errorf("rebind: %w", ErrSessionClosed)
	}
	if b < 0 || int(b) >= len(g.Buffers) {
		return fmt.Errorf("rebind: no buffer #%d", b)
	}
	buf := &g.Buffers[b]
	if !buf.Extern {
		return fmt.Errorf("%s: buffer %s is not extern: its memory is coredag's", buf.Pos, buf.Name)
	}
	remote := buf.Access&(ir.RemoteWrite|ir.RemoteRead|ir.RemoteAtomic) != 0
	allLocal := len(s.ranks) == g.Ranks
	if remote && !allLocal && (s.opts.Sync == nil || s.opts.Exchange == nil || s.opts.Unfenced.Start) {
		return fmt.Errorf("%s: buffer %s: %w: peers access it (%s) with the address and key they received at the first start, "+
			"and this session has no Sync to tell them of a new one", buf.Pos, buf.Name, ErrRebindRemote, accessOf(buf))
	}
	if err := fits(buf, m); err != nil {
		return err
	}
	var r *rankRes
	for _, x := range s.res {
		if x.rank == rank {
			r = x
		}
	}
	if r == nil {
		return fmt.Errorf("rebind: rank %d is not run by this session", rank)
	}
	for _, p := range r.parts {
		if p.Buf == b {
			return fmt.Errorf("%s: buffer %s: %w: a wait counts the writes that land in %s, which %s counts per registration, so the region has a registration of its own, on the memory of the first start",
				buf.Pos, buf.Name, ErrRebindRemote, g.SliceString(p), s.p.Name())
		}
	}
	mr, err := r.pd.RegisterMR(m.Addr, m.Len, accessOf(buf))
	if err != nil {
		return fmt.Errorf("%s: rank %d: register buffer %s: %w", buf.Pos, rank, buf.Name, err)
	}
	old := r.mrs[b]
	s.d.relocate(rank, func(e *nic.SGE) { moveSGE(e, old, mr) })
	r.mrs[b] = mr
	s.mem.bufs[rank][b] = mr.Bytes()[:buf.Bytes()]
	if remote {
		if allLocal { // every rank's work requests are here: move them now
			s.moveRemote(rank, b, mr.Remote())
		} else {
			s.remoteMoved = true
		}
	}
	return old.Close()
}

// moveRemote points every local work request that addresses buffer b of peer at to, and
// records to as the peer's descriptor.
func (s *Session) moveRemote(peer int, b ir.BufID, to nic.RemoteMR) {
	eps := s.res[0].peers // one slice, shared by every local rank (setupRanks)
	from := eps[peer].MRs[b]
	if from == to {
		return
	}
	s.d.relocateRemote(peer, func(addr *uint64, rkey *uint32) {
		if *rkey == from.RKey && *addr >= from.Addr && *addr-from.Addr <= from.Len {
			*addr, *rkey = to.Addr+(*addr-from.Addr), to.RKey
		}
	})
	eps[peer].MRs[b] = to
}

// exchangeMoved hands every process's current memory descriptors round (Options.Exchange) after
// a rank rebound a remotely accessed buffer, and moves the work requests that address them.
func (s *Session) exchangeMoved(ctx context.Context) error {
	local := make([]Endpoint, len(s.res))
	for i, r := range s.res {
		local[i] = r.endpoint()
	}
	all, err := s.opts.Exchange(ctx, local)
	if err != nil {
		return fmt.Errorf("exchange rebound memory: %w", err)
	}
	g := s.plan.Graph
	for peer := range all {
		if peer >= g.Ranks || len(all[peer].MRs) < len(g.Buffers) {
			return fmt.Errorf("exchange rebound memory: rank %d sent %d memory descriptors, the plan has %d buffers", peer, len(all[peer].MRs), len(g.Buffers))
		}
		for b := range g.Buffers {
			s.moveRemote(peer, ir.BufID(b), all[peer].MRs[b])
		}
	}
	s.remoteMoved = false
	return nil
}

// moveRemoteWRs applies f to the remote address and key of every work request of the list.
func moveRemoteWRs(swr []nic.SendWR, f func(addr *uint64, rkey *uint32)) {
	for i := range swr {
		if swr[i].RKey != 0 || swr[i].RemoteAddr != 0 {
			f(&swr[i].RemoteAddr, &swr[i].RKey)
		}
	}
}

// moveSGE points e at the same offset of to when it names a range of from.
func moveSGE(e *nic.SGE, from, to nic.MR) {
	if e.Len == 0 && e.Addr == 0 || e.LKey != from.LKey() || e.Addr < from.Addr() || e.Addr-from.Addr() > uint64(len(from.Bytes())) {
		return
	}
	e.Addr, e.LKey = to.Addr()+(e.Addr-from.Addr()), to.LKey()
}

// moveWRs applies f to every local SGE of the work requests.
func moveWRs(swr []nic.SendWR, rwr []nic.RecvWR, f func(*nic.SGE)) {
	for i := range swr {
		f(&swr[i].Local)
		for j := range swr[i].More {
			f(&swr[i].More[j])
		}
	}
	for i := range rwr {
		f(&rwr[i].Local)
		for j := range rwr[i].More {
			f(&rwr[i].More[j])
		}
	}
}

// step runs one iteration on the memory as it is (no reset, no comparison with the
// reference): re-arm, prepost, the start barrier (Sync when set), the iteration, the end
// barrier. The start barrier keeps a peer's one-sided ops out of memory its owner has not
// started; the end barrier keeps a rank from reporting the iteration done while a peer may
// still read or write its memory (one-sided operations complete at the initiator only).
// Options.Unfenced drops either when the plan proves it unnecessary. In an Op's session
// (s.keep set) the step holds keep.mu, lets go of it during World calls, and ends a step
// without the end barrier when the plan's one-sided ops land before their target's iteration
// ends, lingering instead where the devices move only inside the host's calls (keeper).
func (s *Session) step(ctx context.Context) error {
	switch {
	case s.closed:
		return ErrSessionClosed
	case s.failed != nil:
		return fmt.Errorf("%w (%v): close and init again", ErrSessionFailed, firstLine(s.failed.Error()))
	}
	iter := s.done
	s.d.rearm(iter, false) // Start resets no buffer (gates.go: words)
	err := s.d.prepost()
	switch {
	case err != nil:
	case s.opts.Unfenced.Start && iter > 0:
		// (The first iteration keeps its barrier: it also waits until every process connected
		// its queues.)
	case s.opts.Sync != nil:
		// A barrier that also tells every process whether one rebound remotely accessed memory.
		var flags uint64
		if s.remoteMoved {
			flags = 1
		}
		if flags, err = s.sync(ctx, flags); err != nil {
			err = fmt.Errorf("iteration %d: barrier before the run: %w", iter, err)
		} else if flags&1 != 0 {
			err = s.exchangeMoved(ctx)
		}
	case s.opts.Barrier != nil:
		if err = s.worldBarrier(ctx); err != nil {
			err = fmt.Errorf("iteration %d: barrier before the run: %w", iter, err)
		}
	}
	if err == nil {
		err = s.d.iterate(ctx, iter)
	}
	if err == nil && s.opts.Barrier != nil {
		switch u := s.opts.Unfenced; {
		case s.keep != nil && u.EndDone:
		case s.keep != nil && u.EndLanded:
			// No peer touches this memory any more, but one may still need this process's
			// progress to complete what it did to it: linger until the next step's allgather,
			// after one drive now (what the last completions left to send goes at once).
			s.keep.linger(s.hang())
			for _, h := range s.keep.hp {
				if err = h.DriveProgress(); err != nil {
					break
				}
			}
		case s.keep == nil && s.endUnfenced():
		default:
			if err = s.worldBarrier(ctx); err != nil {
				err = fmt.Errorf("iteration %d: barrier after the run: %w", iter, err)
			}
		}
	}
	if err != nil {
		var h *HangError
		if errors.As(err, &h) {
			h.locate(s.plan)
		}
		s.failed = err
		return err
	}
	s.done++
	return nil
}

// hang is the session's hang timeout.
func (s *Session) hang() time.Duration {
	if s.opts.HangTimeout > 0 {
		return s.opts.HangTimeout
	}
	return DefaultHangTimeout
}

// sync runs Options.Sync. In an Op's session the keeper drives the devices meanwhile, and its
// return ends the lingering of the previous step: every process calls it only once its
// previous step completed, so no peer needs this process's progress for that step any more.
func (s *Session) sync(ctx context.Context, flags uint64) (uint64, error) {
	if s.keep == nil {
		return s.opts.Sync(ctx, flags)
	}
	var all uint64
	var err error
	s.keep.outside(func() { all, err = s.opts.Sync(ctx, flags) })
	if err == nil {
		s.keep.settle()
	}
	return all, err
}

// worldBarrier runs Options.Barrier: in an Op's session on this goroutine with the keeper
// driving the devices (its return settles the keeper, as sync's does), else with Session.barrier.
func (s *Session) worldBarrier(ctx context.Context) error {
	if s.keep == nil {
		return s.barrier(ctx)
	}
	s.keep.linger(s.hang())
	var err error
	s.keep.outside(func() { err = s.opts.Barrier(ctx) })
	if err == nil {
		s.keep.settle()
	}
	return err
}

// endUnfenced says whether a step of Session.Run's kind (no keeper) may end without its
// barrier (Unfenced.EndLanded).
func (s *Session) endUnfenced() bool {
	u := s.opts.Unfenced
	if u.EndDone || !u.EndLanded {
		return u.EndDone
	}
	for _, r := range s.res {
		if _, ok := r.dev.(nic.HostProgress); ok {
			return false
		}
	}
	return true
}

// Op is a persistent operation: a plan made ready on a provider, run one iteration per Start
// on the memory as it is, in the background. Start returns at once and allocates nothing; Test
// and Wait report the iteration's end. The first Start prepares the session (opens the ranks,
// registers the bound memory, connects the queues through Options.Exchange), so it is
// collective like every later one. An Op is used by one goroutine at a time, except Close.
//
// Who runs a start: whichever claims it first, a Wait whose ctx cannot end, which then runs it
// on the caller's thread (no hand-off to another thread and back on the critical path), or the
// background goroutine, which claims a start left unclaimed for a whole tick of its loop
// (Op.loop; Start wakes the loop only when it sleeps, after activeWindow without a start).
// Either runs it to its end, so a started iteration never waits for its process to call Wait
// (a peer may wait for it while this process does something else), unless the Op runs alone.
type Op struct {
	plan   *ir.Plan
	p      nic.Provider
	opts   Options
	engine Engine
	ranks  []int

	bound [][]Region // by rank of the plan (nil: not local), by buffer
	ready bool       // every extern buffer of the local ranks is bound
	s     *Session   // set by the first iteration (under keep.mu)
	keep  keeper

	state atomic.Int32 // opIdle, opRunning, opClosing, opClosed
	// abandoned: Close came while a start was in flight; its Wait and Test say so.
	abandoned atomic.Bool
	claim     atomic.Int32  // 0: the start in flight waits for a runner; 1: claimed (or none)
	gen       atomic.Uint64 // starts made
	// lastStart: when the last start was made (keeper time); ticking: the background goroutine
	// looks for an unclaimed start within a tick (Start need not wake it).
	lastStart atomic.Int64
	ticking   atomic.Bool
	ticks     atomic.Uint64 // the loop's ticks (Op.Ticks)
	alone     bool          // the Op runs every rank of the plan, or Options.WaitProgress: Start wakes nobody
	iterLimit uint64        // the most iterations the plan's counters allow (ir.Plan.CounterLimit)
	words     ir.WordLimit  // the watched word that limits its iterations (ir.Graph.WordLimit)
	byWait    bool          // the last start ran on the goroutine of its Wait
	inline    sync.Mutex    // held while Wait runs an iteration on the caller's goroutine
	kick      chan struct{}
	done      chan error
	quit      chan struct{}
	exited    chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
	sched     schedPass // the caller's goroutine, between the starts it runs inline
	failed    error     // what ended a start: every later Start returns it
	starts    int
	once      sync.Once
}

const (
	opIdle int32 = iota
	opRunning
	opClosing // Fence: the last World call before Close
	opClosed
)

// NewOp readies a persistent operation of plan on p: it checks the options and starts the
// background goroutine; the NIC is touched only by the first Start. opts.Iters, Reference,
// OnIteration and Timeline are not used; opts.Bound is replaced by the Op's own bindings.
func NewOp(plan *ir.Plan, p nic.Provider, opts Options) (*Op, error) {
	if plan == nil || plan.Graph == nil || p == nil {
		return nil, errors.New("persistent operation: need a compiled plan and a provider")
	}
	g := plan.Graph
	engine, err := engineFor(opts.Engine, plan.Target, p.Caps())
	if err != nil {
		return nil, err
	}
	if err := CheckOrder(plan, p.Caps()); err != nil {
		return nil, err
	}
	opts.Engine = engine
	ranks := opts.Ranks
	if ranks == nil {
		for r := 0; r < g.Ranks; r++ {
			ranks = append(ranks, r)
		}
	}
	o := &Op{plan: plan, p: p, engine: engine, ranks: ranks, bound: make([][]Region, g.Ranks),
		kick: make(chan struct{}, 1), done: make(chan error, 1), quit: make(chan struct{}), exited: make(chan struct{})}
	for _, r := range ranks {
		if r < 0 || r >= g.Ranks {
			return nil, fmt.Errorf("rank %d is not in the plan (ranks 0..%d)", r, g.Ranks-1)
		}
		o.bound[r] = make([]Region, len(g.Buffers))
	}
	opts.Bound = func(rank int, b ir.BufID) (Region, bool) {
		m := o.bound[rank][b]
		return m, m.Addr != nil
	}
	opts.Timeline, opts.OnIteration = false, nil
	o.opts = opts
	o.alone = len(ranks) == g.Ranks || opts.WaitProgress
	o.iterLimit = ir.NoIterationLimit
	if lim, ok := plan.CounterLimit(); ok {
		o.iterLimit = lim.Iterations
	}
	o.words = g.WordLimit()
	o.claim.Store(1)
	o.keep.base = time.Now()
	o.ctx, o.cancel = context.WithCancel(context.Background())
	go o.loop()
	return o, nil
}

// Engine is the engine the Op runs (never Auto).
func (o *Op) Engine() Engine { return o.engine }

// Starts is the number of iterations completed.
func (o *Op) Starts() int { return o.starts }

// Ticks is how many times the background goroutine has woken on its timer (Op.loop): each is
// a thread woken, CPU taken from the process's peers where processes outnumber cores.
func (o *Op) Ticks() uint64 { return o.ticks.Load() }

// Bind gives the memory of extern buffer b on local rank: before the first Start it is
// recorded (the first Start registers it); after, the session rebinds it (Session.Rebind).
func (o *Op) Bind(rank int, b ir.BufID, m Region) error {
	switch o.state.Load() {
	case opRunning:
		return fmt.Errorf("bind: %w: wait for it first", ErrInFlight)
	case opClosing, opClosed:
		return fmt.Errorf("bind: %w", ErrSessionClosed)
	}
	if rank < 0 || rank >= len(o.bound) || o.bound[rank] == nil || b < 0 || int(b) >= len(o.bound[rank]) {
		return fmt.Errorf("bind: rank %d buffer #%d is not run here", rank, b)
	}
	if err := fits(&o.plan.Graph.Buffers[b], m); err != nil {
		return err
	}
	o.keep.mu.Lock() // the keeper may be driving the devices
	defer o.keep.mu.Unlock()
	if o.s != nil {
		if err := o.s.Rebind(rank, b, m); err != nil {
			return err
		}
	}
	o.bound[rank][b] = m
	return nil
}

// checkBound names the first extern buffer of a local rank that is not bound.
func (o *Op) checkBound() error {
	g := o.plan.Graph
	for _, r := range o.ranks {
		for i := range g.Buffers {
			if b := &g.Buffers[i]; b.Extern && o.bound[r][i].Addr == nil {
				return fmt.Errorf("%s: %w: buffer %s on rank %d: bind it before the first start", b.Pos, ErrUnbound, b.Name, r)
			}
		}
	}
	return nil
}

// Start starts one iteration and returns at once: the caller's Wait runs it if it claims it
// first, else the background goroutine, within a tick or two (see Op).
func (o *Op) Start() error {
	if st := o.state.Load(); st == opClosed || st == opClosing {
		return fmt.Errorf("start: %w", ErrSessionClosed) // before what the Op would say if open
	}
	if o.failed != nil {
		return fmt.Errorf("start: %w", o.failed)
	}
	if !o.ready {
		if err := o.checkBound(); err != nil {
			return err
		}
		o.ready = true
	}
	// A triggered plan's counters are never reset: its iterations are bounded (the bound is
	// worked out once, in NewOp: CheckIterations walks the plan's work and allocates).
	if uint64(o.starts)+1 > o.iterLimit {
		if err := o.plan.CheckIterations(uint64(o.starts) + 1); err != nil {
			return fmt.Errorf("start: %w", err)
		}
	}
	// Nor is a buffer: a watched word grows by its adds every start, and the start that would
	// take it past its type's largest value, wrapping it, is refused (its wait would hang or
	// complete too early). The bound is the same in every process of the plan.
	if err := o.words.Check(o.plan.Graph, uint64(o.starts)+1); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if !o.state.CompareAndSwap(opIdle, opRunning) {
		if st := o.state.Load(); st == opClosed || st == opClosing {
			return fmt.Errorf("start: %w", ErrSessionClosed)
		}
		return fmt.Errorf("start: %w: wait for it first", ErrInFlight)
	}
	o.gen.Add(1)
	o.lastStart.Store(o.keep.now())
	o.claim.Store(0)
	if !o.alone && !o.ticking.Load() {
		// The loop sleeps: wake it, so that the start runs even if this process does not Wait
		// (it ticks from now on; while it ticks it finds the start by itself).
		o.wake()
	}
	return nil
}

// wake tells the background goroutine to look for a start to claim and to keep the keeper
// ticking. It never blocks: a wake not yet seen serves.
func (o *Op) wake() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// runInline runs the start in flight, claimed, on the caller's goroutine. Close waits for it
// (inline) before it releases the session.
func (o *Op) runInline() error {
	o.inline.Lock()
	defer o.inline.Unlock()
	if o.state.Load() == opClosed {
		return o.finish(fmt.Errorf("wait: %w during the start", ErrSessionClosed))
	}
	err := o.iteration()
	if o.keep.lingering() {
		o.wake() // the keeper ticks in the background goroutine
	}
	o.byWait = true
	o.sched.at(time.Now())
	return o.finish(err)
}

// finish records the end of the start in flight.
func (o *Op) finish(err error) error {
	if err != nil && o.state.Load() == opClosed {
		err = fmt.Errorf("%w during the start: %w", ErrSessionClosed, err)
	}
	if err != nil {
		o.failed = err
	} else {
		o.starts++
	}
	o.state.CompareAndSwap(opRunning, opIdle)
	return err
}

// Test reports whether the start in flight is done (true when none is). A start nobody
// claimed goes to the background goroutine, which runs it while the caller does other work.
func (o *Op) Test() (bool, error) {
	if o.state.Load() != opRunning {
		return true, o.ended("test")
	}
	o.wake()
	select {
	case err := <-o.done:
		o.byWait = false
		return true, o.finish(err)
	default:
		return false, nil
	}
}

// Wait waits for the start in flight, or until ctx ends. A start no runner claimed yet runs
// here, on the caller's goroutine, provided ctx cannot end (ctx.Done() == nil): an iteration
// cannot be abandoned halfway. Otherwise the background goroutine runs it (when the Op runs
// alone, a start is handed to it only by Test or such a Wait).
func (o *Op) Wait(ctx context.Context) error {
	if o.state.Load() != opRunning {
		return o.ended("wait")
	}
	if ctx.Done() == nil && o.claim.CompareAndSwap(0, 1) {
		return o.runInline()
	}
	o.wake()
	select {
	case err := <-o.done:
		o.byWait = false
		return o.finish(err)
	case <-o.exited:
		return fmt.Errorf("wait: %w during the start", ErrSessionClosed)
	case <-ctx.Done():
		select { // a start that ended as ctx did: its result, not the deadline
		case err := <-o.done:
			o.byWait = false
			return o.finish(err)
		default:
		}
		return fmt.Errorf("wait: %w: %w (it goes on: wait again, or close)", ctx.Err(), ErrInFlight)
	}
}

// ended is what Wait and Test report when no start is in flight: nothing, unless Close
// abandoned the last one.
func (o *Op) ended(what string) error {
	if o.abandoned.Load() {
		return fmt.Errorf("%s: %w: the start in flight was abandoned, its results are undefined", what, ErrSessionClosed)
	}
	return nil
}

// Fence, when no start is in flight and the last one ended without the end barrier while a
// peer may still need this process's progress (keeper), runs that barrier now, driving the
// devices meanwhile, so that no peer's start is left without the progress it needs when this
// process closes the Op. Every process that runs the plan's other ranks must then call it
// too (Close of the library's Coll does): it waits for them, at most the hang timeout. The Op
// takes no start after Fence: Close is next.
func (o *Op) Fence() error {
	if !o.state.CompareAndSwap(opIdle, opClosing) {
		return nil
	}
	o.keep.mu.Lock()
	s := o.s
	o.keep.mu.Unlock()
	if s == nil || o.failed != nil || o.opts.Barrier == nil || !o.keep.lingering() {
		return nil
	}
	o.wake()
	err := o.opts.Barrier(o.ctx)
	o.keep.settle()
	if err != nil {
		return fmt.Errorf("close: the barrier that lets every peer finish its last start: %w", err)
	}
	return nil
}

// Close stops the background goroutine, abandoning a start in flight (it is cancelled: the
// engine notices within a few thousand steps of its loop), and releases the session. A
// goroutine that does not stop within twice the hang timeout is left behind with its session
// (reported as an error), rather than freeing what it may still use.
func (o *Op) Close() error {
	var err error
	o.once.Do(func() {
		o.Closing()
		o.cancel()
		close(o.quit)
		hang := o.opts.HangTimeout
		if hang <= 0 {
			hang = DefaultHangTimeout
		}
		limit := 2 * hang
		if limit < hang { // overflowed
			limit = hang
		}
		stuck := fmt.Errorf("%w: the start in flight did not stop within %v: its queues and memory are left allocated", ErrHang, limit)
		t := time.NewTimer(limit)
		defer t.Stop()
		select {
		case <-o.exited:
		case <-t.C:
			err = stuck
			return
		}
		for !o.inline.TryLock() { // a Wait running the start on its goroutine (cancelled)
			select {
			case <-t.C:
				err = stuck
				return
			case <-time.After(time.Millisecond):
			}
		}
		defer o.inline.Unlock()
		if o.s != nil {
			err = o.s.Close()
		}
	})
	return err
}

// activeWindow is how long after a start the background goroutine keeps ticking, so that the
// next start need not wake it (a wake costs a thread switch on the critical path, hundreds of
// microseconds when processes outnumber cores).
const activeWindow = 100 * time.Millisecond

// idleTick is the background goroutine's tick while its process's Waits run its starts and
// the keeper does not linger (Op.loop). A tick is a timer that wakes a thread: every
// millisecond, with processes outnumbering cores, that took CPU from the peers the iterations
// wait for. It bounds how long a start waits for the loop when the process stops waiting for
// its starts at once.
const idleTick = 50 * time.Millisecond

// Closing marks the Op as closing, ahead of Close, for a caller that must first unblock the
// start in flight by means of its own (the library closes its World's context): that start's
// error then reads as closed during the start, not as the means' error. Close calls it too.
func (o *Op) Closing() {
	if o.state.Swap(opClosed) == opRunning {
		o.abandoned.Store(true)
	}
}

// loop is the background goroutine: it runs the starts it claims, and ticks while the keeper
// lingers or a start was made within activeWindow. A tick claims a start nobody claimed for a
// whole tick (its process did not Wait: it computes, or waits for something else), so a start
// always runs within a tick or two without its Wait, and Start never has to wake the loop while
// it ticks. The tick is lingerTick while the keeper lingers, after the loop ran the last start
// (the process leaves its starts to it) and after a tick that found a start unclaimed;
// idleTick while the process's own Waits run its starts.
func (o *Op) loop() {
	defer close(o.exited)
	_, soft := o.p.(nic.Progresser)
	tick := time.NewTimer(lingerTick)
	tick.Stop()
	armed := false
	period := lingerTick // of the armed tick
	var seen uint64      // the start a tick found unclaimed
	ran := ^uint64(0)    // the last start this loop ran
	sighted := false     // the last tick found a start unclaimed
	run := func() {
		if !soft {
			// A NIC that moves by itself is polled in a tight loop of short C calls: a locked
			// thread keeps the scheduler from moving the loop between threads (see
			// Session.RunTimed).
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
		}
		ran = o.gen.Load()
		o.done <- o.iteration()
	}
	for {
		want := o.keep.lingering() || !o.alone && (o.claim.Load() == 0 || o.keep.now()-o.lastStart.Load() < int64(activeWindow))
		o.ticking.Store(want)
		if !want && !o.alone && o.claim.Load() == 0 {
			continue // a Start saw the loop ticking as it stopped (Start and Op.ticking)
		}
		p := idleTick
		if sighted || ran == o.gen.Load() || o.keep.lingering() {
			p = lingerTick
		}
		if want && (!armed || p < period) {
			tick.Reset(p)
			armed, period = true, p
		} else if !want && armed {
			tick.Stop()
			armed = false
		}
		select {
		case <-o.quit:
			return
		case <-o.kick:
			if o.claim.CompareAndSwap(0, 1) {
				run()
			}
		case <-tick.C:
			armed, sighted = false, false
			o.ticks.Add(1)
			if !o.alone && o.claim.Load() == 0 {
				if g := o.gen.Load(); g != seen {
					sighted = true
					seen = g // unclaimed for less than a tick: Wait may come
				} else if o.claim.CompareAndSwap(0, 1) {
					run()
				}
			}
			o.keep.tick()
		}
	}
}

// iteration runs one start: the first prepares the session.
func (o *Op) iteration() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPanic, r, debug.Stack())
		}
	}()
	o.keep.mu.Lock()
	defer o.keep.mu.Unlock()
	if o.s == nil {
		s, err := prepare(o.ctx, o.plan, o.p, o.opts, false)
		if err != nil {
			return err
		}
		for _, r := range s.res {
			if h, ok := r.dev.(nic.HostProgress); ok {
				o.keep.hp = append(o.keep.hp, h)
			}
		}
		s.keep = &o.keep
		o.s = s
	}
	return o.s.step(o.ctx)
}
