/*
 * attn_case.h: one attention test case's inputs (dims, a committed prefix of pos keys and a pass of n rows: q, gate
 * and the K/V caches, seeded random), shared by test_cpu_attention.c, test_cpu_attention_split.c and
 * test_cpu_attention_avx512.c, and the pass run as slices of rows and heads.
 */
#ifndef CLOVER_TEST_ATTN_CASE_H
#define CLOVER_TEST_ATTN_CASE_H

#include <math.h>
#include <stdbool.h>
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

/* A kernel of cpu_attn_forward_keys' signature (the dispatcher or one level's). */
typedef void (*attn_keys_fn)(float *out, const float *q, const float *gate, const float *k_cache, const float *v_cache,
                             const cpu_attn_dims *d, int64_t pos, size_t n, bool causal, size_t n_keys, size_t h_begin,
                             size_t h_end, float *scratch);

/* The pass as row runs of row_chunk and head runs of head_chunk (which may cross KV groups), each its own call of
 * fn; NaN-filled first so a row left out shows. */
static inline void attn_case_chunked(attn_keys_fn fn, float *out, const attn_case *c, bool causal, size_t row_chunk,
                                     size_t head_chunk, float *scratch) {
    const size_t nh = c->d.n_head, rs = nh * c->d.head_dim;
    for (size_t i = 0; i < c->n * rs; i++) out[i] = NAN;
    for (size_t r0 = 0; r0 < c->n; r0 += row_chunk) {
        size_t rows = c->n - r0 < row_chunk ? c->n - r0 : row_chunk;
        for (size_t h0 = 0; h0 < nh; h0 += head_chunk) {
            size_t h1 = h0 + head_chunk < nh ? h0 + head_chunk : nh;
            fn(out + r0 * rs, c->q + r0 * rs, c->gate + r0 * rs, c->kc, c->vc, &c->d, (int64_t)(c->pos + r0), rows,
               causal, c->pos + c->n, h0, h1, scratch);
        }
    }
}

#endif
