//go:build ofi && linux

package ofi

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"slices"

	"github.com/coredag/coredag/exec/nic"
)

var (
	_ nic.RMAEventContext      = (*Context)(nil)
	_ nic.RegistrationCounting = (*Context)(nil)
)

// RMAEvent reports whether the provider counts the remote writes that land in a region
// (FI_RMA_EVENT).
func (p *Provider) RMAEvent() bool { return p.ccaps.caps&C.FI_RMA_EVENT != 0 }

// BindRemoteWrites binds x to mr for remote writes (fi_mr_bind with FI_REMOTE_WRITE), so that
// every RDMA write that lands in the region raises it by one (nic.RMAEventContext).
//
// libfabric counts per registration: a write is counted by the region whose key it names (sockets
// looks the key of each of the write's target iovecs up and raises that registration's counter),
// so only a whole region is counted here, and a part of a buffer is counted by registering it on
// its own, as the runtime does when CountsPerRegistration says so. A remote atomic into the
// region raises the counter too (sockets counts it as a remote write).
func (c *Context) BindRemoteWrites(x nic.Counter, mr nic.MR, off, n uint64) error {
	k, err := c.ownCounter(x)
	if err != nil {
		return err
	}
	m, ok := mr.(*MR)
	if !ok || m.c != c {
		return fmt.Errorf("ofi: rank %d: a region of another context or provider: %w", c.rank, nic.ErrWrongContext)
	}
	if m.closed {
		return fmt.Errorf("ofi: rank %d: closed region: %w", c.rank, nic.ErrClosed)
	}
	if !c.p.RMAEvent() {
		return fmt.Errorf("ofi: %s cannot count the writes that land in a memory region (no FI_RMA_EVENT): %w", c.p.name, nic.ErrProviderLimited)
	}
	if off != 0 || n != uint64(m.size) {
		return fmt.Errorf("ofi: %s counts the writes that land in a whole registered region (%d bytes), not in bytes [%d, %d) of it (register the part on its own): %w",
			c.p.name, m.size, off, off+n, nic.ErrProviderLimited)
	}
	if r := C.ofi_mr_bind_cntr(m.mr, k.cntr); r != 0 {
		return fmt.Errorf("ofi: %s: fi_mr_bind(counter, FI_REMOTE_WRITE): %s: %w", c.p.name, fiErr(r), nic.ErrProviderLimited)
	}
	k.ext = true // libfabric raises it as writes land
	if !slices.Contains(c.landed, k) {
		c.landed = append(c.landed, k)
	}
	return nil
}

// CountsPerRegistration is true: libfabric binds a counter to a whole registration
// (nic.RegistrationCounting).
func (c *Context) CountsPerRegistration() bool { return true }

// fireLanded runs the counter work that became due on a counter bound to a region. libfabric
// raises such a counter inside its progress as writes land (which triggers its own triggered
// operations), out of this side's sight, while counter work runs on this side (trigger.go): the
// CQ polls, which progress the endpoints, look after each read.
func (c *Context) fireLanded() {
	if c.nwork == 0 {
		return
	}
	for _, k := range c.landed {
		if len(k.work) > 0 && !k.closed && k.Read() >= k.work[0].thr {
			c.fireDue() // looks at every counter libfabric raises that has work
			return
		}
	}
}
