/*
 * amx_levels.h: the checks shared by test_quant_amx.c (the real AMX
 * kernel) and test_gemm_amx_emu.c (its source on emulated tiles): the AMX
 * level's Q8_0 tile kernel (gemm_amx.c, its rows staged by gemm_amx_stage)
 * against
 *  1. the scalar oracle of the whole-block order (al_oracle below: exact
 *     integer block sums, then fmaf(d_w * d_x, sum, acc) block by block),
 *     bit for bit: the order fixes every rounding, so any correct
 *     implementation gives these bits;
 *  2. the AMX level's one-row decode dot (quant_act_dot_q8_0_bsum_avx2),
 *     bit for bit, where the CPU has AVX2;
 * and the oracle itself against the other levels' scalar oracle
 * (quant_act_dot_scalar: their float order) within 2e-6 * sum |w x|, so the
 * new order computes the same product. Activation rows 1..64 each on the
 * smallest shapes and a spread past the kernel's 16-row groups and 64-row
 * passes elsewhere; one block, odd block counts (3, 65, 129: a partial step,
 * and past the kernel's 128-block chunks); output counts that leave a
 * partial 16-row weight tile (1, 5, 13, 37) and output ranges split off a
 * tile boundary; quantised-normal and raw random weights (every code); an
 * all-zero row, a large row and a NaN row.
 */
#ifndef CLOVER_TEST_AMX_LEVELS_H
#define CLOVER_TEST_AMX_LEVELS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "quant/gemm_amx.h"
#include "quant/simd_level.h"
#include "unit/gemm_levels.h"

/* The whole-block order, written out: the independent expected value. */
static inline float al_oracle(const uint8_t *row, const act_q8_32 *x, size_t nb) {
    float acc = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        const block_q8_0 *w = (const block_q8_0 *)(const void *)(row + b * sizeof(block_q8_0));
        int32_t s = 0;
        for (int k = 0; k < QUANT_QK8_0; k++) s += (int32_t)w->qs[k] * x[b].qs[k];
        const float p = quant_f16_to_f32((uint16_t)(w->d[0] | w->d[1] << 8)) * x[b].d;
        acc = fmaf(p, (float)s, acc);
    }
    return acc;
}

static inline int al_same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b)); }

/* One case: returns the number of failed outputs (and reports the first). */
static inline int al_case(gemm_kernel_fn kernel, rng_state *r, size_t n_out, size_t n_in, size_t n_rows, int raw) {
    const uint32_t type = QUANT_Q8_0;
    const size_t rb = quant_row_bytes(type, n_in), xqb = quant_act_row_bytes(type, n_in), nb = n_in / QUANT_QK8_0;
    const size_t ny = n_rows * n_out;
    uint8_t *w = mem_alloc(rb * n_out), *xq = mem_alloc(n_rows * xqb + 64);
    uint8_t *staged = mem_alloc(gemm_amx_stage_bytes(n_rows, n_in) + 64);
    float *x = mem_alloc(n_rows * n_in * sizeof(float)), *y = mem_alloc(ny * sizeof(float));
    float *deq = mem_alloc(n_out * n_in * sizeof(float));
    int bad = 0;
    if (!w || !xq || !staged || !x || !y || !deq) {
        CHECK(!"allocation failed");
        bad = 1;
        goto out;
    }
    gl_fill_weights(r, type, w, n_out, n_in, raw);
    for (size_t i = 0; i < n_rows * n_in; i++) x[i] = rng_normal(r);
    if (n_rows > 1) memset(x + 1 * n_in, 0, n_in * sizeof(float)); /* an all-zero row */
    if (n_rows > 2)
        for (size_t k = 0; k < n_in; k++) x[2 * n_in + k] *= 1e4f; /* a large one */
    if (n_rows > 4) x[4 * n_in + n_in / 2] = NAN;                   /* a NaN one */
    for (size_t o = 0; o < n_out; o++) quant_dequantize_row_scalar(type, w + o * rb, deq + o * n_in, n_in);
    for (size_t rr = 0; rr < n_rows; rr++) quant_act_quantize(type, x + rr * n_in, xq + rr * xqb, n_in);
    memset(staged, 0xA5, gemm_amx_stage_bytes(n_rows, n_in)); /* the padding must be written, not found */
    gemm_amx_stage(x, n_rows, n_in, staged);
    matmul_job j = {.type = type, .w = w, .row_bytes = rb, .n_out = n_out, .n_in = n_in, .x = x, .n_rows = n_rows,
                    .rows_per_task = n_out, .xq = staged, .xq_bytes = xqb, .amx = 1};
    for (size_t i = 0; i < ny; i++) y[i] = -1.0f;
    /* two tasks' ranges: the first ends off a 16-row tile boundary (matmul's tasks are runs of 4) */
    const size_t split = n_out > 20 ? 20 : n_out > 4 ? 4 : n_out;
    j.y = y;
    kernel(&j, 0, split);
    kernel(&j, split, n_out);
    const int simd = quant_simd_active();
    for (size_t rr = 0; rr < n_rows; rr++) {
        const float *xr = x + rr * n_in;
        const act_q8_32 *xb = (const act_q8_32 *)(const void *)(xq + rr * xqb);
        for (size_t o = 0; o < n_out; o++) {
            const size_t i = rr * n_out + o;
            const uint8_t *row = w + o * rb;
            const float want = al_oracle(row, xb, nb);
            const float one = simd ? quant_act_dot_q8_0_bsum_avx2(row, xb, n_in) : want;
            const float sc = quant_act_dot_scalar(type, row, xb, n_in);
            double mag = 0; /* sum |w x|: the scale of the float-order bound */
            for (size_t k = 0; k < n_in; k++) mag += fabs((double)deq[o * n_in + k] * xr[k]);
            const int near = isnan(sc) ? isnan(want) : fabs((double)want - sc) <= 2e-6 * mag + 1e-30;
            if (!al_same(y[i], want) || !al_same(one, want) || !near) {
                if (bad++ < 3)
                    fprintf(stderr, "  q8_0%s out=%zu in=%zu rows=%zu: y[%zu][%zu] = %.9g, oracle %.9g, one-row %.9g, other levels' scalar %.9g\n",
                            raw ? " raw" : "", n_out, n_in, n_rows, rr, o, y[i], want, one, sc);
            }
        }
    }
out:
    mem_free(w), mem_free(xq), mem_free(staged), mem_free(x), mem_free(y), mem_free(deq);
    return bad;
}

/* Every shape; quick: the spread of row counts only. */
static inline void al_all(gemm_kernel_fn kernel, int quick) {
    static const size_t ins[] = {32, 96, 2080, 4128}, outs[] = {1, 5, 13, 37};
    static const size_t spread[] = {1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 80, 130};
    rng_state r;
    rng_seed(&r, 3030);
    int bad = 0, cases = 0;
    for (size_t a = 0; a < sizeof ins / sizeof ins[0]; a++)
        for (size_t o = 0; o < sizeof outs / sizeof outs[0]; o++) {
            if (!quick && ins[a] <= 96 && (outs[o] == 13 || outs[o] == 37))
                for (size_t rows = 1; rows <= 64; rows++, cases++) bad += al_case(kernel, &r, outs[o], ins[a], rows, (int)(rows & 1));
            else
                for (size_t k = 0; k < sizeof spread / sizeof spread[0]; k++, cases++)
                    bad += al_case(kernel, &r, outs[o], ins[a], spread[k], (int)((k + o) & 1));
        }
    CHECK_MSG(bad == 0, "q8_0: %d outputs differ from the whole-block oracle or the one-row dot in %d cases", bad, cases);
}

/* The AMX level's one-row dot alone against the oracle, every block count
 * 1..40 (the 8-block steps and every tail) and a long row. */
static inline void al_one_row(void) {
    rng_state r;
    rng_seed(&r, 3232);
    int bad = 0;
    for (size_t nb = 1; nb <= 41; nb++) {
        const size_t n_in = nb <= 40 ? nb * QUANT_QK8_0 : 16384, nbb = n_in / QUANT_QK8_0;
        const size_t rb = quant_row_bytes(QUANT_Q8_0, n_in), xqb = quant_act_row_bytes(QUANT_Q8_0, n_in);
        uint8_t *w = mem_alloc(rb), *xq = mem_alloc(xqb);
        float *x = mem_alloc(n_in * sizeof(float));
        if (!w || !xq || !x) {
            CHECK(!"allocation failed");
            mem_free(w), mem_free(xq), mem_free(x);
            return;
        }
        for (int rep = 0; rep < 4; rep++) {
            gl_fill_weights(&r, QUANT_Q8_0, w, 1, n_in, rep & 1);
            for (size_t k = 0; k < n_in; k++) x[k] = rng_normal(&r) * (rep == 2 ? 1e-30f : 1.0f);
            quant_act_quantize(QUANT_Q8_0, x, xq, n_in);
            const float want = al_oracle(w, (const act_q8_32 *)(const void *)xq, nbb);
            const float got = quant_act_dot_q8_0_bsum_avx2(w, xq, n_in);
            if (!al_same(got, want) && bad++ < 3)
                fprintf(stderr, "  one-row n=%zu rep=%d: %.9g, oracle %.9g\n", n_in, rep, got, want);
        }
        mem_free(w), mem_free(xq), mem_free(x);
    }
    CHECK_MSG(bad == 0, "the AMX level's one-row dot differs from the whole-block oracle %d times", bad);
}

#endif
