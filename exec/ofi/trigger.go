//go:build ofi && linux

package ofi

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sort"

	"github.com/coredag/coredag/exec/nic"
)

// The nic contract's counters and triggered work (nic.TriggerContext) on libfabric: a counter is
// an fi_cntr, triggered sends and receives are operations posted with FI_TRIGGER and a threshold,
// counter work is FI_QUEUE_WORK deferred work, and CancelTriggers is FI_FLUSH_WORK. Binding a
// counter to a CQ is done on this side: the CQ adds one to the counter (fi_cntr_add) for every
// completion it hands out, in queue order, which is what the contract counts (libfabric binds
// counters to endpoints, and only before they are enabled, while the engines bind after they
// connected; libfabric's own event counts would also include unsignalled requests). The provider
// fires the triggered operations that fi_cntr_add makes due inside that call.
//
// Counter work is run by this side too, not queued with FI_QUEUE_WORK: the sockets provider runs
// deferred work inside fi_cntr_add with the counter's lock held, so counter work between two
// counters that raise each other (which triggered plans have: a join counter and a receive-post
// counter) deadlocks in libfabric. Every change of a counter comes from this side (completions
// counted, Add and Set by the engine, counter work), so after each one the due counter work runs,
// in threshold order per counter, each add or set an fi_cntr_add or fi_cntr_set that fires the
// provider's triggered operations.

var (
	_ nic.TriggerContext = (*Context)(nil)
	_ nic.Counter        = (*Counter)(nil)
)

// trig is one piece of triggered work handed to libfabric and not known to have fired.
type trig struct {
	cntr *Counter
	thr  uint64
	q    *QP // the endpoint it posts on
}

// cwork is counter work waiting for its counter: add (or set) value on target at threshold.
type cwork struct {
	thr    uint64
	target *Counter
	value  uint64
	set    bool
}

// fireDue runs the counter work that has become due, until none is. It looks at the counters
// marked dirty (their count changed or they got work since it last looked; a counter it has
// looked at has no due work left) and at those libfabric raises that have work, in the
// context's order, as often as running work marks more.
func (c *Context) fireDue() {
	if c.firing {
		return // the outer call's loop sees what this change made due
	}
	c.firing = true
	defer func() { c.firing = false }()
	for again := true; again && c.trigErr == nil; {
		again = false
		for _, k := range c.cntrs {
			if !k.dirty && (!k.ext || len(k.work) == 0) {
				continue // nothing this side did can have made its work due
			}
			k.dirty = false
			for len(k.work) > 0 && !k.closed && k.value() >= k.work[0].thr && c.trigErr == nil {
				w := k.work[0]
				k.work = k.work[:copy(k.work, k.work[1:])] // in place: the next iteration's work reuses the array
				c.nwork--
				var r C.int
				if w.set {
					r = C.ofi_cntr_set(w.target.cntr, C.uint64_t(w.value))
				} else {
					r = C.ofi_cntr_add(w.target.cntr, C.uint64_t(w.value))
				}
				if r != 0 {
					c.trigErr = fmt.Errorf("ofi: rank %d: counter work: %s", c.rank, fiErr(r))
					c.CancelTriggers()
				} else {
					w.target.added(w.value, w.set)
				}
				again = true
			}
		}
	}
}

// Value is the success count: fi_cntr_read for a counter libfabric raises on its own, else the
// count this side keeps of its own changes (Counter.ext).
func (k *Counter) Value() uint64 { return k.value() }

// CreateCounter opens a counter at 0 (nic.TriggerContext).
func (c *Context) CreateCounter() (nic.Counter, error) { return c.OpenCounter() }

func (c *Context) ownCounter(x nic.Counter) (*Counter, error) {
	k, ok := x.(*Counter)
	if !ok || k.c != c {
		return nil, fmt.Errorf("ofi: rank %d: a counter of another context or provider: %w", c.rank, nic.ErrWrongContext)
	}
	if k.closed {
		return nil, fmt.Errorf("ofi: rank %d: closed counter: %w", c.rank, nic.ErrClosed)
	}
	return k, nil
}

// BindCounter makes every completion cq hands out raise x by one.
func (c *Context) BindCounter(x nic.Counter, cq nic.CQ) error {
	k, err := c.ownCounter(x)
	if err != nil {
		return err
	}
	q, ok := cq.(*CQ)
	if !ok || q.c != c {
		return fmt.Errorf("ofi: rank %d: BindCounter to a CQ of another context: %w", c.rank, nic.ErrWrongContext)
	}
	q.cntrs = append(q.cntrs, k)
	return nil
}

// counted raises the counters bound to q by one completion; libfabric runs the triggered work
// this makes due. A failed fi_cntr_add stops triggered work (TriggerErr).
func (q *CQ) counted() {
	for _, k := range q.cntrs {
		if r := C.ofi_cntr_add(k.cntr, 1); r != 0 {
			if q.c.trigErr == nil {
				q.c.trigErr = fmt.Errorf("ofi: rank %d: cq %d: counting a completion: fi_cntr_add: %s", q.c.rank, q.num, fiErr(r))
				q.c.CancelTriggers()
			}
		} else {
			k.added(1, false)
		}
	}
	if len(q.cntrs) > 0 && q.c.nwork > 0 {
		q.c.fireDue()
	}
}

// Trigger hands w to libfabric, to run once x reaches threshold.
func (c *Context) Trigger(x nic.Counter, threshold uint64, w *nic.TriggeredWR) error {
	if c.closed {
		return nic.ErrClosed
	}
	k, err := c.ownCounter(x)
	if err != nil {
		return err
	}
	if !c.p.Triggered() {
		return fmt.Errorf("ofi: %s has no FI_TRIGGER: %w", c.p.name, nic.ErrProviderLimited)
	}
	if c.trigErr != nil {
		return c.trigErr
	}
	switch w.Kind {
	case nic.TrigSend, nic.TrigRecv:
		q, ok := w.QP.(*QP)
		if !ok || q.c != c {
			return fmt.Errorf("ofi: rank %d: triggered work on a QP of another context: %w", c.rank, nic.ErrWrongContext)
		}
		if w.Kind == nic.TrigSend {
			err = q.postSend(&w.Send, k, threshold)
		} else {
			err = q.postRecv(&w.Recv, k, threshold)
		}
	case nic.TrigAdd, nic.TrigSet:
		t, err := c.ownCounter(w.Target)
		if err != nil {
			return err
		}
		i := sort.Search(len(k.work), func(i int) bool { return k.work[i].thr > threshold })
		k.work = append(k.work, cwork{})
		copy(k.work[i+1:], k.work[i:])
		k.work[i] = cwork{thr: threshold, target: t, value: w.Value, set: w.Kind == nic.TrigSet}
		c.nwork++
		k.dirty = true
		c.fireDue()
		return nil
	default:
		return fmt.Errorf("ofi: rank %d: triggered work of kind %d: %w", c.rank, w.Kind, nic.ErrBadRequest)
	}
	return err
}

// arm records a request posted on q (handed to libfabric, or waiting on coredag's side to be)
// that starts when k reaches threshold; nothing for an untriggered one (k nil). A triggered
// request that completes at once (an error, a due NOP) is not armed.
func (c *Context) arm(k *Counter, threshold uint64, q *QP) {
	if k == nil {
		return
	}
	if len(c.pend) == cap(c.pend) {
		c.prunePending() // the work of earlier iterations has fired: room without growing
	}
	c.pend = append(c.pend, trig{cntr: k, thr: threshold, q: q})
}

// armedOn is how much of the triggered work still waiting would post on q.
func (c *Context) armedOn(q *QP) int {
	c.prunePending()
	n := 0
	for _, t := range c.pend {
		if t.q == q {
			n++
		}
	}
	return n
}

// prunePending drops from pend the work that has fired, and returns how much is left.
func (c *Context) prunePending() int {
	n := 0
	for _, t := range c.pend {
		if !t.cntr.closed && t.cntr.value() < t.thr {
			c.pend[n] = t
			n++
		}
	}
	c.pend = c.pend[:n]
	return n
}

// PendingTriggers is how much triggered work waits: work whose counter is below its threshold.
func (c *Context) PendingTriggers() int { return c.prunePending() + c.nwork }

// CancelTriggers drops every triggered operation and counter work of the context's domain that
// has not run (FI_FLUSH_WORK). Requests it drops never complete; the queues they held slots in
// are of no further use.
func (c *Context) CancelTriggers() int {
	if c.closed {
		return 0
	}
	n := c.PendingTriggers()
	if n == 0 {
		return 0
	}
	// Work the domain cannot drop (noFlush: sockets keeps it on its counters), or did not (a
	// failed flush), stays armed, and its endpoints open until the context closes (QP.Close).
	if len(c.pend) > 0 && !c.noFlush {
		if r := C.ofi_flush_work(c.dom); r == 0 {
			c.pend = c.pend[:0] // dropped: their endpoints may close
		} else if c.trigErr == nil {
			c.trigErr = fmt.Errorf("ofi: rank %d: FI_FLUSH_WORK: %s", c.rank, fiErr(r))
		}
	}
	for _, q := range c.qps {
		// Requests waiting for room in the endpoint never go (the queue is of no further use).
		q.sback, q.rback = nil, nil
	}
	for _, k := range c.cntrs {
		k.work = nil
	}
	c.nwork = 0
	return n
}

// TriggerErr is the error that stopped the context's triggered work, if one did.
func (c *Context) TriggerErr() error { return c.trigErr }
