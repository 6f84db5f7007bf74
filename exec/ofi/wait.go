//go:build ofi && linux

package ofi

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"time"

	"github.com/coredag/coredag/exec/nic"
)

var _ nic.Blocker = (*Provider)(nil)

// WaitSet returns a wait set on cqs (nic.Blocker), or nil if one of them has no file descriptor
// wait object: the provider refused it (shm), gave none (sockets), or Options.NoBlock is set.
func (p *Provider) WaitSet(cqs []nic.CQ) nic.WaitSet {
	if len(cqs) == 0 {
		return nil
	}
	w := &waitSet{p: p, fids: make([]*C.struct_fid, len(cqs)), fds: make([]C.struct_pollfd, len(cqs))}
	for i, c := range cqs {
		q, ok := c.(*CQ)
		if !ok || q.c.p != p || q.fd < 0 || q.closed {
			return nil
		}
		w.cqs = append(w.cqs, q)
		w.fids[i] = &q.cq.fid
		w.fds[i] = C.struct_pollfd{fd: q.fd, events: C.POLLIN}
	}
	return w
}

// waitSet is a set of CQs with file descriptor wait objects. Its arrays are Go memory holding
// only C pointers, so cgo passes them without copying.
type waitSet struct {
	p    *Provider
	cqs  []*CQ
	fids []*C.struct_fid
	fds  []C.struct_pollfd
}

// Wait blocks (nic.WaitSet) unless a CQ holds completions not handed out yet or requests wait on
// coredag's side for a poll to give them to libfabric; then fi_trywait, which says whether the
// provider itself has work a poll must do first; then poll(2) on the descriptors, at most d.
func (w *waitSet) Wait(d time.Duration) (bool, error) {
	for _, q := range w.cqs {
		if q.closed {
			return false, nic.ErrClosed
		}
		if len(q.out) > 0 || q.c.waiting {
			return false, nil
		}
	}
	ms := C.int(min(max((d+time.Millisecond-1)/time.Millisecond, 0), 1<<30))
	switch r := C.ofi_block(w.p.fabric, &w.fids[0], &w.fds[0], C.int(len(w.fds)), ms); {
	case r == 0:
		return true, nil
	case r == 1:
		return false, nil
	default:
		return false, fmt.Errorf("ofi: waiting on %d CQs: %s", len(w.fds), fiErr(r))
	}
}
