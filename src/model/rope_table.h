/*
 * rope_table.h: the RoPE angle tables every backend builds the same way
 * (TRUNK.md 1.3), kept in model/ so the CPU and CUDA backends share one
 * definition without either including the other.
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
#ifndef CLOVER_MODEL_ROPE_TABLE_H
#define CLOVER_MODEL_ROPE_TABLE_H

#include <stddef.h>
#include <stdint.h>

/* inv_freq[i] for i < rot/2; rot even and > 0. */
void rope_inv_freq(float *inv_freq,  // [rot/2]
                   size_t rot, float base);

/* cos / sin of pos * inv_freq[i] for i < half (half = rot/2). */
void rope_cos_sin(float *cos,  // [half]
                  float *sin,  // [half]
                  const float *inv_freq, size_t half, int64_t pos);

#endif
