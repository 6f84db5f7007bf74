/*
 * inprocess.c: a persistent allreduce through coredag with every rank in this process (NULL world,
 * no launcher) on the software NIC: each iteration writes fresh numbers into every rank's array,
 * runs the plan, and compares each element with the sum computed here. No MPI needed.
 *
 *   scripts/build-lib.sh build
 *   cc examples/c/inprocess.c -o inprocess $(PKG_CONFIG_PATH=build/lib/pkgconfig pkg-config --cflags --libs coredag)
 *   ./inprocess plans/ring_allreduce.dag 4 256 100     # PLAN RANKS N ITERS
 *
 * The plan's buffer "data" (f32[ranks * n]) must be extern. Exits 0 and prints "ok" if every
 * element of every iteration matched, 1 on a difference, 2 on a coredag error.
 */
#include <stdio.h>
#include <stdlib.h>

#include <coredag.h>

/* Small integers, so every sum is exact in f32 whatever the order of the additions. */
static float value(int rank, long i, int iter) { return (float)((rank * 7 + i * 3 + iter * 5) % 17 - 8); }

static int die(const char *what, int rc, const char *msg) {
    fprintf(stderr, "inprocess: %s: %s: %s\n", what, coredag_strerror(rc), msg);
    return 2;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s PLAN RANKS N ITERS\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    int ranks = atoi(argv[2]), iters = atoi(argv[4]);
    long n = atol(argv[3]);
    if (ranks < 1 || n < 1 || iters < 1) {
        fprintf(stderr, "inprocess: RANKS, N and ITERS must be positive\n");
        return 2;
    }
    char p_ranks[32], p_n[32];
    snprintf(p_ranks, sizeof p_ranks, "ranks=%d", ranks);
    snprintf(p_n, sizeof p_n, "n=%ld", n);
    const char *params[] = {p_ranks, p_n, NULL};

    coredag_plan *plan;
    int rc = coredag_plan_open(path, params, NULL, &plan);
    if (rc != COREDAG_OK) {
        int r = die("coredag_plan_open", rc, coredag_plan_error(plan));
        coredag_plan_free(plan);
        return r;
    }
    coredag_coll *coll;
    rc = coredag_coll_init(plan, NULL, &coll);
    if (rc != COREDAG_OK) {
        int r = die("coredag_coll_init", rc, coredag_coll_error(coll));
        coredag_coll_free(coll);
        coredag_plan_free(plan);
        return r;
    }
    long count = (long)ranks * n;
    float **data = calloc((size_t)ranks, sizeof *data);
    float *want = calloc((size_t)count, sizeof *want);
    for (int r = 0; r < ranks; r++) {
        data[r] = calloc((size_t)count, sizeof(float));
        rc = coredag_coll_bind_rank(coll, r, "data", data[r], (size_t)count * sizeof(float));
        if (rc != COREDAG_OK) return die("coredag_coll_bind_rank", rc, coredag_coll_error(coll));
    }
    long bad = 0;
    for (int it = 0; it < iters; it++) {
        for (long i = 0; i < count; i++) {
            want[i] = 0;
            for (int r = 0; r < ranks; r++) {
                data[r][i] = value(r, i, it);
                want[i] += data[r][i];
            }
        }
        if ((rc = coredag_coll_start(coll)) != COREDAG_OK) return die("coredag_coll_start", rc, coredag_coll_error(coll));
        if ((rc = coredag_coll_wait(coll, -1)) != COREDAG_OK) return die("coredag_coll_wait", rc, coredag_coll_error(coll));
        for (int r = 0; r < ranks; r++) {
            for (long i = 0; i < count; i++) {
                if (data[r][i] != want[i] && bad++ < 5)
                    fprintf(stderr, "inprocess: iteration %d rank %d element %ld: %g, want %g\n", it, r, i, data[r][i], want[i]);
            }
        }
    }
    if ((rc = coredag_coll_free(coll)) != COREDAG_OK) return die("coredag_coll_free", rc, "");
    if ((rc = coredag_plan_free(plan)) != COREDAG_OK) return die("coredag_plan_free", rc, "");
    for (int r = 0; r < ranks; r++) free(data[r]);
    free(data);
    free(want);
    if (bad > 0) {
        printf("FAIL: %ld differences in %d iterations of %d ranks x %ld elements\n", bad, iters, ranks, count);
        return 1;
    }
    printf("ok: %d iterations of %d ranks x %ld f32 elements, every element equal to the sum\n", iters, ranks, count);
    return 0;
}
