/*
 * act_bsum_avx512.c: the AMX level's whole-block dots (act_bsum_avx2.c's
 * header gives the order) on AVX-512 VNNI, one weight row or four.
 *
 * Why: that order ends each block (Q8_0) or sub-block (Q4_K / Q5_K) in one
 * scalar FMA onto one accumulator, so one row's dot is a chain of FMAs (4
 * cycles each): on the dev VM the AVX2 bsum dots sit on that chain for Q8_0
 * and Q4_K, and on their integer part for Q5_K (docs/cpu-vnni-profile.md).
 * A cheaper integer part (vpdpbusd on two blocks / sub-blocks a zmm, a
 * shuffle / unpack fold instead of vphaddd) helps Q5_K only; what lifts
 * the chain's bound is the 4-row form (quant_act_dot4_fn): four weight
 * rows against one activation row, the activation loads shared, every
 * operand of the four chains formed in lane 4 s + r of a zmm (row r's s-th
 * block or sub-block: the rows' sums folded across rows, the K-quants'
 * scales and mins decoded for 4 rows at once), then one 4-lane vector FMA
 * a step, each lane the IEEE fma the scalar chain does.
 *
 * Every row's float steps are those of act_bsum_avx2.c, in the same order,
 * and the integer sums are exact however they are formed, so the bits are
 * the AVX2 bsum dots' (test_quant_bsum512). Q4_K / Q5_K codes (0..31) are
 * unsigned and the activations signed, vpdpbusd's operands. Q8_0's signed
 * weights go in with 128 added (w ^ 0x80: 0..255), and 128 times the
 * activation codes' sum (vpdpbusd of 0x80 bytes against x) comes off
 * again: exact for every int8 (the AVX2 dot's vpsignb needs x != -128,
 * which the quantiser guarantees).
 *
 * Compiled with AVX-512 F/BW/VL/VNNI (this file only); used only at the AMX
 * level (act.c; CLOVER_BSUM512=0 keeps act_bsum_avx2.c), and by the tests
 * where quant_avx512_supported().
 */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>

#include "quant/quant_avx2_inline.h"
#include "quant/quant_internal.h"

enum { PREFETCH_BYTES = 1024 }; /* as act_avx2.c: the weight lines ~1 KiB ahead */

/* The 4-row forms ask for the 4 rows below (the next call, as matmul walks the rows) as one sequential stream,
 * NEXT4_LEAD bytes past their start: step i of a call (of the call's steps of 4 bsz bytes, 4 rows of one block or
 * super-block) asks for bytes [4 bsz i, 4 bsz (i + 1)) of it, whole lines (4 bsz is a multiple of 64). Per-row
 * prefetches 1 KiB ahead, as the one-row dots do, left these interleaved streams to memory latency: on 128 MB
 * of 512 x 2048 (and 2048 x 512) Q4_K matrices in turn the sequential stream took the 4-row dot from 5.2-7.1
 * (3.8-5.2) to 8.8-11.4 (8.7-11.5) GB/s, the AVX2 level's one-row dot 6.3-9.0 (5.2-8.0). */
enum { NEXT4_LEAD = 3072 };
_Static_assert(4 * 8 * sizeof(block_q8_0) % 64 == 0 && 4 * sizeof(block_q4_k) % 64 == 0 &&
                   4 * sizeof(block_q5_k) % 64 == 0,
               "a 4-row step reads whole lines of the stream");

static inline void prefetch_next4(const void *row, size_t rb, size_t off, int lines) {
    const char *p = (const char *)row + 4 * rb + NEXT4_LEAD + off;
    for (int l = 0; l < lines; l++) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
}

/* Two 32-byte halves in one zmm (the second through a memory-operand insert). */
static inline __m512i pair512(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(load_256(lo)), load_256(hi), 1);
}

/* The 8 sums of 8 int32 lanes each, the lanes of sum 2k in a[k]'s low half
 * and of sum 2k+1 in its high half: sum k in lane k (exact integer adds). */
static inline __m256i sum8x(const __m512i a[4]) {
    /* 128-bit quarters: [a0 a2 b0 b2] + [a1 a3 b1 b3] = sums 0..3 (4 lanes each); 4..7 likewise */
    const __m512i s03 = _mm512_add_epi32(_mm512_shuffle_i32x4(a[0], a[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                         _mm512_shuffle_i32x4(a[0], a[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i s47 = _mm512_add_epi32(_mm512_shuffle_i32x4(a[2], a[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                         _mm512_shuffle_i32x4(a[2], a[3], _MM_SHUFFLE(3, 1, 3, 1)));
    /* quarter j: [s_j s_j+4 s_j s_j+4] partial pairs, then one more fold: sum j in lane 4j, j+4 in 4j+1 */
    __m512i w = _mm512_add_epi32(_mm512_unpacklo_epi32(s03, s47), _mm512_unpackhi_epi32(s03, s47));
    w = _mm512_add_epi32(w, _mm512_shuffle_epi32(w, _MM_PERM_BADC));
    const __m512i order = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 13, 9, 5, 1, 12, 8, 4, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, w));
}

/* sum8x for 4 rows at once, into the chains' layout: a[r][k] as sum8x's a[k] for row r; *lo gets sums 0..3 and *hi
 * 4..7 of every row, sum s of row r in lane 4 (s mod 4) + r. A quarter fold per row, then two unpack folds across
 * the rows (exact integer adds). */
static inline void sums4x(const __m512i a[4][4], __m512i *lo, __m512i *hi) {
    __m512i g[2][4]; /* g[h][r]: row r's sums 4h..4h+3, one per 128-bit quarter, 4 partial lanes each */
    for (int r = 0; r < 4; r++)
        for (int h = 0; h < 2; h++)
            g[h][r] = _mm512_add_epi32(_mm512_shuffle_i32x4(a[r][2 * h], a[r][2 * h + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(a[r][2 * h], a[r][2 * h + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    __m512i z[2];
    for (int h = 0; h < 2; h++) {
        const __m512i u01 = _mm512_add_epi32(_mm512_unpacklo_epi32(g[h][0], g[h][1]),
                                             _mm512_unpackhi_epi32(g[h][0], g[h][1])); /* r0 r1 r0 r1 */
        const __m512i u23 = _mm512_add_epi32(_mm512_unpacklo_epi32(g[h][2], g[h][3]),
                                             _mm512_unpackhi_epi32(g[h][2], g[h][3])); /* r2 r3 r2 r3 */
        z[h] = _mm512_add_epi32(_mm512_unpacklo_epi64(u01, u23), _mm512_unpackhi_epi64(u01, u23)); /* r0 r1 r2 r3 */
    }
    *lo = z[0];
    *hi = z[1];
}

/* The four chains, lane r = row r: acc = fma(p[s], sf[s], acc) for s = 0..ns-1, each lane one IEEE fma as fmaf. */
static inline __m128 chain4(const float *p, const float *sf, int ns, __m128 acc) {
    for (int s = 0; s < ns; s++) acc = _mm_fmadd_ps(_mm_load_ps(p + 4 * s), _mm_load_ps(sf + 4 * s), acc);
    return acc;
}

/* ---- Q8_0 ---- */

/* -128 * (code sum) of activation blocks x[0] (lanes 0-7) and x[1] (8-15), by lane; and the blocks' codes */
static inline __m512i q8_xcorr(const act_q8_32 *x, __m512i *xv) {
    *xv = pair512(x[0].qs, x[1].qs);
    const __m512i c = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), *xv);
    return _mm512_sub_epi32(_mm512_setzero_si512(), c);
}

/* The lanes of weight blocks b[0], b[1] against xv: sum (w + 128) x - 128 sum x = sum w x. */
static inline __m512i q8_pair(const block_q8_0 *b, __m512i xv, __m512i corr) {
    const __m512i wu = _mm512_xor_si512(pair512(b[0].qs, b[1].qs), _mm512_set1_epi8((char)0x80));
    return _mm512_dpbusd_epi32(corr, wu, xv);
}

/* The 8 products d_w * d_x of blocks b[0..7] against dx (the 8 d_x). */
static inline __m256 q8_scales(const block_q8_0 *b, __m256 dx) {
    _Alignas(16) uint16_t dw16[8];
    for (int k = 0; k < 8; k++) dw16[k] = quant_load_u16(b[k].d);
    return _mm256_mul_ps(_mm256_cvtph_ps(_mm_load_si128((const __m128i *)dw16)), dx);
}

static inline __m256 q8_dx(const act_q8_32 *x) {
    _Alignas(32) float dx[8];
    for (int k = 0; k < 8; k++) dx[k] = x[k].d;
    return _mm256_load_ps(dx);
}

/* One block alone (the tail): its exact sum. */
static inline int q8_one(const block_q8_0 *b, const act_q8_32 *x) {
    const __m256i xv = load_256(x->qs), k80 = _mm256_set1_epi8((char)0x80);
    const __m256i wu = _mm256_xor_si256(load_256(b->qs), k80);
    const __m256i v = _mm256_sub_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), wu, xv),
                                       _mm256_dpbusd_epi32(_mm256_setzero_si256(), k80, xv));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

static inline float q8_tail(const block_q8_0 *b, const act_q8_32 *x, size_t nb, float acc) {
    for (size_t i = 0; i < nb; i++) acc = fmaf(load_f16(b[i].d) * x[i].d, (float)q8_one(b + i, x + i), acc);
    return acc;
}

static inline void prefetch_q8(const block_q8_0 *b) {
    for (int l = 0; l < 5; l++) _mm_prefetch((const char *)b + PREFETCH_BYTES + 64 * l, _MM_HINT_T0);
}

float quant_act_dot_q8_0_bsum_avx512(const void *row, const void *xq, size_t n) {
    const act_q8_32 *x = xq;
    const block_q8_0 *b = row;
    const size_t nb = n / QUANT_QK8_0;
    float acc = 0.0f;
    size_t i = 0;
    for (; i + 8 <= nb; i += 8, b += 8, x += 8) {
        prefetch_q8(b);
        __m512i a[4];
        for (int k = 0; k < 4; k++) {
            __m512i xv;
            const __m512i corr = q8_xcorr(x + 2 * k, &xv);
            a[k] = q8_pair(b + 2 * k, xv, corr);
        }
        _Alignas(32) float p[8], sf[8];
        _mm256_store_ps(p, q8_scales(b, q8_dx(x)));
        _mm256_store_ps(sf, _mm256_cvtepi32_ps(sum8x(a)));
        for (int k = 0; k < 8; k++) acc = fmaf(p[k], sf[k], acc);
    }
    return q8_tail(b, x, nb - i, acc);
}

/* Rows row, row + rb, row + 2 rb, row + 3 rb against one activation row: y[r] = the one-row dot of row r, the
 * four chains side by side. */
void quant_act_dot4_q8_0_bsum_avx512(const void *row, size_t rb, const void *xq, size_t n, float *y) {
    const act_q8_32 *x = xq;
    const block_q8_0 *b[4];
    for (int r = 0; r < 4; r++) b[r] = (const block_q8_0 *)(const void *)((const uint8_t *)row + r * rb);
    const size_t nb = n / QUANT_QK8_0;
    const __m512i spread_lo = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i spread_hi = _mm512_add_epi32(spread_lo, _mm512_set1_epi32(4));
    __m128 acc = _mm_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= nb; i += 8, x += 8) {
        __m512i xv[4], corr[4], a[4][4];
        prefetch_next4(row, rb, i * 4 * sizeof(block_q8_0), 4 * 8 * (int)sizeof(block_q8_0) / 64);
        for (int k = 0; k < 4; k++) corr[k] = q8_xcorr(x + 2 * k, &xv[k]);
        _Alignas(32) uint16_t dw[32]; /* d_w of block s of row r at 4 s + r, the chains' layout */
        _Alignas(32) float dx[8];
        for (int r = 0; r < 4; r++) {
            for (int k = 0; k < 4; k++) a[r][k] = q8_pair(b[r] + i + 2 * k, xv[k], corr[k]);
            for (int s = 0; s < 8; s++) dw[4 * s + r] = quant_load_u16(b[r][i + s].d);
        }
        for (int s = 0; s < 8; s++) dx[s] = x[s].d;
        const __m512 dx8 = _mm512_castps256_ps512(_mm256_load_ps(dx));
        _Alignas(64) float pt[32], st[32];
        __m512i lo, hi;
        sums4x((const __m512i(*)[4])a, &lo, &hi);
        _mm512_store_ps(pt, _mm512_mul_ps(_mm512_cvtph_ps(_mm256_load_si256((const __m256i *)dw)),
                                          _mm512_permutexvar_ps(spread_lo, dx8)));
        _mm512_store_ps(pt + 16, _mm512_mul_ps(_mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(dw + 16))),
                                               _mm512_permutexvar_ps(spread_hi, dx8)));
        _mm512_store_ps(st, _mm512_cvtepi32_ps(lo));
        _mm512_store_ps(st + 16, _mm512_cvtepi32_ps(hi));
        acc = chain4(pt, st, 8, acc);
    }
    _Alignas(16) float a4[4];
    _mm_store_ps(a4, acc);
    for (int r = 0; r < 4; r++) y[r] = q8_tail(b[r] + i, x, nb - i, a4[r]);
}

/* ---- Q4_K / Q5_K (act_bsum_avx2.c's sub-block order) ---- */

/* One super-block's float operands: p[s] = (d * scale(s)) * d_x against sf[s] = (float)S_s, then pm = -(dmin *
 * d_x) against m = (float)M. */
typedef struct k4_terms {
    __m256 p, sf;
    float pm, m;
} k4_terms;

/* An activation super-block's codes as 4 zmm (sub-blocks 2c and 2c+1 in xv[c]) and its 8 sub-block code sums
 * (int16: |sum| <= 32 * 128). */
static inline void k4_x(const act_q8_k *x, __m512i xv[4], __m128i *bs) {
    for (int c = 0; c < 4; c++) xv[c] = _mm512_loadu_si512((const void *)(x->qs + 64 * c));
    *bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums), _mm_loadu_si128((const __m128i *)(x->bsums + 8)));
}

/* Chunk c's 64 codes: the low nibbles of qs[32c..32c+31] (sub-block 2c) then the high ones (2c+1), with Q5_K's
 * fifth bit (bit 2c, 2c+1 of qh[l]) moved to bit 4 by a per-half shift of the broadcast qh. */
static inline __m512i halves16(int lo, int hi) { /* 16-bit lanes: lo in the low 256 bits, hi in the high */
    return _mm512_inserti64x4(_mm512_set1_epi16((short)lo), _mm256_set1_epi16((short)hi), 1);
}

static inline __m512i k4_codes512(const uint8_t *qs, __m512i h, int c, int five) {
    const __m512i q = _mm512_srlv_epi16(_mm512_broadcast_i64x4(load_256(qs + 32 * c)), halves16(0, 4));
    if (!five) return _mm512_and_si512(q, _mm512_set1_epi8(0x0F));
    __m512i hb; /* bit 2c (low half) / 2c+1 (high half) of each byte at bit 4; word shifts, the spill masked off */
    if (c < 2)
        hb = _mm512_sllv_epi16(h, halves16(4 - 2 * c, 3 - 2 * c));
    else
        hb = _mm512_srlv_epi16(h, halves16(2 * c - 4, 2 * c - 3));
    hb = _mm512_and_si512(hb, _mm512_set1_epi8(0x10));
    return _mm512_ternarylogic_epi32(q, _mm512_set1_epi8(0x0F), hb, 0xEA); /* (q & 0x0F) | hb */
}

/* The terms of super-block blk against x (xv, bs, dx from k4_x). */
static inline __attribute__((always_inline)) void k4_terms_of(const uint8_t *blk, size_t qs_off, ptrdiff_t qh_off,
                                                              const __m512i xv[4], __m128i bs, float dx, k4_terms *t) {
    const __m512i h = qh_off >= 0 ? _mm512_broadcast_i64x4(load_256(blk + qh_off)) : _mm512_setzero_si512();
    __m512i a[4];
    for (int c = 0; c < 4; c++)
        a[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), k4_codes512(blk + qs_off, h, c, qh_off >= 0), xv[c]);
    const __m256i sm = k4_scales_mins(blk + 4); /* scales int16 low, mins high */
    const __m256 dsc = _mm256_mul_ps(_mm256_set1_ps(load_f16(blk)),
                                     _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(sm))));
    t->p = _mm256_mul_ps(dsc, _mm256_set1_ps(dx));
    t->sf = _mm256_cvtepi32_ps(sum8x(a));
    __m128i m4v = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), bs);
    m4v = _mm_add_epi32(m4v, _mm_shuffle_epi32(m4v, _MM_SHUFFLE(1, 0, 3, 2)));
    m4v = _mm_add_epi32(m4v, _mm_shuffle_epi32(m4v, _MM_SHUFFLE(2, 3, 0, 1)));
    t->pm = -(load_f16(blk + 2) * dx);
    t->m = (float)_mm_cvtsi128_si32(m4v);
}

static inline float k4_chain(const k4_terms *t, float acc) {
    _Alignas(32) float p[8], sf[8];
    _mm256_store_ps(p, t->p);
    _mm256_store_ps(sf, t->sf);
    for (int s = 0; s < 8; s++) acc = fmaf(p[s], sf[s], acc);
    return fmaf(t->pm, t->m, acc);
}

static inline void prefetch_k4(const uint8_t *b) {
    for (int l = 0; l < 3; l++) _mm_prefetch((const char *)b + PREFETCH_BYTES + 64 * l, _MM_HINT_T0);
}

/* (Not always_inline: GCC 12 then dropped every _mm_prefetch of k4_bsum and k4_bsum4; its constant-propagated
 * clones keep them and still specialise Q4_K / Q5_K.) */
static inline float k4_bsum(const void *row, const void *xq, size_t n, size_t qs_off, ptrdiff_t qh_off, size_t bsz) {
    const uint8_t *b = row;
    const act_q8_k *x = xq;
    float acc = 0.0f;
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b += bsz, x++) {
        prefetch_k4(b);
        __m512i xv[4];
        __m128i bs;
        k4_x(x, xv, &bs);
        k4_terms t;
        k4_terms_of(b, qs_off, qh_off, xv, bs, x->d, &t);
        acc = k4_chain(&t, acc);
    }
    return acc;
}

/* ---- the 4-row K-quant step: every operand already in the chains' layout, lane 4 s + r = row r's s-th ---- */

/* The 4 rows' scale operands from their blocks' first 16 bytes (d, dmin, the 12 scale bytes), one row per 128-bit
 * quarter of hd: p[0..1] = (d * scale(s)) * d_x (lane 4 s + r, s < 4 then s >= 4), *pm = -(dmin * d_x) and *m =
 * M by row. The scales and mins decode as k4_scales_mins (quant_k4_scale_min's packing), 4 rows at once. */
static inline void k4_scales4(__m512i hd, float dx, __m128i bs, __m512 p[2], __m128 *pm, __m128 *m) {
    /* per quarter: bytes 0-7 = scale(0..3) from u0 (scales 0-3), then low nibbles of u2 (8-11); 8-15 = the mins
     * from u1 (4-7), then high nibbles of u2; the top 2 bits of j >= 4 come from u0 / u1 */
    const __m512i ia = _mm512_broadcast_i32x4(_mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15));
    const __m512i ib = _mm512_broadcast_i32x4(_mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11));
    const __m512i av = _mm512_srlv_epi16(_mm512_shuffle_epi8(hd, ia),
                                         _mm512_broadcast_i32x4(_mm_setr_epi16(0, 0, 0, 0, 0, 0, 4, 4)));
    const __m512i low = _mm512_and_si512(av, _mm512_broadcast_i32x4(_mm_set1_epi64x(0x0F0F0F0F3F3F3F3FLL)));
    const __m512i sm = _mm512_ternarylogic_epi32(low, _mm512_srli_epi16(_mm512_shuffle_epi8(hd, ib), 2),
                                                 _mm512_set1_epi8(0x30), 0xF8); /* low | (high bits & 0x30) */
    /* qwords: the 4 rows' scales, then their mins; the scales to words in the chains' order (4 s + r <- 8 r + s) */
    const __m512i q = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), sm);
    static const int16_t tr[32] = {0, 8, 16, 24, 1, 9,  17, 25, 2, 10, 18, 26, 3, 11, 19, 27,
                                   4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31};
    const __m512i sw = _mm512_permutexvar_epi16(_mm512_loadu_si512((const void *)tr),
                                                _mm512_cvtepu8_epi16(_mm512_castsi512_si256(q)));
    /* d by lane 4 s + r (word 0 of quarter r), then dmin by row (word 1) */
    static const int16_t di[32] = {0, 8, 16, 24, 0, 8, 16, 24, 0, 8, 16, 24, 0, 8, 16, 24, 1, 9, 17, 25};
    const __m512i dw = _mm512_permutexvar_epi16(_mm512_loadu_si512((const void *)di), hd);
    const __m512 d = _mm512_cvtph_ps(_mm512_castsi512_si256(dw)), dxv = _mm512_set1_ps(dx);
    p[0] = _mm512_mul_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(sw)))), dxv);
    p[1] = _mm512_mul_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(sw, 1)))),
                         dxv);
    const __m128 dmin = _mm_cvtph_ps(_mm256_castsi256_si128(_mm512_extracti64x4_epi64(dw, 1)));
    *pm = _mm_xor_ps(_mm_mul_ps(dmin, _mm_set1_ps(dx)), _mm_set1_ps(-0.0f));
    /* M by row: min(s) * (bsums pair s), summed over each quarter (exact: |M| <= 8 * 63 * 4096) */
    __m512i mm = _mm512_madd_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(q, 1)), _mm512_broadcast_i32x4(bs));
    mm = _mm512_add_epi32(mm, _mm512_shuffle_epi32(mm, _MM_PERM_BADC));
    mm = _mm512_add_epi32(mm, _mm512_shuffle_epi32(mm, _MM_PERM_CDAB));
    const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    *m = _mm_cvtepi32_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi32(pick, mm)));
}

static inline void k4_bsum4(const void *row, size_t rb, const void *xq, size_t n, float *y, size_t qs_off,
                            ptrdiff_t qh_off, size_t bsz) {
    const uint8_t *b = row;
    const act_q8_k *x = xq;
    const int five = qh_off >= 0;
    __m128 acc = _mm_setzero_ps();
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b += bsz, x++) {
        __m512i xv[4];
        __m128i bs;
        k4_x(x, xv, &bs);
        prefetch_next4(row, rb, i * 4 * bsz, 4 * (int)bsz / 64);
        __m512i a[4][4], hd = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)b)); /* row r: quarter r */
        hd = _mm512_inserti32x4(hd, _mm_loadu_si128((const __m128i *)(b + rb)), 1);
        hd = _mm512_inserti32x4(hd, _mm_loadu_si128((const __m128i *)(b + 2 * rb)), 2);
        hd = _mm512_inserti32x4(hd, _mm_loadu_si128((const __m128i *)(b + 3 * rb)), 3);
        for (int r = 0; r < 4; r++) {
            const uint8_t *blk = b + r * rb;
            const __m512i h = five ? _mm512_broadcast_i64x4(load_256(blk + qh_off)) : _mm512_setzero_si512();
            for (int c = 0; c < 4; c++)
                a[r][c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), k4_codes512(blk + qs_off, h, c, five), xv[c]);
        }
        _Alignas(64) float pt[36], st[36];
        __m512 p[2];
        __m128 pm, m;
        __m512i slo, shi;
        k4_scales4(hd, x->d, bs, p, &pm, &m);
        sums4x((const __m512i(*)[4])a, &slo, &shi);
        _mm512_store_ps(pt, p[0]);
        _mm512_store_ps(pt + 16, p[1]);
        _mm_store_ps(pt + 32, pm);
        _mm512_store_ps(st, _mm512_cvtepi32_ps(slo));
        _mm512_store_ps(st + 16, _mm512_cvtepi32_ps(shi));
        _mm_store_ps(st + 32, m);
        acc = chain4(pt, st, 9, acc);
    }
    _mm_storeu_ps(y, acc);
}

float quant_act_dot_q4_k_bsum_avx512(const void *row, const void *xq, size_t n) {
    return k4_bsum(row, xq, n, offsetof(block_q4_k, qs), -1, sizeof(block_q4_k));
}

float quant_act_dot_q5_k_bsum_avx512(const void *row, const void *xq, size_t n) {
    return k4_bsum(row, xq, n, offsetof(block_q5_k, qs), (ptrdiff_t)offsetof(block_q5_k, qh), sizeof(block_q5_k));
}

void quant_act_dot4_q4_k_bsum_avx512(const void *row, size_t rb, const void *xq, size_t n, float *y) {
    k4_bsum4(row, rb, xq, n, y, offsetof(block_q4_k, qs), -1, sizeof(block_q4_k));
}

void quant_act_dot4_q5_k_bsum_avx512(const void *row, size_t rb, const void *xq, size_t n, float *y) {
    k4_bsum4(row, rb, xq, n, y, offsetof(block_q5_k, qs), (ptrdiff_t)offsetof(block_q5_k, qh), sizeof(block_q5_k));
}
