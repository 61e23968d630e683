/* rope.c: the scalar rotation (the angle tables: model/rope_table.c). */
#include "cpu/rope.h"

#include <math.h>

#include "cpu/cpu_simd.h"

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
