//go:build ofi && linux

package ofi

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
)

// CQ is a libfabric completion queue (FI_CQ_FORMAT_DATA). libfabric completes the requests of an
// endpoint in any order; the CQ hands them out per queue in posting order, as nic requires, and
// only those that were signalled or failed.
type CQ struct {
	c      *Context
	num    uint32
	depth  int
	cq     *C.struct_fid_cq
	out    []nic.WC
	done   []*C.ofi_slot // sends complete when posted (Provider.injectDone), for the next Poll to hand out
	comps  []C.ofi_comp  // C memory: a Go array would be copied to the heap by cgo's pointer check on every poll
	err    error
	cntrs  []*Counter // bound by BindCounter: each completion handed out raises them by one
	fd     C.int      // the wait object's file descriptor (Provider.WaitSet), -1 if none
	closed bool
	// retired are slot arrays of closed endpoints that completions still to be read here name
	// (QP.Close), each freed when Poll has read the last of them, or when the CQ closes.
	retired []retiredSlots
}

// retiredSlots is a closed endpoint's slot array of one side, of size bytes, and the number of
// its requests whose completions are still to be read from the CQ (libfabric's, and the
// injected sends' in its done list): the requests handed to libfabric and not completed when
// the endpoint closed. Each names one slot of the array.
type retiredSlots struct {
	p       unsafe.Pointer
	size    uintptr
	pending int
}

// CreateCQ opens a completion queue.
func (c *Context) CreateCQ(depth int) (nic.CQ, error) {
	if c.closed {
		return nil, nic.ErrClosed
	}
	if depth <= 0 || depth > c.p.caps.MaxCQDepth {
		return nil, fmt.Errorf("ofi: CQ depth %d: %w", depth, nic.ErrBadRequest)
	}
	comps, err := calloc(pollBatch, unsafe.Sizeof(C.ofi_comp{}), fmt.Sprintf("rank %d: a CQ's completion array", c.rank))
	if err != nil {
		return nil, err
	}
	c.nextCQ++
	q := &CQ{c: c, num: c.nextCQ, depth: depth}
	q.comps = unsafe.Slice((*C.ofi_comp)(comps), pollBatch)
	// Room for the provider's completions of unsignalled requests too.
	wait := C.int(0)
	if !c.p.opts.NoBlock {
		wait = 1
	}
	if r := C.ofi_cq_open(c.dom, C.size_t(2*depth), wait, &q.cq, &q.fd); r != 0 {
		C.free(unsafe.Pointer(&q.comps[0]))
		return nil, fmt.Errorf("ofi: fi_cq_open: %s", fiErr(r))
	}
	c.cqs[q.num] = q
	c.p.ncq.Add(1)
	return q, nil
}

// pollBatch is how many completions one Poll reads from libfabric at most.
const pollBatch = C.POLL_BATCH

// Num is the CQ's number in its context.
func (q *CQ) Num() uint32 { return q.num }

// Depth is the depth the CQ was created with.
func (q *CQ) Depth() int { return q.depth }

// Poll reads the provider's completions (one fi_cq_read, which also drives the provider's
// progress) and returns up to len(wc) in queue order.
func (q *CQ) Poll(wc []nic.WC) (int, error) {
	if q.closed {
		return 0, nic.ErrClosed
	}
	if q.err != nil {
		return 0, q.err
	}
	// By index: completing one may flush a waiting send whose inject lands here too.
	for i := 0; i < len(q.done); i++ {
		k := C.ofi_comp{slot: q.done[i]}
		q.complete(&k)
	}
	q.done = q.done[:0]
	// With completions in hand, hand them out before asking libfabric for more: the engine
	// polls again soon enough.
	if len(q.out) == 0 {
		q.c.retryWaiting()
		n := C.ofi_cq_poll_a(addr(q.cq), addr(&q.comps[0]), C.int(len(q.comps)))
		if n < 0 {
			q.err = fmt.Errorf("ofi: cq %d: fi_cq_read: %s", q.num, fiErr(n))
			return 0, q.err
		}
		for i := range int(n) {
			if k := &q.comps[i]; k.slot == nil && k.err != 0 {
				// An error of no request (ofi_rxm reports a lost connection so): every request
				// on the CQ may wait for ever, so the CQ fails now, with the provider's reason.
				q.err = fmt.Errorf("ofi: cq %d: the provider reports an error of no request: %s (provider error %d)",
					q.num, C.GoString(C.ofi_strerror(C.int(k.err))), int(k.prov_errno))
				return 0, q.err
			}
			q.complete(&q.comps[i])
		}
		q.c.fireLanded()
		if q.c.prog != nil {
			q.c.p.polled(q.c.prog, n > 0)
		}
	}
	if len(q.out) > q.depth {
		q.err = fmt.Errorf("ofi: cq %d overflowed: %d unpolled completions, depth %d", q.num, len(q.out), q.depth)
		return 0, q.err
	}
	k := copy(wc, q.out)
	q.out = q.out[:copy(q.out, q.out[k:])]
	return k, nil
}

// Close closes the CQ. One that libfabric does not close (an endpoint bound to it is still
// open: -FI_EBUSY) stays open, for Context.Close to close after its endpoints.
func (q *CQ) Close() error {
	if q.closed {
		return nil
	}
	if err := check("fi_close(cq)", C.ofi_close(&q.cq.fid)); err != nil {
		return err
	}
	q.closed = true
	delete(q.c.cqs, q.num)
	q.c.p.ncq.Add(-1)
	C.free(unsafe.Pointer(&q.comps[0]))
	q.comps = nil
	for _, r := range q.retired {
		C.free(r.p) // requests whose completions never came: the endpoint's close dropped them
	}
	q.retired = nil
	return nil
}

// retire frees slot array s (size bytes) of a closed endpoint, or, if pending completions to be
// read from this CQ name its slots, keeps it until Poll has read them (dropped) or the CQ closes:
// Poll reads the slot of every completion to find its endpoint.
func (q *CQ) retire(s unsafe.Pointer, size uintptr, pending int) {
	if pending <= 0 || q.closed {
		C.free(s)
		return
	}
	q.retired = append(q.retired, retiredSlots{p: s, size: size, pending: pending})
}

// dropped counts a completion that names slot s of a closed endpoint, read and dropped: the
// slot's array is freed with the last completion it waited for.
func (q *CQ) dropped(s *C.ofi_slot) {
	a := uintptr(unsafe.Pointer(s))
	for i := range q.retired {
		r := &q.retired[i]
		if a-uintptr(r.p) >= r.size {
			continue
		}
		if r.pending--; r.pending == 0 {
			C.free(r.p)
			q.retired = slices.Delete(q.retired, i, i+1)
		}
		return
	}
}

// status maps a libfabric error (positive FI_E* value) to a nic status.
func status(err int) nic.Status {
	switch err {
	case 0:
		return nic.StatusSuccess
	case C.FI_EACCES, C.FI_EPERM, C.FI_EKEYREJECTED:
		return nic.StatusRemoteAccessError
	case C.FI_ETRUNC, C.FI_ETOOSMALL, C.FI_EMSGSIZE:
		return nic.StatusLocalLengthError
	case C.FI_ECANCELED:
		return nic.StatusFlushError
	case C.FI_EINVAL, C.FI_EOPNOTSUPP:
		return nic.StatusRemoteInvalidRequest
	}
	return nic.StatusGeneralError
}

// entry is one work request of a queue, from its post to its completion's hand-out.
type entry struct {
	id      uint64
	op      nic.Opcode
	signal  bool
	pending int // libfabric operations not completed yet
	status  nic.Status
	byteLen uint32
	imm     uint32
}

// ring is a queue's entries in posting order; head is the oldest not handed out.
type ring struct {
	e          []entry
	head, tail uint64
}

func (r *ring) full() bool          { return r.tail-r.head == uint64(len(r.e)) }
func (r *ring) at(i uint64) *entry  { return &r.e[i%uint64(len(r.e))] }
func (r *ring) push(e entry) *entry { p := r.at(r.tail); *p = e; r.tail++; return p }
func (r *ring) headDone() bool      { return r.head < r.tail && r.at(r.head).pending == 0 }

// complete files one provider completion read from cq with its work request and hands out what
// is now done at the head of the queue.
func (cq *CQ) complete(k *C.ofi_comp) {
	s := k.slot
	if s == nil {
		return // a completion without context (none are asked for)
	}
	q := cq.c.qps[uint32(s.qpn)]
	if q == nil {
		cq.dropped(s) // its endpoint was closed
		return
	}
	r := &q.sq
	if s.side == 1 {
		r = &q.rq
	}
	e := r.at(uint64(s.idx))
	e.pending--
	if s.side == 1 {
		q.rxBusy--
	} else {
		q.txBusy--
	}
	if k.err != 0 && e.status == nic.StatusSuccess {
		e.status = status(int(k.err))
		q.lastErr = fmt.Sprintf("%s (provider error %d)", C.GoString(C.ofi_strerror(C.int(k.err))), int(k.prov_errno))
	}
	if s.side == 1 && k.err == 0 {
		e.byteLen = uint32(k.len)
		if k.flags&C.FI_REMOTE_CQ_DATA != 0 {
			e.op, e.imm = nic.OpRecvImm, uint32(k.data)
		}
	}
	if s.side == 0 && q.imm.state == immWrite && uint64(s.idx) == q.imm.idx {
		// The write of a write with immediate, on a provider without send-after-write: its data
		// is in the peer's memory (FI_DELIVERY_COMPLETE), now the message may go.
		if k.err != 0 {
			e.pending-- // the message never goes
			q.imm.state = immNone
		} else {
			q.imm.state = immPost
			q.postImm()
		}
	}
	if len(q.sback)+len(q.rback) > 0 || q.imm.state == immPost {
		q.flush() // drains
		return
	}
	q.drain()
}

// drain hands out the done entries at the head of both queues.
func (q *QP) drain() {
	for q.sq.headDone() {
		e := q.sq.at(q.sq.head)
		q.sq.head++
		if e.status != nic.StatusSuccess && e.status != nic.StatusFlushError {
			q.failed = true
		}
		if e.signal || e.status != nic.StatusSuccess {
			q.scq.out = append(q.scq.out, nic.WC{ID: e.id, Status: e.status, Opcode: e.op, QPN: q.num, ByteLen: e.byteLen})
			q.scq.counted()
		}
	}
	for q.rq.headDone() {
		e := q.rq.at(q.rq.head)
		q.rq.head++
		q.rcq.out = append(q.rcq.out, nic.WC{ID: e.id, Status: e.status, Opcode: e.op, QPN: q.num, ByteLen: e.byteLen, Imm: e.imm})
		q.rcq.counted()
	}
}

// QP is an RDM endpoint and the peer's address: an RC-like queue pair.
type QP struct {
	c         *Context
	num       uint32
	ep        *C.struct_fid_ep
	addr      [16]byte
	peer      C.uint64_t
	connected bool
	closed    bool
	failed    bool // a send-queue request failed: later posts are flushed
	lastErr   string
	scq, rcq  *CQ
	maxInline int
	sq, rq    ring
	// The endpoint's libfabric queues hold txCap transmit and rxCap receive operations (the
	// provider's limit, 256 on sockets); the nic queues may be deeper. txBusy and rxBusy are the
	// operations handed to libfabric and not completed; sback and rback the requests waiting for
	// room, in posting order (flush).
	txCap, rxCap, txBusy, rxBusy int
	sback, rback                 []deferred
	imm                          immWait     // without send-after-write: the write with immediate the send queue waits for
	region                       *os.File    // shm: the endpoint's file, locked while it lives (holdRegion)
	sslots                       *C.ofi_slot // two per send entry (a write with immediate is a write and a send)
	rslots                       *C.ofi_slot
	scratch                      *MR // 32 bytes per send entry: an atomic's operands, and the old value if the caller does not want it
	// injectDone is the provider's injectDone, or 0 when a counter the caller bound counts this
	// endpoint's sends (a send coredag completes itself raises none); injected counts the sends
	// posted that way.
	injectDone, injected uint64
}

// Bind attaches a counter to an endpoint for some of its events (CreateEndpoint).
type Bind struct {
	Cntr   *Counter
	Events Event
}

// CreateQP creates an endpoint, not yet connected.
func (pd *PD) CreateQP(cfg nic.QPConfig) (nic.QP, error) { return pd.CreateEndpoint(cfg) }

// CreateEndpoint is CreateQP with counters bound to the endpoint (libfabric binds counters before
// the endpoint is enabled, so here and not later).
func (pd *PD) CreateEndpoint(cfg nic.QPConfig, binds ...Bind) (*QP, error) {
	c := pd.c
	if c.closed {
		return nil, nic.ErrClosed
	}
	if cfg.CrossChannel || cfg.ManagedSend || cfg.ManagedRecv {
		return nil, fmt.Errorf("ofi: managed or cross-channel queue: %w", nic.ErrNoCrossChannel)
	}
	scq, ok1 := cfg.SendCQ.(*CQ)
	rcq, ok2 := cfg.RecvCQ.(*CQ)
	if !ok1 || !ok2 || scq.c != c || rcq.c != c {
		return nil, fmt.Errorf("ofi: CQs of another context or provider: %w", nic.ErrWrongContext)
	}
	maxd := c.p.caps.MaxQPDepth
	if cfg.SendDepth <= 0 || cfg.RecvDepth <= 0 || cfg.SendDepth > maxd || cfg.RecvDepth > maxd {
		return nil, fmt.Errorf("ofi: queue depths %d/%d (at most %d): %w", cfg.SendDepth, cfg.RecvDepth, maxd, nic.ErrBadRequest)
	}
	if cfg.MaxInline > c.p.caps.MaxInline {
		return nil, fmt.Errorf("ofi: inline %d > %d: %w", cfg.MaxInline, c.p.caps.MaxInline, nic.ErrInlineTooLarge)
	}
	cntrs := make([]*C.struct_fid_cntr, 0, len(binds)+1)
	flags := make([]C.uint64_t, 0, len(binds)+1)
	for _, b := range binds {
		if b.Cntr == nil || b.Cntr.c != c {
			return nil, fmt.Errorf("ofi: counter of another context: %w", nic.ErrWrongContext)
		}
		cntrs, flags = append(cntrs, b.Cntr.cntr), append(flags, C.uint64_t(b.Events))
		b.Cntr.ext = true // the endpoint's events raise it
	}
	if c.prog != nil {
		// Manual progress: the context's progress counter reaches the endpoint's transmit and
		// receive sides (DriveProgress). An endpoint has one counter per event, so the progress
		// counter takes an event of each side that the caller did not bind.
		var taken Event
		for _, b := range binds {
			taken |= b.Events
		}
		var ev C.uint64_t
		for _, side := range [][]Event{{EvSend, EvWrite, EvRead}, {EvRecv}} {
			if i := slices.IndexFunc(side, func(e Event) bool { return taken&e == 0 }); i >= 0 {
				ev |= C.uint64_t(side[i])
			}
		}
		if ev != 0 {
			cntrs, flags = append(cntrs, c.prog.cntr), append(flags, ev)
		}
	}
	cntrs, flags = append(cntrs, nil), append(flags, 0) // never empty: &cntrs[0] below
	c.nextQP++
	q := &QP{c: c, num: c.nextQP, scq: scq, rcq: rcq, maxInline: cfg.MaxInline,
		sq: ring{e: make([]entry, cfg.SendDepth)}, rq: ring{e: make([]entry, cfg.RecvDepth)}, injectDone: c.p.injectDone}
	for _, b := range binds {
		if b.Events&EvSend != 0 {
			q.injectDone = 0
		}
	}
	ss, err := calloc(2*cfg.SendDepth, unsafe.Sizeof(C.ofi_slot{}), fmt.Sprintf("rank %d: qp %d: send slots", c.rank, q.num))
	if err != nil {
		return nil, err
	}
	q.sslots = (*C.ofi_slot)(ss)
	rs, err := calloc(cfg.RecvDepth, unsafe.Sizeof(C.ofi_slot{}), fmt.Sprintf("rank %d: qp %d: receive slots", c.rank, q.num))
	if err != nil {
		q.release()
		return nil, err
	}
	q.rslots = (*C.ofi_slot)(rs)
	var addr [128]byte
	alen := C.size_t(len(addr))
	q.txCap, q.rxCap = min(2*cfg.SendDepth, int(c.p.ccaps.tx_size)), min(cfg.RecvDepth, int(c.p.ccaps.rx_size))
	var srcName *C.char
	if c.p.ccaps.addr_format == C.FI_ADDR_STR {
		n, err := endpointName()
		if err != nil {
			q.release()
			return nil, err
		}
		srcName = C.CString(n)
		defer C.free(unsafe.Pointer(srcName))
	}
	// The endpoint keeps the provider's queue sizes, whatever the nic queues' depths: shm sizes
	// its shared command queues by them, and those carry its own protocol messages too (a plan's
	// queue of depth 2 stalled pairwise_alltoall on shm with queues sized 4 and 2).
	r := C.ofi_ep_open(c.dom, c.p.info, c.av, scq.cq, rcq.cq, 0, 0,
		&cntrs[0], &flags[0], C.int(len(cntrs)-1), srcName, &q.ep, unsafe.Pointer(&addr[0]), &alen)
	if r != 0 {
		q.release() // ofi_ep_open closed what it opened
		if srcName != nil {
			return nil, fmt.Errorf("ofi: endpoint %q: %s", C.GoString(srcName), fiErr(r))
		}
		return nil, fmt.Errorf("ofi: endpoint: %s", fiErr(r))
	}
	if int(alen) > len(q.addr) {
		q.release()
		return nil, fmt.Errorf("ofi: endpoint address of %d bytes does not fit QPInfo.GID: %w", int(alen), nic.ErrProviderLimited)
	}
	copy(q.addr[:], addr[:alen])
	if srcName != nil {
		// shm's file for the endpoint, locked while the endpoint lives; another provider that
		// addresses by name has none, and needs none.
		q.region, _ = holdRegion(shmDir, C.GoString(srcName))
	}
	if c.p.caps.Atomics {
		if err := q.allocScratch(pd, cfg.SendDepth); err != nil {
			q.release() // the shm file's lock too, which was left held
			return nil, err
		}
	}
	c.qps[q.num] = q
	return q, nil
}

// allocScratch allocates the endpoint's scratch region, 32 bytes for each of entries send
// entries (scratch); its error says that the region was for the endpoint's atomics.
func (q *QP) allocScratch(pd *PD, entries int) error {
	m, err := pd.alloc(32*entries, nic.AccessLocalWrite, fmt.Sprintf("qp %d: the scratch region of its atomics", q.num))
	if err != nil {
		return err
	}
	q.scratch = m
	return nil
}

// endpointSeq numbers the endpoints this process names (endpointName).
var endpointSeq atomic.Uint64

// sweepOnce removes, before this process names its first endpoint, the shm files of processes
// killed before they could (sweepRegions).
var sweepOnce sync.Once

// endpointName is a name for an endpoint of a provider that addresses by string (FI_ADDR_STR:
// shm), unique on the host while this process lives: "cd", the process id and a sequence
// number, in base 36. The name is the endpoint's address (shm's shared-memory file, /dev/shm/NAME),
// and must fit nic.QPInfo.GID with its terminating NUL.
func endpointName() (string, error) {
	sweepOnce.Do(func() { sweepRegions(shmDir, os.Getpid(), time.Now()) })
	n := "cd" + strconv.FormatInt(int64(os.Getpid()), 36) + "." + strconv.FormatUint(endpointSeq.Add(1), 36)
	if len(n) >= len(nic.QPInfo{}.GID) {
		return "", fmt.Errorf("ofi: endpoint name %q does not fit the %d bytes of QPInfo.GID: %w", n, len(nic.QPInfo{}.GID), nic.ErrProviderLimited)
	}
	return n, nil
}

// release undoes a CreateEndpoint that failed, in Close's order: it closes the endpoint if it
// was opened, then drops the lock on shm's file (which fi_close removed) and frees the slots,
// which no request has named.
func (q *QP) release() {
	if q.ep != nil {
		C.ofi_close(&q.ep.fid)
		q.ep = nil
	}
	if q.region != nil {
		q.region.Close()
		q.region = nil
	}
	C.free(unsafe.Pointer(q.sslots))
	C.free(unsafe.Pointer(q.rslots))
	q.sslots, q.rslots = nil, nil
}

// Num is the endpoint's number in its context.
func (q *QP) Num() uint32 { return q.num }

// Info carries the endpoint's address in GID: a sockaddr_in (sockets, tcp;ofi_rxm,
// verbs;ofi_rxm) or a NUL-terminated name (shm).
func (q *QP) Info() nic.QPInfo { return nic.QPInfo{Rank: q.c.rank, QPN: q.num, GID: q.addr} }

// Connect inserts the peer's address into the context's address vector.
func (q *QP) Connect(remote nic.QPInfo) error {
	if q.closed {
		return nic.ErrClosed
	}
	if r := C.ofi_av_insert(q.c.av, unsafe.Pointer(&remote.GID[0]), &q.peer); r != 0 {
		return fmt.Errorf("ofi: fi_av_insert(%v): %s", remote, fiErr(r))
	}
	q.connected = true
	return nil
}

// Close closes the endpoint; completions still due from it are dropped. The CQs may still hold
// completions of its requests, whose contexts are its slots: a side's slots are freed now if none
// of its requests is outstanding, else once its CQ has read the completions of all of them, or
// when the CQ closes if some never come (CQ.retire). An endpoint that triggered work still
// waiting would post on stays open, and Close says so: libfabric would start that work on a
// closed endpoint once its counter reached the threshold. Context.CancelTriggers drops the work
// where the provider can; where it cannot (sockets), only Context.Close closes the endpoint,
// and the counters that hold the work right after it.
func (q *QP) Close() error {
	if q.closed {
		return nil
	}
	if n := q.c.armedOn(q); n > 0 && !q.c.closed {
		how := "cancel them first (CancelTriggers)"
		if q.c.noFlush {
			how = q.c.p.name + " cannot drop triggered work (no FI_FLUSH_WORK): close the whole context"
		}
		return fmt.Errorf("ofi: rank %d: qp %d: %d triggered operations still wait to post on it; %s: %w", q.c.rank, q.num, n, how, nic.ErrBadRequest)
	}
	q.closed = true
	delete(q.c.qps, q.num)
	err := check("fi_close(ep)", C.ofi_close(&q.ep.fid))
	if q.region != nil {
		q.region.Close() // after fi_close removed the file: no sweep finds it unlocked meanwhile
	}
	// txBusy counts the injected sends whose completion waits in the CQ's done list too; a
	// request not handed to libfabric (sback, rback) names no slot a completion will bring.
	var slot C.ofi_slot
	q.scq.retire(unsafe.Pointer(q.sslots), uintptr(2*len(q.sq.e))*unsafe.Sizeof(slot), q.txBusy)
	q.rcq.retire(unsafe.Pointer(q.rslots), uintptr(len(q.rq.e))*unsafe.Sizeof(slot), q.rxBusy)
	q.sslots, q.rslots = nil, nil
	if q.scratch != nil {
		q.scratch.Close()
	}
	return err
}

func (q *QP) slot(side int, idx uint64, k int) *C.ofi_slot {
	var s *C.ofi_slot
	if side == 0 {
		s = (*C.ofi_slot)(unsafe.Add(unsafe.Pointer(q.sslots), (2*(idx%uint64(len(q.sq.e)))+uint64(k))*uint64(unsafe.Sizeof(*s))))
	} else {
		s = (*C.ofi_slot)(unsafe.Add(unsafe.Pointer(q.rslots), (idx%uint64(len(q.rq.e)))*uint64(unsafe.Sizeof(*s))))
	}
	*s = C.ofi_slot{}
	s.qpn, s.side, s.idx = C.uint32_t(q.num), C.uint32_t(side), C.uint64_t(idx)
	return s
}

var errAgain = errors.New("again")

// addr is p, which points to C memory, as the integer the shim's hot-path calls take (shim.h).
func addr[T any](p *T) C.uintptr_t { return C.uintptr_t(uintptr(unsafe.Pointer(p))) }

// PostSend posts each request with one libfabric call (two for a write with immediate).
func (q *QP) PostSend(wrs []nic.SendWR) (int, error) {
	for i := range wrs {
		if err := q.postSend(&wrs[i], nil, 0); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}

// postSend posts wr, as a triggered operation if cntr is not nil.
func (q *QP) postSend(wr *nic.SendWR, cntr *Counter, threshold uint64) error {
	if q.closed {
		return nic.ErrClosed
	}
	if !q.connected {
		return fmt.Errorf("ofi: qp %d: %w", q.num, nic.ErrNotConnected)
	}
	if wr.Op.IsCrossChannel() {
		return fmt.Errorf("ofi: %v: %w", wr.Op, nic.ErrNoCrossChannel)
	}
	if wr.Op > nic.OpNop {
		return fmt.Errorf("ofi: opcode %v on a send queue: %w", wr.Op, nic.ErrBadRequest)
	}
	inline := wr.Flags&nic.FlagInline != 0
	if n := nic.SGLen(wr.Local, wr.More); inline && n > uint64(q.maxInline) {
		return fmt.Errorf("ofi: inline payload of %d bytes > %d: %w", n, q.maxInline, nic.ErrInlineTooLarge)
	}
	if err := q.sgeLimit(wr.More); err != nil {
		return err
	}
	if wr.Op == nic.OpRDMAWriteImm && q.c.p.immErr != nil {
		return q.c.p.immErr
	}
	if wr.Op == nic.OpRDMAWriteImm && cntr != nil && !q.c.p.sendAfterWrite() {
		return fmt.Errorf("ofi: %s does not order a message after a write (no FI_ORDER_SAW): a triggered write with immediate cannot be two triggered operations: %w", q.c.p.name, nic.ErrProviderLimited)
	}
	atomic := wr.Op == nic.OpAtomicFAdd || wr.Op == nic.OpAtomicCAS
	if atomic && !q.c.p.caps.Atomics {
		return fmt.Errorf("ofi: %s has no FI_ATOMIC: %w", q.c.p.name, nic.ErrProviderLimited)
	}
	if cntr != nil && wr.Op == nic.OpNop {
		if cntr.Read() < threshold {
			return fmt.Errorf("ofi: a triggered NOP: %w (libfabric has no triggered no-op)", nic.ErrBadRequest)
		}
		cntr = nil // due already: a NOP completes in queue order
	}
	if q.sq.full() {
		return fmt.Errorf("ofi: qp %d send queue: %w", q.num, nic.ErrQueueFull)
	}
	idx := q.sq.tail
	e := q.sq.push(entry{id: wr.ID, op: wr.Op, signal: wr.Flags&nic.FlagSignaled != 0})
	done := func(st nic.Status) error { e.status = st; q.drain(); return nil }
	if q.failed {
		return done(nic.StatusFlushError)
	}
	if wr.Op == nic.OpNop {
		return done(nic.StatusSuccess)
	}
	writes := wr.Op == nic.OpRDMARead || atomic
	if _, ok := q.c.segs(wr.Local, wr.More, writes); !ok {
		return done(nic.StatusLocalProtectionError)
	}
	if atomic && (wr.Local.Len != 0 && wr.Local.Len != 8 || len(wr.More) > 0) {
		return done(nic.StatusLocalLengthError)
	}
	d := deferred{idx: idx, wr: *wr, cntr: cntr, thr: threshold}
	d.wr.More = slices.Clone(wr.More) // the caller may reuse its list once posted
	if len(q.sback) > 0 || q.txFull(wr.Op) || q.imm.state != immNone {
		// The endpoint's transmit queue is full, or a write with immediate holds it (postImm):
		// the request waits here, in order, until completions make room (flush).
		e.pending = txOps(wr.Op)
		q.sback = append(q.sback, d)
		q.c.waiting = true
		q.c.arm(cntr, threshold, q)
		return nil
	}
	r := q.issueSend(&d)
	if r == -C.FI_EAGAIN {
		// libfabric cannot take it yet: ofi_rxm answers FI_EAGAIN until the connection to the peer
		// is up, which takes progress on both sides. The request waits here, in order, and every
		// poll of the context's CQs tries again (Context.retryWaiting).
		q.sback = append(q.sback, d)
		q.c.waiting = true
		q.c.arm(cntr, threshold, q)
		return nil
	}
	if r != 0 {
		q.sq.tail-- // not posted
		return fmt.Errorf("ofi: qp %d: %v: %s: %w", q.num, wr.Op, fiErr(r), nic.ErrBadRequest)
	}
	q.c.arm(cntr, threshold, q)
	return nil
}

// retryWaiting hands the requests waiting on this side to libfabric, as far as it takes them.
// The CQ polls call it, so that a request libfabric refused with FI_EAGAIN (no connection yet, no
// room) goes as soon as it can, even if no completion of its own queue comes to make room.
func (c *Context) retryWaiting() {
	if !c.waiting {
		return
	}
	c.waiting = false
	for _, q := range c.qps {
		if len(q.sback)+len(q.rback) > 0 || q.imm.state == immPost {
			q.flush()
			c.waiting = c.waiting || len(q.sback)+len(q.rback) > 0 || q.imm.state == immPost
		}
	}
}

// immWait is the write with immediate a queue waits for, on a provider without send-after-write
// ordering: its write has not completed (immWrite), or its message has not been posted (immPost).
type immWait struct {
	state int
	idx   uint64 // its index in the send queue
	val   uint32 // the immediate
}

const (
	immNone = iota
	immWrite
	immPost
)

// postImm posts the message of the write with immediate the queue waits for, whose write has
// completed. If libfabric cannot take it yet it is tried again at the next poll (retryWaiting).
func (q *QP) postImm() {
	e := q.sq.at(q.imm.idx)
	r := C.ofi_send_a(addr(q.ep), addr(q.c.emptySeg()), 1, q.peer, C.uint64_t(q.imm.val), C.FI_REMOTE_CQ_DATA, addr(q.slot(0, q.imm.idx, 1)))
	switch r {
	case 0:
		q.txBusy++
		q.imm.state = immNone
	case -C.FI_EAGAIN:
		q.c.waiting = true
	default:
		e.pending--
		if e.status == nic.StatusSuccess {
			e.status = nic.StatusGeneralError
			q.lastErr = "the notification of a write with immediate could not be posted: " + fiErr(r)
		}
		q.imm.state = immNone
	}
}

// deferred is a request in posting order: its queue index, the request, and its trigger.
type deferred struct {
	idx  uint64
	wr   nic.SendWR // a receive's SGE is wr.Local
	cntr *Counter
	thr  uint64
	half bool // a write with immediate whose write went and whose message waits (issueSend)
}

// txFull reports whether libfabric's transmit queue has no room for a request of op now.
func (q *QP) txFull(op nic.Opcode) bool { return q.txBusy+txOps(op) > q.txCap }

// rxFull reports whether libfabric's receive queue has no room for a receive now.
func (q *QP) rxFull() bool { return q.rxBusy >= q.rxCap }

// txOps is how many transmit entries of the endpoint a request takes.
func txOps(op nic.Opcode) int {
	if op == nic.OpRDMAWriteImm {
		return 2
	}
	return 1
}

// issueSend hands send-queue request d (checked by postSend) to libfabric: one call, two for a
// write with immediate, as a triggered operation if d.cntr is set.
func (q *QP) issueSend(d *deferred) C.int {
	wr, idx, cntr, threshold := &d.wr, d.idx, d.cntr, d.thr
	e := q.sq.at(idx)
	atomic := wr.Op == nic.OpAtomicFAdd || wr.Op == nic.OpAtomicCAS
	buf, desc, _ := q.c.local(wr.Local, wr.Op == nic.OpRDMARead || atomic)
	sg, _ := q.c.segs(wr.Local, wr.More, wr.Op == nic.OpRDMARead)
	var fl C.uint64_t
	if wr.Flags&nic.FlagInline != 0 {
		fl |= C.FI_INJECT
	}
	if wr.Flags&nic.FlagFence != 0 && q.c.p.ccaps.caps&C.FI_FENCE != 0 {
		fl |= C.FI_FENCE
	}
	if wr.Flags&nic.FlagLocalComplete != 0 && wr.Op == nic.OpSend {
		fl |= C.FI_INJECT_COMPLETE // sockets then sends no acknowledgement either
	}
	s := q.slot(0, idx, 0)
	if cntr != nil {
		fl |= C.FI_TRIGGER
		armSlot(s, cntr, threshold)
	}
	var r C.int
	if !d.half {
		// The libfabric operations the request owes completions for. A write with immediate
		// whose write went and whose message waits keeps its count: the write may have
		// completed meanwhile.
		e.pending = txOps(wr.Op)
	}
	posted := 1 // libfabric operations this call hands over if it succeeds
	switch wr.Op {
	case nic.OpSend:
		if q.injectDone > 0 && sg.total <= q.injectDone && sg.n == 1 && cntr == nil && fl&C.FI_FENCE == 0 {
			if r = C.ofi_inject_a(addr(q.ep), addr(sg.seg), q.peer); r == 0 {
				q.scq.done = append(q.scq.done, s)
				q.injected++
			}
			break
		}
		r = C.ofi_send_a(addr(q.ep), addr(sg.seg), C.size_t(sg.n), q.peer, 0, fl, addr(s))
	case nic.OpRDMAWrite:
		r = C.ofi_write(q.ep, sg.seg, C.size_t(sg.n), q.peer, C.uint64_t(wr.RemoteAddr), C.uint64_t(wr.RKey), 0, fl, s)
	case nic.OpRDMAWriteImm:
		// The write, then an empty message carrying the immediate: it consumes the peer's next
		// receive, in order with its sends, and arrives after the write's data, as the nic
		// contract wants.
		posted = 0
		if !q.c.p.sendAfterWrite() {
			// The provider may deliver the message before the write's data (tcp;ofi_rxm with
			// atomics grants no FI_ORDER_SAW): the message goes when the write's data is in the
			// peer's memory (FI_DELIVERY_COMPLETE; complete, postImm), and the queue waits for
			// it, so that later requests stay behind. A round trip more per such write.
			r = C.ofi_write(q.ep, sg.seg, C.size_t(sg.n), q.peer, C.uint64_t(wr.RemoteAddr), C.uint64_t(wr.RKey), 0, fl|C.FI_DELIVERY_COMPLETE, s)
			if r != 0 {
				break
			}
			posted = 1
			q.imm = immWait{state: immWrite, idx: idx, val: wr.Imm}
			break
		}
		if !d.half {
			r = C.ofi_write(q.ep, sg.seg, C.size_t(sg.n), q.peer, C.uint64_t(wr.RemoteAddr), C.uint64_t(wr.RKey), 0, fl, s)
			if r != 0 {
				break
			}
			q.txBusy++
			d.half = true
		}
		// A triggered write with immediate is two triggered operations at one threshold: the
		// provider fires equal thresholds in the order they were queued.
		s2, fl2 := q.slot(0, idx, 1), C.uint64_t(C.FI_REMOTE_CQ_DATA)
		if cntr != nil {
			fl2 |= C.FI_TRIGGER
			armSlot(s2, cntr, threshold)
		}
		switch r2 := C.ofi_send_a(addr(q.ep), addr(q.c.emptySeg()), 1, q.peer, C.uint64_t(wr.Imm), fl2, addr(s2)); r2 {
		case 0:
			d.half, posted = false, 1
		case -C.FI_EAGAIN:
			return r2 // the message waits (postSend, flush); its write has gone
		default:
			// The write has gone and will complete; the request fails with it.
			d.half = false
			e.pending-- // the message never goes
			e.status = nic.StatusGeneralError
			q.lastErr = "the notification of a write with immediate could not be posted: " + fiErr(r2)
		}
	case nic.OpRDMARead:
		e.byteLen = uint32(sg.total)
		r = C.ofi_read(q.ep, sg.seg, C.size_t(sg.n), q.peer, C.uint64_t(wr.RemoteAddr), C.uint64_t(wr.RKey), fl, s)
	case nic.OpAtomicFAdd, nic.OpAtomicCAS:
		sc := unsafe.Add(q.scratch.buf, 32*(idx%uint64(len(q.sq.e))))
		res, rdesc := buf, desc
		if wr.Local.Len == 0 {
			res, rdesc = sc, q.scratch.desc
		} else {
			e.byteLen = 8
		}
		*(*C.uint64_t)(unsafe.Add(sc, 8)) = C.uint64_t(wr.CompareAdd)
		*(*C.uint64_t)(unsafe.Add(sc, 16)) = C.uint64_t(wr.Swap)
		op := C.int(C.FI_SUM)
		operand, compare := unsafe.Add(sc, 8), unsafe.Pointer(nil)
		if wr.Op == nic.OpAtomicCAS {
			op, operand, compare = C.FI_CSWAP, unsafe.Add(sc, 16), unsafe.Add(sc, 8)
		}
		r = C.ofi_atomic64(q.ep, op, (*C.uint64_t)(operand), q.scratch.desc, (*C.uint64_t)(compare), q.scratch.desc,
			(*C.uint64_t)(res), rdesc, q.peer, C.uint64_t(wr.RemoteAddr), C.uint64_t(wr.RKey), fl, s)
	}
	if r == 0 {
		q.txBusy += posted
	}
	return r
}

// flush hands the requests waiting for room in the endpoint's queues to libfabric, in order, as
// far as the room goes. A request libfabric refuses then completes with a general error; one it
// has no room for yet (FI_EAGAIN) waits for the next completion.
func (q *QP) flush() {
	if q.imm.state == immPost {
		q.postImm()
	}
	n := 0
	for ; n < len(q.sback); n++ {
		d := &q.sback[n]
		if q.txFull(d.wr.Op) || q.imm.state != immNone {
			break // no room, or a write with immediate holds the queue (postImm)
		}
		e := q.sq.at(d.idx)
		if q.failed {
			if d.half {
				e.pending-- // only the message never goes: the write that went still completes
			} else {
				e.pending = 0
			}
			e.status = nic.StatusFlushError
			continue
		}
		if r := q.issueSend(d); r == -C.FI_EAGAIN {
			break
		} else if r != 0 {
			e.pending, e.status = 0, nic.StatusGeneralError
			q.lastErr = fmt.Sprintf("%v could not be posted when the queue had room: %s", d.wr.Op, fiErr(r))
		}
	}
	q.sback = q.sback[:copy(q.sback, q.sback[n:])]
	n = 0
	for ; n < len(q.rback) && !q.rxFull(); n++ {
		d := &q.rback[n]
		if r := q.issueRecv(d); r == -C.FI_EAGAIN {
			break
		} else if r != 0 {
			e := q.rq.at(d.idx)
			e.pending, e.status = 0, nic.StatusGeneralError
			q.lastErr = fmt.Sprintf("a receive could not be posted when the queue had room: %s", fiErr(r))
		}
	}
	q.rback = q.rback[:copy(q.rback, q.rback[n:])]
	q.drain()
}

// PostRecv posts receives (fi_recvmsg from any address).
func (q *QP) PostRecv(wrs []nic.RecvWR) (int, error) {
	for i := range wrs {
		if err := q.postRecv(&wrs[i], nil, 0); err != nil {
			return i, err
		}
	}
	return len(wrs), nil
}

// sgeLimit refuses a scatter/gather list longer than the provider's iov_limit.
func (q *QP) sgeLimit(more []nic.SGE) error {
	if max := q.c.p.caps.MaxSGE; 1+len(more) > max {
		return fmt.Errorf("ofi: qp %d: a scatter/gather list of %d segments, %s takes at most %d per request (iov_limit): %w",
			q.num, 1+len(more), q.c.p.name, max, nic.ErrProviderLimited)
	}
	return nil
}

// postRecv posts wr, as a triggered receive if cntr is not nil.
func (q *QP) postRecv(wr *nic.RecvWR, cntr *Counter, threshold uint64) error {
	if q.closed {
		return nic.ErrClosed
	}
	if err := q.sgeLimit(wr.More); err != nil {
		return err
	}
	if q.rq.full() {
		return fmt.Errorf("ofi: qp %d receive queue: %w", q.num, nic.ErrQueueFull)
	}
	idx := q.rq.tail
	e := q.rq.push(entry{id: wr.ID, op: nic.OpRecv, pending: 1})
	if _, ok := q.c.segs(wr.Local, wr.More, true); !ok {
		e.pending, e.status = 0, nic.StatusLocalProtectionError
		q.drain()
		return nil
	}
	d := deferred{idx: idx, wr: nic.SendWR{Local: wr.Local, More: slices.Clone(wr.More)}, cntr: cntr, thr: threshold}
	if len(q.rback) > 0 || q.rxFull() {
		q.rback = append(q.rback, d) // waits for room (flush)
		q.c.waiting = true
	} else if r := q.issueRecv(&d); r == -C.FI_EAGAIN {
		q.rback = append(q.rback, d) // libfabric cannot take it yet: retried at the next poll
		q.c.waiting = true
	} else if r != 0 {
		q.rq.tail--
		return fmt.Errorf("ofi: qp %d: fi_recvmsg: %s: %w", q.num, fiErr(r), nic.ErrBadRequest)
	}
	q.c.arm(cntr, threshold, q)
	return nil
}

// issueRecv hands receive d (checked by postRecv) to libfabric.
func (q *QP) issueRecv(d *deferred) C.int {
	sg, _ := q.c.segs(d.wr.Local, d.wr.More, true)
	s, fl := q.slot(1, d.idx, 0), C.uint64_t(0)
	if d.cntr != nil {
		fl |= C.FI_TRIGGER
		armSlot(s, d.cntr, d.thr)
	}
	r := C.ofi_recv_a(addr(q.ep), addr(sg.seg), C.size_t(sg.n), fl, addr(s))
	if r == 0 {
		q.rxBusy++
	}
	return r
}

// armSlot makes s the threshold triggered context of an operation: it starts when cntr's
// success count reaches threshold.
func armSlot(s *C.ofi_slot, cntr *Counter, threshold uint64) {
	s.u = [64]byte{}
	t := (*C.struct_fi_triggered_context)(unsafe.Pointer(&s.u))
	t.event_type = C.FI_TRIGGER_THRESHOLD
	th := (*C.struct_fi_trigger_threshold)(unsafe.Pointer(&t.trigger))
	th.cntr, th.threshold = cntr.cntr, C.size_t(threshold)
}

// Explain returns the provider's words for the last failed request of the endpoint.
func (q *QP) Explain() string { return q.lastErr }

// Stalls describes the requests the context's endpoints hold because libfabric has not taken
// them, by endpoint number: per send queue the one that holds the others (a write with
// immediate whose message waits, or the oldest request waiting for room or refused for now),
// per receive queue the oldest receive waiting. Requests libfabric took and has not completed
// are the engine's to name. A hung engine adds these to its diagnosis (nic.Staller).
func (c *Context) Stalls() []nic.Stall {
	var out []nic.Stall
	for _, num := range slices.Sorted(maps.Keys(c.qps)) {
		q := c.qps[num]
		if q.closed {
			continue
		}
		if s, ok := q.sendStall(); ok {
			out = append(out, s)
		}
		if len(q.rback) > 0 {
			d := &q.rback[0]
			s := nic.Stall{Rank: c.rank, QPN: num, Recv: true, Index: d.idx, ID: q.rq.at(d.idx).id, Op: nic.OpRecv, Reason: nic.StallRefused}
			if q.rxFull() {
				s.Reason, s.Reached, s.Awaited = nic.StallProviderFull, uint64(q.rxBusy), uint64(q.rxCap)
			}
			out = append(out, s)
		}
	}
	return out
}

// sendStall describes the request that holds the send queue, if libfabric has not taken it.
func (q *QP) sendStall() (nic.Stall, bool) {
	s := nic.Stall{Rank: q.c.rank, QPN: q.num}
	at := func(idx uint64) {
		e := q.sq.at(idx)
		s.Index, s.ID, s.Op = idx, e.id, e.op
	}
	switch {
	case q.imm.state == immWrite:
		at(q.imm.idx)
		s.Reason = nic.StallWriteFirst
	case q.imm.state == immPost:
		at(q.imm.idx)
		s.Reason = nic.StallImmRefused
	case len(q.sback) > 0:
		d := &q.sback[0]
		at(d.idx)
		switch {
		case d.half:
			s.Reason = nic.StallImmRefused
		case q.txFull(d.wr.Op):
			s.Reason, s.Reached, s.Awaited = nic.StallProviderFull, uint64(q.txBusy), uint64(q.txCap)
		default:
			s.Reason = nic.StallRefused
		}
	default:
		return s, false
	}
	return s, true
}
