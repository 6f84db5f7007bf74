//go:build ofi && linux

package ofi

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
)

// RegisterMR registers the caller's size bytes at addr (fi_mr_reg on that memory); Close
// deregisters them and leaves them to the caller, who keeps them valid and unmoved until then.
func (pd *PD) RegisterMR(addr unsafe.Pointer, size int, access nic.Access) (nic.MR, error) {
	c := pd.c
	if c.closed {
		return nil, nic.ErrClosed
	}
	if size <= 0 || addr == nil {
		return nil, fmt.Errorf("ofi: region of %d bytes at %p: %w", size, addr, nic.ErrBadRequest)
	}
	fl := mrFlags(access)
	c.nextMR++
	m := &MR{c: c, buf: addr, size: size, access: access, lkey: c.nextMR, caller: true}
	want := C.uint64_t(uint64(c.nextMR)*16 + 1) // spaced as Alloc spaces them
	var rkey C.uint64_t
	if r := C.ofi_mr_reg(c.dom, addr, C.size_t(size), fl, want, &m.mr, &rkey, &m.desc); r != 0 {
		return nil, fmt.Errorf("ofi: fi_mr_reg(the caller's %d bytes, %v): %s", size, access, fiErr(r))
	}
	if uint64(rkey) > math.MaxUint32 {
		C.ofi_close(&m.mr.fid)
		return nil, fmt.Errorf("ofi: key %#x does not fit the 32 bits of nic.RemoteMR: %w", uint64(rkey), nic.ErrProviderLimited)
	}
	m.rkey = uint32(rkey)
	if c.p.virtAddr() {
		m.addr = uint64(uintptr(addr))
	}
	c.mrs[m.lkey] = m
	return m, nil
}
