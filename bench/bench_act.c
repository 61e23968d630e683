/*
 * bench_act.c: the integer dot products of 8-bit activations (quant.h's
 * quant_act_*) against the f32-activation dots they replace in
 * matrix-vector products.
 *
 * Per type: the compute ceiling of each dot on cache-resident weights
 * (~192 KB, one thread, thread CPU time, best of 9: immune to other
 * processes on a shared machine), the cost of quantising the activation
 * row (ns per value), and both dots streaming weights from memory (--mb MB
 * of weights, one thread, thread CPU time, best of --reps) beside the
 * read-only bandwidth of one thread measured the same way. A ceiling above
 * the bandwidth means the product is memory-bound. Where the level has a
 * 4-row form of the integer dot (quant_act_dot4_kernel: the AMX level's
 * AVX-512 bsum dots), a second line times it the same way (its speed-up
 * against the one-row integer dot).
 *
 *   bench_act [--mb MB] [--reps R]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "quant/quant.h"

enum { N_IN = 4096, SEED_ROWS = 64 };

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* n_out rows of N_IN elements, ~bytes: SEED_ROWS quantised Gaussian rows repeated. */
static uint8_t *make_weights(uint32_t type, size_t bytes, size_t *n_out) {
    const size_t rb = quant_row_bytes(type, N_IN);
    size_t rows = bytes / rb < 4 ? 4 : bytes / rb;
    uint8_t *w = mem_alloc(rows * rb);
    float *src = mem_alloc(N_IN * sizeof(float));
    if (!w || !src) exit(1);
    rng_state r;
    rng_seed(&r, 5);
    for (size_t i = 0; i < rows; i++) {
        if (i < SEED_ROWS) {
            for (size_t k = 0; k < N_IN; k++) src[k] = rng_normal(&r) * 0.02f;
            quant_quantize_row(type, src, w + i * rb, N_IN);
        } else {
            memcpy(w + i * rb, w + (i % SEED_ROWS) * rb, rb);
        }
    }
    mem_free(src);
    *n_out = rows;
    return w;
}

static volatile float sink;

/* The cache-resident weight rows of a type (make_weights' count for ~192 KB). */
static size_t rows_small(size_t rb) { return 192 * 1000 / rb < 4 ? 4 : 192 * 1000 / rb; }

/* Best-of-reps thread CPU seconds of one pass over all rows: f32 dots (act = 0), integer dots (1) or the
 * integer 4-row dots (2: quant_act_dot4_kernel, rows a multiple of 4). */
static double time_rows(uint32_t type, const uint8_t *w, size_t rows, const float *x, const void *xq, int act, int reps,
                        int iters) {
    const size_t rb = quant_row_bytes(type, N_IN);
    const quant_act_dot4_fn dot4 = quant_act_dot4_kernel(type);
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        double t0 = cpu_now();
        float s = 0, y[4];
        for (int it = 0; it < iters; it++)
            if (act == 2)
                for (size_t o = 0; o + 4 <= rows; o += 4) dot4(w + o * rb, rb, xq, N_IN, y), s += y[0] + y[3];
            else
                for (size_t o = 0; o < rows; o++)
                    s += act ? quant_act_dot(type, w + o * rb, xq, N_IN) : quant_dot(type, w + o * rb, x, N_IN);
        sink = s;
        double dt = (cpu_now() - t0) / iters;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv) {
    size_t mb = 256;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc)
            mb = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_act [--mb MB] [--reps R]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    float *x = mem_alloc(N_IN * sizeof(float));
    void *xq = mem_alloc(quant_act_row_bytes(QUANT_Q4_K, N_IN) + quant_act_row_bytes(QUANT_Q8_0, N_IN));
    rng_state r;
    rng_seed(&r, 9);
    for (size_t i = 0; i < N_IN; i++) x[i] = rng_normal(&r);

    /* one thread's read bandwidth, thread CPU time */
    const size_t bytes = mb * 1000000 / 64 * 64;
    uint64_t *buf = mem_alloc(bytes);
    if (!x || !xq || !buf) return 1;
    memset(buf, 1, bytes);
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        double t0 = cpu_now();
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (size_t i = 0; i + 4 <= bytes / 8; i += 4)
            a0 += buf[i], a1 += buf[i + 1], a2 += buf[i + 2], a3 += buf[i + 3];
        sink = (float)(a0 + a1 + a2 + a3);
        double dt = cpu_now() - t0;
        if (dt < best) best = dt;
    }
    mem_free(buf);
    const double bw = (double)bytes / best / 1e9;
    char load[64] = "?";
    FILE *la = fopen("/proc/loadavg", "r");
    if (la && fgets(load, sizeof load, la)) load[strcspn(load, "\n")] = 0;
    if (la) fclose(la);
    printf("bench_act: rows of %d, SIMD %s, one thread, thread CPU time; load average %s\n", N_IN,
           quant_simd_active() ? "avx2" : "off", load);
    printf("read-only sum, 1 thread: %.2f GB/s\n\n", bw);
    printf("      |   cache-resident ceiling (GB/s of weights)   | quantise |  %zu MB from memory (GB/s, %% of bw)\n",
           mb);
    printf("type  |  f32 dot  int dot  speed-up  int ns/w        |  ns/val  |  f32 dot        int dot\n");

    const uint32_t types[] = {QUANT_Q8_0, QUANT_Q6_K, QUANT_Q5_K, QUANT_Q4_K};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const uint32_t type = types[t];
        const size_t rb = quant_row_bytes(type, N_IN);
        size_t rows;
        uint8_t *w = make_weights(type, 192 * 1000, &rows);
        quant_act_quantize(type, x, xq, N_IN);
        const int iters = (int)(50e6 / ((double)rows * N_IN)) + 1;
        const double tf = time_rows(type, w, rows, x, xq, 0, 9, iters),
                     ti = time_rows(type, w, rows, x, xq, 1, 9, iters);
        mem_free(w);
        double tq = 1e30;
        for (int k = 0; k < 9; k++) {
            double t0 = cpu_now();
            for (int it = 0; it < 1000; it++) quant_act_quantize(type, x, xq, N_IN);
            double dt = (cpu_now() - t0) / 1000;
            if (dt < tq) tq = dt;
        }
        w = make_weights(type, mb * 1000000, &rows);
        const double mf = time_rows(type, w, rows, x, xq, 0, reps, 1), mi = time_rows(type, w, rows, x, xq, 1, reps, 1);
        const double wb_small = (double)rb * (double)(192 * 1000 / rb < 4 ? 4 : 192 * 1000 / rb);
        const double gf = wb_small / tf / 1e9, gi = wb_small / ti / 1e9, big = (double)rb * (double)rows;
        printf("%-5s | %8.2f %8.2f %8.2fx %8.3f        | %7.2f  | %7.2f %4.0f%%   %7.2f %4.0f%%\n",
               quant_type_name(type), gf, gi, gi / gf, ti / (wb_small / rb * N_IN) * 1e9, tq / N_IN * 1e9,
               big / mf / 1e9, 100 * big / mf / 1e9 / bw, big / mi / 1e9, 100 * big / mi / 1e9 / bw);
        mem_free(w);
        if (quant_act_dot4_kernel(type)) { /* the 4-row form of the same dot, where the level has one */
            w = make_weights(type, 192 * 1000, &rows);
            const double t4 = time_rows(type, w, rows / 4 * 4, x, xq, 2, 9, iters);
            mem_free(w);
            w = make_weights(type, mb * 1000000, &rows);
            const double m4 = time_rows(type, w, rows / 4 * 4, x, xq, 2, reps, 1);
            const double g4 = (double)rb * (double)(rows_small(rb) / 4 * 4) / t4 / 1e9,
                         gm4 = (double)rb * (double)(rows / 4 * 4) / m4 / 1e9;
            printf("      |  4-row int dot: %7.2f %8.2fx                |          |                 %7.2f %4.0f%%\n",
                   g4, g4 / gi, gm4, 100 * gm4 / bw);
            mem_free(w);
        }
    }
    mem_free(x);
    mem_free(xq);
    return 0;
}
