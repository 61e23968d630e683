/*
 * bench_gemm_small.c: the decode-batch product (a few one-row sequences
 * against Q8_0 weights) through its three possible kernels, on
 * cache-resident weights, one thread, thread CPU time (best of --reps), so
 * that other processes on a shared machine distort it little (192 weight
 * rows: 408 KiB at 2048 wide, in L2; 816 KiB at 4096, L2 + L3):
 *   rows alone  - matmul on each row by itself (the one-row decode dot: what
 *                 N separate requests cost),
 *   tile        - matmul on all rows at once (gemm_avx2.c's tile kernel),
 *   grouped     - matmul_grouped with every row its own group (the batched
 *                 pass: gemm_small_avx2.c for 3..GEMM_SMALL_MAX_ROWS rows).
 * All three include the 8-bit quantisation of the rows and give the same
 * bits (checked here too). Figures are G multiply-adds per CPU-second.
 *
 *   bench_gemm_small [--reps R]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "quant/gemm_small.h"
#include "quant/matmul.h"
#include "quant/matmul_group.h"
#include "quant/quant.h"

enum { N_OUT = 192, MAX_ROWS = 16 }; /* 192 x 2048 Q8_0: 408 KiB, inside one core's L2 */

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int reps = 9;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_gemm_small [--reps R]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (!quant_simd_active()) {
        printf("bench_gemm_small: no AVX2 on this CPU: the kernels measured here are not used\n");
        return 0;
    }
    static const size_t widths[] = {2048, 4096}, counts[] = {1, 2, 3, 4, 8, 16};
    uint32_t own[MAX_ROWS];
    for (size_t i = 0; i < MAX_ROWS; i++) own[i] = 1;
    printf("bench_gemm_small: Q8_0, %d weight rows (in cache), 1 thread, thread CPU time, best of %d\n", N_OUT,
           reps);
    printf("n_in   rows | rows alone     tile  grouped | grouped/alone grouped/tile  same bits\n");
    rng_state r;
    rng_seed(&r, 1);
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        const size_t n_in = widths[wi], rb = quant_row_bytes(QUANT_Q8_0, n_in);
        uint8_t *w = mem_alloc(N_OUT * rb);
        float *src = mem_alloc(n_in * sizeof(float)), *x = mem_alloc(MAX_ROWS * n_in * sizeof(float));
        float *ya = mem_alloc(MAX_ROWS * N_OUT * sizeof(float)), *yt = mem_alloc(MAX_ROWS * N_OUT * sizeof(float));
        float *yg = mem_alloc(MAX_ROWS * N_OUT * sizeof(float));
        if (!w || !src || !x || !ya || !yt || !yg) return 1;
        for (size_t o = 0; o < N_OUT; o++) {
            for (size_t k = 0; k < n_in; k++) src[k] = rng_normal(&r);
            quant_quantize_row(QUANT_Q8_0, src, w + o * rb, n_in);
        }
        for (size_t i = 0; i < MAX_ROWS * n_in; i++) x[i] = rng_normal(&r);
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            const size_t m = counts[ci];
            const int inner = (int)(100 / m) + 1; /* ~equal work per timing */
            double best[3] = {1e30, 1e30, 1e30};
            for (int t = 0; t < reps; t++) {
                double t0 = cpu_now();
                for (int q = 0; q < inner; q++)
                    for (size_t i = 0; i < m; i++) matmul(NULL, QUANT_Q8_0, w, N_OUT, n_in, x + i * n_in, 1, ya + i * N_OUT);
                const double a = cpu_now() - t0;
                t0 = cpu_now();
                for (int q = 0; q < inner; q++) matmul(NULL, QUANT_Q8_0, w, N_OUT, n_in, x, m, yt);
                const double b = cpu_now() - t0;
                t0 = cpu_now();
                for (int q = 0; q < inner; q++) matmul_grouped(NULL, QUANT_Q8_0, w, N_OUT, n_in, x, m, yg, own);
                const double c = cpu_now() - t0;
                if (a < best[0]) best[0] = a;
                if (b < best[1]) best[1] = b;
                if (c < best[2]) best[2] = c;
            }
            const double macs = (double)N_OUT * (double)n_in * (double)m * inner / 1e9;
            const int same = !memcmp(ya, yt, m * N_OUT * sizeof(float)) && !memcmp(ya, yg, m * N_OUT * sizeof(float));
            printf("%5zu %6zu | %10.1f %8.1f %8.1f | %12.2fx %11.2fx  %s%s\n", n_in, m, macs / best[0], macs / best[1],
                   macs / best[2], best[0] / best[2], best[1] / best[2], same ? "yes" : "NO",
                   m >= GEMM_SMALL_MIN_ROWS && m <= GEMM_SMALL_MAX_ROWS ? "" : "  (grouped = matmul's own path here)");
            if (!same) return 1;
        }
        mem_free(w), mem_free(src), mem_free(x), mem_free(ya), mem_free(yt), mem_free(yg);
    }
    return 0;
}
