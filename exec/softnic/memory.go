package softnic

import (
	"fmt"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
)

// Keys carry the region's slot in the context's table and a tag that differs between local and
// remote keys, so an lkey used as an rkey (or a key of a closed region) is caught, as on hardware.
const (
	lkeyTag   = 0x4c
	rkeyTag   = 0x52
	addrAlign = 4096 // regions start page aligned and are separated by a guard gap
	dataAlign = 64   // host memory is cache-line aligned
)

type pd struct {
	ctx    *Context
	id     int
	closed bool
}

func (p *pd) String() string { return fmt.Sprintf("rank %d pd %d", p.ctx.rank, p.id) }

// AllocMR allocates zeroed, cache-line aligned memory and registers it.
func (p *pd) AllocMR(size int, access nic.Access) (nic.MR, error) {
	if err := p.checkMR(size, access); err != nil {
		return nil, err
	}
	raw := make([]byte, p.ctx.nic.MRBytes(int64(size)))
	off := (dataAlign - int(uintptr(unsafe.Pointer(&raw[0]))%dataAlign)) % dataAlign
	return p.register(raw[off:off+size:off+size], access), nil
}

// RegisterMR registers the caller's size bytes at addr. The NIC addresses the region by its own
// virtual address, as it does allocated ones: only the bytes are the caller's.
func (p *pd) RegisterMR(addr unsafe.Pointer, size int, access nic.Access) (nic.MR, error) {
	if err := p.checkMR(size, access); err != nil {
		return nil, err
	}
	if addr == nil {
		return nil, fmt.Errorf("softnic: %s: RegisterMR of a nil address", p)
	}
	return p.register(unsafe.Slice((*byte)(addr), size), access), nil
}

// checkMR refuses what verbs would refuse in a registration.
func (p *pd) checkMR(size int, access nic.Access) error {
	if p.closed || p.ctx.closed {
		return fmt.Errorf("softnic: %s: memory registration on a closed PD: %w", p, nic.ErrClosed)
	}
	if size <= 0 || size > 1<<40 {
		return fmt.Errorf("softnic: %s: cannot register %d bytes: the size must be positive", p, size)
	}
	if access&^(nic.AccessLocalWrite|nic.AccessRemoteWrite|nic.AccessRemoteRead|nic.AccessRemoteAtomic) != 0 {
		return fmt.Errorf("softnic: %s: unknown access flags %#x", p, uint32(access))
	}
	if access&(nic.AccessRemoteWrite|nic.AccessRemoteAtomic) != 0 && access&nic.AccessLocalWrite == 0 {
		// verbs rejects this combination with EINVAL; say how to fix it.
		return fmt.Errorf("softnic: %s: access %s needs local_write too (remote write and atomic access imply it)", p, access)
	}
	return nil
}

// register makes buf a region of the PD, at the context's next free NIC address.
func (p *pd) register(buf []byte, access nic.Access) *mr {
	c := p.ctx
	m := &mr{pd: p, buf: buf, addr: c.nextAddr, access: access, slot: uint32(len(c.mrs) + 1)}
	c.nextAddr += (uint64(len(buf)) + 2*addrAlign - 1) / addrAlign * addrAlign
	c.mrs = append(c.mrs, m)
	return m
}

// MRBytes is the host memory AllocMR(size) allocates: the region and room to align it.
func (n *NIC) MRBytes(size int64) int64 { return size + dataAlign }

// CreateQP creates a queue pair (see qp.go).
func (p *pd) CreateQP(cfg nic.QPConfig) (nic.QP, error) { return newQP(p, cfg) }

// Close releases the PD.
func (p *pd) Close() error {
	for _, m := range p.ctx.mrs {
		if m.pd == p && !m.closed {
			return fmt.Errorf("softnic: %s: close its memory regions first", p)
		}
	}
	for _, q := range p.ctx.qps {
		if q.pd == p && !q.closed {
			return fmt.Errorf("softnic: %s: close its QP %d first", p, q.num)
		}
	}
	p.closed = true
	return nil
}

type mr struct {
	pd     *pd
	buf    []byte
	addr   uint64
	access nic.Access
	slot   uint32
	closed bool
	writes []writeCounter // counters of the remote writes that land in parts of the region
}

// writeCounter is a counter bound to bytes [off, off+n) of a region for the remote writes
// that land there (BindRemoteWrites).
type writeCounter struct {
	c      *counter
	off, n uint64
}

func (m *mr) Bytes() []byte      { return m.buf }
func (m *mr) Addr() uint64       { return m.addr }
func (m *mr) LKey() uint32       { return m.slot<<8 | lkeyTag }
func (m *mr) RKey() uint32       { return m.slot<<8 | rkeyTag }
func (m *mr) Access() nic.Access { return m.access }
func (m *mr) Remote() nic.RemoteMR {
	return nic.RemoteMR{Addr: m.addr, RKey: m.RKey(), Len: uint64(len(m.buf))}
}

// Close deregisters the region: later accesses with its keys fail.
func (m *mr) Close() error {
	m.closed = true
	return nil
}

// lookup resolves a key of the given tag in context c, for protection domain p, to the bytes
// [addr, addr+n) of a region that grants need. It returns nil when the key is unknown or of another
// PD, the range is out of the region, or the access is not granted; why says which.
func lookup(c *Context, p *pd, key uint32, tag uint32, addr uint64, n uint32, need nic.Access) (b []byte, why string) {
	if key&0xff != tag {
		return nil, "key is not a valid " + tagName(tag)
	}
	slot := key >> 8
	if slot == 0 || int(slot) > len(c.mrs) {
		return nil, "no memory region has this " + tagName(tag)
	}
	m := c.mrs[slot-1]
	if m.closed {
		return nil, "the memory region of this " + tagName(tag) + " was deregistered"
	}
	if m.pd != p {
		return nil, "the memory region belongs to another protection domain"
	}
	if addr < m.addr || addr-m.addr > uint64(len(m.buf)) || uint64(n) > uint64(len(m.buf))-(addr-m.addr) {
		return nil, "the address range is outside the memory region"
	}
	if m.access&need != need {
		return nil, "the memory region was registered without " + need.String() + " access"
	}
	off := addr - m.addr
	return m.buf[off : off+uint64(n) : off+uint64(n)], ""
}

func tagName(tag uint32) string {
	if tag == lkeyTag {
		return "lkey"
	}
	return "rkey"
}
