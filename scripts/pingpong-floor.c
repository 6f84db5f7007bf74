// pingpong-floor: the fastest a 1,000-hop ping-pong of 8-byte RDMA writes goes on one device,
// written directly against libibverbs, as a floor for coredag's testdata/verbs/pingpong.dag.
// Two processes (fork), pinned to CPU 0 and 1, each with its own device context and one RC QP,
// connected through the device's own GID; pipes carry the setup and a barrier before each round.
// Mode "imm": inline write with immediate, the receiver polls its receive CQ (what coredag's
// notify writes do). Mode "write": inline plain write, the receiver polls the landing word in
// memory (what ib_write_lat does). Rounds alternate the modes; the parent prints the median
// per-hop time of each (a round's time / 1,000: a mean) and, as ib_write_lat reports, the typical
// hop (the median over all rounds of half the time between two posts of process 0, timed with the
// cycle counter as perftest does: a clock read per hop would slow the VM's hops) as
//   FLOOR imm median 21.3 us/hop over 9 rounds, typical 19.8 us
// Usage: pingpong-floor DEVICE GID_INDEX [ROUNDS]. Build: cc -O2 -o pingpong-floor
// pingpong-floor.c -libverbs.
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

enum { HOPS = 1000, MAXROUNDS = 101 };

// endpoint is what one process tells the other.
struct endpoint {
	uint32_t qpn, rkey;
	uint64_t addr;
};

static double now_us(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

// counter is the cycle counter (x86-64) or, elsewhere, the clock in nanoseconds.
static uint64_t counter(void) {
#if defined(__x86_64__)
	return __rdtsc();
#else
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000 + t.tv_nsec;
#endif
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int fail(const char *what) {
	fprintf(stderr, "pingpong-floor: %s\n", what);
	return 1;
}

// pass writes n bytes to the peer and reads n bytes back: a barrier that also exchanges data.
static int pass(int wfd, int rfd, const void *out, void *in, size_t n) {
	return write(wfd, out, n) == (ssize_t)n && read(rfd, in, n) == (ssize_t)n ? 0 : -1;
}

// run is one process's side: rank 0 sends first and reports.
static int run(int rank, int wfd, int rfd, const char *devname, int gidx, int rounds) {
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(rank, &set);
	sched_setaffinity(0, sizeof(set), &set);
	int ndev = 0;
	struct ibv_device **list = ibv_get_device_list(&ndev), *dev = NULL;
	for (int i = 0; i < ndev; i++)
		if (!strcmp(ibv_get_device_name(list[i]), devname))
			dev = list[i];
	if (!dev)
		return fail("no such device");
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	volatile uint64_t *buf = aligned_alloc(4096, 4096);
	union ibv_gid gid;
	if (!pd || !buf || ibv_query_gid(ctx, 1, gidx, &gid))
		return fail("cannot open the device or read the GID");
	memset((void *)buf, 0, 4096);
	struct ibv_mr *mr = ibv_reg_mr(pd, (void *)buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_cq *scq = ibv_create_cq(ctx, 1024, NULL, NULL, 0), *rcq = ibv_create_cq(ctx, 1024, NULL, NULL, 0);
	struct ibv_qp_init_attr a = {.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
				     .cap = {.max_send_wr = 1024, .max_recv_wr = 1024, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 64}};
	struct ibv_qp *qp = mr && scq && rcq ? ibv_create_qp(pd, &a) : NULL;
	struct ibv_qp_attr q = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	if (!qp || ibv_modify_qp(qp, &q, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return fail("cannot set up a QP");
	struct endpoint me = {qp->qp_num, mr->rkey, (uintptr_t)buf}, peer;
	if (pass(wfd, rfd, &me, &peer, sizeof me))
		return fail("setup pipe");
	struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = peer.qpn,
				.max_dest_rd_atomic = 1, .min_rnr_timer = 1,
				.ah_attr = {.is_global = 1, .port_num = 1, .grh = {.dgid = gid, .sgid_index = gidx, .hop_limit = 1}}};
	if (ibv_modify_qp(qp, &r, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return fail("INIT->RTR failed (wrong GID index?)");
	r.qp_state = IBV_QPS_RTS;
	r.timeout = 14;
	r.retry_cnt = 7;
	r.rnr_retry = 7;
	r.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &r, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					  IBV_QP_MAX_QP_RD_ATOMIC))
		return fail("RTR->RTS failed");
	static double per[2][MAXROUNDS], half[2][MAXROUNDS * HOPS / 2];
	static uint64_t posts[HOPS / 2];
	int nhalf[2] = {0, 0};
	struct ibv_wc wc[16];
	for (int rd = 0; rd < rounds; rd++)
		for (int imm = 1; imm >= 0; imm--) {
			buf[8] = 0;
			struct ibv_recv_wr rw = {0}, *bad;
			for (int k = 0; imm && k < HOPS / 2; k++)
				if (ibv_post_recv(qp, &rw, &bad))
					return fail("ibv_post_recv failed");
			char c = 0;
			if (pass(wfd, rfd, &c, &c, 1))
				return fail("barrier pipe");
			double t0 = now_us(), deadline = t0 + 30e6;
			uint64_t c0 = counter();
			int turn = rank == 0, sent = 0, got = 0;
			while (sent + got < HOPS) {
				if (turn) {
					struct ibv_sge sg = {(uintptr_t)buf, 8, mr->lkey};
					struct ibv_send_wr w, *bw;
					memset(&w, 0, sizeof(w));
					buf[0] = (uint64_t)sent + 1;
					w.sg_list = &sg;
					w.num_sge = 1;
					w.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
					w.send_flags = IBV_SEND_INLINE | (sent % 64 == 63 ? IBV_SEND_SIGNALED : 0);
					w.wr.rdma.remote_addr = peer.addr + 64;
					w.wr.rdma.rkey = peer.rkey;
					posts[sent] = counter();
					if (ibv_post_send(qp, &w, &bw))
						return fail("ibv_post_send failed");
					sent++;
					turn = 0;
					continue;
				}
				if (imm) {
					int n = ibv_poll_cq(rcq, 16, wc);
					if (n > 0) {
						got += n;
						turn = 1;
					}
				} else if (buf[8] == (uint64_t)got + 1) {
					got++;
					turn = 1;
				}
				if (ibv_poll_cq(scq, 16, wc) < 0 || ((sent + got) % 256 == 0 && now_us() > deadline))
					return fail("a round failed or took over 30 s");
			}
			double t1 = now_us(), us_per_count = (t1 - t0) / (double)(counter() - c0);
			per[imm][rd] = (t1 - t0) / HOPS;
			for (int k = 1; k < sent; k++)
				half[imm][nhalf[imm]++] = (double)(posts[k] - posts[k - 1]) * us_per_count / 2;
			while (ibv_poll_cq(scq, 16, wc) > 0)
				;
		}
	if (rank == 0)
		for (int imm = 1; imm >= 0; imm--) {
			qsort(per[imm], rounds, sizeof(double), cmp);
			qsort(half[imm], nhalf[imm], sizeof(double), cmp);
			printf("FLOOR %s median %.2f us/hop over %d rounds, typical %.2f us\n", imm ? "imm" : "write",
			       per[imm][rounds / 2], rounds, nhalf[imm] ? half[imm][nhalf[imm] / 2] : 0.0);
		}
	return 0;
}

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: %s DEVICE GID_INDEX [ROUNDS]\n", argv[0]);
		return 2;
	}
	int gidx = atoi(argv[2]), rounds = argc > 3 ? atoi(argv[3]) : 9;
	if (rounds < 1 || rounds > MAXROUNDS)
		rounds = 9;
	int down[2], up[2];
	if (pipe(down) || pipe(up))
		return fail("pipe");
	fflush(stdout);
	pid_t child = fork();
	if (child < 0)
		return fail("fork");
	if (child == 0)
		return run(1, up[1], down[0], argv[1], gidx, rounds);
	int rc = run(0, down[1], up[0], argv[1], gidx, rounds), status = 0;
	if (rc != 0)
		kill(child, SIGKILL);
	waitpid(child, &status, 0);
	return rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}
