/*
 * test_gemm.c: the integer multi-row kernel (src/quant/gemm_avx2.c, reached
 * through matmul with three or more rows against Q8_0 / Q4_K / Q5_K / Q6_K
 * weights on an AVX2 CPU).
 *
 * 1. Decode equality and batch invariance: every output row of an n-row
 *    product equals, bit for bit, the one-row product of that row (the
 *    decode mat-vec, act_avx2.c), for row counts that cross the kernel's
 *    64-row blocks, column counts that cross its tiles (and an odd Q8_0
 *    block count), output counts that leave partial 4-row tiles, with no
 *    pool and pools of 1 and 2 threads, and with the row at different
 *    positions of the product (a window slid over the rows).
 * 2. Against the scalar oracle (matmul_oracle: quant_act_*_scalar, exact
 *    integer sums), to float summation order: |y - oracle| <= 2e-6 * sum|w x|.
 * 3. Against the f32 oracle (matmul_scalar) within quant.h's activation
 *    rounding bound (sum over blocks of max|x_b| / 254 * sum_b |w|).
 * 4. A NaN in one row makes that row's outputs NaN and leaves the others
 *    bit-identical.
 * Weights are seeded random: quantised normal rows, and raw random blocks
 * (every code and scale value, f16 scales kept small and finite).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/threadpool.h"
#include "quant/matmul.h"
#include "quant/quant.h"
#include "test.h"
#include "unit/quant_weights.h"

static const uint32_t int_types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};

/* The activation bound of quant.h and sum |w x|, from the scalar dequantisation. */
static void bounds(uint32_t type, const uint8_t *w, size_t n_out, size_t n_in, const float *x, size_t n_rows,
                   double *mag, double *act) {
    const size_t rb = quant_row_bytes(type, n_in), ab = type == QUANT_Q8_0 ? 32 : 256;
    float *deq = mem_alloc(n_in * sizeof(float));
    for (size_t o = 0; o < n_out; o++) {
        quant_dequantize_row_scalar(type, w + o * rb, deq, n_in);
        for (size_t r = 0; r < n_rows; r++) {
            const float *xr = x + r * n_in;
            double m = 0, bnd = 0;
            for (size_t b0 = 0; b0 < n_in; b0 += ab) {
                double amax = 0, wsum = 0;
                for (size_t k = b0; k < b0 + ab; k++) {
                    amax = fmax(amax, fabs(xr[k]));
                    wsum += fabs(deq[k]);
                    m += fabs((double)deq[k] * xr[k]);
                }
                bnd += amax / 254.0 * wsum * (1 + 1e-4);
            }
            mag[r * n_out + o] = m;
            act[r * n_out + o] = bnd;
        }
    }
    mem_free(deq);
}

static void check_case(threadpool *const pools[3], rng_state *r, uint32_t type, size_t n_out, size_t n_in,
                       size_t n_rows, int raw) {
    const size_t rb = quant_row_bytes(type, n_in), ny = n_rows * n_out;
    uint8_t *w = mem_alloc(rb * n_out);
    float *x = mem_alloc(n_rows * n_in * sizeof(float));
    float *y = mem_alloc(ny * sizeof(float)), *y1 = mem_alloc(ny * sizeof(float));
    float *ys = mem_alloc(ny * sizeof(float)), *yo = mem_alloc(ny * sizeof(float)), *yf = mem_alloc(ny * sizeof(float));
    double *mag = mem_alloc(ny * sizeof(double)), *act = mem_alloc(ny * sizeof(double));
    if (!w || !x || !y || !y1 || !ys || !yo || !yf || !mag || !act) {
        CHECK(!"allocation failed");
        goto out;
    }
    fill_quant_weights(r, type, w, n_out, n_in, raw);
    for (size_t i = 0; i < n_rows * n_in; i++) x[i] = rng_normal(r);
    for (size_t k = 0; k < n_in; k++) x[1 * n_in + k] = 0.0f;   /* an all-zero row */
    for (size_t k = 0; k < n_in; k++) x[2 * n_in + k] *= 1e4f;  /* a large one */
    /* the one-row products: decode's mat-vec */
    for (size_t rr = 0; rr < n_rows; rr++) matmul(NULL, type, w, n_out, n_in, x + rr * n_in, 1, y1 + rr * n_out);
    matmul_oracle(type, w, n_out, n_in, x, n_rows, yo);
    matmul_scalar(type, w, n_out, n_in, x, n_rows, yf);
    bounds(type, w, n_out, n_in, x, n_rows, mag, act);
    int differ = 0, off_oracle = 0, off_f32 = 0;
    for (int p = 0; p < 3; p++) {
        for (size_t i = 0; i < ny; i++) y[i] = NAN;
        matmul(pools[p], type, w, n_out, n_in, x, n_rows, y);
        differ += memcmp(y, y1, ny * sizeof(float)) != 0;
    }
    for (size_t i = 0; i < ny; i++) {
        if (!(fabs((double)y[i] - yo[i]) <= 2e-6 * mag[i] + 1e-30)) {
            if (off_oracle++ < 3) fprintf(stderr, "  y[%zu] = %.9g, oracle %.9g\n", i, y[i], yo[i]);
        }
        if (!(fabs((double)y[i] - yf[i]) <= 1e-5 * mag[i] + act[i] + 1e-30)) off_f32++;
    }
    /* a window of rows at other positions: a row's result must not move */
    if (n_rows >= 6) {
        const size_t start = 1 + (size_t)(rng_next(r) % (n_rows - 5)), m = n_rows - start;
        matmul(pools[2], type, w, n_out, n_in, x + start * n_in, m, ys);
        differ += memcmp(ys, y1 + start * n_out, m * n_out * sizeof(float)) != 0;
    }
    CHECK_MSG(differ == 0, "%s%s out=%zu in=%zu rows=%zu: %d runs differ from the one-row products",
              quant_type_name(type), raw ? " raw" : "", n_out, n_in, n_rows, differ);
    CHECK_MSG(off_oracle == 0, "%s%s out=%zu in=%zu rows=%zu: %d outputs off the scalar oracle", quant_type_name(type),
              raw ? " raw" : "", n_out, n_in, n_rows, off_oracle);
    CHECK_MSG(off_f32 == 0, "%s%s out=%zu in=%zu rows=%zu: %d outputs beyond the activation bound",
              quant_type_name(type), raw ? " raw" : "", n_out, n_in, n_rows, off_f32);
out:
    mem_free(w), mem_free(x), mem_free(y), mem_free(y1), mem_free(ys), mem_free(yo), mem_free(yf);
    mem_free(mag), mem_free(act);
}

static void test_gemm_shapes(void) {
    threadpool *pool1 = NULL, *pool2 = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool1, 1, &err), CLOVER_OK);
    CHECK_EQ_INT(threadpool_create(&pool2, 2, &err), CLOVER_OK);
    threadpool *const pools[3] = {NULL, pool1, pool2};
    rng_state r;
    rng_seed(&r, 1919);
    static const size_t outs[] = {1, 5, 13, 38};
    static const size_t rows[] = {3, 7, 65};
    for (size_t t = 0; t < sizeof int_types / sizeof int_types[0]; t++) {
        const uint32_t type = int_types[t];
        /* Q8_0: 1, 3, 65 (odd, past a 64-block tile) and 129 blocks; K-quants: 1, 3, 9 (past an 8-block tile) */
        const size_t q8_ins[] = {32, 96, 2080, 4128}, k_ins[] = {256, 768, 2304};
        const size_t *ins = type == QUANT_Q8_0 ? q8_ins : k_ins;
        const size_t n_ins = type == QUANT_Q8_0 ? 4 : 3;
        for (size_t ii = 0; ii < n_ins; ii++)
            for (size_t oi = 0; oi < sizeof outs / sizeof outs[0]; oi++)
                for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
                    for (int raw = 0; raw < 2; raw++) {
                        if (ins[ii] > 1024 && outs[oi] > 13 && rows[ri] > 7) continue; /* keep it quick */
                        check_case(pools, &r, type, outs[oi], ins[ii], rows[ri], raw);
                    }
        check_case(pools, &r, type, 38, ins[n_ins - 1], 130, 0); /* three 64-row blocks and long rows */
    }
    threadpool_free(pool1);
    threadpool_free(pool2);
}

/* A NaN in one row: its outputs are NaN, every other row's are unchanged. */
static void test_gemm_nan_row(void) {
    rng_state r;
    rng_seed(&r, 77);
    for (size_t t = 0; t < sizeof int_types / sizeof int_types[0]; t++) {
        const uint32_t type = int_types[t];
        const size_t n_out = 9, n_in = 512, n_rows = 6, rb = quant_row_bytes(type, n_in);
        uint8_t *w = mem_alloc(rb * n_out);
        float *x = mem_alloc(n_rows * n_in * sizeof(float));
        float *y = mem_alloc(n_rows * n_out * sizeof(float)), *yn = mem_alloc(n_rows * n_out * sizeof(float));
        fill_quant_weights(&r, type, w, n_out, n_in, 0);
        for (size_t i = 0; i < n_rows * n_in; i++) x[i] = rng_normal(&r);
        matmul(NULL, type, w, n_out, n_in, x, n_rows, y);
        x[3 * n_in + 300] = NAN;
        matmul(NULL, type, w, n_out, n_in, x, n_rows, yn);
        int bad = 0;
        for (size_t rr = 0; rr < n_rows; rr++)
            for (size_t o = 0; o < n_out; o++) {
                const float a = y[rr * n_out + o], b = yn[rr * n_out + o];
                bad += rr == 3 ? !isnan(b) : memcmp(&a, &b, sizeof a) != 0;
            }
        CHECK_MSG(bad == 0, "%s: a NaN row: %d outputs wrong", quant_type_name(type), bad);
        mem_free(w), mem_free(x), mem_free(y), mem_free(yn);
    }
}

int main(void) {
    if (!quant_simd_active())
        TEST_SKIP("the CPU lacks AVX2, FMA or F16C (or CLOVER_NO_SIMD is set): no integer multi-row kernel to test");
    RUN(test_gemm_shapes);
    RUN(test_gemm_nan_row);
    return TEST_EXIT();
}
