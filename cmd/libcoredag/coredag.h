/*
 * coredag.h: the C interface of libcoredag, coredag's plans as persistent collectives on the
 * caller's memory. Build and install with scripts/build-lib.sh PREFIX; compile with
 *     cc prog.c $(pkg-config --cflags --libs coredag)
 * docs/library.md ("C") describes the lifecycle, the world callbacks and the error codes.
 *
 * Lifecycle: coredag_plan_open (checks the plan; one that fails the check does not open) ->
 * coredag_coll_init (joins the world: every rank calls it) -> coredag_coll_bind (each extern
 * buffer) -> { coredag_coll_start -> coredag_coll_test / coredag_coll_wait } many times ->
 * coredag_coll_free -> coredag_plan_free. Re-binding between a wait and the next start is allowed,
 * for any extern buffer (one that peers write or read one-sidedly too: the next start tells them
 * of the new memory over the world before any of them touches it).
 *
 * Contract: memory bound to a buffer belongs to coredag from coredag_coll_start until the wait
 * that completes it returns; the caller must not read, write or free it in between. Bound memory
 * must stay valid until it is re-bound or the collective is freed.
 *
 * Handles are opaque and not safe for concurrent use by several threads: calls on one handle must
 * not overlap (different handles may be used from different threads). Every function returns
 * COREDAG_OK or an error code; the message of the last error of a handle is
 * coredag_plan_error / coredag_coll_error, a string owned by the handle (valid until the next
 * call on it, or its free). A NULL handle or pointer argument is COREDAG_ERR_ARG, never a crash
 * (a freed handle cannot be detected: do not use it).
 * A handle whose open or init failed only carries that failure: every call on it but its free
 * returns COREDAG_ERR_STATE and leaves the message as it is.
 */
#ifndef COREDAG_H
#define COREDAG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COREDAG_VERSION_MAJOR 0
#define COREDAG_VERSION_MINOR 2

typedef struct coredag_plan coredag_plan; /* an opened, checked plan */
typedef struct coredag_coll coredag_coll; /* a persistent collective: a plan joined to a world */

/*
 * The caller's out-of-band runtime (as UCC's OOB): this process's rank, the number of processes,
 * and two collectives over them, which every rank calls in the same order. coredag calls them in
 * coredag_coll_init (to agree that every rank runs the same plan), in the first start (to
 * exchange queue and memory descriptors) and in later starts where the plan needs them (an
 * allgather before the iteration, a barrier after: docs/library.md, Worlds), from the thread
 * that runs the start (coredag's, or the caller's in coredag_coll_wait), and from
 * several at once when several collectives are in flight: they must be thread-safe, and may run
 * while the caller's own thread is in the runtime too. With MPI: MPI_Init_thread with
 * MPI_THREAD_MULTIPLE, and a communicator of coredag's own (MPI_Comm_dup) as ctx.
 * They return 0 on success; any other value fails the call or the start with COREDAG_ERR_WORLD.
 * coredag cannot interrupt a callback: one that never returns (a peer died inside the runtime)
 * stalls the start, and coredag_coll_wait with a timeout then returns COREDAG_ERR_TIMEOUT.
 *
 * allgather: every rank contributes nbytes at send; recv (size * nbytes bytes) receives rank r's
 * bytes at offset r * nbytes. With MPI: MPI_Allgather(send, nbytes, MPI_BYTE, recv, nbytes,
 * MPI_BYTE, comm). barrier: returns when every rank has called it. ctx is passed back unchanged.
 * coredag copies the struct at init; ctx must stay valid until coredag_coll_free returns.
 */
typedef struct {
    int rank, size;
    int (*allgather)(const void *send, void *recv, size_t nbytes, void *ctx);
    int (*barrier)(void *ctx);
    void *ctx;
} coredag_world;

enum {
    COREDAG_OK = 0,
    COREDAG_ERR_CHECK,    /* the plan failed coredag check: the message has file:line:col lines */
    COREDAG_ERR_ARG,      /* a NULL or invalid argument: unknown buffer, wrong size or alignment */
    COREDAG_ERR_STATE,    /* not now: start before every buffer is bound, start or bind or free
                             while started, a handle whose open or init failed */
    COREDAG_ERR_WORLD,    /* world size != plan ranks, a callback failed, a peer died or timed out */
    COREDAG_ERR_TIMEOUT,  /* coredag_coll_wait's timeout expired (the start is still in flight),
                             or a start made no progress within the hang timeout (the message
                             names the stuck queues and the ranks they wait for) */
    COREDAG_ERR_PROVIDER, /* the NIC provider cannot be opened or cannot run the plan, or at free
                             it did not release an object (the message names rank and object) */
    COREDAG_ERR_INTERNAL, /* a bug in coredag, recovered (the message says where: report it) */
    COREDAG_ERR_LIMIT     /* a start past the most the plan allows: a triggered plan's counters
                             or a watched word would overflow (the message names it and how many
                             starts fit); a collective made anew starts over (since 0.2) */
};

/* The name of an error code, e.g. "COREDAG_ERR_STATE"; "unknown" for other values. Static. */
const char *coredag_strerror(int code);

/*
 * Opens the plan file at path (.dag, or MSCCL .xml) and checks it for the params given; a plan
 * that fails the check does not open (COREDAG_ERR_CHECK, the message has its file:line:col lines).
 * params: the plan's params as "NAME=VALUE" strings, ending with NULL, e.g.
 *     const char *params[] = {"ranks=4", "n=1024", NULL};
 * options: how to run it, "KEY=VALUE" strings ending with NULL (NULL: all defaults), keys:
 *     provider=softnic|ofi|verbs   the NIC: softnic (every rank in this process; default),
 *                                  ofi (libfabric; one process per rank or all here), verbs
 *                                  (one process per rank; in a library built where
 *                                  libibverbs' headers are: scripts/build-lib.sh)
 *     ofi_provider=NAME            libfabric's provider, e.g. shm, sockets, "tcp;ofi_rxm"
 *     ofi_addr=IFACE|IPV4          where endpoints over IP bind: an interface (its first
 *                                  IPv4 address) or an address of this host (default:
 *                                  127.0.0.1 on one host; across hosts the network that
 *                                  joins them, found by coredag_coll_init, else with a
 *                                  NULL world the route to rank 0's COREDAG_BOOTSTRAP;
 *                                  coredag_coll_init refuses other worlds then: give it)
 *     device=NAME                  the RDMA device of provider=verbs, e.g. mlx5_0 (default:
 *                                  the first)
 *     engine=auto|offload|poll     default auto: offload where the NIC can walk the plan
 *     target=NAME                  compile for this target, e.g. triggered-sockets (default:
 *                                  chosen with the engine)
 *     extern=NAME[,NAME...]        more buffers the caller binds, beside those the plan
 *                                  declares extern (an MSCCL .xml algorithm's, older plans')
 *     progress=background|caller   who moves a start across processes: a thread of coredag
 *                                  (default) or coredag_coll_wait on the caller's thread (no
 *                                  thread hand-off; every process must then wait for its
 *                                  collectives in one order, as MPI's blocking collectives)
 *     hang_timeout_ms=N            bound of every wait inside coredag (default: coredag's)
 *     mem=SIZE                     memory budget of opening the plan, e.g. 8GiB: a plan whose
 *                                  checks would need more is refused (COREDAG_ERR_CHECK)
 *                                  (default: COREDAG_MEM, else 80% of what the machine leaves)
 * On success *out is the plan. On error *out is a plan handle that only carries the message
 * (coredag_plan_error), to free with coredag_plan_free; *out is NULL only if out is NULL or memory
 * ran out.
 */
int coredag_plan_open(const char *path, const char *const *params, const char *const *options,
                      coredag_plan **out);
/* The same, on a plan given as text; name is used in messages (file:line:col). */
int coredag_plan_open_source(const char *name, const char *source, const char *const *params,
                             const char *const *options, coredag_plan **out);
/* The plan that the plan set at set_path (docs/predict.md, Plan sets: which plan of a collective
 * serves which message size and world size, as coredag tune writes) picks for a message of nbytes
 * bytes on ranks ranks, opened as coredag_plan_open opens a plan: with the params of the set's
 * line, ranks, then params over them. Unless the line or params set the set's size param (n, or
 * the set's size-param line), it is set so that the plan's collective buffer holds nbytes: n =
 * nbytes / 4 for data f32[n], nbytes / 16 for data f32[ranks * n] on 4 ranks; an nbytes that is
 * not such a multiple gives COREDAG_ERR_ARG and the size to pad to. A set that fails to load (a
 * gap, an overlap, a plan that fails check) gives COREDAG_ERR_CHECK with its positions; a world
 * size or size it does not serve, COREDAG_ERR_ARG. Each call reads the set. */
int coredag_plan_open_set(const char *set_path, size_t nbytes, int ranks, const char *const *params,
                          const char *const *options, coredag_plan **out);
/* The message of the plan's last error, "" if none. */
const char *coredag_plan_error(const coredag_plan *plan);
/* The number of ranks the plan was checked for (0 for a plan handle that failed to open). */
int coredag_plan_ranks(const coredag_plan *plan);
/* The plan's name (its `plan NAME` line; "" for a handle that failed to open): which plan a set
 * picked. Owned by the handle, valid until coredag_plan_free. */
const char *coredag_plan_name(const coredag_plan *plan);
/* The size in bytes of buffer name on one rank in *nbytes. */
int coredag_plan_buffer_size(coredag_plan *plan, const char *buffer, size_t *nbytes);
/* Frees the plan. Refused with COREDAG_ERR_STATE (the handle stays valid) while collectives of
 * the plan are not freed. NULL is a no-op that returns COREDAG_OK. */
int coredag_plan_free(coredag_plan *plan);

/*
 * Joins the plan to a world: every rank checks that all run the same plan, and the provider is
 * opened and the plan compiled for it (the first start then connects the queues and registers
 * the memory, collectively). Every rank
 * of the world calls it. world NULL: coredag's own world, from the launcher's environment
 * (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS) and the bootstrap address in
 * COREDAG_BOOTSTRAP (HOST:PORT, rank 0's host); without a launcher every rank of the plan runs in
 * this process (bind each with coredag_coll_bind_rank). On error *out is a handle that only
 * carries the message, as in coredag_plan_open.
 */
int coredag_coll_init(coredag_plan *plan, const coredag_world *world, coredag_coll **out);
/* Binds extern buffer name of this process's rank to nbytes at addr (exactly its size). */
int coredag_coll_bind(coredag_coll *coll, const char *buffer, void *addr, size_t nbytes);
/* The same for rank rank, when every rank runs in this process (world NULL, no launcher). */
int coredag_coll_bind_rank(coredag_coll *coll, int rank, const char *buffer, void *addr,
                           size_t nbytes);
/* Starts one run of the plan on the bound memory and returns at once. After a run failed, the
 * collective is unusable but for its free: every start returns that failure again. */
int coredag_coll_start(coredag_coll *coll);
/* *done = 1 if the started run has completed (then the memory is the caller's again), else 0. */
int coredag_coll_test(coredag_coll *coll, int *done);
/*
 * Waits until the started run completes: at most timeout_ns nanoseconds (COREDAG_ERR_TIMEOUT
 * if it expires; the run stays started), or, if timeout_ns < 0, until it completes or fails: a
 * run that makes no progress for the plan's hang timeout fails with an error that names the
 * ranks it waits for. A world callback that does not return holds the wait up with it (coredag
 * cannot interrupt one; pass a timeout to keep control).
 */
int coredag_coll_wait(coredag_coll *coll, long long timeout_ns);
/* The message of the collective's last error, "" if none. */
const char *coredag_coll_error(const coredag_coll *coll);
/*
 * Frees the collective. Refused with COREDAG_ERR_STATE while a start is in flight (wait for it
 * first: the bound memory is coredag's until then); the handle is then still valid and holds the
 * message. Any other error (the close's barrier failed, or the provider did not release
 * everything) closes the collective but keeps the handle, to carry the message: free it again
 * to release it. After COREDAG_OK the handle is gone. NULL is a no-op that returns COREDAG_OK.
 */
int coredag_coll_free(coredag_coll *coll);

#ifdef __cplusplus
}
#endif

#endif /* COREDAG_H */
