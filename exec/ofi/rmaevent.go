//go:build ofi && linux

package ofi

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"

	"github.com/coredag/coredag/exec/nic"
)

var _ nic.RMAEventContext = (*Context)(nil)

// RMAEvent reports whether the provider counts the remote writes that land in a region
// (FI_RMA_EVENT).
func (p *Provider) RMAEvent() bool { return p.ccaps.caps&C.FI_RMA_EVENT != 0 }

// BindRemoteWrites binds x to mr for remote writes (fi_mr_bind with FI_REMOTE_WRITE), so that
// every RDMA write that lands in the region raises it by one (nic.RMAEventContext).
//
// libfabric counts per registration: a write is counted by the region whose key it names, and
// peers name the key of the whole buffer. Counting a part [off, off+n) of it would need that part
// registered on its own and its key handed to the writers, so only the whole region is counted
// here; a part is refused.
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
		return fmt.Errorf("ofi: %s counts the writes that land in a whole registered region (%d bytes), not in bytes [%d, %d) of it: %w",
			c.p.name, m.size, off, off+n, nic.ErrProviderLimited)
	}
	if r := C.ofi_mr_bind_cntr(m.mr, k.cntr); r != 0 {
		return fmt.Errorf("ofi: %s: fi_mr_bind(counter, FI_REMOTE_WRITE): %s: %w", c.p.name, fiErr(r), nic.ErrProviderLimited)
	}
	return nil
}
