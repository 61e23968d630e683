/*
 * norm.h: the two RMSNorms of the trunk (TRUNK.md section 2).
 *
 * Zero-centred RMSNorm (input, post-attention, final, q_norm, k_norm): HF
 * multiplies by (1 + w); llama.cpp's converter stores 1 + w, so these take
 * the stored weight and multiply by it. Gated RMSNorm (the GDN output norm,
 * `ssm_norm`): a plain weight either way, shared by every value head, and the
 * result times silu(z). eps is added to the MEAN of squares in both.
 *
 * Rounding follows torch in float32: r = 1 / sqrt(sum(x^2) / n + eps), then
 * y = (x * r) * w (and * silu(z)). Sums accumulate in float32 like torch's
 * reduction; the oracle adds sequentially, the AVX2 path in 32 lanes, so the
 * two differ by a few ulp of the sum (bounded in tests/unit/test_cpu_norm.c).
 *
 * y may equal x (in place); otherwise they must not overlap.
 */
#ifndef CLOVER_CPU_NORM_H
#define CLOVER_CPU_NORM_H

#include <stddef.h>

/* rows vectors of n: y[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * w */
void cpu_rms_norm(float *y,        // [rows][n]
                  const float *x,  // [rows][n]
                  const float *w,  // [n], stored weight (1 + w_hf)
                  size_t rows, size_t n, float eps);
void cpu_rms_norm_scalar(float *y, const float *x, const float *w, size_t rows, size_t n, float eps);
void cpu_rms_norm_avx2(float *y, const float *x, const float *w, size_t rows, size_t n, float eps);

/* n_vec vectors of hd (rows x value heads): y = x * rsqrt(mean(x^2) + eps) * w * silu(z) */
void cpu_rms_norm_gated(float *y,        // [n_vec][hd]
                        const float *x,  // [n_vec][hd]
                        const float *z,  // [n_vec][hd], the gate
                        const float *w,  // [hd], plain weight shared by the heads
                        size_t n_vec, size_t hd, float eps);
void cpu_rms_norm_gated_scalar(float *y, const float *x, const float *z, const float *w, size_t n_vec, size_t hd,
                               float eps);
void cpu_rms_norm_gated_avx2(float *y, const float *x, const float *z, const float *w, size_t n_vec, size_t hd,
                             float eps);

#endif
