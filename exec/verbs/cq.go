//go:build verbs && linux

package verbs

/*
#include "shim.h"
#cgo noescape cd_poll_cq
#cgo nocallback cd_poll_cq
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
)

// cq is a completion queue.
type cq struct {
	ctx    *devContext
	cq     *C.struct_ibv_cq
	num    uint32
	depth  int
	closed bool

	x *C.cd_cq // C memory: the count, hold and triggers cd_poll_cq works with (trigger.go)
}

func (q *cq) Num() uint32 { return q.num }
func (q *cq) Depth() int  { return q.depth }

// Poll reads up to len(wc) completions with ibv_poll_cq calls of up to 64 entries, converting
// them in C straight into wc; the triggers armed on this CQ fire on the way (trigger.go).
func (q *cq) Poll(wc []nic.WC) (int, error) { return q.PollSpin(wc, 1) }

// PollSpin is Poll, polling up to spins times in C until a completion comes.
func (q *cq) PollSpin(wc []nic.WC, spins int) (int, error) {
	if len(wc) == 0 {
		return 0, nil
	}
	if q.closed {
		return 0, fmt.Errorf("verbs: rank %d: Poll on closed cq %d: %w", q.ctx.rank, q.num, nic.ErrClosed)
	}
	if !wrLayoutOK {
		return 0, fmt.Errorf("verbs: rank %d cq %d: nic.WC no longer matches the C layout in exec/verbs/shim.h: %w", q.ctx.rank, q.num, nic.ErrProviderLimited)
	}
	c := q.ctx
	spins = max(spins, 1)
	yieldAfter := -1
	if c.prov.yield {
		yieldAfter = max(idleBeforeYield-c.idle, 0)
	}
	n := int(C.cd_poll_cq(q.x, (*C.cd_wc)(unsafe.Pointer(&wc[0])), C.int(len(wc)), C.int(spins), C.int(yieldAfter)))
	if n == 0 {
		c.idle = min(c.idle+spins, idleBeforeYield)
	} else {
		c.idle = 0
	}
	if n < 0 {
		return 0, fmt.Errorf("verbs: rank %d: ibv_poll_cq failed on cq %d (depth %d): the CQ overflowed or the device failed; give it more depth or poll more often", q.ctx.rank, q.num, q.depth)
	}
	for i := range wc[:n] {
		if wc[i].Time != 0 {
			wc[i].Time += c.clockOff
		}
		if wc[i].Opcode == unknownOpcode {
			// Error completions carry no opcode in verbs: recover it from the post record.
			if p := q.ctx.qpByNum(wc[i].QPN); p != nil {
				wc[i].Opcode = p.lookup(wc[i].ID)
			}
		}
	}
	q.ctx.stats.CQEs += uint64(n)
	return n, nil
}

// Stamp has the polls stamp each completion with the time they found it (nic.StampCQ), read
// from the context's cd_clock and moved onto the clock of package nic (nic.Now).
func (q *cq) Stamp(on bool) {
	q.x.clock = nil
	if on {
		q.x.clock = q.ctx.stampClock()
	}
}

var (
	_ nic.SpinCQ  = (*cq)(nil)
	_ nic.StampCQ = (*cq)(nil)
)

// idleBeforeYield is how many empty polls in a row a context makes before it starts yielding the
// CPU on each further empty poll (software devices only, see Options.Idle). A latency-bound chain
// waits about one transfer at each step: it should find its completion while still spinning, yet
// ranks that share a CPU must give it up soon. On Soft-RoCE in the VM, yielding after 8 polls
// made a ping-pong hop 4-28% slower, and after 64 (with the polls in C) about 7% slower than
// never yielding.
const idleBeforeYield = 1024

// unknownOpcode is what the shim stores when verbs does not say which operation completed.
const unknownOpcode nic.Opcode = 0xff

// Close destroys the CQ.
func (q *cq) Close() error {
	if q.closed {
		return nil
	}
	q.closed = true
	q.freeX()
	if rc := C.ibv_destroy_cq(q.cq); rc != 0 {
		return fmt.Errorf("verbs: rank %d: ibv_destroy_cq(cq %d): errno %d (destroy its QPs first)", q.ctx.rank, q.num, rc)
	}
	return nil
}
