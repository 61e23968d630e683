/*
 * bench_pool.c: what a run of the thread pool costs, apart from its work,
 * and how fast a product kernel runs on one core while every core runs it
 * (issue 30). On the H200 machine's 16-core Xeon host a 512 x 2048 product
 * of 16 rows took 0.16 ms at 16 threads against 0.17 ms on one thread
 * (bench_gemm_levels), ~1 MMAC a thread that one core does in ~10 us, and a
 * 32-row preview makes ~540 pool runs (13-14 a layer): the fixed cost of a
 * run, whatever it is, decides the preview there. This program splits it:
 *
 *  arrive   N tasks that each wait until all N have started (so each thread
 *           takes exactly one): when the last thread arrives after the
 *           caller starts the run (the wake-up of the slowest worker), and
 *           the whole run's wall time. Workers spinning (back-to-back runs)
 *           and after a gap (--gap-us before each run: asleep when the gap
 *           is past CLOVER_POOL_SPIN_US + CLOVER_POOL_YIELD_US).
 *  work     N tasks of --work-us of arithmetic each: run time minus the work.
 *  empty    a run of N tasks that do nothing: the round trip.
 *  kernel   one product (--out x --in, --rows rows, q8_0 and q4_K) on one
 *           thread alone, then on every thread at once (each its own
 *           weights and rows, in one run): the per-thread time together
 *           over alone says whether cores slow each other (clock, memory,
 *           a shared unit); then the product split over the pool, with its
 *           timeline (threadpool_trace): when the last thread arrived, when
 *           the last one found no task left, how many took part.
 *
 * Figures: the median and the 10th / 90th percentiles over --reps runs, in
 * microseconds; the level and thread count printed first.
 *
 *   bench_pool [--threads N] [--reps R] [--gap-us G] [--work-us W]
 *              [--out O] [--in K] [--rows B]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/threadpool.h"
#include "quant/matmul.h"
#include "quant/quant.h"
#include "quant/simd_level.h"

enum { MAX_THREADS = 512, MAX_REPS = 100000 };

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_us(unsigned us) {
    if (!us) return;
    const struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median, p10 and p90 of n values (sorted in place), microseconds */
static void print_stats(const char *what, double *us, size_t n) {
    qsort(us, n, sizeof *us, cmp_double);
    printf("  %-58s median %9.1f  p10 %9.1f  p90 %9.1f us\n", what, us[n / 2], us[n / 10], us[n * 9 / 10]);
}

/* ---- arrive: every thread takes one task, which waits for all ---- */

typedef struct arrive_ctx {
    size_t n;
    atomic_size_t started;
    uint64_t t0, last_arrival;
    _Alignas(64) uint64_t arrival[MAX_THREADS];
} arrive_ctx;

static void arrive_task(void *ctx, size_t task, size_t thread) {
    (void)task;
    arrive_ctx *a = ctx;
    a->arrival[thread] = now_ns();
    atomic_fetch_add_explicit(&a->started, 1, memory_order_acq_rel);
    /* no task ends before every thread holds one: each thread runs exactly one */
    while (atomic_load_explicit(&a->started, memory_order_acquire) < a->n) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
    }
}

static void bench_arrive(threadpool *pool, size_t n, size_t reps, unsigned gap_us, const char *label) {
    double *last = mem_alloc(reps * sizeof *last), *wall = mem_alloc(reps * sizeof *wall);
    arrive_ctx *a = mem_calloc(1, sizeof *a);
    if (!last || !wall || !a) exit(1);
    for (size_t r = 0; r <= reps; r++) {
        sleep_us(gap_us);
        a->n = n;
        atomic_store(&a->started, 0);
        const uint64_t t0 = now_ns();
        threadpool_run(pool, n, arrive_task, a);
        const uint64_t t1 = now_ns();
        uint64_t mx = t0;
        for (size_t i = 0; i < n; i++) mx = a->arrival[i] > mx ? a->arrival[i] : mx;
        if (r == 0) continue; /* warm-up */
        last[r - 1] = (double)(mx - t0) * 1e-3;
        wall[r - 1] = (double)(t1 - t0) * 1e-3;
    }
    char what[96];
    snprintf(what, sizeof what, "arrive %s: last thread's arrival", label);
    print_stats(what, last, reps);
    snprintf(what, sizeof what, "arrive %s: run wall", label);
    print_stats(what, wall, reps);
    mem_free(last), mem_free(wall), mem_free(a);
}

/* ---- work: tasks of a fixed amount of arithmetic ---- */

typedef struct work_ctx {
    size_t iters;
    _Alignas(64) volatile double sink[MAX_THREADS * 8];
} work_ctx;

static double spin_work(size_t iters) {
    double x = 1.0;
    for (size_t i = 0; i < iters; i++) x = x * 0.999999 + 1e-9; /* a dependent chain: ~4 cycles a step */
    return x;
}

static void work_task(void *ctx, size_t task, size_t thread) {
    (void)task;
    work_ctx *w = ctx;
    w->sink[thread * 8] = spin_work(w->iters);
}

static void noop_task(void *ctx, size_t task, size_t thread) { (void)ctx, (void)task, (void)thread; }

static void bench_work(threadpool *pool, size_t n, size_t reps, unsigned gap_us, unsigned work_us,
                       const char *label) {
    work_ctx *w = mem_calloc(1, sizeof *w);
    double *us = mem_alloc(reps * sizeof *us);
    if (!w || !us) exit(1);
    /* calibrate the chain on this thread: iterations for work_us */
    size_t iters = 1u << 16;
    for (;;) {
        const uint64_t t0 = now_ns();
        w->sink[0] = spin_work(iters);
        const uint64_t dt = now_ns() - t0;
        if (dt > 2000000u || iters > (1u << 30)) {
            w->iters = (size_t)((double)iters * work_us * 1e3 / (double)dt);
            break;
        }
        iters *= 2;
    }
    double alone = 1e30;
    for (int r = 0; r < 5; r++) {
        const uint64_t t0 = now_ns();
        work_task(w, 0, 0);
        const double dt = (double)(now_ns() - t0) * 1e-3;
        alone = dt < alone ? dt : alone;
    }
    for (size_t r = 0; r <= reps; r++) {
        sleep_us(gap_us);
        const uint64_t t0 = now_ns();
        threadpool_run(pool, n, work_task, w);
        if (r) us[r - 1] = (double)(now_ns() - t0) * 1e-3 - alone;
    }
    char what[96];
    snprintf(what, sizeof what, "work %s: run wall minus one task (%.1f us)", label, alone);
    print_stats(what, us, reps);
    for (size_t r = 0; r <= reps; r++) {
        sleep_us(gap_us);
        const uint64_t t0 = now_ns();
        threadpool_run(pool, n, noop_task, NULL);
        if (r) us[r - 1] = (double)(now_ns() - t0) * 1e-3;
    }
    snprintf(what, sizeof what, "empty %s: run wall, %zu tasks doing nothing", label, n);
    print_stats(what, us, reps);
    mem_free(w), mem_free(us);
}

/* ---- kernel: one product per thread, alone and all at once ---- */

typedef struct kernel_ctx {
    uint32_t type;
    size_t n_out, n_in, rows;
    uint8_t *w[MAX_THREADS];
    float *x[MAX_THREADS], *y[MAX_THREADS];
    double us[MAX_THREADS];
} kernel_ctx;

static void kernel_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    kernel_ctx *k = ctx;
    const uint64_t t0 = now_ns();
    matmul(NULL, k->type, k->w[task], k->n_out, k->n_in, k->x[task], k->rows, k->y[task]);
    k->us[task] = (double)(now_ns() - t0) * 1e-3;
}

static void bench_kernel(threadpool *pool, size_t n, size_t reps, uint32_t type, size_t n_out, size_t n_in,
                         size_t rows) {
    kernel_ctx *k = mem_calloc(1, sizeof *k);
    if (!k) exit(1);
    *k = (kernel_ctx){.type = type, .n_out = n_out, .n_in = n_in, .rows = rows};
    const size_t rb = quant_row_bytes(type, n_in);
    float *src = mem_alloc(n_in * sizeof *src);
    rng_state r;
    rng_seed(&r, 11);
    for (size_t t = 0; t < n; t++) { /* each thread its own copy: no shared lines, each from its own pages */
        k->w[t] = mem_alloc(rb * n_out);
        k->x[t] = mem_alloc(rows * n_in * sizeof(float));
        k->y[t] = mem_alloc(rows * n_out * sizeof(float));
        if (!src || !k->w[t] || !k->x[t] || !k->y[t]) exit(1);
        for (size_t o = 0; o < n_out; o++) {
            for (size_t i = 0; i < n_in; i++) src[i] = rng_normal(&r) * 0.05f;
            quant_quantize_row(type, src, k->w[t] + o * rb, n_in);
        }
        for (size_t i = 0; i < rows * n_in; i++) k->x[t][i] = rng_normal(&r);
    }
    const size_t reps_k = reps < 50 ? reps : 50;
    double *alone = mem_alloc((reps_k + 1) * sizeof *alone), *together = mem_alloc((reps_k + 1) * n * sizeof(double));
    double *split = mem_alloc((reps_k + 1) * sizeof *split);
    if (!alone || !together || !split) exit(1);
    for (size_t rep = 0; rep <= reps_k; rep++) {
        kernel_task(k, 0, 0);
        if (rep) alone[rep - 1] = k->us[0];
    }
    for (size_t rep = 0; rep <= reps_k; rep++) {
        threadpool_run(pool, n, kernel_task, k);
        if (rep)
            for (size_t t = 0; t < n; t++) together[(rep - 1) * n + t] = k->us[t];
    }
    /* the split product's timeline (threadpool_trace): for each run of the pool it makes (the staging and
     * the tasks: one run), when the last worker arrived, how many did, when the last found no task left */
    double *last_in = mem_alloc((reps_k + 1) * sizeof(double)), *last_out = mem_alloc((reps_k + 1) * sizeof(double));
    double *arrived = mem_alloc((reps_k + 1) * sizeof(double));
    uint64_t *arrive = mem_alloc(n * sizeof(uint64_t)), *leave = mem_alloc(n * sizeof(uint64_t));
    if (!last_in || !last_out || !arrived || !arrive || !leave) exit(1);
    threadpool_trace trace = {arrive, leave};
    threadpool_set_trace(pool, &trace);
    for (size_t rep = 0; rep <= reps_k; rep++) {
        memset(arrive, 0, n * sizeof *arrive), memset(leave, 0, n * sizeof *leave);
        const uint64_t t0 = now_ns();
        matmul(pool, type, k->w[0], n_out, n_in, k->x[0], rows, k->y[0]);
        const uint64_t t1 = now_ns();
        if (!rep) continue;
        split[rep - 1] = (double)(t1 - t0) * 1e-3;
        uint64_t in = t0, out = t0;
        size_t got = 0;
        for (size_t t = 0; t < n; t++) {
            if (!arrive[t]) continue;
            got++;
            in = arrive[t] > in ? arrive[t] : in;
            out = leave[t] > out ? leave[t] : out;
        }
        last_in[rep - 1] = (double)(in - t0) * 1e-3;
        last_out[rep - 1] = (double)(out - t0) * 1e-3;
        arrived[rep - 1] = (double)got;
    }
    threadpool_set_trace(pool, NULL);
    char what[96];
    snprintf(what, sizeof what, "kernel %s %zux%zu x %zu rows: one thread alone", quant_type_name(type), n_out, n_in,
             rows);
    print_stats(what, alone, reps_k);
    const double a_med = alone[reps_k / 2];
    snprintf(what, sizeof what, "kernel %s: each of %zu threads, all at once", quant_type_name(type), n);
    print_stats(what, together, reps_k * n);
    printf("  %-58s %.2fx\n", "  together / alone (medians)", together[reps_k * n / 2] / a_med);
    snprintf(what, sizeof what, "kernel %s: split over the pool", quant_type_name(type));
    print_stats(what, split, reps_k);
    printf("  %-58s %.2fx (ideal %zu)\n", "  alone / split (medians)", a_med / split[reps_k / 2], n);
    print_stats("  split: the last thread's arrival", last_in, reps_k);
    print_stats("  split: the last thread out of tasks", last_out, reps_k);
    qsort(arrived, reps_k, sizeof *arrived, cmp_double);
    printf("  %-58s median %.0f of %zu\n", "  split: threads that took part", arrived[reps_k / 2], n);
    mem_free(last_in), mem_free(last_out), mem_free(arrived), mem_free(arrive), mem_free(leave);
    for (size_t t = 0; t < n; t++) mem_free(k->w[t]), mem_free(k->x[t]), mem_free(k->y[t]);
    mem_free(src), mem_free(alone), mem_free(together), mem_free(split), mem_free(k);
}

int main(int argc, char **argv) {
    size_t threads = threadpool_cpu_count(), reps = 400, n_out = 512, n_in = 2048, rows = 32;
    unsigned gap_us = 300, work_us = 10;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_pool: %s needs a value\n", argv[i]);
            return 2;
        }
        const char *a = argv[i], *v = argv[++i];
        if (!strcmp(a, "--threads")) threads = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--reps")) reps = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--gap-us")) gap_us = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--work-us")) work_us = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(a, "--out")) n_out = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--in")) n_in = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--rows")) rows = strtoul(v, NULL, 10);
        else {
            fprintf(stderr, "bench_pool: unknown option %s\n", a);
            return 2;
        }
    }
    if (threads < 2 || threads > MAX_THREADS || reps < 10 || reps > MAX_REPS || n_in % 256 || !n_out || !rows ||
        !work_us) {
        fprintf(stderr, "bench_pool: --threads 2..%d, --reps 10..%d, --in a multiple of 256, --out, --rows, "
                        "--work-us positive\n", MAX_THREADS, MAX_REPS);
        return 2;
    }
    threadpool *pool = NULL;
    clover_error err;
    if (threadpool_create(&pool, threads, &err) != CLOVER_OK) {
        fprintf(stderr, "bench_pool: %s\n", err.message);
        return 1;
    }
    const char *spin = getenv("CLOVER_POOL_SPIN_US"), *yield = getenv("CLOVER_POOL_YIELD_US");
    printf("bench_pool: %zu threads, level %s, spin %s us, yield %s us, %zu reps, gap %u us\n", threads,
           quant_simd_level_name(), spin && *spin ? spin : "50 (default)", yield && *yield ? yield : "2000 (default)",
           reps, gap_us);
    bench_arrive(pool, threads, reps, 0, "(back to back)");
    bench_arrive(pool, threads, reps, gap_us, "(after a gap)");
    bench_work(pool, threads, reps, 0, work_us, "(back to back)");
    bench_work(pool, threads, reps, gap_us, work_us, "(after a gap)");
    bench_kernel(pool, threads, reps, QUANT_Q8_0, n_out, n_in, rows);
    bench_kernel(pool, threads, reps, QUANT_Q4_K, n_out, n_in, rows);
    threadpool_free(pool);
    return 0;
}
