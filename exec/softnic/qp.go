package softnic

import (
	"fmt"
	"slices"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/wait"
)

type qpState uint8

const (
	stateInit  qpState = iota // created, receives may be posted
	stateRTS                  // connected: sends may be posted
	stateError                // a fault happened: everything flushes
)

// swqe is a send-queue slot.
type swqe struct {
	wr       nic.SendWR
	status   nic.Status
	byteLen  uint32
	ev       int32 // trace event, -1 without trace
	rnrTries int32
	rnrTick  uint64
}

// rwqe is a receive-queue slot.
type rwqe struct {
	wr nic.RecvWR
	ev int32
}

// qp is an RC queue pair. Indices are cumulative over the QP's life: a slot is index % depth.
//
// Send queue: [sqFreed, sqDone) completed but not reclaimed (no signalled completion after them
// yet), [sqDone, sqHead) executed and in flight, [sqHead, sqTail) posted, waiting to execute.
// Receive queue: [rqHead, rqTail) posted, not consumed; consumed receives complete at once.
type qp struct {
	ctx     *Context
	pd      *pd
	num     uint32
	cfg     nic.QPConfig
	scq     *cq
	rcq     *cq
	state   qpState
	closed  bool
	remote  *qp
	peer    nic.QPInfo
	active  bool // in nic.active
	waiting *cq  // the CQ whose waiters list holds this QP (see qp.awake)

	sq                              []swqe
	sqTail, sqHead, sqDone, sqFreed uint64
	sqEnable                        uint16
	inflightRA                      int    // executed READ/atomic requests not yet complete (fences)
	inline                          []byte // inline sends' bytes, MaxInline per send slot; made at the first inline send
	gather                          []byte // a gather list's bytes, assembled for one transfer

	rq             []rwqe
	rqTail, rqHead uint64
	rqEnable       uint16

	trig trigger
}

var _ nic.QP = (*qp)(nil)

func newQP(p *pd, cfg nic.QPConfig) (*qp, error) {
	c := p.ctx
	n := c.nic
	where := fmt.Sprintf("softnic: rank %d: CreateQP", c.rank)
	if p.closed || c.closed {
		return nil, fmt.Errorf("%s on a closed PD: %w", where, nic.ErrClosed)
	}
	scq, ok1 := cfg.SendCQ.(*cq)
	rcq, ok2 := cfg.RecvCQ.(*cq)
	if !ok1 || !ok2 || scq == nil || rcq == nil {
		return nil, fmt.Errorf("%s: SendCQ and RecvCQ must be CQs created by this software NIC", where)
	}
	if scq.ctx != c || rcq.ctx != c {
		return nil, fmt.Errorf("%s: its CQs belong to another rank's context: %w", where, nic.ErrWrongContext)
	}
	if scq.closed || rcq.closed {
		return nil, fmt.Errorf("%s: one of its CQs is closed: %w", where, nic.ErrClosed)
	}
	for _, d := range [...]struct {
		name string
		v    int
	}{{"SendDepth", cfg.SendDepth}, {"RecvDepth", cfg.RecvDepth}} {
		if d.v <= 0 || d.v > n.opts.MaxDepth {
			return nil, fmt.Errorf("%s: %s %d out of range: use 1..%d", where, d.name, d.v, n.opts.MaxDepth)
		}
	}
	if cfg.MaxInline < 0 || cfg.MaxInline > n.opts.MaxInline {
		return nil, fmt.Errorf("%s: MaxInline %d out of range: the device inlines at most %d bytes: %w",
			where, cfg.MaxInline, n.opts.MaxInline, nic.ErrInlineTooLarge)
	}
	if (cfg.CrossChannel || cfg.ManagedSend || cfg.ManagedRecv) && n.opts.NoCrossChannel {
		return nil, fmt.Errorf("%s: cross-channel or managed queues requested, but this NIC runs without "+
			"cross-channel (use the polling engine or enable cross-channel): %w", where, nic.ErrNoCrossChannel)
	}
	if cfg.RNRRetry < 0 {
		return nil, fmt.Errorf("%s: RNRRetry %d is negative: use 0 to retry forever or a positive bound", where, cfg.RNRRetry)
	}
	q := &qp{
		ctx: c, pd: p, num: uint32(len(c.qps) + 1), cfg: cfg, scq: scq, rcq: rcq,
		sq: make([]swqe, cfg.SendDepth),
		rq: make([]rwqe, cfg.RecvDepth),
	}
	c.qps = append(c.qps, q)
	return q, nil
}

func (q *qp) String() string { return fmt.Sprintf("rank %d qp %d", q.ctx.rank, q.num) }

func (q *qp) Num() uint32 { return q.num }

// Info describes this end: the software NIC needs only the rank and the QP number.
func (q *qp) Info() nic.QPInfo { return nic.QPInfo{Rank: q.ctx.rank, QPN: q.num} }

// Connect connects the QP to the remote end, which must be a QP of an open context of this NIC.
func (q *qp) Connect(remote nic.QPInfo) error {
	if q.closed {
		return fmt.Errorf("softnic: %s: Connect on a closed QP: %w", q, nic.ErrClosed)
	}
	if q.state != stateInit {
		return fmt.Errorf("softnic: %s is already connected to %s; create a new QP for another connection", q, q.peer)
	}
	n := q.ctx.nic
	if remote.Rank < 0 || remote.Rank >= len(n.ctxs) || n.ctxs[remote.Rank] == nil {
		return fmt.Errorf("softnic: %s: cannot connect to %s: rank %d is not open on this NIC", q, remote, remote.Rank)
	}
	r := n.ctxs[remote.Rank].qpByNum(remote.QPN)
	if r == nil {
		return fmt.Errorf("softnic: %s: cannot connect to %s: no such QP", q, remote)
	}
	q.remote, q.peer, q.state = r, remote, stateRTS
	return nil
}

// Close destroys the QP; its pending work is dropped without completions.
func (q *qp) Close() error {
	q.closed = true
	for _, c := range q.ctx.cqs {
		c.unwatch(q)
	}
	q.trig = trigger{}
	return nil
}

// PostSend validates and enqueues a batch of send work requests.
func (q *qp) PostSend(wrs []nic.SendWR) (int, error) {
	for i := range wrs {
		if err := q.postSend(&wrs[i]); err != nil {
			return i, err
		}
	}
	q.activate()
	return len(wrs), nil
}

func (q *qp) postSend(wr *nic.SendWR) error {
	if q.closed {
		return fmt.Errorf("softnic: %s: PostSend on a closed QP: %w", q, nic.ErrClosed)
	}
	if q.state == stateInit {
		return fmt.Errorf("softnic: %s: PostSend before Connect (connect a local-only queue to its own Info()): %w", q, nic.ErrNotConnected)
	}
	if q.sqTail-q.sqFreed >= uint64(len(q.sq)) {
		return fmt.Errorf("softnic: %s: send queue full: %d requests outstanding, depth %d "+
			"(slots are reclaimed only by a signalled completion; signal one request every so often or deepen the queue): %w",
			q, q.sqTail-q.sqFreed, len(q.sq), nic.ErrQueueFull)
	}
	if err := q.checkSend(wr); err != nil {
		return err
	}
	n := q.ctx.nic
	slot := q.sqTail % uint64(len(q.sq))
	w := &q.sq[slot]
	*w = swqe{wr: *wr, ev: -1}
	w.wr.More = slices.Clone(wr.More) // the caller may reuse its list once PostSend returns
	if wr.Flags&nic.FlagInline != 0 {
		if q.inline == nil { // at the first inline send: most QPs have none
			q.inline = make([]byte, len(q.sq)*q.cfg.MaxInline)
		}
		off := int(slot) * q.cfg.MaxInline
		for _, e := range append([]nic.SGE{wr.Local}, wr.More...) {
			if e.Len == 0 {
				continue
			}
			src := q.findLocal(e.Addr, e.Len)
			if src == nil {
				return fmt.Errorf("softnic: %s: inline %s wr_id %d: address %#x+%d is in no memory region of rank %d: %w",
					q, wr.Op, wr.ID, e.Addr, e.Len, q.ctx.rank, nic.ErrBadRequest)
			}
			off += copy(q.inline[off:], src)
		}
	}
	n.clock++
	if n.opts.Trace {
		w.ev = n.record(Event{Rank: q.ctx.rank, QPN: q.num, Index: q.sqTail, ID: wr.ID, Op: wr.Op, Posted: n.clock})
	}
	q.sqTail++
	if q.state == stateError {
		q.flushSend()
	}
	return nil
}

// checkSend rejects requests that can never run on this QP.
func (q *qp) checkSend(wr *nic.SendWR) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("softnic: %s: %s wr_id %d: %s: %w", q, wr.Op, wr.ID, fmt.Sprintf(format, args...), nic.ErrBadRequest)
	}
	if wr.Op > nic.OpRecvEnable {
		return bad("not a send-queue opcode")
	}
	// FlagLocalComplete is allowed and ignored: a send here completes once delivered, which the
	// flag permits too.
	if wr.Flags&^(nic.FlagSignaled|nic.FlagFence|nic.FlagInline|nic.FlagLocalComplete) != 0 {
		return bad("unknown flags %#x", uint8(wr.Flags))
	}
	if wr.Op.IsCrossChannel() {
		if q.ctx.nic.opts.NoCrossChannel {
			return fmt.Errorf("softnic: %s: %s wr_id %d: this NIC runs without cross-channel (use the polling engine): %w",
				q, wr.Op, wr.ID, nic.ErrNoCrossChannel)
		}
		if !q.cfg.CrossChannel {
			return bad("the QP was created without QPConfig.CrossChannel")
		}
	}
	switch wr.Op {
	case nic.OpCQEWait:
		if q.ctx.cqByNum(wr.WaitCQ) == nil {
			return bad("rank %d has no CQ %d to wait on", q.ctx.rank, wr.WaitCQ)
		}
	case nic.OpSendEnable, nic.OpRecvEnable:
		t := q.ctx.qpByNum(wr.TargetQP)
		if t == nil {
			return bad("rank %d has no QP %d to enable", q.ctx.rank, wr.TargetQP)
		}
		if wr.Op == nic.OpSendEnable && !t.cfg.ManagedSend {
			return bad("QP %d was created without ManagedSend", wr.TargetQP)
		}
		if wr.Op == nic.OpRecvEnable && !t.cfg.ManagedRecv {
			return bad("QP %d was created without ManagedRecv", wr.TargetQP)
		}
	case nic.OpAtomicFAdd, nic.OpAtomicCAS:
		if len(wr.More) > 0 {
			return bad("atomics take one local SGE, not a list of %d", 1+len(wr.More))
		}
		if wr.Local.Len != 0 && wr.Local.Len != 8 {
			return bad("the local result buffer is %d bytes: atomics fetch 8 (or 0 to discard)", wr.Local.Len)
		}
	}
	if max := q.ctx.nic.opts.MaxSGE; 1+len(wr.More) > max {
		return bad("a scatter/gather list of %d elements, the device allows %d (Caps.MaxSGE)", 1+len(wr.More), max)
	}
	if wr.Flags&nic.FlagInline != 0 {
		switch wr.Op {
		case nic.OpSend, nic.OpRDMAWrite, nic.OpRDMAWriteImm:
		default:
			return bad("only SEND and RDMA writes can be inline")
		}
		if n := nic.SGLen(wr.Local, wr.More); n > uint64(q.cfg.MaxInline) {
			return fmt.Errorf("softnic: %s: %s wr_id %d: %d bytes inline, the QP allows %d (QPConfig.MaxInline): %w",
				q, wr.Op, wr.ID, n, q.cfg.MaxInline, nic.ErrInlineTooLarge)
		}
	}
	return nil
}

// findLocal finds [addr, addr+n) in any live region of the QP's PD, ignoring keys (inline data).
func (q *qp) findLocal(addr uint64, n uint32) []byte {
	for _, m := range q.ctx.mrs {
		if m.closed || m.pd != q.pd || addr < m.addr || addr-m.addr > uint64(len(m.buf)) ||
			uint64(n) > uint64(len(m.buf))-(addr-m.addr) {
			continue
		}
		off := addr - m.addr
		return m.buf[off : off+uint64(n)]
	}
	return nil
}

// PostRecv enqueues a batch of receive work requests.
func (q *qp) PostRecv(wrs []nic.RecvWR) (int, error) {
	n := q.ctx.nic
	for i := range wrs {
		if q.closed {
			return i, fmt.Errorf("softnic: %s: PostRecv on a closed QP: %w", q, nic.ErrClosed)
		}
		if q.rqTail-q.rqHead >= uint64(len(q.rq)) {
			return i, fmt.Errorf("softnic: %s: receive queue full: %d receives posted, depth %d: %w",
				q, q.rqTail-q.rqHead, len(q.rq), nic.ErrQueueFull)
		}
		if max := n.opts.MaxSGE; 1+len(wrs[i].More) > max {
			return i, fmt.Errorf("softnic: %s: receive wr_id %d: a scatter list of %d elements, the device allows %d (Caps.MaxSGE): %w",
				q, wrs[i].ID, 1+len(wrs[i].More), max, nic.ErrBadRequest)
		}
		r := &q.rq[q.rqTail%uint64(len(q.rq))]
		*r = rwqe{wr: wrs[i], ev: -1}
		r.wr.More = slices.Clone(wrs[i].More)
		n.clock++
		if n.opts.Trace {
			e := Event{Rank: q.ctx.rank, QPN: q.num, Recv: true, Index: q.rqTail, ID: wrs[i].ID, Op: nic.OpRecv, Posted: n.clock}
			if !q.cfg.ManagedRecv || wait.Enabled(q.rqTail, uint32(q.rqEnable)) {
				e.Start = n.clock
			}
			r.ev = n.record(e)
		}
		q.rqTail++
		if q.state == stateError {
			q.flushRecv()
		}
	}
	return len(wrs), nil
}

// activate puts the QP on the fabric's list of queues with send work.
func (q *qp) activate() {
	if !q.active && q.sqDone < q.sqTail {
		q.active = true
		n := q.ctx.nic
		n.active = append(n.active, q)
	}
}

// recvReady reports whether an incoming message would find a receive.
func (q *qp) recvReady() bool {
	return q.rqHead < q.rqTail && (!q.cfg.ManagedRecv || wait.Enabled(q.rqHead, uint32(q.rqEnable)))
}
