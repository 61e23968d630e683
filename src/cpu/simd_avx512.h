/*
 * simd_avx512.h: the 16-lane helpers shared by the *_avx512.c operators of src/cpu/ (and only included by them:
 * everything here needs -mavx512f). e^x is simd_avx2.h's v8_exp on 16 lanes: the same Cody-Waite reduction, the
 * same degree-7 polynomial and the same 2^n in two halves, so a lane gives v8_exp's bits; one copy here so the
 * attention core and the GDN block operator of the AVX-512 level round alike.
 */
#ifndef CLOVER_CPU_SIMD_AVX512_H
#define CLOVER_CPU_SIMD_AVX512_H

#include <immintrin.h>
#include <stddef.h>

/* lanes [0, k) of 16 (k >= 16: all) */
static inline __mmask16 v16_lanes(size_t k) { return k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << k) - 1u); }

/* e^x for x clamped to [-87.34, 88.72] (a NaN x gives a finite value; the top of the range gives +inf) */
static inline __m512 v16_exp_clamped(__m512 x) {
    const __m512 hi = _mm512_set1_ps(88.72283935546875f), lo = _mm512_set1_ps(-87.33654022216797f);
    const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc); /* r = x - n ln2, ln2 split */
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    /* 2^n in two halves so n = 128 and n = -126 stay normal (v8_exp's steps) */
    const __m512i ni = _mm512_cvtps_epi32(n);
    const __m512i n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
    const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, _mm512_set1_epi32(127)), 23));
    const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, _mm512_set1_epi32(127)), 23));
    return _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
}

/* e^x as v8_exp: +inf above 88.72, 0 below -87.34, NaN in NaN out */
static inline __m512 v16_exp(__m512 x) {
    const __mmask16 big = _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.72283935546875f), _CMP_GT_OQ);
    const __mmask16 small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33654022216797f), _CMP_LT_OQ);
    __m512 y = _mm512_mask_mov_ps(v16_exp_clamped(x), big, _mm512_set1_ps(__builtin_inff()));
    y = _mm512_mask_mov_ps(y, small, _mm512_setzero_ps());
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

#endif
