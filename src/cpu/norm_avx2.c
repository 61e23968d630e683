/* norm_avx2.c: the RMSNorms with AVX2+FMA (sum of squares in 32 lanes). */
#include <math.h>

#include "cpu/act.h"
#include "cpu/norm.h"
#include "cpu/simd_avx2.h"

static float norm_inv_rms_avx2(const float *x, size_t n, float eps) {
    float ss = v8_dot(x, x, n);
    return 1.0f / sqrtf(ss / (float)n + eps);
}

void cpu_rms_norm_avx2(float *y, const float *x, const float *w, size_t rows, size_t n, float eps) {
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        __m256 inv = _mm256_set1_ps(norm_inv_rms_avx2(xr, n, eps));
        size_t i = 0;
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), inv), _mm256_loadu_ps(w + i)));
        float s = _mm256_cvtss_f32(inv);
        for (; i < n; i++) yr[i] = (xr[i] * s) * w[i];
    }
}

void cpu_rms_norm_gated_avx2(float *y, const float *x, const float *z, const float *w, size_t n_vec, size_t hd,
                             float eps) {
    for (size_t v = 0; v < n_vec; v++) {
        const float *xv = x + v * hd, *zv = z + v * hd;
        float *yv = y + v * hd;
        __m256 inv = _mm256_set1_ps(norm_inv_rms_avx2(xv, hd, eps));
        size_t i = 0;
        for (; i + 8 <= hd; i += 8) {
            __m256 t = _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(_mm256_loadu_ps(xv + i), inv));
            _mm256_storeu_ps(yv + i, _mm256_mul_ps(t, v8_silu(_mm256_loadu_ps(zv + i))));
        }
        float s = _mm256_cvtss_f32(inv);
        for (; i < hd; i++) yv[i] = (w[i] * (xv[i] * s)) * cpu_silu(zv[i]);
    }
}
