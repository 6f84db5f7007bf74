//go:build verbs && linux

package verbs

/*
#include <stdlib.h>
#include <string.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
)

// mrAlign is the alignment of registered memory: a page, so regions never share a cache line or
// a page with other data.
const mrAlign = 4096

// pd is a protection domain.
type pd struct {
	ctx     *devContext
	pd      *C.struct_ibv_pd
	mrs     []*mr
	scratch *mr // 64 bytes for discarded atomic results
	closed  bool
}

// verbsAccess converts access rights. Verbs requires local write for remote write and atomics.
func verbsAccess(a nic.Access) C.int {
	var f C.int
	if a&(nic.AccessLocalWrite|nic.AccessRemoteWrite|nic.AccessRemoteAtomic) != 0 {
		f |= C.IBV_ACCESS_LOCAL_WRITE
	}
	if a&nic.AccessRemoteWrite != 0 {
		f |= C.IBV_ACCESS_REMOTE_WRITE
	}
	if a&nic.AccessRemoteRead != 0 {
		f |= C.IBV_ACCESS_REMOTE_READ
	}
	if a&nic.AccessRemoteAtomic != 0 {
		f |= C.IBV_ACCESS_REMOTE_ATOMIC
	}
	return f
}

// AllocMR allocates page-aligned, zeroed memory outside the Go heap and registers it.
func (d *pd) AllocMR(size int, access nic.Access) (nic.MR, error) {
	if d.closed {
		return nil, fmt.Errorf("verbs: rank %d: AllocMR on a closed PD: %w", d.ctx.rank, nic.ErrClosed)
	}
	if size <= 0 {
		return nil, fmt.Errorf("verbs: rank %d: memory region of %d bytes: the size must be positive", d.ctx.rank, size)
	}
	var mem unsafe.Pointer
	if rc := C.posix_memalign(&mem, mrAlign, C.size_t(size)); rc != 0 {
		return nil, fmt.Errorf("verbs: rank %d: cannot allocate %d bytes for a memory region (errno %d)", d.ctx.rank, size, rc)
	}
	C.memset(mem, 0, C.size_t(size))
	h := C.ibv_reg_mr(d.pd, mem, C.size_t(size), verbsAccess(access))
	if h == nil {
		C.free(mem)
		return nil, fmt.Errorf("verbs: rank %d: registering %d bytes with %v failed on %s: raise the locked-memory limit (ulimit -l unlimited) or register less",
			d.ctx.rank, size, access, d.ctx.prov.name)
	}
	m := &mr{pd: d, mr: h, mem: mem, size: size, access: access}
	if d.scratch != nil { // the scratch region itself is tracked separately
		d.mrs = append(d.mrs, m)
	}
	return m, nil
}

// RegisterMR registers the caller's size bytes at addr (ibv_reg_mr); Close deregisters them and
// leaves them to the caller.
func (d *pd) RegisterMR(addr unsafe.Pointer, size int, access nic.Access) (nic.MR, error) {
	if d.closed {
		return nil, fmt.Errorf("verbs: rank %d: RegisterMR on a closed PD: %w", d.ctx.rank, nic.ErrClosed)
	}
	if size <= 0 || addr == nil {
		return nil, fmt.Errorf("verbs: rank %d: memory region of %d bytes at %p: need memory", d.ctx.rank, size, addr)
	}
	h := C.ibv_reg_mr(d.pd, addr, C.size_t(size), verbsAccess(access))
	if h == nil {
		return nil, fmt.Errorf("verbs: rank %d: registering the caller's %d bytes with %v failed on %s: raise the locked-memory limit (ulimit -l unlimited) or register less",
			d.ctx.rank, size, access, d.ctx.prov.name)
	}
	m := &mr{pd: d, mr: h, mem: addr, size: size, access: access, caller: true}
	d.mrs = append(d.mrs, m)
	return m, nil
}

// CreateQP creates an RC queue pair. Cross-channel options are refused: upstream verbs has none.
func (d *pd) CreateQP(cfg nic.QPConfig) (nic.QP, error) {
	return d.createQP(cfg)
}

// Close deregisters the PD's own scratch region and deallocates the PD.
func (d *pd) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	if err := d.scratch.Close(); err != nil {
		return err
	}
	if rc := C.ibv_dealloc_pd(d.pd); rc != 0 {
		return fmt.Errorf("verbs: rank %d: ibv_dealloc_pd: errno %d (close its QPs and memory regions first)", d.ctx.rank, rc)
	}
	return nil
}

// mr is a registered memory region and the C memory under it.
type mr struct {
	pd     *pd
	mr     *C.struct_ibv_mr
	mem    unsafe.Pointer
	size   int
	access nic.Access
	caller bool // the memory is the caller's (RegisterMR): Close does not free it
	closed bool
}

func (m *mr) Bytes() []byte {
	if m.closed {
		return nil
	}
	return unsafe.Slice((*byte)(m.mem), m.size)
}
func (m *mr) Addr() uint64       { return uint64(uintptr(m.mem)) }
func (m *mr) LKey() uint32       { return uint32(m.mr.lkey) }
func (m *mr) RKey() uint32       { return uint32(m.mr.rkey) }
func (m *mr) Access() nic.Access { return m.access }
func (m *mr) Remote() nic.RemoteMR {
	return nic.RemoteMR{Addr: m.Addr(), RKey: m.RKey(), Len: uint64(m.size)}
}

// Close deregisters the region and frees its memory.
func (m *mr) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	rc := C.ibv_dereg_mr(m.mr)
	if rc != 0 {
		// The NIC may still map the memory: leak it rather than free it under the device.
		return fmt.Errorf("verbs: rank %d: ibv_dereg_mr: errno %d (destroy the QPs using it first)", m.pd.ctx.rank, rc)
	}
	if !m.caller {
		C.free(m.mem)
	}
	return nil
}
