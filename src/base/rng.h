/*
 * rng.h: SplitMix64, the random stream of the contract (SPEC.md 3.2): the
 * reference and every backend draw the same numbers from the same seed.
 * One draw is u = (next() >> 40) * 2^-24, a float in [0, 1).
 * Also used, with its own seeds, to make synthetic weights deterministically.
 */
#ifndef CLOVER_BASE_RNG_H
#define CLOVER_BASE_RNG_H

#include <stdint.h>

typedef struct rng_state {
    uint64_t s;
} rng_state;

void rng_seed(rng_state *r, uint64_t seed);
uint64_t rng_next(rng_state *r);
/* The contract's draw: 24 random bits as a float in [0, 1). */
float rng_uniform(rng_state *r);
/* A standard normal value (Box-Muller over two uniform draws), for weights. */
float rng_normal(rng_state *r);

#endif
