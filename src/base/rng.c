/* rng.c: SplitMix64 (Steele, Lea, Flood 2014), the published constants. */
#include "base/rng.h"

#include <math.h>

void rng_seed(rng_state *r, uint64_t seed) { r->s = seed; }

uint64_t rng_next(rng_state *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float rng_uniform(rng_state *r) { return (float)(rng_next(r) >> 40) * (1.0f / 16777216.0f); }

float rng_normal(rng_state *r) {
    /* 1 - u lies in (0, 1], so the logarithm is finite. */
    double u1 = 1.0 - (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    double u2 = (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
