/*
 * act_bsum_avx2.c: the one-row Q8_0 (and Q4_K / Q5_K, below) dots of the
 * AMX level (simd_level.h),
 * in the whole-block order that level's tile kernel (gemm_amx.c) can give:
 * for each block b, in order, from acc = +0:
 *     s_b = the sum of the block's 32 products w * x, an exact int32
 *           (|s_b| <= 32 * 128 * 127 < 2^24, so (float)s_b is exact too);
 *     p_b = d_w(b) * d_x(b), one IEEE single product;
 *     acc = fma(p_b, (float)s_b, acc), one rounding.
 * Every step is exact or one correctly rounded IEEE operation, so any
 * implementation of this order gives the same bits: the tile kernel for
 * each (weight row, activation row), this dot, and the tests' scalar oracle.
 * (The AVX2 and AVX-512 levels' dot, act_avx2.c, instead scales each 4-byte
 * lane sum, 8 per block, which a tile cannot give without wasting 7/8 of
 * it: bench/device-runs/2026-12-04-verify/RESULTS.md.)
 *
 * The integer sums: 8 blocks at a time as act_avx2.c forms them (vpsignb,
 * vpmaddubsw, vpmaddwd: 8 int32 lanes a block, no int16 step saturates:
 * |pair| <= 2 * 128 * 127 < 2^15), then one transposed add tree (6 vphaddd,
 * 2 lane swaps, 1 add) gives the 8 block sums; the 8 scale products are
 * one vector multiply. The float chain is scalar: one FMA a block, 4 cycles
 * of latency each, so at least 4 cycles a block (Zen 4 dev VM, 2048 x 2048
 * in cache: 0.197 ms against act_avx2.c's 0.127, whose two 8-lane chains
 * carry 16 independent sums). A decode step on many cores is memory-bound
 * (~7 GB/s a core, ~5 ns a block) and does not feel it; one core may.
 *
 * Compiled with -mavx2 -mfma -mf16c (this file only); used only when
 * quant_amx_active(), and by the tests on any AVX2 CPU.
 */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#include "quant/quant_avx2_inline.h"
#include "quant/quant_internal.h"

enum { PREFETCH_BYTES = 1024 }; /* as act_avx2.c: the weight lines ~1 KiB ahead */

/* The 8 int32 lanes of one block: lane k sums the products of bytes 4k..4k+3. */
static inline __m256i q8_lanes(const int8_t *w, const int8_t *x) {
    const __m256i qw = load_256(w), qx = load_256(x);
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* The whole sums of 8 blocks given as 8 int32 lanes each: lane k = block
 * k's sum (exact integer adds). */
static inline __m256i sum8(const __m256i v[8]) {
    /* per 128-bit half: [v0 v1 v2 v3] lanes 0-3 summed (low half) and 4-7 (high) */
    const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
}

static inline __m256i bsum8(const block_q8_0 *b, const act_q8_32 *x) {
    __m256i v[8];
    for (int k = 0; k < 8; k++) v[k] = q8_lanes(b[k].qs, x[k].qs);
    return sum8(v);
}

static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* acc = fma(d_w * d_x, s, acc) */
static inline float block_fma(const block_q8_0 *b, const act_q8_32 *x, int s, float acc) {
    return fmaf(load_f16(b->d) * x->d, (float)s, acc);
}

float quant_act_dot_q8_0_bsum_avx2(const void *row, const void *xq, size_t n) {
    const act_q8_32 *x = xq;
    const block_q8_0 *b = row;
    const size_t nb = n / QUANT_QK8_0;
    float acc = 0.0f;
    size_t i = 0;
    for (; i + 8 <= nb; i += 8, b += 8, x += 8) {
        for (int l = 0; l < 5; l++) _mm_prefetch((const char *)b + PREFETCH_BYTES + 64 * l, _MM_HINT_T0);
        /* the 8 products d_w * d_x and the 8 sums as float vectors, then the chain */
        _Alignas(16) uint16_t dw16[8];
        _Alignas(32) float dx[8], p[8], sf[8];
        for (int k = 0; k < 8; k++) dw16[k] = quant_load_u16(b[k].d), dx[k] = x[k].d;
        _mm256_store_ps(p, _mm256_mul_ps(_mm256_cvtph_ps(_mm_load_si128((const __m128i *)dw16)), _mm256_load_ps(dx)));
        _mm256_store_ps(sf, _mm256_cvtepi32_ps(bsum8(b, x)));
        for (int k = 0; k < 8; k++) acc = fmaf(p[k], sf[k], acc);
    }
    for (; i < nb; i++, b++, x++) acc = block_fma(b, x, hsum_epi32(q8_lanes(b->qs, x->qs)), acc);
    return acc;
}

/* ---- Q4_K / Q5_K: the same order per sub-block of 32 ----
 * For each super-block, in order: acc = fma((d * scale(s)) * d_x, S_s, acc)
 * for s = 0..7 (S_s the sub-block's exact code sum; d * scale(s) is exact,
 * 11 x 6 bits), then acc = fma(-(dmin * d_x), M, acc) with M = sum of
 * min(s) * (sum of the activation codes of sub-block s), exact: gemm_amx.c's
 * order. (float)S_s is exact (|S_s| <= 32 * 31 * 127 < 2^24), M too. */
static inline float k4_bsum_block(const uint8_t *blk, size_t qs_off, ptrdiff_t qh_off, const act_q8_k *x, float acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i h = qh_off >= 0 ? load_256(blk + qh_off) : _mm256_setzero_si256();
    __m256i v[8];
    for (int c = 0; c < 4; c++) {
        __m256i lo, hi;
        k4_codes(blk + qs_off, h, c, qh_off >= 0, &lo, &hi);
        /* codes <= 31 against |x| <= 127: a pair is at most 7874, no int16 saturation */
        v[2 * c] = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load_256(x->qs + 64 * c)), ones);
        v[2 * c + 1] = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load_256(x->qs + 64 * c + 32)), ones);
    }
    /* the 8 (d * scale) * d_x (d * scale exact) and the 8 sums as float vectors; M = sum of
     * min(s) * (bsums of s), exact (|bsum pair| <= 32 * 127 fits int16) */
    const __m256i sm = k4_scales_mins(blk + 4); /* scales int16 low, mins high */
    const float dx = x->d;
    _Alignas(32) float p[8], sf[8];
    const __m256 dsc = _mm256_mul_ps(_mm256_set1_ps(load_f16(blk)), _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(sm))));
    _mm256_store_ps(p, _mm256_mul_ps(dsc, _mm256_set1_ps(dx)));
    _mm256_store_ps(sf, _mm256_cvtepi32_ps(sum8(v)));
    const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums), _mm_loadu_si128((const __m128i *)(x->bsums + 8)));
    __m128i m4v = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), bs);
    m4v = _mm_add_epi32(m4v, _mm_shuffle_epi32(m4v, _MM_SHUFFLE(1, 0, 3, 2)));
    m4v = _mm_add_epi32(m4v, _mm_shuffle_epi32(m4v, _MM_SHUFFLE(2, 3, 0, 1)));
    for (int s = 0; s < 8; s++) acc = fmaf(p[s], sf[s], acc);
    return fmaf(-(load_f16(blk + 2) * dx), (float)_mm_cvtsi128_si32(m4v), acc);
}

static inline float k4_bsum(const void *row, const void *xq, size_t n, size_t qs_off, ptrdiff_t qh_off, size_t bsz) {
    const uint8_t *b = row;
    const act_q8_k *x = xq;
    float acc = 0.0f;
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b += bsz, x++) {
        _mm_prefetch((const char *)b + PREFETCH_BYTES, _MM_HINT_T0);
        _mm_prefetch((const char *)b + PREFETCH_BYTES + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)b + PREFETCH_BYTES + 128, _MM_HINT_T0);
        acc = k4_bsum_block(b, qs_off, qh_off, x, acc);
    }
    return acc;
}

float quant_act_dot_q4_k_bsum_avx2(const void *row, const void *xq, size_t n) {
    return k4_bsum(row, xq, n, offsetof(block_q4_k, qs), -1, sizeof(block_q4_k));
}

float quant_act_dot_q5_k_bsum_avx2(const void *row, const void *xq, size_t n) {
    return k4_bsum(row, xq, n, offsetof(block_q5_k, qs), (ptrdiff_t)offsetof(block_q5_k, qh), sizeof(block_q5_k));
}
