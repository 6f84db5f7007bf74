package nic

import (
	"errors"
	"fmt"
	"unsafe"
)

// Provider is a kind of NIC: the software NIC (all ranks in one process) or a verbs device (one or
// more ranks per process).
type Provider interface {
	// Name is a short identifier such as "softnic" or "verbs".
	Name() string
	// Caps reports what the devices of this provider can do.
	Caps() Caps
	// Open opens the device context of one rank. An in-process provider may open every rank of a
	// plan; a one-rank-per-process provider accepts only its own rank and says so in the error.
	Open(rank int) (Context, error)
	// Close releases the provider (a fabric, a device list); every context opened from it must
	// have been closed. Close is idempotent.
	Close() error
}

// Caps is the capability profile of a device.
type Caps struct {
	// CrossChannel: the device runs CQE_WAIT, SEND_EN and RECV_EN work requests and supports managed
	// queues (CORE-Direct). Without it those opcodes are rejected at post time.
	CrossChannel bool
	// MaxInline is the largest payload, in bytes, a SEND may carry inline (FlagInline).
	MaxInline int
	// MaxQPDepth is the largest send or receive queue depth a QP may be created with.
	MaxQPDepth int
	// MaxCQDepth is the largest depth a CQ may be created with.
	MaxCQDepth int
	// MaxSGE is the most scatter/gather elements (Local and More) one send or receive request
	// may carry (max_send_sge and max_recv_sge, the smaller of the two).
	MaxSGE int
	// Atomics: the device supports 8-byte fetch-add and compare-swap.
	Atomics bool
	// InProcess: every rank's Context lives in this process and Progress-style software completion
	// applies (see Progresser); false for devices driven by hardware.
	InProcess bool
	// Triggers: QPs post armed requests from inside CQ.Poll (TriggerQP), and the polling engine
	// arms them.
	Triggers bool
	// Counters: contexts implement TriggerContext (completion counters and triggered work).
	Counters bool
	// Order is the message ordering the device grants between the ops of one queue, as
	// libfabric's msg_order bits (FI_ORDER_*, the values of ir.Order), with OrderKnown set; the
	// zero value says the device does not say, and then no plan is refused for its ordering.
	Order uint64
}

// OrderKnown marks Caps.Order as the device's ordering (a bit above every FI_ORDER_* bit):
// Caps{Order: OrderKnown | msg_order}. OrderKnown alone grants no ordering at all.
const OrderKnown = 1 << 63

// Context is one rank's open device. Objects created from a Context belong to it and must only be
// used with objects of the same Context (a QP's CQs, a WR's local key, a WAIT's CQ).
type Context interface {
	// Rank is the rank this context was opened for.
	Rank() int
	// AllocPD allocates a protection domain.
	AllocPD() (PD, error)
	// CreateCQ creates a completion queue holding up to depth unpolled completions. A CQ that
	// overflows is broken: Poll reports an error naming it.
	CreateCQ(depth int) (CQ, error)
	// Close releases the context and everything created from it.
	Close() error
}

// Access is the set of access rights of a memory region.
type Access uint32

// Access flags. Local read is always allowed.
const (
	// AccessLocalWrite lets local work requests write the region (RECV targets, READ and atomic results).
	AccessLocalWrite Access = 1 << iota
	// AccessRemoteWrite lets peers RDMA WRITE into the region.
	AccessRemoteWrite
	// AccessRemoteRead lets peers RDMA READ from the region.
	AccessRemoteRead
	// AccessRemoteAtomic lets peers run fetch-add and compare-swap on the region.
	AccessRemoteAtomic
)

// String lists the flags, e.g. "local_write|remote_write".
func (a Access) String() string {
	if a == 0 {
		return "local_read"
	}
	s := ""
	for i, n := range [...]string{"local_write", "remote_write", "remote_read", "remote_atomic"} {
		if a&(1<<i) != 0 {
			if s != "" {
				s += "|"
			}
			s += n
		}
	}
	return s
}

// PD is a protection domain: a QP only touches memory regions of its own PD, locally and remotely.
type PD interface {
	// AllocMR allocates size bytes of registered memory with the given access rights. Memory comes
	// from the provider (a verbs provider allocates it outside the Go heap), cache-line aligned and
	// zeroed. Registration is slow: do it once per plan.
	AllocMR(size int, access Access) (MR, error)
	// RegisterMR registers size bytes of the caller's memory at addr with the given access
	// rights. The memory stays the caller's: it must stay valid, and must not move (pin Go
	// memory with runtime.Pinner when the NIC is not the software one), until the region is
	// closed; MR.Close deregisters it without freeing it.
	RegisterMR(addr unsafe.Pointer, size int, access Access) (MR, error)
	// CreateQP creates an RC queue pair in this PD, not yet connected.
	CreateQP(cfg QPConfig) (QP, error)
	// Close releases the PD; its MRs and QPs must have been closed.
	Close() error
}

// MR is a registered memory region.
type MR interface {
	// Bytes is the region's memory, readable and writable by the host. Do not touch bytes that
	// in-flight work requests access (the DSL's race rules say when).
	Bytes() []byte
	// Addr is the address of Bytes()[0] in work requests: a local SGE or a peer's remote address is
	// Addr() + offset.
	Addr() uint64
	// LKey is the key local work requests name the region by.
	LKey() uint32
	// RKey is the key peers name the region by in one-sided work requests.
	RKey() uint32
	// Access is the region's access rights.
	Access() Access
	// Remote is the descriptor to hand to peers.
	Remote() RemoteMR
	// Close deregisters the region; its memory must no longer be used.
	Close() error
}

// RemoteMR describes a memory region to a peer: everything needed to address it in RDMA WRITE,
// READ and atomic work requests. It is a plain value, safe to encode and send over the network.
type RemoteMR struct {
	Addr uint64 `json:"addr"`
	RKey uint32 `json:"rkey"`
	Len  uint64 `json:"len"`
}

// CQ is a completion queue.
type CQ interface {
	// Num identifies the CQ within its Context (the CQ number); CQE_WAIT work requests name it.
	Num() uint32
	// Depth is the number of completions the CQ holds before it overflows.
	Depth() int
	// Poll moves up to len(wc) completions into wc, oldest first, and returns how many. It never
	// blocks; a software provider may advance its fabric first (see Progresser). An error means the
	// CQ is broken (overflowed), not that a work request failed: that is WC.Status.
	Poll(wc []WC) (int, error)
	// Close destroys the CQ; its QPs must have been closed.
	Close() error
}

// QPConfig is how a queue pair is created.
type QPConfig struct {
	// SendCQ and RecvCQ receive the completions of the send and receive queues. Give each work queue
	// its own CQ when counting completions (CQE_WAIT) must name exactly one work request.
	SendCQ, RecvCQ CQ
	// SendDepth and RecvDepth bound the outstanding work requests of each queue. A send slot is
	// reclaimed only when a signalled completion at or after it is produced (as on hardware), so a
	// queue of unsignalled requests fills up.
	SendDepth, RecvDepth int
	// MaxInline is the largest inline payload this QP will be asked to send (at most Caps.MaxInline).
	MaxInline int
	// MaxSGE is the longest scatter/gather list (Local and More) a request on this QP will carry
	// (at most Caps.MaxSGE; 0 means 1).
	MaxSGE int
	// CrossChannel lets this QP post CQE_WAIT, SEND_EN and RECV_EN (the management queue of the
	// managed style, or a data queue with inline WAITs). Requires Caps.CrossChannel.
	CrossChannel bool
	// ManagedSend: the send queue executes posted work requests only up to the index a SEND_EN
	// allows. ManagedRecv: posted receives become available to incoming messages only up to the
	// index a RECV_EN allows. Both require Caps.CrossChannel.
	ManagedSend, ManagedRecv bool
	// RNRRetry bounds how often a SEND or WRITE_IMM that finds no receive posted at the peer is
	// retried before it completes with StatusRNRRetryExceeded. 0 means retry forever (rnr_retry 7).
	RNRRetry int
}

// QPInfo describes one end of an RC connection. It is exchanged between the two ends before
// Connect; a plain comparable value, safe to encode and send over the network. A software provider
// uses Rank and QPN; a verbs provider uses QPN, LID, GID and PSN.
type QPInfo struct {
	Rank int      `json:"rank"`
	QPN  uint32   `json:"qpn"`
	LID  uint16   `json:"lid,omitempty"`
	GID  [16]byte `json:"gid"`
	PSN  uint32   `json:"psn"`
	MTU  int      `json:"mtu,omitempty"`
}

// String prints the connection end as "rank R qpn N".
func (i QPInfo) String() string { return fmt.Sprintf("rank %d qpn %d", i.Rank, i.QPN) }

// QP is an RC queue pair: a send queue and a receive queue, each FIFO.
type QP interface {
	// Num identifies the QP within its Context (the QP number); SEND_EN and RECV_EN name it.
	Num() uint32
	// Info is this end's connection description, to hand to the peer.
	Info() QPInfo
	// Connect brings the QP to RTS, connected to the remote end described by remote. A queue that
	// only runs local entries (NOP, CQE_WAIT, SEND_EN, RECV_EN: a management or host-signal queue)
	// is connected to itself.
	Connect(remote QPInfo) error
	// PostSend posts work requests to the send queue in one batch (one doorbell). It returns how many
	// were posted; on error the first unposted one is wr[n] and the error says why (queue full, bad
	// opcode for this QP or device, inline payload too large, unknown CQ or QP, ...). Errors found
	// only when a request executes (keys, bounds, permissions) are completions with an error status.
	PostSend(wr []SendWR) (int, error)
	// PostRecv posts receive requests in one batch, with the same return convention as PostSend.
	PostRecv(wr []RecvWR) (int, error)
	// Close destroys the QP.
	Close() error
}

// Opcode is the operation of a work request or of a work completion.
type Opcode uint8

// Send-queue opcodes, then the receive-side opcodes that appear only in completions.
const (
	OpSend         Opcode = iota // two-sided send: consumes the peer's next receive
	OpRDMAWrite                  // one-sided write to RemoteAddr/RKey
	OpRDMAWriteImm               // write with immediate: also consumes the peer's next receive
	OpRDMARead                   // one-sided read from RemoteAddr/RKey into Local
	OpAtomicFAdd                 // 8-byte fetch-add at RemoteAddr; the old value lands in Local
	OpAtomicCAS                  // 8-byte compare-swap at RemoteAddr; the old value lands in Local
	OpNop                        // no data; completes in queue order (host signals, fences)
	OpCQEWait                    // cross-channel: stop this queue until CQ WaitCQ produced Count completions
	OpSendEnable                 // cross-channel: let QP TargetQP's managed send queue run up to index Count
	OpRecvEnable                 // cross-channel: make QP TargetQP's managed receives available up to index Count
	OpRecv                       // completion of a receive consumed by a SEND
	OpRecvImm                    // completion of a receive consumed by a WRITE_IMM (WC.Imm is valid)
	numOpcodes
)

var opcodeNames = [numOpcodes]string{"SEND", "RDMA_WRITE", "RDMA_WRITE_IMM", "RDMA_READ",
	"ATOMIC_FADD", "ATOMIC_CAS", "NOP", "CQE_WAIT", "SEND_EN", "RECV_EN", "RECV", "RECV_RDMA_IMM"}

// String is the verbs-style name, e.g. "RDMA_WRITE_IMM".
func (o Opcode) String() string {
	if o < numOpcodes {
		return opcodeNames[o]
	}
	return fmt.Sprintf("Opcode(%d)", uint8(o))
}

// IsCrossChannel reports whether o is CQE_WAIT, SEND_EN or RECV_EN.
func (o Opcode) IsCrossChannel() bool {
	return o == OpCQEWait || o == OpSendEnable || o == OpRecvEnable
}

// SendFlags modify a send-queue work request.
type SendFlags uint8

// Send flags.
const (
	// FlagSignaled makes the request produce a completion. Receives always do; failed requests always do.
	FlagSignaled SendFlags = 1 << iota
	// FlagFence starts the request only after earlier READ and atomic requests of its queue completed.
	FlagFence
	// FlagInline copies the payload of a SEND or RDMA write into the request at post time
	// (Local.LKey is ignored and the buffer may be reused as soon as PostSend returns). At most
	// QPConfig.MaxInline bytes.
	FlagInline
	// FlagLocalComplete lets a SEND complete once its payload has left the local buffer, without
	// waiting for the peer to have received it (libfabric's FI_INJECT_COMPLETE). A provider may
	// ignore it. The engine sets it only where no rank can tell the difference.
	FlagLocalComplete
)

// SGE is a local scatter/gather element: Len bytes at Addr of the region whose LKey is given.
type SGE struct {
	Addr uint64
	Len  uint32
	LKey uint32
}

// SGLen is the total length of a scatter/gather list: first, then more.
func SGLen(first SGE, more []SGE) uint64 {
	n := uint64(first.Len)
	for _, e := range more {
		n += uint64(e.Len)
	}
	return n
}

// SendWR is a send-queue work request. Which fields matter depends on Op:
//   - SEND: Local (payload; Len 0 for an empty message), Flags may include FlagInline.
//     SEND, RDMA_WRITE(_IMM) and RDMA_READ take a scatter/gather list: Local, then More (the
//     message is their bytes in order; a READ scatters into them); at most Caps.MaxSGE elements.
//   - RDMA_WRITE, RDMA_WRITE_IMM: Local -> RemoteAddr/RKey; Imm for WRITE_IMM.
//   - RDMA_READ: RemoteAddr/RKey -> Local.
//   - ATOMIC_FADD: adds CompareAdd to the u64 at RemoteAddr; ATOMIC_CAS: if it equals CompareAdd,
//     stores Swap. RemoteAddr must be 8-byte aligned; the old value is written to Local (Len 8), or
//     discarded if Local.Len is 0.
//   - CQE_WAIT: WaitCQ (a CQ of the same Context) and Count, an absolute cumulative completion count,
//     compared cyclically modulo 2^24.
//   - SEND_EN, RECV_EN: TargetQP (a managed QP of the same Context) and Count, the cumulative work
//     request index the target may run up to (exclusive), compared cyclically modulo 2^16.
type SendWR struct {
	ID         uint64
	Op         Opcode
	Flags      SendFlags
	Local      SGE
	RemoteAddr uint64
	RKey       uint32
	Imm        uint32
	CompareAdd uint64
	Swap       uint64
	WaitCQ     uint32
	TargetQP   uint32
	Count      uint32
	More       []SGE // further SGEs of the list after Local (SEND, RDMA WRITE and READ); copied at post
}

// RecvWR is a receive work request: an incoming SEND lands in Local (Len may be 0 for empty
// messages and WRITE_IMM notifications).
type RecvWR struct {
	ID    uint64
	Local SGE
	More  []SGE // further SGEs of the scatter list after Local, filled in order; copied at post
}

// Status is the outcome of a work request.
type Status uint8

// Completion statuses (the subset of ibv_wc_status that coredag distinguishes).
const (
	StatusSuccess              Status = iota
	StatusLocalLengthError            // a message is longer than the receive buffer
	StatusLocalProtectionError        // bad lkey, local address out of the region, or no local write access
	StatusRemoteAccessError           // bad rkey, remote address out of the region, or no remote permission
	StatusRemoteInvalidRequest        // the peer rejected the request (misaligned atomic, receive too short)
	StatusRNRRetryExceeded            // no receive was posted at the peer within the RNR retry limit
	StatusFlushError                  // the QP was in the error state; the request did not run
	StatusGeneralError                // anything else
	numStatuses
)

var statusNames = [numStatuses]string{"success", "local length error", "local protection error",
	"remote access error", "remote invalid request", "RNR retry exceeded", "flush error", "general error"}

// String is a human-readable name, e.g. "remote access error".
func (s Status) String() string {
	if s < numStatuses {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// WC is a work completion.
type WC struct {
	ID      uint64 // the work request's ID
	Status  Status
	Opcode  Opcode // for receives OpRecv or OpRecvImm; for flushed requests the request's opcode
	QPN     uint32 // the QP the request was posted to
	ByteLen uint32 // bytes received (receives), read or fetched
	Imm     uint32 // immediate data (OpRecvImm)
	// Time is when the driver found the completion, on this package's clock (Now), if the CQ stamps
	// completions (StampCQ) and was asked to; else 0.
	Time int64
}

// Errors returned by PostSend and PostRecv, wrapped with the details; test with errors.Is.
var (
	ErrQueueFull       = errors.New("work queue full")
	ErrNotConnected    = errors.New("QP not connected")
	ErrBadRequest      = errors.New("invalid work request")
	ErrNoCrossChannel  = errors.New("cross-channel not supported")
	ErrInlineTooLarge  = errors.New("inline payload too large")
	ErrWrongContext    = errors.New("object belongs to another context")
	ErrClosed          = errors.New("object closed")
	ErrProviderLimited = errors.New("provider limitation")
)

// Progresser is implemented by software providers, whose fabric moves only when asked. Engines
// call Progress when they have nothing else to do; a hardware provider does not implement it.
type Progresser interface {
	// Progress runs the fabric until nothing more can run now, or for a bounded number of steps,
	// and returns how many steps it made. 0 means nothing is runnable: unless the host posts or
	// polls something, the fabric is stalled, and Stalls says why.
	Progress() int
	Staller
}

// Staller is implemented by providers (a software NIC: its whole fabric) and contexts (a
// hardware provider's driver: the requests it holds) that can say what cannot run. Engines add
// it to a hang's diagnosis.
type Staller interface {
	// Stalls describes every queue with posted work that cannot run, in a stable order.
	Stalls() []Stall
}

// CQNotifier is implemented by software providers that know which CQs have completions to poll.
// After Progress an engine then polls those CQs instead of every CQ of every rank, so its cost
// follows the completions, not the number of CQs.
type CQNotifier interface {
	Progresser
	// ReadyCQs appends to buf, and returns, the open CQs that produced completions since they
	// were last returned, each once, in the order of their first such completion. A CQ returned
	// is listed again only after a new completion: poll it until it is empty.
	ReadyCQs(buf []CQ) []CQ
}

// TriggerQP is implemented by QPs whose driver can post send work requests by itself once CQs
// have returned enough completions: a host-side counterpart of CORE-Direct's CQE_WAIT for NICs
// without it, run inside CQ.Poll. Armed requests form a FIFO: each is posted once its CQ has
// returned its count of completions and every request armed before it on the QP is posted. The
// polling engine arms the coming requests of a send queue whose last missing predecessor is a
// completion, so on a dependency chain the next transfer starts in the very Poll call that finds
// the completion, not after a trip through the engine.
type TriggerQP interface {
	QP
	// ArmSend appends a copy of wr to the QP's armed requests, to be posted when cq's Poll has
	// returned after more completions (0: as soon as the requests armed before it are posted).
	// An error completion on cq disarms every armed request of the QP. cq must belong to the QP's
	// context. When MaxArmed requests are armed, or on any other error, nothing is armed.
	ArmSend(cq CQ, after int, wr *SendWR) error
	// Fired reports how many requests are still armed, how many were posted since the last call,
	// and the error that stopped posting (PostSend's convention; the rest were disarmed).
	Fired() (armed, posted int, err error)
	// Disarm drops every armed request.
	Disarm()
}

// MaxArmed bounds the requests armed on one QP.
const MaxArmed = 64

// HoldCQ is implemented by CQs whose Poll can keep polling, and posting triggers, past
// completions the caller does not need to see at once, instead of returning each as it comes.
type HoldCQ interface {
	CQ
	// Hold declares that the next n completions of the CQ need nothing from the caller but the
	// triggers already armed: a Poll that finds only those may keep polling for more (a bounded
	// time) before it returns them all. Hold(0) withdraws it.
	Hold(n int)
}

// SpinCQ is implemented by CQs whose driver can wait for a completion in a tight loop of its own,
// sparing the engine a return per empty poll. The polling engine uses it when one CQ is all it
// waits for.
type SpinCQ interface {
	CQ
	// PollSpin is Poll, except that it polls up to spins times before it returns no completion.
	PollSpin(wc []WC, spins int) (int, error)
}

// StampCQ is implemented by CQs whose driver can stamp each completion with the time its poll
// found it (WC.Time): a timeline then shows when the NIC completed a request, not when the engine
// got round to it (a held completion reaches the engine up to a batch later).
type StampCQ interface {
	CQ
	// Stamp turns stamping on or off.
	Stamp(on bool)
}

// StallReason is why a queue cannot run its head work request.
type StallReason uint8

// Stall reasons.
const (
	StallWaitCQ      StallReason = iota // CQE_WAIT: the CQ has not produced enough completions
	StallNotEnabled                     // managed queue: the head index is not enabled yet
	StallNoRecv                         // SEND or WRITE_IMM: no receive available at the peer (RNR)
	StallFence                          // fenced request: earlier READ or atomic not complete
	StallCQFull                         // the completion queue is full of unpolled completions
	StallRecvPending                    // receives posted, no message arrived (reported for context)
	// A driver's own: requests it holds because the library under it has not taken them.
	StallProviderFull // the library's queue is full: Reached of its Awaited entries are busy
	StallRefused      // the library refuses it for now ("try again") at every retry
	StallWriteFirst   // WRITE_IMM without send-after-write ordering: its message waits for its write to complete
	StallImmRefused   // WRITE_IMM: its write went, the library refuses its message for now
)

var stallNames = [...]string{"waiting for completions", "not enabled", "no matching receive posted at the peer",
	"fenced behind an incomplete READ or atomic", "completion queue full", "waiting for a message",
	"waiting for room in the provider's queue", "refused by the provider for now (try again), at every retry",
	"its message waits for its write to complete (the provider does not order a send after a write)",
	"its write went; the provider refuses its message for now (try again), at every retry"}

// String describes the reason in words.
func (r StallReason) String() string {
	if int(r) < len(stallNames) {
		return stallNames[r]
	}
	return fmt.Sprintf("StallReason(%d)", uint8(r))
}

// Stall describes one stuck queue and its head work request.
type Stall struct {
	Rank   int
	QPN    uint32
	Recv   bool        // the receive queue (else the send queue)
	Index  uint64      // cumulative index of the head request in its queue
	ID     uint64      // the head request's ID
	Op     Opcode      // the head request's opcode
	Reason StallReason // why it cannot run
	// For StallWaitCQ: the CQ, the completions it produced so far and the count awaited.
	// For StallNotEnabled: Reached is the enabled index, Awaited the index an ENABLE must reach for
	// the head to run (both modulo 2^16).
	CQ      uint32
	Reached uint64
	Awaited uint64
	// Peer names the remote end for StallNoRecv.
	Peer QPInfo
}

// String is a one-line diagnosis.
func (s Stall) String() string {
	side := "send"
	if s.Recv {
		side = "recv"
	}
	head := fmt.Sprintf("rank %d qp %d %s queue: head #%d %s (wr_id %d)", s.Rank, s.QPN, side, s.Index, s.Op, s.ID)
	switch s.Reason {
	case StallWaitCQ:
		return fmt.Sprintf("%s waits for cq %d to reach %d completions, it has %d", head, s.CQ, s.Awaited, s.Reached)
	case StallNotEnabled:
		return fmt.Sprintf("%s is not enabled: enabled up to index %d, needs %d", head, s.Reached, s.Awaited)
	case StallNoRecv:
		return fmt.Sprintf("%s: no matching receive posted at %s (receiver not ready)", head, s.Peer)
	case StallProviderFull:
		return fmt.Sprintf("%s waits for room in the provider's queue: %d of its %d entries hold requests not completed", head, s.Reached, s.Awaited)
	}
	return fmt.Sprintf("%s: %s", head, s.Reason)
}

// NICStats are a provider's counters since its creation.
type NICStats struct {
	WQEs       uint64 // work requests executed (send and receive queues, including WAIT and ENABLE)
	CQEs       uint64 // completions produced
	Waits      uint64 // CQE_WAIT requests satisfied
	Enables    uint64 // SEND_EN and RECV_EN requests executed
	RNRRetries uint64 // receiver-not-ready retries
	Bytes      uint64 // payload bytes moved
}

// FaultExplainer is implemented by providers that can say, in words, why a work request failed
// (which key, bound or permission), beyond its completion status.
type FaultExplainer interface {
	// Explain returns why request id on rank's QP qpn failed, or false if it did not fail.
	Explain(rank int, qpn uint32, id uint64) (string, bool)
}

// StatsReporter is implemented by providers that count what their NIC did.
type StatsReporter interface {
	NICStats() NICStats
}

// HostMemory is implemented by providers whose registered memory is allocated in this process
// (the software NIC): MRBytes is what AllocMR(size) allocates. For other providers a run counts
// size bytes per region, the host memory the NIC registers.
type HostMemory interface {
	MRBytes(size int64) int64
}
