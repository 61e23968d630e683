/*
 * test_quant_act.c: 8-bit activations and the integer dot products
 * (quant.h's quant_act_*).
 *
 *  - The quantiser on hand-worked blocks (codes, ties to even, scale, the
 *    sums of 16), non-finite and all-zero blocks; the scalar and AVX2
 *    quantisers byte for byte on random rows; |x - d q| <= d / 2.
 *  - The integer dots of Q8_0, Q4_K, Q5_K and Q6_K rows (quantised Gaussian
 *    rows and raw random bytes: every code, scale and sign pattern, f16
 *    subnormals; odd addresses), three ways:
 *     1. against an independent double sum of the scalar-dequantised
 *        weights times the DEquantised activations d * q: the integer
 *        decode must be exact, so only float rounding is allowed
 *        (1e-5 * sum |w x^|);
 *     2. AVX2 against the scalar oracle (summation order only, same bound);
 *     3. against the f32 dot quant_dot_scalar with the original x: the
 *        activation rounding bound sum_b (max|x_b| / 254) * sum_b |w|
 *        (plus 1e-5 * sum |w x|), which every result must respect; the
 *        worst share of the bound used is printed.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "quant/quant.h"
#include "test.h"

static const uint32_t int_types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};

enum { MAX_N = 17 * 256, MAX_ACT = MAX_N / 32 * 36 + MAX_N / 256 * 292 };

/* The activation block of each type, written down here: 32 for Q8_0, 256 otherwise. */
static size_t act_block(uint32_t type) { return type == QUANT_Q8_0 ? 32 : 256; }

/* Decodes an activation row by the layout of quant.h: per block an f32 d, the
 * int8 codes, and for blocks of 256 the 16 int16 sums. */
static void act_decode(uint32_t type, const uint8_t *xq, size_t n, float *d, int8_t *q, int16_t *bsums) {
    const size_t be = act_block(type), stride = be == 32 ? 36 : 292;
    for (size_t b = 0; b < n / be; b++) {
        const uint8_t *blk = xq + b * stride;
        memcpy(&d[b], blk, 4);
        memcpy(q + b * be, blk + 4, be);
        if (be == 256) memcpy(bsums + b * 16, blk + 4 + 256, 32);
    }
}

static void test_quantize_by_hand(void) {
    /* max |x| = 127: scale 1, codes = x rounded to nearest even */
    float x[256];
    for (int i = 0; i < 256; i++) x[i] = 0.0f;
    x[0] = 127.0f, x[1] = 2.5f, x[2] = -3.5f, x[3] = 0.49f, x[4] = -0.5f, x[5] = 1.5f, x[17] = -127.0f, x[255] = 64.0f;
    _Alignas(8) uint8_t xq[292], xs[292];
    float d;
    int8_t q[256];
    int16_t bs[16];
    quant_act_quantize_scalar(QUANT_Q4_K, x, xs, 256);
    quant_act_quantize(QUANT_Q4_K, x, xq, 256);
    CHECK_MSG(memcmp(xq, xs, 292) == 0, "scalar and dispatched quantisers differ");
    act_decode(QUANT_Q4_K, xq, 256, &d, q, bs);
    CHECK_NEAR(d, 1.0, 0);
    CHECK_EQ_INT(q[0], 127);
    CHECK_EQ_INT(q[1], 2);
    CHECK_EQ_INT(q[2], -4);
    CHECK_EQ_INT(q[3], 0);
    CHECK_EQ_INT(q[4], 0);
    CHECK_EQ_INT(q[5], 2);
    CHECK_EQ_INT(q[17], -127);
    CHECK_EQ_INT(q[255], 64);
    CHECK_EQ_INT(bs[0], 127 + 2 - 4 + 2); /* values 0..15 */
    CHECK_EQ_INT(bs[1], -127);
    CHECK_EQ_INT(bs[15], 64);
    for (int s = 2; s < 15; s++) CHECK_EQ_INT(bs[s], 0);

    /* a Q8_0 block of 32 with max 2.54: d = 0.02, codes x / 0.02 */
    float y[32];
    for (int i = 0; i < 32; i++) y[i] = 0.02f * (float)(i - 16);
    y[31] = 2.54f;
    quant_act_quantize(QUANT_Q8_0, y, xq, 32);
    act_decode(QUANT_Q8_0, xq, 32, &d, q, bs);
    CHECK_NEAR(d, 0.02, 1e-8);
    CHECK_EQ_INT(q[0], -16);
    CHECK_EQ_INT(q[16], 0);
    CHECK_EQ_INT(q[30], 14);
    CHECK_EQ_INT(q[31], 127);

    /* a NaN or an infinity: d NaN, codes 0, and a NaN dot; zeros: d 0 and a zero dot */
    uint8_t w[34] = {0x00, 0x3c}; /* a Q8_0 block, d = 1, codes 0.. */
    for (int i = 0; i < 32; i++) w[2 + i] = (uint8_t)i;
    const float bad[2] = {NAN, INFINITY};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 32; i++) y[i] = 1.0f;
        y[7] = bad[k];
        quant_act_quantize(QUANT_Q8_0, y, xq, 32);
        act_decode(QUANT_Q8_0, xq, 32, &d, q, bs);
        CHECK(isnan(d));
        CHECK_EQ_INT(q[0], 0);
        CHECK(isnan(quant_act_dot(QUANT_Q8_0, w, xq, 32)));
        quant_act_quantize_scalar(QUANT_Q8_0, y, xs, 32);
        CHECK(memcmp(xq, xs, 36) == 0);
    }
    for (int i = 0; i < 32; i++) y[i] = 0.0f;
    quant_act_quantize(QUANT_Q8_0, y, xq, 32);
    act_decode(QUANT_Q8_0, xq, 32, &d, q, bs);
    CHECK_NEAR(d, 0.0, 0);
    CHECK_NEAR(quant_act_dot(QUANT_Q8_0, w, xq, 32), 0.0, 0);

    CHECK_EQ_INT(quant_act_row_bytes(QUANT_Q8_0, 64), 72);
    CHECK_EQ_INT(quant_act_row_bytes(QUANT_Q6_K, 512), 584);
    CHECK_EQ_INT(quant_act_row_bytes(QUANT_F32, 512), 0);
    CHECK_EQ_INT(quant_act_row_bytes(QUANT_Q4_K, 300), 0);
}

/* A random finite f16 with a magnitude in [2^-24, 2^4]: subnormals included. */
static uint16_t random_f16(rng_state *r) {
    return (uint16_t)((rng_next(r) & 0x03ff) | ((rng_next(r) % 20) << 10) | (rng_next(r) & 1 ? 0x8000 : 0));
}

static void put_f16(uint8_t *p, uint16_t h) { p[0] = (uint8_t)(h & 0xff), p[1] = (uint8_t)(h >> 8); }

/* Raw random bytes with finite f16 fields (where each type keeps them). */
static void random_row(rng_state *r, uint32_t type, uint8_t *row, size_t n) {
    const size_t bytes = quant_row_bytes(type, n), bb = quant_block_bytes(type);
    for (size_t i = 0; i < bytes; i++) row[i] = (uint8_t)rng_next(r);
    for (size_t b = 0; b < bytes / bb; b++) {
        uint8_t *blk = row + b * bb;
        if (type == QUANT_Q6_K) {
            put_f16(blk + 208, random_f16(r));
        } else {
            put_f16(blk, random_f16(r));
            if (type != QUANT_Q8_0) put_f16(blk + 2, random_f16(r));
        }
    }
}

static double worst_share; /* of the activation-rounding bound, over every check */

static void check_dot(uint32_t type, const uint8_t *row, const float *x, size_t n, const char *what) {
    static float w[MAX_N], xd[MAX_N], dq[MAX_N / 32];
    static int8_t q[MAX_N];
    static int16_t bs[MAX_N / 16];
    _Alignas(8) static uint8_t xq[MAX_ACT], xs[MAX_ACT];
    const size_t be = act_block(type), ab = quant_act_row_bytes(type, n);
    CHECK_EQ_INT(ab, n / be * (be == 32 ? 36 : 292));
    quant_act_quantize(type, x, xq, n);
    quant_act_quantize_scalar(type, x, xs, n);
    CHECK_MSG(memcmp(xq, xs, ab) == 0, "%s n=%zu %s: the quantisers differ", quant_type_name(type), n, what);
    act_decode(type, xq, n, dq, q, bs);
    double bound = 0, mag_hat = 0, mag = 0, exact_hat = 0;
    quant_dequantize_row_scalar(type, row, w, n);
    for (size_t b = 0; b < n / be; b++) {
        double amax = 0, wsum = 0;
        for (size_t i = b * be; i < (b + 1) * be; i++) {
            xd[i] = dq[b] * (float)q[i];
            CHECK_MSG(fabs((double)x[i] - xd[i]) <= (0.5 + 1e-4) * dq[b], "x[%zu] = %g quantised to %g (d %g)", i, x[i],
                      xd[i], dq[b]);
            amax = fmax(amax, fabs(x[i]));
            wsum += fabs(w[i]);
        }
        if (be == 256)
            for (int s = 0; s < 16; s++) {
                int sum = 0;
                for (int k = 0; k < 16; k++) sum += q[b * 256 + 16 * s + k];
                CHECK_EQ_INT(bs[b * 16 + s], sum);
            }
        bound += amax / 254.0 * wsum;
    }
    for (size_t i = 0; i < n; i++) {
        exact_hat += (double)w[i] * xd[i];
        mag_hat += fabs((double)w[i] * xd[i]);
        mag += fabs((double)w[i] * x[i]);
    }
    const float oracle = quant_act_dot_scalar(type, row, xq, n), fast = quant_act_dot(type, row, xq, n);
    const float f32 = quant_dot_scalar(type, row, x, n);
    const double tol = 1e-5 * mag_hat + 1e-30;
    CHECK_MSG(fabs(oracle - exact_hat) <= tol, "%s n=%zu %s: integer oracle %.9g vs %.9g (tol %.3g)",
              quant_type_name(type), n, what, oracle, exact_hat, tol);
    CHECK_MSG(fabs(fast - oracle) <= tol, "%s n=%zu %s: fast %.9g vs oracle %.9g (tol %.3g)", quant_type_name(type), n,
              what, fast, oracle, tol);
    const double err = fabs((double)fast - f32), allowed = bound * (1 + 1e-4) + 1e-5 * mag + 1e-30;
    CHECK_MSG(err <= allowed, "%s n=%zu %s: integer dot %.9g vs f32 dot %.9g: error %.3g over the bound %.3g",
              quant_type_name(type), n, what, fast, f32, err, allowed);
    if (bound > 0 && err / bound > worst_share) worst_share = err / bound;
}

static void test_integer_dots(void) {
    if (!quant_simd_active()) printf("     (no SIMD: the dispatched path is the scalar one)\n");
    rng_state r;
    rng_seed(&r, 2024);
    uint8_t *row = mem_alloc(MAX_N + 64);
    float *src = mem_alloc(MAX_N * sizeof(float)), *x = mem_alloc((MAX_N + 1) * sizeof(float));
    static const size_t blocks[] = {1, 3, 8, 17};
    for (size_t t = 0; t < sizeof int_types / sizeof int_types[0]; t++) {
        const uint32_t type = int_types[t];
        for (size_t bi = 0; bi < sizeof blocks / sizeof blocks[0]; bi++) {
            const size_t n = blocks[bi] * (type == QUANT_Q8_0 ? 64 : 256);
            for (int trial = 0; trial < 4; trial++) {
                const float xs = trial == 3 ? 1e-3f : 1.0f;
                for (size_t i = 0; i < n; i++) x[i] = rng_normal(&r) * xs * (i % 97 == 0 ? 8.0f : 1.0f);
                for (size_t i = 0; i < n; i++) src[i] = rng_normal(&r) * 0.05f;
                quant_quantize_row(type, src, row, n);
                check_dot(type, row, x, n, "quantised");
                memmove(row + 1, row, quant_row_bytes(type, n));
                check_dot(type, row + 1, x, n, "quantised, odd address");
                random_row(&r, type, row, n);
                check_dot(type, row, x, n, "random bytes");
                memmove(x + 1, x, n * sizeof(float));
                check_dot(type, row, x + 1, n, "random bytes, x offset");
            }
        }
    }
    printf("     worst error against the f32 dot: %.3f of the activation-rounding bound\n", worst_share);
    mem_free(row), mem_free(src), mem_free(x);
}

/* The largest codes everywhere (and scales of -128 for Q6_K, codes of -128 for Q8_0), against
 * activations at +-max: no 16-bit lane may saturate. */
static void test_extreme_codes(void) {
    for (size_t t = 0; t < sizeof int_types / sizeof int_types[0]; t++) {
        const uint32_t type = int_types[t];
        const size_t n = act_block(type) * 2;
        uint8_t row[2 * 210];
        const size_t bb = quant_block_bytes(type);
        for (int fill = 0; fill < 2; fill++) {
            memset(row, fill ? 0x80 : 0xff, sizeof row);
            for (size_t b = 0; b < n / quant_block_elems(type); b++) {
                uint8_t *blk = row + b * bb;
                if (type == QUANT_Q6_K) {
                    put_f16(blk + 208, 0x3c00);
                } else {
                    put_f16(blk, 0x3c00);
                    if (type != QUANT_Q8_0) put_f16(blk + 2, 0x3800);
                }
            }
            float x[512];
            for (size_t i = 0; i < n; i++) x[i] = (i / 2) % 2 ? -1.0f : 1.0f;
            check_dot(type, row, x, n, fill ? "0x80 codes" : "0xff codes");
            for (size_t i = 0; i < n; i++) x[i] = fill ? -1.0f : 1.0f;
            check_dot(type, row, x, n, "same-sign activations");
        }
    }
}

int main(void) {
    RUN(test_quantize_by_hand);
    RUN(test_integer_dots);
    RUN(test_extreme_codes);
    return TEST_EXIT();
}
