/* rope_avx2.c: the rotation 8 pairs at a time (no FMA: the same two roundings as torch). */
#include "cpu/rope.h"
#include "cpu/simd_avx2.h"

void cpu_rope_apply_avx2(float *x, size_t n_heads, size_t hd, size_t rot, const float *cos, const float *sin) {
    size_t half = rot / 2;
    for (size_t h = 0; h < n_heads; h++) {
        float *xh = x + h * hd;
        size_t i = 0;
        for (; i + 8 <= half; i += 8) {
            __m256 c = _mm256_loadu_ps(cos + i), s = _mm256_loadu_ps(sin + i);
            __m256 x1 = _mm256_loadu_ps(xh + i), x2 = _mm256_loadu_ps(xh + i + half);
            _mm256_storeu_ps(xh + i, _mm256_sub_ps(_mm256_mul_ps(x1, c), _mm256_mul_ps(x2, s)));
            _mm256_storeu_ps(xh + i + half, _mm256_add_ps(_mm256_mul_ps(x2, c), _mm256_mul_ps(x1, s)));
        }
        for (; i < half; i++) {
            float x1 = xh[i], x2 = xh[i + half];
            xh[i] = x1 * cos[i] - x2 * sin[i];
            xh[i + half] = x2 * cos[i] + x1 * sin[i];
        }
    }
}
