/* norm.c: the scalar oracles of the RMSNorms and the dispatch to the fast path. */
#include "cpu/norm.h"

#include <math.h>

#include "cpu/act.h"
#include "cpu/cpu_simd.h"

static float norm_inv_rms(const float *x, size_t n, float eps) {
    float ss = 0.0f;
    for (size_t i = 0; i < n; i++) ss += x[i] * x[i];
    return 1.0f / sqrtf(ss / (float)n + eps);
}

void cpu_rms_norm_scalar(float *y, const float *x, const float *w, size_t rows, size_t n, float eps) {
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float inv = norm_inv_rms(xr, n, eps);
        for (size_t i = 0; i < n; i++) yr[i] = (xr[i] * inv) * w[i];
    }
}

void cpu_rms_norm_gated_scalar(float *y, const float *x, const float *z, const float *w, size_t n_vec, size_t hd,
                               float eps) {
    for (size_t v = 0; v < n_vec; v++) {
        const float *xv = x + v * hd, *zv = z + v * hd;
        float *yv = y + v * hd;
        float inv = norm_inv_rms(xv, hd, eps);
        for (size_t i = 0; i < hd; i++) yv[i] = (w[i] * (xv[i] * inv)) * cpu_silu(zv[i]);
    }
}

void cpu_rms_norm(float *y, const float *x, const float *w, size_t rows, size_t n, float eps) {
    if (cpu_simd_active())
        cpu_rms_norm_avx2(y, x, w, rows, n, eps);
    else
        cpu_rms_norm_scalar(y, x, w, rows, n, eps);
}

void cpu_rms_norm_gated(float *y, const float *x, const float *z, const float *w, size_t n_vec, size_t hd, float eps) {
    if (cpu_simd_active())
        cpu_rms_norm_gated_avx2(y, x, z, w, n_vec, hd, eps);
    else
        cpu_rms_norm_gated_scalar(y, x, z, w, n_vec, hd, eps);
}
