/*
 * quant_avx2.c: AVX2 + FMA + F16C dequantisation and dot products, called
 * only after quant.c has checked the CPU.
 *
 * Activations stay f32, so a dot product turns each block's integer codes
 * into floats in registers and multiplies them by x; decoded weights are
 * never written out. What decides the speed is how few instructions get a
 * code onto the float path:
 *  - bytes are widened straight from memory to 32-bit lanes (vpmovzxbd /
 *    vpmovsxbd with a memory operand: no separate load, no unpacking);
 *  - Q4_K splits nibbles in those lanes (the high nibble is just v >> 4);
 *  - Q5_K and Q6_K first decode a whole super-block 32 codes per
 *    instruction into a 256-byte buffer on the stack (their high bits need
 *    several masks and shifts, which are 4x cheaper on bytes than on lanes),
 *    then run the same widen / convert / FMA loop over it;
 *  - the packed 6-bit scales are unpacked with 32-bit integer operations and
 *    converted to floats 8 at a time.
 * For the K-quants with a min the sub-block scale and min leave the inner
 * sum: sum_i (ds*q_i - dm) x_i = ds * sum q_i x_i - dm * sum x_i.
 *
 * Dequantisers compute ds*q - dm with a separate multiply and subtract, as
 * the scalar oracle does, so the two agree bit for bit.
 */
#include <immintrin.h>

#include "quant/quant_avx2_inline.h"
#include "quant/quant_internal.h"

static inline __m128i load_128(const void *p) { return _mm_loadu_si128((const __m128i *)p); }

/* ---- float types ---- */

static inline float load_f32(const float *p) {
    float v;
    memcpy(&v, p, sizeof v);
    return v;
}

float quant_dot_f32_avx2(const void *row, const float *x, size_t n) {
    const float *w = row; /* possibly unaligned: vector loads are loadu, scalar ones memcpy */
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += load_f32(w + i) * x[i];
    return s;
}

static inline __m256 f16x8_to_ps(const uint8_t *p) { return _mm256_cvtph_ps(load_128(p)); }

static inline __m256 bf16x8_to_ps(const uint8_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load_128(p)), 16));
}

void quant_dequant_f16_avx2(const void *src, float *dst, size_t n) {
    const uint8_t *p = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, f16x8_to_ps(p + 2 * i));
    for (; i < n; i++) dst[i] = quant_f16_to_f32(quant_load_u16(p + 2 * i));
}

void quant_dequant_bf16_avx2(const void *src, float *dst, size_t n) {
    const uint8_t *p = src;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, bf16x8_to_ps(p + 2 * i));
    for (; i < n; i++) dst[i] = quant_bf16_to_f32(quant_load_u16(p + 2 * i));
}

float quant_dot_f16_avx2(const void *row, const float *x, size_t n) {
    const uint8_t *p = row;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(f16x8_to_ps(p + 2 * i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(f16x8_to_ps(p + 2 * i + 16), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(f16x8_to_ps(p + 2 * i + 32), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(f16x8_to_ps(p + 2 * i + 48), _mm256_loadu_ps(x + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(f16x8_to_ps(p + 2 * i), _mm256_loadu_ps(x + i), a0);
    float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += quant_f16_to_f32(quant_load_u16(p + 2 * i)) * x[i];
    return s;
}

float quant_dot_bf16_avx2(const void *row, const float *x, size_t n) {
    const uint8_t *p = row;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(bf16x8_to_ps(p + 2 * i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(bf16x8_to_ps(p + 2 * i + 16), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(bf16x8_to_ps(p + 2 * i + 32), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(bf16x8_to_ps(p + 2 * i + 48), _mm256_loadu_ps(x + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(bf16x8_to_ps(p + 2 * i), _mm256_loadu_ps(x + i), a0);
    float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += quant_bf16_to_f32(quant_load_u16(p + 2 * i)) * x[i];
    return s;
}

/* ---- byte codes ---- */

/* 8 bytes at p widened to 8 int32 lanes: one vpmovzxbd / vpmovsxbd from
 * memory, the cheapest way onto the float path (no separate load, no unpack). */
static inline __m256i u8x8_load(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

static inline __m256i i8x8_load(const int8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

/* ---- Q8_0 ---- */

void quant_dequant_q8_0_avx2(const void *src, float *dst, size_t n) {
    const block_q8_0 *b = src;
    for (size_t i = 0; i < n / QUANT_QK8_0; i++, b++, dst += QUANT_QK8_0) {
        const __m256 d = _mm256_set1_ps(load_f16(b->d));
        for (int k = 0; k < 4; k++)
            _mm256_storeu_ps(dst + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(i8x8_load(b->qs + 8 * k)), d));
    }
}

/* sum_j q_j x_j over one block, two partial sums. */
static inline __m256 q8_0_block_dot(const block_q8_0 *b, const float *x) {
    __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(i8x8_load(b->qs)), _mm256_loadu_ps(x));
    __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(i8x8_load(b->qs + 8)), _mm256_loadu_ps(x + 8));
    s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i8x8_load(b->qs + 16)), _mm256_loadu_ps(x + 16), s);
    t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i8x8_load(b->qs + 24)), _mm256_loadu_ps(x + 24), t);
    return _mm256_add_ps(s, t);
}

float quant_dot_q8_0_avx2(const void *row, const float *x, size_t n) {
    const block_q8_0 *b = row;
    const size_t nb = n / QUANT_QK8_0;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    size_t i = 0;
    for (; i + 2 <= nb; i += 2, b += 2, x += 2 * QUANT_QK8_0) {
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(b[0].d)), q8_0_block_dot(b, x), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(b[1].d)), q8_0_block_dot(b + 1, x + QUANT_QK8_0), acc1);
    }
    if (i < nb) acc0 = _mm256_fmadd_ps(_mm256_set1_ps(load_f16(b->d)), q8_0_block_dot(b, x), acc0);
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* ---- Q4_K / Q5_K ---- */

/* The 8 scales and 8 mins of a Q4_K/Q5_K block, times d and dmin, into
 * ds[8] and dm[8]. The packing of quant_k4_scale_min, four bytes at a time:
 * sc[0..3] = b[0..3] & 63, m[0..3] = b[4..7] & 63,
 * sc[4..7] = b[8..11] & 15 | (b[0..3] >> 6) << 4, m[4..7] = b[8..11] >> 4 | (b[4..7] >> 6) << 4. */
static inline void k4_scales(const uint8_t *scales, float d, float dmin, float *ds, float *dm) {
    uint32_t u[3];
    memcpy(u, scales, sizeof u);
    const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, low2 = 0x03030303u;
    const uint64_t sc = (uint64_t)(u[0] & low6) | (uint64_t)((u[2] & low4) | (((u[0] >> 6) & low2) << 4)) << 32;
    const uint64_t m = (uint64_t)(u[1] & low6) | (uint64_t)(((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4)) << 32;
    const __m256 vsc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc)));
    const __m256 vm = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)m)));
    _mm256_storeu_ps(ds, _mm256_mul_ps(vsc, _mm256_set1_ps(d)));
    _mm256_storeu_ps(dm, _mm256_mul_ps(vm, _mm256_set1_ps(dmin)));
}

/* Decodes the 256 codes of a Q4_K / Q5_K block into codes[256] (values 0..31),
 * 32 at a time in bytes: chunk c of qs gives values 64c+l (low nibbles) and
 * 64c+32+l (high nibbles); for Q5_K bits 2c and 2c+1 of qh[l] add 16. */
static inline void k4_decode(const uint8_t *qs, const uint8_t *qh, uint8_t *codes) {
    const __m256i h = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        __m256i lo, hi;
        k4_codes(qs, h, c, qh != NULL, &lo, &hi);
        _mm256_store_si256((__m256i *)(codes + 64 * c), lo);
        _mm256_store_si256((__m256i *)(codes + 64 * c + 32), hi);
    }
}

/* 8 codes at p as floats (one vpmovzxbd from the L1-resident code buffer). */
static inline __m256 codes8_u(const uint8_t *p) { return _mm256_cvtepi32_ps(u8x8_load(p)); }
static inline __m256 codes8_s(const int8_t *p) { return _mm256_cvtepi32_ps(i8x8_load(p)); }

/* One Q4_K/Q5_K block through the code buffer (used for Q5_K), adding
 * ds[s] * sum q x into acc[0..1] and dm[s] * sum x into acc[2..3]. */
static inline void k4_dot_codes(const uint8_t *d, const uint8_t *dmin, const uint8_t *scales, const uint8_t *qh,
                                const uint8_t *qs, const float *x, __m256 acc[4]) {
    _Alignas(32) uint8_t codes[QUANT_QK_K];
    _Alignas(32) float ds[8], dm[8];
    k4_decode(qs, qh, codes);
    k4_scales(scales, load_f16(d), load_f16(dmin), ds, dm);
    for (int s = 0; s < 8; s += 2) { /* two sub-blocks of 32 per step: four independent chains */
        __m256 q0 = _mm256_setzero_ps(), q1 = q0, x0 = q0, x1 = q0;
        for (int p = 0; p < 32; p += 8) {
            const __m256 xa = _mm256_loadu_ps(x + 32 * s + p), xb = _mm256_loadu_ps(x + 32 * s + 32 + p);
            q0 = _mm256_fmadd_ps(codes8_u(codes + 32 * s + p), xa, q0);
            q1 = _mm256_fmadd_ps(codes8_u(codes + 32 * s + 32 + p), xb, q1);
            x0 = _mm256_add_ps(x0, xa);
            x1 = _mm256_add_ps(x1, xb);
        }
        acc[0] = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[s]), q0, acc[0]);
        acc[1] = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[s + 1]), q1, acc[1]);
        acc[2] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dm[s]), x0, acc[2]);
        acc[3] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dm[s + 1]), x1, acc[3]);
    }
}

static inline void k4_dequant(const uint8_t *d, const uint8_t *dmin, const uint8_t *scales, const uint8_t *qh,
                              const uint8_t *qs, float *y) {
    _Alignas(32) uint8_t codes[QUANT_QK_K];
    _Alignas(32) float ds[8], dm[8];
    k4_decode(qs, qh, codes);
    k4_scales(scales, load_f16(d), load_f16(dmin), ds, dm);
    for (int s = 0; s < 8; s++) {
        const __m256 vd = _mm256_broadcast_ss(&ds[s]), vm = _mm256_broadcast_ss(&dm[s]);
        for (int p = 0; p < 32; p += 8)
            _mm256_storeu_ps(y + 32 * s + p, _mm256_sub_ps(_mm256_mul_ps(codes8_u(codes + 32 * s + p), vd), vm));
    }
}

/* Q4_K's dot reads the nibbles straight from qs: in 32-bit lanes a byte's
 * high nibble is just v >> 4, cheaper than a trip through the code buffer. */
float quant_dot_q4_k_avx2(const void *row, const float *x, size_t n) {
    const block_q4_k *b = row;
    const __m256i m4 = _mm256_set1_epi32(0x0F);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    _Alignas(32) float ds[8], dm[8];
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, x += QUANT_QK_K) {
        k4_scales(b->scales, load_f16(b->d), load_f16(b->dmin), ds, dm);
        for (int c = 0; c < 4; c++) { /* sub-blocks 2c (low nibbles) and 2c+1 (high nibbles) */
            const float *xc = x + 64 * c;
            __m256 s_lo = _mm256_setzero_ps(), s_hi = s_lo, x_lo = s_lo, x_hi = s_lo;
            for (int p = 0; p < 32; p += 8) {
                const __m256i v = u8x8_load(b->qs + 32 * c + p);
                const __m256 xl = _mm256_loadu_ps(xc + p), xh = _mm256_loadu_ps(xc + 32 + p);
                s_lo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(v, m4)), xl, s_lo);
                s_hi = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)), xh, s_hi);
                x_lo = _mm256_add_ps(x_lo, xl);
                x_hi = _mm256_add_ps(x_hi, xh);
            }
            acc[0] = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[2 * c]), s_lo, acc[0]);
            acc[1] = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[2 * c + 1]), s_hi, acc[1]);
            acc[2] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dm[2 * c]), x_lo, acc[2]);
            acc[3] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dm[2 * c + 1]), x_hi, acc[3]);
        }
    }
    return hsum_ps(_mm256_sub_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

void quant_dequant_q4_k_avx2(const void *src, float *dst, size_t n) {
    const block_q4_k *b = src;
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, dst += QUANT_QK_K)
        k4_dequant(b->d, b->dmin, b->scales, NULL, b->qs, dst);
}

float quant_dot_q5_k_avx2(const void *row, const float *x, size_t n) {
    const block_q5_k *b = row;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, x += QUANT_QK_K)
        k4_dot_codes(b->d, b->dmin, b->scales, b->qh, b->qs, x, acc);
    return hsum_ps(_mm256_sub_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

void quant_dequant_q5_k_avx2(const void *src, float *dst, size_t n) {
    const block_q5_k *b = src;
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, dst += QUANT_QK_K)
        k4_dequant(b->d, b->dmin, b->scales, b->qh, b->qs, dst);
}

/* ---- Q6_K ---- */

/* Decodes the 256 signed codes (q - 32) of a Q6_K block into codes[256], 32
 * bytes at a time: in half h, with A = ql[64h..+32], C = ql[64h+32..+32] and
 * H = qh[32h..+32], values 128h+32k+l take (A or C) nibbles and 2 bits of H. */
static inline void q6_decode(const block_q6_k *b, int8_t *codes) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30), bias = _mm256_set1_epi8(32);
    for (int h = 0; h < 2; h++) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i c = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        /* The 16-bit shifts move bits across byte boundaries; the masks drop them. */
        const __m256i q0 = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2));
        const __m256i q1 = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2));
        const __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(hb, m2));
        const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2));
        _mm256_store_si256((__m256i *)(codes + 128 * h), _mm256_sub_epi8(q0, bias));
        _mm256_store_si256((__m256i *)(codes + 128 * h + 32), _mm256_sub_epi8(q1, bias));
        _mm256_store_si256((__m256i *)(codes + 128 * h + 64), _mm256_sub_epi8(q2, bias));
        _mm256_store_si256((__m256i *)(codes + 128 * h + 96), _mm256_sub_epi8(q3, bias));
    }
}

/* d * scales[s] for the 16 sub-blocks (the product the scalar oracle forms). */
static inline void q6_scales(const block_q6_k *b, float *dsc) {
    const __m256 d = _mm256_set1_ps(load_f16(b->d));
    const __m128i sc = _mm_loadu_si128((const __m128i *)b->scales);
    _mm256_storeu_ps(dsc, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)), d));
    _mm256_storeu_ps(dsc + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc, sc))), d));
}

float quant_dot_q6_k_avx2(const void *row, const float *x, size_t n) {
    const block_q6_k *b = row;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    _Alignas(32) int8_t codes[QUANT_QK_K];
    _Alignas(32) float dsc[16];
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, x += QUANT_QK_K) {
        q6_decode(b, codes);
        q6_scales(b, dsc);
        for (int s = 0; s < 16; s += 2) { /* sub-blocks of 16 values, two per step */
            const int8_t *c = codes + 16 * s;
            const float *xs = x + 16 * s;
            __m256 s0 = _mm256_mul_ps(codes8_s(c), _mm256_loadu_ps(xs));
            __m256 s1 = _mm256_mul_ps(codes8_s(c + 16), _mm256_loadu_ps(xs + 16));
            s0 = _mm256_fmadd_ps(codes8_s(c + 8), _mm256_loadu_ps(xs + 8), s0);
            s1 = _mm256_fmadd_ps(codes8_s(c + 24), _mm256_loadu_ps(xs + 24), s1);
            acc0 = _mm256_fmadd_ps(_mm256_broadcast_ss(&dsc[s]), s0, acc0);
            acc1 = _mm256_fmadd_ps(_mm256_broadcast_ss(&dsc[s + 1]), s1, acc1);
        }
    }
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

void quant_dequant_q6_k_avx2(const void *src, float *dst, size_t n) {
    const block_q6_k *b = src;
    _Alignas(32) int8_t codes[QUANT_QK_K];
    _Alignas(32) float dsc[16];
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, dst += QUANT_QK_K) {
        q6_decode(b, codes);
        q6_scales(b, dsc);
        for (int s = 0; s < 16; s++) {
            const __m256 v = _mm256_broadcast_ss(&dsc[s]);
            _mm256_storeu_ps(dst + 16 * s, _mm256_mul_ps(v, codes8_s(codes + 16 * s)));
            _mm256_storeu_ps(dst + 16 * s + 8, _mm256_mul_ps(v, codes8_s(codes + 16 * s + 8)));
        }
    }
}
