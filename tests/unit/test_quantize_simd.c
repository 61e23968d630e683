/*
 * test_quantize_simd.c: the dispatched Q4_K/Q5_K quantisers (the AVX2
 * scale/min search when the CPU has it) against the scalar path, byte for
 * byte, on seeded random rows of every awkward kind: Gaussian at magnitudes
 * from 1e-40 (subnormal) to 1e37 (where hi - lo overflows), zeros, constant
 * rows and constant sub-blocks, negative-only and positive-only rows,
 * integer values (rounding ties), sparse spikes, -0, inf and NaN (those
 * blocks take the scalar path, still one answer). The scalar path is
 * quantize.c unchanged, so equal bytes mean the fast path changed nothing.
 * Without AVX2 there is nothing to compare: a skip.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/rng.h"
#include "quant/quant.h"
#include "test.h"

enum { BLOCKS = 4, N = 256 * BLOCKS, ROWS_PER_KIND = 120, KINDS = 12 };

static float magnitude(rng_state *r) {
    static const float mags[] = {1e-40f, 1e-30f, 1e-12f, 1e-3f, 1, 7, 1e6f, 1e20f, 1e37f};
    return mags[rng_next(r) % (sizeof mags / sizeof mags[0])];
}

/* One row of kind k; per 32-value sub-block some kinds vary the pattern. */
static void make_row(rng_state *r, int kind, float *x) {
    const float mag = magnitude(r);
    for (int i = 0; i < N; i++) x[i] = rng_normal(r) * mag;
    switch (kind) {
    case 0: break; /* Gaussian */
    case 1: memset(x, 0, N * sizeof *x); break;
    case 2:
        for (int i = 0; i < N; i++) x[i] = mag * 0.37f;
        break;
    case 3: /* some sub-blocks constant (flat lanes among live ones) */
        for (int s = 0; s < N / 32; s++)
            if (rng_next(r) % 2)
                for (int i = 0; i < 32; i++) x[32 * s + i] = s % 3 ? -mag : 0;
        break;
    case 4:
        for (int i = 0; i < N; i++) x[i] = -fabsf(x[i]);
        break;
    case 5:
        for (int i = 0; i < N; i++) x[i] = fabsf(x[i]) + mag;
        break;
    case 6:
        for (int i = 0; i < N; i++) x[i] = (float)((int)(rng_next(r) % 31) - 15);
        break;
    case 7: /* sparse spikes */
        for (int i = 0; i < N; i++) x[i] = rng_next(r) % 16 ? 0 : x[i] * 100;
        break;
    case 8: /* -0 scattered */
        for (int i = 0; i < N; i++)
            if (rng_next(r) % 4 == 0) x[i] = -0.0f;
        break;
    case 9: /* a non-finite value in some blocks */
        for (int b = 0; b < BLOCKS; b++)
            if (rng_next(r) % 2) x[256 * b + (int)(rng_next(r) % 256)] = rng_next(r) % 2 ? NAN : -INFINITY;
        break;
    case 10: /* huge and tiny side by side */
        for (int i = 0; i < N; i++) x[i] = rng_next(r) % 2 ? x[i] * 1e30f : x[i] * 1e-30f;
        break;
    default: /* uniform in [-mag, mag], a few exact maxima */
        for (int i = 0; i < N; i++) x[i] = (2 * rng_uniform(r) - 1) * mag;
        for (int i = 0; i < 8; i++) x[rng_next(r) % N] = mag;
        break;
    }
}

static void same_bytes(uint32_t type, const char *name) {
    static float x[N];
    static uint8_t fast[N * 2], slow[N * 2];
    const size_t bytes = quant_row_bytes(type, N);
    rng_state r;
    rng_seed(&r, 0x5eed0000u + type);
    int rows = 0, bad = 0;
    for (int kind = 0; kind < KINDS; kind++) {
        for (int row = 0; row < ROWS_PER_KIND; row++) {
            make_row(&r, kind, x);
            memset(fast, 0xAA, bytes);
            memset(slow, 0x55, bytes);
            quant_quantize_row(type, x, fast, N);
            quant_quantize_row_scalar(type, x, slow, N);
            rows++;
            if (memcmp(fast, slow, bytes) != 0) {
                if (bad++ < 5) {
                    size_t at = 0;
                    while (fast[at] == slow[at]) at++;
                    fprintf(stderr, "%s kind %d row %d: byte %zu differs (%02x vs scalar %02x)\n", name, kind, row, at,
                            fast[at], slow[at]);
                }
            }
        }
    }
    CHECK_MSG(bad == 0, "%s: %d of %d rows differ from the scalar path", name, bad, rows);
    if (bad == 0) printf("%s: %d rows of %d values, every byte equal to the scalar path\n", name, rows, N);
}

static void test_q4_k(void) { same_bytes(QUANT_Q4_K, "q4_k"); }
static void test_q5_k(void) { same_bytes(QUANT_Q5_K, "q5_k"); }

int main(void) {
    if (!quant_simd_active())
        TEST_SKIP("the CPU lacks AVX2, FMA or F16C (or CLOVER_NO_SIMD is set): no fast quantiser to compare");
    RUN(test_q4_k);
    RUN(test_q5_k);
    return TEST_EXIT();
}
