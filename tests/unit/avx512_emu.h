/*
 * avx512_emu.h: the AVX-512 intrinsics gemm_avx512.c uses, written as pairs
 * of AVX2 operations on two 256-bit halves, after Intel's definitions of
 * each instruction (the Intrinsics Guide's operation pseudo-code). Only for
 * test_gemm_avx512_emu.c, which compiles the kernel's source against this
 * header so that its lane arithmetic (which half holds which block, the
 * x + 128 correction, the masked odd block, the folds) is checked on
 * every AVX2 machine, including CI's, which have no AVX-512. The real
 * instructions are checked where the CPU has them (test_quant_avx512).
 *
 * Include after <immintrin.h>, in a file compiled with -mavx2 -mfma -mf16c:
 * the macros below rename the types and intrinsics to the emulations.
 */
#ifndef CLOVER_TEST_AVX512_EMU_H
#define CLOVER_TEST_AVX512_EMU_H

#include <immintrin.h>
#include <stdint.h>

typedef struct emu_m512i {
    __m256i lo, hi;
} emu_m512i;
typedef struct emu_m512 {
    __m256 lo, hi;
} emu_m512;
typedef struct emu_m512d {
    __m256d lo, hi;
} emu_m512d;

#define __m512i emu_m512i
#define __m512 emu_m512
#define __m512d emu_m512d

static inline emu_m512i emu_inserti64x4(emu_m512i a, __m256i b, int imm) {
    if (imm & 1) a.hi = b;
    else a.lo = b;
    return a;
}
static inline emu_m512i emu_castsi256_si512(__m256i a) { return (emu_m512i){a, _mm256_setzero_si256()}; }
static inline __m256i emu_castsi512_si256(emu_m512i a) { return a.lo; }
static inline __m256i emu_extracti64x4_epi64(emu_m512i a, int imm) { return imm & 1 ? a.hi : a.lo; }
static inline emu_m512 emu_castpd_ps(emu_m512d a) { return (emu_m512){_mm256_castpd_ps(a.lo), _mm256_castpd_ps(a.hi)}; }
static inline emu_m512d emu_castps_pd(emu_m512 a) { return (emu_m512d){_mm256_castps_pd(a.lo), _mm256_castps_pd(a.hi)}; }
static inline emu_m512d emu_insertf64x4(emu_m512d a, __m256d b, int imm) {
    if (imm & 1) a.hi = b;
    else a.lo = b;
    return a;
}
static inline emu_m512 emu_castps256_ps512(__m256 a) { return (emu_m512){a, _mm256_setzero_ps()}; }
static inline __m256 emu_castps512_ps256(emu_m512 a) { return a.lo; }
static inline __m256d emu_extractf64x4_pd(emu_m512d a, int imm) { return imm & 1 ? a.hi : a.lo; }
static inline emu_m512i emu_setzero_si512(void) { return (emu_m512i){_mm256_setzero_si256(), _mm256_setzero_si256()}; }
static inline emu_m512 emu_setzero_ps(void) { return (emu_m512){_mm256_setzero_ps(), _mm256_setzero_ps()}; }
static inline emu_m512i emu_set1_epi8(char c) { return (emu_m512i){_mm256_set1_epi8(c), _mm256_set1_epi8(c)}; }
static inline emu_m512i emu_loadu_si512(const void *p) {
    return (emu_m512i){_mm256_loadu_si256((const __m256i *)p), _mm256_loadu_si256((const __m256i *)p + 1)};
}
static inline emu_m512i emu_xor_si512(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_xor_si256(a.lo, b.lo), _mm256_xor_si256(a.hi, b.hi)};
}
static inline emu_m512i emu_sub_epi32(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)};
}
/* vpmaddubsw and vpmaddwd work within 128-bit lanes: per half as AVX2. */
static inline emu_m512i emu_maddubs_epi16(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_maddubs_epi16(a.lo, b.lo), _mm256_maddubs_epi16(a.hi, b.hi)};
}
static inline emu_m512i emu_madd_epi16(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_madd_epi16(a.lo, b.lo), _mm256_madd_epi16(a.hi, b.hi)};
}
/* vpdpwssd: dword j += a.w[2j] * b.w[2j] + a.w[2j+1] * b.w[2j+1], signed,
 * wrapping; computed in 64-bit integers per lane and truncated. */
static inline __m256i emu_dpwssd_256(__m256i src, __m256i a, __m256i b) {
    int32_t s[8], r[8];
    int16_t x[16], y[16];
    _mm256_storeu_si256((__m256i *)s, src);
    _mm256_storeu_si256((__m256i *)x, a);
    _mm256_storeu_si256((__m256i *)y, b);
    for (int j = 0; j < 8; j++)
        r[j] = (int32_t)(uint32_t)((int64_t)s[j] + (int64_t)x[2 * j] * y[2 * j] + (int64_t)x[2 * j + 1] * y[2 * j + 1]);
    return _mm256_loadu_si256((const __m256i *)r);
}
static inline emu_m512i emu_dpwssd_epi32(emu_m512i src, emu_m512i a, emu_m512i b) {
    return (emu_m512i){emu_dpwssd_256(src.lo, a.lo, b.lo), emu_dpwssd_256(src.hi, a.hi, b.hi)};
}
/* (Some intrinsics are macros in gcc's or clang's header: each is undefined
 * before it is renamed below.) */

/* vpdpbusd: dword j += sum over k < 4 of ZeroExtend(a.byte[4j+k]) * SignExtend(b.byte[4j+k]). */
static inline __m256i emu_dpbusd_256(__m256i src, __m256i a, __m256i b) {
    int32_t s[8], r[8];
    uint8_t x[32];
    int8_t y[32];
    _mm256_storeu_si256((__m256i *)s, src);
    _mm256_storeu_si256((__m256i *)x, a);
    _mm256_storeu_si256((__m256i *)y, b);
    for (int j = 0; j < 8; j++) {
        int64_t t = s[j];
        for (int k = 0; k < 4; k++) t += (int64_t)x[4 * j + k] * y[4 * j + k];
        r[j] = (int32_t)(uint32_t)t;
    }
    return _mm256_loadu_si256((const __m256i *)r);
}
static inline emu_m512i emu_dpbusd_epi32(emu_m512i src, emu_m512i a, emu_m512i b) {
    return (emu_m512i){emu_dpbusd_256(src.lo, a.lo, b.lo), emu_dpbusd_256(src.hi, a.hi, b.hi)};
}
/* vpermt2d: dword i = (idx[i] & 16 ? b : a)[idx[i] & 15]. */
static inline emu_m512i emu_permutex2var_epi32(emu_m512i a, emu_m512i idx, emu_m512i b) {
    int32_t src[32], ix[16], r[16];
    _mm256_storeu_si256((__m256i *)src, a.lo);
    _mm256_storeu_si256((__m256i *)(src + 8), a.hi);
    _mm256_storeu_si256((__m256i *)(src + 16), b.lo);
    _mm256_storeu_si256((__m256i *)(src + 24), b.hi);
    _mm256_storeu_si256((__m256i *)ix, idx.lo);
    _mm256_storeu_si256((__m256i *)(ix + 8), idx.hi);
    for (int i = 0; i < 16; i++) r[i] = src[ix[i] & 31];
    return (emu_m512i){_mm256_loadu_si256((const __m256i *)r), _mm256_loadu_si256((const __m256i *)(r + 8))};
}
/* vpackssdw works within 128-bit lanes: per half as AVX2. */
static inline emu_m512i emu_packs_epi32(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_packs_epi32(a.lo, b.lo), _mm256_packs_epi32(a.hi, b.hi)};
}
static inline emu_m512i emu_setr_epi32(int e0, int e1, int e2, int e3, int e4, int e5, int e6, int e7, int e8, int e9,
                                       int e10, int e11, int e12, int e13, int e14, int e15) {
    return (emu_m512i){_mm256_setr_epi32(e0, e1, e2, e3, e4, e5, e6, e7),
                       _mm256_setr_epi32(e8, e9, e10, e11, e12, e13, e14, e15)};
}
static inline emu_m512 emu_cvtepi32_ps(emu_m512i a) { return (emu_m512){_mm256_cvtepi32_ps(a.lo), _mm256_cvtepi32_ps(a.hi)}; }
static inline emu_m512 emu_mul_ps(emu_m512 a, emu_m512 b) {
    return (emu_m512){_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
static inline emu_m512 emu_fmadd_ps(emu_m512 a, emu_m512 b, emu_m512 c) {
    return (emu_m512){_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
static inline emu_m512 emu_loadu_ps(const float *p) { return (emu_m512){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
static inline void emu_storeu_ps(float *p, emu_m512 a) {
    _mm256_storeu_ps(p, a.lo);
    _mm256_storeu_ps(p + 8, a.hi);
}
static inline emu_m512 emu_set1_ps(float f) { return (emu_m512){_mm256_set1_ps(f), _mm256_set1_ps(f)}; }
static inline emu_m512i emu_set1_epi32(int v) { return (emu_m512i){_mm256_set1_epi32(v), _mm256_set1_epi32(v)}; }
static inline emu_m512 emu_fnmadd_ps(emu_m512 a, emu_m512 b, emu_m512 c) {
    return (emu_m512){_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi)};
}
/* k bit j set: lane j = a * b + c; clear: lane j = c. */
static inline __m256 emu_mask3_256(__m256 a, __m256 b, __m256 c, unsigned k8) {
    const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 m = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)k8), bits), bits));
    return _mm256_blendv_ps(c, _mm256_fmadd_ps(a, b, c), m);
}
static inline emu_m512 emu_mask3_fmadd_ps(emu_m512 a, emu_m512 b, emu_m512 c, unsigned k) {
    return (emu_m512){emu_mask3_256(a.lo, b.lo, c.lo, k & 0xFF), emu_mask3_256(a.hi, b.hi, c.hi, (k >> 8) & 0xFF)};
}

/* vpermw: int16 element i = a[idx[i] & 31]. */
static inline emu_m512i emu_permutexvar_epi16(emu_m512i idx, emu_m512i a) {
    int16_t src[32], ix[32], r[32];
    _mm256_storeu_si256((__m256i *)src, a.lo);
    _mm256_storeu_si256((__m256i *)(src + 16), a.hi);
    _mm256_storeu_si256((__m256i *)ix, idx.lo);
    _mm256_storeu_si256((__m256i *)(ix + 16), idx.hi);
    for (int i = 0; i < 32; i++) r[i] = src[ix[i] & 31];
    return (emu_m512i){_mm256_loadu_si256((const __m256i *)r), _mm256_loadu_si256((const __m256i *)(r + 16))};
}
static inline emu_m512i emu_load_si512(const void *p) { return emu_loadu_si512(p); }
static inline emu_m512i emu_add_epi32(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)};
}
/* vshufi64x2: 128-bit lanes 0, 1 of the result from a (imm bits 1:0, 3:2), lanes 2, 3 from b (5:4, 7:6). */
static inline emu_m512i emu_shuffle_i64x2(emu_m512i a, emu_m512i b, int imm) {
    __m128i la[4] = {_mm256_castsi256_si128(a.lo), _mm256_extracti128_si256(a.lo, 1), _mm256_castsi256_si128(a.hi),
                     _mm256_extracti128_si256(a.hi, 1)};
    __m128i lb[4] = {_mm256_castsi256_si128(b.lo), _mm256_extracti128_si256(b.lo, 1), _mm256_castsi256_si128(b.hi),
                     _mm256_extracti128_si256(b.hi, 1)};
    return (emu_m512i){_mm256_setr_m128i(la[imm & 3], la[(imm >> 2) & 3]),
                       _mm256_setr_m128i(lb[(imm >> 4) & 3], lb[(imm >> 6) & 3])};
}
static inline emu_m512i emu_broadcast_i32x4(__m128i a) {
    const __m256i v = _mm256_setr_m128i(a, a);
    return (emu_m512i){v, v};
}
static inline void emu_store_ps(float *p, emu_m512 a) { emu_storeu_ps(p, a); }
static inline emu_m512i emu_broadcast_i64x4(__m256i a) { return (emu_m512i){a, a}; }
static inline emu_m512 emu_add_ps(emu_m512 a, emu_m512 b) {
    return (emu_m512){_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}

/* gemm_amx.c's kq_unpack: the in-lane shuffles, shifts and logic per half as AVX2; the 128-bit inserts by lane. */
static inline emu_m512i emu_castsi128_si512(__m128i a) {
    return (emu_m512i){_mm256_setr_m128i(a, _mm_setzero_si128()), _mm256_setzero_si256()};
}
static inline emu_m512i emu_inserti32x4(emu_m512i a, __m128i b, int imm) {
    __m256i *h = imm & 2 ? &a.hi : &a.lo;
    const __m128i keep = imm & 1 ? _mm256_castsi256_si128(*h) : _mm256_extracti128_si256(*h, 1);
    *h = imm & 1 ? _mm256_setr_m128i(keep, b) : _mm256_setr_m128i(b, keep);
    return a;
}
static inline emu_m512i emu_unpacklo_epi32(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_unpacklo_epi32(a.lo, b.lo), _mm256_unpacklo_epi32(a.hi, b.hi)};
}
static inline emu_m512i emu_unpackhi_epi32(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_unpackhi_epi32(a.lo, b.lo), _mm256_unpackhi_epi32(a.hi, b.hi)};
}
static inline emu_m512i emu_unpacklo_epi64(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_unpacklo_epi64(a.lo, b.lo), _mm256_unpacklo_epi64(a.hi, b.hi)};
}
static inline emu_m512i emu_unpackhi_epi64(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_unpackhi_epi64(a.lo, b.lo), _mm256_unpackhi_epi64(a.hi, b.hi)};
}
static inline emu_m512i emu_and_si512(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)};
}
static inline emu_m512i emu_or_si512(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_or_si256(a.lo, b.lo), _mm256_or_si256(a.hi, b.hi)};
}
static inline emu_m512i emu_srli_epi32(emu_m512i a, unsigned n) {
    return (emu_m512i){_mm256_srli_epi32(a.lo, (int)n), _mm256_srli_epi32(a.hi, (int)n)};
}
static inline emu_m512i emu_slli_epi32(emu_m512i a, unsigned n) {
    return (emu_m512i){_mm256_slli_epi32(a.lo, (int)n), _mm256_slli_epi32(a.hi, (int)n)};
}
static inline emu_m512i emu_srli_epi16(emu_m512i a, unsigned n) {
    return (emu_m512i){_mm256_srli_epi16(a.lo, (int)n), _mm256_srli_epi16(a.hi, (int)n)};
}
static inline emu_m512i emu_slli_epi16(emu_m512i a, unsigned n) {
    return (emu_m512i){_mm256_slli_epi16(a.lo, (int)n), _mm256_slli_epi16(a.hi, (int)n)};
}
static inline emu_m512i emu_shuffle_epi8(emu_m512i a, emu_m512i b) {
    return (emu_m512i){_mm256_shuffle_epi8(a.lo, b.lo), _mm256_shuffle_epi8(a.hi, b.hi)};
}
/* vpmovdw: word i = the low 16 bits of dword i. */
static inline __m256i emu_cvtepi32_epi16(emu_m512i a) {
    uint32_t d[16];
    uint16_t w[16];
    _mm256_storeu_si256((__m256i *)d, a.lo);
    _mm256_storeu_si256((__m256i *)(d + 8), a.hi);
    for (int i = 0; i < 16; i++) w[i] = (uint16_t)d[i];
    return _mm256_loadu_si256((const __m256i *)w);
}
static inline emu_m512 emu_cvtph_ps(__m256i a) {
    return (emu_m512){_mm256_cvtph_ps(_mm256_castsi256_si128(a)), _mm256_cvtph_ps(_mm256_extracti128_si256(a, 1))};
}
static inline void emu_store_si512(void *p, emu_m512i a) {
    _mm256_storeu_si256((__m256i *)p, a.lo);
    _mm256_storeu_si256((__m256i *)p + 1, a.hi);
}

#undef _mm512_inserti64x4
#define _mm512_inserti64x4 emu_inserti64x4
#undef _mm512_castsi256_si512
#define _mm512_castsi256_si512 emu_castsi256_si512
#undef _mm512_castsi512_si256
#define _mm512_castsi512_si256 emu_castsi512_si256
#undef _mm512_extracti64x4_epi64
#define _mm512_extracti64x4_epi64 emu_extracti64x4_epi64
#undef _mm512_castpd_ps
#define _mm512_castpd_ps emu_castpd_ps
#undef _mm512_castps_pd
#define _mm512_castps_pd emu_castps_pd
#undef _mm512_insertf64x4
#define _mm512_insertf64x4 emu_insertf64x4
#undef _mm512_castps256_ps512
#define _mm512_castps256_ps512 emu_castps256_ps512
#undef _mm512_castps512_ps256
#define _mm512_castps512_ps256 emu_castps512_ps256
#undef _mm512_extractf64x4_pd
#define _mm512_extractf64x4_pd emu_extractf64x4_pd
#undef _mm512_setzero_si512
#define _mm512_setzero_si512 emu_setzero_si512
#undef _mm512_setzero_ps
#define _mm512_setzero_ps emu_setzero_ps
#undef _mm512_set1_epi8
#define _mm512_set1_epi8 emu_set1_epi8
#undef _mm512_loadu_si512
#define _mm512_loadu_si512 emu_loadu_si512
#undef _mm512_xor_si512
#define _mm512_xor_si512 emu_xor_si512
#undef _mm512_sub_epi32
#define _mm512_sub_epi32 emu_sub_epi32
#undef _mm512_maddubs_epi16
#define _mm512_maddubs_epi16 emu_maddubs_epi16
#undef _mm512_madd_epi16
#define _mm512_madd_epi16 emu_madd_epi16
#undef _mm512_dpwssd_epi32
#define _mm512_dpwssd_epi32 emu_dpwssd_epi32
#undef _mm512_dpbusd_epi32
#define _mm512_dpbusd_epi32 emu_dpbusd_epi32
#undef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps emu_cvtepi32_ps
#undef _mm512_permutex2var_epi32
#define _mm512_permutex2var_epi32 emu_permutex2var_epi32
#undef _mm512_packs_epi32
#define _mm512_packs_epi32 emu_packs_epi32
#undef _mm512_setr_epi32
#define _mm512_setr_epi32 emu_setr_epi32
#undef _mm512_mul_ps
#define _mm512_mul_ps emu_mul_ps
#undef _mm512_fmadd_ps
#define _mm512_fmadd_ps emu_fmadd_ps
#undef _mm512_loadu_ps
#define _mm512_loadu_ps emu_loadu_ps
#undef _mm512_storeu_ps
#define _mm512_storeu_ps emu_storeu_ps
#undef _mm512_set1_ps
#define _mm512_set1_ps emu_set1_ps
#undef _mm512_set1_epi32
#define _mm512_set1_epi32 emu_set1_epi32
#undef _mm512_fnmadd_ps
#define _mm512_fnmadd_ps emu_fnmadd_ps
#undef _mm512_mask3_fmadd_ps
#define _mm512_mask3_fmadd_ps emu_mask3_fmadd_ps

#undef _mm512_permutexvar_epi16
#define _mm512_permutexvar_epi16 emu_permutexvar_epi16
#undef _mm512_load_si512
#define _mm512_load_si512 emu_load_si512
#undef _mm512_add_epi32
#define _mm512_add_epi32 emu_add_epi32
#undef _mm512_shuffle_i64x2
#define _mm512_shuffle_i64x2 emu_shuffle_i64x2
#undef _mm512_broadcast_i32x4
#define _mm512_broadcast_i32x4 emu_broadcast_i32x4
#undef _mm512_store_ps
#define _mm512_store_ps emu_store_ps
#undef _mm512_broadcast_i64x4
#define _mm512_broadcast_i64x4 emu_broadcast_i64x4
#undef _mm512_add_ps
#define _mm512_add_ps emu_add_ps

#undef _mm512_castsi128_si512
#define _mm512_castsi128_si512 emu_castsi128_si512
#undef _mm512_inserti32x4
#define _mm512_inserti32x4 emu_inserti32x4
#undef _mm512_unpacklo_epi32
#define _mm512_unpacklo_epi32 emu_unpacklo_epi32
#undef _mm512_unpackhi_epi32
#define _mm512_unpackhi_epi32 emu_unpackhi_epi32
#undef _mm512_unpacklo_epi64
#define _mm512_unpacklo_epi64 emu_unpacklo_epi64
#undef _mm512_unpackhi_epi64
#define _mm512_unpackhi_epi64 emu_unpackhi_epi64
#undef _mm512_and_si512
#define _mm512_and_si512 emu_and_si512
#undef _mm512_or_si512
#define _mm512_or_si512 emu_or_si512
#undef _mm512_srli_epi32
#define _mm512_srli_epi32 emu_srli_epi32
#undef _mm512_slli_epi32
#define _mm512_slli_epi32 emu_slli_epi32
#undef _mm512_srli_epi16
#define _mm512_srli_epi16 emu_srli_epi16
#undef _mm512_slli_epi16
#define _mm512_slli_epi16 emu_slli_epi16
#undef _mm512_shuffle_epi8
#define _mm512_shuffle_epi8 emu_shuffle_epi8
#undef _mm512_cvtepi32_epi16
#define _mm512_cvtepi32_epi16 emu_cvtepi32_epi16
#undef _mm512_cvtph_ps
#define _mm512_cvtph_ps emu_cvtph_ps
#undef _mm512_store_si512
#define _mm512_store_si512 emu_store_si512

#endif
