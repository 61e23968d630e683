/*
 * quantize_avx2.c: the Q4_K/Q5_K scale-and-min search (fit_scale_min in
 * quantize.c) for the 8 sub-blocks of one super-block at once, one sub-block
 * per AVX2 lane.
 *
 * Bit-identical to the scalar search by construction: each lane performs
 * exactly the scalar code's float operations on its own sub-block, in the
 * same order and precision (the sums still run over i = 0..31 one value at a
 * time; only the 8 sub-blocks run side by side). This file is compiled with
 * -ffp-contract=off (CMakeLists.txt) so that no multiply-add is fused where
 * the scalar code rounds twice. Branches become lane masks with the same
 * NaN behaviour (ordered, non-signalling compares, false on NaN, as C's
 * <, <=, > are). Rounding is cvtps2dq under the default MXCSR mode, round to
 * nearest even, as lrintf. The caller sends blocks with any non-finite value
 * to the scalar path (fminf/fmaxf and the NaN -> 0 rule of round_nearest
 * differ from min_ps/max_ps there), so only finite inputs arrive here.
 */
#include <immintrin.h>

#include "quant/quant_internal.h"

/* round_nearest (quantize.c) for finite v, then clamped to 0..nmax. */
static inline __m256i round_clamp(__m256 v, __m256i nmax) {
    v = _mm256_min_ps(v, _mm256_set1_ps(4194303.f));
    v = _mm256_max_ps(v, _mm256_set1_ps(-4194303.f));
    __m256i l = _mm256_cvtps_epi32(v);
    l = _mm256_max_epi32(l, _mm256_setzero_si256());
    return _mm256_min_epi32(l, nmax);
}

void quant_fit_k4_avx2(const float *x, int nmax, float rmin, int nstep, uint8_t *L, float *sub_scale,
                       float *sub_min) {
    const float rdelta = 0.1f;
    __m256 xt[32], w[32];
    __m256i best_l[32];
    for (int i = 0; i < 32; i++)
        xt[i] = _mm256_setr_ps(x[i], x[32 + i], x[64 + i], x[96 + i], x[128 + i], x[160 + i], x[192 + i], x[224 + i]);

    /* Weights: rms of the sub-block + |x|. */
    __m256 sum_x2 = _mm256_setzero_ps();
    for (int i = 0; i < 32; i++) sum_x2 = _mm256_add_ps(sum_x2, _mm256_mul_ps(xt[i], xt[i]));
    const __m256 rms = _mm256_sqrt_ps(_mm256_div_ps(sum_x2, _mm256_set1_ps(32)));
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int i = 0; i < 32; i++) w[i] = _mm256_add_ps(rms, _mm256_and_ps(xt[i], abs_mask));

    __m256 lo = xt[0], hi = xt[0], sum_w = _mm256_setzero_ps(), sum_x = _mm256_setzero_ps();
    for (int i = 0; i < 32; i++) {
        lo = _mm256_min_ps(lo, xt[i]);
        hi = _mm256_max_ps(hi, xt[i]);
        sum_w = _mm256_add_ps(sum_w, w[i]);
        sum_x = _mm256_add_ps(sum_x, _mm256_mul_ps(w[i], xt[i]));
    }
    const __m256 zero = _mm256_setzero_ps();
    lo = _mm256_blendv_ps(lo, zero, _mm256_cmp_ps(lo, zero, _CMP_GT_OQ)); /* if (lo > 0) lo = 0 */
    const __m256 flat = _mm256_cmp_ps(hi, lo, _CMP_EQ_OQ);
    const __m256 range = _mm256_sub_ps(hi, lo);
    const __m256i nmax_i = _mm256_set1_epi32(nmax);
    const __m256 nmax_f = _mm256_set1_ps((float)nmax);

    const __m256 iscale = _mm256_div_ps(nmax_f, range);
    __m256 scale = _mm256_div_ps(_mm256_set1_ps(1), iscale), min = lo, best_err = zero;
    for (int i = 0; i < 32; i++) {
        best_l[i] = round_clamp(_mm256_mul_ps(iscale, _mm256_sub_ps(xt[i], lo)), nmax_i);
        const __m256 lf = _mm256_cvtepi32_ps(best_l[i]);
        const __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(scale, lf), lo), xt[i]);
        best_err = _mm256_add_ps(best_err, _mm256_mul_ps(_mm256_mul_ps(w[i], diff), diff));
    }
    for (int k = 0; k <= nstep; k++) {
        const float num = rmin + rdelta * (float)k + (float)nmax;
        const __m256 is = _mm256_div_ps(_mm256_set1_ps(num), range);
        __m256 sum_l = zero, sum_l2 = zero, sum_xl = zero;
        __m256i trial[32];
        for (int i = 0; i < 32; i++) {
            trial[i] = round_clamp(_mm256_mul_ps(is, _mm256_sub_ps(xt[i], lo)), nmax_i);
            const __m256 lf = _mm256_cvtepi32_ps(trial[i]);
            const __m256 wl = _mm256_mul_ps(w[i], lf);
            sum_l = _mm256_add_ps(sum_l, wl);
            sum_l2 = _mm256_add_ps(sum_l2, _mm256_mul_ps(wl, lf));
            sum_xl = _mm256_add_ps(sum_xl, _mm256_mul_ps(wl, xt[i]));
        }
        const __m256 det = _mm256_sub_ps(_mm256_mul_ps(sum_w, sum_l2), _mm256_mul_ps(sum_l, sum_l));
        const __m256 go = _mm256_cmp_ps(det, zero, _CMP_NLE_UQ); /* !(det <= 0): NaN goes on, as in C */
        if (_mm256_movemask_ps(go) == 0) continue;
        __m256 s = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sum_w, sum_xl), _mm256_mul_ps(sum_x, sum_l)), det);
        __m256 m = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(sum_l2, sum_x), _mm256_mul_ps(sum_l, sum_xl)), det);
        const __m256 pos = _mm256_cmp_ps(m, zero, _CMP_GT_OQ);
        m = _mm256_blendv_ps(m, zero, pos);
        s = _mm256_blendv_ps(s, _mm256_div_ps(sum_xl, sum_l2), pos);
        __m256 err = zero;
        for (int i = 0; i < 32; i++) {
            const __m256 lf = _mm256_cvtepi32_ps(trial[i]);
            const __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(s, lf), m), xt[i]);
            err = _mm256_add_ps(err, _mm256_mul_ps(_mm256_mul_ps(w[i], diff), diff));
        }
        const __m256 better = _mm256_and_ps(go, _mm256_cmp_ps(err, best_err, _CMP_LT_OQ));
        if (_mm256_movemask_ps(better) == 0) continue;
        const __m256i bi = _mm256_castps_si256(better);
        for (int i = 0; i < 32; i++) best_l[i] = _mm256_blendv_epi8(best_l[i], trial[i], bi);
        best_err = _mm256_blendv_ps(best_err, err, better);
        scale = _mm256_blendv_ps(scale, s, better);
        min = _mm256_blendv_ps(min, m, better);
    }
    /* A flat sub-block (hi == lo): L = 0, scale 0, min lo, as the scalar early return. */
    scale = _mm256_blendv_ps(scale, zero, flat);
    min = _mm256_blendv_ps(min, lo, flat);
    const __m256i flat_i = _mm256_castps_si256(flat);
    for (int i = 0; i < 32; i++) best_l[i] = _mm256_andnot_si256(flat_i, best_l[i]);

    float neg[8];
    _mm256_storeu_ps(sub_scale, scale);
    _mm256_storeu_ps(neg, min);
    for (int j = 0; j < 8; j++) sub_min[j] = -neg[j];
    int32_t lv[8];
    for (int i = 0; i < 32; i++) {
        _mm256_storeu_si256((__m256i *)lv, best_l[i]);
        for (int j = 0; j < 8; j++) L[32 * j + i] = (uint8_t)lv[j];
    }
}
