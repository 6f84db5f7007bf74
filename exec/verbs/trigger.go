//go:build verbs && linux

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
)

// Triggers (nic.TriggerQP) live in C memory, where cd_poll_cq fires them between ibv_poll_cq
// and returning: each QP owns a cd_trigger, a FIFO of armed requests; each CQ owns a cd_cq, its
// completion count, how far a poll may hold completions (nic.HoldCQ), and the triggers that wait
// on it.

var _ = [1]struct{}{}[nic.MaxArmed-C.CD_ARMED] // the C and Go bounds agree

var (
	_ nic.TriggerQP = (*qp)(nil)
	_ nic.HoldCQ    = (*cq)(nil)
)

// ArmSend appends wr to the QP's armed requests, posted once c has returned after more completions.
func (q *qp) ArmSend(c nic.CQ, after int, wr *nic.SendWR) error {
	w, ok := c.(*cq)
	t := q.trig
	switch {
	case !ok || w.ctx != q.pd.ctx:
		return fmt.Errorf("verbs: %v: ArmSend on a CQ of another context or provider: %w", q, nic.ErrWrongContext)
	case after < 0:
		return fmt.Errorf("verbs: %v: ArmSend after %d completions: %w", q, after, nic.ErrBadRequest)
	case w.closed:
		return fmt.Errorf("verbs: %v: ArmSend on closed cq %d: %w", q, w.num, nic.ErrClosed)
	case t.tail-t.head == C.CD_ARMED:
		return fmt.Errorf("verbs: %v: %d requests are armed already: %w", q, nic.MaxArmed, nic.ErrQueueFull)
	}
	if err := q.usable(); err != nil {
		return err
	}
	if !w.watches(t) {
		if w.x.nwatch == C.CD_WATCHERS {
			return fmt.Errorf("verbs: %v: cq %d already serves %d QPs' triggers: %w", q, w.num, C.CD_WATCHERS, nic.ErrProviderLimited)
		}
		w.x.watch[w.x.nwatch] = t
		w.x.nwatch++
		q.watched = append(q.watched, w)
	}
	if len(wr.More) > C.CD_MAX_SGE-1 {
		return fmt.Errorf("verbs: %v: ArmSend of a scatter/gather list of %d SGEs, above the shim's %d: %w", q, 1+len(wr.More), C.CD_MAX_SGE, nic.ErrBadRequest)
	}
	slot := t.tail % C.CD_ARMED
	a := &t.ring[slot]
	a.cq, a.target = w.x, w.x.count+C.uint64_t(after)
	plain := *wr
	plain.More = nil
	*(*nic.SendWR)(unsafe.Pointer(&a.wr)) = plain // the layouts match (wrLayoutOK)
	if len(wr.More) > 0 {
		// The list lives in C memory, one row per ring slot, as long as the request is armed.
		if q.armMore == nil {
			p, err := calloc(C.CD_ARMED*C.CD_MAX_SGE, unsafe.Sizeof(C.cd_sge{}), "armed scatter/gather lists")
			if err != nil {
				return fmt.Errorf("verbs: %v: ArmSend: %w", q, err)
			}
			q.armMore = (*C.cd_sge)(p)
		}
		row := unsafe.Slice((*nic.SGE)(unsafe.Pointer(q.armMore)), C.CD_ARMED*C.CD_MAX_SGE)[int(slot)*C.CD_MAX_SGE:]
		n := copy(row, wr.More)
		a.wr.more, a.wr.more_len, a.wr.more_cap = (*C.cd_sge)(unsafe.Pointer(&row[0])), C.int64_t(n), C.int64_t(n)
	}
	t.tail++
	return nil
}

// Fired reports the armed count and what the polls posted since the last call, recording the
// posted requests as PostSend does.
func (q *qp) Fired() (int, int, error) {
	t := q.trig
	n := int(t.posted)
	for i := 0; i < n; i++ {
		q.logSend((*nic.SendWR)(unsafe.Pointer(&t.ring[(q.seen+uint32(i))%C.CD_ARMED].wr)))
	}
	var err error
	if t.rc != 0 {
		wr := *(*nic.SendWR)(unsafe.Pointer(&t.ring[(q.seen+uint32(n))%C.CD_ARMED].wr))
		err = q.postError("triggered PostSend", t.rc, n, &wr)
	}
	t.posted, t.rc = 0, 0
	q.seen = uint32(t.head)
	return int(t.tail - t.head), n, err
}

// Disarm drops the armed requests.
func (q *qp) Disarm() {
	q.trig.head = q.trig.tail
	q.trig.posted, q.trig.rc = 0, 0
	q.seen = uint32(q.trig.tail)
}

// Hold lets the CQ's polls hold the next n completions (nic.HoldCQ).
func (c *cq) Hold(n int) { c.x.held_to = c.x.count + C.uint64_t(n) }

// newTrigger allocates q's trigger.
func (q *qp) newTrigger() error {
	p, err := calloc(1, unsafe.Sizeof(C.cd_trigger{}), "trigger")
	if err != nil {
		return err
	}
	q.trig = (*C.cd_trigger)(p)
	q.trig.qp, q.trig.max_inline, q.trig.scratch = q.qp, C.uint32_t(q.maxInline), q.scratch
	return nil
}

// freeTrigger releases q's trigger when the QP is destroyed.
func (q *qp) freeTrigger() {
	if q.trig == nil {
		return
	}
	for _, c := range q.watched {
		c.unwatch(q.trig)
	}
	q.watched = nil
	C.free(unsafe.Pointer(q.trig))
	q.trig = nil
	if q.armMore != nil {
		C.free(unsafe.Pointer(q.armMore))
		q.armMore = nil
	}
}

// newX allocates the CQ's C side.
func (c *cq) newX() error {
	p, err := calloc(1, unsafe.Sizeof(C.cd_cq{}), "CQ")
	if err != nil {
		return err
	}
	c.x = (*C.cd_cq)(p)
	c.x.cq = c.cq
	return nil
}

func (c *cq) watches(t *C.cd_trigger) bool {
	for i := 0; i < int(c.x.nwatch); i++ {
		if c.x.watch[i] == t {
			return true
		}
	}
	return false
}

func (c *cq) unwatch(t *C.cd_trigger) {
	if c.x == nil {
		return
	}
	n := int(c.x.nwatch)
	for i := 0; i < n; i++ {
		if c.x.watch[i] == t {
			copy(c.x.watch[i:n], c.x.watch[i+1:n])
			c.x.watch[n-1] = nil
			c.x.nwatch--
			return
		}
	}
}

// freeX releases the CQ's C side when the CQ is destroyed (its QPs are gone by then).
func (c *cq) freeX() {
	if c.x != nil {
		C.free(unsafe.Pointer(c.x))
		c.x = nil
	}
}
