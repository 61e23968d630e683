/*
 * backend_seq.h: one sequence on a backend object of its own, driven through
 * the batched contract (backend.h) with calls of one sequence, for the
 * tests and benches that compare one sequence with fixtures or with another
 * backend (golden, backend, CUDA). Any backend: the table is a parameter, so
 * a CPU and a CUDA sequence are driven by the same lines. (The library has
 * one contract; this is only its one-sequence spelling for tests.)
 */
#ifndef CLOVER_TEST_BACKEND_SEQ_H
#define CLOVER_TEST_BACKEND_SEQ_H

#include <stdlib.h>

#include "backend/backend.h"
#include "base/error.h"

typedef struct tseq {
    const backend_ops *ops;
    backend *be;          /* its own backend object */
    backend_session *s;
} tseq;

/* *out = a sequence on a new backend object of ops for m. */
static inline int seq_create(const backend_ops *ops, const clover_model *m, const backend_config *cfg, tseq **out,
                             clover_error *err) {
    *out = NULL;
    tseq *q = calloc(1, sizeof *q);
    if (!q) return error_set(err, CLOVER_E_NOMEM, "seq: no memory");
    q->ops = ops;
    int rc = ops->create(m, cfg, &q->be, err);
    if (!rc && (rc = ops->session_create(q->be, &q->s, err))) ops->destroy(q->be);
    if (rc) {
        free(q);
        return rc;
    }
    *out = q;
    return CLOVER_OK;
}

static inline void seq_free(tseq *q) {
    if (!q) return;
    q->ops->session_free(q->s);
    q->ops->destroy(q->be);
    free(q);
}

static inline size_t seq_length(const tseq *q) { return q->ops->session_length(q->s); }
static inline void seq_reset(tseq *q) { q->ops->reset(q->s); }

/* Commits ids; out (may be NULL) gives the outputs wanted (its s, ids and n are ignored). */
static inline int seq_commit(tseq *q, const int32_t *ids, size_t n, const backend_commit_seq *out,
                             backend_pass_stats *st, clover_error *err) {
    if (!q) return error_set(err, CLOVER_E_INVALID, "commit: no sequence");
    backend_commit_seq c = {0};
    if (out) c = *out;
    c.s = q->s, c.ids = ids, c.n = n, c.rc = 0;
    return backend_commit1(q->ops, q->be, &c, st, err);
}

/* The raw logits [b][n_vocab] of a preview over block (no pick). */
static inline int seq_preview(tseq *q, const int32_t *block, size_t b, const backend_preview_opts *opts, float *logits,
                              backend_pass_stats *st, clover_error *err) {
    if (!q || !block || !opts || !logits)
        return error_set(err, CLOVER_E_INVALID, "preview: a sequence, block ids, options and a logits buffer are required");
    backend_preview_seq p = {.s = q->s, .block = block, .b = b, .opts = *opts, .logits = logits};
    return backend_preview1(q->ops, q->be, &p, st, err);
}

static inline int seq_preview_debug(tseq *q, float *hidden, uint8_t *kept, clover_error *err) {
    if (!q->ops->preview_debug) return error_set(err, CLOVER_E_UNSUPPORTED, "preview_debug: not on %s", q->ops->name);
    return q->ops->preview_debug(q->s, hidden, kept, err);
}
static inline size_t seq_state_bytes(const tseq *q) { return q->ops->state_bytes(q->s); }
static inline int seq_state_export(const tseq *q, void *buf, size_t len, clover_error *err) {
    return q->ops->state_export(q->s, buf, len, err);
}
static inline int seq_state_import(tseq *q, const void *buf, size_t len, clover_error *err) {
    return q->ops->state_import(q->s, buf, len, err);
}

#endif
