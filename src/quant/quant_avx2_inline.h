/*
 * quant_avx2_inline.h: the small AVX2 helpers that every quantised kernel
 * file (quant_avx2.c, act_avx2.c, act_bsum_avx2.c, gemm_avx2.c,
 * gemm_avx512.c, gemm_amx.c, matmul_avx2.c) uses, kept in one place: the
 * kernels must agree bit for bit (the multi-row GEMM equals the decode dot),
 * so their shared pieces must be the same code, not copies. Include only
 * from files compiled with AVX2/FMA/F16C (*_avx2.c, or the wider sets of
 * *_avx512.c and *_amx.c).
 */
#ifndef CLOVER_QUANT_AVX2_INLINE_H
#define CLOVER_QUANT_AVX2_INLINE_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant_internal.h"

/* The sum of the 8 lanes, in a fixed order (high half onto low, then pairs). */
static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* A little-endian f16 at p, as float. */
static inline float load_f16(const uint8_t *p) { return _cvtsh_ss(quant_load_u16(p)); }

static inline __m256i load_256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* A shuffle mask that broadcasts 16-bit element j of each 128-bit lane. */
static inline __m256i pick16(int j) { return _mm256_set1_epi16((short)(((2 * j + 1) << 8) | (2 * j))); }

/* The 8 six-bit scales (low 128 bits) and mins (high 128 bits) of a Q4_K /
 * Q5_K block as int16 (quant_k4_scale_min's packing, unpacked 4 bytes at a
 * time). */
static inline __m256i k4_scales_mins(const uint8_t *scales) {
    uint32_t u[3];
    memcpy(u, scales, sizeof u);
    const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, low2 = 0x03030303u;
    const uint64_t sc = (uint64_t)(u[0] & low6) | (uint64_t)((u[2] & low4) | (((u[0] >> 6) & low2) << 4)) << 32;
    const uint64_t m = (uint64_t)(u[1] & low6) | (uint64_t)(((u[2] >> 4) & low4) | (((u[1] >> 6) & low2) << 4)) << 32;
    return _mm256_cvtepu8_epi16(_mm_set_epi64x((long long)m, (long long)sc));
}

/* Chunk c (0..3) of a Q4_K / Q5_K block's codes as bytes 0..31: *lo = the
 * low nibbles of qs[32c..32c+31] (sub-block 2c), *hi = the high ones
 * (sub-block 2c+1); with five (Q5_K), bit 2c (lo) and 2c+1 (hi) of h's byte
 * l (h = the block's 32 qh bytes) adds 16 to code l. Every K-quant kernel
 * unpacks with this one piece, so they read the same codes. */
static inline __attribute__((always_inline)) void k4_codes(const uint8_t *qs, __m256i h, int c, int five, __m256i *lo,
                                                           __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), b16 = _mm256_set1_epi8(0x10);
    const __m256i q = load_256(qs + 32 * c);
    __m256i l = _mm256_and_si256(q, m4), u = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (five) {
        const __m256i bit_lo = _mm256_set1_epi8((char)(1 << (2 * c))), bit_hi = _mm256_set1_epi8((char)(2 << (2 * c)));
        l = _mm256_or_si256(l, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit_lo), bit_lo), b16));
        u = _mm256_or_si256(u, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit_hi), bit_hi), b16));
    }
    *lo = l;
    *hi = u;
}

#endif
