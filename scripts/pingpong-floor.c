// pingpong-floor: the fastest a 1,000-hop ping-pong of 8-byte RDMA writes can go on one device,
// written directly against libibverbs, as a floor for coredag's testdata/verbs/pingpong.dag.
// Two threads (CPU 0 and 1), one device context each, one RC QP each, connected through the
// device's own GID. Mode "imm": inline write with immediate, the receiver polls its receive CQ
// (what coredag's notify writes do). Mode "write": inline plain write, the receiver polls the
// landing word in memory (what ib_write_lat does). Rounds alternate the modes; the median
// per-hop time of each is printed as
//   FLOOR imm median 21.3 us/hop over 10 rounds
// Usage: pingpong-floor DEVICE GID_INDEX [ROUNDS]. Build: cc -O2 -o pingpong-floor
// pingpong-floor.c -libverbs -lpthread.
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { HOPS = 1000, MAXROUNDS = 101 };

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	volatile uint64_t *buf; // [0] outgoing value, [8] landing word
	int cpu, first, imm, err;
};

static struct side S[2];
static pthread_barrier_t start;

static double now_us(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void *run(void *arg) {
	struct side *me = arg, *peer = &S[me == &S[0]];
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(me->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	struct ibv_wc wc[16];
	int turn = me->first, sent = 0, got = 0;
	pthread_barrier_wait(&start);
	double deadline = now_us() + 30e6;
	while (sent + got < HOPS) {
		if (turn) {
			struct ibv_sge sg = {(uintptr_t)me->buf, 8, me->mr->lkey};
			struct ibv_send_wr w, *bad;
			memset(&w, 0, sizeof(w));
			me->buf[0] = (uint64_t)sent + 1;
			w.sg_list = &sg;
			w.num_sge = 1;
			w.opcode = me->imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
			w.send_flags = IBV_SEND_INLINE | (sent % 64 == 63 ? IBV_SEND_SIGNALED : 0);
			w.wr.rdma.remote_addr = (uintptr_t)(peer->buf + 8);
			w.wr.rdma.rkey = peer->mr->rkey;
			if (ibv_post_send(me->qp, &w, &bad)) {
				me->err = 1;
				return NULL;
			}
			sent++;
			turn = 0;
			continue;
		}
		if (me->imm) {
			int n = ibv_poll_cq(me->rcq, 16, wc);
			if (n > 0) {
				got += n;
				turn = 1;
			}
		} else if (me->buf[8] == (uint64_t)got + 1) {
			got++;
			turn = 1;
		}
		if (ibv_poll_cq(me->scq, 16, wc) < 0 || ((sent + got) % 256 == 0 && now_us() > deadline)) {
			me->err = 2;
			return NULL;
		}
	}
	while (ibv_poll_cq(me->scq, 16, wc) > 0)
		;
	return NULL;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: %s DEVICE GID_INDEX [ROUNDS]\n", argv[0]);
		return 2;
	}
	int gidx = atoi(argv[2]), rounds = argc > 3 ? atoi(argv[3]) : 10;
	if (rounds < 1 || rounds > MAXROUNDS)
		rounds = 10;
	int ndev = 0;
	struct ibv_device **list = ibv_get_device_list(&ndev), *dev = NULL;
	for (int i = 0; i < ndev; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "pingpong-floor: no device %s\n", argv[1]);
		return 1;
	}
	union ibv_gid gid;
	for (int i = 0; i < 2; i++) {
		struct side *s = &S[i];
		s->cpu = i;
		s->first = i == 0;
		s->ctx = ibv_open_device(dev);
		s->pd = s->ctx ? ibv_alloc_pd(s->ctx) : NULL;
		s->buf = aligned_alloc(4096, 4096);
		if (!s->pd || !s->buf || ibv_query_gid(s->ctx, 1, gidx, &gid)) {
			fprintf(stderr, "pingpong-floor: cannot open %s or read GID %d\n", argv[1], gidx);
			return 1;
		}
		memset((void *)s->buf, 0, 4096);
		s->mr = ibv_reg_mr(s->pd, (void *)s->buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		s->scq = ibv_create_cq(s->ctx, 1024, NULL, NULL, 0);
		s->rcq = ibv_create_cq(s->ctx, 1024, NULL, NULL, 0);
		struct ibv_qp_init_attr a = {.send_cq = s->scq, .recv_cq = s->rcq, .qp_type = IBV_QPT_RC,
					     .cap = {.max_send_wr = 1024, .max_recv_wr = 1024, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 64}};
		s->qp = s->mr && s->scq && s->rcq ? ibv_create_qp(s->pd, &a) : NULL;
		struct ibv_qp_attr q = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
		if (!s->qp || ibv_modify_qp(s->qp, &q, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
			fprintf(stderr, "pingpong-floor: cannot set up a QP on %s\n", argv[1]);
			return 1;
		}
	}
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_attr q = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = S[1 - i].qp->qp_num,
					.max_dest_rd_atomic = 1, .min_rnr_timer = 1,
					.ah_attr = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .sgid_index = gidx, .hop_limit = 1}}};
		if (ibv_modify_qp(S[i].qp, &q, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
						       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
			fprintf(stderr, "pingpong-floor: INIT->RTR failed (wrong GID index?)\n");
			return 1;
		}
		q.qp_state = IBV_QPS_RTS;
		q.timeout = 14;
		q.retry_cnt = 7;
		q.rnr_retry = 7;
		q.max_rd_atomic = 1;
		if (ibv_modify_qp(S[i].qp, &q, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
						       IBV_QP_MAX_QP_RD_ATOMIC)) {
			fprintf(stderr, "pingpong-floor: RTR->RTS failed\n");
			return 1;
		}
	}
	pthread_barrier_init(&start, NULL, 2);
	static double per[2][MAXROUNDS];
	for (int r = 0; r < rounds; r++)
		for (int imm = 1; imm >= 0; imm--) {
			for (int i = 0; i < 2; i++) {
				S[i].imm = imm;
				S[i].buf[8] = 0;
				struct ibv_recv_wr rw = {0}, *bad;
				for (int k = 0; imm && k < HOPS / 2; k++)
					if (ibv_post_recv(S[i].qp, &rw, &bad)) {
						fprintf(stderr, "pingpong-floor: ibv_post_recv failed\n");
						return 1;
					}
			}
			pthread_t t[2];
			double t0 = now_us();
			for (int i = 0; i < 2; i++)
				pthread_create(&t[i], NULL, run, &S[i]);
			for (int i = 0; i < 2; i++)
				pthread_join(t[i], NULL);
			if (S[0].err || S[1].err) {
				fprintf(stderr, "pingpong-floor: a side failed (%d, %d)\n", S[0].err, S[1].err);
				return 1;
			}
			per[imm][r] = (now_us() - t0) / HOPS;
		}
	for (int imm = 1; imm >= 0; imm--) {
		qsort(per[imm], rounds, sizeof(double), cmp);
		printf("FLOOR %s median %.2f us/hop over %d rounds\n", imm ? "imm" : "write", per[imm][rounds / 2], rounds);
	}
	return 0;
}
