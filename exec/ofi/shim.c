//go:build ofi && linux

// shim.c: one C call per libfabric operation (most libfabric calls are inline functions reached
// through operation tables, which Go cannot call directly), batched completion reads, and the
// counter and deferred-work calls.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include "shim.h"

#define OFI_VERSION FI_VERSION(1, 9)

// An address coredag can carry: an endpoint's address travels in the 16 bytes of nic.QPInfo.GID.
struct addr_try {
	int bind;  // bind ofi_want.node (FI_SOURCE)
	uint32_t format;
};

// The address ladder, first match wins:
//  1. an IPv4 socket address on the caller's node (FI_SOURCE; 127.0.0.1 unless Options.Addr
//     names another): providers over IP (sockets, tcp;ofi_rxm), whose traffic coredag keeps on
//     loopback unless told otherwise;
//  2. an IPv4 socket address the provider picks itself (no node): verbs;ofi_rxm, whose device has
//     its own address (Soft-RoCE on the VM's Ethernet interface);
//  3. a string name (FI_ADDR_STR): shm, whose endpoints are named by the caller (ofi_ep_open), not
//     by a host address.
static const struct addr_try addr_ladder[] = {
	{1, FI_SOCKADDR_IN},
	{0, FI_SOCKADDR_IN},
	{0, FI_ADDR_STR},
};

static int try_getinfo(const ofi_want *w, const struct addr_try *a, uint64_t caps, uint64_t order, struct fi_info **out) {
	struct fi_info *hints = fi_allocinfo();
	if (!hints) return -FI_ENOMEM;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	// Every operation passes an fi_context2-sized context (ofi_slot). FI_RX_CQ_DATA costs nothing:
	// coredag never writes with remote CQ data (a write with immediate is a write and a message,
	// which consumes a receive anyway).
	hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
	// The memory-registration modes the Go side handles: local descriptors (always passed), virtual
	// or offset addressing, keys chosen by the provider or by coredag, registered memory only. Not
	// offered: FI_MR_ENDPOINT (a region bound to one endpoint: coredag's regions serve every queue
	// of a rank), FI_MR_RAW (keys longer than 64 bits), FI_MR_HMEM, FI_MR_RMA_EVENT.
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	if (w->manual) {
		// The caller's CQ and counter reads move the data; a provider that progresses on its own
		// anyway (FI_PROGRESS_AUTO) accepts the hint too.
		hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
		hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	}
	// Ordering asked of both sides: shm grants send-after-write only when asked (it then gives up
	// its direct-copy RMA path), and reports the bits it grants.
	hints->tx_attr->msg_order = order;
	hints->rx_attr->msg_order = order;
	hints->addr_format = a->format;
	if (w->prov && *w->prov) hints->fabric_attr->prov_name = strdup(w->prov);
	int ret = fi_getinfo(OFI_VERSION, a->bind ? w->node : NULL, NULL, a->bind ? FI_SOURCE : 0, hints, out);
	fi_freeinfo(hints);
	return ret;
}

int ofi_getinfo(const ofi_want *w, struct fi_info **out, char *name, size_t namelen, ofi_caps *c) {
	uint64_t base = FI_MSG | FI_RMA | (w->need_trigger ? FI_TRIGGER : 0);
	// Optional capabilities, most first: atomics (fetch-add, compare-swap) and remote-access
	// counter events.
	const uint64_t extra[] = {FI_ATOMIC | FI_RMA_EVENT, FI_ATOMIC, FI_RMA_EVENT, 0};
	// Ordering: what the caller asks, else send-after-send only (message matching needs it; without
	// send-after-write the Go side holds a write with immediate's message until the write is
	// delivered).
	const uint64_t orders[] = {w->order, FI_ORDER_SAS};
	int ret = -FI_ENODATA;
	const struct addr_try *a = NULL;
	// ofi_rxm grants atomics only without send-after-write. By default capabilities come before
	// ordering: a write with immediate can do without it (at a round trip's cost), atomics
	// cannot. When the ops posted use no atomics (order_first), ordering comes first: atomics
	// are then taken only where the provider grants them with it.
	const size_t nextra = sizeof extra / sizeof extra[0], norders = sizeof orders / sizeof orders[0];
	for (size_t i = 0; i < sizeof addr_ladder / sizeof addr_ladder[0] && ret; i++) {
		a = &addr_ladder[i];
		for (size_t n = 0; n < nextra * norders && ret; n++) {
			size_t k = w->order_first ? n % nextra : n / norders;
			size_t j = w->order_first ? n / nextra : n % norders;
			ret = try_getinfo(w, a, base | extra[k], orders[j], out);
		}
	}
	if (ret) return ret;
	struct fi_info *fi = *out;
	// Keep only the first match: the provider coredag uses.
	if (fi->next) {
		fi_freeinfo(fi->next);
		fi->next = NULL;
	}
	snprintf(name, namelen, "%s", fi->fabric_attr->prov_name ? fi->fabric_attr->prov_name : "?");
	c->caps = fi->caps;
	c->mode = fi->mode;
	c->mr_mode = fi->domain_attr->mr_mode;
	c->inject = fi->tx_attr->inject_size;
	c->tx_size = fi->tx_attr->size;
	c->rx_size = fi->rx_attr->size;
	c->cq_size = fi->domain_attr->cq_cnt;
	c->mr_key_size = fi->domain_attr->mr_key_size;
	c->cq_data_size = fi->domain_attr->cq_data_size;
	c->tx_order = fi->tx_attr->msg_order;
	c->rx_order = fi->rx_attr->msg_order;
	c->addr_format = fi->addr_format;
	c->manual = fi->domain_attr->data_progress == FI_PROGRESS_MANUAL;
	c->manual_ctrl = fi->domain_attr->control_progress == FI_PROGRESS_MANUAL;
	c->bound = a->bind;
	c->iov_limit = fi->tx_attr->iov_limit < fi->rx_attr->iov_limit ? fi->tx_attr->iov_limit : fi->rx_attr->iov_limit;
	return 0;
}

int ofi_fabric(struct fi_info *info, struct fid_fabric **fab) { return fi_fabric(info->fabric_attr, fab, NULL); }

int ofi_domain(struct fid_fabric *fab, struct fi_info *info, struct fid_domain **dom, struct fid_av **av) {
	int ret = fi_domain(fab, info, dom, NULL);
	if (ret) return ret;
	struct fi_av_attr attr = {.type = FI_AV_TABLE};
	ret = fi_av_open(*dom, &attr, av, NULL);
	if (ret) {
		fi_close(&(*dom)->fid);
		*dom = NULL;
	}
	return ret;
}

int ofi_close(struct fid *f) { return f ? fi_close(f) : 0; }

int ofi_cq_open(struct fid_domain *dom, size_t depth, int wait, struct fid_cq **cq, int *fd) {
	*fd = -1;
	if (wait) {
		// A file descriptor the caller can block on (fi_trywait, then poll). Providers refuse the
		// wait object (shm: FI_ENOSYS) or open it without handing out its descriptor (sockets):
		// then the CQ is opened without one and the caller polls.
		struct fi_cq_attr attr = {.size = depth, .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_FD};
		if (fi_cq_open(dom, &attr, cq, NULL) == 0) {
			if (fi_control(&(*cq)->fid, FI_GETWAIT, fd) == 0 && *fd >= 0) return 0;
			*fd = -1;
			fi_close(&(*cq)->fid);
		}
	}
	struct fi_cq_attr attr = {.size = depth, .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
	return fi_cq_open(dom, &attr, cq, NULL);
}

int ofi_block(struct fid_fabric *fab, struct fid **fids, struct pollfd *fds, int n, int timeout_ms) {
	int r = fi_trywait(fab, fids, n);
	if (r == -FI_EAGAIN) return 1;
	if (r != 0) return r;
	for (int i = 0; i < n; i++) fds[i].revents = 0;
	r = poll(fds, n, timeout_ms);
	if (r < 0) return errno == EINTR ? 0 : -errno;
	return 0;
}

int ofi_cq_poll(struct fid_cq *cq, ofi_comp *out, int n) {
	struct fi_cq_data_entry e[POLL_BATCH];
	if (n > POLL_BATCH) n = POLL_BATCH;
	ssize_t ret = fi_cq_read(cq, e, n);
	if (ret > 0) {
		for (ssize_t i = 0; i < ret; i++) {
			out[i] = (ofi_comp){.slot = e[i].op_context, .flags = e[i].flags, .len = e[i].len, .data = e[i].data};
		}
		return (int)ret;
	}
	if (ret == -FI_EAGAIN) return 0;
	if (ret == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof err);
		ret = fi_cq_readerr(cq, &err, 0);
		if (ret == -FI_EAGAIN) return 0;
		if (ret < 0) return (int)ret;
		out[0] = (ofi_comp){.slot = err.op_context, .flags = err.flags, .len = err.len, .data = err.data,
		                    .err = err.err ? err.err : FI_EOTHER, .prov_errno = err.prov_errno};
		return 1;
	}
	return (int)ret;
}

int ofi_mr_reg(struct fid_domain *dom, void *buf, size_t len, uint64_t access, uint64_t key, struct fid_mr **mr,
               uint64_t *rkey, ofi_desc *desc) {
	int ret = fi_mr_reg(dom, buf, len, access, 0, key, 0, mr, NULL);
	if (ret) return ret;
	*rkey = fi_mr_key(*mr);
	*desc = (ofi_desc)fi_mr_desc(*mr);
	return 0;
}

int ofi_ep_open(struct fid_domain *dom, struct fi_info *info, struct fid_av *av, struct fid_cq *txcq, struct fid_cq *rxcq,
                size_t txsize, size_t rxsize, struct fid_cntr **cntrs, uint64_t *cntr_flags, int ncntr,
                const char *src_name, struct fid_ep **ep, void *addr, size_t *addrlen) {
	struct fi_info *fi = fi_dupinfo(info);
	if (!fi) return -FI_ENOMEM;
	if (txsize) fi->tx_attr->size = txsize;
	if (rxsize) fi->rx_attr->size = rxsize;
	if (src_name && fi->addr_format == FI_ADDR_STR) {
		// A string-named provider (shm) names the endpoint after its source address when it has
		// no "fi_shm://" prefix: the caller's short, unique name, so that it fits nic.QPInfo.GID
		// (the provider's own names, "fi_shm://PID:UID:N", do not).
		free(fi->src_addr);
		fi->src_addr = strdup(src_name);
		if (!fi->src_addr) {
			fi_freeinfo(fi);
			return -FI_ENOMEM;
		}
		fi->src_addrlen = strlen(src_name) + 1;
	}
	int ret = fi_endpoint(dom, fi, ep, NULL);
	fi_freeinfo(fi);
	if (ret) {
		*ep = NULL; // whatever the provider left there is not an endpoint to close
		return ret;
	}
	if ((ret = fi_ep_bind(*ep, &av->fid, 0))) goto fail;
	if ((ret = fi_ep_bind(*ep, &txcq->fid, FI_TRANSMIT))) goto fail;
	if ((ret = fi_ep_bind(*ep, &rxcq->fid, FI_RECV))) goto fail;
	for (int i = 0; i < ncntr; i++) {
		if ((ret = fi_ep_bind(*ep, &cntrs[i]->fid, cntr_flags[i]))) goto fail;
	}
	if ((ret = fi_enable(*ep))) goto fail;
	if ((ret = fi_getname(&(*ep)->fid, addr, addrlen))) goto fail;
	return 0;
fail:
	fi_close(&(*ep)->fid);
	*ep = NULL;
	return ret;
}

int ofi_av_insert(struct fid_av *av, const void *addr, uint64_t *fiaddr) {
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	int ret = fi_av_insert(av, addr, 1, &a, 0, NULL);
	*fiaddr = a;
	if (ret == 1) return 0;
	return ret < 0 ? ret : -FI_EINVAL;
}

// iovs spreads a scatter/gather list over iov and desc and returns its total length.
static size_t iovs(const ofi_seg *seg, size_t n, struct iovec *iov, void **desc) {
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		iov[i].iov_base = seg[i].buf;
		iov[i].iov_len = seg[i].len;
		desc[i] = (void *)seg[i].desc;
		total += seg[i].len;
	}
	return total;
}

int ofi_send(struct fid_ep *ep, const ofi_seg *seg, size_t n, uint64_t dest, uint64_t data, uint64_t flags, ofi_slot *slot) {
	struct iovec iov[OFI_MAX_IOV];
	void *desc[OFI_MAX_IOV];
	if (n > OFI_MAX_IOV) return -FI_EINVAL;
	iovs(seg, n, iov, desc);
	struct fi_msg m = {.msg_iov = iov, .desc = desc, .iov_count = n, .addr = dest, .context = slot, .data = data};
	return (int)fi_sendmsg(ep, &m, flags | FI_COMPLETION);
}

int ofi_inject(struct fid_ep *ep, const ofi_seg *seg, uint64_t dest) {
	return (int)fi_inject(ep, seg->buf, seg->len, dest);
}

int ofi_recv(struct fid_ep *ep, const ofi_seg *seg, size_t n, uint64_t flags, ofi_slot *slot) {
	struct iovec iov[OFI_MAX_IOV];
	void *desc[OFI_MAX_IOV];
	if (n > OFI_MAX_IOV) return -FI_EINVAL;
	iovs(seg, n, iov, desc);
	struct fi_msg m = {.msg_iov = iov, .desc = desc, .iov_count = n, .addr = FI_ADDR_UNSPEC, .context = slot};
	return (int)fi_recvmsg(ep, &m, flags | FI_COMPLETION);
}

int ofi_write(struct fid_ep *ep, const ofi_seg *seg, size_t n, uint64_t dest, uint64_t raddr, uint64_t rkey,
              uint64_t data, uint64_t flags, ofi_slot *slot) {
	struct iovec iov[OFI_MAX_IOV];
	void *desc[OFI_MAX_IOV];
	if (n > OFI_MAX_IOV) return -FI_EINVAL;
	size_t len = iovs(seg, n, iov, desc);
	struct fi_rma_iov r = {.addr = raddr, .len = len, .key = rkey};
	struct fi_msg_rma m = {.msg_iov = iov, .desc = desc, .iov_count = n, .addr = dest,
	                       .rma_iov = &r, .rma_iov_count = 1, .context = slot, .data = data};
	return (int)fi_writemsg(ep, &m, flags | FI_COMPLETION);
}

int ofi_read(struct fid_ep *ep, const ofi_seg *seg, size_t n, uint64_t dest, uint64_t raddr, uint64_t rkey,
             uint64_t flags, ofi_slot *slot) {
	struct iovec iov[OFI_MAX_IOV];
	void *desc[OFI_MAX_IOV];
	if (n > OFI_MAX_IOV) return -FI_EINVAL;
	size_t len = iovs(seg, n, iov, desc);
	struct fi_rma_iov r = {.addr = raddr, .len = len, .key = rkey};
	struct fi_msg_rma m = {.msg_iov = iov, .desc = desc, .iov_count = n, .addr = dest,
	                       .rma_iov = &r, .rma_iov_count = 1, .context = slot};
	return (int)fi_readmsg(ep, &m, flags | FI_COMPLETION);
}

int ofi_atomic64(struct fid_ep *ep, int op, uint64_t *operand, ofi_desc odesc_, uint64_t *compare, ofi_desc cdesc_,
                 uint64_t *res, ofi_desc rdesc_, uint64_t dest, uint64_t raddr, uint64_t rkey, uint64_t flags, ofi_slot *slot) {
	void *odesc = (void *)odesc_, *cdesc = (void *)cdesc_, *rdesc = (void *)rdesc_;
	struct fi_ioc o = {.addr = operand, .count = 1};
	struct fi_rma_ioc r = {.addr = raddr, .count = 1, .key = rkey};
	struct fi_msg_atomic m = {.msg_iov = &o, .desc = &odesc, .iov_count = 1, .addr = dest, .rma_iov = &r,
	                          .rma_iov_count = 1, .datatype = FI_UINT64, .op = (enum fi_op)op, .context = slot};
	flags |= FI_COMPLETION;
	if (op == FI_CSWAP) {
		struct fi_ioc cmp = {.addr = compare, .count = 1};
		struct fi_ioc rs = {.addr = res, .count = 1};
		return (int)fi_compare_atomicmsg(ep, &m, &cmp, &cdesc, 1, &rs, &rdesc, 1, flags);
	}
	if (!res) return (int)fi_atomicmsg(ep, &m, flags);
	struct fi_ioc rs = {.addr = res, .count = 1};
	return (int)fi_fetch_atomicmsg(ep, &m, &rs, &rdesc, 1, flags);
}

int ofi_cntr_open(struct fid_domain *dom, struct fid_cntr **c) {
	struct fi_cntr_attr attr = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
	return fi_cntr_open(dom, &attr, c, NULL);
}
uint64_t ofi_cntr_read(struct fid_cntr *c) { return fi_cntr_read(c); }
uint64_t ofi_cntr_readerr(struct fid_cntr *c) { return fi_cntr_readerr(c); }
int ofi_cntr_add(struct fid_cntr *c, uint64_t v) { return fi_cntr_add(c, v); }
int ofi_cntr_set(struct fid_cntr *c, uint64_t v) { return fi_cntr_set(c, v); }
int ofi_cntr_wait(struct fid_cntr *c, uint64_t threshold, int timeout_ms) { return fi_cntr_wait(c, threshold, timeout_ms); }

int ofi_queue_cntr_work(struct fid_domain *dom, ofi_cntr_work *w, struct fid_cntr *trig, uint64_t threshold,
                        struct fid_cntr *target, uint64_t value, int set, struct fid_cntr *done) {
	memset(w, 0, sizeof *w);
	w->op.cntr = target;
	w->op.value = value;
	w->work.threshold = threshold;
	w->work.triggering_cntr = trig;
	w->work.completion_cntr = done;
	w->work.op_type = set ? FI_OP_CNTR_SET : FI_OP_CNTR_ADD;
	w->work.op.cntr = &w->op;
	return fi_control(&dom->fid, FI_QUEUE_WORK, &w->work);
}

int ofi_cancel_work(struct fid_domain *dom, ofi_cntr_work *w) { return fi_control(&dom->fid, FI_CANCEL_WORK, &w->work); }

int ofi_flush_work(struct fid_domain *dom) { return fi_control(&dom->fid, FI_FLUSH_WORK, NULL); }

const char *ofi_strerror(int err) { return fi_strerror(err < 0 ? -err : err); }

// ofi_describe writes what the provider granted, in libfabric's own words (fi_tostr), for
// messages and reports.
void ofi_describe(struct fi_info *fi, char *buf, size_t len) {
	// fi_tostr returns a buffer it reuses: copy each string before the next call.
	char caps[512], mr[256], order[512], addr[64];
	uint64_t c = fi->caps & (FI_TRIGGER | FI_ATOMIC | FI_RMA_EVENT | FI_FENCE);
	snprintf(caps, sizeof caps, "%s", c ? fi_tostr(&c, FI_TYPE_CAPS) : "none");
	snprintf(mr, sizeof mr, "%s", fi->domain_attr->mr_mode ? fi_tostr(&fi->domain_attr->mr_mode, FI_TYPE_MR_MODE) : "none (offsets, caller's keys)");
	snprintf(order, sizeof order, "%s", fi_tostr(&fi->tx_attr->msg_order, FI_TYPE_MSG_ORDER));
	snprintf(addr, sizeof addr, "%s", fi_tostr(&fi->addr_format, FI_TYPE_ADDR_FORMAT));
	const char *prog[] = {"unspec", "auto", "manual"};
	int dp = fi->domain_attr->data_progress, cp = fi->domain_attr->control_progress;
	snprintf(buf, len, "caps [%s]; data progress %s, control progress %s; mr_mode [%s]; tx msg_order [%s]; "
	         "address %s; inject %zu, iov_limit %zu, tx/rx size %zu/%zu, cq_data_size %zu",
	         caps, dp >= 0 && dp <= 2 ? prog[dp] : "?", cp >= 0 && cp <= 2 ? prog[cp] : "?", mr, order, addr,
	         fi->tx_attr->inject_size, fi->tx_attr->iov_limit, fi->tx_attr->size, fi->rx_attr->size,
	         fi->domain_attr->cq_data_size);
}

// ofi_listed reports whether libfabric offers any endpoint of provider prov (what fi_info -l and
// fi_info -p list), whatever coredag needs of it.
int ofi_listed(const char *prov) {
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	if (!hints) return 0;
	hints->fabric_attr->prov_name = strdup(prov);
	int ret = fi_getinfo(OFI_VERSION, NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (info) fi_freeinfo(info);
	return ret == 0;
}

int ofi_mr_bind_cntr(struct fid_mr *mr, struct fid_cntr *c) { return fi_mr_bind(mr, &c->fid, FI_REMOTE_WRITE); }
