// shim.h: the C side of the ofi provider. Thin wrappers over libfabric's inline calls, so that Go
// makes one cgo call per operation, and the per-request context (ofi_slot) that every operation
// hands to libfabric and gets back in its completion.
#ifndef COREDAG_OFI_SHIM_H
#define COREDAG_OFI_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_trigger.h>
#include <rdma/fi_errno.h>

// ofi_slot is the operation context of one libfabric call. The triggered context comes first, so
// a triggered operation's context pointer and its slot are the same address. A slot names the
// endpoint (qpn), the side (0 send, 1 receive, 2 stand-alone triggered operation) and the index of
// the work request in its queue.
typedef struct ofi_slot {
	union {
		struct fi_context2 ctx;
		struct fi_triggered_context trig;
	} u;
	uint32_t qpn;
	uint32_t side;
	uint64_t idx;
} ofi_slot;

// POLL_BATCH is how many completions ofi_cq_poll reads at most.
#define POLL_BATCH 64

// ofi_comp is one completion as Go reads it: a success (err 0) or an error entry.
typedef struct ofi_comp {
	ofi_slot *slot;
	uint64_t flags;
	uint64_t len;
	uint64_t data;
	int32_t err;        // positive FI_E* value, 0 on success
	int32_t prov_errno; // the provider's own code, for messages
} ofi_comp;

// ofi_caps is what fi_getinfo granted, reduced to what Go needs.
typedef struct ofi_caps {
	uint64_t caps;
	uint64_t mode;
	uint64_t mr_mode;
	uint64_t inject;
	uint64_t tx_size, rx_size;
	uint64_t cq_size;
	uint64_t mr_key_size;
	uint64_t cq_data_size;
	uint64_t iov_limit; // the smaller of the transmit and receive iov_limit
	uint64_t tx_order;  // FI_ORDER_* the transmit side guarantees (msg_order)
	uint64_t rx_order;  // FI_ORDER_* the receive side guarantees (msg_order)
	uint32_t addr_format;
	int manual;      // data progress is FI_PROGRESS_MANUAL: the caller's reads move the data
	int manual_ctrl; // control progress is FI_PROGRESS_MANUAL
	int bound;       // endpoints bind ofi_want.node (the provider addresses by IP)
} ofi_caps;

// ofi_want is what coredag asks of fi_getinfo.
typedef struct ofi_want {
	const char *prov;  // provider name, or NULL for any
	const char *node;  // the IPv4 address endpoints of a provider over IP bind
	int need_trigger;  // FI_TRIGGER required
	int manual;        // ask for FI_PROGRESS_MANUAL
	uint64_t order;    // FI_ORDER_* bits asked for first (granted ones are in ofi_caps.tx_order)
	int order_first;   // ask for order before FI_ATOMIC (the ops posted use no atomics)
} ofi_want;

// OFI_MAX_IOV bounds the segments of one request the shim passes (a scatter/gather list).
#define OFI_MAX_IOV 32

// ofi_desc is a memory region's descriptor (fi_mr_desc) as an integer: it is the provider's
// opaque key (sockets gives small integers), never a pointer Go may look at.
typedef uintptr_t ofi_desc;

// ofi_seg is one segment of a local scatter/gather list: registered memory and its descriptor.
typedef struct ofi_seg {
	void *buf;
	size_t len;
	ofi_desc desc;
} ofi_seg;

// ofi_getinfo picks the first provider that grants what want asks and coredag can use; the
// address ladder and the optional capabilities are in shim.c.
int ofi_getinfo(const ofi_want *want, struct fi_info **out, char *name, size_t namelen, ofi_caps *caps);
int ofi_listed(const char *prov);
void ofi_describe(struct fi_info *fi, char *buf, size_t len);
int ofi_fabric(struct fi_info *info, struct fid_fabric **fab);
int ofi_domain(struct fid_fabric *fab, struct fi_info *info, struct fid_domain **dom, struct fid_av **av);
int ofi_close(struct fid *f);
// ofi_cq_open opens a CQ; with wait, one with a file descriptor wait object if the provider grants
// it, whose descriptor it returns in *fd (else -1).
int ofi_cq_open(struct fid_domain *dom, size_t depth, int wait, struct fid_cq **cq, int *fd);
// ofi_block waits until one of the CQs fids (whose descriptors are fds) may have a completion, or
// timeout_ms passed: 0 after the wait, 1 when fi_trywait says to poll first, else an error.
int ofi_block(struct fid_fabric *fab, struct fid **fids, struct pollfd *fds, int n, int timeout_ms);
int ofi_cq_poll(struct fid_cq *cq, ofi_comp *out, int n);
int ofi_mr_reg(struct fid_domain *dom, void *buf, size_t len, uint64_t access, uint64_t key, struct fid_mr **mr, uint64_t *rkey, ofi_desc *desc);
int ofi_mr_bind_cntr(struct fid_mr *mr, struct fid_cntr *c);
int ofi_ep_open(struct fid_domain *dom, struct fi_info *info, struct fid_av *av, struct fid_cq *txcq, struct fid_cq *rxcq,
                size_t txsize, size_t rxsize, struct fid_cntr **cntrs, uint64_t *cntr_flags, int ncntr,
                const char *src_name, struct fid_ep **ep, void *addr, size_t *addrlen);
int ofi_av_insert(struct fid_av *av, const void *addr, uint64_t *fiaddr);

// Operations. flags carry FI_INJECT, FI_REMOTE_CQ_DATA, FI_TRIGGER and FI_FENCE as the caller
// wants; FI_COMPLETION is always added. A triggered operation's slot must have u.trig filled in.
int ofi_send(struct fid_ep *ep, const ofi_seg *seg, size_t n, uint64_t dest, uint64_t data, uint64_t flags, ofi_slot *slot);
// ofi_inject sends one buffer of at most the inject size: no completion comes for it.
int ofi_inject(struct fid_ep *ep, const ofi_seg *seg, uint64_t dest);
int ofi_recv(struct fid_ep *ep, const ofi_seg *seg, size_t n, uint64_t flags, ofi_slot *slot);
int ofi_write(struct fid_ep *ep, const ofi_seg *seg, size_t n, uint64_t dest, uint64_t raddr, uint64_t rkey,
              uint64_t data, uint64_t flags, ofi_slot *slot);
int ofi_read(struct fid_ep *ep, const ofi_seg *seg, size_t n, uint64_t dest, uint64_t raddr, uint64_t rkey,
             uint64_t flags, ofi_slot *slot);

// A start's hot path (CQ polls, sends, injects, receives) calls these, which take every address
// as an integer: each points to C memory (libfabric's objects, the shim's segment lists, slots
// and completion arrays), so cgo's check of a pointer argument, made on every call, would only
// cost time (6% of the CPU of a small start, BenchmarkOFIStartWait).
static inline int ofi_cq_poll_a(uintptr_t cq, uintptr_t out, int n) {
	return ofi_cq_poll((struct fid_cq *)cq, (ofi_comp *)out, n);
}
static inline int ofi_send_a(uintptr_t ep, uintptr_t seg, size_t n, uint64_t dest, uint64_t data, uint64_t flags, uintptr_t slot) {
	return ofi_send((struct fid_ep *)ep, (const ofi_seg *)seg, n, dest, data, flags, (ofi_slot *)slot);
}
static inline int ofi_inject_a(uintptr_t ep, uintptr_t seg, uint64_t dest) {
	return ofi_inject((struct fid_ep *)ep, (const ofi_seg *)seg, dest);
}
static inline int ofi_recv_a(uintptr_t ep, uintptr_t seg, size_t n, uint64_t flags, uintptr_t slot) {
	return ofi_recv((struct fid_ep *)ep, (const ofi_seg *)seg, n, flags, (ofi_slot *)slot);
}
// ofi_atomic64: op is FI_SUM (fetch-add) or FI_CSWAP; the old value lands in res (res may be NULL
// for FI_SUM: a non-fetching add).
int ofi_atomic64(struct fid_ep *ep, int op, uint64_t *operand, ofi_desc odesc, uint64_t *compare, ofi_desc cdesc,
                 uint64_t *res, ofi_desc rdesc, uint64_t dest, uint64_t raddr, uint64_t rkey, uint64_t flags, ofi_slot *slot);

// Counters.
int ofi_cntr_open(struct fid_domain *dom, struct fid_cntr **c);
uint64_t ofi_cntr_read(struct fid_cntr *c);
uint64_t ofi_cntr_readerr(struct fid_cntr *c);
int ofi_cntr_add(struct fid_cntr *c, uint64_t v);
int ofi_cntr_set(struct fid_cntr *c, uint64_t v);
int ofi_cntr_wait(struct fid_cntr *c, uint64_t threshold, int timeout_ms);

// ofi_queue_cntr_work queues deferred work on the domain: when trig reaches threshold, add (set=0)
// or set (set=1) value on target. The work and its operand live in *w, which must stay valid and
// unmoved until the work ran or was cancelled.
typedef struct ofi_cntr_work {
	struct fi_deferred_work work;
	struct fi_op_cntr op;
} ofi_cntr_work;
int ofi_queue_cntr_work(struct fid_domain *dom, ofi_cntr_work *w, struct fid_cntr *trig, uint64_t threshold,
                        struct fid_cntr *target, uint64_t value, int set, struct fid_cntr *done);
int ofi_cancel_work(struct fid_domain *dom, ofi_cntr_work *w);
// ofi_flush_work drops every triggered operation and deferred work of the domain not yet run.
int ofi_flush_work(struct fid_domain *dom);

const char *ofi_strerror(int err);

#endif
