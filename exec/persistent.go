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
	if int64(m.Len) != buf.Bytes() {
		return fmt.Errorf("%s: buffer %s is %d bytes, the region %d", buf.Pos, buf.Name, buf.Bytes(), m.Len)
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
		if peer >= g.Ranks || len(all[peer].MRs) != len(g.Buffers) {
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
// Options.Unfenced drops either when the plan proves it unnecessary.
func (s *Session) step(ctx context.Context) error {
	switch {
	case s.closed:
		return ErrSessionClosed
	case s.failed != nil:
		return fmt.Errorf("%w (%v): close and init again", ErrSessionFailed, firstLine(s.failed.Error()))
	}
	iter := s.done
	s.d.rearm(iter)
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
		if flags, err = s.opts.Sync(ctx, flags); err != nil {
			err = fmt.Errorf("iteration %d: barrier before the run: %w", iter, err)
		} else if flags&1 != 0 {
			err = s.exchangeMoved(ctx)
		}
	case s.opts.Barrier != nil:
		if err = s.barrier(ctx); err != nil {
			err = fmt.Errorf("iteration %d: barrier before the run: %w", iter, err)
		}
	}
	if err == nil {
		err = s.d.iterate(ctx, iter)
	}
	if err == nil && s.opts.Barrier != nil && !s.endUnfenced() {
		if err = s.barrier(ctx); err != nil {
			err = fmt.Errorf("iteration %d: barrier after the run: %w", iter, err)
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

// endUnfenced says whether a step may end without its barrier (Unfenced.EndLanded).
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
type Op struct {
	plan   *ir.Plan
	p      nic.Provider
	opts   Options
	engine Engine
	ranks  []int

	bound [][]Region // by rank of the plan (nil: not local), by buffer
	ready bool       // every extern buffer of the local ranks is bound
	s     *Session   // set by the background goroutine's first iteration

	state  atomic.Int32  // opIdle, opRunning, opClosed
	alone  bool          // the Op runs every rank of the plan, or Options.WaitProgress: Wait runs a start
	handed bool          // the start in flight went to the background goroutine
	inline chan struct{} // held while Wait runs an iteration on the caller's goroutine
	kick   chan struct{}
	done   chan error
	quit   chan struct{}
	exited chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	failed error // what ended a start: every later Start returns it
	starts int
	once   sync.Once
}

const (
	opIdle int32 = iota
	opRunning
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
		inline: make(chan struct{}, 1), kick: make(chan struct{}, 1), done: make(chan error, 1), quit: make(chan struct{}), exited: make(chan struct{})}
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
	o.ctx, o.cancel = context.WithCancel(context.Background())
	go o.loop()
	return o, nil
}

// Engine is the engine the Op runs (never Auto).
func (o *Op) Engine() Engine { return o.engine }

// Starts is the number of iterations completed.
func (o *Op) Starts() int { return o.starts }

// Bind gives the memory of extern buffer b on local rank: before the first Start it is
// recorded (the first Start registers it); after, the session rebinds it (Session.Rebind).
func (o *Op) Bind(rank int, b ir.BufID, m Region) error {
	switch o.state.Load() {
	case opRunning:
		return fmt.Errorf("bind: %w: wait for it first", ErrInFlight)
	case opClosed:
		return fmt.Errorf("bind: %w", ErrSessionClosed)
	}
	if rank < 0 || rank >= len(o.bound) || o.bound[rank] == nil || b < 0 || int(b) >= len(o.bound[rank]) {
		return fmt.Errorf("bind: rank %d buffer #%d is not run here", rank, b)
	}
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

// Start starts one iteration and returns at once: the background goroutine runs it, or, when
// the Op runs every rank of the plan, Wait runs it on the caller's goroutine (see Wait).
func (o *Op) Start() error {
	if o.failed != nil {
		return fmt.Errorf("start: %w", o.failed)
	}
	if !o.ready {
		if err := o.checkBound(); err != nil {
			return err
		}
		o.ready = true
	}
	// A triggered plan's counters are never reset: its iterations are bounded.
	if err := o.plan.CheckIterations(uint64(o.starts) + 1); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if !o.state.CompareAndSwap(opIdle, opRunning) {
		if o.state.Load() == opClosed {
			return fmt.Errorf("start: %w", ErrSessionClosed)
		}
		return fmt.Errorf("start: %w: wait for it first", ErrInFlight)
	}
	o.handed = false
	if !o.alone {
		o.handOff()
	}
	return nil
}

// handOff gives the start in flight to the background goroutine, once.
func (o *Op) handOff() {
	if !o.handed {
		o.handed = true
		o.kick <- struct{}{}
	}
}

// runInline runs the start in flight on the caller's goroutine: no hand-off to the background
// goroutine and back. Close waits for it (inline) before it releases the session.
func (o *Op) runInline() error {
	o.inline <- struct{}{}
	defer func() { <-o.inline }()
	if o.state.Load() == opClosed {
		return o.finish(fmt.Errorf("wait: %w during the start", ErrSessionClosed))
	}
	return o.finish(o.iteration())
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

// Test reports whether the start in flight is done (true when none is). The first Test of a
// start hands it to the background goroutine, which runs it while the caller does other work.
func (o *Op) Test() (bool, error) {
	if o.state.Load() != opRunning {
		return true, nil
	}
	o.handOff()
	select {
	case err := <-o.done:
		return true, o.finish(err)
	default:
		return false, nil
	}
}

// Wait waits for the start in flight, or until ctx ends. When the Op runs every rank of the
// plan, a start no Test handed to the background runs here, on the caller's goroutine (no
// hand-off to the background goroutine and back), provided ctx cannot end (ctx.Done() == nil):
// an iteration cannot be abandoned halfway. Such an iteration depends on no other process, so
// running it at Wait rather than at Start cannot stall a peer. When peers run other ranks it
// goes to the background: a peer may wait for this start's progress while this process waits
// for another Coll (several in flight, waited in another order by each process), unless
// Options.WaitProgress says every process waits in one order.
func (o *Op) Wait(ctx context.Context) error {
	if o.state.Load() != opRunning {
		return nil
	}
	if o.alone && !o.handed && ctx.Done() == nil {
		return o.runInline()
	}
	o.handOff()
	select {
	case err := <-o.done:
		return o.finish(err)
	case <-o.exited:
		return fmt.Errorf("wait: %w during the start", ErrSessionClosed)
	case <-ctx.Done():
		return fmt.Errorf("wait: %w (the start goes on: wait again, or close)", ctx.Err())
	}
}

// Close stops the background goroutine, abandoning a start in flight (it is cancelled: a
// hardware NIC's engine notices within its polling rounds), and releases the session. A
// goroutine that does not stop within twice the hang timeout is left behind with its session
// (reported as an error), rather than freeing what it may still use.
func (o *Op) Close() error {
	var err error
	o.once.Do(func() {
		o.state.Store(opClosed)
		o.cancel()
		close(o.quit)
		hang := o.opts.HangTimeout
		if hang <= 0 {
			hang = DefaultHangTimeout
		}
		t := time.NewTimer(2 * hang)
		defer t.Stop()
		select {
		case <-o.exited:
		case <-t.C:
			err = fmt.Errorf("close: the start in flight did not stop within %v: its queues and memory are left allocated", 2*hang)
			return
		}
		select { // a Wait running the start on its goroutine
		case o.inline <- struct{}{}:
			defer func() { <-o.inline }()
		case <-t.C:
			err = fmt.Errorf("close: the start in flight did not stop within %v: its queues and memory are left allocated", 2*hang)
			return
		}
		if o.s != nil {
			err = o.s.Close()
		}
	})
	return err
}

// loop is the background goroutine: one iteration per kick.
func (o *Op) loop() {
	defer close(o.exited)
	if _, soft := o.p.(nic.Progresser); !soft {
		// A NIC that moves by itself is polled in a tight loop of short C calls: a locked thread
		// keeps the scheduler from moving the loop between threads (see Session.RunTimed).
		runtime.LockOSThread()
	}
	for {
		select {
		case <-o.quit:
			return
		case <-o.kick:
		}
		o.done <- o.iteration()
	}
}

// iteration runs one start: the first prepares the session.
func (o *Op) iteration() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPanic, r, debug.Stack())
		}
	}()
	if o.s == nil {
		s, err := prepare(o.ctx, o.plan, o.p, o.opts, false)
		if err != nil {
			return err
		}
		o.s = s
	}
	return o.s.step(o.ctx)
}
