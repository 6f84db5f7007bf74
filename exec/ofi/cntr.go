//go:build ofi && linux

package ofi

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
)

// Event is a set of endpoint events a counter counts (libfabric's FI_SEND, FI_RECV, ... bind flags).
type Event uint64

// Events.
const (
	EvSend        Event = C.FI_SEND         // completed sends
	EvRecv        Event = C.FI_RECV         // completed receives
	EvWrite       Event = C.FI_WRITE        // completed RDMA writes this endpoint issued
	EvRead        Event = C.FI_READ         // completed RDMA reads this endpoint issued
	EvRemoteWrite Event = C.FI_REMOTE_WRITE // RDMA writes peers made into this endpoint's regions (FI_RMA_EVENT)
	EvRemoteRead  Event = C.FI_REMOTE_READ  // RDMA reads peers made from them (FI_RMA_EVENT)
)

// ErrTimeout is returned by Counter.Wait when the count is not reached in time.
var ErrTimeout = errors.New("timed out")

// Counter is a libfabric completion counter (fi_cntr) of one context: a success count and an
// error count, which endpoints bound to it (CreateEndpoint) increment, and which triggered
// operations and deferred work watch.
type Counter struct {
	c      *Context
	cntr   *C.struct_fid_cntr
	work   []cwork // counter work waiting on this counter, by threshold (Context.Trigger)
	closed bool
	// ext: libfabric may raise the count on its own (the counter is bound to an endpoint or to a
	// region, or is the target of deferred work), so value reads it. Otherwise every change
	// comes from this side (Add, Set, completions counted, counter work), and val is the count:
	// the hot paths (fireDue, the engine's threshold checks) then make no call into libfabric.
	ext bool
	val uint64
	// dirty: the count changed, or work was queued, since fireDue last looked at the counter.
	dirty bool
}

// value is the success count: val, or fi_cntr_read for a counter libfabric raises (ext).
func (k *Counter) value() uint64 {
	if k.ext {
		return k.Read()
	}
	return k.val
}

// added records that this side added v to the count (fi_cntr_add succeeded), or set it to v.
func (k *Counter) added(v uint64, set bool) {
	if set {
		k.val = v
	} else {
		k.val += v
	}
	k.dirty = true
}

// OpenCounter opens a counter (fi_cntr_open, completion events, waitable).
func (c *Context) OpenCounter() (*Counter, error) {
	if c.closed {
		return nil, nic.ErrClosed
	}
	k := &Counter{c: c}
	if r := C.ofi_cntr_open(c.dom, &k.cntr); r != 0 {
		return nil, fmt.Errorf("ofi: fi_cntr_open: %s", fiErr(r))
	}
	c.cntrs = append(c.cntrs, k)
	return k, nil
}

// Read is the success count (fi_cntr_read).
func (k *Counter) Read() uint64 { return uint64(C.ofi_cntr_read(k.cntr)) }

// ReadErr is the error count (fi_cntr_readerr).
func (k *Counter) ReadErr() uint64 { return uint64(C.ofi_cntr_readerr(k.cntr)) }

// Add adds v to the success count (fi_cntr_add); triggered work whose threshold it reaches runs.
// Counter work it makes due runs too (Context.Trigger).
func (k *Counter) Add(v uint64) error {
	if err := check("fi_cntr_add", C.ofi_cntr_add(k.cntr, C.uint64_t(v))); err != nil {
		return err
	}
	k.added(v, false)
	k.c.fireDue()
	return k.c.trigErr
}

// Set sets the success count (fi_cntr_set).
func (k *Counter) Set(v uint64) error {
	if err := check("fi_cntr_set", C.ofi_cntr_set(k.cntr, C.uint64_t(v))); err != nil {
		return err
	}
	k.added(v, true)
	k.c.fireDue()
	return k.c.trigErr
}

// Wait blocks until the success count reaches threshold (fi_cntr_wait), at most timeout. It
// returns ErrTimeout if it was not reached, or an error if an operation counted on the counter
// failed meanwhile.
func (k *Counter) Wait(threshold uint64, timeout time.Duration) error {
	// sockets' fi_cntr_wait can report a timeout at once, long before the time asked for: wait
	// again until the deadline, which bounds the loop.
	deadline := time.Now().Add(timeout)
	errs := k.ReadErr()
	for {
		if k.Read() >= threshold {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("ofi: counter at %d of %d after %v: %w", k.Read(), threshold, timeout, ErrTimeout)
		}
		ms := min(max(left.Milliseconds(), 1), 1<<30)
		if k.c.prog != nil {
			// Manual progress: fi_cntr_wait moves no data; progress every context of the
			// provider (the peer may be in this process) and wait a millisecond at a time.
			k.c.p.polled(k.c.prog, false)
			k.c.DriveProgress()
			ms = 1
		}
		r := C.ofi_cntr_wait(k.cntr, C.uint64_t(threshold), C.int(ms))
		switch {
		case r == 0:
			return nil
		case r == -C.FI_ETIMEDOUT || r == C.FI_ETIMEDOUT || r == -C.FI_EAGAIN: // sockets returns +ETIMEDOUT
			if e := k.ReadErr(); e != errs {
				return fmt.Errorf("ofi: counter at %d of %d: %d errors counted meanwhile", k.Read(), threshold, e-errs)
			}
			time.Sleep(time.Millisecond)
		default:
			return check(fmt.Sprintf("fi_cntr_wait(%d)", threshold), r)
		}
	}
}

// Close closes the counter; the endpoints bound to it must have been closed.
func (k *Counter) Close() error {
	if k.closed {
		return nil
	}
	k.closed = true
	return check("fi_close(cntr)", C.ofi_close(&k.cntr.fid))
}

// PostTriggered posts wr (SEND, RDMA_WRITE or RDMA_READ) as a triggered operation: libfabric
// starts it when cntr's success count reaches threshold (FI_TRIGGER with a threshold triggered
// context). It takes a slot of the send queue like any request, and completes in its order.
func (q *QP) PostTriggered(cntr *Counter, threshold uint64, wr nic.SendWR) error {
	if cntr == nil || cntr.c != q.c {
		return fmt.Errorf("ofi: triggering counter of another context: %w", nic.ErrWrongContext)
	}
	if !q.c.p.Triggered() {
		return fmt.Errorf("ofi: %s has no FI_TRIGGER: %w", q.c.p.name, nic.ErrProviderLimited)
	}
	return q.postSend(&wr, cntr, threshold)
}

// Work is deferred counter work queued on a domain (FI_QUEUE_WORK).
type Work struct {
	c *Context
	w *C.ofi_cntr_work
}

// QueueCounterWork queues deferred work: when trig's success count reaches threshold, add value
// to target's count (or set it, if set). done, if not nil, counts the work when it has run.
func (c *Context) QueueCounterWork(trig *Counter, threshold uint64, target *Counter, value uint64, set bool, done *Counter) (*Work, error) {
	if c.closed {
		return nil, nic.ErrClosed
	}
	if trig == nil || target == nil || trig.c != c || target.c != c || (done != nil && done.c != c) {
		return nil, fmt.Errorf("ofi: deferred work on counters of another context: %w", nic.ErrWrongContext)
	}
	p, err := calloc(1, unsafe.Sizeof(C.ofi_cntr_work{}), fmt.Sprintf("rank %d: deferred counter work", c.rank))
	if err != nil {
		return nil, err
	}
	w := (*C.ofi_cntr_work)(p)
	target.ext = true // libfabric runs the work: the counts move out of this side's sight
	if done != nil {
		done.ext = true
	}
	var dc *C.struct_fid_cntr
	if done != nil {
		dc = done.cntr
	}
	s := C.int(0)
	if set {
		s = 1
	}
	if r := C.ofi_queue_cntr_work(c.dom, w, trig.cntr, C.uint64_t(threshold), target.cntr, C.uint64_t(value), s, dc); r != 0 {
		C.free(unsafe.Pointer(w))
		return nil, fmt.Errorf("ofi: FI_QUEUE_WORK: %s", fiErr(r))
	}
	c.work = append(c.work, w) // freed when the context closes: libfabric may hold it until then
	return &Work{c: c, w: w}, nil
}

// Cancel cancels the work if it has not run (FI_CANCEL_WORK).
func (w *Work) Cancel() error {
	return check("FI_CANCEL_WORK", C.ofi_cancel_work(w.c.dom, w.w))
}
