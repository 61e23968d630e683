/*
 * act_avx2.c: 8-bit activations with AVX2 (quant.h's quant_act_*), called
 * only after quant.c's CPU check.
 *
 * Why: with f32 activations every weight costs a convert and an FMA, which
 * keeps the K-quant matrix-vector products compute-bound at a third to a
 * half of the memory floor on a Zen 3 core. With the activations in int8,
 * vpmaddubsw multiplies 32 unsigned weight codes by 32 signed activation
 * codes and adds pairs into 16-bit lanes in one instruction, vpmaddwd
 * applies a sub-block's integer scale and widens to 32 bits, and floats
 * appear once per block (measured: the dots run 1.4-2.2x faster on
 * cache-resident weights, bench/RESULTS.md).
 *
 * No 16-bit lane can saturate: codes are at most 63 (Q6_K) or 15 / 31
 * (Q4_K / Q5_K) against |x code| <= 127, so a pair sums to at most
 * 2 * 63 * 127 = 16002; Q8_0 takes |w| through vpsignb (|w| <= 128 against
 * |x| <= 127: 32512). 32-bit sums over a block stay below 2^26.
 *
 * Each block asks for the weight lines ~1 KiB ahead (PREFETCH_BYTES).
 *
 * The quantiser follows act_scalar.c operation for operation (max, 127/max,
 * multiply, round to nearest even), so the two produce the same bytes.
 */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#include "quant/quant_avx2_inline.h"
#include "quant/quant_internal.h"

/* Weights are streamed once per product: asking for the lines ~1 KiB ahead
 * lets one core keep more reads in flight than its hardware prefetcher
 * does (measured ~10% on a decode step of the 35B file, ~25% on a Q8_0
 * row stream: bench/RESULTS.md). Prefetches never fault, so reading past
 * the end of the tensor is harmless. */
enum { PREFETCH_BYTES = 1024 };

static inline int hsum_epi32_128(__m128i v) {
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(v);
}

/* ---- the quantiser ---- */

/* n (a multiple of 32) values into qs; returns d (see act_scalar.c). */
static float act_quantize_block(const float *x, int8_t *qs, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(FLT_MAX);
    __m256 amax = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i));
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, big, _CMP_NLE_UQ)); /* > FLT_MAX, or NaN */
        amax = _mm256_max_ps(amax, a);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float m = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    const int finite = _mm256_movemask_ps(bad) == 0;
    if (!finite || m == 0.0f) {
        for (int i = 0; i < n; i += 32) _mm256_storeu_si256((__m256i *)(qs + i), _mm256_setzero_si256());
        return finite ? 0.0f : NAN;
    }
    const __m256 is = _mm256_set1_ps(127.0f / m);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int i = 0; i < n; i += 32) {
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * k), is),
                                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* packs work within 128-bit lanes: dwords come out as a0-3 b0-3 c0-3 d0-3 a4-7 b4-7 c4-7 d4-7 */
        const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256((__m256i *)(qs + i), _mm256_permutevar8x32_epi32(p, order));
    }
    return m / 127.0f;
}

void quant_act_quantize_32_avx2(const float *x, act_q8_32 *y, size_t n) {
    for (size_t i = 0; i < n / QUANT_QK8_0; i++, y++, x += QUANT_QK8_0)
        y->d = act_quantize_block(x, y->qs, QUANT_QK8_0);
}

void quant_act_quantize_k_avx2(const float *x, act_q8_k *y, size_t n) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (size_t i = 0; i < n / QUANT_QK_K; i++, y++, x += QUANT_QK_K) {
        y->d = act_quantize_block(x, y->qs, QUANT_QK_K);
        for (int s = 0; s < QUANT_QK_K / 16; s += 2) { /* two sums of 16 per 32 codes */
            const __m256i q4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, load_256(y->qs + 16 * s)), ones16);
            y->bsums[s] = (int16_t)hsum_epi32_128(_mm256_castsi256_si128(q4));
            y->bsums[s + 1] = (int16_t)hsum_epi32_128(_mm256_extracti128_si256(q4, 1));
        }
    }
}

/* ---- Q8_0 ---- */

/* sum of w * x over 32 codes, as 8 int32 lanes. */
static inline __m256i q8_dot32(const int8_t *w, const int8_t *x) {
    const __m256i qw = load_256(w), qx = load_256(x);
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

float quant_act_dot_q8_0_avx2(const void *row, const void *xq, size_t n) {
    const act_q8_32 *x = xq;
    const block_q8_0 *b = row;
    const size_t nb = n / QUANT_QK8_0;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    size_t i = 0;
    for (; i + 2 <= nb; i += 2, b += 2, x += 2) {
        _mm_prefetch((const char *)b + PREFETCH_BYTES, _MM_HINT_T0);
        _mm_prefetch((const char *)b + PREFETCH_BYTES + 64, _MM_HINT_T0);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(b[0].d) * x[0].d),
                               _mm256_cvtepi32_ps(q8_dot32(b[0].qs, x[0].qs)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(b[1].d) * x[1].d),
                               _mm256_cvtepi32_ps(q8_dot32(b[1].qs, x[1].qs)), acc1);
    }
    if (i < nb)
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(b->d) * x->d), _mm256_cvtepi32_ps(q8_dot32(b->qs, x->qs)), acc0);
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* ---- Q4_K / Q5_K ---- */

/* Chunk c of a block: sub-blocks 2c (low nibbles, plus bit 2c of h for
 * Q5_K) and 2c+1 (high nibbles, bit 2c+1), times their scales, as 8 int32. */
static inline __m256i k4_chunk(const uint8_t *qs, __m256i h, __m256i scales, const int8_t *xq, const int c,
                               const int five) {
    __m256i lo, hi;
    k4_codes(qs, h, c, five, &lo, &hi);
    const __m256i plo = _mm256_maddubs_epi16(lo, load_256(xq + 64 * c));
    const __m256i phi = _mm256_maddubs_epi16(hi, load_256(xq + 64 * c + 32));
    return _mm256_add_epi32(_mm256_madd_epi16(plo, _mm256_shuffle_epi8(scales, pick16(2 * c))),
                            _mm256_madd_epi16(phi, _mm256_shuffle_epi8(scales, pick16(2 * c + 1))));
}

/* One Q4_K / Q5_K row (qh_off < 0 for Q4_K): blocks of stride bytes. Per block
 * the integer sum of sc_j * q * x goes into a float accumulator scaled by
 * d * dx, and the mins' term sum_j m_j * (sum of x codes of sub-block j)
 * into another scaled by dmin * dx; horizontal sums happen once per row. */
static inline float k4_row(const uint8_t *blk, size_t stride, size_t qs_off, ptrdiff_t qh_off, const act_q8_k *x,
                           size_t nb) {
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (size_t i = 0; i < nb; i++, blk += stride, x++) {
        _mm_prefetch((const char *)blk + PREFETCH_BYTES, _MM_HINT_T0);
        _mm_prefetch((const char *)blk + PREFETCH_BYTES + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)blk + PREFETCH_BYTES + 128, _MM_HINT_T0);
        const float dx = x->d, d = dx * load_f16(blk), dmin = dx * load_f16(blk + 2);
        const __m256i sm = k4_scales_mins(blk + 4);
        const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums),
                                          _mm_loadu_si128((const __m128i *)(x->bsums + 8))); /* 8 sums of 32 */
        const __m128i mins = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), bs);
        acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(mins), acc_m);
        const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
        const uint8_t *qs = blk + qs_off;
        const __m256i h = qh_off >= 0 ? load_256(blk + qh_off) : _mm256_setzero_si256();
        /* written out four times so the masks and offsets are constants */
        __m256i sum = k4_chunk(qs, h, scales, x->qs, 0, qh_off >= 0);
        sum = _mm256_add_epi32(sum, k4_chunk(qs, h, scales, x->qs, 1, qh_off >= 0));
        sum = _mm256_add_epi32(sum, k4_chunk(qs, h, scales, x->qs, 2, qh_off >= 0));
        sum = _mm256_add_epi32(sum, k4_chunk(qs, h, scales, x->qs, 3, qh_off >= 0));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    __m128 m4s = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    m4s = _mm_add_ss(m4s, _mm_movehdup_ps(m4s));
    return hsum_ps(acc) - _mm_cvtss_f32(m4s);
}

float quant_act_dot_q4_k_avx2(const void *row, const void *xq, size_t n) {
    const act_q8_k *x = xq;
    return k4_row(row, sizeof(block_q4_k), offsetof(block_q4_k, qs), -1, x, n / QUANT_QK_K);
}

float quant_act_dot_q5_k_avx2(const void *row, const void *xq, size_t n) {
    const act_q8_k *x = xq;
    return k4_row(row, sizeof(block_q5_k), offsetof(block_q5_k, qs), (ptrdiff_t)offsetof(block_q5_k, qh), x,
                  n / QUANT_QK_K);
}

/* ---- Q6_K ---- */

float quant_act_dot_q6_k_avx2(const void *row, const void *xq, size_t n) {
    const act_q8_k *x = xq;
    const block_q6_k *b = row;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    /* for group k of a half: sub-block 2k of the half in the low 128 bits, 2k+1 in the high */
    const __m256i pick[4] = {_mm256_setr_m128i(_mm256_castsi256_si128(pick16(0)), _mm256_castsi256_si128(pick16(1))),
                             _mm256_setr_m128i(_mm256_castsi256_si128(pick16(2)), _mm256_castsi256_si128(pick16(3))),
                             _mm256_setr_m128i(_mm256_castsi256_si128(pick16(4)), _mm256_castsi256_si128(pick16(5))),
                             _mm256_setr_m128i(_mm256_castsi256_si128(pick16(6)), _mm256_castsi256_si128(pick16(7)))};
    __m256 acc = _mm256_setzero_ps();
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, x++) {
        for (int l = 0; l < 4; l++) _mm_prefetch((const char *)b + PREFETCH_BYTES + 64 * l, _MM_HINT_T0);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales)); /* 16 scales */
        /* the bias: 32 * sum_s scale_s * (sum of the x codes of sub-block s) */
        __m256i sum = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load_256(x->bsums)), 5);
        sum = _mm256_sub_epi32(_mm256_setzero_si256(), sum);
        for (int h = 0; h < 2; h++) {
            const __m256i sch =
                _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            const __m256i a = load_256(b->ql + 64 * h), c = load_256(b->ql + 64 * h + 32),
                          hb = load_256(b->qh + 32 * h);
            /* 16-bit shifts move bits across bytes; the masks drop them (codes 0..63) */
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2));
            q[1] = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(hb, m2));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2));
            for (int k = 0; k < 4; k++) {
                const __m256i p = _mm256_maddubs_epi16(q[k], load_256(x->qs + 128 * h + 32 * k));
                sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sch, pick[k])));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(b->d) * x->d), _mm256_cvtepi32_ps(sum), acc);
    }
    return hsum_ps(acc);
}
