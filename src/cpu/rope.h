/*
 * rope.h: partial NeoX rotary embedding (TRUNK.md 1.3). For text the
 * interleaved MRoPE of Qwen3.5 is exactly 1-D RoPE on the first `rot` dims of
 * every head (rotate_half inside that slice); the rest pass through.
 *
 * Angles must match torch to the bit: at position 2e5 one ulp of inv_freq
 * moves the angle by ~1e-5 rad. So inv_freq is computed as torch does in
 * float32, 1 / base^(2i / rot) with the exponent and the reciprocal rounded
 * to float32 (the power itself is evaluated in double and rounded once, i.e.
 * correctly rounded; torch's vectorised powf is within 1 ulp of that and was
 * found bit-equal for the shipped theta 1e7 / rot 64: see test_cpu_rope.c),
 * the angle is the float32 product pos * inv_freq[i], and cos / sin are the
 * correctly rounded float32 values of that angle.
 */
#ifndef CLOVER_CPU_ROPE_H
#define CLOVER_CPU_ROPE_H

#include <stddef.h>
#include <stdint.h>

/* inv_freq[i] for i < rot/2; rot even and > 0. */
void cpu_rope_inv_freq(float *inv_freq,  // [rot/2]
                       size_t rot, float base);

/* cos / sin of pos * inv_freq[i] for i < half (half = rot/2). */
void cpu_rope_cos_sin(float *cos,  // [half]
                      float *sin,  // [half]
                      const float *inv_freq, size_t half, int64_t pos);

/* Rotates the first rot dims of each head in place:
 * y[i] = x[i] c_i - x[i+rot/2] s_i, y[i+rot/2] = x[i+rot/2] c_i + x[i] s_i. */
void cpu_rope_apply(float *x,  // [n_heads][hd]
                    size_t n_heads, size_t hd, size_t rot, const float *cos, const float *sin);
void cpu_rope_apply_scalar(float *x, size_t n_heads, size_t hd, size_t rot, const float *cos, const float *sin);
void cpu_rope_apply_avx2(float *x, size_t n_heads, size_t hd, size_t rot, const float *cos, const float *sin);

#endif
