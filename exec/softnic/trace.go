package softnic

import (
	"fmt"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/wait"
)

// Event is the life of one work request on the NIC's logical clock, which ticks once per post,
// execution and completion across the whole fabric. Times are 1 or more; 0 means "not yet".
//
// For a send-queue request Start is when it began to execute (its data moved then) and End when it
// completed. For a receive, Start is when it became available to incoming messages (posted, or
// enabled on a managed queue) and End when a message landed in it. A request whose End is before
// another's Start finished before the other began: that is what dependency checkers compare.
type Event struct {
	Rank   int
	QPN    uint32
	Recv   bool
	Index  uint64 // cumulative index in its queue
	ID     uint64 // wr_id
	Op     nic.Opcode
	Status nic.Status
	Posted uint64
	Start  uint64
	End    uint64
}

// String prints the event on one line.
func (e Event) String() string {
	side := "sq"
	if e.Recv {
		side = "rq"
	}
	return fmt.Sprintf("rank %d qp %d %s #%d %s wr_id %d: posted %d start %d end %d (%s)",
		e.Rank, e.QPN, side, e.Index, e.Op, e.ID, e.Posted, e.Start, e.End, e.Status)
}

// Trace returns the recorded events in posting order (nil unless Options.Trace). The slice is the
// NIC's own: copy it before the next post if it must survive.
func (n *NIC) Trace() []Event { return n.trace }

// ResetTrace forgets the recorded events (for example between iterations).
func (n *NIC) ResetTrace() { n.trace = n.trace[:0] }

// SetTrace turns recording on or off for requests posted from now on.
func (n *NIC) SetTrace(on bool) { n.opts.Trace = on }

func (n *NIC) record(e Event) int32 {
	n.trace = append(n.trace, e)
	return int32(len(n.trace) - 1)
}

func (n *NIC) start(ev int32) {
	if ev >= 0 {
		n.trace[ev].Start = n.clock
	}
}

// Fault is a work request that failed (not flushed) and why, in words.
type Fault struct {
	Rank   int
	QPN    uint32
	Recv   bool
	Index  uint64
	ID     uint64
	Op     nic.Opcode
	Status nic.Status
	Why    string
}

// String prints the fault on one line.
func (f Fault) String() string {
	side := "send"
	if f.Recv {
		side = "recv"
	}
	return fmt.Sprintf("rank %d qp %d %s queue #%d %s wr_id %d: %s: %s", f.Rank, f.QPN, side, f.Index, f.Op, f.ID, f.Status, f.Why)
}

// Faults returns every failed request so far, in the order they failed.
func (n *NIC) Faults() []Fault { return n.faults }

// Explain returns why the request id on rank's QP qpn failed, if it did (nic.FaultExplainer).
func (n *NIC) Explain(rank int, qpn uint32, id uint64) (string, bool) {
	for i := len(n.faults) - 1; i >= 0; i-- {
		f := &n.faults[i]
		if f.Rank == rank && f.QPN == qpn && f.ID == id {
			return f.Why, true
		}
	}
	return "", false
}

func (n *NIC) fault(q *qp, w *swqe, idx uint64, why string) {
	n.faults = append(n.faults, Fault{Rank: q.ctx.rank, QPN: q.num, Index: idx, ID: w.wr.ID, Op: w.wr.Op, Status: w.status, Why: why})
}

func (n *NIC) faultRecv(q *qp, rw *rwqe, idx uint64, why string) {
	st := nic.StatusLocalProtectionError
	if rw.ev >= 0 {
		st = n.trace[rw.ev].Status
	}
	n.faults = append(n.faults, Fault{Rank: q.ctx.rank, QPN: q.num, Recv: true, Index: idx, ID: rw.wr.ID, Op: nic.OpRecv, Status: st, Why: why})
}

// Stalls describes every queue with work that cannot run now, by rank and QP number: the send
// queue's head and what blocks it, then the receive queue's oldest posted receive.
func (n *NIC) Stalls() []nic.Stall {
	var out []nic.Stall
	for _, c := range n.ctxs {
		if c == nil {
			continue
		}
		for _, q := range c.qps {
			if q.closed || q.state == stateError {
				continue
			}
			if q.sqHead < q.sqTail {
				if s, ok := q.sendStall(); ok {
					out = append(out, s)
				}
			}
			if q.rqHead < q.rqTail {
				rw := &q.rq[q.rqHead%uint64(len(q.rq))]
				s := nic.Stall{Rank: c.rank, QPN: q.num, Recv: true, Index: q.rqHead, ID: rw.wr.ID, Op: nic.OpRecv,
					Reason: nic.StallRecvPending, Peer: q.peer}
				if q.cfg.ManagedRecv && !wait.Enabled(q.rqHead, uint32(q.rqEnable)) {
					s.Reason, s.Reached, s.Awaited = nic.StallNotEnabled, uint64(q.rqEnable), uint64(uint16(q.rqHead+1))
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func (q *qp) sendStall() (nic.Stall, bool) {
	w := &q.sq[q.sqHead%uint64(len(q.sq))]
	s := nic.Stall{Rank: q.ctx.rank, QPN: q.num, Index: q.sqHead, ID: w.wr.ID, Op: w.wr.Op, Peer: q.peer}
	switch q.headBlocker() {
	case blockedNotEnabled:
		s.Reason, s.Reached, s.Awaited = nic.StallNotEnabled, uint64(q.sqEnable), uint64(uint16(q.sqHead+1))
	case blockedFence:
		s.Reason = nic.StallFence
	case blockedWait:
		c := q.ctx.cqByNum(w.wr.WaitCQ)
		s.Reason, s.CQ, s.Reached, s.Awaited = nic.StallWaitCQ, c.num, uint64(wait.CQ.Wrap(c.produced)), uint64(wait.CQ.Wrap(uint64(w.wr.Count)))
	case blockedRNR:
		s.Reason = nic.StallNoRecv
	default:
		return s, false
	}
	return s, true
}
