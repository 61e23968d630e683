/*
 * gemm_small_avx2.c: Q8_0 weights against a few 8-bit activation rows
 * (gemm_small.h), for the decode batches of continuous batching.
 *
 * One weight row at a time: each 32-value block is loaded once, its |w|
 * (vpsignb) formed once, and then dotted with up to 4 activation rows whose
 * 8 accumulators (even and odd blocks of each row) stay in registers; more
 * rows take another sweep of the same weight row, which is still in L1.
 *
 * Why it is bit-identical to the decode dot (act_avx2.c's
 * quant_act_dot_q8_0_avx2): for each (weight row, activation row) it does
 * the same integer work per block (vpmaddubsw of |w| and sign(x, w), then
 * vpmaddwd by ones: the same 8 int32 lanes), forms the same scalar scale
 * product f16(d_w) * d_x, converts and FMAs into the accumulator of the
 * block's parity in the same block order, and ends with the same
 * horizontal sum of acc0 + acc1. Only the loop nest changed, so a row's
 * result does not depend on the other rows (test_matmul_group checks it).
 */
#include <immintrin.h>
#include <stddef.h>

#include "quant/gemm_small.h"
#include "quant/quant_avx2_inline.h"
#include "quant/quant_internal.h"

/* The decode dot's prefetch distance: each weight row is read once per
 * product, so asking ahead helps here as there. */
enum { PREFETCH_BYTES = 1024, ROWS = 4 };

/* One weight row against m (1..ROWS) activation rows; m is a constant at
 * every call site, so the loops over it unroll. */
static inline __attribute__((always_inline)) void q8_row(const block_q8_0 *b, const uint8_t *xq, size_t xq_bytes,
                                                         size_t nb, float *y, size_t n_out, const int m,
                                                         const int prefetch) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc0[ROWS], acc1[ROWS];
    for (int r = 0; r < m; r++) acc0[r] = acc1[r] = _mm256_setzero_ps();
#define Q8_BLOCK(acc, i)                                                                                        \
    do {                                                                                                        \
        const __m256i qw = load_256(b[i].qs), aw = _mm256_sign_epi8(qw, qw);                                    \
        const __m256 dw = _mm256_set1_ps(load_f16(b[i].d));                                                     \
        for (int r = 0; r < m; r++) {                                                                           \
            const act_q8_32 *x = (const act_q8_32 *)(const void *)(xq + (size_t)r * xq_bytes) + (i);            \
            const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(load_256(x->qs), qw));                  \
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_broadcast_ss(&x->d)),                             \
                                     _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), acc[r]);                   \
        }                                                                                                       \
    } while (0)
    size_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        if (prefetch) {
            _mm_prefetch((const char *)(b + i) + PREFETCH_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *)(b + i) + PREFETCH_BYTES + 64, _MM_HINT_T0);
        }
        Q8_BLOCK(acc0, i);
        Q8_BLOCK(acc1, i + 1);
    }
    if (i < nb) Q8_BLOCK(acc0, i);
#undef Q8_BLOCK
    for (int r = 0; r < m; r++) y[(size_t)r * n_out] = hsum_ps(_mm256_add_ps(acc0[r], acc1[r]));
}

void gemm_small_q8_0_avx2(const uint8_t *w, size_t row_bytes, size_t o0, size_t o1, size_t n_in, const uint8_t *xq,
                          size_t xq_bytes, size_t n_rows, float *y, size_t n_out) {
    const size_t nb = n_in / QUANT_QK8_0;
    for (size_t o = o0; o < o1; o++) {
        const block_q8_0 *b = (const block_q8_0 *)(const void *)(w + o * row_bytes);
        for (size_t r0 = 0; r0 < n_rows; r0 += ROWS) {
            const uint8_t *x = xq + r0 * xq_bytes;
            float *yo = y + r0 * n_out + o;
            const int first = r0 == 0; /* the first sweep streams the row in; later ones find it in L1 */
            switch (n_rows - r0 < ROWS ? n_rows - r0 : ROWS) {
            case 1: q8_row(b, x, xq_bytes, nb, yo, n_out, 1, first); break;
            case 2: q8_row(b, x, xq_bytes, nb, yo, n_out, 2, first); break;
            case 3: q8_row(b, x, xq_bytes, nb, yo, n_out, 3, first); break;
            default: q8_row(b, x, xq_bytes, nb, yo, n_out, 4, first); break;
            }
        }
    }
}
