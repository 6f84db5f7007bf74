package softnic

import (
	"fmt"

	"github.com/coredag/coredag/exec/nic"
	"github.com/coredag/coredag/wait"
)

// cq is a completion queue: a ring of completions plus the cumulative producer count that
// CQE_WAIT compares against.
type cq struct {
	ctx      *Context
	num      uint32
	ring     []nic.WC
	produced uint64 // completions produced over the CQ's life
	consumed uint64 // completions polled
	overflow bool
	closed   bool
	watch    []*qp      // QPs whose trigger has watched this CQ
	waiters  []*qp      // QPs parked with a CQE_WAIT on this CQ at their head (qp.awake)
	listed   bool       // in the NIC's ready list (ReadyCQs)
	cntrs    []*counter // counters bound to this CQ (BindCounter)
}

var _ nic.CQ = (*cq)(nil)

func (q *cq) Num() uint32 { return q.num }
func (q *cq) Depth() int  { return len(q.ring) }

// Produced is the cumulative number of completions the CQ has produced.
func (q *cq) Produced() uint64 { return q.produced }

// Poll returns pending completions; when there are none it advances the fabric until this CQ has
// one or nothing can run.
func (q *cq) Poll(wc []nic.WC) (int, error) {
	if q.closed {
		return 0, fmt.Errorf("softnic: rank %d cq %d: Poll on a closed CQ: %w", q.ctx.rank, q.num, nic.ErrClosed)
	}
	if q.produced == q.consumed && !q.overflow {
		q.ctx.nic.progress(q)
	}
	if q.overflow {
		return 0, fmt.Errorf("softnic: rank %d cq %d overflowed: more than %d completions were pending; "+
			"poll it more often or create it deeper", q.ctx.rank, q.num, len(q.ring))
	}
	n := 0
	d := uint64(len(q.ring))
	for n < len(wc) && q.consumed < q.produced {
		wc[n] = q.ring[q.consumed%d]
		q.consumed++
		n++
	}
	if n > 0 && len(q.watch) > 0 {
		q.fire(wc[:n])
	}
	return n, nil
}

// Close destroys the CQ.
func (q *cq) Close() error {
	for _, p := range q.ctx.qps {
		if !p.closed && (p.scq == q || p.rcq == q) {
			return fmt.Errorf("softnic: rank %d cq %d: close QP %d first, it uses this CQ", q.ctx.rank, q.num, p.num)
		}
	}
	q.closed = true
	q.wake(true) // a WAIT on a closed CQ no longer holds its queue
	return nil
}

// wake puts back on the fabric's active list the QPs parked on this CQ whose WAIT is reached (all
// of them with all), and forgets the entries of QPs that no longer wait on it.
func (q *cq) wake(all bool) {
	k := 0
	for _, p := range q.waiters {
		if p.waiting != q {
			continue
		}
		w := &p.sq[p.sqHead%uint64(len(p.sq))]
		if all || p.closed || p.sqHead == p.sqTail || w.wr.Op != nic.OpCQEWait || w.wr.WaitCQ != q.num || wait.Satisfied(q.produced, w.wr.Count) {
			p.waiting = nil
			p.activate()
			continue
		}
		q.waiters[k] = p
		k++
	}
	clear(q.waiters[k:])
	q.waiters = q.waiters[:k]
}

// push produces one completion.
func (q *cq) push(wc nic.WC) {
	n := q.ctx.nic
	n.stats.CQEs++
	if q.produced-q.consumed >= uint64(len(q.ring)) {
		q.overflow = true
	} else {
		q.ring[q.produced%uint64(len(q.ring))] = wc
	}
	q.produced++
	if !q.listed {
		q.listed = true
		n.ready = append(n.ready, q)
	}
	if len(q.waiters) > 0 {
		q.wake(false)
	}
	q.counted()
}

// ReadyCQs appends the CQs that produced completions since they were last listed (nic.CQNotifier).
func (n *NIC) ReadyCQs(buf []nic.CQ) []nic.CQ {
	for _, q := range n.ready {
		q.listed = false
		if !q.closed {
			buf = append(buf, q)
		}
	}
	clear(n.ready)
	n.ready = n.ready[:0]
	return buf
}
