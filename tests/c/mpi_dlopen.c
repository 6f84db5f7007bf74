/*
 * mpi_dlopen.c: libcoredag.so loaded into a process that already runs Open MPI. MPI_Init first,
 * then dlopen of the library (Go's runtime starts then, beside Open MPI's threads and signal
 * handlers), then a plan on MPI's world, and a misuse that panics inside coredag's Go code (a
 * plan handle passed as a collective): it must come back as COREDAG_ERR_INTERNAL, not kill the
 * process. scripts/mpi-example.sh runs it under mpirun -np 2:
 *
 *   mpicc tests/c/mpi_dlopen.c -o mpi_dlopen -ldl $(pkg-config --cflags coredag)
 *   mpirun -np 2 ./mpi_dlopen PREFIX/lib/libcoredag.so
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include <coredag.h>

static int world_allgather(const void *send, void *recv, size_t nbytes, void *ctx) {
    return MPI_Allgather(send, (int)nbytes, MPI_BYTE, recv, (int)nbytes, MPI_BYTE, *(MPI_Comm *)ctx) == MPI_SUCCESS ? 0 : -1;
}
static int world_barrier(void *ctx) { return MPI_Barrier(*(MPI_Comm *)ctx) == MPI_SUCCESS ? 0 : -1; }

/* Two ranks swap their vectors and each adds the other's to its own. */
static const char *pair_src =
    "plan pair\n"
    "param ranks = 2\n"
    "param n = 4\n"
    "buffer data f32[n] extern\n"
    "buffer tmp  f32[n]\n"
    "queue link to 1 - rank\n"
    "op tx  = send link data\n"
    "op rx  = recv link tmp\n"
    "op acc = reduce sum data from tmp after rx, tx\n";

#define SYM(name) __typeof__(&name) p_##name = (__typeof__(&name))dlsym(lib, #name)

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 2 || size != 2 || provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -np 2 %s PATH/libcoredag.so (and MPI_THREAD_MULTIPLE)\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "rank %d: dlopen: %s\n", rank, dlerror());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    SYM(coredag_plan_open_source);
    SYM(coredag_plan_error);
    SYM(coredag_plan_free);
    SYM(coredag_coll_init);
    SYM(coredag_coll_bind);
    SYM(coredag_coll_start);
    SYM(coredag_coll_wait);
    SYM(coredag_coll_error);
    SYM(coredag_coll_free);
    SYM(coredag_strerror);
    if (!p_coredag_plan_open_source || !p_coredag_coll_free || !p_coredag_strerror) {
        fprintf(stderr, "rank %d: dlsym: %s\n", rank, dlerror());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int failures = 0;
    const char *opts[] = {"provider=ofi", "ofi_provider=shm", "engine=poll", NULL};
    coredag_plan *plan;
    coredag_coll *coll;
    int rc = p_coredag_plan_open_source("pair.dag", pair_src, NULL, opts, &plan);
    if (rc != COREDAG_OK) {
        fprintf(stderr, "rank %d: open: %s: %s\n", rank, p_coredag_strerror(rc), p_coredag_plan_error(plan));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    coredag_world world = {rank, size, world_allgather, world_barrier, &comm};
    rc = p_coredag_coll_init(plan, &world, &coll);
    if (rc != COREDAG_OK) {
        fprintf(stderr, "rank %d: init: %s: %s\n", rank, p_coredag_strerror(rc), p_coredag_coll_error(coll));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float data[4];
    rc = p_coredag_coll_bind(coll, "data", data, sizeof data);
    for (int it = 0; rc == COREDAG_OK && it < 20; it++) {
        for (int i = 0; i < 4; i++) data[i] = (float)(rank * 10 + i + it);
        if ((rc = p_coredag_coll_start(coll)) == COREDAG_OK) rc = p_coredag_coll_wait(coll, -1);
        for (int i = 0; rc == COREDAG_OK && i < 4; i++) failures += data[i] != (float)(10 + 2 * (i + it));
    }
    if (rc != COREDAG_OK) {
        fprintf(stderr, "rank %d: run: %s: %s\n", rank, p_coredag_strerror(rc), p_coredag_coll_error(coll));
        failures++;
    }
    /* A panic inside coredag's Go code, in a process running Open MPI. */
    rc = p_coredag_coll_start((coredag_coll *)plan);
    const char *msg = p_coredag_plan_error(plan);
    if (rc != COREDAG_ERR_INTERNAL || strstr(msg, "internal error") == NULL) {
        fprintf(stderr, "rank %d: a wrong handle: %s, want COREDAG_ERR_INTERNAL: %s\n", rank, p_coredag_strerror(rc), msg);
        failures++;
    }
    if ((rc = p_coredag_coll_free(coll)) != COREDAG_OK || (rc = p_coredag_plan_free(plan)) != COREDAG_OK) {
        fprintf(stderr, "rank %d: free: %s\n", rank, p_coredag_strerror(rc));
        failures++;
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf(total == 0 ? "ok: dlopen after MPI_Init, 20 runs on MPI's world, a panic recovered as COREDAG_ERR_INTERNAL\n"
                          : "FAIL: %d failures\n", total);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}
