// Package softnic is coredag's software NIC: a nic.Provider in which every rank of a plan lives
// in one process and one fabric. It implements reliable-connected semantics (in-order queues,
// send/receive matching, receiver-not-ready retry, RDMA write, write with immediate, read, 8-byte
// atomics, key, bounds and permission checks with the verbs completion statuses, error state and
// flush) and the CORE-Direct cross-channel entries (CQE_WAIT, SEND_EN, RECV_EN, managed queues),
// which can be switched off to act as a plain NIC.
//
// Nothing runs in the background: the fabric advances only inside Progress and CQ.Poll, on the
// caller's goroutine, without locks. By default queues are served in a fixed round-robin order and
// a work request completes as soon as it executes. With Options.Seeded, every step picks at random
// (from a seeded generator) among the runnable queue heads and the pending completions, so one seed
// gives one reproducible interleaving and different seeds explore different ones. With
// Options.Trace, the NIC records when each work request was posted, started and completed on a
// logical clock, for checkers that assert no dependency was violated.
//
// A NIC and everything opened from it must be used from one goroutine at a time.
package softnic

import (
	"fmt"
	"math/rand/v2"

	"github.com/coredag/coredag/exec/nic"
)

// Options configure a software NIC. The zero value is a cross-channel NIC with round-robin
// progress and no trace.
type Options struct {
	// NoCrossChannel makes the NIC a plain one: CQE_WAIT, SEND_EN and RECV_EN are rejected at post
	// time and managed or cross-channel QPs cannot be created.
	NoCrossChannel bool
	// Seeded picks the next step at random, from a generator seeded with Seed, among all runnable
	// queue heads and pending completions, instead of serving queues round-robin.
	Seeded bool
	Seed   uint64
	// Trace records one Event per work request (see NIC.Trace). Off by default: it costs memory.
	Trace bool
	// MaxInline is the device's inline limit in bytes (default 256).
	MaxInline int
	// MaxDepth bounds queue and CQ depths (default 1<<16).
	MaxDepth int
	// MaxSGE bounds the scatter/gather elements of one request (default 30, as ConnectX).
	MaxSGE int
	// Triggers offers nic.TriggerQP to the polling engine (Caps.Triggers). In one process the
	// fabric moves only inside Poll anyway, so they bring nothing but the test of the engine's
	// arming: off by default.
	Triggers bool
	// Order is what Caps says the NIC grants between the ops of a queue (nic.Caps.Order:
	// nic.OrderKnown with libfabric's msg_order bits; 0 says nothing), for tests of a runtime's
	// refusal of a NIC without the ordering a plan relies on. The NIC runs every queue in order
	// whatever it says.
	Order uint64
	// CountPerRegistration makes the NIC count remote writes as libfabric does
	// (nic.RegistrationCounting): BindRemoteWrites binds only a whole region, and a write raises
	// the counters of the region whose key it names. Off by default, when a counter may be bound
	// to any part of a region; on, it tests a runtime's registration of counted parts.
	CountPerRegistration bool
}

// NIC is the software NIC and its fabric. It implements nic.Provider, nic.Progresser,
// nic.CQNotifier and nic.StatsReporter.
type NIC struct {
	opts  Options
	ctxs  []*Context // by rank; nil when not open
	rng   *rand.Rand
	clock uint64 // logical time: one tick per post, execution and completion
	tick  uint64 // Progress calls, the unit of the RNR retry timer

	active []*qp // QPs with send-queue work not yet completed, in activation order
	npend  int   // triggered work waiting, over every context
	ready  []*cq // CQs with completions since ReadyCQs last listed them
	cands  []cand

	stats  nic.NICStats
	trace  []Event
	faults []Fault
}

var (
	_ nic.Provider       = (*NIC)(nil)
	_ nic.Progresser     = (*NIC)(nil)
	_ nic.CQNotifier     = (*NIC)(nil)
	_ nic.StatsReporter  = (*NIC)(nil)
	_ nic.FaultExplainer = (*NIC)(nil)
)

// New creates a software NIC with its fabric.
func New(opts Options) *NIC {
	if opts.MaxSGE <= 0 {
		opts.MaxSGE = 30
	}
	if opts.MaxInline <= 0 {
		opts.MaxInline = 256
	}
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = 1 << 16
	}
	n := &NIC{opts: opts}
	if opts.Seeded {
		n.rng = rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	}
	return n
}

// Name is "softnic".
func (n *NIC) Name() string { return "softnic" }

// Caps reports the NIC's capabilities.
func (n *NIC) Caps() nic.Caps {
	return nic.Caps{
		CrossChannel: !n.opts.NoCrossChannel,
		MaxInline:    n.opts.MaxInline,
		MaxQPDepth:   n.opts.MaxDepth,
		MaxCQDepth:   n.opts.MaxDepth,
		MaxSGE:       n.opts.MaxSGE,
		Atomics:      true,
		InProcess:    true,
		Triggers:     n.opts.Triggers,
		Counters:     true,
		Order:        n.opts.Order,
	}
}

// Open opens the context of a rank. Every rank of a plan may be opened, each once.
func (n *NIC) Open(rank int) (nic.Context, error) {
	if rank < 0 || rank > 1<<20 {
		return nil, fmt.Errorf("softnic: cannot open rank %d: ranks are 0 or more", rank)
	}
	for len(n.ctxs) <= rank {
		n.ctxs = append(n.ctxs, nil)
	}
	if n.ctxs[rank] != nil {
		return nil, fmt.Errorf("softnic: rank %d is already open: open each rank once and share its context", rank)
	}
	c := &Context{nic: n, rank: rank, nextAddr: 0x10000}
	n.ctxs[rank] = c
	return c, nil
}

// Close does nothing: the NIC holds nothing outside the Go heap (its contexts close on their own).
func (n *NIC) Close() error { return nil }

// NICStats returns the counters since the NIC was created.
func (n *NIC) NICStats() nic.NICStats { return n.stats }

// Now is the current logical time.
func (n *NIC) Now() uint64 { return n.clock }

// Context is one rank's device context.
type Context struct {
	nic      *NIC
	rank     int
	closed   bool
	pds      []*pd
	mrs      []*mr // key index - 1
	cqs      []*cq // CQ number - 1
	qps      []*qp // QP number - 1
	nextAddr uint64
	cntrs    []*counter
	npend    int   // triggered work waiting
	trigErr  error // the posting error that stopped triggered work
}

var _ nic.Context = (*Context)(nil)

// Rank is the context's rank.
func (c *Context) Rank() int { return c.rank }

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (nic.PD, error) {
	if c.closed {
		return nil, fmt.Errorf("softnic: rank %d: AllocPD on a closed context: %w", c.rank, nic.ErrClosed)
	}
	p := &pd{ctx: c, id: len(c.pds)}
	c.pds = append(c.pds, p)
	return p, nil
}

// CreateCQ creates a completion queue of the given depth.
func (c *Context) CreateCQ(depth int) (nic.CQ, error) {
	if c.closed {
		return nil, fmt.Errorf("softnic: rank %d: CreateCQ on a closed context: %w", c.rank, nic.ErrClosed)
	}
	if depth <= 0 || depth > c.nic.opts.MaxDepth {
		return nil, fmt.Errorf("softnic: rank %d: CQ depth %d out of range: use 1..%d", c.rank, depth, c.nic.opts.MaxDepth)
	}
	q := &cq{ctx: c, num: uint32(len(c.cqs) + 1), ring: make([]nic.WC, depth)}
	c.cqs = append(c.cqs, q)
	return q, nil
}

// Close closes the context and destroys its QPs: their pending work is dropped.
func (c *Context) Close() error {
	if c.closed {
		return nil
	}
	for _, q := range c.qps {
		if q != nil {
			q.closed = true
		}
	}
	c.CancelTriggers() // a closed context's triggered work can never fire
	c.closed = true
	c.nic.ctxs[c.rank] = nil
	return nil
}

func (c *Context) cqByNum(num uint32) *cq {
	if num == 0 || int(num) > len(c.cqs) {
		return nil
	}
	q := c.cqs[num-1]
	if q.closed {
		return nil
	}
	return q
}

func (c *Context) qpByNum(num uint32) *qp {
	if num == 0 || int(num) > len(c.qps) {
		return nil
	}
	q := c.qps[num-1]
	if q.closed {
		return nil
	}
	return q
}
