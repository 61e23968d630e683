/* rope.c: inverse frequencies and angles as torch computes them, and the scalar rotation. */
#include "cpu/rope.h"

#include <math.h>

#include "cpu/cpu_simd.h"

void cpu_rope_inv_freq(float *inv_freq, size_t rot, float base) {
    for (size_t i = 0; i < rot / 2; i++) {
        float e = (float)(2 * i) / (float)rot;       /* arange(0, rot, 2).float() / rot */
        float p = (float)pow((double)base, (double)e); /* base ** e, rounded once */
        inv_freq[i] = 1.0f / p;                      /* 1.0 / (...) in float32 */
    }
}

void cpu_rope_cos_sin(float *cos_out, float *sin_out, const float *inv_freq, size_t half, int64_t pos) {
    float p = (float)pos; /* position_ids.float() */
    for (size_t i = 0; i < half; i++) {
        float a = p * inv_freq[i]; /* the float32 product of torch's K = 1 matmul */
        cos_out[i] = (float)cos((double)a);
        sin_out[i] = (float)sin((double)a);
    }
}

void cpu_rope_apply_scalar(float *x, size_t n_heads, size_t hd, size_t rot, const float *cos, const float *sin) {
    size_t half = rot / 2;
    for (size_t h = 0; h < n_heads; h++) {
        float *xh = x + h * hd;
        for (size_t i = 0; i < half; i++) {
            float x1 = xh[i], x2 = xh[i + half];
            xh[i] = x1 * cos[i] + (-x2) * sin[i];
            xh[i + half] = x2 * cos[i] + x1 * sin[i];
        }
    }
}

void cpu_rope_apply(float *x, size_t n_heads, size_t hd, size_t rot, const float *cos, const float *sin) {
    if (cpu_simd_active())
        cpu_rope_apply_avx2(x, n_heads, hd, rot, cos, sin);
    else
        cpu_rope_apply_scalar(x, n_heads, hd, rot, cos, sin);
}
