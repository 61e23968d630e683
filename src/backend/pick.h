/*
 * pick.h: backend.h's pick over rows of logits in host memory
 * (backend/pick.c), shared by the host backends (CPU, the tests' fake).
 */
#ifndef CLOVER_BACKEND_PICK_H
#define CLOVER_BACKEND_PICK_H

#include "backend/backend.h"
#include "base/threadpool.h"
#include "backend/sampler.h"

typedef struct host_pick_ctx {
    threadpool *pool;       /* may be NULL (inline) */
    size_t n_vocab;
    uint32_t *counts;       /* [n_vocab], zero between calls */
    sampler_scratch *samp;  /* [n_samp], made by the first sampled pick; free with host_pick_ctx_free */
    size_t n_samp;          /* the pool's threads (1 without a pool) */
} host_pick_ctx;

void host_pick_ctx_free(host_pick_ctx *c);

/* Checks a pick's parameters (ids in range, n_top, not everything
 * forbidden) and makes the sampling scratch ready: nothing can fail in
 * host_pick_rows after it but a row whose logits are not finite. */
int host_pick_check(host_pick_ctx *c, const backend_pick *pk, clover_error *err);

/* Picks rows of logits ([.][n_vocab], changed in place by forbidding and
 * penalties): rows[i] is the row index (into logits, into out's arrays, and
 * for the response position) of the i-th picked row, u[i] its draw (NULL
 * when greedy); block [b] is the block for the </think> rule (NULL: none).
 * One pool task per row. */
int host_pick_rows(host_pick_ctx *c, const backend_pick *pk, float *logits, const size_t *rows, size_t n,
                   const float *u, const int32_t *block, size_t b, const backend_pick_out *out,
                   backend_pass_stats *stats, clover_error *err);

/* The same with the i-th picked row's logits at row lrows[i] of logits
 * (rows[i] still names its output slot and response position): logits
 * computed for the picked rows only. */
int host_pick_rows_at(host_pick_ctx *c, const backend_pick *pk, float *logits, const size_t *lrows, const size_t *rows,
                      size_t n, const float *u, const int32_t *block, size_t b, const backend_pick_out *out,
                      backend_pass_stats *stats, clover_error *err);

/* The log-probability of id and the n_top alternatives over a row already
 * forbidden and penalised (what host_pick_rows writes for a picked row);
 * lp, top_id and top_lp may each be NULL. */
void host_pick_logprobs(const float *row, size_t V, int32_t id, size_t n_top, float *lp, int32_t *top_id,
                        float *top_lp);

#endif
