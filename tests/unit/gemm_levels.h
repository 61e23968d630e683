/*
 * gemm_levels.h: the checks shared by test_quant_avx512.c (the real AVX-512
 * VNNI kernel) and test_gemm_avx512_emu.c (its source on emulated
 * intrinsics): a multi-row integer kernel against
 *  1. the AVX2 kernel (gemm_avx2.c), bit for bit, on the same 8-bit rows;
 *  2. the one-row decode dot of the AVX2 level (act_avx2.c) of each row, bit for bit;
 *  3. the scalar oracle (quant_act_dot_scalar: exact integer sums, its own
 *     float order) within 2e-6 * sum |w x|;
 * for Q8_0 / Q4_K / Q5_K / Q6_K, activation rows 1..64 and past the
 * kernels' 64-row blocks (gl_all says where), column counts that cross their tiles (an odd
 * Q8_0 block count among them), output counts that leave partial 4-row
 * tiles, an output range split at a tile boundary, quantised-normal and raw
 * random weights (every code; f16 scales small and finite), an all-zero
 * row, a large row and a NaN row. Also the pieces amx_levels.h shares
 * (gl_fill_case, gl_sweep) and the through-matmul check of both levels
 * (gl_matmul_rows).
 */
#ifndef CLOVER_TEST_GEMM_LEVELS_H
#define CLOVER_TEST_GEMM_LEVELS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/threadpool.h"
#include "quant/matmul.h"
#include "quant/matmul_internal.h"
#include "quant/quant.h"
#include "quant/quant_internal.h"
#include "test.h"
#include "unit/quant_weights.h"

typedef void (*gemm_kernel_fn)(const matmul_job *j, size_t o0, size_t o1);

/* The one-row dot of the AVX2 and AVX-512 levels (act_avx2.c), named rather
 * than taken from quant_act_dot_kernel, which at the AMX level gives Q8_0
 * the whole-block dot (simd_level.h). */
static inline quant_act_dot_fn gl_avx2_dot(uint32_t type) {
    switch (type) {
    case QUANT_Q8_0: return quant_act_dot_q8_0_avx2;
    case QUANT_Q4_K: return quant_act_dot_q4_k_avx2;
    case QUANT_Q5_K: return quant_act_dot_q5_k_avx2;
    default: return quant_act_dot_q6_k_avx2;
    }
}

/* A case's inputs: the weights (fill_quant_weights), n_rows normal activation
 * rows with an all-zero row 1, a large row 2 and a NaN in row 4 (where the
 * rows exist), the weights dequantised by the scalar path into deq (n_out x
 * n_in) and each activation row quantised for the type's dot into xq (rows
 * of quant_act_row_bytes). */
static inline void gl_fill_case(rng_state *r, uint32_t type, uint8_t *w, size_t n_out, size_t n_in, int raw, float *x,
                                size_t n_rows, float *deq, uint8_t *xq) {
    const size_t rb = quant_row_bytes(type, n_in), xqb = quant_act_row_bytes(type, n_in);
    fill_quant_weights(r, type, w, n_out, n_in, raw);
    for (size_t i = 0; i < n_rows * n_in; i++) x[i] = rng_normal(r);
    if (n_rows > 1) memset(x + 1 * n_in, 0, n_in * sizeof(float)); /* an all-zero row */
    if (n_rows > 2)
        for (size_t k = 0; k < n_in; k++) x[2 * n_in + k] *= 1e4f; /* a large one */
    if (n_rows > 4) x[4 * n_in + n_in / 2] = NAN;                   /* a NaN one */
    for (size_t o = 0; o < n_out; o++) quant_dequantize_row_scalar(type, w + o * rb, deq + o * n_in, n_in);
    for (size_t rr = 0; rr < n_rows; rr++) quant_act_quantize(type, x + rr * n_in, xq + rr * xqb, n_in);
}

/* One case: returns the number of failed outputs (and reports the first). */
static inline int gl_case(gemm_kernel_fn kernel, rng_state *r, uint32_t type, size_t n_out, size_t n_in, size_t n_rows,
                   int raw) {
    const size_t rb = quant_row_bytes(type, n_in), xqb = quant_act_row_bytes(type, n_in), ny = n_rows * n_out;
    const size_t nb8 = n_in / QUANT_QK8_0;
    uint8_t *w = mem_alloc(rb * n_out);
    float *x = mem_alloc(n_rows * n_in * sizeof(float));
    uint8_t *xq = mem_alloc(n_rows * xqb + 64), *planar = mem_alloc(n_rows * xqb + 64), *planar_u8 = mem_alloc(n_rows * xqb + 64);
    uint8_t *xq_kp = mem_alloc(n_rows * xqb + 64);
    float *y = mem_alloc(ny * sizeof(float)), *y2 = mem_alloc(ny * sizeof(float));
    float *deq = mem_alloc(n_out * n_in * sizeof(float));
    int bad = 0;
    if (!w || !x || !xq || !planar || !planar_u8 || !xq_kp || !y || !y2 || !deq) {
        CHECK(!"allocation failed");
        bad = 1;
        goto out;
    }
    gl_fill_case(r, type, w, n_out, n_in, raw, x, n_rows, deq, xq);
    if (type == QUANT_Q8_0) { /* act_stage.h's planar layouts: the AVX2 kernel's, and the AVX-512 one's (codes + 128) */
        float *d = (float *)(void *)(planar + n_rows * nb8 * QUANT_QK8_0);
        float *d_u8 = (float *)(void *)(planar_u8 + n_rows * nb8 * QUANT_QK8_0);
        for (size_t rr = 0; rr < n_rows; rr++)
            for (size_t b = 0; b < nb8; b++) {
                const act_q8_32 *blk = (const act_q8_32 *)(const void *)(xq + rr * xqb) + b;
                memcpy(planar + (rr * nb8 + b) * QUANT_QK8_0, blk->qs, QUANT_QK8_0);
                for (size_t i = 0; i < QUANT_QK8_0; i++)
                    planar_u8[(rr * nb8 + b) * QUANT_QK8_0 + i] = (uint8_t)(blk->qs[i] + 128);
                d[rr * nb8 + b] = d_u8[rr * nb8 + b] = blk->d;
            }
    }
    if (type != QUANT_Q8_0) /* act_stage.h's ROWS_KPERM: per half h of a block, dwords {0,8,1,9,4,12,5,13} of each 16, then + 2 */
        for (size_t rr = 0; rr < n_rows; rr++)
            for (size_t b = 0; b < n_in / QUANT_QK_K; b++) {
                const act_q8_k *src = (const act_q8_k *)(const void *)(xq + rr * xqb) + b;
                act_q8_k *dst = (act_q8_k *)(void *)(xq_kp + rr * xqb) + b;
                *dst = *src;
                for (size_t h = 0; h < 2; h++)
                    for (size_t v = 0; v < 2; v++)
                        for (size_t i = 0; i < 16; i++) {
                            const size_t dw = 32 * h + 16 * (i / 8) + 4 * ((i % 8) / 4) + (i % 2 ? 8 : 0) + (i % 4) / 2 + 2 * v;
                            memcpy(dst->qs + 4 * (32 * h + 16 * v + i), src->qs + 4 * dw, 4);
                        }
            }
    matmul_job j = {.type = type, .w = w, .row_bytes = rb, .n_out = n_out, .n_in = n_in, .x = x, .n_rows = n_rows,
                    .rows_per_task = n_out, .xq = type == QUANT_Q8_0 ? planar_u8 : xq_kp, .xq_bytes = xqb,
                    .act_dot = gl_avx2_dot(type)};
    for (size_t i = 0; i < ny; i++) y[i] = y2[i] = -1.0f;
    const size_t split = n_out > 4 ? 4 : n_out; /* two tasks' ranges */
    j.y = y;
    kernel(&j, 0, split);
    kernel(&j, split, n_out);
    j.xq = type == QUANT_Q8_0 ? planar : xq;
    j.y = y2;
    matmul_rows_gemm_avx2(&j, 0, n_out);
    for (size_t rr = 0; rr < n_rows; rr++) {
        const float *xr = x + rr * n_in;
        for (size_t o = 0; o < n_out; o++) {
            const size_t i = rr * n_out + o;
            const uint8_t *row = w + o * rb;
            const float one = j.act_dot(row, xq + rr * xqb, n_in);
            const float sc = quant_act_dot_scalar(type, row, xq + rr * xqb, n_in);
            double mag = 0; /* sum |w x|: the scale of the float-order bound */
            for (size_t k = 0; k < n_in; k++) mag += fabs((double)deq[o * n_in + k] * xr[k]);
            /* bit for bit; two NaNs count as the same (a NaN row's payload is no result) */
            const int same_avx2 = memcmp(&y[i], &y2[i], sizeof(float)) == 0 || (isnan(y[i]) && isnan(y2[i]));
            const int same_one = memcmp(&y[i], &one, sizeof(float)) == 0 || (isnan(y[i]) && isnan(one));
            const int near = isnan(sc) ? isnan(y[i]) : fabs((double)y[i] - sc) <= 2e-6 * mag + 1e-30;
            if (!same_avx2 || !same_one || !near) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s%s out=%zu in=%zu rows=%zu: y[%zu][%zu] = %.9g, AVX2 %.9g, one-row %.9g, scalar %.9g\n",
                            quant_type_name(type), raw ? " raw" : "", n_out, n_in, n_rows, rr, o, y[i], y2[i], one, sc);
            }
        }
    }
out:
    mem_free(w), mem_free(x), mem_free(xq), mem_free(planar), mem_free(planar_u8), mem_free(xq_kp), mem_free(y), mem_free(y2), mem_free(deq);
    return bad;
}

/* One case of a level's checks (gl_case, amx_levels.h's al_case): the
 * number of failed outputs. */
typedef int (*gl_case_fn)(gemm_kernel_fn kernel, rng_state *r, uint32_t type, size_t n_out, size_t n_in, size_t n_rows,
                          int raw);

/* One type's cases, each column count of ins x each output count of outs:
 * rows 1..64 each (raw weights on odd counts) where the column count is at
 * most small_in and the output count at least 13 (not when quick), the
 * spread of row counts elsewhere (raw on odd k + o). Returns the failed
 * outputs; *cases counts the cases run. */
static inline int gl_sweep(gl_case_fn fn, gemm_kernel_fn kernel, rng_state *r, uint32_t type, const size_t *ins,
                           size_t n_ins, size_t small_in, const size_t *outs, size_t n_outs, const size_t *spread,
                           size_t n_spread, int quick, int *cases) {
    int bad = 0;
    for (size_t a = 0; a < n_ins; a++)
        for (size_t o = 0; o < n_outs; o++) {
            if (!quick && ins[a] <= small_in && outs[o] >= 13)
                for (size_t rows = 1; rows <= 64; rows++, (*cases)++)
                    bad += fn(kernel, r, type, outs[o], ins[a], rows, (int)(rows & 1));
            else
                for (size_t k = 0; k < n_spread; k++, (*cases)++)
                    bad += fn(kernel, r, type, outs[o], ins[a], spread[k], (int)((k + o) & 1));
        }
    return bad;
}

/* Every type and shape: rows 1..64 each on the smallest shapes with 13
 * outputs (three whole 4-row tiles and a partial one), a spread of row
 * counts past 64 elsewhere; quick: the spread only. */
static inline void gl_all(gemm_kernel_fn kernel, int quick) {
    static const uint32_t types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    static const size_t outs[] = {1, 5, 13};
    static const size_t spread[] = {1, 2, 3, 4, 5, 7, 8, 9, 31, 63, 64, 65, 130};
    rng_state r;
    rng_seed(&r, 3030);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const uint32_t type = types[t];
        const size_t q8_ins[] = {32, 96, 2080, 4128}, k_ins[] = {256, 768, 2304};
        const size_t *ins = type == QUANT_Q8_0 ? q8_ins : k_ins;
        const size_t n_ins = type == QUANT_Q8_0 ? 4 : 3, small_in = type == QUANT_Q8_0 ? 96 : 256;
        int cases = 0;
        const int bad = gl_sweep(gl_case, kernel, &r, type, ins, n_ins, small_in, outs, sizeof outs / sizeof outs[0],
                                 spread, sizeof spread / sizeof spread[0], quick, &cases);
        CHECK_MSG(bad == 0, "%s: %d outputs differ (AVX2 kernel, one-row dot or scalar oracle) in %d cases",
                  quant_type_name(type), bad, cases);
    }
}

/* After gl_matmul_rows has made a type's one-row products y1 (n_rows x
 * n_out, from the rows of x): a level's own checks of them, or NULL. */
typedef void (*gl_rows_fn)(uint32_t type, const uint8_t *w, size_t n_out, size_t n_in, const float *x, size_t n_rows,
                           const float *y1);

/* matmul at the level this process runs: each row of an n-row product has
 * its one-row product's bits, with no pool and with 2 threads; n = 3, 4,
 * .., up to `dense`, then steps of `step` up to 70. Q8_0 / Q4_K / Q5_K /
 * Q6_K, 37 outputs, quantised-normal and raw weights alternating. */
static inline void gl_matmul_rows(size_t dense, size_t step, gl_rows_fn also) {
    static const uint32_t types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    threadpool *pool = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool, 2, &err), CLOVER_OK);
    rng_state r;
    rng_seed(&r, 3131);
    for (size_t t = 0; t < 4; t++) {
        const uint32_t type = types[t];
        const size_t n_in = type == QUANT_Q8_0 ? 2080 : 2304, n_out = 37, n_rows = 70;
        const size_t rb = quant_row_bytes(type, n_in);
        uint8_t *w = mem_alloc(rb * n_out);
        float *x = mem_alloc(n_rows * n_in * sizeof(float));
        float *y = mem_alloc(n_rows * n_out * sizeof(float)), *y1 = mem_alloc(n_rows * n_out * sizeof(float));
        if (!w || !x || !y || !y1) {
            CHECK(!"allocation failed");
        } else {
            fill_quant_weights(&r, type, w, n_out, n_in, (int)(t & 1));
            for (size_t i = 0; i < n_rows * n_in; i++) x[i] = rng_normal(&r);
            for (size_t rr = 0; rr < n_rows; rr++) matmul(NULL, type, w, n_out, n_in, x + rr * n_in, 1, y1 + rr * n_out);
            if (also) also(type, w, n_out, n_in, x, n_rows, y1);
            for (int p = 0; p < 2; p++)
                for (size_t n = 3; n <= n_rows; n += n < dense ? 1 : step) {
                    matmul(p ? pool : NULL, type, w, n_out, n_in, x, n, y);
                    CHECK_MSG(memcmp(y, y1, n * n_out * sizeof(float)) == 0, "%s rows=%zu pool=%d: differs from one-row",
                              quant_type_name(type), n, p);
                }
        }
        mem_free(w), mem_free(x), mem_free(y), mem_free(y1);
    }
    threadpool_free(pool);
}

#endif
