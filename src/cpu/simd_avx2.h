/*
 * simd_avx2.h: the 8-lane helpers shared by the *_avx2.c operators (and only
 * included by them: everything here needs -mavx2 -mfma). exp is a
 * Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, then the degree-7
 * Taylor polynomial of e^r (truncation below 6e-9 relative, under half an
 * ulp), so a lane is within about 2 ulp of expf; overflow gives +inf and
 * underflow 0 (subnormal results are flushed: they never matter in the
 * softmaxes and gates that use it).
 */
#ifndef CLOVER_CPU_SIMD_AVX2_H
#define CLOVER_CPU_SIMD_AVX2_H

#include <immintrin.h>
#include <stddef.h>

static inline __m256 v8_exp(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.72283935546875f);  /* above: +inf */
    const __m256 lo = _mm256_set1_ps(-87.33654022216797f); /* below: 0 (ln FLT_MIN) */
    __m256 big = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
    __m256 small = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* r = x - n ln2 with ln2 split so n * ln2_hi is exact */
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^n in two halves so n = 128 (x near the top) and n = -126 stay normal */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_inff()), big);
    y = _mm256_andnot_ps(small, y);
    /* NaN in, NaN out */
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* 1 / (1 + e^-x) */
static inline __m256 v8_sigmoid(__m256 x) {
    __m256 e = v8_exp(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* x / (1 + e^-x) */
static inline __m256 v8_silu(__m256 x) {
    __m256 e = v8_exp(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

static inline float v8_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float v8_hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Flush-to-zero and denormals-are-zero for the calling thread, returning the
 * previous MXCSR for v8_ftz_end. Strong GDN decays (g ~ -30 a row) drive
 * e^gamma products into the subnormal range, where every operation takes a
 * microcode assist (measured 5x slower on the chunked form); values below
 * 2^-126 are far under float32 rounding of the O(1) results. */
static inline unsigned v8_ftz_begin(void) {
    unsigned old = _mm_getcsr();
    _mm_setcsr(old | 0x8040u);
    return old;
}

static inline void v8_ftz_end(unsigned old) { _mm_setcsr(old); }

/* Mask of the first rem (0..8) lanes, for loads and stores of a row's tail. */
static inline __m256i v8_tail_mask(size_t rem) {
    static const int lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(lanes + 8 - rem));
}

/* sum of a[i] * b[i], four accumulators of 8 lanes, masked tail */
static inline float v8_dot(const float *a, const float *b, size_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    if (i < n) {
        __m256i m = v8_tail_mask(n - i);
        s1 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), s1);
    }
    return v8_hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

/* y[i] += a * x[i] */
static inline void v8_axpy(float *y, float a, const float *x, size_t n) {
    __m256 va = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

/* y[i] *= a */
static inline void v8_scale(float *y, float a, size_t n) {
    __m256 va = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

#endif
