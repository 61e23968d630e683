/*
 * bench_gemm_levels.c: the multi-row integer products (matmul with 8-bit
 * activation rows: gemm_avx2.c, gemm_avx512.c or gemm_amx.c; one row: the
 * level's one-row dot) at the SIMD level this process runs at, so that one
 * binary run once per level (CLOVER_NO_AMX=1, CLOVER_NO_AVX512=1) shows what
 * each level gains; the level is printed. Per weight type and row count: the best of --reps times of
 * matmul (8-bit staging included; thread CPU time with one thread, wall
 * time with a pool), and G multiply-adds per second.
 *
 *   bench_gemm_levels [--threads T] [--out N] [--in K] [--rows 8,32,64,512] [--reps R]
 *                     [--types q8_0,q4_K,q5_K,q6_K] [--gap-us G]
 *
 * --gap-us G sleeps G microseconds before each timed product (outside the
 * timing): past the pool's spin (50 us, CLOVER_POOL_SPIN_US) its workers
 * are asleep when the product starts, as between a pass's products when
 * the caller works alone in between, so the time includes waking them
 * (issue 30; CLOVER_POOL_CONDVAR=1 for the condition variable's wake-up).
 * --ab VAR times every product twice a rep, without and with VAR=1 in the
 * environment (a switch matmul reads per product, e.g. CLOVER_OLD_SPLIT),
 * alternating which goes first, so that a machine whose speed drifts (the
 * dev VM's two speeds, a shared host) weighs on both alike; it prints the
 * best and the median of each and median(with) / median(without). --ab
 * VAR=VALUE sets VALUE instead of 1: --ab CLOVER_AMX_Q4K_REPACK (=1) times
 * the AMX level's Q4_K products through their repacked panels against the
 * unpacking path (gemm_amx_pack.h; the weights here are registered as
 * stable memory, so the panels are made on the warm-up rep, untimed).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/threadpool.h"
#include "base/timer.h"
#include "quant/gemm_amx_pack.h"
#include "quant/matmul.h"
#include "quant/quant.h"
#include "quant/simd_level.h"

/* One thread: the thread's CPU time (a shared machine's other processes
 * then cost nothing); a pool: wall time. */
static double now(int cpu) {
    if (!cpu) return timer_now();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t threads = 1, n_out = 2048, n_in = 2048, reps = 5, gap_us = 0;
    const char *ab = NULL, *ab_val = "1";
    char ab_name[128];
    size_t rows[16] = {8, 32, 64, 512}, n_rows_list = 4;
    uint32_t types[4] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    size_t n_types = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--threads")) threads = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--out")) n_out = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--in")) n_in = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--reps")) reps = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--gap-us")) gap_us = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--ab")) {
            const char *eq = strchr(v, '=');
            snprintf(ab_name, sizeof ab_name, "%.*s", (int)(eq ? (size_t)(eq - v) : strlen(v)), v);
            ab = ab_name, ab_val = eq ? eq + 1 : "1";
        }
        else if (!strcmp(a, "--types")) {
            n_types = 0;
            char name[16];
            for (const char *p = v; *p && n_types < 4;) {
                const char *e = strchr(p, ',');
                const size_t len = e ? (size_t)(e - p) : strlen(p);
                snprintf(name, sizeof name, "%.*s", (int)len, p);
                const int t = quant_type_from_name(name);
                if (t != QUANT_Q8_0 && t != QUANT_Q4_K && t != QUANT_Q5_K && t != QUANT_Q6_K) {
                    fprintf(stderr, "bench_gemm_levels: --types takes q8_0, q4_k, q5_k, q6_k\n");
                    return 2;
                }
                types[n_types++] = (uint32_t)t;
                if (!e) break;
                p = e + 1;
            }
        }
        else if (!strcmp(a, "--rows")) {
            n_rows_list = 0;
            for (const char *p = v; *p && n_rows_list < 16;) {
                rows[n_rows_list++] = strtoul(p, NULL, 10);
                p = strchr(p, ',');
                if (!p) break;
                p++;
            }
        } else {
            fprintf(stderr, "bench_gemm_levels: unknown option %s\n", a);
            return 2;
        }
    }
    if (n_in % 256 || n_out == 0 || reps == 0 || threads == 0) {
        fprintf(stderr, "bench_gemm_levels: --in must be a multiple of 256, --out, --reps, --threads positive\n");
        return 2;
    }
    threadpool *pool = NULL;
    clover_error err;
    if (threads > 1 && threadpool_create(&pool, threads, &err) != CLOVER_OK) {
        fprintf(stderr, "bench_gemm_levels: no thread pool\n");
        return 1;
    }
    size_t max_rows = 0;
    for (size_t k = 0; k < n_rows_list; k++) max_rows = rows[k] > max_rows ? rows[k] : max_rows;
    float *x = mem_alloc(max_rows * n_in * sizeof(float)), *y = mem_alloc(max_rows * n_out * sizeof(float));
    float *src = mem_alloc(n_in * sizeof(float));
    if (!x || !y || !src) return 1;
    rng_state r;
    rng_seed(&r, 7);
    for (size_t i = 0; i < max_rows * n_in; i++) x[i] = rng_normal(&r);
    printf("level %s, threads %zu, out %zu, in %zu%s\n", quant_simd_level_name(), threads, n_out, n_in,
           gap_us ? ", a gap before each product" : "");
    double *times = mem_alloc(2 * (reps + 1) * sizeof(double));
    if (!times) return 1;
    if (ab)
        printf("%-6s %6s %10s %10s %10s %10s %10s %8s   (without / with %s=%s)\n", "type", "rows", "ms", "GMAC/s",
               "median", "ms_with", "med_with", "with/w-o", ab, ab_val);
    else
        printf("%-6s %6s %10s %10s\n", "type", "rows", "ms", "GMAC/s");
    for (size_t t = 0; t < n_types; t++) {
        const size_t rb = quant_row_bytes(types[t], n_in);
        uint8_t *w = mem_alloc(rb * n_out);
        if (!w) return 1;
        for (size_t o = 0; o < n_out; o++) {
            for (size_t k = 0; k < n_in; k++) src[k] = rng_normal(&r) * 0.05f;
            quant_quantize_row(types[t], src, w + o * rb, n_in);
        }
        gemm_amx_stable_add(w, rb * n_out); /* as a model file's mapping is: Q4_K may take its panels */
        for (size_t k = 0; k < n_rows_list; k++) {
            double best[2] = {1e30, 1e30};
            size_t n_times[2] = {0, 0};
            for (size_t rep = 0; rep < reps + 1; rep++) /* one warm-up */
                for (size_t half = 0; half < (ab ? 2u : 1u); half++) {
                    const size_t with = ab ? (rep + half) & 1 : 0; /* which goes first alternates */
                    if (ab && with) setenv(ab, ab_val, 1);
                    if (gap_us) {
                        const struct timespec gap = {(time_t)(gap_us / 1000000), (long)(gap_us % 1000000) * 1000};
                        nanosleep(&gap, NULL);
                    }
                    const double t0 = now(pool == NULL);
                    matmul(pool, types[t], w, n_out, n_in, x, rows[k], y);
                    const double dt = now(pool == NULL) - t0;
                    if (ab && with) unsetenv(ab);
                    if (!rep) continue;
                    if (dt < best[with]) best[with] = dt;
                    times[with * (reps + 1) + n_times[with]++] = dt;
                }
            printf("%-6s %6zu %10.3f %10.1f", quant_type_name(types[t]), rows[k], best[0] * 1e3,
                   (double)n_out * n_in * rows[k] / best[0] * 1e-9);
            if (ab) {
                double med[2];
                for (int h = 0; h < 2; h++) { /* insertion sort: a few dozen times */
                    double *a = times + h * (reps + 1);
                    for (size_t i = 1; i < n_times[h]; i++)
                        for (size_t j = i; j > 0 && a[j - 1] > a[j]; j--) {
                            const double tmp = a[j];
                            a[j] = a[j - 1], a[j - 1] = tmp;
                        }
                    med[h] = a[n_times[h] / 2];
                }
                printf(" %10.3f %10.3f %10.3f %8.3f", med[0] * 1e3, best[1] * 1e3, med[1] * 1e3, med[1] / med[0]);
            }
            printf("\n");
        }
        if (gemm_amx_q4k_pack_bytes())
            printf("%-6s panels %.1f MiB (the weight %.1f MiB)\n", quant_type_name(types[t]),
                   gemm_amx_q4k_pack_bytes() / 1048576.0, rb * n_out / 1048576.0);
        gemm_amx_stable_remove(w, rb * n_out);
        mem_free(w);
    }
    mem_free(x), mem_free(y), mem_free(src), mem_free(times);
    threadpool_free(pool);
    return 0;
}
