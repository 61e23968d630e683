/*
 * act.h: the scalar activations of the trunk, written the way torch's CPU
 * kernels evaluate them in float32 so the oracles round like the reference:
 * sigmoid = 1 / (1 + e^-x), silu = x / (1 + e^-x), softplus with torch's
 * default threshold 20 (x itself above it, log1p(e^x) below).
 */
#ifndef CLOVER_CPU_ACT_H
#define CLOVER_CPU_ACT_H

#include <math.h>

static inline float cpu_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

static inline float cpu_silu(float x) { return x / (1.0f + expf(-x)); }

static inline float cpu_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

#endif
