package nic

// Counter is a completion counter, after libfabric's fi_cntr: a 64-bit value that NIC events
// raise (completions of the CQs it is bound to) and the host may add to or set. Triggered work
// waits for a counter to reach a threshold.
type Counter interface {
	// Value reads the counter.
	Value() uint64
	// Add adds v to the counter (fi_cntr_add); triggered work it makes due fires.
	Add(v uint64) error
	// Set sets the counter to v (fi_cntr_set); triggered work it makes due fires.
	Set(v uint64) error
	// Close releases the counter; cancel the triggered work waiting on it first.
	Close() error
}

// TrigKind is what triggered work does when it fires.
type TrigKind uint8

// Triggered work kinds.
const (
	TrigSend TrigKind = iota // post Send to QP's send queue
	TrigRecv                 // post Recv to QP's receive queue
	TrigAdd                  // add Value to counter Target
	TrigSet                  // set counter Target to Value
)

// TriggeredWR is deferred work: a work request, or counter work (libfabric's deferred work
// queue entries FI_OP_CNTR_ADD and FI_OP_CNTR_SET).
type TriggeredWR struct {
	Kind   TrigKind
	QP     QP
	Send   SendWR
	Recv   RecvWR
	Target Counter
	Value  uint64
}

// TriggerContext is implemented by contexts whose NIC runs triggered operations (libfabric
// FI_TRIGGER with fi_cntr thresholds; Portals 4 triggered operations; Slingshot cxi).
type TriggerContext interface {
	Context
	// CreateCounter creates a counter at 0.
	CreateCounter() (Counter, error)
	// BindCounter makes every completion cq produces (success or error) raise c by one. With one
	// CQ per work queue this is libfabric's binding of a counter to an endpoint for FI_SEND or
	// FI_RECV events, and with a notify write it counts remote writes that consume a receive.
	BindCounter(c Counter, cq CQ) error
	// Trigger queues w to run once c reaches threshold (at once if it has). Work waiting on one
	// counter fires in threshold order, and work with equal thresholds in submission order; there
	// is no other order between triggered work (no per-queue FIFO). A posting error when the work
	// fires stops all triggered work of the context and is reported by TriggerErr.
	Trigger(c Counter, threshold uint64, w *TriggeredWR) error
	// PendingTriggers is how much triggered work waits.
	PendingTriggers() int
	// CancelTriggers drops all waiting triggered work and returns how much it dropped.
	CancelTriggers() int
	// TriggerErr is the error that stopped triggered work, if one did.
	TriggerErr() error
}

// RMAEventContext is implemented by contexts whose NIC counts the remote writes that land in
// memory it registered: libfabric's FI_RMA_EVENT, a counter bound to a memory region for
// FI_REMOTE_WRITE events (Portals 4 and Slingshot count landings the same way). A wait for the
// writes that land in a region (docs/language.md, wait) reads such a counter, and triggered
// work may wait on it as on any counter.
type RMAEventContext interface {
	TriggerContext
	// BindRemoteWrites makes every RDMA write, with or without immediate data, that lands
	// within bytes [off, off+n) of mr raise c by one, once the data is in place.
	BindRemoteWrites(c Counter, mr MR, off, n uint64) error
}

// RegistrationCounting is implemented by RMAEventContexts that may count the remote writes by
// registration, as libfabric does (fi_mr_bind binds a counter to a whole registration, and a
// write is counted by the registration whose key it names). When CountsPerRegistration is true,
// BindRemoteWrites binds only a whole region, so each counted region is registered on its own
// (PD.RegisterMR over the buffer's bytes) and the writers into it name that registration's key
// and address; a write that lands in two counted regions is then counted by one of them only.
type RegistrationCounting interface {
	CountsPerRegistration() bool
}
