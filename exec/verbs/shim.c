//go:build verbs && linux

// shim.c: work request lists built on the C stack, one ibv_post_send per batch; batched polling,
// spinning on a CQ, and the triggers that post from inside a poll (exec.TriggerQP).

#include <errno.h>
#include <stdint.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif
#include "shim.h"

// BATCH bounds the work requests built on the stack per ibv_post_send call. Longer lists are
// posted in consecutive chunks (one doorbell per chunk).
#define BATCH 64

// fill_sges writes the non-empty SGEs of a list (local, then more) to s and returns how many, or
// -1 when the list is longer than CD_MAX_SGE; *total is its length in bytes.
static int fill_sges(struct ibv_sge *s, cd_sge local, const cd_sge *more, int64_t more_len, uint64_t *total) {
	if (more_len < 0 || more_len > CD_MAX_SGE - 1)
		return -1;
	int n = 0;
	for (int64_t i = -1; i < more_len; i++) {
		cd_sge e = i < 0 ? local : more[i];
		if (e.len == 0)
			continue;
		s[n].addr = e.addr;
		s[n].length = e.len;
		s[n].lkey = e.lkey;
		*total += e.len;
		n++;
	}
	return n;
}

static int fill_send(struct ibv_send_wr *w, struct ibv_sge *s, const cd_send_wr *in,
		     uint32_t max_inline, cd_scratch scratch) {
	memset(w, 0, sizeof(*w));
	w->wr_id = in->id;
	w->sg_list = s;
	uint64_t total = 0;
	int n = fill_sges(s, in->local, in->more, in->more_len, &total);
	if (n < 0)
		return CD_ERR_SGE;
	w->num_sge = n;
	if (in->flags & CD_FLAG_SIGNALED)
		w->send_flags |= IBV_SEND_SIGNALED;
	if (in->flags & CD_FLAG_FENCE)
		w->send_flags |= IBV_SEND_FENCE;
	switch (in->op) {
	case CD_OP_SEND:
		w->opcode = IBV_WR_SEND;
		if (in->flags & CD_FLAG_INLINE) {
			if (total > max_inline)
				return CD_ERR_INLINE;
			w->send_flags |= IBV_SEND_INLINE;
		}
		return 0;
	case CD_OP_WRITE:
	case CD_OP_WRITE_IMM:
		w->opcode = in->op == CD_OP_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM;
		w->imm_data = htonl(in->imm);
		w->wr.rdma.remote_addr = in->remote_addr;
		w->wr.rdma.rkey = in->rkey;
		if (in->flags & CD_FLAG_INLINE) {
			if (total > max_inline)
				return CD_ERR_INLINE;
			w->send_flags |= IBV_SEND_INLINE;
		}
		return 0;
	case CD_OP_NOP:
		// Upstream verbs has no NOP: a zero-length RDMA WRITE needs no key, touches no memory
		// and completes in queue order, which is all a NOP promises.
		w->opcode = IBV_WR_RDMA_WRITE;
		w->num_sge = 0;
		return 0;
	case CD_OP_READ:
		w->opcode = IBV_WR_RDMA_READ;
		w->wr.rdma.remote_addr = in->remote_addr;
		w->wr.rdma.rkey = in->rkey;
		return 0;
	case CD_OP_FADD:
	case CD_OP_CAS:
		w->opcode = in->op == CD_OP_FADD ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
		w->wr.atomic.remote_addr = in->remote_addr;
		w->wr.atomic.rkey = in->rkey;
		w->wr.atomic.compare_add = in->compare_add;
		w->wr.atomic.swap = in->swap;
		if (in->more_len > 0)
			return CD_ERR_SGE;
		s->addr = in->local.addr;
		s->length = in->local.len;
		s->lkey = in->local.lkey;
		if (in->local.len == 0) {
			// The fetched value is discarded: land it in the PD's scratch word.
			s->addr = scratch.addr;
			s->length = 8;
			s->lkey = scratch.lkey;
		} else if (in->local.len != 8) {
			return CD_ERR_ATOMIC_LEN;
		}
		w->num_sge = 1;
		return 0;
	}
	return CD_ERR_BAD_OPCODE;
}

int cd_post_send(struct ibv_qp *qp, const cd_send_wr *wrs, int n, uint32_t max_inline,
		 cd_scratch scratch, int *posted) {
	struct ibv_send_wr w[BATCH];
	struct ibv_sge s[BATCH][CD_MAX_SGE];
	*posted = 0;
	while (*posted < n) {
		int k = n - *posted < BATCH ? n - *posted : BATCH;
		const cd_send_wr *in = wrs + *posted;
		int ok = 0, rc = 0;
		for (; ok < k; ok++) {
			rc = fill_send(&w[ok], s[ok], &in[ok], max_inline, scratch);
			if (rc != 0)
				break;
			w[ok].next = ok + 1 < k ? &w[ok + 1] : NULL;
		}
		if (ok > 0) {
			struct ibv_send_wr *bad = NULL;
			w[ok - 1].next = NULL;
			int prc = ibv_post_send(qp, w, &bad);
			if (prc != 0) {
				*posted += bad ? (int)(bad - w) : 0;
				return prc;
			}
			*posted += ok;
		}
		if (rc != 0)
			return rc;
	}
	return 0;
}

int cd_post_recv(struct ibv_qp *qp, const cd_recv_wr *wrs, int n, int *posted) {
	struct ibv_recv_wr w[BATCH];
	struct ibv_sge s[BATCH][CD_MAX_SGE];
	*posted = 0;
	while (*posted < n) {
		int k = n - *posted < BATCH ? n - *posted : BATCH;
		const cd_recv_wr *in = wrs + *posted;
		for (int i = 0; i < k; i++) {
			uint64_t total = 0;
			int ns = fill_sges(s[i], in[i].local, in[i].more, in[i].more_len, &total);
			if (ns < 0) {
				if (i == 0)
					return CD_ERR_SGE;
				k = i; // post the requests before it; the next round reports it
				break;
			}
			w[i].wr_id = in[i].id;
			w[i].sg_list = s[i];
			w[i].num_sge = ns;
			w[i].next = i + 1 < k ? &w[i + 1] : NULL;
		}
		w[k - 1].next = NULL;
		struct ibv_recv_wr *bad = NULL;
		int rc = ibv_post_recv(qp, w, &bad);
		if (rc != 0) {
			*posted += bad ? (int)(bad - w) : 0;
			return rc;
		}
		*posted += k;
	}
	return 0;
}

static uint8_t map_status(enum ibv_wc_status st) {
	switch (st) {
	case IBV_WC_SUCCESS: return CD_ST_SUCCESS;
	case IBV_WC_LOC_LEN_ERR: return CD_ST_LOC_LEN;
	case IBV_WC_LOC_PROT_ERR: return CD_ST_LOC_PROT;
	case IBV_WC_REM_ACCESS_ERR: return CD_ST_REM_ACCESS;
	case IBV_WC_REM_INV_REQ_ERR: return CD_ST_REM_INV_REQ;
	case IBV_WC_RNR_RETRY_EXC_ERR: return CD_ST_RNR;
	case IBV_WC_WR_FLUSH_ERR: return CD_ST_FLUSH;
	default: return CD_ST_GENERAL;
	}
}

static uint8_t map_opcode(const struct ibv_wc *wc) {
	switch (wc->opcode) {
	case IBV_WC_SEND: return CD_OP_SEND;
	case IBV_WC_RDMA_WRITE: return CD_OP_WRITE;
	case IBV_WC_RDMA_READ: return CD_OP_READ;
	case IBV_WC_FETCH_ADD: return CD_OP_FADD;
	case IBV_WC_COMP_SWAP: return CD_OP_CAS;
	case IBV_WC_RECV: return CD_OP_RECV;
	case IBV_WC_RECV_RDMA_WITH_IMM: return CD_OP_RECV_IMM;
	default: return 0xff; // unknown: the Go side resolves it from its post record
	}
}

// CD_HOLD_SPINS bounds the empty polls a poll that holds completions makes before returning them.
#define CD_HOLD_SPINS 4096

// fire posts, on each QP whose triggers wait on cq, the run of armed requests at the head of its
// FIFO whose counts are reached; after an error completion on cq (failed) it disarms them.
static void fire(cd_cq *cq, int failed) {
	for (int i = 0; i < cq->nwatch; i++) {
		cd_trigger *t = cq->watch[i];
		if (failed) {
			for (uint32_t k = t->head; k != t->tail; k++)
				if (t->ring[k % CD_ARMED].cq == cq) {
					t->head = t->tail;
					break;
				}
			continue;
		}
		cd_send_wr run[CD_ARMED];
		int n = 0;
		for (uint32_t k = t->head; k != t->tail; k++) {
			cd_armed *a = &t->ring[k % CD_ARMED];
			if (a->cq->count < a->target)
				break;
			run[n++] = a->wr;
		}
		if (n == 0)
			continue;
		int posted = 0;
		int rc = cd_post_send(t->qp, run, n, t->max_inline, t->scratch, &posted);
		t->posted += posted;
		t->head += posted;
		if (rc != 0) {
			t->rc = rc;
			t->head = t->tail;
		}
	}
}

int64_t cd_mono_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// A stamping poll reads the real clock again every CD_ANCHOR_MIN_NS to CD_ANCHOR_MAX_NS, as often
// as keeps the line's error at each reading near CD_CLOCK_TOL_NS.
#define CD_ANCHOR_MIN_NS 500000
#define CD_ANCHOR_MAX_NS 10000000
#define CD_CLOCK_TOL_NS 3000

#if defined(__x86_64__)
// has_rdtscp: whether the CPU names itself when it reads the counter (CPUID 0x80000001 EDX bit 27).
static int has_rdtscp(void) {
	unsigned a, b, c, d;
	return __get_cpuid(0x80000001, &a, &b, &c, &d) && (d >> 27 & 1);
}
#endif

// counter reads the cycle counter and, where the CPU says (rdtscp), which CPU it read: where the
// kernel does not trust the counter, CPUs' counters disagree by microseconds.
static inline uint64_t counter(const cd_clock *c, uint32_t *cpu) {
#if defined(__x86_64__)
	if (c->rdtscp) {
		unsigned aux;
		uint64_t t = __rdtscp(&aux);
		*cpu = aux;
		return t;
	}
	*cpu = 0;
	return __rdtsc();
#else
	(void)c;
	*cpu = 0;
	return (uint64_t)cd_mono_ns();
#endif
}

// reading pairs the clock with the counter half-way through reading it, from the quickest of a few
// reads that stayed on one CPU: a slow or interrupted clock read then costs no accuracy.
static uint64_t reading(const cd_clock *c, int64_t *ns, uint32_t *cpu) {
	uint64_t best = 0, width = UINT64_MAX;
	for (int i = 0; i < 5 || (width == UINT64_MAX && i < 100); i++) {
		uint32_t ca, cb;
		uint64_t a = counter(c, &ca);
		int64_t n = cd_mono_ns();
		uint64_t b = counter(c, &cb);
		if ((ca == cb || i == 99) && b - a < width) {
			width = b - a;
			best = a + width / 2;
			*ns = n;
			*cpu = ca;
		}
	}
	return best;
}

void cd_clock_init(cd_clock *c) {
	memset(c, 0, sizeof(*c));
#if defined(__x86_64__)
	c->rdtscp = has_rdtscp();
#endif
	c->t0 = reading(c, &c->ns0, &c->cpu);
	do
		c->t = reading(c, &c->ns, &c->cpu);
	while (c->ns - c->ns0 < CD_ANCHOR_MIN_NS);
	c->scale = c->t > c->t0 ? (double)(c->ns - c->ns0) / (double)(c->t - c->t0) : 1;
	c->every = CD_ANCHOR_MIN_NS;
}

// clock_anchor reads the real clock again and refits the slope over the whole span since the first
// anchor: one reading's error then barely tilts the line. Where the kernel does not trust the
// counter (an emulated VM's TSC) its rate against the clock also wanders, here by up to 0.7% within
// 10 ms: each anchor sets c->every to the interval over which the drift it just measured stays
// within CD_CLOCK_TOL_NS (growing at most twofold).
static void clock_anchor(cd_clock *c) {
	int64_t ns;
	uint32_t cpu;
	uint64_t t = reading(c, &ns, &cpu);
	if (cpu == c->cpu && ns > c->ns) {
		double off = (double)(c->ns - ns) + (double)(int64_t)(t - c->t) * c->scale;
		off = off < 0 ? -off : off;
		double every = 2 * (double)c->every;
		if (off * every > CD_CLOCK_TOL_NS * (double)(ns - c->ns))
			every = CD_CLOCK_TOL_NS * (double)(ns - c->ns) / off;
		c->every = every < CD_ANCHOR_MIN_NS	? CD_ANCHOR_MIN_NS
			   : every > CD_ANCHOR_MAX_NS ? CD_ANCHOR_MAX_NS
						      : (int64_t)every;
	}
	if (t > c->t0 && ns > c->ns0)
		c->scale = (double)(ns - c->ns0) / (double)(t - c->t0);
	c->t = t;
	c->ns = ns;
	c->cpu = cpu;
}

// clock_stamp dates now. It anchors first when the latest anchor was read on another CPU, is
// c->every old, or older than the span since the first (so anchors start at doubling intervals):
// no stamp is extrapolated over a pause or across CPUs.
static int64_t clock_stamp(cd_clock *c) {
	uint32_t cpu;
	double s = (double)(int64_t)(counter(c, &cpu) - c->t) * c->scale;
	if (cpu != c->cpu || s < 0 || s >= (double)c->every || s >= (double)(c->ns - c->ns0)) {
		clock_anchor(c);
		return c->ns;
	}
	return c->ns + (int64_t)s;
}

// poll_once polls what cq holds now, up to n completions, and fires the triggers waiting on it.
static int poll_once(cd_cq *cq, cd_wc *out, int n) {
	struct ibv_wc wc[BATCH];
	int got = 0;
	while (got < n) {
		int k = n - got < BATCH ? n - got : BATCH;
		int rc = ibv_poll_cq(cq->cq, k, wc);
		if (rc < 0)
			return got > 0 ? got : -1;
		int64_t at = 0;
		if (rc > 0) {
			if (cq->clock)
				at = clock_stamp(cq->clock);
			int failed = 0;
			for (int i = 0; i < rc; i++)
				failed |= wc[i].status != IBV_WC_SUCCESS;
			cq->count += rc;
			if (cq->nwatch > 0)
				fire(cq, failed); // post first: the transfer starts before the copy below
		}
		for (int i = 0; i < rc; i++) {
			cd_wc *o = &out[got + i];
			o->id = wc[i].wr_id;
			o->status = map_status(wc[i].status);
			// opcode is defined only for successful completions.
			o->opcode = wc[i].status == IBV_WC_SUCCESS ? map_opcode(&wc[i]) : 0xff;
			o->qpn = wc[i].qp_num;
			o->byte_len = wc[i].byte_len;
			o->imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) ? ntohl(wc[i].imm_data) : 0;
			o->time = at;
		}
		got += rc;
		if (rc < k)
			break;
	}
	return got;
}

static int poll_cq(cd_cq *cq, cd_wc *out, int n, int spins, int yield_after) {
	int got = 0, empty = 0;
	for (;;) {
		int k = poll_once(cq, out + got, n - got);
		if (k < 0)
			return got > 0 ? got : -1;
		got += k;
		if (got > 0 && (got == n || cq->count > cq->held_to))
			return got;
		if (k > 0) {
			empty = 0;
			continue;
		}
		if (++empty >= (got > 0 ? CD_HOLD_SPINS : spins))
			return got;
		if (yield_after >= 0 && empty > yield_after)
			sched_yield();
	}
}

int cd_poll_cq(cd_cq *cq, cd_wc *out, int n, int spins, int yield_after) {
	int got = poll_cq(cq, out, n, spins, yield_after);
	if (cq->clock)
		clock_stamp(cq->clock); // anchors here if due, off the path from a completion to a post
	return got;
}

struct ibv_qp *cd_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
			    uint32_t send_depth, uint32_t recv_depth, uint32_t max_inline,
			    uint32_t max_sge, uint32_t *got_inline) {
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof(a));
	a.send_cq = scq;
	a.recv_cq = rcq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	a.cap.max_send_wr = send_depth;
	a.cap.max_recv_wr = recv_depth;
	a.cap.max_send_sge = max_sge > 0 ? max_sge : 1;
	a.cap.max_recv_sge = max_sge > 0 ? max_sge : 1;
	a.cap.max_inline_data = max_inline;
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (qp)
		*got_inline = a.cap.max_inline_data;
	return qp;
}

int cd_qp_to_init(struct ibv_qp *qp, uint8_t port, int access) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port;
	a.qp_access_flags = access;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int cd_qp_to_rtr(struct ibv_qp *qp, uint8_t port, uint32_t dest_qpn, uint32_t rq_psn, uint16_t dlid,
		 const uint8_t *gid, int global, uint8_t sgid_index, int mtu, uint8_t max_rd_atomic) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)mtu;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = max_rd_atomic;
	a.min_rnr_timer = 1; // 0.01 ms: retry soon, receivers post late in dependency chains
	a.ah_attr.dlid = dlid;
	a.ah_attr.port_num = port;
	if (global) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, gid, 16);
		a.ah_attr.grh.sgid_index = sgid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

int cd_qp_to_rts(struct ibv_qp *qp, uint32_t sq_psn, uint8_t retry, uint8_t rnr_retry,
		 uint8_t max_rd_atomic) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14; // 4.096 us * 2^14 = 67 ms per transport retry
	a.retry_cnt = retry;
	a.rnr_retry = rnr_retry;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = max_rd_atomic;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int cd_qp_state(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) != 0)
		return -1;
	return a.qp_state;
}

int cd_gid_type(struct ibv_context *ctx, uint8_t port, int i, uint8_t *gid) {
	struct ibv_gid_entry e;
	if (ibv_query_gid_ex(ctx, port, (uint32_t)i, &e, 0) != 0)
		return -1;
	memcpy(gid, e.gid.raw, 16);
	return e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
}

int cd_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr) {
	return ibv_query_port(ctx, port, attr);
}
