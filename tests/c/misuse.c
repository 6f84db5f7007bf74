/*
 * misuse.c: coredag's C interface used wrongly, one case after another; each must return the
 * documented code with a message that says what went wrong, and the process must live on. Also
 * runs the right uses the cases are built around: a 1-rank plan on a world of C callbacks, and a
 * 2-rank plan with both ranks in this process. No MPI. cmd/libcoredag's TestC builds and runs it:
 *
 *   scripts/build-lib.sh build
 *   cc tests/c/misuse.c -o misuse $(PKG_CONFIG_PATH=build/lib/pkgconfig pkg-config --cflags --libs coredag)
 *   ./misuse
 *
 * Prints one line per case ("ok CASE: CODE: message" or "FAIL CASE: ..."), exits 1 if any failed.
 * "./misuse launcher" runs only the case of a NULL world under launcher variables that make no
 * sense (TestC sets them: the library reads its environment when it loads).
 */
#define _POSIX_C_SOURCE 200112L /* nanosleep, pthread_barrier_t */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <coredag.h>

static int failures;

/* expect checks that rc is want and that msg contains every one of the NULL-ended words. The
 * message must be read after the call that set it: a handle's message is freed at its next call,
 * hence the "rc = call; expect(rc, error(handle))" order below (C leaves the order in which a
 * function's arguments are evaluated open). */
static void expect(const char *name, int rc, int want, const char *msg, const char *const *words) {
    if (msg == NULL) msg = "(NULL message)";
    if (rc != want) {
        printf("FAIL %s: got %s, want %s: %s\n", name, coredag_strerror(rc), coredag_strerror(want), msg);
        failures++;
        return;
    }
    for (const char *const *w = words; w != NULL && *w != NULL; w++) {
        if (strstr(msg, *w) == NULL) {
            printf("FAIL %s: %s, but the message lacks %s: %s\n", name, coredag_strerror(rc), *w, msg);
            failures++;
            return;
        }
    }
    if (rc == COREDAG_OK) {
        printf("ok %s\n", name); /* msg is the handle's last error, not this call's */
        return;
    }
    /* First line only: a check error can have several. */
    int len = (int)strcspn(msg, "\n");
    printf("ok %s: %s: %.*s\n", name, coredag_strerror(rc), len, msg);
}
#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A 1-rank plan: copy src to dst. */
static const char *copy_src =
    "plan local_copy\n"
    "param ranks = 1\n"
    "param n = 8\n"
    "buffer src f32[n] extern init i\n"
    "buffer dst f32[n] extern\n"
    "op cp = copy src to dst\n";

/* Two ranks swap their vectors and each adds the other's to its own. */
static const char *pair_src =
    "plan pair\n"
    "param ranks = 2\n"
    "param n = 4\n"
    "buffer data f32[n] extern init rank + i\n"
    "buffer tmp  f32[n]\n"
    "queue link to 1 - rank\n"
    "op tx  = send link data\n"
    "op rx  = recv link tmp\n"
    "op acc = reduce sum data from tmp after rx, tx\n";

/* A world of one process: the allgather is a copy, the barrier nothing. ctx counts the calls. */
static int gather_one(const void *send, void *recv, size_t nbytes, void *ctx) {
    memcpy(recv, send, nbytes);
    ++*(int *)ctx;
    return 0;
}
static int barrier_one(void *ctx) {
    ++*(int *)ctx;
    return 0;
}
static int gather_fail(const void *send, void *recv, size_t nbytes, void *ctx) {
    (void)send, (void)recv, (void)nbytes, (void)ctx;
    return 42;
}

/* A world of one whose allgather is slow (ctx->sleep_ms) or fails (ctx->fail, once armed). */
typedef struct {
    int sleep_ms, fail;
} slow;
static int gather_slow(const void *send, void *recv, size_t nbytes, void *ctx) {
    slow *s = ctx;
    struct timespec ts = {s->sleep_ms / 1000, (long)(s->sleep_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    memcpy(recv, send, nbytes);
    return s->fail;
}
static int barrier_slow(void *ctx) {
    (void)ctx;
    return 0;
}

/* copy_src with a buffer peers may write: every start begins with an allgather (it tells every
 * process of a rebinding), which a plan of two-sided messages and host steps does without. */
static const char *copy_remote_src =
    "plan local_copy\n"
    "param ranks = 1\n"
    "param n = 8\n"
    "buffer src f32[n] extern init i\n"
    "buffer dst f32[n] extern remote_write\n"
    "op cp = copy src to dst\n";

/* A watched u64 word that the adds of three starts take to the top of its type: nothing resets
 * it between starts, so the fourth would wrap it. */
static const char *word_src =
    "plan word_limit\n"
    "param ranks = 2\n"
    "buffer word u64[1] remote_atomic\n"
    "queue q to 1 - rank peer q\n"
    "if rank == 1 {\n"
    "  op bump = atomic add q word[0] 4611686018427387904\n"
    "}\n"
    "if rank == 0 {\n"
    "  op got = wait word[0] >= 1\n"
    "}\n";

static coredag_plan *open_ok(const char *name, const char *src) {
    coredag_plan *p;
    int rc = coredag_plan_open_source(name, src, NULL, NULL, &p);
    if (rc != COREDAG_OK) {
        printf("FAIL open %s: %s: %s\n", name, coredag_strerror(rc), coredag_plan_error(p));
        exit(1);
    }
    return p;
}

static void null_arguments(void) {
    coredag_plan *p = NULL;
    coredag_coll *c = NULL;
    int done;
    expect("plan_open out NULL", coredag_plan_open("x.dag", NULL, NULL, NULL), COREDAG_ERR_ARG, "", NULL);
    int rc = coredag_plan_open(NULL, NULL, NULL, &p);
    expect("plan_open path NULL", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("path is NULL"));
    coredag_plan_free(p);
    rc = coredag_plan_open_source("x.dag", NULL, NULL, NULL, &p);
    expect("plan_open_source source NULL", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("source is NULL"));
    coredag_plan_free(p);
    expect("plan_error NULL", COREDAG_ERR_ARG, COREDAG_ERR_ARG, coredag_plan_error(NULL), WORDS("NULL"));
    expect("coll_error NULL", COREDAG_ERR_ARG, COREDAG_ERR_ARG, coredag_coll_error(NULL), WORDS("NULL"));
    expect("plan_free NULL", coredag_plan_free(NULL), COREDAG_OK, "", NULL);
    expect("coll_free NULL", coredag_coll_free(NULL), COREDAG_OK, "", NULL);
    expect("coll_start NULL", coredag_coll_start(NULL), COREDAG_ERR_ARG, "", NULL);
    expect("coll_test NULL", coredag_coll_test(NULL, &done), COREDAG_ERR_ARG, "", NULL);
    expect("coll_wait NULL", coredag_coll_wait(NULL, -1), COREDAG_ERR_ARG, "", NULL);
    expect("coll_bind NULL", coredag_coll_bind(NULL, "data", &done, sizeof done), COREDAG_ERR_ARG, "", NULL);
    expect("plan_ranks NULL", coredag_plan_ranks(NULL), 0, "", NULL);
    rc = coredag_coll_init(NULL, NULL, &c);
    expect("coll_init plan NULL", rc, COREDAG_ERR_ARG, coredag_coll_error(c), WORDS("plan is NULL"));
    coredag_coll_free(c);
    expect("coll_init out NULL", coredag_coll_init(NULL, NULL, NULL), COREDAG_ERR_ARG, "", NULL);

    p = open_ok("copy.dag", copy_src);
    expect("plan_ranks", coredag_plan_ranks(p) == 1 ? COREDAG_OK : COREDAG_ERR_INTERNAL, COREDAG_OK, "", NULL);
    size_t nbytes = 0;
    rc = coredag_plan_buffer_size(p, "src", NULL);
    expect("plan_buffer_size nbytes NULL", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("NULL"));
    rc = coredag_plan_buffer_size(p, "nosuch", &nbytes);
    expect("plan_buffer_size unknown buffer", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("nosuch", "src", "dst"));
    rc = coredag_plan_buffer_size(p, "src", &nbytes);
    expect("plan_buffer_size", rc == COREDAG_OK && nbytes == 32 ? COREDAG_OK : COREDAG_ERR_INTERNAL, COREDAG_OK, "32 bytes", NULL);
    int calls = 0;
    coredag_world w = {0, 1, gather_one, barrier_one, &calls};
    rc = coredag_coll_init(p, &w, &c);
    expect("coll_init on a world of one", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    rc = coredag_coll_bind(c, NULL, &done, 4);
    expect("coll_bind buffer NULL", rc, COREDAG_ERR_ARG, coredag_coll_error(c), WORDS("NULL"));
    rc = coredag_coll_bind(c, "src", NULL, 32);
    expect("coll_bind addr NULL", rc, COREDAG_ERR_ARG, coredag_coll_error(c), WORDS("NULL"));
    rc = coredag_coll_test(c, NULL);
    expect("coll_test done NULL", rc, COREDAG_ERR_ARG, coredag_coll_error(c), WORDS("NULL"));
    /* A handle of the wrong kind: coredag cannot tell from C, its Go side panics on it, and the
     * panic must come back as COREDAG_ERR_INTERNAL rather than crash this process. */
    rc = coredag_coll_start((coredag_coll *)p);
    expect("plan passed as a collective", rc, COREDAG_ERR_INTERNAL, coredag_plan_error(p), WORDS("internal error", "coredag_coll_start"));
    rc = coredag_plan_free(p);
    expect("plan_free before coll_free", rc, COREDAG_ERR_STATE, coredag_plan_error(p), WORDS("coredag_coll_free"));
    expect("coll_free", coredag_coll_free(c), COREDAG_OK, "", NULL);
    expect("plan_free", coredag_plan_free(p), COREDAG_OK, "", NULL);
}

static void bad_plans(void) {
    coredag_plan *p;
    const char *bad = "plan bad\nparam ranks = 1\nbuffer a f32[4] extern\nop x = copy a[0:4] to b\n";
    int rc = coredag_plan_open_source("bad.dag", bad, NULL, NULL, &p);
    expect("plan that fails check", rc, COREDAG_ERR_CHECK, coredag_plan_error(p), WORDS("bad.dag:4:"));
    coredag_coll *c;
    rc = coredag_coll_init(p, NULL, &c);
    expect("coll_init of a plan that did not open", rc, COREDAG_ERR_STATE, coredag_coll_error(c), WORDS("did not open"));
    coredag_coll_free(c);
    coredag_plan_free(p);
    rc = coredag_plan_open("/nonexistent/plan.dag", NULL, NULL, &p);
    expect("plan file missing", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("/nonexistent/plan.dag"));
    coredag_plan_free(p);
    rc = coredag_plan_open_source("copy.dag", copy_src, WORDS("n"), NULL, &p);
    expect("param without value", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("params[0]", "NAME=VALUE"));
    coredag_plan_free(p);
    rc = coredag_plan_open_source("copy.dag", copy_src, WORDS("n=eight"), NULL, &p);
    expect("param not an integer", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("n=eight", "integer"));
    coredag_plan_free(p);
    rc = coredag_plan_open_source("copy.dag", copy_src, NULL, WORDS("color=blue"), &p);
    expect("unknown option", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("color", "provider"));
    coredag_plan_free(p);
    rc = coredag_plan_open_source("copy.dag", copy_src, NULL, WORDS("provider=verbs", "device=mlx5_0"), &p);
    expect("device option", rc, COREDAG_OK, coredag_plan_error(p), NULL);
    coredag_plan_free(p);
    rc = coredag_plan_open_source("copy.dag", copy_src, NULL, WORDS("extern=nosuch"), &p);
    expect("extern option names no buffer", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("nosuch"));
    coredag_plan_free(p);
    rc = coredag_plan_open_source("copy.dag", copy_src, WORDS("n=8", "n=16"), NULL, &p);
    expect("param given twice", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("params[1]", "n is given twice"));
    coredag_plan_free(p);
    rc = coredag_plan_open_source("copy.dag", copy_src, NULL, WORDS("hang_timeout_ms=-1"), &p);
    expect("bad hang timeout", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("hang_timeout_ms"));
    coredag_plan_free(p);
    rc = coredag_plan_open_source("copy.dag", copy_src, NULL, WORDS("mem=lots"), &p);
    expect("bad memory budget", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("mem=lots", "8GiB"));
    coredag_plan_free(p);
    rc = coredag_plan_open_source("copy.dag", copy_src, NULL, WORDS("mem=1"), &p);
    expect("memory budget too small", rc, COREDAG_ERR_CHECK, coredag_plan_error(p), WORDS("the memory budget is 1 byte", "mem=2KiB"));
    coredag_plan_free(p);
}

static void world_errors(void) {
    coredag_plan *p = open_ok("pair.dag", pair_src);
    coredag_coll *c;
    int calls = 0;
    coredag_world one = {0, 1, gather_one, barrier_one, &calls};
    int rc = coredag_coll_init(p, &one, &c);
    expect("world size differs from plan ranks", rc, COREDAG_ERR_WORLD, coredag_coll_error(c), WORDS("1 ranks", "has 2"));
    rc = coredag_coll_start(c);
    expect("start of a collective that did not initialize", rc, COREDAG_ERR_STATE, coredag_coll_error(c), WORDS("1 ranks", "has 2"));
    coredag_coll_free(c);
    coredag_world noback = {0, 1, NULL, barrier_one, &calls};
    rc = coredag_coll_init(p, &noback, &c);
    expect("world without allgather", rc, COREDAG_ERR_ARG, coredag_coll_error(c), WORDS("allgather"));
    coredag_coll_free(c);
    coredag_world outside = {3, 2, gather_one, barrier_one, &calls};
    rc = coredag_coll_init(p, &outside, &c);
    expect("world rank outside size", rc, COREDAG_ERR_ARG, coredag_coll_error(c), WORDS("rank 3"));
    coredag_coll_free(c);
    coredag_plan_free(p);

    p = open_ok("copy.dag", copy_src);
    coredag_world failing = {0, 1, gather_fail, barrier_one, &calls};
    rc = coredag_coll_init(p, &failing, &c);
    expect("world allgather fails", rc, COREDAG_ERR_WORLD, coredag_coll_error(c), WORDS("42"));
    coredag_coll_free(c);
    coredag_plan_free(p);
}

/* The 1-rank plan on a world of callbacks, run right, then wrongly. */
static void lifecycle_one(void) {
    coredag_plan *p = open_ok("copy.dag", copy_src);
    coredag_coll *c;
    int calls = 0;
    coredag_world w = {0, 1, gather_one, barrier_one, &calls};
    int rc = coredag_coll_init(p, &w, &c);
    expect("coll_init", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    float src[8], dst[8], big[9];
    rc = coredag_coll_start(c);
    expect("start before bind", rc, COREDAG_ERR_STATE, coredag_coll_error(c), WORDS("src"));
    rc = coredag_coll_bind(c, "src", big, sizeof big);
    expect("bind of the wrong size", rc, COREDAG_ERR_ARG, coredag_coll_error(c), WORDS("src", "copy.dag:4:"));
    rc = coredag_coll_bind(c, "nosuch", src, sizeof src);
    expect("bind of an unknown buffer", rc, COREDAG_ERR_ARG, coredag_coll_error(c), WORDS("nosuch"));
    rc = coredag_coll_bind(c, "src", src, sizeof src);
    expect("bind src", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    rc = coredag_coll_start(c);
    expect("start with dst unbound", rc, COREDAG_ERR_STATE, coredag_coll_error(c), WORDS("dst"));
    rc = coredag_coll_bind(c, "dst", dst, sizeof dst);
    expect("bind dst", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    int bad = 0;
    for (int it = 0; it < 3; it++) {
        for (int i = 0; i < 8; i++) src[i] = (float)(it * 8 + i), dst[i] = -1;
        if ((rc = coredag_coll_start(c)) != COREDAG_OK) break;
        if ((rc = coredag_coll_wait(c, -1)) != COREDAG_OK) break;
        for (int i = 0; i < 8; i++) bad += dst[i] != src[i];
    }
    expect("three runs copy src to dst", rc == COREDAG_OK && bad == 0 ? COREDAG_OK : COREDAG_ERR_INTERNAL, COREDAG_OK,
           coredag_coll_error(c), NULL);
    rc = coredag_coll_start(c);
    expect("start", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    rc = coredag_coll_start(c);
    expect("second start before wait", rc, COREDAG_ERR_STATE, coredag_coll_error(c), NULL);
    rc = coredag_coll_free(c);
    expect("free during a start", rc, COREDAG_ERR_STATE, coredag_coll_error(c), WORDS("in flight", "coredag_coll_wait"));
    rc = coredag_coll_wait(c, -1);
    expect("wait after the refused free", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    int done = 0;
    rc = coredag_coll_test(c, &done);
    expect("test after wait", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    printf("%s world callbacks called (%d calls)\n", calls > 0 ? "ok" : "FAIL", calls);
    failures += calls == 0;
    expect("coll_free", coredag_coll_free(c), COREDAG_OK, "", NULL);
    expect("plan_free", coredag_plan_free(p), COREDAG_OK, "", NULL);
}

/* The start past the most a plan allows: COREDAG_ERR_LIMIT, naming the word; a collective made
 * anew starts over. */
static void iteration_limit(void) {
    coredag_plan *p = open_ok("word.dag", word_src);
    for (int round = 0; round < 2; round++) {
        coredag_coll *c;
        int rc = coredag_coll_init(p, NULL, &c);
        expect(round ? "coll_init again" : "coll_init of the word plan", rc, COREDAG_OK, coredag_coll_error(c), NULL);
        for (int it = 0; it < 3 && rc == COREDAG_OK; it++) {
            if ((rc = coredag_coll_start(c)) == COREDAG_OK) rc = coredag_coll_wait(c, -1);
        }
        expect(round ? "three starts of a new collective" : "three starts", rc, COREDAG_OK, coredag_coll_error(c), NULL);
        rc = coredag_coll_start(c);
        expect(round ? "start past the iteration limit again" : "start past the iteration limit", rc, COREDAG_ERR_LIMIT,
               coredag_coll_error(c), WORDS("4 iterations would wrap word", "at most 3 iterations fit"));
        expect("coll_free", coredag_coll_free(c), COREDAG_OK, "", NULL);
    }
    expect("plan_free", coredag_plan_free(p), COREDAG_OK, "", NULL);
}

/* The 2-rank plan with both ranks in this process (NULL world, no launcher). */
static void lifecycle_two(void) {
    coredag_plan *p = open_ok("pair.dag", pair_src);
    coredag_coll *c;
    int rc = coredag_coll_init(p, NULL, &c);
    expect("coll_init NULL world", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    float a[4], b[4];
    rc = coredag_coll_bind_rank(c, 0, "data", a, sizeof a);
    expect("bind rank 0", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    rc = coredag_coll_start(c);
    expect("start with rank 1 unbound", rc, COREDAG_ERR_STATE, coredag_coll_error(c), WORDS("data"));
    rc = coredag_coll_bind_rank(c, 2, "data", b, sizeof b);
    expect("bind rank outside the plan", rc, COREDAG_ERR_ARG, coredag_coll_error(c), WORDS("2"));
    rc = coredag_coll_bind_rank(c, 1, "data", (void *)(uintptr_t)0xfffffffffffff000ULL, 1 << 20);
    expect("bind past the end of the address space", rc, COREDAG_ERR_ARG, coredag_coll_error(c), WORDS("address space"));
    rc = coredag_coll_bind_rank(c, 1, "data", b, sizeof b);
    expect("bind rank 1", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    int bad = 0;
    for (int it = 0; it < 5; it++) {
        for (int i = 0; i < 4; i++) a[i] = (float)(i + it), b[i] = (float)(10 * i - it);
        if ((rc = coredag_coll_start(c)) != COREDAG_OK) break;
        int done = 0;
        while ((rc = coredag_coll_test(c, &done)) == COREDAG_OK && !done) {
        }
        if (rc != COREDAG_OK) break;
        for (int i = 0; i < 4; i++) bad += a[i] != (float)(11 * i) || b[i] != (float)(11 * i);
    }
    expect("five runs, tested to completion", rc == COREDAG_OK && bad == 0 ? COREDAG_OK : COREDAG_ERR_INTERNAL, COREDAG_OK,
           coredag_coll_error(c), NULL);
    rc = coredag_coll_start(c);
    expect("start", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    rc = coredag_coll_bind_rank(c, 0, "data", a, sizeof a);
    expect("bind during a start", rc, COREDAG_ERR_STATE, coredag_coll_error(c), NULL);
    rc = coredag_coll_wait(c, 10LL * 1000 * 1000 * 1000);
    expect("wait with a timeout", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    expect("coll_free", coredag_coll_free(c), COREDAG_OK, "", NULL);
    expect("plan_free", coredag_plan_free(p), COREDAG_OK, "", NULL);
}

/* A start whose world is slow: a wait with a short timeout returns COREDAG_ERR_TIMEOUT with the
 * start still in flight; a world whose allgather fails fails the start with COREDAG_ERR_WORLD. */
static void slow_world(void) {
    coredag_plan *p = open_ok("copy.dag", copy_remote_src);
    coredag_coll *c;
    slow s = {0, 0};
    coredag_world w = {0, 1, gather_slow, barrier_slow, &s};
    int rc = coredag_coll_init(p, &w, &c);
    expect("init on a slow world", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    float src[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dst[8];
    coredag_coll_bind(c, "src", src, sizeof src);
    coredag_coll_bind(c, "dst", dst, sizeof dst);
    rc = coredag_coll_start(c);
    if (rc == COREDAG_OK) rc = coredag_coll_wait(c, -1); /* the first start connects */
    expect("first run", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    s.sleep_ms = 300;
    rc = coredag_coll_start(c);
    expect("start on a slow world", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    rc = coredag_coll_wait(c, 10 * 1000 * 1000);
    expect("wait 10 ms for a start that takes 300", rc, COREDAG_ERR_TIMEOUT, coredag_coll_error(c), WORDS("still in flight"));
    rc = coredag_coll_free(c);
    expect("free after the timeout", rc, COREDAG_ERR_STATE, coredag_coll_error(c), WORDS("in flight"));
    rc = coredag_coll_wait(c, -1);
    expect("wait again until done", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    s.sleep_ms = 0;
    s.fail = 7;
    rc = coredag_coll_start(c);
    if (rc == COREDAG_OK) rc = coredag_coll_wait(c, -1);
    expect("an allgather that fails in a start", rc, COREDAG_ERR_WORLD, coredag_coll_error(c), WORDS("7"));
    rc = coredag_coll_start(c);
    expect("start after a failed start: the failure again", rc, COREDAG_ERR_WORLD, coredag_coll_error(c), WORDS("returned 7"));
    expect("coll_free after a failed start", coredag_coll_free(c), COREDAG_OK, "", NULL);
    expect("plan_free", coredag_plan_free(p), COREDAG_OK, "", NULL);
}

/* A start that fails, polled with coredag_coll_wait(c, 0): every trial must report the failure,
 * never COREDAG_OK (the wait's deadline and the start's end come together, in either order). */
static void poll_failure(void) {
    coredag_plan *p = open_ok("copy.dag", copy_remote_src);
    int ok = 0, world = 0, other = 0;
    for (int trial = 0; trial < 20; trial++) {
        coredag_coll *c;
        slow s = {0, 0};
        coredag_world w = {0, 1, gather_slow, barrier_slow, &s};
        float src[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dst[8];
        int rc = coredag_coll_init(p, &w, &c);
        if (rc == COREDAG_OK) rc = coredag_coll_bind(c, "src", src, sizeof src);
        if (rc == COREDAG_OK) rc = coredag_coll_bind(c, "dst", dst, sizeof dst);
        if (rc == COREDAG_OK) rc = coredag_coll_start(c);
        if (rc == COREDAG_OK) rc = coredag_coll_wait(c, -1);
        s.fail = 7;
        if (rc == COREDAG_OK) rc = coredag_coll_start(c);
        if (rc == COREDAG_OK) {
            while ((rc = coredag_coll_wait(c, 0)) == COREDAG_ERR_TIMEOUT) {
            }
            ok += rc == COREDAG_OK, world += rc == COREDAG_ERR_WORLD, other += rc != COREDAG_OK && rc != COREDAG_ERR_WORLD;
        } else {
            other++;
        }
        coredag_coll_free(c);
    }
    printf("%s a failing start polled with wait(c, 0): %d COREDAG_ERR_WORLD, %d COREDAG_OK, %d other\n",
           world == 20 ? "ok" : "FAIL", world, ok, other);
    failures += world != 20;
    coredag_plan_free(p);
}

/* options "extern=b" makes a buffer the plan keeps as scratch the caller's. */
static void extern_option(void) {
    const char *src = "plan half\nparam ranks = 1\nbuffer a f32[2] extern\nbuffer b f32[2]\nop cp = copy a to b\n";
    coredag_plan *p;
    coredag_coll *c;
    float a[2] = {3, 4}, b[2] = {0, 0};
    int rc = coredag_plan_open_source("half.dag", src, NULL, NULL, &p);
    expect("open without the option", rc, COREDAG_OK, coredag_plan_error(p), NULL);
    rc = coredag_coll_init(p, NULL, &c);
    expect("init without the option", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    rc = coredag_coll_bind(c, "b", b, sizeof b);
    expect("bind of a scratch buffer", rc, COREDAG_ERR_ARG, coredag_coll_error(c), WORDS("half.dag:4:8", "scratch"));
    coredag_coll_free(c);
    coredag_plan_free(p);
    rc = coredag_plan_open_source("half.dag", src, NULL, WORDS("extern=b"), &p);
    expect("open with extern=b", rc, COREDAG_OK, coredag_plan_error(p), NULL);
    rc = coredag_coll_init(p, NULL, &c);
    expect("init with extern=b", rc, COREDAG_OK, coredag_coll_error(c), NULL);
    if ((rc = coredag_coll_bind(c, "a", a, sizeof a)) == COREDAG_OK && (rc = coredag_coll_bind(c, "b", b, sizeof b)) == COREDAG_OK &&
        (rc = coredag_coll_start(c)) == COREDAG_OK)
        rc = coredag_coll_wait(c, -1);
    expect("run with extern=b", rc == COREDAG_OK && b[0] == 3 && b[1] == 4 ? COREDAG_OK : COREDAG_ERR_INTERNAL, COREDAG_OK,
           coredag_coll_error(c), NULL);
    coredag_coll_free(c);
    coredag_plan_free(p);
}

/* Plans picked from a plan set by size and world size (paths relative to cmd/libcoredag, where
 * TestC runs this). */
static void plan_sets(void) {
    coredag_plan *p;
    size_t nbytes = 0;
    int rc = coredag_plan_open_set("../../tests/c/allreduce.set", 1 << 20, 4, WORDS("n=64"), NULL, &p);
    expect("plan from a set", rc, COREDAG_OK, coredag_plan_error(p), NULL);
    if (rc == COREDAG_OK) {
        rc = coredag_plan_buffer_size(p, "data", &nbytes);
        /* The ring's data is f32[ranks * n], with the caller's n over the set line's n=8. */
        if (rc != COREDAG_OK || coredag_plan_ranks(p) != 4 || nbytes != 4 * 64 * 4 || strcmp(coredag_plan_name(p), "ring_allreduce") != 0) {
            printf("FAIL plan from a set: %s, ranks %d, data %zu bytes (%s), want ring_allreduce, 4 ranks and %d bytes\n",
                   coredag_plan_name(p), coredag_plan_ranks(p), nbytes, coredag_strerror(rc), 4 * 64 * 4);
            failures++;
        }
    }
    coredag_plan_free(p);
    if (strcmp(coredag_plan_name(NULL), "") != 0) {
        printf("FAIL name of a NULL plan\n");
        failures++;
    }
    rc = coredag_plan_open_set("../../tests/c/allreduce.set", 1000, 4, NULL, NULL, &p);
    expect("short message from a set", rc, COREDAG_OK, coredag_plan_error(p), NULL);
    /* The recursive doubling's data is i64[n], and no n is given: the set sets n = 1000 / 8. */
    if (rc == COREDAG_OK && (coredag_plan_buffer_size(p, "data", &nbytes) != COREDAG_OK || nbytes != 1000 ||
                             strcmp(coredag_plan_name(p), "recursive_doubling_allreduce") != 0)) {
        printf("FAIL short message from a set: plan %s, data %zu bytes, want recursive_doubling_allreduce and 1000\n",
               coredag_plan_name(p), nbytes);
        failures++;
    }
    coredag_plan_free(p);
    rc = coredag_plan_open_set("../../tests/c/allreduce.set", 1004, 4, NULL, NULL, &p);
    expect("message not a multiple of the plan's unit", rc, COREDAG_ERR_ARG, coredag_plan_error(p),
           WORDS("1004 B is not a multiple", "pad it to 1008 B"));
    if (strcmp(coredag_plan_name(p), "") != 0) {
        printf("FAIL name of a plan that did not open: %s\n", coredag_plan_name(p));
        failures++;
    }
    coredag_plan_free(p);
    rc = coredag_plan_open_set("../../tests/c/allreduce.set", 8, 5, NULL, NULL, &p);
    expect("world size a set does not serve", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("5"));
    coredag_plan_free(p);
    rc = coredag_plan_open_set("../../tests/c/gap.set", 8, 4, NULL, NULL, &p);
    expect("set with a gap", rc, COREDAG_ERR_CHECK, coredag_plan_error(p), WORDS("gap.set:3:", "gap"));
    coredag_plan_free(p);
    rc = coredag_plan_open_set("../../tests/c/allreduce.set", 8, 0, NULL, NULL, &p);
    expect("set opened for 0 ranks", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("ranks"));
    coredag_plan_free(p);
    rc = coredag_plan_open_set(NULL, 8, 4, NULL, NULL, &p);
    expect("set path NULL", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("NULL"));
    coredag_plan_free(p);
    rc = coredag_plan_open_set("../../plans/ring_allreduce.dag", 8, 4, NULL, NULL, &p);
    expect("plan opened as a set", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("is a plan, not a plan set", "coredag_plan_open"));
    coredag_plan_free(p);
    rc = coredag_plan_open("../../tests/c/allreduce.set", NULL, NULL, &p);
    expect("set opened as a plan", rc, COREDAG_ERR_ARG, coredag_plan_error(p), WORDS("is a plan set, not a plan", "coredag_plan_open_set"));
    coredag_plan_free(p);
}

/* Two ranks in two threads of this process, each with its own collective of the ring
 * allreduce on libfabric's shm and a world of the two threads; its barrier fails once armed. */
typedef struct {
    pthread_barrier_t meet;
    const void *send[2];
    int fail;
} pair_world;
typedef struct {
    pair_world *w;
    int rank, rc_free, rc_again, runs_ok;
    char msg[512];
    coredag_plan *p;
} pair_rank;
static int pair_gather(const void *send, void *recv, size_t nbytes, void *ctx) {
    pair_rank *r = ctx;
    r->w->send[r->rank] = send;
    pthread_barrier_wait(&r->w->meet);
    for (int i = 0; i < 2; i++) memcpy((char *)recv + (size_t)i * nbytes, r->w->send[i], nbytes);
    pthread_barrier_wait(&r->w->meet);
    return 0;
}
static int pair_barrier(void *ctx) {
    pair_rank *r = ctx;
    if (r->w->fail) return 9;
    pthread_barrier_wait(&r->w->meet);
    return 0;
}
static void *pair_thread(void *arg) {
    pair_rank *r = arg;
    coredag_world w = {r->rank, 2, pair_gather, pair_barrier, r};
    coredag_coll *c;
    int rc = coredag_coll_init(r->p, &w, &c);
    float data[2 * 16];
    if (rc == COREDAG_OK) rc = coredag_coll_bind(c, "data", data, sizeof data);
    for (int it = 0; rc == COREDAG_OK && it < 3; it++) {
        for (int i = 0; i < 32; i++) data[i] = (float)(r->rank + i + it);
        if ((rc = coredag_coll_start(c)) == COREDAG_OK) rc = coredag_coll_wait(c, -1);
        for (int i = 0; rc == COREDAG_OK && i < 32; i++)
            if (data[i] != (float)(1 + 2 * (i + it))) rc = COREDAG_ERR_INTERNAL;
    }
    r->runs_ok = rc == COREDAG_OK;
    if (rc != COREDAG_OK) snprintf(r->msg, sizeof r->msg, "%s", coredag_coll_error(c));
    pthread_barrier_wait(&r->w->meet); /* both ranks' runs are over */
    if (r->rank == 0) r->w->fail = 1;  /* the next barrier publishes it to rank 1 */
    pthread_barrier_wait(&r->w->meet);
    r->rc_free = coredag_coll_free(c);
    if (r->rc_free != COREDAG_OK) {
        snprintf(r->msg, sizeof r->msg, "%s", coredag_coll_error(c));
        r->rc_again = coredag_coll_free(c);
    }
    return NULL;
}

/* A free whose close fails (the last barrier, which lets every peer finish its last start on a
 * NIC moved only by the host's calls) reports the failure and keeps the handle for the message;
 * a second free releases it. */
static void free_fails(void) {
    coredag_plan *p;
    int rc = coredag_plan_open("../../plans/ring_allreduce.dag", WORDS("ranks=2", "n=16"),
                               WORDS("provider=ofi", "ofi_provider=shm", "engine=poll"), &p);
    expect("open the ring on shm", rc, COREDAG_OK, coredag_plan_error(p), NULL);
    if (rc != COREDAG_OK) return;
    pair_world w = {.fail = 0};
    pthread_barrier_init(&w.meet, NULL, 2);
    pair_rank r[2] = {{.w = &w, .rank = 0, .p = p}, {.w = &w, .rank = 1, .p = p}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, pair_thread, &r[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&w.meet);
    const char *runs[2] = {"rank 0 of two threads: three runs", "rank 1 of two threads: three runs"};
    const char *frees[2] = {"free whose last barrier fails, rank 0", "free whose last barrier fails, rank 1"};
    const char *agains[2] = {"free again after a failed free, rank 0", "free again after a failed free, rank 1"};
    for (int i = 0; i < 2; i++) {
        expect(runs[i], r[i].runs_ok ? COREDAG_OK : COREDAG_ERR_INTERNAL, COREDAG_OK, r[i].msg, NULL);
        expect(frees[i], r[i].rc_free, COREDAG_ERR_WORLD, r[i].msg, WORDS("barrier callback returned 9"));
        expect(agains[i], r[i].rc_again, COREDAG_OK, "", NULL);
    }
    expect("plan_free after the failed frees", coredag_plan_free(p), COREDAG_OK, "", NULL);
}

/* A NULL world in a process whose launcher variables make no sense is an error, not every rank
 * in this process. */
static void bad_launcher(void) {
    coredag_plan *p = open_ok("pair.dag", pair_src);
    coredag_coll *c;
    int rc = coredag_coll_init(p, NULL, &c);
    expect("NULL world under launcher variables that make no sense", rc, COREDAG_ERR_WORLD, coredag_coll_error(c),
           WORDS("OMPI_COMM_WORLD_RANK", "out of range"));
    coredag_coll_free(c);
    coredag_plan_free(p);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "launcher") == 0) {
        bad_launcher();
        printf(failures > 0 ? "%d case(s) failed\n" : "all cases passed\n", failures);
        return failures > 0;
    }
    null_arguments();
    plan_sets();
    bad_plans();
    world_errors();
    lifecycle_one();
    lifecycle_two();
    iteration_limit();
    extern_option();
    slow_world();
    poll_failure();
    free_fails();
    if (failures > 0) {
        printf("%d case(s) failed\n", failures);
        return 1;
    }
    printf("all cases passed\n");
    return 0;
}
