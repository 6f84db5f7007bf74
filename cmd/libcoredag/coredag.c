// The C entry points of coredag.h. Each is a thin shim over a Go export of main.go (cdgo_*), so
// the compiler checks the public prototypes here against the header, const qualifiers included,
// which cgo's generated prototypes cannot express.

#include <stdlib.h>
#include "libcoredag.h"
#include "_cgo_export.h"

int cdg_world_allgather(const coredag_world *w, const void *send, void *recv, size_t nbytes) {
    return w->allgather(send, recv, nbytes, w->ctx);
}

int cdg_world_barrier(const coredag_world *w) { return w->barrier(w->ctx); }

const char *coredag_strerror(int code) {
    switch (code) {
    case COREDAG_OK: return "COREDAG_OK";
    case COREDAG_ERR_CHECK: return "COREDAG_ERR_CHECK";
    case COREDAG_ERR_ARG: return "COREDAG_ERR_ARG";
    case COREDAG_ERR_STATE: return "COREDAG_ERR_STATE";
    case COREDAG_ERR_WORLD: return "COREDAG_ERR_WORLD";
    case COREDAG_ERR_TIMEOUT: return "COREDAG_ERR_TIMEOUT";
    case COREDAG_ERR_PROVIDER: return "COREDAG_ERR_PROVIDER";
    case COREDAG_ERR_INTERNAL: return "COREDAG_ERR_INTERNAL";
    case COREDAG_ERR_LIMIT: return "COREDAG_ERR_LIMIT";
    }
    return "unknown";
}

int coredag_plan_open(const char *path, const char *const *params, const char *const *options,
                      coredag_plan **out) {
    return cdgo_plan_open((char *)path, NULL, 0, (char **)params, (char **)options, out);
}

int coredag_plan_open_source(const char *name, const char *source, const char *const *params,
                             const char *const *options, coredag_plan **out) {
    return cdgo_plan_open((char *)name, (char *)source, 1, (char **)params, (char **)options, out);
}

int coredag_plan_open_set(const char *set_path, size_t nbytes, int ranks, const char *const *params,
                          const char *const *options, coredag_plan **out) {
    return cdgo_plan_open_set((char *)set_path, nbytes, ranks, (char **)params, (char **)options, out);
}

const char *coredag_plan_error(const coredag_plan *plan) {
    if (plan == NULL) return "coredag_plan_error: the plan is NULL";
    return plan->err != NULL ? plan->err : "";
}

int coredag_plan_ranks(const coredag_plan *plan) { return cdgo_plan_ranks((coredag_plan *)plan); }

const char *coredag_plan_name(const coredag_plan *plan) {
    return plan != NULL && plan->name != NULL ? plan->name : "";
}

int coredag_plan_buffer_size(coredag_plan *plan, const char *buffer, size_t *nbytes) {
    return cdgo_plan_buffer_size(plan, (char *)buffer, nbytes);
}

int coredag_plan_free(coredag_plan *plan) { return cdgo_plan_free(plan); }

int coredag_coll_init(coredag_plan *plan, const coredag_world *world, coredag_coll **out) {
    return cdgo_coll_init(plan, (coredag_world *)world, out);
}

int coredag_coll_bind(coredag_coll *coll, const char *buffer, void *addr, size_t nbytes) {
    return cdgo_coll_bind(coll, 1, 0, (char *)buffer, addr, nbytes);
}

int coredag_coll_bind_rank(coredag_coll *coll, int rank, const char *buffer, void *addr,
                           size_t nbytes) {
    return cdgo_coll_bind(coll, 0, rank, (char *)buffer, addr, nbytes);
}

int coredag_coll_start(coredag_coll *coll) { return cdgo_coll_start(coll); }

int coredag_coll_test(coredag_coll *coll, int *done) { return cdgo_coll_test(coll, done); }

int coredag_coll_wait(coredag_coll *coll, long long timeout_ns) {
    return cdgo_coll_wait(coll, timeout_ns);
}

const char *coredag_coll_error(const coredag_coll *coll) {
    if (coll == NULL) return "coredag_coll_error: the collective is NULL";
    return coll->err != NULL ? coll->err : "";
}

int coredag_coll_free(coredag_coll *coll) { return cdgo_coll_free(coll); }
