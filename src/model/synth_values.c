/*
 * synth_values.c: the random values of synthetic tensors. Each tensor has
 * its own SplitMix64 stream seeded from the file seed and its name, so the
 * bytes of a tensor depend only on (seed, name, geometry) and any tensor can
 * be generated alone, in any number of row chunks. Normal values use the
 * Irwin-Hall sum of four 16-bit uniforms from one draw (mean 0, variance 1,
 * bounded by +-2*sqrt(3)): cheap enough for the 35 billion values of the
 * full geometry and never an outlier that would blow up a random network.
 */
#include <math.h>

#include "model/synth.h"

void synth_values_seed(rng_state *r, uint64_t seed, const char *name, uint64_t chunk) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    /* one SplitMix64 step over each input mixes them (nearby seeds and chunks give unrelated streams) */
    rng_seed(r, seed);
    rng_seed(r, rng_next(r) ^ h);
    rng_seed(r, rng_next(r) ^ chunk);
}

static float approx_normal(rng_state *r) {
    uint64_t x = rng_next(r);
    float s = (float)(x & 0xffff) + (float)((x >> 16) & 0xffff) + (float)((x >> 32) & 0xffff) + (float)(x >> 48);
    /* four U(0,1): mean 2, variance 4/12 */
    return (s * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

void synth_values_fill(const synth_tensor *t, rng_state *r, float *dst, size_t n) {
    switch (t->init) {
    case SYNTH_INIT_NORMAL:
        for (size_t i = 0; i < n; i++)
            dst[i] = t->a * approx_normal(r);
        break;
    case SYNTH_INIT_ONE_PLUS:
        for (size_t i = 0; i < n; i++)
            dst[i] = 1.0f + t->a * approx_normal(r);
        break;
    case SYNTH_INIT_UNIFORM:
        for (size_t i = 0; i < n; i++)
            dst[i] = t->a + (t->b - t->a) * rng_uniform(r);
        break;
    case SYNTH_INIT_NEG_EXP_UNIFORM:
        for (size_t i = 0; i < n; i++)
            dst[i] = -expf(t->a + (t->b - t->a) * rng_uniform(r));
        break;
    }
}
