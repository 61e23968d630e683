/*
 * bench_moe_products: the routed experts of one MoE layer, as a preview's
 * coreset runs them (issue 30): n rows all routed to the same k experts,
 * so each expert's gate, up and down products see every row, through
 * cpu_moe_experts (the gather, the grouped products, SwiGLU and the sum;
 * no router, no shared expert). bench_gemm_levels times one product with
 * its weights warm in cache; here each rep takes the next k experts of a
 * cycle of --pool, so the weights come from memory as in a pass, and the
 * products share runs of the pool as the MoE shapes them.
 *
 *   bench_moe_products [--threads T] [--reps R] [--rows N] [--pool E] [--hidden H] [--ff F] [--used K]
 *                      [--ab VAR[=VALUE][,VAR[=VALUE]...]]
 *
 * Defaults: the 35B-A3B geometry (H 2048, F 512, k 8, Q4_K), 32 rows, a
 * cycle of 64 experts (~110 MiB). One thread: the thread's CPU time; a
 * pool: wall time. Prints the best and the median per layer and the
 * multiply-adds a second (3 products of F x H per (row, expert)). --ab
 * times each rep twice, without and with the variables set (alternating
 * which goes first), as bench_gemm_levels' --ab; several, comma-separated,
 * e.g. the split, staging and prefetch of before at once.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, setenv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/threadpool.h"
#include "base/timer.h"
#include "cpu/moe.h"
#include "quant/gemm_amx_pack.h"
#include "quant/quant.h"
#include "quant/simd_level.h"

static double now(int cpu) {
    if (!cpu) return timer_now();
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* n_rows rows of n_in, from 64 quantised random rows repeated (the values do not change the time). */
static uint8_t *weights(size_t n_rows, size_t n_in, rng_state *r) {
    const size_t rb = quant_row_bytes(QUANT_Q4_K, n_in), distinct = 64;
    uint8_t *w = mem_alloc(rb * n_rows);
    float *src = mem_alloc(n_in * sizeof(float));
    if (!w || !src) return NULL;
    for (size_t o = 0; o < distinct && o < n_rows; o++) {
        for (size_t k = 0; k < n_in; k++) src[k] = rng_normal(r) * 0.05f;
        quant_quantize_row(QUANT_Q4_K, src, w + o * rb, n_in);
    }
    for (size_t o = distinct; o < n_rows; o++) memcpy(w + o * rb, w + (o % distinct) * rb, rb);
    mem_free(src);
    gemm_amx_stable_add(w, rb * n_rows); /* as a model file's mapping is */
    return w;
}

/* --ab's VAR[=VALUE][,VAR[=VALUE]...]: set (VALUE, default 1) or unset each. */
static void ab_set(const char *spec, int on) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (eq) *eq = '\0';
        if (on)
            setenv(tok, eq ? eq + 1 : "1", 1);
        else
            unsetenv(tok);
    }
}

int main(int argc, char **argv) {
    size_t threads = 1, reps = 20, n = 32, E = 64, H = 2048, F = 512, k = 8;
    const char *ab = NULL;
    char ab_spec[256];
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--threads")) threads = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--reps")) reps = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--rows")) n = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--pool")) E = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--hidden")) H = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--ff")) F = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--used")) k = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--ab")) {
            snprintf(ab_spec, sizeof ab_spec, "%s", v);
            ab = ab_spec;
        } else {
            fprintf(stderr, "bench_moe_products: unknown option %s\n", a);
            return 2;
        }
    }
    if (!threads || !reps || !n || !k || E < k || H % 256 || F % 256) {
        fprintf(stderr, "bench_moe_products: --hidden and --ff multiples of 256, --pool >= --used >= 1\n");
        return 2;
    }
    threadpool *pool = NULL;
    clover_error err;
    if (threads > 1 && threadpool_create(&pool, threads, &err) != CLOVER_OK) {
        fprintf(stderr, "bench_moe_products: no thread pool\n");
        return 1;
    }
    rng_state r;
    rng_seed(&r, 7);
    cpu_moe_weights w = {.n_embd = H, .n_ff = F, .n_expert = E, .n_used = k, .gate_type = QUANT_Q4_K,
                         .up_type = QUANT_Q4_K, .down_type = QUANT_Q4_K, .router_type = QUANT_Q4_K};
    w.gate_stride = w.up_stride = quant_row_bytes(QUANT_Q4_K, H) * F;
    w.down_stride = quant_row_bytes(QUANT_Q4_K, F) * H;
    w.gate_exps = weights(E * F, H, &r), w.up_exps = weights(E * F, H, &r), w.down_exps = weights(E * H, F, &r);
    float *x = mem_alloc(n * H * sizeof(float)), *out = mem_alloc(n * H * sizeof(float));
    int32_t *ids = mem_alloc(n * k * sizeof *ids);
    float *wts = mem_alloc(n * k * sizeof *wts);
    void *scratch = mem_alloc(cpu_moe_scratch_bytes(&w, n));
    double *times = mem_alloc(2 * reps * sizeof(double));
    if (!w.gate_exps || !w.up_exps || !w.down_exps || !x || !out || !ids || !wts || !scratch || !times) return 1;
    for (size_t i = 0; i < n * H; i++) x[i] = rng_normal(&r);
    for (size_t i = 0; i < n * k; i++) wts[i] = 1.0f / (float)k;
    printf("level %s, threads %zu, rows %zu, %zu of %zu experts a layer, hidden %zu, width %zu, q4_K\n",
           quant_simd_level_name(), threads, n, k, E, H, F);
    size_t n_times[2] = {0, 0}, cycle = 0;
    for (size_t rep = 0; rep < reps + 1; rep++) /* one warm-up */
        for (size_t half = 0; half < (ab ? 2u : 1u); half++) {
            const size_t with = ab ? (rep + half) & 1 : 0;
            for (size_t row = 0; row < n; row++) /* every row: the next k experts of the cycle */
                for (size_t s = 0; s < k; s++) ids[row * k + s] = (int32_t)((cycle + s) % E);
            cycle += k;
            if (ab && with) ab_set(ab, 1);
            const double t0 = now(pool == NULL);
            cpu_moe_experts(out, x, n, &w, ids, wts, pool, scratch);
            const double dt = now(pool == NULL) - t0;
            if (ab && with) ab_set(ab, 0);
            if (rep) times[with * reps + n_times[with]++] = dt;
        }
    const double macs = 3.0 * (double)n * (double)k * (double)H * (double)F;
    for (size_t h = 0; h < (ab ? 2u : 1u); h++) {
        qsort(times + h * reps, n_times[h], sizeof(double), cmp_double);
        const double best = times[h * reps], med = times[h * reps + n_times[h] / 2];
        printf("%-8s best %8.3f ms  median %8.3f ms  %7.1f GMAC/s (best)  %7.1f (median)\n",
               !ab ? "layer" : h ? "with" : "without", best * 1e3, med * 1e3, macs / best * 1e-9, macs / med * 1e-9);
    }
    if (ab) printf("median with / without %s: %.3f\n", ab, times[reps + n_times[1] / 2] / times[n_times[0] / 2]);
    threadpool_free(pool);
    return 0;
}
