//go:build ofi && linux

package ofi

/*
#cgo LDFLAGS: -lfabric
#include <stdlib.h>
#include <sched.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/coredag/coredag/exec/nic"
)

// Available reports whether this binary was built with libfabric support.
const Available = true

// Provider is one libfabric fabric, opened for the provider fi_getinfo chose. Each rank's
// Context is a domain of it.
type Provider struct {
	opts   Options
	name   string
	addr   string // the IPv4 address endpoints bind, "" where the provider chose (Addr)
	info   *C.struct_fi_info
	fabric *C.struct_fid_fabric
	ccaps  C.ofi_caps
	grants string // what fi_getinfo granted, in libfabric's words (Grants)
	immErr error  // why this provider cannot do a write with immediate, or nil
	caps   nic.Caps
	mu     sync.Mutex
	closed bool
	// Manual progress: the open contexts' progress counters, so that a poll that finds nothing
	// moves the data of contexts nobody polls (a peer rank in this process that waits for nothing).
	progMu sync.Mutex                   // held by writers of progs
	progs  atomic.Pointer[[]*progEntry] // copied on write: every idle poll reads it
	seq    atomic.Uint64                // polls of any CQ of the provider
	idle   atomic.Uint64                // polls in a row that found nothing
	ncq    atomic.Int64                 // CQs open
	// yieldEvery is Options.YieldEvery, resolved; 0: never.
	yieldEvery uint64
	yields     atomic.Uint64 // sched_yield calls made by idle polls
	// injectDone is the largest send (bytes) that the provider completes as soon as it is
	// posted whatever it is asked, so coredag injects it (fi_inject) and completes it itself,
	// sparing the provider a completion and the engine a poll; 0: none (then no send is
	// injected, empty ones included). shm completes sends under 4096 bytes at once (fi_shm(7),
	// Progress): their data is then in the peer's queue.
	injectDone uint64
}

// progEntry is one context's progress counter and the poll sequence number at which its data
// last moved.
type progEntry struct {
	cntr *C.struct_fid_cntr
	last atomic.Uint64
}

// polled records a poll of a CQ of context pe; if it found nothing, the contexts whose data has
// not moved for as many polls as there are CQs are progressed (fi_cntr_read of their progress
// counters). An engine that polls every CQ each round never needs that; a test that waits on one
// rank's CQ while its peer in this process sits idle does.
func (p *Provider) polled(pe *progEntry, found bool) {
	seq := p.seq.Add(1)
	pe.last.Store(seq)
	if found {
		p.idle.Store(0)
		return
	}
	if n := p.idle.Add(1); p.yieldEvery > 0 && n%p.yieldEvery == 0 {
		// Nothing has moved for yieldEvery polls: let other threads have the CPU. With manual
		// progress nobody sleeps in the kernel waiting for the socket, so a peer process sharing
		// this core would otherwise wait for the end of this thread's time slice (milliseconds).
		C.sched_yield()
		p.yields.Add(1)
	}
	progs := p.progs.Load()
	if progs == nil || len(*progs) < 2 {
		return // one context (a rank per process): its own polls progress it
	}
	stale := uint64(max(p.ncq.Load(), 1))
	for _, o := range *progs {
		if o != pe && seq-o.last.Load() > stale {
			C.ofi_cntr_read(o.cntr)
			o.last.Store(seq)
		}
	}
}

// setProgs replaces the list of progress counters by f of a copy of it.
func (p *Provider) setProgs(f func([]*progEntry) []*progEntry) {
	p.progMu.Lock()
	defer p.progMu.Unlock()
	var old []*progEntry
	if ps := p.progs.Load(); ps != nil {
		old = *ps
	}
	ps := f(slices.Clone(old))
	p.progs.Store(&ps)
}

// maxQPDepth is the deepest queue the provider offers. A queue deeper than the endpoint's
// libfabric queues (256 operations on sockets) keeps the requests that do not fit in order on
// this side and hands them to libfabric as completions make room (QP.flush).
const maxQPDepth = 1 << 14

// New opens the provider opts name (see Options.Provider).
func New(opts Options) (nic.Provider, error) { return NewProvider(opts) }

var envOnce sync.Mutex

// NewProvider is New, returning the concrete type (counters and triggered operations).
func NewProvider(opts Options) (*Provider, error) {
	envOnce.Lock()
	defer envOnce.Unlock()
	ip, iface, err := opts.Bind(HostInterfaces)
	if err != nil {
		return nil, err
	}
	// libfabric reads its variables when it starts (the first fi_getinfo); set them before.
	if err := os.Setenv("FI_SOCKETS_IFACE", iface); err != nil {
		return nil, err
	}
	if opts.PEWaitTime >= 0 {
		if err := os.Setenv("FI_SOCKETS_PE_WAITTIME", strconv.Itoa(opts.PEWaitTime)); err != nil {
			return nil, err
		}
	}
	if n, ok := opts.Universe(os.LookupEnv); ok {
		if err := os.Setenv("FI_UNIVERSE_SIZE", n); err != nil {
			return nil, err
		}
	}
	if _, set := os.LookupEnv("FI_OFI_RXM_BUFFER_SIZE"); !set && opts.RxMBufferSize > 0 {
		if err := os.Setenv("FI_OFI_RXM_BUFFER_SIZE", strconv.Itoa(opts.RxMBufferSize)); err != nil {
			return nil, err
		}
	}
	if n, ok := opts.SocketsBuffers(os.LookupEnv, netCoreLimit); ok {
		if err := os.Setenv("FI_SOCKETS_MAX_BUF_SZ", n); err != nil {
			return nil, err
		}
	}
	if v, ok := opts.SHMCopies(os.LookupEnv, CMACost); ok {
		if err := os.Setenv("FI_SHM_DISABLE_CMA", v); err != nil {
			return nil, err
		}
	}
	if _, set := os.LookupEnv("FI_OFI_RXM_EAGER_LIMIT"); !set && opts.RxMEagerLimit > 0 {
		if err := os.Setenv("FI_OFI_RXM_EAGER_LIMIT", strconv.Itoa(opts.RxMEagerLimit)); err != nil {
			return nil, err
		}
	}
	p := &Provider{opts: opts, yieldEvery: uint64(max(opts.YieldEvery, 0))}
	if opts.YieldEvery == 0 {
		p.yieldEvery = DefaultYieldEvery
	}
	var want C.ofi_want
	want.node = C.CString(ip)
	defer C.free(unsafe.Pointer(want.node))
	if opts.Provider != "" {
		want.prov = C.CString(opts.Provider)
		defer C.free(unsafe.Pointer(want.prov))
	} else {
		want.need_trigger = 1
	}
	if !opts.AutoProgress {
		want.manual = 1
	}
	// Send-after-send keeps messages matched to receives in posting order (always asked);
	// send-after-write lets a write with immediate be a write and a message posted together
	// (issueSend): a provider that grants only the first holds the message until the write is
	// delivered. Options.Order may ask for more, what a plan relies on.
	want.order = C.uint64_t(opts.Order) | C.FI_ORDER_SAS
	if opts.Provider == "shm" {
		// Asked for send-after-write, libfabric 1.17's shm stalls for good a message posted
		// after a write it moves by segments (over 4 KiB without CMA): every plan with a
		// notified write hung. Whether a pair of processes moves by segments is settled per
		// pair when they meet: CMA is off if either side's FI_SHM_DISABLE_CMA says so (its
		// environment's, or set from CMACost, which a process that cannot use the shared
		// record measures on its own), or if the kernel refuses process_vm_readv between them.
		// One process cannot know it from its own settings, so shm never gets asked: the message
		// waits for the write's delivery (issueSend), and a plan that relies on the ordering
		// itself is refused by the runtime.
		want.order &^= C.FI_ORDER_SAW
	}
	if opts.NoAtomics {
		want.order_first = 1
	}
	var name [64]C.char
	if r := C.ofi_getinfo(&want, &p.info, &name[0], C.size_t(len(name)), &p.ccaps); r != 0 {
		what := "any provider with FI_TRIGGER"
		hint := "fi_info -l lists the providers"
		if opts.Provider != "" && C.ofi_listed(want.prov) == 0 {
			return nil, fmt.Errorf("ofi: libfabric offers no provider %q on this host (fi_info -l lists the providers; "+
				"verbs needs an RDMA device, and a layered name is CORE;UTIL, e.g. tcp;ofi_rxm): %s", opts.Provider, fiErr(r))
		}
		if opts.Provider != "" {
			what, hint = fmt.Sprintf("provider %q", opts.Provider), fmt.Sprintf("fi_info -p '%s' -t FI_EP_RDM -v shows what it offers", opts.Provider)
		}
		return nil, fmt.Errorf("ofi: libfabric has no %s that coredag can use: it needs reliable datagram endpoints "+
			"(FI_EP_RDM) with FI_MSG and FI_RMA, send-after-send ordering, an address that fits 16 bytes (IPv4 on "+
			"%s or the device's own, or a shm name), and memory registration within FI_MR_LOCAL, "+
			"FI_MR_VIRT_ADDR, FI_MR_ALLOCATED and FI_MR_PROV_KEY (not FI_MR_ENDPOINT or FI_MR_RAW) (%s): %s",
			ip, what, hint, fiErr(r))
	}
	p.name = C.GoString(&name[0])
	if p.ccaps.bound != 0 {
		p.addr = ip
	}
	if r := C.ofi_fabric(p.info, &p.fabric); r != 0 {
		C.fi_freeinfo(p.info)
		return nil, fmt.Errorf("ofi: fi_fabric(%s): %s", p.name, fiErr(r))
	}
	var desc [1024]C.char
	C.ofi_describe(p.info, &desc[0], C.size_t(len(desc)))
	p.grants = C.GoString(&desc[0])
	p.caps = nic.Caps{
		MaxInline:  int(p.ccaps.inject),
		MaxSGE:     int(min(p.ccaps.iov_limit, C.OFI_MAX_IOV)),
		MaxQPDepth: maxQPDepth,
		MaxCQDepth: 1 << 16,
		Atomics:    p.ccaps.caps&C.FI_ATOMIC != 0,
		Counters:   p.ccaps.caps&C.FI_TRIGGER != 0,
		// An ordering holds when both sides guarantee it.
		Order: nic.OrderKnown | uint64(p.ccaps.tx_order&p.ccaps.rx_order&C.FI_ORDER_STRICT),
	}
	if p.name == "shm" {
		p.injectDone = min(uint64(p.ccaps.inject), 4095)
	}
	switch {
	case p.ccaps.cq_data_size < 4:
		p.immErr = fmt.Errorf("ofi: %s carries %d bytes of remote CQ data, a write with immediate needs 4: %w",
			p.name, int(p.ccaps.cq_data_size), nic.ErrProviderLimited)
	}
	return p, nil
}

// CMACost is what one copy of 256 KiB by cross-memory attach (process_vm_readv, as shm's
// receiver takes a message out of its sender's memory) costs in copies of the same bytes on this
// machine (measureCMA), false when this process cannot use process_vm_readv (then shm has no CMA
// either). The first process of a user on a host measures it and records it in /dev/shm for the
// others until the host reboots (sharedCMACost), so that ranks started together decide alike.
// Options.SHMCopies reads it.
var CMACost = sync.OnceValues(func() (float64, bool) { return sharedCMACost(shmDir, BootID(), cmaRecordWait, measureCMA) })

// Listed reports whether libfabric offers provider name at all (fi_info -p NAME lists endpoints
// of it), whether or not coredag can use it: tests skip a provider that is not there and fail on
// one that is there but refused. libfabric reads its environment when it starts, which may be
// here: call NewProvider first, which sets it (Options).
func Listed(name string) bool {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	envOnce.Lock()
	defer envOnce.Unlock()
	return C.ofi_listed(cs) != 0
}

// Name is "ofi".
func (p *Provider) Name() string { return "ofi" }

// String names the libfabric provider, e.g. "ofi(sockets)".
func (p *Provider) String() string { return "ofi(" + p.name + ")" }

// Fabric is the libfabric provider in use, e.g. "sockets".
func (p *Provider) Fabric() string { return p.name }

// Caps: no cross-channel, no host triggers (nic.TriggerQP); atomics as the provider says.
func (p *Provider) Caps() nic.Caps { return p.caps }

// Triggered reports whether the provider offers triggered operations (FI_TRIGGER).
func (p *Provider) Triggered() bool { return p.ccaps.caps&C.FI_TRIGGER != 0 }

// ManualProgress reports whether the provider's data progress is manual (FI_PROGRESS_MANUAL).
func (p *Provider) ManualProgress() bool { return p.ccaps.manual != 0 }

// MRMode is the memory registration mode the provider asked for (FI_MR_* bits).
func (p *Provider) MRMode() uint64 { return uint64(p.ccaps.mr_mode) }

// Grants says what the provider granted coredag, in libfabric's words: FI_TRIGGER, FI_ATOMIC,
// FI_RMA_EVENT and FI_FENCE among its capabilities, data and control progress, memory registration
// mode, transmit ordering (FI_ORDER_*), address format, inject size, iov limit, queue sizes and
// remote CQ data size.
func (p *Provider) Grants() string { return p.grants }

// sendAfterWrite reports whether a message posted after a write on an endpoint reaches the peer
// after the write's data (FI_ORDER_SAW), which a write with immediate needs (issueSend).
func (p *Provider) sendAfterWrite() bool { return p.ccaps.tx_order&C.FI_ORDER_SAW != 0 }

// Addr is the IPv4 address the endpoints bind (Options.Addr; 127.0.0.1 by default), or "" where
// the provider chose its own (a device's, or a shm name).
func (p *Provider) Addr() string { return p.addr }

func (p *Provider) virtAddr() bool { return p.ccaps.mr_mode&C.FI_MR_VIRT_ADDR != 0 }
func (p *Provider) provKey() bool  { return p.ccaps.mr_mode&C.FI_MR_PROV_KEY != 0 }

// Close closes the fabric; every context must have been closed.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	r := C.ofi_close(&p.fabric.fid)
	C.fi_freeinfo(p.info)
	return check("fi_close(fabric)", r)
}

func fiErr(r C.int) string { return fmt.Sprintf("%s (%d)", C.GoString(C.ofi_strerror(r)), int(r)) }

// calloc is C.calloc with its NULL turned into an error that names what was being allocated: cgo
// checks only C.malloc (and crashes the program on NULL), and a NULL here would become a
// segmentation fault in the host process at its first use.
func calloc(n int, size uintptr, what string) (unsafe.Pointer, error) {
	p := C.calloc(C.size_t(n), C.size_t(size))
	if p == nil {
		return nil, fmt.Errorf("ofi: %s: calloc(%d, %d): %w", what, n, size, unix.ENOMEM)
	}
	return p, nil
}

func check(what string, r C.int) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("ofi: %s: %s", what, fiErr(r))
}

// Context is one rank: a libfabric domain and its address vector.
type Context struct {
	p       *Provider
	rank    int
	dom     *C.struct_fid_domain
	av      *C.struct_fid_av
	qps     map[uint32]*QP
	cqs     map[uint32]*CQ
	mrs     map[uint32]*MR
	cntrs   []*Counter
	prog    *progEntry // manual progress: a counter bound to every endpoint; reading it progresses them
	segBuf  *C.ofi_seg // C memory: OFI_MAX_IOV + 1 segments, where requests' lists are resolved (segs)
	work    []*C.ofi_cntr_work
	pend    []trig // triggered work handed to libfabric (PendingTriggers)
	trigErr error
	noFlush bool // no FI_FLUSH_WORK: CancelTriggers cannot drop work (DropsTriggers, QP.Close)
	nwork   int  // counter work waiting (Counter.work)
	waiting bool // some QP may hold requests libfabric has not taken yet (retryWaiting)
	firing  bool // fireDue is running
	nextQP  uint32
	nextCQ  uint32
	nextMR  uint32
	closed  bool

	// landed are the counters bound to regions for remote writes (rmaevent.go), which libfabric
	// raises as writes land.
	landed []*Counter
}

// Open opens rank's domain. One process may open any number of ranks.
func (p *Provider) Open(rank int) (nic.Context, error) { return p.OpenContext(rank) }

// OpenContext is Open, returning the concrete type.
func (p *Provider) OpenContext(rank int) (*Context, error) {
	c := &Context{p: p, rank: rank, qps: map[uint32]*QP{}, cqs: map[uint32]*CQ{}, mrs: map[uint32]*MR{}}
	if r := C.ofi_domain(p.fabric, p.info, &c.dom, &c.av); r != 0 {
		return nil, fmt.Errorf("ofi: rank %d: fi_domain: %s", rank, fiErr(r))
	}
	segs, err := calloc(C.OFI_MAX_IOV+1, unsafe.Sizeof(C.ofi_seg{}), fmt.Sprintf("rank %d: the requests' segment array", rank))
	if err != nil {
		C.ofi_close(&c.av.fid)
		C.ofi_close(&c.dom.fid)
		return nil, err
	}
	c.segBuf = (*C.ofi_seg)(segs)
	// Whether the domain can drop triggered work, asked while it holds none.
	c.noFlush = p.Triggered() && C.ofi_flush_work(c.dom) == -C.FI_ENOSYS
	if p.ManualProgress() {
		c.prog = &progEntry{}
		if r := C.ofi_cntr_open(c.dom, &c.prog.cntr); r != 0 {
			C.ofi_close(&c.av.fid)
			C.ofi_close(&c.dom.fid)
			C.free(unsafe.Pointer(c.segBuf))
			return nil, fmt.Errorf("ofi: rank %d: progress counter: fi_cntr_open: %s", rank, fiErr(r))
		}
		p.setProgs(func(ps []*progEntry) []*progEntry { return append(ps, c.prog) })
	}
	return c, nil
}

// DropsTriggers reports whether CancelTriggers drops the triggered operations libfabric holds
// (FI_FLUSH_WORK). sockets cannot: they stay on its counters, and their endpoints open until
// the context closes (QP.Close).
func (c *Context) DropsTriggers() bool { return !c.noFlush }

var _ nic.HostProgress = (*Context)(nil)

// DriveProgress moves the data of every endpoint of the context without reading completions
// (nic.HostProgress): with manual progress, reading a counter bound to the endpoints progresses
// them (fi_cntr_read). Without manual progress it does nothing.
func (c *Context) DriveProgress() error {
	if c.closed {
		return nic.ErrClosed
	}
	if c.prog != nil {
		C.ofi_cntr_read(c.prog.cntr)
		c.prog.last.Store(c.p.seq.Load())
	}
	c.retryWaiting()
	return nil
}

// Rank is the rank the context was opened for.
func (c *Context) Rank() int { return c.rank }

// AllocPD returns the context's protection domain: a libfabric domain is both.
func (c *Context) AllocPD() (nic.PD, error) { return c.PD() }

// PD is AllocPD, returning the concrete type.
func (c *Context) PD() (*PD, error) {
	if c.closed {
		return nil, nic.ErrClosed
	}
	return &PD{c: c}, nil
}

// Close closes every endpoint, counter, region and CQ of the context, then the domain.
func (c *Context) Close() error {
	if c.closed {
		return nil
	}
	// libfabric must not start work on endpoints being closed. A provider that cannot drop it
	// (sockets) keeps it on the counters, closed right after the endpoints: with manual
	// progress, coredag's default, nothing in between raises them.
	c.CancelTriggers()
	c.closed = true
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	for _, q := range c.qps {
		keep(q.Close())
	}
	for _, m := range c.mrs {
		keep(m.Close())
	}
	for _, k := range c.cntrs {
		keep(k.Close())
	}
	if c.prog != nil {
		c.p.setProgs(func(ps []*progEntry) []*progEntry {
			return slices.DeleteFunc(ps, func(o *progEntry) bool { return o == c.prog })
		})
		keep(check("fi_close(cntr)", C.ofi_close(&c.prog.cntr.fid)))
	}
	for _, q := range c.cqs {
		keep(q.Close())
	}
	keep(check("fi_close(av)", C.ofi_close(&c.av.fid)))
	keep(check("fi_close(domain)", C.ofi_close(&c.dom.fid)))
	for _, w := range c.work {
		C.free(unsafe.Pointer(w))
	}
	c.work = nil
	C.free(unsafe.Pointer(c.segBuf))
	c.segBuf = nil
	return first
}

// PD is a protection domain: the context's domain.
type PD struct{ c *Context }

// Close does nothing: the domain closes with the context.
func (pd *PD) Close() error { return nil }

// MR is a registered region, allocated outside the Go heap.
type MR struct {
	c      *Context
	buf    unsafe.Pointer
	size   int
	access nic.Access
	mr     *C.struct_fid_mr
	desc   C.ofi_desc // the provider's key for the region, not a pointer
	lkey   uint32
	rkey   uint32
	addr   uint64 // what work requests name Bytes()[0] by
	caller bool   // the memory is the caller's (RegisterMR): Close does not free it
	closed bool
}

// AllocMR allocates size zeroed, cache-line aligned bytes and registers them.
func (pd *PD) AllocMR(size int, access nic.Access) (nic.MR, error) { return pd.Alloc(size, access) }

// Alloc is AllocMR, returning the concrete type.
func (pd *PD) Alloc(size int, access nic.Access) (*MR, error) {
	return pd.alloc(size, access, "region")
}

// alloc is Alloc for what ("region", or what the provider allocates the region for). When the
// memory cannot be allocated or registered, the error names the rank, what and the size, and
// gives the reason: posix_memalign's error number (ENOMEM or EINVAL), which it wraps, or
// fi_mr_reg's.
func (pd *PD) alloc(size int, access nic.Access, what string) (*MR, error) {
	c := pd.c
	if c.closed {
		return nil, nic.ErrClosed
	}
	if size <= 0 {
		return nil, fmt.Errorf("ofi: region of %d bytes: %w", size, nic.ErrBadRequest)
	}
	var buf unsafe.Pointer
	if r := C.posix_memalign(&buf, 64, C.size_t(size)); r != 0 {
		return nil, fmt.Errorf("ofi: rank %d: %s (%d bytes): posix_memalign: %w", c.rank, what, size, unix.Errno(r))
	}
	C.memset(buf, 0, C.size_t(size))
	fl := mrFlags(access)
	c.nextMR++
	m := &MR{c: c, buf: buf, size: size, access: access, lkey: c.nextMR}
	// Keys coredag chooses are spaced so that a key off by one names no region.
	want := C.uint64_t(uint64(c.nextMR)*16 + 1)
	var rkey C.uint64_t
	if r := C.ofi_mr_reg(c.dom, buf, C.size_t(size), fl, want, &m.mr, &rkey, &m.desc); r != 0 {
		C.free(buf)
		return nil, fmt.Errorf("ofi: rank %d: %s (%d bytes): fi_mr_reg(%v): %s", c.rank, what, size, access, fiErr(r))
	}
	if uint64(rkey) > math.MaxUint32 {
		C.ofi_close(&m.mr.fid)
		C.free(buf)
		return nil, fmt.Errorf("ofi: key %#x does not fit the 32 bits of nic.RemoteMR: %w", uint64(rkey), nic.ErrProviderLimited)
	}
	m.rkey = uint32(rkey)
	if c.p.virtAddr() {
		m.addr = uint64(uintptr(buf))
	} // else the provider addresses regions by offset, and Addr() is 0
	c.mrs[m.lkey] = m
	return m, nil
}

// Bytes is the region's memory.
func (m *MR) Bytes() []byte { return unsafe.Slice((*byte)(m.buf), m.size) }

// Addr is the address of Bytes()[0] in work requests: its virtual address if the provider uses
// FI_MR_VIRT_ADDR, else 0 (offsets).
func (m *MR) Addr() uint64 { return m.addr }

// LKey is the context's name for the region (the provider's descriptor stays on the C side).
func (m *MR) LKey() uint32 { return m.lkey }

// RKey is the region's libfabric key.
func (m *MR) RKey() uint32 { return m.rkey }

// Access is the region's access rights.
func (m *MR) Access() nic.Access { return m.access }

// Remote is the descriptor to hand to peers.
func (m *MR) Remote() nic.RemoteMR {
	return nic.RemoteMR{Addr: m.addr, RKey: m.rkey, Len: uint64(m.size)}
}

// Close deregisters and frees the region.
func (m *MR) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	delete(m.c.mrs, m.lkey)
	err := check("fi_close(mr)", C.ofi_close(&m.mr.fid))
	if !m.caller {
		C.free(m.buf)
	}
	return err
}

// segList is a request's local scatter/gather list resolved for the shim, in its context's C
// array (Context.segBuf): a Go array passed to C escapes to the heap and is walked by cgo's
// pointer check on every call, 784 bytes allocated and checked per request.
type segList struct {
	seg   *C.ofi_seg // the first of n segments
	n     int        // segments: at least one (empty for an empty list)
	total uint64     // bytes
}

// segs resolves a scatter/gather list (first, then more; zero-length elements are dropped) into
// the context's segment array, which holds it until the next call; ok is false when an element
// is outside its region or lacks write access when write is set.
func (c *Context) segs(first nic.SGE, more []nic.SGE, write bool) (l segList, ok bool) {
	if len(more) >= C.OFI_MAX_IOV {
		return l, false
	}
	buf := unsafe.Slice(c.segBuf, C.OFI_MAX_IOV)
	for i := -1; i < len(more); i++ {
		e := first
		if i >= 0 {
			e = more[i]
		}
		p, desc, good := c.local(e, write)
		if !good {
			return l, false
		}
		if e.Len == 0 {
			continue
		}
		buf[l.n] = C.ofi_seg{buf: p, len: C.size_t(e.Len), desc: desc}
		l.n++
		l.total += uint64(e.Len)
	}
	if l.n == 0 {
		buf[0] = C.ofi_seg{}
		l.n = 1
	}
	l.seg = c.segBuf
	return l, true
}

// emptySeg is a segment list of one empty segment (a message without payload).
func (c *Context) emptySeg() *C.ofi_seg {
	s := &unsafe.Slice(c.segBuf, C.OFI_MAX_IOV+1)[C.OFI_MAX_IOV]
	*s = C.ofi_seg{}
	return s
}

// local resolves an SGE: the pointer, the descriptor, and whether it is inside its region.
func (c *Context) local(s nic.SGE, write bool) (unsafe.Pointer, C.ofi_desc, bool) {
	if s.Len == 0 {
		return nil, 0, true
	}
	m := c.mrs[s.LKey]
	if m == nil || s.Addr < m.addr || s.Addr-m.addr+uint64(s.Len) > uint64(m.size) {
		return nil, 0, false
	}
	if write && m.access&nic.AccessLocalWrite == 0 {
		return nil, 0, false
	}
	return unsafe.Add(m.buf, s.Addr-m.addr), m.desc, true
}

// mrFlags are the fi_mr_reg access flags of a region with the given rights. Local access is
// always granted (the nic contract checks local writes itself).
func mrFlags(access nic.Access) C.uint64_t {
	fl := C.uint64_t(C.FI_SEND | C.FI_RECV | C.FI_READ | C.FI_WRITE)
	if access&nic.AccessRemoteWrite != 0 {
		fl |= C.FI_REMOTE_WRITE
	}
	if access&nic.AccessRemoteRead != 0 {
		fl |= C.FI_REMOTE_READ
	}
	if access&nic.AccessRemoteAtomic != 0 {
		fl |= C.FI_REMOTE_READ | C.FI_REMOTE_WRITE
	}
	return fl
}
