package softnic

import (
	"encoding/binary"
	"fmt"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/wait"
)

// blocker is why a send-queue head cannot execute now.
type blocker uint8

const (
	runnable blocker = iota
	blockedNotEnabled
	blockedFence
	blockedWait
	blockedRNR
)

// cand is one step the seeded scheduler may take: execute q's head, or complete q's oldest
// in-flight request.
type cand struct {
	q        *qp
	complete bool
}

// Progress advances the fabric until nothing can run, or for about maxSteps steps, and returns
// the number of steps made (executions, completions, and bounded receiver-not-ready retries). 0
// means the fabric is idle or stalled; Stalls tells which. More than 0: call again while there is
// work posted.
func (n *NIC) Progress() int { return n.progress(nil) }

// maxSteps bounds the steps of one Progress call (and of a Poll that progresses), as the nic
// contract allows: an engine that posted a whole iteration (the offload engine) would otherwise
// run all of it inside one call, without looking at its context between. A fraction of a
// millisecond of steps; a step that copies a large message is one step.
const maxSteps = 1 << 12

// progress runs steps until nothing can run, until the CQ until (if not nil) has a completion,
// or until it made maxSteps (a few more where due triggered work fired).
func (n *NIC) progress(until *cq) int {
	n.tick++
	steps := 0
	if n.rng == nil {
		for {
			made := n.fireDue()
			for i := 0; i < len(n.active) && steps+made < maxSteps; i++ {
				made += n.active[i].runFIFO(maxSteps - steps - made)
			}
			n.compact()
			steps += made
			if made == 0 || steps >= maxSteps || (until != nil && until.produced != until.consumed) {
				return steps
			}
		}
	}
	for steps < maxSteps {
		steps += n.fireDue()
		n.cands = n.cands[:0]
		idle := 0 // QPs that offer no step: parked by compact when they are many
		for _, q := range n.active {
			if q.closed {
				idle++
				continue
			}
			was := len(n.cands)
			if q.sqDone < q.sqHead {
				n.cands = append(n.cands, cand{q: q, complete: true})
			}
			if q.sqHead < q.sqTail {
				if b := q.headBlocker(); b == runnable {
					n.cands = append(n.cands, cand{q: q})
				} else if b == blockedRNR && q.rnrRetry() {
					steps++
				}
			}
			if len(n.cands) == was {
				idle++
			}
		}
		if len(n.cands) == 0 {
			n.compact()
			return steps
		}
		if idle > len(n.cands) {
			n.compact() // the QPs chosen from stay: each has a step to offer
		}
		c := n.cands[n.rng.IntN(len(n.cands))]
		if c.complete {
			c.q.completeOne()
		} else {
			c.q.execute()
		}
		steps++
		if until != nil && until.produced != until.consumed {
			break
		}
	}
	n.compact()
	return steps
}

// compact drops from the active list, keeping the order, the QPs with no send work left and the
// QPs parked until an event: progress visits only the rest, so that its cost follows the work
// that can run rather than the number of QPs with work posted.
func (n *NIC) compact() {
	k := 0
	for _, q := range n.active {
		if q.awake() {
			n.active[k] = q
			k++
		} else {
			q.active = false
		}
	}
	clear(n.active[k:])
	n.active = n.active[:k]
}

// awake reports whether q stays on the active list. A QP with nothing in flight whose head waits
// for a CQ (CQE_WAIT) or for an ENABLE is parked instead: the CQ's next completions (cq.push) or
// the SEND_EN that moves its enable index (execute) put it back with activate. A fence holds a
// head only while a READ or atomic is in flight, so it never parks; a receiver-not-ready head
// stays, because its retries are counted per Progress call.
func (q *qp) awake() bool {
	if q.closed || q.sqDone >= q.sqTail {
		return false
	}
	if q.sqDone < q.sqHead {
		return true // completions to make
	}
	switch q.headBlocker() {
	case blockedNotEnabled:
		return false
	case blockedWait:
		c := q.ctx.cqByNum(q.sq[q.sqHead%uint64(len(q.sq))].wr.WaitCQ)
		if q.waiting != c {
			q.waiting = c
			c.waiters = append(c.waiters, q)
		}
		return false
	}
	return true
}

// runFIFO executes and completes this QP's runnable heads in order, at most limit of them; it
// returns the steps made.
func (q *qp) runFIFO(limit int) int {
	steps := 0
	for !q.closed && q.sqHead < q.sqTail && steps < limit {
		b := q.headBlocker()
		if b == blockedRNR {
			if q.rnrRetry() {
				steps++
				continue
			}
			break
		}
		if b != runnable {
			break
		}
		q.execute()
		for q.sqDone < q.sqHead {
			q.completeOne()
		}
		steps++
	}
	return steps
}

// headBlocker says whether the head of the send queue can execute, without side effects.
func (q *qp) headBlocker() blocker {
	if q.state == stateError {
		return runnable // it will flush
	}
	w := &q.sq[q.sqHead%uint64(len(q.sq))]
	if q.cfg.ManagedSend && !wait.Enabled(q.sqHead, uint32(q.sqEnable)) {
		return blockedNotEnabled
	}
	if w.wr.Flags&nic.FlagFence != 0 && q.inflightRA > 0 {
		return blockedFence
	}
	switch w.wr.Op {
	case nic.OpCQEWait:
		if c := q.ctx.cqByNum(w.wr.WaitCQ); c != nil && !wait.Satisfied(c.produced, w.wr.Count) {
			return blockedWait
		}
	case nic.OpSend, nic.OpRDMAWriteImm:
		if r := q.remote; r != nil && !r.closed && r.state != stateError && !r.recvReady() {
			return blockedRNR
		}
	}
	return runnable
}

// rnrRetry counts one receiver-not-ready retry of the head per Progress call. With a bounded
// QPConfig.RNRRetry, the request fails with StatusRNRRetryExceeded once the bound is passed. It
// reports whether it counted as a step (bounded retries do, so callers keep polling until the
// failure; unbounded ones do not, so a lasting RNR shows as a stall).
func (q *qp) rnrRetry() bool {
	n := q.ctx.nic
	w := &q.sq[q.sqHead%uint64(len(q.sq))]
	if w.rnrTick == n.tick {
		return false
	}
	w.rnrTick = n.tick
	w.rnrTries++
	n.stats.RNRRetries++
	if q.cfg.RNRRetry == 0 {
		return false
	}
	if int(w.rnrTries) > q.cfg.RNRRetry {
		n.clock++
		n.stats.WQEs++
		n.start(w.ev)
		w.status = nic.StatusRNRRetryExceeded
		n.fault(q, w, q.sqHead, "no receive was posted at "+q.peer.String()+" within the RNR retry limit")
		q.sqHead++
		q.fail(false)
	}
	return true
}

// execute runs the head of the send queue: moves the data, checks keys, bounds and permissions,
// consumes the peer's receive. The request is then in flight until completeOne.
func (q *qp) execute() {
	n := q.ctx.nic
	idx := q.sqHead
	w := &q.sq[idx%uint64(len(q.sq))]
	if q.state == stateError {
		q.flushSend()
		return
	}
	n.clock++
	n.stats.WQEs++
	n.start(w.ev)
	wr := &w.wr
	w.status = nic.StatusSuccess
	w.byteLen = 0
	switch wr.Op {
	case nic.OpNop:
	case nic.OpCQEWait:
		n.stats.Waits++
	case nic.OpSendEnable:
		t := q.ctx.qpByNum(wr.TargetQP)
		if t != nil {
			t.sqEnable = uint16(wr.Count)
			t.activate() // parked while its head was not enabled
		}
		n.stats.Enables++
	case nic.OpRecvEnable:
		if t := q.ctx.qpByNum(wr.TargetQP); t != nil {
			t.enableRecv(uint16(wr.Count))
		}
		n.stats.Enables++
	default:
		if !q.transfer(w, idx) {
			return // failed: the QP is flushed
		}
	}
	q.sqHead++
	if wr.Op == nic.OpRDMARead || wr.Op == nic.OpAtomicFAdd || wr.Op == nic.OpAtomicCAS {
		q.inflightRA++
	}
}

// transfer runs a data request. On a fault it completes the request with the fault's status,
// moves the QP (and, for faults the responder detects, the peer) to the error state, and
// returns false.
func (q *qp) transfer(w *swqe, idx uint64) bool {
	n := q.ctx.nic
	wr := &w.wr
	r := q.remote
	if r == nil || r.closed || r.state == stateError {
		return q.failReq(w, idx, nic.StatusRemoteInvalidRequest, "the peer QP "+q.peer.String()+" is closed or in the error state", false)
	}
	// Local source (or destination for READ and atomics): one region, or a scatter/gather list
	// (gathered into q.gather for SEND and writes, scattered into after a READ).
	var local []byte
	var one [1][]byte
	list := one[:0]
	size := uint32(nic.SGLen(wr.Local, wr.More))
	switch {
	case wr.Op == nic.OpRDMARead || wr.Op == nic.OpAtomicFAdd || wr.Op == nic.OpAtomicCAS:
		var why string
		if list, why = regions(q.ctx, q.pd, wr.Local, wr.More, nic.AccessLocalWrite, list); why != "" {
			return q.failReq(w, idx, nic.StatusLocalProtectionError, "local buffer: "+why, false)
		}
		if len(list) == 1 {
			local = list[0]
		}
	case wr.Flags&nic.FlagInline != 0:
		off := int(idx%uint64(len(q.sq))) * q.cfg.MaxInline
		local = q.inline[off : off+int(size)]
	case size > 0:
		list, why := regions(q.ctx, q.pd, wr.Local, wr.More, 0, list)
		if why != "" {
			return q.failReq(w, idx, nic.StatusLocalProtectionError, "local buffer: "+why, false)
		}
		local = list[0]
		if len(list) > 1 {
			q.gather = q.gather[:0]
			for _, b := range list {
				q.gather = append(q.gather, b...)
			}
			local = q.gather
		}
	}
	switch wr.Op {
	case nic.OpSend:
		return q.deliver(w, idx, local, 0, nic.OpRecv)
	case nic.OpRDMAWrite, nic.OpRDMAWriteImm:
		dst, why := lookup(r.ctx, r.pd, wr.RKey, rkeyTag, wr.RemoteAddr, size, nic.AccessRemoteWrite)
		if dst == nil {
			return q.failReq(w, idx, nic.StatusRemoteAccessError, "remote buffer at "+q.peer.String()+": "+why, true)
		}
		if wr.Op == nic.OpRDMAWriteImm {
			if !q.deliver(w, idx, nil, wr.Imm, nic.OpRecvImm) {
				return false
			}
		}
		copy(dst, local)
		n.stats.Bytes += uint64(len(local))
		w.byteLen = size
		if m := r.ctx.mrs[wr.RKey>>8-1]; len(m.writes) > 0 { // lookup found it
			m.landed(wr.RemoteAddr-m.addr, uint64(size))
		}
	case nic.OpRDMARead:
		src, why := lookup(r.ctx, r.pd, wr.RKey, rkeyTag, wr.RemoteAddr, size, nic.AccessRemoteRead)
		if src == nil {
			return q.failReq(w, idx, nic.StatusRemoteAccessError, "remote buffer at "+q.peer.String()+": "+why, true)
		}
		scatter(list, src)
		n.stats.Bytes += uint64(len(src))
		w.byteLen = size
	case nic.OpAtomicFAdd, nic.OpAtomicCAS:
		if wr.RemoteAddr%8 != 0 {
			return q.failReq(w, idx, nic.StatusRemoteInvalidRequest, "atomic remote address is not 8-byte aligned", true)
		}
		dst, why := lookup(r.ctx, r.pd, wr.RKey, rkeyTag, wr.RemoteAddr, 8, nic.AccessRemoteAtomic)
		if dst == nil {
			return q.failReq(w, idx, nic.StatusRemoteAccessError, "remote atomic target at "+q.peer.String()+": "+why, true)
		}
		old := binary.LittleEndian.Uint64(dst)
		if wr.Op == nic.OpAtomicFAdd {
			binary.LittleEndian.PutUint64(dst, old+wr.CompareAdd)
		} else if old == wr.CompareAdd {
			binary.LittleEndian.PutUint64(dst, wr.Swap)
		}
		if local != nil {
			binary.LittleEndian.PutUint64(local, old)
		}
		n.stats.Bytes += 8
		w.byteLen = 8
	}
	return true
}

// regions looks up the regions of a scatter/gather list (first, then more) with access need,
// appending them to out (a caller's array keeps one-element lists free of allocation); why says
// what failed. Zero-length elements give empty regions.
func regions(c *Context, p *pd, first nic.SGE, more []nic.SGE, need nic.Access, out [][]byte) (list [][]byte, why string) {
	for i := -1; i < len(more); i++ {
		e := first
		if i >= 0 {
			e = more[i]
		}
		if e.Len == 0 {
			out = append(out, nil)
			continue
		}
		b, why := lookup(c, p, e.LKey, lkeyTag, e.Addr, e.Len, need)
		if b == nil {
			if len(more) > 0 {
				why = fmt.Sprintf("SGE %d: %s", i+1, why)
			}
			return nil, why
		}
		out = append(out, b)
	}
	return out, ""
}

// scatter copies data across the regions of a list, in order, as far as it goes.
func scatter(list [][]byte, data []byte) {
	for _, b := range list {
		data = data[copy(b, data):]
	}
}

// deliver consumes the peer's next receive for a SEND (payload data) or a WRITE_IMM (no payload
// into the receive, immediate imm) and completes it.
func (q *qp) deliver(w *swqe, idx uint64, data []byte, imm uint32, op nic.Opcode) bool {
	n := q.ctx.nic
	r := q.remote
	rw := &r.rq[r.rqHead%uint64(len(r.rq))]
	r.rqHead++
	wc := nic.WC{ID: rw.wr.ID, Opcode: op, QPN: r.num, Imm: imm}
	if op == nic.OpRecvImm {
		wc.ByteLen = uint32(nic.SGLen(w.wr.Local, w.wr.More))
	} else {
		wc.ByteLen = uint32(len(data))
		if uint64(len(data)) > nic.SGLen(rw.wr.Local, rw.wr.More) {
			wc.Status = nic.StatusLocalLengthError
			n.endRecv(r, rw, wc)
			n.faultRecv(r, rw, r.rqHead-1, "the message from "+q.String()+" is longer than the receive buffer")
			return q.failReq(w, idx, nic.StatusRemoteInvalidRequest, "the message is longer than the receive buffer at "+q.peer.String(), true)
		}
		if len(data) > 0 {
			var one [1][]byte
			dst, why := regions(r.ctx, r.pd, rw.wr.Local, rw.wr.More, nic.AccessLocalWrite, one[:0])
			if why != "" {
				wc.Status = nic.StatusLocalProtectionError
				n.endRecv(r, rw, wc)
				n.faultRecv(r, rw, r.rqHead-1, "receive buffer: "+why)
				return q.failReq(w, idx, nic.StatusRemoteInvalidRequest, "the receive at "+q.peer.String()+" has a bad buffer", true)
			}
			scatter(dst, data)
			n.stats.Bytes += uint64(len(data))
		}
		w.byteLen = uint32(len(data))
	}
	n.stats.WQEs++
	n.endRecv(r, rw, wc)
	return true
}

// endRecv produces a receive's completion.
func (n *NIC) endRecv(r *qp, rw *rwqe, wc nic.WC) {
	n.clock++
	if rw.ev >= 0 {
		e := &n.trace[rw.ev]
		if e.Start == 0 {
			e.Start = n.clock
		}
		e.End, e.Status = n.clock, wc.Status
	}
	r.rcq.push(wc)
}

// failReq completes the request at idx with status, records why, and moves the QP (and with
// peerToo the peer) to the error state. It returns false for the callers' convenience.
func (q *qp) failReq(w *swqe, idx uint64, status nic.Status, why string, peerToo bool) bool {
	w.status = status
	q.ctx.nic.fault(q, w, idx, why)
	q.sqHead++
	if w.wr.Op == nic.OpRDMARead || w.wr.Op == nic.OpAtomicFAdd || w.wr.Op == nic.OpAtomicCAS {
		q.inflightRA++
	}
	q.fail(peerToo)
	return false
}

// fail moves the QP to the error state: requests in flight complete with their status, the rest
// of both queues flush. RC faults that the responder detects also break the responder's QP.
func (q *qp) fail(peerToo bool) {
	if q.state == stateError {
		return
	}
	q.state = stateError
	for q.sqDone < q.sqHead {
		q.completeOne()
	}
	q.flushSend()
	q.flushRecv()
	if peerToo && q.remote != nil && q.remote != q {
		q.remote.fail(false)
	}
}

// flushSend completes every request not yet executed with StatusFlushError.
func (q *qp) flushSend() {
	n := q.ctx.nic
	for q.sqDone < q.sqHead {
		q.completeOne()
	}
	for q.sqHead < q.sqTail {
		w := &q.sq[q.sqHead%uint64(len(q.sq))]
		w.status = nic.StatusFlushError
		n.clock++
		n.start(w.ev)
		q.sqHead++
		q.completeOne()
	}
}

// flushRecv completes every posted receive with StatusFlushError.
func (q *qp) flushRecv() {
	n := q.ctx.nic
	for q.rqHead < q.rqTail {
		rw := &q.rq[q.rqHead%uint64(len(q.rq))]
		q.rqHead++
		n.endRecv(q, rw, nic.WC{ID: rw.wr.ID, Status: nic.StatusFlushError, Opcode: nic.OpRecv, QPN: q.num})
	}
}

// completeOne completes the oldest in-flight request: a completion if it is signalled or failed,
// and, with a completion, the reclaim of its slot and all earlier ones.
func (q *qp) completeOne() {
	n := q.ctx.nic
	w := &q.sq[q.sqDone%uint64(len(q.sq))]
	n.clock++
	if w.ev >= 0 {
		e := &n.trace[w.ev]
		e.End, e.Status = n.clock, w.status
	}
	op := w.wr.Op
	if op == nic.OpRDMARead || op == nic.OpAtomicFAdd || op == nic.OpAtomicCAS {
		q.inflightRA--
	}
	q.sqDone++
	if w.wr.Flags&nic.FlagSignaled != 0 || w.status != nic.StatusSuccess {
		q.scq.push(nic.WC{ID: w.wr.ID, Status: w.status, Opcode: op, QPN: q.num, ByteLen: w.byteLen})
		q.sqFreed = q.sqDone
	}
}

// enableRecv moves a managed receive queue's enable index; the trace records when each receive
// became available.
func (q *qp) enableRecv(upto uint16) {
	n := q.ctx.nic
	if n.opts.Trace {
		for i := q.rqHead; i < q.rqTail; i++ {
			rw := &q.rq[i%uint64(len(q.rq))]
			if rw.ev >= 0 && n.trace[rw.ev].Start == 0 && wait.Enabled(i, uint32(upto)) {
				n.trace[rw.ev].Start = n.clock
			}
		}
	}
	q.rqEnable = upto
}
