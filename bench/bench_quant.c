/*
 * bench_quant.c: how close the dot products and matrix products come to the
 * memory-bandwidth floor.
 *
 * Decoding one token reads every weight once, so a matrix-times-vector can be
 * no faster than weight bytes / memory read bandwidth. This program measures
 * the machine's bandwidth (a large memcpy, a large read-only sum) and then,
 * per type, the throughput in GB/s of weights read for: the fused dot product
 * row by row (one thread), matmul with one activation row (one thread and
 * all threads), and matmul with 8 and 32 activation rows (GFLOP/s, all
 * threads). Weights are 256 MB by default, well past the last-level cache.
 * Every figure is the median of --reps runs.
 *
 * A last table gives each kernel's compute ceiling: the same operations on
 * about 192 KB of weights (cache resident), one thread, timed in thread CPU
 * time (the best of 9 runs), so that time-sharing with other processes does
 * not distort it. A type whose ceiling is below the read bandwidth is
 * compute-bound; above it, memory-bound.
 *
 *   bench_quant [--mb MB] [--threads N] [--reps R] [--types f32,q4_k,...]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/threadpool.h"
#include "base/timer.h"
#include "quant/matmul.h"
#include "quant/quant.h"

#include "mem_bench.h"

enum { N_IN = 4096, MAX_REPS = 31, SEED_ROWS = 64 };

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* ---- memory bandwidth ---- */

typedef struct mem_job {
    bench_sum_job read; /* first: the sum task takes a mem_job as its own job */
    uint64_t *dst;
} mem_job;

static void copy_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    mem_job *j = ctx;
    size_t a, b;
    bench_sum_slice(&j->read, task, &a, &b);
    memcpy(j->dst + a, j->read.p + a, (b - a) * sizeof(uint64_t));
}

/* GB/s of bytes read (sum) or bytes read + written (copy). */
static double bench_memory(threadpool *pool, size_t bytes, int reps, int copy, uint64_t *src, uint64_t *dst) {
    mem_job j = {.dst = dst};
    const size_t tasks = bench_sum_job_init(&j.read, src, bytes, pool);
    double t[MAX_REPS];
    bench_time_tasks(pool, tasks, copy ? copy_task : bench_sum_task, &j, t, reps);
    bench_sum_keep(&j.read);
    return (copy ? 2.0 : 1.0) * (double)bytes / median(t, reps) / 1e9;
}

/* ---- weights ---- */

typedef struct dot_job {
    uint32_t type;
    const uint8_t *w;
    size_t row_bytes, n_out;
    const float *x;
    float *y;
} dot_job;

static void dot_rows(const dot_job *j) {
    for (size_t o = 0; o < j->n_out; o++) j->y[o] = quant_dot(j->type, j->w + o * j->row_bytes, j->x, N_IN);
}

/* n_out rows of N_IN elements of type, about `bytes` bytes (a multiple of 4
 * rows, at least 4): SEED_ROWS quantised Gaussian rows repeated (contents do
 * not change the speed). */
static uint8_t *make_weights(uint32_t type, size_t bytes, size_t *n_out) {
    const size_t rb = quant_row_bytes(type, N_IN);
    size_t rows = bytes / rb / 4 * 4;
    if (rows < 4) rows = 4;
    uint8_t *w = mem_alloc(rows * rb);
    float *src = mem_alloc(N_IN * sizeof(float));
    if (!w || !src) {
        mem_free(w);
        mem_free(src);
        return NULL;
    }
    rng_state r;
    rng_seed(&r, 11);
    const size_t seeds = rows < SEED_ROWS ? rows : SEED_ROWS;
    for (size_t i = 0; i < seeds; i++) {
        for (size_t k = 0; k < N_IN; k++) src[k] = rng_normal(&r) * 0.02f;
        quant_quantize_row(type, src, w + i * rb, N_IN);
    }
    for (size_t i = seeds; i < rows; i++) memcpy(w + i * rb, w + (i % seeds) * rb, rb);
    mem_free(src);
    *n_out = rows;
    return w;
}

static int parse_types(const char *list, uint32_t *types) {
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok && n < 16; tok = strtok(NULL, ",")) {
        int t = quant_type_from_name(tok);
        if (t < 0 || !quant_type_supported((uint32_t)t)) {
            fprintf(stderr, "bench_quant: unsupported type '%s'\n", tok);
            return -1;
        }
        types[n++] = (uint32_t)t;
    }
    return n;
}

int main(int argc, char **argv) {
    size_t mb = 256, threads = 0;
    int reps = 5;
    const char *type_list = "f32,f16,bf16,q8_0,q6_k,q5_k,q4_k";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc)
            mb = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--types") && i + 1 < argc)
            type_list = argv[++i];
        else {
            fprintf(stderr, "usage: bench_quant [--mb MB] [--threads N] [--reps R] [--types f32,q4_k,...]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > MAX_REPS) reps = MAX_REPS;
    uint32_t types[16];
    const int n_types = parse_types(type_list, types);
    if (n_types <= 0) return 2;

    threadpool *pool = NULL;
    clover_error err;
    if (threadpool_create(&pool, threads, &err) != CLOVER_OK) {
        fprintf(stderr, "bench_quant: %s\n", err.message);
        return 1;
    }
    const size_t nt = threadpool_size(pool);
    char load[64] = "?";
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (!fgets(load, sizeof load, la)) load[0] = 0;
        load[strcspn(load, "\n")] = 0;
        fclose(la);
    }
    printf("bench_quant: weights %zu MB per type (rows of %d), %zu threads, SIMD %s, median of %d runs\n", mb, N_IN, nt,
           quant_simd_active() ? "avx2" : "off (scalar)", reps);
    printf("load average before: %s\n\n", load);

    /* Memory bandwidth over buffers of the same size as the weights. */
    const size_t bytes = mb * 1000000 / 64 * 64;
    uint64_t *src = mem_alloc(bytes), *dst = mem_alloc(bytes);
    if (!src || !dst) {
        fprintf(stderr, "bench_quant: cannot allocate 2 x %zu MB\n", mb);
        return 1;
    }
    memset(src, 1, bytes);
    memset(dst, 0, bytes);
    const double bw_read_1 = bench_memory(NULL, bytes, reps, 0, src, dst);
    const double bw_read_n = bench_memory(pool, bytes, reps, 0, src, dst);
    const double bw_copy_1 = bench_memory(NULL, bytes, reps, 1, src, dst);
    const double bw_copy_n = bench_memory(pool, bytes, reps, 1, src, dst);
    /* The one-thread read again in thread CPU time: the bandwidth a core sees
     * while it runs, even when other processes share the machine. */
    double best_cpu = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        volatile uint64_t sink = bench_sum_words(src, bytes / 8);
        (void)sink;
        const double dt = cpu_now() - t0;
        if (dt < best_cpu) best_cpu = dt;
    }
    mem_free(src);
    mem_free(dst);
    printf("memory bandwidth (GB/s)     1 thread   %zu threads\n", nt);
    printf("  read-only sum             %8.2f   %8.2f\n", bw_read_1, bw_read_n);
    printf("  memcpy (read + write)     %8.2f   %8.2f\n", bw_copy_1, bw_copy_n);
    printf("  read-only sum, 1 thread, thread CPU time (best): %.2f\n\n", (double)bytes / best_cpu / 1e9);

    printf("GB/s = weight bytes read per second; %%bw = share of the read-only bandwidth with as many threads\n");
    printf("%-5s %6s | %8s %8s %5s | %8s %5s | %9s %9s\n", "type", "bits/w", "dot 1t", "mv 1t", "%bw", "mv Nt", "%bw",
           "mm8 Nt", "mm32 Nt");
    printf("%-5s %6s | %8s %8s %5s | %8s %5s | %9s %9s\n", "", "", "GB/s", "GB/s", "", "GB/s", "", "GFLOP/s",
           "GFLOP/s");

    float *x = mem_alloc(32 * N_IN * sizeof(float));
    rng_state r;
    rng_seed(&r, 3);
    for (size_t i = 0; i < 32 * N_IN; i++) x[i] = rng_normal(&r);
    for (int ti = 0; ti < n_types; ti++) {
        const uint32_t type = types[ti];
        size_t n_out = 0;
        uint8_t *w = make_weights(type, mb * 1000000, &n_out);
        float *y = mem_alloc(32 * n_out * sizeof(float));
        if (!w || !y) {
            fprintf(stderr, "bench_quant: cannot allocate weights for %s\n", quant_type_name(type));
            return 1;
        }
        const size_t rb = quant_row_bytes(type, N_IN);
        const double wbytes = (double)rb * (double)n_out;
        double t[MAX_REPS];

        dot_job dj = {type, w, rb, n_out, x, y};
        for (int k = 0; k < reps; k++) {
            double t0 = timer_now();
            dot_rows(&dj);
            t[k] = timer_now() - t0;
        }
        const double dot1 = wbytes / median(t, reps) / 1e9;
        for (int k = 0; k < reps; k++) {
            double t0 = timer_now();
            matmul(NULL, type, w, n_out, N_IN, x, 1, y);
            t[k] = timer_now() - t0;
        }
        const double mv1 = wbytes / median(t, reps) / 1e9;
        for (int k = 0; k < reps; k++) {
            double t0 = timer_now();
            matmul(pool, type, w, n_out, N_IN, x, 1, y);
            t[k] = timer_now() - t0;
        }
        const double mvn = wbytes / median(t, reps) / 1e9;
        double mm[2];
        const size_t rows_of[2] = {8, 32};
        const int mm_reps = reps < 3 ? reps : 3;
        for (int m = 0; m < 2; m++) {
            for (int k = 0; k < mm_reps; k++) {
                double t0 = timer_now();
                matmul(pool, type, w, n_out, N_IN, x, rows_of[m], y);
                t[k] = timer_now() - t0;
            }
            mm[m] = 2.0 * (double)n_out * N_IN * (double)rows_of[m] / median(t, mm_reps) / 1e9;
        }
        printf("%-5s %6.2f | %8.2f %8.2f %4.0f%% | %8.2f %4.0f%% | %9.2f %9.2f\n", quant_type_name(type),
               8.0 * (double)quant_block_bytes(type) / (double)quant_block_elems(type), dot1, mv1,
               100 * mv1 / bw_read_1, mvn, 100 * mvn / bw_read_n, mm[0], mm[1]);
        fflush(stdout);
        mem_free(w);
        mem_free(y);
    }

    /* Compute ceilings: cache-resident weights, one thread, CPU time. */
    printf("\ncompute ceiling: ~192 KB of weights (cache resident), 1 thread, thread CPU time, best of 9\n");
    printf("%-5s | %8s %7s | %9s %9s\n", "type", "dot GB/s", "ns/w", "mm8 GF/s", "mm32 GF/s");
    for (int ti = 0; ti < n_types; ti++) {
        const uint32_t type = types[ti];
        size_t n_out = 0;
        uint8_t *w = make_weights(type, 192 * 1000, &n_out);
        float *y = mem_alloc(32 * n_out * sizeof(float));
        if (!w || !y) return 1;
        const size_t rb = quant_row_bytes(type, N_IN);
        const int iters = (int)(50000000 / ((double)n_out * N_IN)) + 1; /* ~50 M weights per timing */
        double best_dot = 1e30, best_mm[2] = {1e30, 1e30};
        dot_job dj = {type, w, rb, n_out, x, y};
        for (int k = 0; k < 9; k++) {
            double t0 = cpu_now();
            for (int it = 0; it < iters; it++) dot_rows(&dj);
            const double dt = cpu_now() - t0;
            if (dt < best_dot) best_dot = dt;
        }
        const size_t rows_of[2] = {8, 32};
        for (int m = 0; m < 2; m++) {
            const int mm_iters = iters / (int)rows_of[m] + 1;
            for (int k = 0; k < 9; k++) {
                double t0 = cpu_now();
                for (int it = 0; it < mm_iters; it++) matmul(NULL, type, w, n_out, N_IN, x, rows_of[m], y);
                const double dt = cpu_now() - t0;
                if (dt < best_mm[m]) best_mm[m] = dt / mm_iters;
            }
            best_mm[m] = 2.0 * (double)n_out * N_IN * (double)rows_of[m] / best_mm[m] / 1e9;
        }
        const double weights = (double)iters * (double)n_out * N_IN;
        printf("%-5s | %8.2f %7.3f | %9.2f %9.2f\n", quant_type_name(type), weights * rb / N_IN / best_dot / 1e9,
               best_dot / weights * 1e9, best_mm[0], best_mm[1]);
        mem_free(w);
        mem_free(y);
    }
    mem_free(x);
    la = fopen("/proc/loadavg", "r");
    if (la) {
        if (!fgets(load, sizeof load, la)) load[0] = 0;
        load[strcspn(load, "\n")] = 0;
        fclose(la);
        printf("\nload average after: %s\n", load);
    }
    threadpool_free(pool);
    return 0;
}
