//go:build verbs && linux

package verbs

/*
#include "shim.h"
#cgo noescape cd_post_send
#cgo nocallback cd_post_send
#cgo noescape cd_post_recv
#cgo nocallback cd_post_recv
*/
import "C"

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/coredag/coredag/exec/nic"
)

// posted records what a queue slot holds, so that error completions (whose opcode verbs leaves
// undefined) can still be reported with the request's opcode.
type posted struct {
	id uint64
	op nic.Opcode
}

// qp is an RC queue pair.
type qp struct {
	pd        *pd
	qp        *C.struct_ibv_qp
	num       uint32
	info      nic.QPInfo
	maxInline uint32
	rnrRetry  uint8
	scratch   C.cd_scratch

	sendLog, recvLog  []posted // rings of the last posted requests, a power of two long
	sendSeq, recvSeq  uint64
	connected, closed bool
	remote            nic.QPInfo

	trig    *C.cd_trigger // C memory: cd_poll_cq posts its armed requests (trigger.go)
	armMore *C.cd_sge     // C memory: the SGE lists of armed requests, CD_MAX_SGE per ring slot
	seen    uint32        // trig.head when Fired last looked
	watched []*cq         // the CQs whose cd_cq lists trig
}

// mtuEnum converts a path MTU in bytes to IBV_MTU_*.
func mtuEnum(b int) int {
	switch {
	case b >= 4096:
		return C.IBV_MTU_4096
	case b >= 2048:
		return C.IBV_MTU_2048
	case b >= 1024:
		return C.IBV_MTU_1024
	case b >= 512:
		return C.IBV_MTU_512
	}
	return C.IBV_MTU_256
}

func (d *pd) createQP(cfg nic.QPConfig) (*qp, error) {
	c := d.ctx
	switch {
	case d.closed:
		return nil, fmt.Errorf("verbs: rank %d: CreateQP on a closed PD: %w", c.rank, nic.ErrClosed)
	case cfg.CrossChannel || cfg.ManagedSend || cfg.ManagedRecv:
		return nil, fmt.Errorf("verbs: rank %d: %s has no cross-channel (CORE-Direct) support in upstream libibverbs, so managed queues and CQE_WAIT/SEND_EN/RECV_EN are unavailable: compile the plan for target generic and run it on the poll engine: %w",
			c.rank, c.prov.name, nic.ErrNoCrossChannel)
	case cfg.SendCQ == nil || cfg.RecvCQ == nil:
		return nil, fmt.Errorf("verbs: rank %d: CreateQP needs both a send CQ and a receive CQ: %w", c.rank, nic.ErrBadRequest)
	case cfg.SendDepth < 1 || cfg.RecvDepth < 1 || cfg.SendDepth > c.prov.caps.MaxQPDepth || cfg.RecvDepth > c.prov.caps.MaxQPDepth:
		return nil, fmt.Errorf("verbs: rank %d: QP depths send %d, recv %d must be in 1..%d on %s: %w",
			c.rank, cfg.SendDepth, cfg.RecvDepth, c.prov.caps.MaxQPDepth, c.prov.name, nic.ErrBadRequest)
	case cfg.MaxSGE > c.prov.caps.MaxSGE:
		return nil, fmt.Errorf("verbs: rank %d: QP for %d SGEs per request, %s allows %d (max_sge): %w",
			c.rank, cfg.MaxSGE, c.prov.name, c.prov.caps.MaxSGE, nic.ErrProviderLimited)
	case cfg.MaxInline < 0 || cfg.MaxInline > c.prov.caps.MaxInline:
		return nil, fmt.Errorf("verbs: rank %d: inline size %d exceeds %d, the most %s allows: %w",
			c.rank, cfg.MaxInline, c.prov.caps.MaxInline, c.prov.name, nic.ErrInlineTooLarge)
	}
	scq, ok1 := cfg.SendCQ.(*cq)
	rcq, ok2 := cfg.RecvCQ.(*cq)
	if !ok1 || !ok2 || scq.ctx != c || rcq.ctx != c {
		return nil, fmt.Errorf("verbs: rank %d: CreateQP with a CQ of another context or provider: %w", c.rank, nic.ErrWrongContext)
	}
	var got C.uint32_t
	h := C.cd_create_qp(d.pd, scq.cq, rcq.cq, C.uint32_t(cfg.SendDepth), C.uint32_t(cfg.RecvDepth), C.uint32_t(cfg.MaxInline), C.uint32_t(max(cfg.MaxSGE, 1)), &got)
	if h == nil {
		return nil, fmt.Errorf("verbs: rank %d: ibv_create_qp (send depth %d, recv depth %d, inline %d) failed on %s",
			c.rank, cfg.SendDepth, cfg.RecvDepth, cfg.MaxInline, c.prov.name)
	}
	var psn [4]byte
	rand.Read(psn[:])
	q := &qp{
		pd:        d,
		qp:        h,
		num:       uint32(h.qp_num),
		maxInline: uint32(got),
		scratch:   C.cd_scratch{addr: C.uint64_t(d.scratch.Addr()), lkey: C.uint32_t(d.scratch.LKey())},
		sendLog:   make([]posted, 1<<bits.Len(uint(cfg.SendDepth))),
		recvLog:   make([]posted, 1<<bits.Len(uint(cfg.RecvDepth))),
	}
	// rnr_retry 7 means "retry forever" in verbs; 1..6 are counts.
	q.rnrRetry = 7
	if cfg.RNRRetry > 0 {
		q.rnrRetry = uint8(min(cfg.RNRRetry, 6))
	}
	q.info = nic.QPInfo{
		Rank: c.rank,
		QPN:  q.num,
		LID:  c.prov.lid,
		GID:  c.prov.gid,
		PSN:  binary.LittleEndian.Uint32(psn[:]) & 0xffffff,
		MTU:  c.prov.mtu,
	}
	if err := q.newTrigger(); err != nil {
		C.ibv_destroy_qp(h)
		return nil, fmt.Errorf("verbs: rank %d: %w", c.rank, err)
	}
	c.qps = append(c.qps, q)
	return q, nil
}

func (q *qp) Num() uint32      { return q.num }
func (q *qp) Info() nic.QPInfo { return q.info }
func (q *qp) rank() int        { return q.pd.ctx.rank }
func (q *qp) prov() *Provider  { return q.pd.ctx.prov }
func (q *qp) String() string   { return fmt.Sprintf("rank %d qp %d", q.rank(), q.num) }

// Connect moves the QP through INIT, RTR and RTS towards remote. All remote access is enabled at
// the QP level; each memory region's own access flags decide what peers may do.
func (q *qp) Connect(remote nic.QPInfo) error {
	if q.closed {
		return fmt.Errorf("verbs: %v: Connect on a closed QP: %w", q, nic.ErrClosed)
	}
	if q.connected {
		return fmt.Errorf("verbs: %v is already connected to %v: a QP connects once", q, q.remote)
	}
	p := q.prov()
	if p.ethernet && remote.GID == [16]byte{} {
		return fmt.Errorf("verbs: %v: remote end %v has no GID, but %s is a RoCE port: exchange the peer's Info() unchanged", q, remote, p.name)
	}
	if !p.ethernet && remote.LID == 0 {
		return fmt.Errorf("verbs: %v: remote end %v has LID 0 on an InfiniBand port: is the subnet manager running (sminfo)?", q, remote)
	}
	mtu := p.mtu
	if remote.MTU > 0 && remote.MTU < mtu {
		mtu = remote.MTU
	}
	access := C.int(C.IBV_ACCESS_LOCAL_WRITE | C.IBV_ACCESS_REMOTE_WRITE | C.IBV_ACCESS_REMOTE_READ | C.IBV_ACCESS_REMOTE_ATOMIC)
	if rc := C.cd_qp_to_init(q.qp, C.uint8_t(p.port), access); rc != 0 {
		return fmt.Errorf("verbs: %v: RESET->INIT on %s port %d failed: %v", q, p.name, p.port, syscall.Errno(rc))
	}
	global := C.int(0)
	if p.ethernet {
		global = 1
	}
	rc := C.cd_qp_to_rtr(q.qp, C.uint8_t(p.port), C.uint32_t(remote.QPN), C.uint32_t(remote.PSN), C.uint16_t(remote.LID),
		(*C.uint8_t)(unsafe.Pointer(&remote.GID[0])), global, C.uint8_t(p.gidIndex), C.int(mtuEnum(mtu)), C.uint8_t(p.rdAtomic))
	if rc != 0 {
		return fmt.Errorf("verbs: %v: INIT->RTR towards %v failed: %v (wrong GID index? show_gids lists the port's entries; Options.GIDIndex, coredag run's --gid-index, picks one)", q, remote, syscall.Errno(rc))
	}
	if rc := C.cd_qp_to_rts(q.qp, C.uint32_t(q.info.PSN), 7, C.uint8_t(q.rnrRetry), C.uint8_t(p.rdAtomic)); rc != 0 {
		return fmt.Errorf("verbs: %v: RTR->RTS failed: %v", q, syscall.Errno(rc))
	}
	q.connected, q.remote = true, remote
	return nil
}

// wrLayoutOK is set at init when nic.SendWR, RecvWR and WC have the C structs' layouts; the
// zero-copy post and poll paths depend on it.
var wrLayoutOK = layoutMatches()

// PostSend posts wr in batches of up to 64 per ibv_post_send.
func (q *qp) PostSend(wr []nic.SendWR) (int, error) {
	if len(wr) == 0 {
		return 0, nil
	}
	if err := q.usable(); err != nil {
		return 0, err
	}
	// The shim reads each request's More list: its array stays pinned during the call.
	var pin runtime.Pinner
	defer pin.Unpin()
	for i := range wr {
		if len(wr[i].More) > 0 {
			pin.Pin(&wr[i].More[0])
		}
	}
	var n C.int
	rc := C.cd_post_send(q.qp, (*C.cd_send_wr)(unsafe.Pointer(&wr[0])), C.int(len(wr)), C.uint32_t(q.maxInline), q.scratch, &n)
	done := int(n)
	q.logSends(wr[:done])
	if rc == 0 {
		return done, nil
	}
	return done, q.postError("PostSend", rc, done, &wr[done])
}

// logSends records posted sends for error completions and counts them.
func (q *qp) logSends(wr []nic.SendWR) {
	for i := range wr {
		q.logSend(&wr[i])
	}
}

func (q *qp) logSend(wr *nic.SendWR) {
	q.sendLog[q.sendSeq&uint64(len(q.sendLog)-1)] = posted{wr.ID, wr.Op}
	q.sendSeq++
	q.pd.ctx.stats.WQEs++
}

// PostRecv posts wr in batches of up to 64 per ibv_post_recv.
func (q *qp) PostRecv(wr []nic.RecvWR) (int, error) {
	if len(wr) == 0 {
		return 0, nil
	}
	if err := q.usable(); err != nil {
		return 0, err
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	for i := range wr {
		if len(wr[i].More) > 0 {
			pin.Pin(&wr[i].More[0])
		}
	}
	var n C.int
	rc := C.cd_post_recv(q.qp, (*C.cd_recv_wr)(unsafe.Pointer(&wr[0])), C.int(len(wr)), &n)
	done := int(n)
	mask := uint64(len(q.recvLog) - 1)
	for i := 0; i < done; i++ {
		q.recvLog[(q.recvSeq+uint64(i))&mask] = posted{wr[i].ID, nic.OpRecv}
	}
	q.recvSeq += uint64(done)
	q.pd.ctx.stats.WQEs += uint64(done)
	if rc == 0 {
		return done, nil
	}
	return done, q.postError("PostRecv", rc, done, nil)
}

// usable is checked before posting. Verbs accepts receives in INIT and RTR, but coredag always
// connects before posting, so an unconnected QP is a caller bug worth naming.
func (q *qp) usable() error {
	switch {
	case !wrLayoutOK:
		return fmt.Errorf("verbs: %v: nic.SendWR/RecvWR/WC no longer match the C layout in exec/verbs/shim.h: update the shim: %w", q, nic.ErrProviderLimited)
	case q.closed:
		return fmt.Errorf("verbs: %v: post on a closed QP: %w", q, nic.ErrClosed)
	case !q.connected:
		return fmt.Errorf("verbs: %v: post before Connect: %w", q, nic.ErrNotConnected)
	}
	return nil
}

// postError explains why request number i of a batch was not posted.
func (q *qp) postError(call string, rc C.int, i int, wr *nic.SendWR) error {
	what := fmt.Sprintf("request %d", i)
	if wr != nil {
		what = fmt.Sprintf("request %d (%v, wr_id %d)", i, wr.Op, wr.ID)
	}
	switch rc {
	case C.CD_ERR_BAD_OPCODE:
		if wr != nil && wr.Op.IsCrossChannel() {
			return fmt.Errorf("verbs: %v: %s %s: upstream libibverbs has no cross-channel work requests (compile for target generic, run on the poll engine): %w", q, call, what, nic.ErrNoCrossChannel)
		}
		return fmt.Errorf("verbs: %v: %s %s: opcode cannot be posted to a send queue: %w", q, call, what, nic.ErrBadRequest)
	case C.CD_ERR_INLINE:
		return fmt.Errorf("verbs: %v: %s %s: %d-byte inline payload exceeds the QP's limit of %d bytes (raise QPConfig.MaxInline, at most %d on %s): %w",
			q, call, what, wr.Local.Len, q.maxInline, q.prov().caps.MaxInline, q.prov().name, nic.ErrInlineTooLarge)
	case C.CD_ERR_SGE:
		return fmt.Errorf("verbs: %v: %s %s: a scatter/gather list longer than the shim's %d SGEs, or one on an atomic: %w", q, call, what, C.CD_MAX_SGE, nic.ErrBadRequest)
	case C.CD_ERR_ATOMIC_LEN:
		return fmt.Errorf("verbs: %v: %s %s: an atomic's local buffer must be 8 bytes (or 0 to discard the old value), not %d: %w", q, call, what, wr.Local.Len, nic.ErrBadRequest)
	case C.int(syscall.ENOMEM):
		side, out := "send", q.sendSeq
		if wr == nil {
			side, out = "receive", q.recvSeq
		}
		return fmt.Errorf("verbs: %v: %s %s: the %s queue is full (%d posted so far; slots free only as completions are polled, and a send slot only at a signalled completion): %w",
			q, call, what, side, out, nic.ErrQueueFull)
	}
	err := syscall.Errno(rc)
	if errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("verbs: %v: %s %s: the driver rejected it (%v): %w", q, call, what, err, nic.ErrBadRequest)
	}
	return fmt.Errorf("verbs: %v: %s %s: %v", q, call, what, err)
}

// lookup finds the opcode a failed completion's request was posted with: a send if its ID is
// among the recent sends, else a receive.
func (q *qp) lookup(id uint64) nic.Opcode {
	n := min(q.sendSeq, uint64(len(q.sendLog)))
	mask := uint64(len(q.sendLog) - 1)
	for i := uint64(1); i <= n; i++ {
		if e := q.sendLog[(q.sendSeq-i)&mask]; e.id == id {
			return e.op
		}
	}
	return nic.OpRecv
}

// Close destroys the QP; outstanding requests are dropped without completions.
func (q *qp) Close() error {
	if q.closed {
		return nil
	}
	q.closed = true
	q.freeTrigger()
	if rc := C.ibv_destroy_qp(q.qp); rc != 0 {
		return fmt.Errorf("verbs: %v: ibv_destroy_qp: %v", q, syscall.Errno(rc))
	}
	return nil
}
