/*
 * test_matmul_group.c: grouped products (quant/matmul_group.h) give every
 * row bit for bit what matmul gives it in a product of its own group's rows
 * alone: every type, group layouts that put one-, two- and many-row groups
 * side by side (runs of one path longer than matmul would give that path,
 * runs that matmul takes whole, interleaved paths), several items in one
 * call, with and without a pool. The reference is matmul itself, called per
 * group; a wrong kernel choice (e.g. the tiled kernel for a one-row group)
 * changes the last bits of most outputs, so equality is a real test
 * (checked: at least one case per type whose kernel depends on the row
 * count where the pass's row count would have given other bits; for types
 * with one kernel at every count, the whole pass equals the groups exactly).
 *
 * The decode batches' Q8_0 kernel (gemm_small.h) is also checked on its
 * own: every row count 1..GEMM_SMALL_MAX_ROWS + 1, an odd number of blocks
 * (the tail block goes to the even accumulator), output ranges that start
 * and end off a multiple of 4, extreme codes (-128, 127, 0); each output
 * equal bit for bit to the one-row decode dot and, independently, within a
 * float-order tolerance of the scalar integer dot (act_scalar.c).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/threadpool.h"
#include "quant/matmul.h"
#include "quant/gemm_small.h"
#include "quant/matmul_group.h"
#include "quant/quant.h"
#include "quant/quant_internal.h"
#include "test.h"

static const uint32_t types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
enum { N_TYPES = sizeof types / sizeof types[0], N_IN = 512, N_OUT = 37, MAX_ROWS = 40 };

/* Group layouts: sizes of consecutive groups. */
static const uint32_t layouts[][12] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 0},       /* a decode batch: 8 one-row groups */
    {2, 1, 2, 0},                      /* per-row runs of 5 */
    {1, 5, 1, 1, 3, 2, 0},             /* paths interleaved */
    {4, 4, 4, 0},                      /* tiled groups only */
    {1, 0},                            /* one row */
    {16, 1, 1, 2, 7, 0},
};

static void one_layout(threadpool *pool, const uint32_t *sizes, const uint8_t *w, uint32_t type, const float *x,
                       size_t *differs_from_pass) {
    uint32_t own[MAX_ROWS];
    size_t n = 0;
    for (size_t g = 0; sizes[g]; g++)
        for (uint32_t r = 0; r < sizes[g]; r++) own[n++] = sizes[g];
    float *yg = mem_alloc(n * N_OUT * sizeof(float)), *ya = mem_alloc(n * N_OUT * sizeof(float));
    float *yp = mem_alloc(n * N_OUT * sizeof(float));
    for (size_t i = 0; i < n * N_OUT; i++) yg[i] = -12345.0f;
    matmul_grouped(pool, type, w, N_OUT, N_IN, x, n, yg, own);
    for (size_t a = 0, g = 0; sizes[g]; a += sizes[g], g++) /* each group alone */
        matmul(pool, type, w, N_OUT, N_IN, x + a * N_IN, sizes[g], ya + a * N_OUT);
    CHECK_MSG(!memcmp(yg, ya, n * N_OUT * sizeof(float)), "type %s, %zu rows: grouped != each group alone",
              quant_type_name(type), n);
    matmul(pool, type, w, N_OUT, N_IN, x, n, yp); /* the whole pass as one product */
    *differs_from_pass += memcmp(yp, ya, n * N_OUT * sizeof(float)) != 0;
    mem_free(yg), mem_free(ya), mem_free(yp);
}

static void grouped_equals_alone(void) {
    rng_state r;
    rng_seed(&r, 7);
    float *src = mem_alloc(N_IN * sizeof(float)), *x = mem_alloc(MAX_ROWS * N_IN * sizeof(float));
    for (size_t i = 0; i < MAX_ROWS * N_IN; i++) x[i] = rng_normal(&r);
    threadpool *pool = NULL;
    clover_error err = {0};
    CHECK_EQ_INT(threadpool_create(&pool, 2, &err), CLOVER_OK);
    for (size_t t = 0; t < N_TYPES; t++) {
        const size_t rb = quant_row_bytes(types[t], N_IN);
        uint8_t *w = mem_alloc(N_OUT * rb);
        for (size_t o = 0; o < N_OUT; o++) {
            for (size_t k = 0; k < N_IN; k++) src[k] = rng_normal(&r) * 0.05f;
            quant_quantize_row(types[t], src, w + o * rb, N_IN);
        }
        size_t differs = 0;
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
            one_layout(NULL, layouts[l], w, types[t], x, &differs);
            one_layout(pool, layouts[l], w, types[t], x, &differs);
        }
        /* Where matmul takes one path at every row count (8-bit activations
         * against quantised weights with AVX2: the multi-row kernel equals the
         * one-row dot, test_gemm), the whole pass as one product must equal
         * each group alone; where the path depends on the count (float
         * weights), some layout must show other bits, or this test could not
         * see a wrong kernel choice. */
        const int one_path = matmul_path(types[t], N_IN, 1) == matmul_path(types[t], N_IN, 2) &&
                             matmul_path(types[t], N_IN, 1) == matmul_path(types[t], N_IN, MAX_ROWS);
        if (one_path)
            CHECK_MSG(differs == 0, "type %s: one kernel path at every row count, yet %zu runs differ as one product",
                      quant_type_name(types[t]), differs);
        else if (quant_simd_active())
            CHECK_MSG(differs > 0, "type %s: no layout where the pass's own row count gives other bits: the test "
                                   "would not see a wrong kernel", quant_type_name(types[t]));
        printf("     %-5s every layout exact; %zu of %zu runs would differ as one product\n", quant_type_name(types[t]),
               differs, 2 * sizeof layouts / sizeof layouts[0]);
        mem_free(w);
    }
    threadpool_free(pool);
    mem_free(src), mem_free(x);
}

/* Several items (different weights, x and layouts) in one call. */
static void batch_of_items(void) {
    rng_state r;
    rng_seed(&r, 11);
    const uint32_t tq = QUANT_Q4_K, tf = QUANT_F32;
    const size_t rbq = quant_row_bytes(tq, N_IN), rbf = quant_row_bytes(tf, N_IN);
    uint8_t *wq = mem_alloc(N_OUT * rbq), *wf = mem_alloc(N_OUT * rbf);
    float *src = mem_alloc(N_IN * sizeof(float)), *x = mem_alloc(MAX_ROWS * N_IN * sizeof(float));
    for (size_t o = 0; o < N_OUT; o++) {
        for (size_t k = 0; k < N_IN; k++) src[k] = rng_normal(&r) * 0.05f;
        quant_quantize_row(tq, src, wq + o * rbq, N_IN);
        quant_quantize_row(tf, src, wf + o * rbf, N_IN);
    }
    for (size_t i = 0; i < MAX_ROWS * N_IN; i++) x[i] = rng_normal(&r);
    static const uint32_t own_a[6] = {1, 1, 1, 3, 3, 3}, own_b[4] = {2, 2, 1, 1};
    float ya[6 * N_OUT], yb[4 * N_OUT], ra[6 * N_OUT], rb[4 * N_OUT];
    const mm_group_item items[3] = {{{tq, wq, N_OUT, N_IN, x, 6, ya}, own_a},
                                    {{tf, wf, N_OUT, N_IN, x + 6 * N_IN, 4, yb}, own_b},
                                    {{tq, wq, N_OUT, N_IN, x, 0, NULL}, NULL}};
    threadpool *pool = NULL;
    clover_error err = {0};
    CHECK_EQ_INT(threadpool_create(&pool, 2, &err), CLOVER_OK);
    matmul_grouped_batch(pool, items, 3);
    for (size_t i = 0; i < 3; i++) matmul(NULL, tq, wq, N_OUT, N_IN, x + i * N_IN, 1, ra + i * N_OUT);
    matmul(NULL, tq, wq, N_OUT, N_IN, x + 3 * N_IN, 3, ra + 3 * N_OUT);
    matmul(NULL, tf, wf, N_OUT, N_IN, x + 6 * N_IN, 2, rb);
    matmul(NULL, tf, wf, N_OUT, N_IN, x + 8 * N_IN, 1, rb + 2 * N_OUT);
    matmul(NULL, tf, wf, N_OUT, N_IN, x + 9 * N_IN, 1, rb + 3 * N_OUT);
    CHECK(!memcmp(ya, ra, sizeof ya));
    CHECK(!memcmp(yb, rb, sizeof yb));
    threadpool_free(pool);
    mem_free(wq), mem_free(wf), mem_free(src), mem_free(x);
}

/* gemm_small.h's kernel against the one-row dot and the scalar dot. */
static void small_kernel_equals_dot(void) {
    enum { NI = 32 * 67, NO = 23, MR = GEMM_SMALL_MAX_ROWS + 1 };
    rng_state r;
    rng_seed(&r, 13);
    const size_t rb = quant_row_bytes(QUANT_Q8_0, NI), xb = quant_act_row_bytes(QUANT_Q8_0, NI);
    uint8_t *w = mem_alloc(NO * rb), *xq = mem_alloc(MR * xb);
    float *src = mem_alloc(NI * sizeof(float)), *y = mem_alloc(MR * NO * sizeof(float));
    for (size_t o = 0; o < NO; o++) {
        for (size_t k = 0; k < NI; k++) src[k] = rng_normal(&r) * 0.05f;
        quant_quantize_row(QUANT_Q8_0, src, w + o * rb, NI);
    }
    /* extreme weight codes in row 5 (bytes 2.. of each 34-byte block are the codes) */
    for (size_t b = 0; b < NI / 32; b++) {
        int8_t *qs = (int8_t *)(w + 5 * rb + b * 34 + 2);
        qs[0] = -128, qs[1] = 127, qs[2] = 0, qs[3] = -127;
    }
    for (size_t i = 0; i < MR; i++) {
        for (size_t k = 0; k < NI; k++) src[k] = rng_normal(&r) * (float)(i + 1);
        src[0] = i % 2 ? 1e3f : -1e3f; /* a block whose other codes are tiny */
        quant_act_quantize(QUANT_Q8_0, src, xq + i * xb, NI);
    }
    const quant_act_dot_fn dot = quant_act_dot_q8_0_avx2; /* gemm_small's contract: the AVX2 dot's bits, at any level */
    size_t bad_bits = 0, bad_scalar = 0, checked = 0;
    double worst = 0;
    for (size_t m = 1; m <= MR; m++) {
        const size_t o0 = m % 3, o1 = NO - m % 2;
        for (size_t i = 0; i < MR * NO; i++) y[i] = -7.0f;
        gemm_small_q8_0_avx2(w, rb, o0, o1, NI, xq, xb, m, y, NO);
        for (size_t i = 0; i < m; i++)
            for (size_t o = 0; o < NO; o++) {
                const float got = y[i * NO + o];
                if (o < o0 || o >= o1) {
                    bad_bits += got != -7.0f; /* outside the range: untouched */
                    continue;
                }
                const float want = dot(w + o * rb, xq + i * xb, NI);
                bad_bits += memcmp(&got, &want, sizeof got) != 0;
                const double ref = quant_act_dot_scalar(QUANT_Q8_0, w + o * rb, xq + i * xb, NI);
                const double err = fabs((double)got - ref) / (fabs(ref) + 1e-3);
                if (err > worst) worst = err;
                bad_scalar += err > 1e-5;
                checked++;
            }
        for (size_t i = m * NO; i < MR * NO; i++) bad_bits += y[i] != -7.0f; /* rows past m: untouched */
    }
    CHECK_MSG(bad_bits == 0, "gemm_small: %zu outputs differ from the one-row dot (or were written outside the range)",
              bad_bits);
    CHECK_MSG(bad_scalar == 0, "gemm_small: %zu outputs off the scalar dot by more than 1e-5 (worst %.3g)", bad_scalar,
              worst);
    printf("     gemm_small q8_0: %zu outputs, rows 1..%d, equal to the one-row dot; worst vs scalar %.2g\n", checked,
           (int)MR, worst);
    mem_free(w), mem_free(xq), mem_free(src), mem_free(y);
}

int main(void) {
    RUN(grouped_equals_alone);
    RUN(batch_of_items);
    /* last, so the cases above have run and checked: without AVX2 the kernel is never called, and the binary
     * reports a skip rather than a pass it did not earn */
    if (!quant_simd_active())
        TEST_SKIP("the CPU lacks AVX2, FMA or F16C (or CLOVER_NO_SIMD is set): gemm_small_avx2 is never called");
    RUN(small_kernel_equals_dot);
    return TEST_EXIT();
}
