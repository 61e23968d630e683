/*
 * moe_test.h: a random masked routing for the tests of the routed experts with the routing given
 * (cpu_moe_experts in test_cpu_moe.c, the host hook in test_expert_host.c).
 */
#ifndef CLOVER_TESTS_MOE_TEST_H
#define CLOVER_TESTS_MOE_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"

/* k distinct experts a row in random order (E <= 256), weights in (0, 1), about a third of the pairs masked
 * (-1), row `empty` (if < n) every pair masked. */
static inline void moe_test_routing(int32_t *ids, float *wts, size_t n, size_t E, size_t k, size_t empty,
                                    rng_state *r) {
    int32_t perm[256];
    for (size_t i = 0; i < n; i++) {
        for (size_t e = 0; e < E && e < 256; e++) perm[e] = (int32_t)e;
        for (size_t j = 0; j < k; j++) { /* a partial Fisher-Yates draw */
            size_t t = j + (size_t)(rng_uniform(r) * (float)(E - j));
            if (t >= E) t = E - 1;
            int32_t v = perm[j];
            perm[j] = perm[t], perm[t] = v;
            ids[i * k + j] = rng_uniform(r) < 0.35f || i == empty ? -1 : perm[j];
            wts[i * k + j] = 0.05f + 0.9f * rng_uniform(r);
        }
    }
}

#endif
