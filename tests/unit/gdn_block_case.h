/*
 * gdn_block_case.h: one GDN block-operator test case's inputs (a shape nk, nv, dk, dv, K, b and seeded random
 * inputs and weights), shared by test_gdn_block.c and test_gdn_block_avx512.c. The draws' order is fixed: the
 * AVX-512 test's recorded AVX2-level hashes depend on it.
 */
#ifndef CLOVER_TEST_GDN_BLOCK_CASE_H
#define CLOVER_TEST_GDN_BLOCK_CASE_H

#include <math.h>
#include <stdlib.h>

#include "base/rng.h"
#include "cpu/gdn_block.h"

typedef struct block_case {
    cpu_gdn_dims d;
    size_t b, cd, K, n_out; /* n_out: b * nv * dv, the operator's outputs */
    float *mixed, *z, *a, *ring, *state;
    float *conv_w, *conv_right, *ssm_a, *dt_bias, *norm_w, *ls, *hb, *hc;
    gdn_block_weights w;
} block_case;

static inline float *block_case_rand(rng_state *r, size_t n, float lo, float hi) {
    float *v = malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * rng_uniform(r);
    return v;
}

static inline void block_case_make(block_case *c, uint64_t seed, size_t nk, size_t nv, size_t dk, size_t dv, size_t K,
                                   size_t b, cpu_gdn_head_order order) {
    rng_state r;
    rng_seed(&r, seed);
    c->d = (cpu_gdn_dims){.n_k_heads = nk, .n_v_heads = nv, .k_dim = dk, .v_dim = dv, .conv_k = K, .eps = 1e-6f,
                          .order = order};
    c->b = b, c->K = K, c->cd = cpu_gdn_conv_dim(&c->d), c->n_out = b * nv * dv;
    c->mixed = block_case_rand(&r, b * c->cd, -2, 2);
    c->z = block_case_rand(&r, b * nv * dv, -2, 2);
    c->a = block_case_rand(&r, b * nv, -3, 3);
    c->ring = block_case_rand(&r, (K - 1) * c->cd, -2, 2);
    c->state = block_case_rand(&r, nv * dk * dv, -1, 1);
    c->conv_w = block_case_rand(&r, c->cd * K, -0.7f, 0.7f);
    c->conv_right = block_case_rand(&r, c->cd * (K - 1), -0.5f, 0.5f);
    c->ssm_a = block_case_rand(&r, nv, -4, -0.5f);
    c->dt_bias = block_case_rand(&r, nv, -1, 1);
    c->norm_w = block_case_rand(&r, dv, 0.5f, 1.5f);
    c->ls = block_case_rand(&r, nv, 2, 8);
    c->hb = block_case_rand(&r, nv, -0.5f, 1.5f);
    c->hc = block_case_rand(&r, nv, 0.2f, 1);
    c->w = (gdn_block_weights){.conv_w = c->conv_w, .conv_right = c->conv_right, .ssm_a = c->ssm_a,
                               .dt_bias = c->dt_bias, .norm_w = c->norm_w, .logit_scale = c->ls,
                               .history_bias = c->hb, .history_c = c->hc};
}

static inline void block_case_free(block_case *c) {
    float *all[] = {c->mixed, c->z,      c->a,       c->ring, c->state, c->conv_w, c->conv_right,
                    c->ssm_a, c->dt_bias, c->norm_w, c->ls,   c->hb,    c->hc};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
}

/* max |x - ref| over max |ref| (NaN in x counts as an error: !(e <= diff)) */
static inline double block_case_rel_err(const float *x, const float *ref, size_t n) {
    double scale = 1e-30, diff = 0;
    for (size_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs((double)ref[i]));
        double e = fabs((double)x[i] - (double)ref[i]);
        if (!(e <= diff)) diff = e;
    }
    return diff / scale;
}

#endif
