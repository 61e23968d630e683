/*
 * test_quant_simd.c: the dispatched (AVX2 when the CPU has it) dequantisers
 * and dot products against the scalar oracles, on seeded random data:
 * rows quantised from Gaussian values and rows of raw random bytes (every
 * nibble, high bit and scale pattern, subnormal and large f16 scales), odd
 * block counts, float rows of lengths that are not multiples of 8, and rows
 * at odd addresses.
 *
 * Dequantisation must agree bit for bit. A dot product may differ only by
 * summation order: |fast - oracle| <= 2e-6 * sum |w_i x_i| * sqrt(blocks)
 * + tiny, far below what any decoding mistake (a wrong nibble, scale or
 * sign) produces.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "quant/quant.h"
#include "test.h"

static const uint32_t all_types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};

/* A random finite f16 with a magnitude in [2^-24, 2^4]: subnormals included. */
static uint16_t random_f16_scale(rng_state *r) {
    uint16_t h = (uint16_t)(rng_next(r) & 0x03ff);
    uint16_t e = (uint16_t)(rng_next(r) % 20); /* exponent field 0..19 */
    return (uint16_t)(h | (e << 10) | (rng_next(r) & 1 ? 0x8000 : 0));
}

static void put_f16(uint8_t *p, uint16_t h) {
    p[0] = (uint8_t)(h & 0xff);
    p[1] = (uint8_t)(h >> 8);
}

/* Random bytes for n elements of type, with every f16 / bf16 field finite. */
static void random_row(rng_state *r, uint32_t type, uint8_t *row, size_t n) {
    const size_t bytes = quant_row_bytes(type, n);
    for (size_t i = 0; i < bytes; i++) row[i] = (uint8_t)rng_next(r);
    const size_t bb = quant_block_bytes(type), nb = bytes / bb;
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = row + b * bb;
        switch (type) {
        case QUANT_F32: {
            float v = rng_normal(r) * 4;
            memcpy(blk, &v, 4);
            break;
        }
        case QUANT_F16:
        case QUANT_BF16:
            if (type == QUANT_F16)
                put_f16(blk, quant_f32_to_f16(rng_normal(r)));
            else
                put_f16(blk, quant_f32_to_bf16(rng_normal(r)));
            break;
        case QUANT_Q8_0: put_f16(blk, random_f16_scale(r)); break;
        case QUANT_Q4_K:
        case QUANT_Q5_K:
            put_f16(blk, random_f16_scale(r));
            put_f16(blk + 2, random_f16_scale(r));
            break;
        case QUANT_Q6_K: put_f16(blk + 208, random_f16_scale(r)); break;
        default: break;
        }
    }
}

static void gaussian(rng_state *r, float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = rng_normal(r) * scale;
}

/* Lengths to try per type: odd block counts; float rows of awkward lengths. */
static size_t lengths_for(uint32_t type, size_t *out) {
    static const size_t float_lengths[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 100, 257, 1000, 4097};
    static const size_t q8_blocks[] = {1, 3, 5, 7, 33, 129};
    static const size_t k_blocks[] = {1, 3, 5, 17};
    size_t n = 0;
    if (quant_block_elems(type) == 1) {
        for (size_t i = 0; i < sizeof float_lengths / sizeof float_lengths[0]; i++) out[n++] = float_lengths[i];
    } else if (type == QUANT_Q8_0) {
        for (size_t i = 0; i < sizeof q8_blocks / sizeof q8_blocks[0]; i++) out[n++] = q8_blocks[i] * 32;
    } else {
        for (size_t i = 0; i < sizeof k_blocks / sizeof k_blocks[0]; i++) out[n++] = k_blocks[i] * 256;
    }
    return n;
}

enum { MAX_N = 17 * 256 + 1024 };

static void check_row(uint32_t type, const uint8_t *row, const float *x, size_t n, const char *what) {
    static float a[MAX_N], b[MAX_N];
    quant_dequantize_row_scalar(type, row, a, n);
    memset(b, 0xff, n * sizeof(float));
    quant_dequantize_row(type, row, b, n);
    CHECK_MSG(memcmp(a, b, n * sizeof(float)) == 0, "%s n=%zu %s: dequantised values differ", quant_type_name(type), n,
              what);

    double mag = 0;
    for (size_t i = 0; i < n; i++) mag += fabs((double)a[i] * x[i]);
    const float oracle = quant_dot_scalar(type, row, x, n);
    const float fast = quant_dot(type, row, x, n);
    const size_t blocks = n / quant_block_elems(type);
    const double tol = 2e-6 * mag * sqrt((double)(blocks > 8 ? blocks : 8)) + 1e-30;
    CHECK_MSG(fabs((double)fast - oracle) <= tol, "%s n=%zu %s: dot %.9g vs oracle %.9g (tol %.3g)",
              quant_type_name(type), n, what, fast, oracle, tol);

    /* The oracle itself against an independent double sum over its dequantised values. */
    double ref = 0;
    for (size_t i = 0; i < n; i++) ref += (double)a[i] * x[i];
    CHECK_MSG(fabs(ref - oracle) <= 1e-6 * mag + 1e-30, "%s n=%zu: oracle %.9g vs %.9g", quant_type_name(type), n,
              oracle, ref);
}

static void test_fast_vs_scalar(void) {
    if (!quant_simd_active()) printf("     (no SIMD on this CPU or CLOVER_NO_SIMD set: dispatch is the scalar path)\n");
    rng_state r;
    rng_seed(&r, 42);
    uint8_t *row = mem_alloc(MAX_N * 4 + 64);
    float *src = mem_alloc(MAX_N * sizeof(float));
    float *x = mem_alloc((MAX_N + 1) * sizeof(float));
    for (size_t t = 0; t < sizeof all_types / sizeof all_types[0]; t++) {
        const uint32_t type = all_types[t];
        size_t lens[32];
        const size_t nl = lengths_for(type, lens);
        for (size_t li = 0; li < nl; li++) {
            const size_t n = lens[li];
            for (int trial = 0; trial < 3; trial++) {
                gaussian(&r, x, n, 1.0f);
                /* quantised Gaussian weights, at an aligned and at an odd address */
                gaussian(&r, src, n, 0.05f);
                quant_quantize_row(type, src, row, n);
                check_row(type, row, x, n, "quantised");
                memmove(row + 1, row, quant_row_bytes(type, n));
                check_row(type, row + 1, x, n, "quantised, odd address");
                /* raw random bytes */
                random_row(&r, type, row, n);
                check_row(type, row, x, n, "random bytes");
                /* x at an odd float offset (not 32-byte aligned) */
                memmove(x + 1, x, n * sizeof(float));
                check_row(type, row, x + 1, n, "random bytes, x offset");
            }
        }
    }
    mem_free(row);
    mem_free(src);
    mem_free(x);
}

/* A block with the largest codes everywhere, so every bit of the layout counts. */
static void test_saturated_blocks(void) {
    for (size_t t = 0; t < sizeof all_types / sizeof all_types[0]; t++) {
        const uint32_t type = all_types[t];
        if (quant_block_elems(type) == 1) continue;
        const size_t n = quant_block_elems(type) * 3;
        uint8_t row[3 * 210];
        memset(row, 0xff, sizeof row);
        const size_t bb = quant_block_bytes(type);
        for (size_t b = 0; b < 3; b++) { /* keep f16 fields finite: 0x3c00 = 1, 0x3800 = 0.5 */
            uint8_t *blk = row + b * bb;
            if (type == QUANT_Q6_K) {
                blk[208] = 0x00, blk[209] = 0x3c;
            } else {
                blk[0] = 0x00, blk[1] = 0x3c;
                if (type != QUANT_Q8_0) blk[2] = 0x00, blk[3] = 0x38;
            }
        }
        float x[3 * 256];
        for (size_t i = 0; i < n; i++) x[i] = (float)((i % 5) + 1) * 0.25f;
        check_row(type, row, x, n, "saturated");
    }
}

int main(void) {
    RUN(test_fast_vs_scalar);
    RUN(test_saturated_blocks);
    return TEST_EXIT();
}
