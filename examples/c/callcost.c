/*
 * callcost.c: what one coredag_coll_start + coredag_coll_wait costs from C on an empty plan (one
 * rank, one buffer, no op) and on a trivial one (one host copy of one f32): the price of the call
 * path (C -> Go -> the engine's goroutine -> back). Measured on a NULL world (the rank in this
 * process) and on a world of C callbacks with one rank (whose barriers then call back into C).
 * Compare with the Go API's own cost: go test -run '^$' -bench 'StartWait/empty' .
 *
 *   ./callcost [ITERS]      # default 200000; prints nanoseconds per start+wait, best of 5 rounds
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <coredag.h>

static const char *empty_src =
    "plan empty\n"
    "param ranks = 1\n"
    "buffer a f32[1] extern\n";

static const char *copy_src =
    "plan trivial\n"
    "param ranks = 1\n"
    "buffer a f32[1] extern\n"
    "buffer b f32[1] extern\n"
    "op cp = copy a to b\n";

static int gather_one(const void *send, void *recv, size_t nbytes, void *ctx) {
    (void)ctx;
    memcpy(recv, send, nbytes);
    return 0;
}
static int barrier_one(void *ctx) {
    (void)ctx;
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int measure(const char *name, const char *src, const coredag_world *world, long iters) {
    coredag_plan *plan;
    coredag_coll *coll;
    int rc = coredag_plan_open_source("callcost.dag", src, NULL, NULL, &plan);
    if (rc != COREDAG_OK) {
        fprintf(stderr, "open: %s: %s\n", coredag_strerror(rc), coredag_plan_error(plan));
        return 2;
    }
    rc = coredag_coll_init(plan, world, &coll);
    if (rc != COREDAG_OK) {
        fprintf(stderr, "init: %s: %s\n", coredag_strerror(rc), coredag_coll_error(coll));
        return 2;
    }
    float a = 1, b = 0;
    int copies = src == copy_src;
    if ((rc = coredag_coll_bind(coll, "a", &a, sizeof a)) != COREDAG_OK || (copies && (rc = coredag_coll_bind(coll, "b", &b, sizeof b)) != COREDAG_OK)) {
        fprintf(stderr, "bind: %s: %s\n", coredag_strerror(rc), coredag_coll_error(coll));
        return 2;
    }
    double best = 1e30;
    for (int round = 0; round < 6; round++) {
        double t0 = now();
        for (long i = 0; i < iters; i++) {
            a = (float)(i & 1023);
            if ((rc = coredag_coll_start(coll)) != COREDAG_OK || (rc = coredag_coll_wait(coll, -1)) != COREDAG_OK) {
                fprintf(stderr, "run %ld: %s: %s\n", i, coredag_strerror(rc), coredag_coll_error(coll));
                return 2;
            }
            if (copies && b != a) {
                fprintf(stderr, "run %ld: b = %g, want %g\n", i, b, a);
                return 1;
            }
        }
        double per = (now() - t0) / (double)iters;
        if (round > 0 && per < best) best = per; /* round 0 warms up (first start connects) */
    }
    printf("%-40s %8.0f ns per start+wait (best of 5 rounds of %ld)\n", name, best * 1e9, iters);
    coredag_coll_free(coll);
    coredag_plan_free(plan);
    return 0;
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    if (iters < 1) return 2;
    coredag_world one = {0, 1, gather_one, barrier_one, NULL};
    int rc = measure("empty plan, NULL world (in process)", empty_src, NULL, iters);
    if (rc == 0) rc = measure("empty plan, C world of one rank", empty_src, &one, iters);
    if (rc == 0) rc = measure("one f32 copy, NULL world (in process)", copy_src, NULL, iters);
    return rc;
}
