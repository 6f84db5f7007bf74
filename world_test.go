package coredag

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/exec/provider"
	"github.com/coredag/coredag/exec/softnic"
)

// hub connects the ranks of chanWorlds in one process: every collective is a round that ends
// when all ranks arrived; a rank that does not arrive is named when a waiter's ctx ends.
type hub struct {
	mu  sync.Mutex
	n   int
	cur *round
}

type round struct {
	parts [][]byte // by rank; nil: not arrived
	in    int
	done  chan struct{}
}

func newHub(n int) *hub {
	return &hub{n: n, cur: &round{parts: make([][]byte, n), done: make(chan struct{})}}
}

func (h *hub) gather(ctx context.Context, rank int, send []byte) ([][]byte, error) {
	h.mu.Lock()
	r := h.cur
	r.parts[rank] = append([]byte{}, send...)
	r.in++
	if r.in == h.n {
		h.cur = &round{parts: make([][]byte, h.n), done: make(chan struct{})}
		close(r.done)
	}
	h.mu.Unlock()
	select {
	case <-r.done:
		return r.parts, nil
	case <-ctx.Done():
		select {
		case <-r.done: // completed as ctx ended
			return r.parts, nil
		default:
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		var missing []string
		for q, p := range r.parts {
			if p == nil {
				missing = append(missing, fmt.Sprint(q))
			}
		}
		return nil, fmt.Errorf("rank %s did not join the collective: %w", strings.Join(missing, ", rank "), ctx.Err())
	}
}

// chanWorld is one rank's World over a hub.
type chanWorld struct {
	h    *hub
	rank int
	size int // what Size reports (the hub's n unless a test lies)
}

func (w *chanWorld) Rank() int { return w.rank }
func (w *chanWorld) Size() int { return w.size }
func (w *chanWorld) Barrier(ctx context.Context) error {
	_, err := w.h.gather(ctx, w.rank, nil)
	return err
}
func (w *chanWorld) Allgather(ctx context.Context, send, recv []byte) error {
	parts, err := w.h.gather(ctx, w.rank, send)
	if err != nil {
		return err
	}
	for r, p := range parts {
		copy(recv[r*len(send):], p)
	}
	return nil
}

func chanWorlds(n int) []World {
	h := newHub(n)
	out := make([]World, n)
	for r := range out {
		out[r] = &chanWorld{h: h, rank: r, size: n}
	}
	return out
}

// sharedSoftNIC is one software NIC whose ranks are opened by several Colls of one process, as
// if each ran in its own process: every call into the NIC takes one lock. It does not report
// its own progress (nic.Progresser), so the engines treat it as hardware and a peer that stops
// is detected after the hang timeout.
func sharedSoftNIC() provider.Entry {
	e, _ := sharedSoftNICFreeze()
	return e
}

// sharedSoftNICFreeze is sharedSoftNIC with a switch that freezes a rank's CPU: its Coll's next
// poll blocks until freeze(-1), as a process that hangs, while its NIC goes on running what
// was posted.
func sharedSoftNICFreeze() (provider.Entry, func(rank int)) {
	var mu sync.Mutex
	n := softnic.New(softnic.Options{})
	caps := n.Caps()
	caps.Counters, caps.Triggers = false, false
	frozen := map[int]bool{}
	thaw := make(chan struct{})
	freeze := func(rank int) {
		if rank < 0 { // thaw every frozen rank: their polls fail
			close(thaw)
			return
		}
		mu.Lock()
		frozen[rank] = true
		mu.Unlock()
	}
	return provider.Entry{Name: "shared-softnic", AllRanks: true, PerProcess: true,
			Caps: func(provider.Config) nic.Caps { return caps },
			Open: func(provider.Config) (nic.Provider, error) {
				return &lockedProv{mu: &mu, n: n, caps: caps, frozen: frozen, thaw: thaw}, nil
			}},
		freeze
}

// hostSoftNIC is sharedSoftNIC whose ranks' contexts are moved by the host's calls as well
// (nic.HostProgress, as libfabric with manual progress): drives counts each rank's
// DriveProgress calls.
func hostSoftNIC() (provider.Entry, *[8]atomic.Int64) {
	e := sharedSoftNIC()
	drives := new([8]atomic.Int64)
	open := e.Open
	e.Open = func(cfg provider.Config) (nic.Provider, error) {
		p, err := open(cfg)
		if err == nil {
			p.(*lockedProv).drives = drives
		}
		return p, err
	}
	return e, drives
}

type lockedProv struct {
	mu     *sync.Mutex
	n      *softnic.NIC
	caps   nic.Caps
	frozen map[int]bool // under mu
	thaw   chan struct{}
	drives *[8]atomic.Int64 // set: contexts are nic.HostProgress (hostSoftNIC)
}

func (p *lockedProv) Name() string   { return "shared-softnic" }
func (p *lockedProv) Caps() nic.Caps { return p.caps }
func (p *lockedProv) Close() error   { return nil }
func (p *lockedProv) Open(rank int) (nic.Context, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, err := p.n.Open(rank)
	if err != nil {
		return nil, err
	}
	if p.drives != nil {
		return &hostCtx{lockedCtx{mu: p.mu, c: c, p: p}}, nil
	}
	return &lockedCtx{mu: p.mu, c: c, p: p}, nil
}

// hostCtx is a lockedCtx moved by DriveProgress too.
type hostCtx struct{ lockedCtx }

func (c *hostCtx) DriveProgress() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.p.n.Progress()
	c.p.drives[c.c.Rank()].Add(1)
	return nil
}

type lockedCtx struct {
	mu *sync.Mutex
	c  nic.Context
	p  *lockedProv
}

func (c *lockedCtx) Rank() int { return c.c.Rank() }
func (c *lockedCtx) AllocPD() (nic.PD, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pd, err := c.c.AllocPD()
	return &lockedPD{mu: c.mu, pd: pd}, err
}
func (c *lockedCtx) CreateCQ(depth int) (nic.CQ, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cq, err := c.c.CreateCQ(depth)
	return &lockedCQ{mu: c.mu, cq: cq, p: c.p, rank: c.c.Rank()}, err
}
func (c *lockedCtx) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c.Close()
}

type lockedPD struct {
	mu *sync.Mutex
	pd nic.PD
}

func (p *lockedPD) AllocMR(size int, a nic.Access) (nic.MR, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, err := p.pd.AllocMR(size, a)
	if err != nil {
		return nil, err
	}
	return &lockedMR{MR: m, mu: p.mu}, nil
}
func (p *lockedPD) RegisterMR(addr unsafe.Pointer, size int, a nic.Access) (nic.MR, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, err := p.pd.RegisterMR(addr, size, a)
	if err != nil {
		return nil, err
	}
	return &lockedMR{MR: m, mu: p.mu}, nil
}
func (p *lockedPD) CreateQP(cfg nic.QPConfig) (nic.QP, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cfg.SendCQ, cfg.RecvCQ = cfg.SendCQ.(*lockedCQ).cq, cfg.RecvCQ.(*lockedCQ).cq
	q, err := p.pd.CreateQP(cfg)
	return &lockedQP{mu: p.mu, qp: q}, err
}
func (p *lockedPD) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pd.Close()
}

type lockedMR struct {
	nic.MR
	mu *sync.Mutex
}

func (m *lockedMR) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.MR.Close()
}

type lockedCQ struct {
	mu   *sync.Mutex
	cq   nic.CQ
	p    *lockedProv
	rank int
}

func (c *lockedCQ) Num() uint32 { return c.cq.Num() }
func (c *lockedCQ) Depth() int  { return c.cq.Depth() }

// Poll polls; when the CQ is empty it moves the whole fabric first, as a NIC that runs by itself
// would have (receiver-not-ready retries count in the software NIC's Progress calls).
func (c *lockedCQ) Poll(wc []nic.WC) (int, error) {
	c.mu.Lock()
	if c.p.frozen[c.rank] {
		c.mu.Unlock()
		<-c.p.thaw
		return 0, fmt.Errorf("rank %d was frozen", c.rank)
	}
	defer c.mu.Unlock()
	n, err := c.cq.Poll(wc)
	if n == 0 && err == nil {
		c.p.n.Progress()
		n, err = c.cq.Poll(wc)
	}
	return n, err
}
func (c *lockedCQ) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cq.Close()
}

type lockedQP struct {
	mu *sync.Mutex
	qp nic.QP
}

func (q *lockedQP) Num() uint32      { return q.qp.Num() }
func (q *lockedQP) Info() nic.QPInfo { return q.qp.Info() }
func (q *lockedQP) Connect(r nic.QPInfo) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.qp.Connect(r)
}
func (q *lockedQP) PostSend(wr []nic.SendWR) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.qp.PostSend(wr)
}
func (q *lockedQP) PostRecv(wr []nic.RecvWR) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.qp.PostRecv(wr)
}
func (q *lockedQP) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.qp.Close()
}
