//go:build verbs && linux

package verbs

/*
#cgo LDFLAGS: -libverbs
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
)

// Available reports whether this binary was built with verbs support.
const Available = true

// Provider drives one port of one verbs device. It is safe for concurrent use; the objects its
// contexts create are not (each rank's context belongs to one goroutine at a time).
type Provider struct {
	opts     Options
	name     string // device name
	port     uint8
	ethernet bool // RoCE port: address by GID; else InfiniBand: by LID
	lid      uint16
	gidIndex int
	gid      [16]byte
	roceV2   bool
	mtu      int // active path MTU in bytes
	rdAtomic int // outstanding READs/atomics per QP, both directions
	caps     nic.Caps
	yield    bool // empty polls yield the CPU (see Options.Idle)
	software bool // a software device (Soft-RoCE, Soft-iWARP): the kernel does the transfers

	mu     sync.Mutex
	opened map[int]bool
}

// New opens the device named in opts to check that it exists, its port is active and it has a
// usable GID, and returns a provider whose Open gives each rank its own device context.
func New(opts Options) (nic.Provider, error) {
	if opts.Port == 0 {
		opts.Port = 1
	}
	if opts.Port < 1 || opts.Port > 255 {
		return nil, fmt.Errorf("verbs: port %d is out of range: ports are numbered from 1", opts.Port)
	}
	p := &Provider{opts: opts, port: uint8(opts.Port), opened: map[int]bool{}}
	ctx, name, err := openDevice(opts.Device)
	if err != nil {
		return nil, err
	}
	defer C.ibv_close_device(ctx)
	p.name = name
	if err := p.probe(ctx); err != nil {
		return nil, err
	}
	if p.software && runtime.GOMAXPROCS(0) < 2 {
		// A software device does a whole transfer inside ibv_post_send, so posts take tens of
		// microseconds. With one P (a process pinned to one CPU, as mpirun --bind-to core does), the
		// Go scheduler takes the P from a thread that stays that long in a C call and wakes another
		// thread to run it; the poster then waits for its P back. A second, idle P stops that.
		runtime.GOMAXPROCS(2)
	}
	return p, nil
}

// openDevice opens the named device, or the first one when name is empty.
func openDevice(name string) (*C.struct_ibv_context, string, error) {
	var n C.int
	list := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, "", fmt.Errorf("verbs: cannot list RDMA devices (is the ib_uverbs kernel module loaded and /dev/infiniband readable?)")
	}
	defer C.ibv_free_device_list(list)
	devs := unsafe.Slice(list, int(n))
	var names []string
	for _, d := range devs {
		dn := C.GoString(C.ibv_get_device_name(d))
		names = append(names, dn)
		if name != "" && dn != name {
			continue
		}
		ctx := C.ibv_open_device(d)
		if ctx == nil {
			return nil, "", fmt.Errorf("verbs: cannot open device %s (permissions on /dev/infiniband/uverbs*? locked memory limit?)", dn)
		}
		return ctx, dn, nil
	}
	if len(names) == 0 {
		return nil, "", fmt.Errorf("verbs: no RDMA devices found: load the NIC's driver, or for Soft-RoCE run `rdma link add rxe0 type rxe netdev ETH`")
	}
	return nil, "", fmt.Errorf("verbs: no device named %q; this host has %s (pick one with --device)", name, strings.Join(names, ", "))
}

// probe reads the device and port attributes, picks the GID and measures the inline limit.
func (p *Provider) probe(ctx *C.struct_ibv_context) error {
	var da C.struct_ibv_device_attr
	if rc := C.ibv_query_device(ctx, &da); rc != 0 {
		return fmt.Errorf("verbs: querying device %s: errno %d", p.name, rc)
	}
	if int(p.port) > int(da.phys_port_cnt) {
		return fmt.Errorf("verbs: device %s has %d port(s), not port %d", p.name, da.phys_port_cnt, p.port)
	}
	var pa C.struct_ibv_port_attr
	if rc := C.cd_query_port(ctx, C.uint8_t(p.port), &pa); rc != 0 {
		return fmt.Errorf("verbs: querying port %d of %s: errno %d", p.port, p.name, rc)
	}
	if pa.state != C.IBV_PORT_ACTIVE {
		return fmt.Errorf("verbs: port %d of %s is not active (state %d): check the cable or link (ibv_devinfo shows the state)", p.port, p.name, pa.state)
	}
	p.ethernet = pa.link_layer == C.IBV_LINK_LAYER_ETHERNET
	p.lid = uint16(pa.lid)
	p.mtu = 128 << int(pa.active_mtu)
	p.rdAtomic = min(int(da.max_qp_rd_atom), int(da.max_qp_init_rd_atom), 16)
	if err := p.pickGID(ctx, int(pa.gid_tbl_len)); err != nil {
		return err
	}
	p.caps = nic.Caps{
		CrossChannel: false,
		MaxQPDepth:   int(da.max_qp_wr),
		MaxCQDepth:   int(da.max_cqe),
		MaxSGE:       min(int(da.max_sge), C.CD_MAX_SGE),
		Atomics:      da.atomic_cap != C.IBV_ATOMIC_NONE,
		Triggers:     true,
	}
	p.caps.MaxInline = probeInline(ctx)
	if da.max_sge_rd > 0 { // RDMA READ scatter lists may be shorter than send lists
		p.caps.MaxSGE = min(p.caps.MaxSGE, int(da.max_sge_rd))
	}
	p.software = softwareVendor(uint32(da.vendor_id))
	switch p.opts.Idle {
	case IdleAuto:
		p.yield = p.software
	case IdleYield:
		p.yield = true
	}
	return nil
}

// softwareVendor reports whether a vendor ID is that of a software RDMA device: Soft-RoCE (rxe)
// or Soft-iWARP (siw), whose data path runs in the kernel on the same CPUs as the pollers.
func softwareVendor(id uint32) bool {
	return id == 0xffffff || id == 0x626d74
}

// pickGID chooses the GID table entry (Options.GIDIndex, or automatically).
func (p *Provider) pickGID(ctx *C.struct_ibv_context, n int) error {
	var gid [16]byte
	read := func(i int) int {
		return int(C.cd_gid_type(ctx, C.uint8_t(p.port), C.int(i), (*C.uint8_t)(unsafe.Pointer(&gid[0]))))
	}
	if p.opts.GIDIndex != AutoGID {
		i := p.opts.GIDIndex
		if i < 0 || i >= n {
			return fmt.Errorf("verbs: GID index %d is out of range: port %d of %s has %d entries", i, p.port, p.name, n)
		}
		t := read(i)
		if t < 0 || gid == [16]byte{} {
			return fmt.Errorf("verbs: GID index %d of %s port %d is empty (show_gids lists the valid ones)", i, p.name, p.port)
		}
		p.gidIndex, p.gid, p.roceV2 = i, gid, t == 1
		return nil
	}
	if !p.ethernet {
		// InfiniBand addresses by LID; GID 0 (the port GID) is always valid.
		read(0)
		p.gidIndex, p.gid = 0, gid
		return nil
	}
	best, bestScore := -1, 0
	for i := 0; i < n; i++ {
		t := read(i)
		if t < 0 || gid == [16]byte{} {
			continue
		}
		score := 1 // RoCE v1
		if t == 1 {
			score = 2 // RoCE v2 routes over UDP/IP
			if net.IP(gid[:]).To4() != nil {
				score = 3 // and an IPv4 address is reachable without IPv6 neighbour setup
			}
		}
		if score > bestScore {
			best, bestScore, p.gid, p.roceV2 = i, score, gid, t == 1
		}
	}
	if best < 0 {
		return fmt.Errorf("verbs: port %d of %s has no GID: give its network interface an IP address", p.port, p.name)
	}
	p.gidIndex = best
	return nil
}

// probeInline finds the largest inline payload the device accepts by creating throw-away QPs.
func probeInline(ctx *C.struct_ibv_context) int {
	pd := C.ibv_alloc_pd(ctx)
	if pd == nil {
		return 0
	}
	defer C.ibv_dealloc_pd(pd)
	cq := C.ibv_create_cq(ctx, 4, nil, nil, 0)
	if cq == nil {
		return 0
	}
	defer C.ibv_destroy_cq(cq)
	for want := 1024; want >= 16; want /= 2 {
		var got C.uint32_t
		qp := C.cd_create_qp(pd, cq, cq, 4, 4, C.uint32_t(want), 1, &got)
		if qp != nil {
			C.ibv_destroy_qp(qp)
			return int(got)
		}
	}
	return 0
}

// Name returns "verbs".
func (p *Provider) Name() string { return "verbs" }

// Caps reports the device's capabilities (never cross-channel).
func (p *Provider) Caps() nic.Caps { return p.caps }

// String describes the device, port and address, e.g. "rxe0 port 1 RoCE v2 gid[1] ::ffff:10.77.0.1 mtu 1024".
func (p *Provider) String() (s string) {
	if p.yield {
		defer func() { s += " (yields when idle)" }()
	}
	if !p.ethernet {
		return fmt.Sprintf("%s port %d InfiniBand lid %d mtu %d", p.name, p.port, p.lid, p.mtu)
	}
	kind := "RoCE v1"
	if p.roceV2 {
		kind = "RoCE v2"
	}
	return fmt.Sprintf("%s port %d %s gid[%d] %s mtu %d", p.name, p.port, kind, p.gidIndex, net.IP(p.gid[:]), p.mtu)
}

// calloc is C.calloc with its NULL turned into an error that names what was being allocated:
// cgo checks only C.malloc, and a NULL here would be a segmentation fault in the host process
// at its first use.
func calloc(n int, size uintptr, what string) (unsafe.Pointer, error) {
	p := C.calloc(C.size_t(n), C.size_t(size))
	if p == nil {
		return nil, fmt.Errorf("%s: calloc(%d, %d): %w", what, n, size, syscall.ENOMEM)
	}
	return p, nil
}

// Open opens a device context for rank. Each rank gets its own context (its own PDs, CQs, QPs), so
// several ranks may share a device within one process unless Options.Ranks restricts them.
func (p *Provider) Open(rank int) (nic.Context, error) {
	if p.opts.Ranks != nil && !slices.Contains(p.opts.Ranks, rank) {
		return nil, fmt.Errorf("verbs: this process runs rank(s) %v, not rank %d: start one process per rank", p.opts.Ranks, rank)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.opened[rank] {
		return nil, fmt.Errorf("verbs: rank %d is already open in this process: close its context first", rank)
	}
	ctx, _, err := openDevice(p.name)
	if err != nil {
		return nil, err
	}
	p.opened[rank] = true
	return &devContext{prov: p, rank: rank, ctx: ctx}, nil
}

// Close does nothing: the provider keeps no device open (each context opens its own).
func (p *Provider) Close() error { return nil }

func (p *Provider) release(rank int) {
	p.mu.Lock()
	delete(p.opened, rank)
	p.mu.Unlock()
}

// devContext is one rank's device context and the registry of what was created from it.
type devContext struct {
	prov   *Provider
	rank   int
	ctx    *C.struct_ibv_context
	pds    []*pd
	cqs    []*cq
	qps    []*qp
	closed bool
	stats  nic.NICStats
	idle   int // empty polls in a row

	clock    *C.cd_clock // stamps completions (cq.Stamp); nil until a CQ stamps
	clockOff int64       // nic.Now's clock minus CLOCK_MONOTONIC
}

// stampClock returns the context's completion clock, calibrated on first use; nil where C
// memory for it cannot be had (the completions then go unstamped).
func (c *devContext) stampClock() *C.cd_clock {
	if c.clock == nil {
		p, err := calloc(1, unsafe.Sizeof(C.cd_clock{}), "completion clock")
		if err != nil {
			return nil
		}
		c.clock = (*C.cd_clock)(p)
		C.cd_clock_init(c.clock)
		// Go's monotonic clock is CLOCK_MONOTONIC on Linux: the offset is fixed.
		before := nic.Now()
		mono := int64(C.cd_mono_ns())
		c.clockOff = before + (nic.Now()-before)/2 - mono
	}
	return c.clock
}

func (c *devContext) Rank() int { return c.rank }

// NICStats reports work requests posted and completions polled by this context. The device does
// not report RNR retries per context; they stay 0.
func (c *devContext) NICStats() nic.NICStats { return c.stats }

func (c *devContext) AllocPD() (nic.PD, error) {
	if c.closed {
		return nil, fmt.Errorf("verbs: rank %d: AllocPD on a closed context: %w", c.rank, nic.ErrClosed)
	}
	h := C.ibv_alloc_pd(c.ctx)
	if h == nil {
		return nil, fmt.Errorf("verbs: rank %d: ibv_alloc_pd failed on %s", c.rank, c.prov.name)
	}
	d := &pd{ctx: c, pd: h}
	// A word for atomics whose fetched value the caller discards: verbs always returns it.
	s, err := d.AllocMR(64, nic.AccessLocalWrite)
	if err != nil {
		C.ibv_dealloc_pd(h)
		return nil, err
	}
	d.scratch = s.(*mr)
	c.pds = append(c.pds, d)
	return d, nil
}

func (c *devContext) CreateCQ(depth int) (nic.CQ, error) {
	if c.closed {
		return nil, fmt.Errorf("verbs: rank %d: CreateCQ on a closed context: %w", c.rank, nic.ErrClosed)
	}
	if depth < 1 || depth > c.prov.caps.MaxCQDepth {
		return nil, fmt.Errorf("verbs: rank %d: CQ depth %d is out of range 1..%d for %s", c.rank, depth, c.prov.caps.MaxCQDepth, c.prov.name)
	}
	h := C.ibv_create_cq(c.ctx, C.int(depth), nil, nil, 0)
	if h == nil {
		return nil, fmt.Errorf("verbs: rank %d: ibv_create_cq(depth %d) failed on %s", c.rank, depth, c.prov.name)
	}
	q := &cq{ctx: c, cq: h, num: uint32(len(c.cqs)), depth: int(h.cqe)}
	if err := q.newX(); err != nil {
		C.ibv_destroy_cq(h)
		return nil, fmt.Errorf("verbs: rank %d: %w", c.rank, err)
	}
	c.cqs = append(c.cqs, q)
	return q, nil
}

// Close destroys, in order, the QPs, memory regions, CQs and PDs created from the context, then
// closes the device. It reports the first failure and continues with the rest.
func (c *devContext) Close() error {
	if c.closed {
		return nil
	}
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, q := range c.qps {
		keep(q.Close())
	}
	for _, d := range c.pds {
		for _, m := range d.mrs {
			keep(m.Close())
		}
	}
	for _, q := range c.cqs {
		keep(q.Close())
	}
	for _, d := range c.pds {
		keep(d.Close())
	}
	C.free(unsafe.Pointer(c.clock))
	c.clock = nil
	if rc := C.ibv_close_device(c.ctx); rc != 0 {
		keep(fmt.Errorf("verbs: rank %d: closing %s: errno %d", c.rank, c.prov.name, rc))
	}
	c.closed = true
	c.prov.release(c.rank)
	return first
}

// qpByNum finds a QP of this context by number (error paths only).
func (c *devContext) qpByNum(n uint32) *qp {
	for _, q := range c.qps {
		if q.num == n {
			return q
		}
	}
	return nil
}
