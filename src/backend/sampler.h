/*
 * sampler.h: the token choice of SPEC.md 3.2 over one row of (penalised)
 * logits: greedy (the first maximum) below T = 1e-6, otherwise temperature,
 * top-k, top-p and one draw of the contract's SplitMix64 stream.
 *
 * The arithmetic follows the reference step by step (tools/reference
 * DECISIONS 1 and 10): candidates are the finite logits, value float32(l/T);
 * softmax from float32 differences exponentiated and summed in float64;
 * top-k only when 0 < k < #candidates, keeping every value >= the k-th;
 * top-p only when 0 < p < 1, keeping the prefix until the float64 mass
 * before a candidate exceeds p; the walk `if u < p_i pick; u -= p_i`, the
 * last candidate when it runs out. The confidence is always the T = 1
 * softmax probability of the picked id over the row.
 *
 * A sampled row sorts only the candidates that can matter (a probability of
 * at least 1e-12 of the total); when the walk or the top-p cut reaches past
 * them, the row is redone over every candidate, so the result is the full
 * sort's. Scratch is sized once for the vocabulary: no allocation per row.
 */
#ifndef CLOVER_BACKEND_SAMPLER_H
#define CLOVER_BACKEND_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"
#include "clover.h"

typedef struct sampler_params {
    float temperature; /* < 1e-6: greedy */
    int32_t top_k;     /* <= 0: off */
    float top_p;       /* outside (0, 1): off */
} sampler_params;

typedef struct sampler_cand {
    float val;  /* float32(l / T) */
    int32_t id;
    double e;   /* exp(val - max), then the probability */
} sampler_cand;

typedef struct sampler_scratch {
    sampler_cand *cand; /* [n_vocab] */
    size_t n_vocab;
} sampler_scratch;

int sampler_scratch_init(sampler_scratch *sc, size_t n_vocab, clover_error *err);
void sampler_scratch_free(sampler_scratch *sc);

/* True when these parameters pick greedily (no draw). */
int sampler_is_greedy(const sampler_params *p);

/* The draw of one pick: u = (next() >> 40) * 2^-24 from rng when the
 * parameters sample, nothing (0, rng untouched) when greedy. Callers draw
 * for their rows in ascending order, then may pick the rows in parallel. */
double sampler_draw(const sampler_params *p, rng_state *rng);

/* The T = 1 softmax probability of id over row[0..n): d = float32(l - max),
 * exp and sum in float64. NaN when the row has no finite maximum. */
float sampler_confidence(const float *row, size_t n, int32_t id);

/* The first maximum of row[0..n) (NaN ignored), or -1 when no entry is
 * greater than -inf. */
int32_t sampler_argmax(const float *row, size_t n);

/* Picks a token from row[0..n) (n <= the scratch's n_vocab): greedy, or
 * sampled with the row's draw u (sampler_draw). *id and *conf receive the
 * pick and its confidence. Fails (CLOVER_E_INVALID) when the row has no
 * finite logit: every id forbidden. sc is only touched when sampling. */
int sampler_pick(const sampler_params *p, const float *row, size_t n, double u, sampler_scratch *sc, int32_t *id,
                 float *conf, clover_error *err);

#endif
