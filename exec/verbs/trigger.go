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

	"github.com/coredag/coredag/exec"
)

// Triggers (exec.TriggerQP) live in C memory: cd_poll_cq fires them between ibv_poll_cq and
// returning, so the next transfer of a chain starts without a return to Go. Each QP owns one
// cd_trigger; each CQ keeps the triggers that have watched it in a small C array it hands to
// cd_poll_cq.

// maxWatchers bounds the QPs whose triggers one CQ serves; ArmSend fails beyond it and the
// engine posts those requests itself.
const maxWatchers = 16

var _ = [1]struct{}{}[exec.MaxTriggerWRs-C.CD_TRIGGER_WRS] // the C and Go bounds agree

var _ exec.TriggerQP = (*qp)(nil)

// trigWRs is the trigger's request array, seen as Go values (the layouts match: wrLayoutOK).
func (q *qp) trigWRs() *[exec.MaxTriggerWRs]exec.SendWR {
	return (*[exec.MaxTriggerWRs]exec.SendWR)(unsafe.Pointer(&q.trig.wrs[0]))
}

// ArmSend arms wr to be posted by cq's Poll after after more successful completions.
func (q *qp) ArmSend(c exec.CQ, after int, wr []exec.SendWR) error {
	w, ok := c.(*cq)
	switch {
	case !ok || w.ctx != q.pd.ctx:
		return fmt.Errorf("verbs: %v: ArmSend on a CQ of another context or provider: %w", q, exec.ErrWrongContext)
	case len(wr) == 0 || len(wr) > exec.MaxTriggerWRs:
		return fmt.Errorf("verbs: %v: ArmSend with %d requests: a trigger holds 1..%d: %w", q, len(wr), exec.MaxTriggerWRs, exec.ErrBadRequest)
	case after < 1:
		return fmt.Errorf("verbs: %v: ArmSend after %d completions: arm for at least one, or post now: %w", q, after, exec.ErrBadRequest)
	case w.closed:
		return fmt.Errorf("verbs: %v: ArmSend on closed cq %d: %w", q, w.num, exec.ErrClosed)
	}
	if err := q.usable(); err != nil {
		return err
	}
	t := q.trig
	if q.trigCQ != w {
		if q.trigCQ != nil {
			q.trigCQ.unwatch(t)
		}
		q.trigCQ = nil
		if !w.watch(t) {
			return fmt.Errorf("verbs: %v: cq %d already serves %d triggers: %w", q, w.num, maxWatchers, exec.ErrProviderLimited)
		}
		q.trigCQ = w
	}
	t.cq, t.after, t.n = w.cq, C.int32_t(after), C.int32_t(copy(q.trigWRs()[:], wr))
	t.armed, t.fired = 1, 0
	return nil
}

// Fired reports the trigger's outcome once, recording what it posted as PostSend does.
func (q *qp) Fired() (bool, int, error) {
	t := q.trig
	if t.armed != 0 || t.fired == 0 {
		return t.armed != 0, 0, nil
	}
	t.fired = 0
	n := int(t.posted)
	wrs := q.trigWRs()
	q.logSends(wrs[:n])
	if t.rc == 0 {
		return false, n, nil
	}
	return false, n, q.postError("triggered PostSend", t.rc, n, &wrs[n])
}

// Disarm cancels the trigger.
func (q *qp) Disarm() { q.trig.armed, q.trig.fired = 0, 0 }

// newTrigger allocates q's trigger.
func (q *qp) newTrigger() {
	q.trig = (*C.cd_trigger)(C.calloc(1, C.size_t(unsafe.Sizeof(C.cd_trigger{}))))
	q.trig.qp, q.trig.max_inline, q.trig.scratch = q.qp, C.uint32_t(q.maxInline), q.scratch
}

// freeTrigger releases q's trigger when the QP is destroyed.
func (q *qp) freeTrigger() {
	if q.trig == nil {
		return
	}
	if q.trigCQ != nil {
		q.trigCQ.unwatch(q.trig)
		q.trigCQ = nil
	}
	C.free(unsafe.Pointer(q.trig))
	q.trig = nil
}

// watchers is the CQ's C array of trigger pointers, as a Go slice.
func (c *cq) watchers() []*C.cd_trigger {
	if c.watchArr == nil {
		c.watchArr = (**C.cd_trigger)(C.calloc(maxWatchers, C.size_t(unsafe.Sizeof((*C.cd_trigger)(nil)))))
	}
	return unsafe.Slice(c.watchArr, maxWatchers)
}

// watch adds t to the triggers c fires; false when c serves maxWatchers already.
func (c *cq) watch(t *C.cd_trigger) bool {
	if c.nwatch == maxWatchers {
		return false
	}
	c.watchers()[c.nwatch] = t
	c.nwatch++
	return true
}

func (c *cq) unwatch(t *C.cd_trigger) {
	w := c.watchers()
	for i := 0; i < c.nwatch; i++ {
		if w[i] == t {
			copy(w[i:], w[i+1:c.nwatch])
			c.nwatch--
			w[c.nwatch] = nil
			return
		}
	}
}

// freeWatchers releases the CQ's array when the CQ is destroyed (its QPs are gone by then).
func (c *cq) freeWatchers() {
	if c.watchArr != nil {
		C.free(unsafe.Pointer(c.watchArr))
		c.watchArr, c.nwatch = nil, 0
	}
}
