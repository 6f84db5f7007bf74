//go:build verbs && linux

// shim.h: the C side of coredag's verbs provider. Work requests and completions cross the cgo
// boundary as flat structs whose layout mirrors exec.SendWR, exec.RecvWR and exec.WC exactly (the Go
// side checks the offsets at init), so posting and polling copy nothing in Go and hand no Go
// pointers to C beyond the call.
#ifndef COREDAG_VERBS_SHIM_H
#define COREDAG_VERBS_SHIM_H

#include <stdint.h>
#include <stddef.h>
#include <infiniband/verbs.h>

// Mirrors exec.SGE.
typedef struct {
	uint64_t addr;
	uint32_t len;
	uint32_t lkey;
} cd_sge;

// Mirrors exec.SendWR.
typedef struct {
	uint64_t id;
	uint8_t op;
	uint8_t flags;
	cd_sge local;
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm;
	uint64_t compare_add;
	uint64_t swap;
	uint32_t wait_cq;
	uint32_t target_qp;
	uint32_t count;
	// The Go slice More: further SGEs after local (the Go side pins their array while posting).
	const cd_sge *more;
	int64_t more_len;
	int64_t more_cap;
} cd_send_wr;

// Mirrors exec.RecvWR.
typedef struct {
	uint64_t id;
	cd_sge local;
	const cd_sge *more;
	int64_t more_len;
	int64_t more_cap;
} cd_recv_wr;

// CD_MAX_SGE bounds the SGEs of one work request the shim builds (ConnectX reports 30).
#define CD_MAX_SGE 32

// Mirrors exec.WC.
typedef struct {
	uint64_t id;
	uint8_t status;
	uint8_t opcode;
	uint32_t qpn;
	uint32_t byte_len;
	uint32_t imm;
	int64_t time; // CLOCK_MONOTONIC ns when the poll found it, if the CQ stamps; else 0
} cd_wc;

// exec.Opcode values.
enum {
	CD_OP_SEND, CD_OP_WRITE, CD_OP_WRITE_IMM, CD_OP_READ, CD_OP_FADD, CD_OP_CAS, CD_OP_NOP,
	CD_OP_CQE_WAIT, CD_OP_SEND_EN, CD_OP_RECV_EN, CD_OP_RECV, CD_OP_RECV_IMM,
};

// exec.SendFlags values.
enum { CD_FLAG_SIGNALED = 1, CD_FLAG_FENCE = 2, CD_FLAG_INLINE = 4 };

// exec.Status values.
enum {
	CD_ST_SUCCESS, CD_ST_LOC_LEN, CD_ST_LOC_PROT, CD_ST_REM_ACCESS, CD_ST_REM_INV_REQ,
	CD_ST_RNR, CD_ST_FLUSH, CD_ST_GENERAL,
};

// Post results besides 0 (posted) and a positive errno from the driver.
enum {
	CD_ERR_BAD_OPCODE = -1,     // opcode not supported on this device (cross-channel, receive-only)
	CD_ERR_INLINE = -2,         // inline payload larger than the QP's max_inline_data
	CD_ERR_ATOMIC_LEN = -3,     // atomic whose local SGE is neither 0 nor 8 bytes
	CD_ERR_SGE = -4,            // a scatter/gather list longer than CD_MAX_SGE, or one on an atomic
};

// The scratch SGE atomics use when the caller discards the fetched value.
typedef struct {
	uint64_t addr;
	uint32_t lkey;
} cd_scratch;

// CD_ARMED mirrors exec.MaxArmed.
#define CD_ARMED 64
// CD_WATCHERS bounds the QPs whose triggers one CQ serves.
#define CD_WATCHERS 16

struct cd_trigger;

// cd_clock stamps completions (exec.StampCQ) in CLOCK_MONOTONIC nanoseconds from the CPU's cycle
// counter (x86-64; elsewhere it reads the clock), mapped by a line through readings of the clock
// taken as often as the counter's drift asks (every 0.5 to 10 ms), before the first stamp after a
// pause, and after a move to another CPU: where the clock source is emulated (a VM's HPET) a
// clock_gettime costs microseconds, a counter read nanoseconds. One per device context. C memory.
typedef struct {
	uint64_t t0, t;  // counter at the first and the latest anchor
	int64_t ns0, ns; // the clock at the same points
	double scale;    // nanoseconds per count, from the first anchor to the latest
	int64_t every;   // nanoseconds from one anchor to the next
	uint32_t cpu;    // the CPU the latest anchor read the counter on (with rdtscp)
	int rdtscp;      // the counter names its CPU
} cd_clock;

// cd_clock_init anchors c twice, half a millisecond apart (it spins meanwhile).
void cd_clock_init(cd_clock *c);
// cd_mono_ns reads CLOCK_MONOTONIC.
int64_t cd_mono_ns(void);

// cd_cq is a CQ as the triggers see it: the completions its polls returned, how far the Go side
// lets a poll hold completions (exec.HoldCQ), and the triggers waiting on it. With clock set,
// polls stamp the completions they return (exec.StampCQ). C memory.
typedef struct {
	struct ibv_cq *cq;
	uint64_t count, held_to;
	cd_clock *clock;
	int32_t nwatch;
	struct cd_trigger *watch[CD_WATCHERS];
} cd_cq;

// cd_armed is one armed request: posted when cq->count reaches target.
typedef struct {
	cd_cq *cq;
	uint64_t target;
	cd_send_wr wr;
} cd_armed;

// cd_trigger is a QP's FIFO of armed requests (exec.TriggerQP), ring slots [head, tail) modulo
// CD_ARMED; posted and rc say what the polls did since the Go side last looked. C memory.
typedef struct cd_trigger {
	struct ibv_qp *qp;
	uint32_t max_inline;
	cd_scratch scratch;
	uint32_t head, tail;
	int32_t posted, rc;
	cd_armed ring[CD_ARMED];
} cd_trigger;

int cd_post_send(struct ibv_qp *qp, const cd_send_wr *wrs, int n, uint32_t max_inline,
		 cd_scratch scratch, int *posted);
int cd_post_recv(struct ibv_qp *qp, const cd_recv_wr *wrs, int n, int *posted);
// cd_poll_cq polls cq for up to n completions into out and fires the triggers waiting on it.
// It polls up to spins times until it finds one; from the yield_after-th empty poll on (never if
// negative) each empty poll gives the CPU away (sched_yield): on software devices the kernel
// threads that move the data need it. While what it found is within cq->held_to it keeps polling
// for more (up to CD_HOLD_SPINS empty polls) before it returns.
int cd_poll_cq(cd_cq *cq, cd_wc *out, int n, int spins, int yield_after);

int cd_qp_to_init(struct ibv_qp *qp, uint8_t port, int access);
int cd_qp_to_rtr(struct ibv_qp *qp, uint8_t port, uint32_t dest_qpn, uint32_t rq_psn, uint16_t dlid,
		 const uint8_t *gid, int global, uint8_t sgid_index, int mtu, uint8_t max_rd_atomic);
int cd_qp_to_rts(struct ibv_qp *qp, uint32_t sq_psn, uint8_t retry, uint8_t rnr_retry,
		 uint8_t max_rd_atomic);
int cd_qp_state(struct ibv_qp *qp);

struct ibv_qp *cd_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
			    uint32_t send_depth, uint32_t recv_depth, uint32_t max_inline,
			    uint32_t max_sge, uint32_t *got_inline);

// cd_query_port wraps ibv_query_port, a macro cgo cannot call.
int cd_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);

// cd_gid_type returns the type of GID index i of port (0 IB/RoCE v1, 1 RoCE v2), or -1 if the
// entry is empty or cannot be read; gid receives its 16 bytes.
int cd_gid_type(struct ibv_context *ctx, uint8_t port, int i, uint8_t *gid);

#endif
