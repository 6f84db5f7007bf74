package exec

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/ir"
)

// Engine selects who walks the dependency graph during a run.
type Engine uint8

// Engines.
const (
	// Auto picks Offload when the NIC and the plan's target have cross-channel, else Poll (see Select).
	Auto Engine = iota
	// Offload posts every rank's compiled chains, WAIT and ENABLE entries included, and lets the
	// NIC walk them; the CPU only runs HOST steps and re-arms between iterations.
	Offload
	// Poll keeps per-op dependency counters on the CPU and posts each WQE when its
	// predecessors have completed.
	Poll
)

var engineNames = [...]string{"auto", "offload", "poll"}

func (e Engine) String() string {
	if int(e) < len(engineNames) {
		return engineNames[e]
	}
	return fmt.Sprintf("Engine(%d)", e)
}

// ParseEngine maps "auto", "offload" or "poll" to an Engine.
func ParseEngine(s string) (Engine, error) {
	for i, n := range engineNames {
		if n == s {
			return Engine(i), nil
		}
	}
	return Auto, &SelectError{Engine: Auto, Err: ErrUnknownEngine, msg: fmt.Sprintf("unknown engine %q (use auto, offload or poll)", s)}
}

// DefaultHangTimeout bounds how long a run may make no progress before it ends with a
// HangError. A software provider's stall is detected at once; the timeout is for hardware.
const DefaultHangTimeout = 10 * time.Second

// Options tune a Session (Prepare) and the convenience Run.
type Options struct {
	// Engine runs the plan; Auto picks by the plan's target and the NIC's caps, as Select does.
	Engine Engine
	// Iters is the number of iterations Run runs (default 1); Session.Run takes its own count.
	// Buffers are reset to their init values before each one, outside the timed region.
	Iters int
	// Seed varies the order in which the polling engine scans completion queues, so different
	// seeds exercise different host-side interleavings (the software NIC has its own seed).
	Seed uint64
	// HangTimeout: a run that makes no progress for this long ends with a *HangError
	// (DefaultHangTimeout when zero).
	HangTimeout time.Duration
	// Ranks lists the ranks this process runs; nil means every rank of the plan. A provider that
	// owns one rank per process runs with Ranks = []int{r} and Exchange and Barrier set.
	Ranks []int
	// Exchange hands this process's endpoints to the other processes and returns the endpoints
	// of all ranks, indexed by rank. Nil when every rank is local.
	Exchange func(ctx context.Context, local []Endpoint) ([]Endpoint, error)
	// Barrier synchronises all processes; Session.Run calls it after resetting buffers and after
	// each iteration, so no peer writes into a buffer that is being reset. Nil when every rank is
	// local.
	Barrier func(ctx context.Context) error
	// Sync, when set, is the barrier an Op's step starts with (instead of Barrier): it also ORs
	// flags over every process, which tells them all that one rebound a remotely accessed
	// buffer (Session.Rebind), so that all hand their memory descriptors round (Exchange).
	Sync func(ctx context.Context, flags uint64) (uint64, error)
	// WaitProgress: Wait runs an Op's start on the caller's goroutine even when peers run
	// other ranks (as an Op that runs every rank always does). The caller then promises what
	// MPI's blocking collectives ask: every process waits for its Ops' starts in one order, as
	// a peer's start moves only while its process waits for it.
	WaitProgress bool
	// Unfenced says which barriers of an Op's step the plan makes unnecessary
	// (planner/verify.Fences); Session.Run keeps them all (it resets memory between iterations).
	Unfenced Unfenced
	// Reference is the expected memory (from Reference); computed when nil.
	Reference *Memory
	// OnIteration, when set, is called after each iteration with the number done and the total
	// (for progress bars). It runs outside the timed region.
	OnIteration func(done, total int)
	// QuietRuntime, with a NIC that progresses by itself, lowers the scheduling priority of the
	// process's other threads to nice 19 while Run polls (Linux; elsewhere it does nothing). The
	// Go runtime's monitor thread wakes about a thousand times a second while a goroutine lives in
	// C calls, and each wake preempts the polling thread when both share a CPU (a rank bound to a
	// core); on Soft-RoCE that made a ping-pong hop about twice as slow. Raising the priority
	// back needs CAP_SYS_NICE or RLIMIT_NICE, so without them those threads stay at nice 19
	// after Run. coredag run sets it for real NICs.
	QuietRuntime bool
	// NoTriggers keeps the polling engine from arming QP triggers (TriggerQP): every post then
	// comes from the engine's loop. For measuring what triggers bring.
	NoTriggers bool
	// Bound gives the caller's memory of extern buffers (ir.Buffer.Extern): Prepare registers it
	// instead of allocating. Nil, or a buffer it gives no memory for: allocated as any other
	// (coredag's own runs fill extern buffers from their init like the rest).
	Bound Bound
	// Timeline records, in every iteration, when each local op completed (Result.Timeline: 8
	// bytes per op of the plan per iteration). The polling engine records it; the offload engine
	// cannot, since the NIC walks its chains without telling the CPU.
	Timeline bool
}

// Verdict says whether one rank's memory equals the reference after the last iteration.
type Verdict struct {
	Rank       int
	OK         bool
	Mismatches []Mismatch
}

// Latency summarises the wall time of the iterations.
type Latency struct {
	Min, Median, P99, Max time.Duration
	All                   []time.Duration // in iteration order
}

// Result is what a run did and whether it computed the right thing.
type Result struct {
	Engine   Engine // the engine that ran (never Auto)
	Provider string
	Target   string
	Iters    int
	OK       bool      // every local rank's memory equals the reference
	Verdicts []Verdict // one per local rank, in rank order
	Latency  Latency
	// Counters over all iterations and local ranks.
	WQEsPosted uint64 // work requests posted (data, NOP, WAIT, ENABLE)
	// Triggered counts the WQEsPosted that QP triggers posted inside a poll (TriggerQP).
	Triggered  uint64
	CQEsPolled uint64
	Waits      uint64 // CQE_WAIT entries executed (offload)
	Enables    uint64 // SEND_EN and RECV_EN entries executed (offload)
	HostSteps  uint64 // host ops run on the CPU
	RNRRetries uint64
	Blocks     uint64  // waits for a completion asleep in the kernel (nic.Blocker, poll engine)
	Memory     *Memory // the final memory (local ranks only)
	// Timeline, with Options.Timeline, holds by iteration and by op ID when each local op
	// completed, from the start of its iteration: when the driver found the completion that
	// covers it (stamped by the driver where it can, StampCQ) or when its host step ran. Ops that
	// did not complete here (other processes' ranks, or past a failure) are -1.
	Timeline [][]time.Duration
}

// Unfenced lists the barriers of an Op's step (Options.Barrier, Options.Sync) that the plan
// makes unnecessary.
type Unfenced struct {
	// Start: every one-sided op into a rank's memory starts after an op of that rank in the same
	// iteration, so no peer touches memory its owner has not started, and no extern buffer is
	// accessed one-sidedly (whose rebinding the start barrier tells every process). The step
	// begins without a barrier.
	Start bool
	// EndLanded: every one-sided op into a rank's memory lands before an op of that rank ends, so
	// no peer touches a rank's memory once its iteration ended. The step ends without a barrier,
	// unless a local device moves data only inside the host's calls (nic.HostProgress) and
	// EndDone is false: the peers' ops may still need this rank's progress to complete.
	EndLanded bool
	// EndDone: every such op also completes at its initiator before an op of the target ends.
	EndDone bool
}

// driver is an engine bound to a set's resources.
type driver interface {
	// rearm resets the engine's state for iteration iter (outside the timed region); fresh says
	// the memory was just reset to its inits.
	rearm(iter int, fresh bool)
	// prepost posts what waits for nothing and must be in place before any peer starts (the
	// receives of the polling engine), after rearm and before the start barrier.
	prepost() error
	// iterate runs one iteration to completion.
	iterate(ctx context.Context, iter int) error
	// counters moves the engine's own counters, since the last call, into r.
	counters(r *Result)
	// timeline returns when each op completed in the last iteration (Options.Timeline), by op
	// ID, from the iteration's start; -1 for ops that did not complete.
	timeline() []time.Duration
	// relocate applies move to the local SGE of every prebuilt work request of rank (a buffer
	// rebound to other memory, Session.Rebind).
	relocate(rank int, move func(*nic.SGE))
	// relocateRemote applies move to the remote address and key of every prebuilt work request
	// that addresses peer's memory (a peer's buffer rebound).
	relocateRemote(peer int, move func(addr *uint64, rkey *uint32))
}

// Session is a compiled plan made ready to run on a provider: every local rank's device is open,
// its buffers registered, its queues created and connected, and the engine built with its work
// requests. Prepare does that once; Run runs iterations on it as often as the caller likes, each
// Run re-arming the prebuilt chains and counters as the next iteration of the same persistent
// operation; Close releases everything. A Session is used by one goroutine at a time.
type Session struct {
	plan   *ir.Plan
	p      nic.Provider
	opts   Options
	engine Engine
	ranks  []int
	ref    *Memory
	res    []*rankRes
	mem    *Memory
	d      driver
	done   int // iterations run so far: re-arming goes on from there
	// remoteMoved: a remotely accessed buffer was rebound; the next step hands its new
	// descriptor to the other processes (Rebind, Options.Sync).
	remoteMoved bool
	failed      error // what ended an earlier Run: the queues are in no state to go on
	closed      bool
	// keep: the Op's keeper (nil for Session.Run): steps hold keep.mu, let go of it around
	// World calls, and leave the keeper lingering when they end without a barrier.
	keep *keeper
}

// ErrSessionClosed is returned by Run on a closed Session.
var ErrSessionClosed = errors.New("session closed")

// ErrSessionFailed is wrapped by the error of a Run on a Session whose earlier Run failed (a
// fault or a hang leaves queues in the error state, or work posted that never ran): prepare a
// new Session.
var ErrSessionFailed = errors.New("an earlier run of this session failed")

// Prepare readies plan for running on provider p: it checks that the engine (opts.Engine, Auto
// picking as Select does) can run the plan's target on p, computes the reference memory unless
// opts.Reference gives it, opens every local rank (opts.Ranks), registers its buffers, creates
// its queues, exchanges connection information with the other processes (opts.Exchange) and
// connects them, and builds the engine. Run then runs iterations; Close releases the session.
// opts.Iters is not used (it is Run's argument). An error from the engine choice is a
// *SelectError.
func Prepare(ctx context.Context, plan *ir.Plan, p nic.Provider, opts Options) (*Session, error) {
	return prepare(ctx, plan, p, opts, true)
}

// prepare is Prepare; without withRef the session never compares (an Op's), and no reference
// is computed.
func prepare(ctx context.Context, plan *ir.Plan, p nic.Provider, opts Options, withRef bool) (*Session, error) {
	if plan == nil || plan.Graph == nil || p == nil {
		return nil, errors.New("prepare: need a compiled plan and a provider")
	}
	g := plan.Graph
	if opts.HangTimeout <= 0 {
		opts.HangTimeout = DefaultHangTimeout
	}
	ranks := opts.Ranks
	if ranks == nil {
		for r := 0; r < g.Ranks; r++ {
			ranks = append(ranks, r)
		}
	}
	ranks = slices.Clone(ranks)
	slices.Sort(ranks)
	for i, r := range ranks {
		if r < 0 || r >= g.Ranks {
			return nil, fmt.Errorf("run: rank %d is not in the plan (ranks 0..%d)", r, g.Ranks-1)
		}
		if i > 0 && ranks[i-1] == r {
			return nil, fmt.Errorf("run: rank %d is named twice in Options.Ranks", r)
		}
	}
	if len(ranks) < g.Ranks && (opts.Exchange == nil || opts.Barrier == nil) {
		return nil, fmt.Errorf("run: %d of %d ranks are local: Exchange and Barrier must connect the others", len(ranks), g.Ranks)
	}
	caps := p.Caps()
	engine, err := engineFor(opts.Engine, plan.Target, caps)
	if err != nil {
		return nil, err
	}
	if opts.NoTriggers && engine != Poll {
		return nil, fmt.Errorf("run: NoTriggers (--no-triggers) changes how the polling engine posts, and the %v engine runs this plan", engine)
	}
	if err := CheckOrder(plan, caps); err != nil {
		return nil, err
	}
	if opts.Timeline && engine != Poll {
		return nil, errors.New("run: a timeline needs the poll engine: on the offload engine the NIC walks the chains without telling the CPU when each op completes")
	}
	ref := opts.Reference
	if ref == nil && withRef {
		if ref, err = Reference(g); err != nil {
			return nil, err
		}
	}
	layout := func(rank int) (rankLayout, error) {
		var l rankLayout
		var err error
		if engine == Offload {
			l, err = offloadLayout(g, &plan.Ranks[rank])
		} else {
			l, err = pollLayout(plan, rank, caps)
		}
		// Inline payloads never exceed the target's limit: a QP with room for more has larger
		// WQEs for nothing (on Soft-RoCE, slower posts).
		l.maxInline = min(caps.MaxInline, plan.Target.MaxInline)
		if l.maxSGE = plan.MaxSGE(rank); err == nil && l.maxSGE > max(caps.MaxSGE, 1) {
			err = fmt.Errorf("rank %d: a scatter/gather list of %d slices, above the %d SGEs per work request of %s (split the op, or copy the pieces together first)", rank, l.maxSGE, max(caps.MaxSGE, 1), p.Name())
		}
		if err == nil {
			err = checkSGELen(plan, rank)
		}
		return l, err
	}
	res, err := setupRanks(ctx, p, g, ranks, layout, opts.Exchange, opts.Bound)
	if err != nil {
		return nil, err
	}
	s := &Session{plan: plan, p: p, opts: opts, engine: engine, ranks: ranks, ref: ref, res: res}
	fail := func(err error) (*Session, error) {
		return nil, tornDown(err, s.Close())
	}
	defer closeOnPanic(func() { _ = s.Close() })
	bufs := make([][][]byte, g.Ranks)
	for _, r := range res {
		bufs[r.rank] = make([][]byte, len(g.Buffers))
		for b, mr := range r.mrs {
			bufs[r.rank][b] = mr.Bytes()[:g.Buffers[b].Bytes()]
		}
	}
	if s.mem, err = NewMemoryFrom(g, bufs); err != nil {
		return fail(err)
	}
	// A watched word starts at its init, from which check proved its waits: Run resets it
	// before every iteration with the rest of the memory, but an Op's session resets no buffer
	// and would start it at zero. It is set before the first start's barrier, so before any
	// peer's add can land in it.
	if err = s.mem.initWords(ranks); err != nil {
		return fail(err)
	}
	if engine == Offload {
		s.d, err = newOffload(plan, s.mem, res, p, opts)
	} else {
		s.d, err = newPoll(plan, s.mem, res, p, opts)
	}
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// Engine is the engine the session runs (never Auto).
func (s *Session) Engine() Engine { return s.engine }

// Plan is the plan the session runs.
func (s *Session) Plan() *ir.Plan { return s.plan }

// Run runs iters iterations (at least 1) and compares the final memory with the reference.
// Buffers are reset to their init values before each iteration, outside the timed region; with
// opts.Barrier every process resets before any starts, so each process must call Run as often,
// with the same iters. Iterations are numbered over the session's life: a HangError's Iteration
// counts the iterations of earlier Runs too. A fault or a hang ends the run with an error (an
// *OpError or a *HangError) and leaves the session unusable but for Close; the Result, when not
// nil, holds what was measured up to then. So does ctx when it ends during an iteration: the
// engine looks at it every few thousand steps of its loop, and returns its cause
// (context.Cause). Ended before an iteration, ctx stops the run there. Result.Memory is the
// session's memory: the next Run overwrites it and Close releases it.
func (s *Session) Run(ctx context.Context, iters int) (*Result, error) {
	return s.RunTimed(ctx, iters, nil)
}

// RunTimed is Run with a hook in every iteration's timed region: timed, when not nil, is called
// with the iteration's work (after the reset, the re-arm and the start barrier), must call it
// once and return its error. Overlap runs a compute loop beside it; benchmarks time it and read
// CPU clocks around it, leaving the resets out.
func (s *Session) RunTimed(ctx context.Context, iters int, timed func(iterate func() error) error) (*Result, error) {
	switch {
	case s.closed:
		return nil, fmt.Errorf("run: %w", ErrSessionClosed)
	case s.failed != nil:
		return nil, fmt.Errorf("run: %w (%v): prepare a new session", ErrSessionFailed, firstLine(s.failed.Error()))
	case iters < 1:
		return nil, fmt.Errorf("run: %d iterations: need at least 1", iters)
	case s.ref == nil:
		return nil, errors.New("run: this session has no reference memory to compare with (an Op's session runs by Op.Start)")
	}
	// A triggered plan's counters are never reset: the session's iterations are bounded.
	if err := s.plan.CheckIterations(uint64(s.done) + uint64(iters)); err != nil {
		return nil, fmt.Errorf("run: %w (this session has run %d)", err, s.done)
	}
	plan, d, mem, opts := s.plan, s.d, s.mem, s.opts
	out := &Result{Engine: s.engine, Provider: s.p.Name(), Target: plan.Target.Name, Iters: iters, Memory: mem}
	var before nic.NICStats
	sr, _ := s.p.(nic.StatsReporter)
	if sr != nil {
		before = sr.NICStats()
	}
	if _, soft := s.p.(nic.Progresser); !soft {
		// A NIC that moves by itself is polled by this goroutine in a tight loop of short C calls
		// and long posts (a software device transfers inside ibv_post_send). Unlocked, the
		// scheduler hands the goroutine from thread to thread around the long calls, each move a
		// thread switch on the CPU the loop runs on; on Soft-RoCE a ping-pong hop took a third
		// longer.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if opts.QuietRuntime {
			defer quietOtherThreads()()
		}
	}
	lat := make([]time.Duration, 0, min(iters, 1<<16)) // grows past that: callers check Estimate first
	finish := func(err error) (*Result, error) {
		d.counters(out)
		if sr != nil {
			after := sr.NICStats()
			out.RNRRetries = after.RNRRetries - before.RNRRetries
			if s.engine == Offload {
				out.Waits = after.Waits - before.Waits
				out.Enables = after.Enables - before.Enables
			}
		}
		out.Latency = summarise(lat)
		if err != nil {
			s.failed = err
			var h *HangError
			if errors.As(err, &h) {
				h.locate(plan)
			}
			return out, err
		}
		out.OK = true
		// Diff lists mismatches in rank order and s.ranks is sorted: one pass pairs them.
		diff := mem.Diff(s.ref)
		for _, r := range s.ranks {
			v := Verdict{Rank: r, OK: true}
			for len(diff) > 0 && diff[0].Rank < r {
				diff = diff[1:]
			}
			for len(diff) > 0 && diff[0].Rank == r {
				v.OK = false
				v.Mismatches = append(v.Mismatches, diff[0])
				diff = diff[1:]
			}
			out.OK = out.OK && v.OK
			out.Verdicts = append(out.Verdicts, v)
		}
		return out, nil
	}
	for it := 0; it < iters; it++ {
		iter := s.done
		if ctx.Err() != nil { // before an iteration: none is started
			return finish(fmt.Errorf("iteration %d not started: %w", iter, context.Cause(ctx)))
		}
		for _, r := range s.ranks {
			if err := mem.Reset(r); err != nil {
				return finish(err)
			}
		}
		d.rearm(iter, true) // the memory was just reset
		if err := d.prepost(); err != nil {
			return finish(fmt.Errorf("iteration %d: %w", iter, err))
		}
		if opts.Barrier != nil {
			if err := s.barrier(ctx); err != nil {
				return finish(fmt.Errorf("iteration %d: barrier before the run: %w", iter, err))
			}
		}
		t0 := time.Now()
		var err error
		if timed != nil {
			err = timed(func() error { return d.iterate(ctx, iter) })
		} else {
			err = d.iterate(ctx, iter)
		}
		lat = append(lat, time.Since(t0))
		if opts.Timeline {
			out.Timeline = append(out.Timeline, slices.Clone(d.timeline()))
		}
		if err != nil {
			return finish(err)
		}
		s.done++
		if opts.Barrier != nil {
			if err := s.barrier(ctx); err != nil {
				return finish(fmt.Errorf("iteration %d: barrier after the run: %w", iter, err))
			}
		}
		if opts.OnIteration != nil {
			opts.OnIteration(it+1, iters)
		}
	}
	return finish(nil)
}

// Close releases every rank's queues, memory regions and device, and reports what the
// provider failed to release (each rank's objects are all tried). The memory of the last Result
// goes with them. Close is idempotent: a second Close reports nothing.
func (s *Session) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, r := range s.res {
		errs = append(errs, r.close())
	}
	return errors.Join(errs...)
}

// Run executes plan on provider p once: Prepare, opts.Iters iterations (at least 1) with
// Session.Run, Close. Plans run many times should be prepared once instead. Result.Memory
// outlives the run: memory a provider registered outside the Go heap (a real NIC's, which Close
// releases) is copied first.
func Run(ctx context.Context, plan *ir.Plan, p nic.Provider, opts Options) (res *Result, err error) {
	s, err := Prepare(ctx, plan, p, opts)
	if err != nil {
		return nil, err
	}
	defer func() { err = tornDown(err, s.Close()) }()
	res, err = s.Run(ctx, max(opts.Iters, 1))
	if _, inHeap := p.(nic.HostMemory); res != nil && res.Memory != nil && !inHeap {
		res.Memory = res.Memory.Clone()
	}
	return res, err
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func summarise(lat []time.Duration) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	p99 := (len(s)*99 + 99) / 100 // nearest rank
	return Latency{Min: s[0], Median: s[len(s)/2], P99: s[min(p99, len(s))-1], Max: s[len(s)-1], All: lat}
}

// Summary is a short human-readable account of the run, one line per fact.
func (r *Result) Summary() string {
	var sb strings.Builder
	verdict := "memory matches the reference on every rank"
	if !r.OK {
		verdict = "MISMATCH"
	}
	fmt.Fprintf(&sb, "%s engine on %s", r.Engine, r.Provider)
	if r.Target != "" {
		fmt.Fprintf(&sb, " (target %s)", r.Target)
	}
	fmt.Fprintf(&sb, ", %d iterations: %s\n", r.Iters, verdict)
	for _, v := range r.Verdicts {
		if !v.OK {
			for _, m := range v.Mismatches {
				fmt.Fprintf(&sb, "  %s\n", m)
			}
		}
	}
	fmt.Fprintf(&sb, "latency min %v median %v p99 %v\n", r.Latency.Min, r.Latency.Median, r.Latency.P99)
	fmt.Fprintf(&sb, "WQEs posted %d (%d by triggers), CQEs polled %d, WAITs %d, ENABLEs %d, host steps %d, RNR retries %d\n",
		r.WQEsPosted, r.Triggered, r.CQEsPolled, r.Waits, r.Enables, r.HostSteps, r.RNRRetries)
	return sb.String()
}
