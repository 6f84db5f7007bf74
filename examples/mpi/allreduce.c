/*
 * allreduce.c: an MPI program that runs a coredag plan on its own arrays, as a persistent
 * collective, and checks it against MPI_Allreduce. coredag never links MPI: the program hands it
 * a world of two callbacks, wrappers of MPI_Allgather and MPI_Barrier.
 *
 * Check mode (default): every iteration, every rank writes fresh numbers into its array
 * (different per rank, element and iteration; small integers, so every f32 sum is exact whatever
 * the order of the additions), sums them with coredag's plan and with MPI_Allreduce, and compares
 * the two element by element. Exits 1 on any difference, 2 on an error.
 *
 * Bench mode (-b): for each size from 8 B to 16 MiB, in the same processes and on the same
 * buffers, interleaves coredag start+wait with MPI_Allreduce, then measures overlap as OSU does
 * (start / compute / wait against MPI_Iallreduce / compute / MPI_Wait), and prints a table.
 *
 *   scripts/build-lib.sh build
 *   mpicc examples/mpi/allreduce.c -o allreduce $(PKG_CONFIG_PATH=build/lib/pkgconfig pkg-config --cflags --libs coredag)
 *   mpirun -np 4 ./allreduce -o provider=ofi -o ofi_provider=shm -o engine=poll
 *
 * scripts/mpi-example.sh builds it and runs the configurations CI runs.
 *
 * Options: -p PLAN (default plans/ring_allreduce.dag: its buffer "data" f32[ranks * n] extern), or
 * a plan set (a .set file, as examples/mpi/shm.set: the plan for each message size, as MPI
 * libraries switch algorithm by size; coredag_plan_open_set works out the plan's n),
 * -W: PLAN's data is f32[n], n the whole vector (as examples/mpi/recursive_doubling_f32.dag),
 * -c COUNT f32 elements per rank (default 4096; rounded up to a multiple of the ranks),
 * -s SIZES: the bench's sizes in bytes, ascending, comma-separated (default 8 B, 16 B, ... MAXBYTES),
 * -i ITERS (default 300), -o KEY=VALUE a coredag option (repeatable: provider, ofi_provider,
 * engine, target, hang_timeout_ms), -b bench mode, -m MAXBYTES the bench's largest size, -B
 * coredag's own world (a NULL coredag_world: its TCP bootstrap at COREDAG_BOOTSTRAP=HOST:PORT)
 * instead of the MPI callbacks. -L coredag|mpi: the loop mode, for profilers (perf stat, perf
 * record): for each bench size, ITERS back-to-back runs of one side only (coredag start+wait, or
 * MPI_Allreduce), no barrier between them; prints the mean time per run and the CPU time (user,
 * system) and context switches per run of rank 0. -g SECONDS: in loop mode, every rank sleeps
 * that long before each run, and only the runs are timed (docs/library.md, Cost: a start that
 * follows the last by 10 ms or more is slower).
 */
#include <mpi.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <coredag.h>

#define MAXOPTS 16

static int rank, size;
static int own_world; /* -B: coredag's own world (its TCP bootstrap at $COREDAG_BOOTSTRAP) */
static int whole_n;   /* -W: the plan's n is the whole vector, not a chunk of it per rank */

/* The world's callbacks: ctx is coredag's own communicator. coredag calls them from its threads,
 * hence MPI_THREAD_MULTIPLE. */
static int world_allgather(const void *send, void *recv, size_t nbytes, void *ctx) {
    if (nbytes > (size_t)INT32_MAX) return -1;
    return MPI_Allgather(send, (int)nbytes, MPI_BYTE, recv, (int)nbytes, MPI_BYTE, *(MPI_Comm *)ctx) == MPI_SUCCESS ? 0 : -1;
}

static int world_barrier(void *ctx) { return MPI_Barrier(*(MPI_Comm *)ctx) == MPI_SUCCESS ? 0 : -1; }

static void fail(const char *what, int rc, const char *msg) {
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coredag_strerror(rc), msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* The plan for an allreduce of count f32 (a multiple of the ranks), joined to the world on
 * comm, its "data" bound to data. */
typedef struct {
    coredag_plan *plan;
    coredag_coll *coll;
} job;

static int is_set(const char *path) {
    size_t k = strlen(path);
    return k > 4 && strcmp(path + k - 4, ".set") == 0;
}

static job open_job(const char *path, long count, const char *const *opts, MPI_Comm *comm, float *data) {
    size_t nbytes = (size_t)count * sizeof(float);
    job j;
    int rc;
    if (is_set(path)) {
        /* The set picks the plan for nbytes and sets its n. */
        rc = coredag_plan_open_set(path, nbytes, size, NULL, opts, &j.plan);
    } else {
        char p_ranks[32], p_n[32];
        snprintf(p_ranks, sizeof p_ranks, "ranks=%d", size);
        snprintf(p_n, sizeof p_n, "n=%ld", whole_n ? count : count / size);
        const char *params[] = {p_ranks, p_n, NULL};
        rc = coredag_plan_open(path, params, opts, &j.plan);
    }
    if (rc != COREDAG_OK) fail("coredag_plan_open", rc, coredag_plan_error(j.plan));
    coredag_world world = {rank, size, world_allgather, world_barrier, comm};
    rc = coredag_coll_init(j.plan, own_world ? NULL : &world, &j.coll);
    if (rc != COREDAG_OK) fail("coredag_coll_init", rc, coredag_coll_error(j.coll));
    rc = coredag_coll_bind(j.coll, "data", data, nbytes);
    if (rc != COREDAG_OK) fail("coredag_coll_bind", rc, coredag_coll_error(j.coll));
    return j;
}

static void close_job(job j) {
    int rc = coredag_coll_free(j.coll);
    if (rc != COREDAG_OK) fail("coredag_coll_free", rc, "");
    rc = coredag_plan_free(j.plan);
    if (rc != COREDAG_OK) fail("coredag_plan_free", rc, coredag_plan_error(j.plan));
}

static void run(job j) {
    int rc = coredag_coll_start(j.coll);
    if (rc != COREDAG_OK) fail("coredag_coll_start", rc, coredag_coll_error(j.coll));
    rc = coredag_coll_wait(j.coll, -1);
    if (rc != COREDAG_OK) fail("coredag_coll_wait", rc, coredag_coll_error(j.coll));
}

/* Rank r's element i in iteration it: an integer in -8..8. */
static float value(int r, long i, int it) { return (float)((r * 7 + i * 3 + it * 5) % 17 - 8); }

static int check(const char *path, long count, int iters, const char *const *opts) {
    count = (count + size - 1) / size * size;
    size_t nbytes = (size_t)count * sizeof(float);
    float *data = malloc(nbytes), *mine = malloc(nbytes), *want = malloc(nbytes);
    if (!data || !mine || !want) fail("malloc", 0, "out of memory");
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    job j = open_job(path, count, opts, &comm, data);
    long bad = 0;
    for (int it = 0; it < iters; it++) {
        for (long i = 0; i < count; i++) data[i] = mine[i] = value(rank, i, it);
        MPI_Allreduce(mine, want, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        run(j);
        for (long i = 0; i < count; i++) {
            if (data[i] != want[i] && bad++ < 5)
                fprintf(stderr, "rank %d iteration %d element %ld: coredag %g, MPI_Allreduce %g\n", rank, it, i, data[i], want[i]);
        }
    }
    char name[128];
    snprintf(name, sizeof name, "%s", coredag_plan_name(j.plan));
    close_job(j);
    long total = 0;
    MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (total == 0)
            printf("ok: %d ranks, %d iterations of %ld f32 (plan %s), coredag equals MPI_Allreduce on every element\n", size, iters,
                   count, name);
        else
            printf("FAIL: %ld differences between coredag and MPI_Allreduce\n", total);
    }
    MPI_Comm_free(&comm);
    free(data), free(mine), free(want);
    return total == 0 ? 0 : 1;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median over iterations of the slowest rank's time of each iteration. */
static double median_max(double *t, int k) {
    MPI_Allreduce(MPI_IN_PLACE, t, k, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(t, (size_t)k, sizeof *t, cmp_double);
    return t[k / 2];
}

/* Keeps the CPU busy for about sec seconds, as OSU's dummy compute does. */
static void compute(double sec) {
    double end = MPI_Wtime() + sec;
    volatile double x = 1;
    while (MPI_Wtime() < end) {
        for (int i = 0; i < 100; i++) x = x * 1.0000001 + 1e-9;
    }
}

static double overlap(double total, double compute_t, double pure) {
    double o = 100 * (1 - (total - compute_t) / pure);
    return o < 0 ? 0 : o > 100 ? 100 : o;
}

/* The next size the bench measures after bytes: from the list sizes (comma-separated, NULL: the
 * powers of two), or 0 when there is none left. */
static long next_size(long bytes, const char *sizes) {
    if (!sizes) return bytes == 0 ? 8 : 2 * bytes;
    for (const char *p = sizes; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        if (v > bytes) return v;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static int bench(const char *path, const char *sizes, long maxbytes, const char *const *opts) {
    long maxcount = maxbytes / (long)sizeof(float);
    long maxn = (maxcount + size - 1) / size;
    size_t bufbytes = (size_t)(maxn * size) * sizeof(float);
    float *data = malloc(bufbytes), *out = malloc(bufbytes);
    if (!data || !out) fail("malloc", 0, "out of memory");
    memset(data, 0, bufbytes); /* zeros: the in-place sums stay zeros, never overflow */
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (rank == 0) {
        printf("# %d ranks; coredag options:", size);
        for (const char *const *o = opts; *o; o++) printf(" %s", *o);
        printf("\n# plan: %s", path);
        printf("\n# times: median over iterations of the slowest rank, microseconds; ratio = coredag / MPI;\n"
               "# overlap as OSU: 100 * (1 - (start+compute+wait - compute) / pure); barrier_us: one MPI_Barrier\n");
        printf("%10s %6s %12s %12s %7s %8s %8s %10s  %s\n", "bytes", "iters", "coredag_us", "mpi_us", "ratio", "cd_ovl%", "mpi_ovl%", "barrier_us", "plan");
    }
    for (long bytes = next_size(0, sizes); bytes >= 8 && bytes <= maxbytes; bytes = next_size(bytes, sizes)) {
        long count = bytes / (long)sizeof(float);
        long n = (count + size - 1) / size;
        long used = n * size * (long)sizeof(float); /* a multiple of the ranks */
        int iters = (int)(used <= 65536 ? 200 : used <= 1 << 20 ? 50 : 10);
        job j = open_job(path, n * size, opts, &comm, data);
        double *tc = malloc(sizeof(double) * (size_t)iters), *tm = malloc(sizeof(double) * (size_t)iters);
        for (int w = 0; w < 5; w++) {
            run(j);
            MPI_Allreduce(data, out, (int)(n * size), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        for (int it = 0; it < iters; it++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            run(j);
            double t1 = MPI_Wtime();
            MPI_Barrier(MPI_COMM_WORLD);
            double t2 = MPI_Wtime();
            MPI_Allreduce(data, out, (int)(n * size), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double t3 = MPI_Wtime();
            tc[it] = t1 - t0, tm[it] = t3 - t2;
        }
        double c_pure = median_max(tc, iters), m_pure = median_max(tm, iters);
        /* Overlap: start, compute for as long as the pure collective took, wait. */
        for (int it = 0; it < iters; it++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            int rc = coredag_coll_start(j.coll);
            if (rc != COREDAG_OK) fail("coredag_coll_start", rc, coredag_coll_error(j.coll));
            compute(c_pure);
            rc = coredag_coll_wait(j.coll, -1);
            if (rc != COREDAG_OK) fail("coredag_coll_wait", rc, coredag_coll_error(j.coll));
            double t1 = MPI_Wtime();
            MPI_Barrier(MPI_COMM_WORLD);
            double t2 = MPI_Wtime();
            MPI_Request req;
            MPI_Iallreduce(data, out, (int)(n * size), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
            compute(m_pure);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            double t3 = MPI_Wtime();
            tc[it] = t1 - t0, tm[it] = t3 - t2;
        }
        double c_total = median_max(tc, iters), m_total = median_max(tm, iters);
        /* A barrier over the world, which coredag calls before and after every start. */
        for (int it = 0; it < iters; it++) {
            double t0 = MPI_Wtime();
            MPI_Barrier(comm);
            tc[it] = MPI_Wtime() - t0;
        }
        double barrier = median_max(tc, iters);
        if (rank == 0) {
            printf("%10ld %6d %12.2f %12.2f %7.2f %8.0f %8.0f %10.2f  %s", bytes, iters, c_pure * 1e6, m_pure * 1e6, c_pure / m_pure,
                   overlap(c_total, c_pure, c_pure), overlap(m_total, m_pure, m_pure), barrier * 1e6, coredag_plan_name(j.plan));
            if (used != bytes) printf(" (both ran on %ld B: a multiple of the ranks)", used);
            printf("\n");
            fflush(stdout);
        }
        close_job(j);
        free(tc), free(tm);
    }
    MPI_Comm_free(&comm);
    free(data), free(out);
    return 0;
}

/* The loop mode (-L): iters runs of one side at each size, nothing else in between but a sleep
 * of gap seconds before each run when gap > 0 (then only the runs are timed). */
static int loop(const char *side, const char *path, const char *sizes, long maxbytes, int iters, double gap,
                const char *const *opts) {
    int cd = strcmp(side, "coredag") == 0;
    if (!cd && strcmp(side, "mpi") != 0) fail("-L", COREDAG_ERR_ARG, "the loop mode's side is coredag or mpi");
    long maxn = (maxbytes / (long)sizeof(float) + size - 1) / size;
    size_t bufbytes = (size_t)(maxn * size) * sizeof(float);
    float *data = malloc(bufbytes), *out = malloc(bufbytes);
    if (!data || !out) fail("malloc", 0, "out of memory");
    memset(data, 0, bufbytes);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (rank == 0)
        printf("# loop mode: %s only, %d runs per size\n%10s %12s %10s %10s %10s  %s\n", side, iters, "bytes", "us_per_run", "user_us", "sys_us",
               "csw", cd ? "plan" : "");
    for (long bytes = next_size(0, sizes); bytes >= 8 && bytes <= maxbytes; bytes = next_size(bytes, sizes)) {
        long n = (bytes / (long)sizeof(float) + size - 1) / size;
        job j = {NULL, NULL};
        if (cd) j = open_job(path, n * size, opts, &comm, data);
        for (int w = 0; w < 5; w++) {
            if (cd) run(j);
            else MPI_Allreduce(data, out, (int)(n * size), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        double t = 0;
        for (int it = 0; it < iters; it++) {
            if (gap > 0) usleep((useconds_t)(gap * 1e6));
            double t0 = MPI_Wtime();
            if (cd) run(j);
            else MPI_Allreduce(data, out, (int)(n * size), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t += MPI_Wtime() - t0;
        }
        getrusage(RUSAGE_SELF, &r1);
        MPI_Barrier(MPI_COMM_WORLD);
        double us = 1e6 / iters;
        if (rank == 0)
            printf("%10ld %12.2f %10.2f %10.2f %10.2f  %s\n", bytes, t * us,
                   ((double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + 1e-6 * (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec)) * us,
                   ((double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) + 1e-6 * (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec)) * us,
                   (double)(r1.ru_nvcsw + r1.ru_nivcsw - r0.ru_nvcsw - r0.ru_nivcsw) / iters, cd ? coredag_plan_name(j.plan) : "");
        fflush(stdout);
        if (cd) close_job(j);
    }
    MPI_Comm_free(&comm);
    free(data), free(out);
    return 0;
}

int main(int argc, char **argv) {
    /* Go's runtime (in libcoredag) handles SIGSEGV to turn a fault in its code into a panic
     * that coredag recovers; Open MPI keeps a handler that is already installed. */
    struct sigaction before, after;
    sigaction(SIGSEGV, NULL, &before);
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    sigaction(SIGSEGV, NULL, &after);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) fail("MPI_Init_thread", COREDAG_ERR_WORLD, "coredag's world callbacks need MPI_THREAD_MULTIPLE");
    if (before.sa_handler != after.sa_handler && rank == 0)
        fprintf(stderr, "warning: MPI_Init replaced the SIGSEGV handler of Go's runtime\n");

    const char *path = "plans/ring_allreduce.dag";
    const char *opts[MAXOPTS + 1] = {NULL};
    const char *sizes = NULL, *loop_side = NULL;
    int nopts = 0, iters = 300, do_bench = 0;
    double gap = 0;
    long count = 4096, maxbytes = 16L << 20;
    int c;
    while ((c = getopt(argc, argv, "p:Ws:c:i:o:bm:BL:g:")) != -1) {
        switch (c) {
        case 'p': path = optarg; break;
        case 'W': whole_n = 1; break;
        case 's': sizes = optarg; break;
        case 'c': count = atol(optarg); break;
        case 'i': iters = atoi(optarg); break;
        case 'o':
            if (nopts == MAXOPTS) fail("-o", COREDAG_ERR_ARG, "too many options");
            opts[nopts++] = optarg;
            break;
        case 'b': do_bench = 1; break;
        case 'm': maxbytes = atol(optarg); break;
        case 'B': own_world = 1; break;
        case 'L': loop_side = optarg; break;
        case 'g': gap = atof(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: %s [-p PLAN [-W]] [-c COUNT] [-i ITERS] [-o KEY=VALUE]... [-B] [-b | -L coredag|mpi [-g SECONDS] [-m MAXBYTES] [-s SIZES]]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    if (count < 1 || iters < 1 || maxbytes < 8) fail("arguments", COREDAG_ERR_ARG, "COUNT, ITERS and MAXBYTES must be positive");
    if (!(gap >= 0 && gap <= 10)) fail("-g", COREDAG_ERR_ARG, "the gap is from 0 to 10 seconds");
    int rc = loop_side  ? loop(loop_side, path, sizes, maxbytes, iters, gap, opts)
             : do_bench ? bench(path, sizes, maxbytes, opts)
                        : check(path, count, iters, opts);
    MPI_Finalize();
    return rc;
}
