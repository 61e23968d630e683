/*
 * attn_case.h: one attention test case's inputs (dims, a committed prefix of pos keys and a pass of n rows: q, gate
 * and the K/V caches, seeded random), shared by test_cpu_attention.c and test_cpu_attention_split.c.
 */
#ifndef CLOVER_TEST_ATTN_CASE_H
#define CLOVER_TEST_ATTN_CASE_H

#include <stdlib.h>

#include "cpu/attention.h"
#include "cpu_ops_test.h"

typedef struct attn_case {
    cpu_attn_dims d;
    size_t pos, n;
    float *q, *gate, *kc, *vc; /* q, gate [n][nh][hd]; caches [pos+n][nkv][hd] */
} attn_case;

static inline void attn_case_init(attn_case *c, size_t nh, size_t nkv, size_t hd, size_t pos, size_t n, uint64_t seed) {
    c->d = (cpu_attn_dims){.n_head = nh, .n_head_kv = nkv, .head_dim = hd, .rot = 0, .eps = 1e-6f};
    c->pos = pos;
    c->n = n;
    rng_state r;
    rng_seed(&r, seed);
    c->q = malloc(n * nh * hd * 4);
    c->gate = malloc(n * nh * hd * 4);
    c->kc = malloc((pos + n) * nkv * hd * 4);
    c->vc = malloc((pos + n) * nkv * hd * 4);
    ops_fill(c->q, n * nh * hd, &r, 0.4f); /* scores of a few units: a peaked but not one-hot softmax */
    ops_fill(c->gate, n * nh * hd, &r, 2.0f);
    ops_fill(c->kc, (pos + n) * nkv * hd, &r, 1.0f);
    ops_fill(c->vc, (pos + n) * nkv * hd, &r, 1.0f);
}

static inline void attn_case_free(attn_case *c) { free(c->q), free(c->gate), free(c->kc), free(c->vc); }

#endif
