/*
 * rope.h: partial NeoX rotary embedding (TRUNK.md 1.3). For text the
 * interleaved MRoPE of Qwen3.5 is exactly 1-D RoPE on the first `rot` dims of
 * every head (rotate_half inside that slice); the rest pass through.
 *
 * The angle tables (bit-exact with torch) are model/rope_table.h's.
 */
#ifndef CLOVER_CPU_ROPE_H
#define CLOVER_CPU_ROPE_H

#include <stddef.h>
#include <stdint.h>

#include "model/rope_table.h" /* rope_inv_freq, rope_cos_sin */

/* Rotates the first rot dims of each head in place:
 * y[i] = x[i] c_i - x[i+rot/2] s_i, y[i+rot/2] = x[i+rot/2] c_i + x[i] s_i. */
void cpu_rope_apply(float *x,  // [n_heads][hd]
                    size_t n_heads, size_t hd, size_t rot, const float *cos, const float *sin);
void cpu_rope_apply_scalar(float *x, size_t n_heads, size_t hd, size_t rot, const float *cos, const float *sin);
void cpu_rope_apply_avx2(float *x, size_t n_heads, size_t hd, size_t rot, const float *cos, const float *sin);

#endif
