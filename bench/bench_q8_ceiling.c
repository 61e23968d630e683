/*
 * bench_q8_ceiling.c: how close the multi-row Q8_0 kernel is to what its
 * instructions allow on this core (issue 19: why previews and block commits
 * cannot go much faster on AVX2 while each row stays bit-identical to the
 * one-row decode dot).
 *
 * It times, one thread, thread CPU time, best of --reps:
 *   kernel      - matmul (gemm_avx2.c's tile kernel, its 8-bit staging
 *                 included) on 32 activation rows x 256 Q8_0 rows of 2048,
 *                 weights in L2;
 *   pair seq.   - the kernel's inner loop alone on L1-resident registers'
 *                 worth of data: per (weight block, activation block) pair
 *                 vpsignb, vpmaddubsw, vpmaddwd, a convert and an FMA with a
 *                 broadcast scale, three activation rows against two weight
 *                 rows, each accumulator one parity chain (the kernel's
 *                 blocking);
 *   int only    - the same without the float step (convert, FMA): the
 *                 integer work alone, which any exact formulation keeps;
 *   no sign     - the pair without vpsignb (not a correct product: it shows
 *                 what the sign move costs).
 * The "pair seq." row is the ceiling of the shipped formulation: if the
 * kernel is near it, the remaining lever is the formulation (fewer
 * operations a pair), not scheduling. Figures: ns and cycles a pair (at the
 * clock /proc/cpuinfo reports), G multiply-adds per CPU-second.
 *
 *   bench_q8_ceiling [--reps R]
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "quant/matmul.h"
#include "quant/quant.h"

enum { NB = 64, N_OUT = 256, N_IN = 2048, N_ROWS = 32, LOOP_REPS = 20000 };

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_mhz(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    double mhz = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "cpu MHz", 7) && sscanf(strchr(line, ':') + 1, "%lf", &mhz) == 1) break;
    if (f) fclose(f);
    return mhz;
}

/* Four weight rows x NB blocks (|w|, w), three activation rows, the scale products: 26 KiB, L1. */
typedef struct loop_data {
    __m256i absw[4][NB], w[4][NB], x[3][NB];
    float prod[3][4][NB];
} loop_data;

static volatile float sink;

#define ATTR __attribute__((target("avx2,fma"), noinline))

/* The pair variants: the shipped one; the integer work only (pr unused);
 * no vpsignb (v unused). */
#define PAIR_F(acc, u, v, xx, pr)                                                                               \
    acc = _mm256_fmadd_ps(_mm256_broadcast_ss(pr),                                                              \
                          _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(xx, v)), \
                                                               ones)),                                          \
                          acc)
#define PAIR_I(acc, u, v, xx, pr) \
    ((void)(pr), acc = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(xx, v)), ones), acc))
#define PAIR_N(acc, u, v, xx, pr)                                                                               \
    ((void)(v), acc = _mm256_fmadd_ps(_mm256_broadcast_ss(pr),                                                  \
                                      _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(u, xx), ones)), acc))
#define LANE0_PS(s) _mm256_cvtss_f32(s)
#define LANE0_EPI32(s) ((float)_mm256_extract_epi32(s, 0))

/* The kernel's loop nest (gemm_avx2.c q8_chain): three activation rows against two weight rows, each
 * accumulator one parity chain, over L1-resident data. */
#define DEFINE_LOOP(name, T, ZERO, PAIR, ADD, LANE0)                                                          \
    ATTR static void name(const loop_data *d, int reps) {                                                     \
        const __m256i ones = _mm256_set1_epi16(1);                                                            \
        for (int r = 0; r < reps; r++)                                                                        \
            for (int i0 = 0; i0 < 4; i0 += 2)                                                                 \
                for (int p = 0; p < 2; p++) {                                                                 \
                    T a00 = ZERO, a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;                      \
                    for (int b = p; b < NB; b += 2) {                                                         \
                        const __m256i u0 = d->absw[i0][b], v0 = d->w[i0][b];                                  \
                        const __m256i u1 = d->absw[i0 + 1][b], v1 = d->w[i0 + 1][b];                          \
                        const __m256i x0 = d->x[0][b], x1 = d->x[1][b], x2 = d->x[2][b];                      \
                        PAIR(a00, u0, v0, x0, &d->prod[0][i0][b]);                                            \
                        PAIR(a01, u1, v1, x0, &d->prod[0][i0 + 1][b]);                                        \
                        PAIR(a10, u0, v0, x1, &d->prod[1][i0][b]);                                            \
                        PAIR(a11, u1, v1, x1, &d->prod[1][i0 + 1][b]);                                        \
                        PAIR(a20, u0, v0, x2, &d->prod[2][i0][b]);                                            \
                        PAIR(a21, u1, v1, x2, &d->prod[2][i0 + 1][b]);                                        \
                    }                                                                                         \
                    sink += LANE0(ADD(ADD(ADD(a00, a01), ADD(a10, a11)), ADD(a20, a21)));                     \
                }                                                                                             \
    }

DEFINE_LOOP(loop_pair, __m256, _mm256_setzero_ps(), PAIR_F, _mm256_add_ps, LANE0_PS)
DEFINE_LOOP(loop_int, __m256i, _mm256_setzero_si256(), PAIR_I, _mm256_add_epi32, LANE0_EPI32)
DEFINE_LOOP(loop_nosign, __m256, _mm256_setzero_ps(), PAIR_N, _mm256_add_ps, LANE0_PS)

static void report(const char *name, double seconds, double pairs, double mhz) {
    const double ns = seconds / pairs * 1e9;
    printf("%-10s %8.3f ns/pair %6.2f cycles/pair %7.1f G multiply-adds/s\n", name, ns, ns * mhz * 1e-3,
           pairs * 32 / seconds * 1e-9);
}

int main(int argc, char **argv) {
    int reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_q8_ceiling [--reps R]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (!quant_simd_active()) {
        printf("bench_q8_ceiling: no AVX2 on this CPU: the kernel measured here is not used\n");
        return 0;
    }
    const double mhz = cpu_mhz();
    printf("bench_q8_ceiling: one thread, thread CPU time, best of %d; clock %.0f MHz (/proc/cpuinfo)\n", reps, mhz);

    /* The shipped kernel: 32 rows x 256 Q8_0 weight rows of 2048 (557 KiB). */
    const size_t row_bytes = quant_row_bytes(QUANT_Q8_0, N_IN);
    uint8_t *w = mem_alloc(N_OUT * row_bytes);
    float *wf = mem_alloc(N_OUT * N_IN * sizeof(float)), *x = mem_alloc(N_ROWS * N_IN * sizeof(float));
    float *y = mem_alloc(N_ROWS * N_OUT * sizeof(float));
    loop_data *d = mem_alloc(sizeof *d);
    if (!w || !wf || !x || !y || !d) {
        fprintf(stderr, "bench_q8_ceiling: out of memory\n");
        return 1;
    }
    rng_state r;
    rng_seed(&r, 7);
    for (size_t i = 0; i < (size_t)N_OUT * N_IN; i++) wf[i] = rng_normal(&r);
    for (size_t i = 0; i < (size_t)N_ROWS * N_IN; i++) x[i] = rng_normal(&r);
    for (size_t o = 0; o < N_OUT; o++) quant_quantize_row(QUANT_Q8_0, wf + o * N_IN, w + o * row_bytes, N_IN);
    double best = 1e30;
    for (int k = 0; k < reps; k++) {
        const double t = cpu_now();
        for (int i = 0; i < 10; i++) matmul(NULL, QUANT_Q8_0, w, N_OUT, N_IN, x, N_ROWS, y);
        const double dt = cpu_now() - t;
        if (dt < best) best = dt;
    }
    report("kernel", best, 10.0 * N_OUT * N_ROWS * (N_IN / 32), mhz);

    uint8_t *bytes = (uint8_t *)d;
    for (size_t i = 0; i < sizeof *d; i++) bytes[i] = (uint8_t)((uint32_t)rng_next(&r) % 255 + 1);
    for (int i = 0; i < 3 * 4 * NB; i++) (&d->prod[0][0][0])[i] = 1e-3f;
    void (*const loops[3])(const loop_data *, int) = {loop_pair, loop_int, loop_nosign};
    const char *names[3] = {"pair seq.", "int only", "no sign"};
    for (int v = 0; v < 3; v++) {
        best = 1e30;
        for (int k = 0; k < reps; k++) {
            const double t = cpu_now();
            loops[v](d, LOOP_REPS);
            const double dt = cpu_now() - t;
            if (dt < best) best = dt;
        }
        report(names[v], best, (double)LOOP_REPS * 4 * 3 * NB, mhz);
    }
    mem_free(w);
    mem_free(wf);
    mem_free(x);
    mem_free(y);
    mem_free(d);
    return 0;
}
