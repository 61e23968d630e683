/*
 * session.h: the engine's side of a clover_session (internal). The session
 * owns the committed ids (for prefix reuse) and every per-request buffer,
 * sized once at creation so a request allocates only its growing results;
 * the backend owns the sequence's tensors. Tests create sessions over a
 * fake backend through engine_session_create.
 */
#ifndef CLOVER_ENGINE_SESSION_H
#define CLOVER_ENGINE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "base/threadpool.h"
#include "clover.h"
#include "engine/penalties.h"
#include "engine/sampler.h"
#include "engine/snapshot.h"

struct clover_session {
    const clover_model *model;
    const backend_ops *be;
    backend_session *bs;
    size_t n_vocab;
    size_t max_rows;  /* rows per backend pass */
    size_t max_block; /* the record's block size (0: no record) */

    int32_t *ids; /* [cap_ids] committed ids; the backend holds exactly n_ids rows */
    size_t n_ids, cap_ids;

    float *last_logits; /* [n_vocab] the last committed row's logits, when last_valid */
    bool last_valid;

    engine_snapshot snap;     /* the prompt snapshot (snapshot.h); may outlive a forgotten sequence */
    bool snapshot_on;         /* clover_session_params.no_snapshot unset */
    size_t snapshot_max_bytes;

    int32_t *stop_ids; /* the model's stop ids: record + EOS, deduplicated, < n_vocab, ascending */
    size_t n_stop_ids;

    /* per-request scratch */
    float *logits;      /* [max_block][n_vocab] preview logits; rows are penalised in place */
    float *row;         /* [n_vocab] autoregressive work row */
    uint8_t *is_stop;   /* [n_vocab] ids that end the answer in this request */
    int32_t *block;     /* [max_block] the block being resolved (mask id on pending rows) */
    float *block_conf;  /* [max_block] confidence of each fixed row */
    uint8_t *pending;   /* [max_block] */
    int32_t *pick_id;   /* [max_block] this pass's pick per row */
    float *pick_conf;   /* [max_block] */
    size_t *pick_rows;  /* [max_block] the pending rows of a pass, one pick task each */
    double *pick_u;     /* [max_block] their draws, taken in row order before the tasks run */
    int *pick_rc;       /* [max_block] each task's status */
    clover_error *pick_err; /* [max_block] each task's message */
    uint8_t *view_fixed;    /* [max_block] the fixed flags a clover_pass_view shows */
    penalty_state pen;
    threadpool *pool;       /* runs a pass's picks (NULL: inline); min(threads, block) threads */
    size_t n_workers;       /* threadpool_size(pool) */
    sampler_scratch *samp;  /* [n_workers], allocated by the first sampling request */
};

/* clover_session_create over a given backend (tests pass a fake one). */
int engine_session_create(clover_session **out, const clover_model *model, const backend_ops *be,
                          const clover_session_params *params, clover_error *err);

/* Makes the per-thread sampler scratch ready (sampled requests only). */
int engine_session_sampler_ready(clover_session *s, clover_error *err);

/* Forgets the committed sequence (backend reset, no ids). */
void engine_session_forget(clover_session *s);

/* Room for extra more committed ids. */
int engine_session_reserve(clover_session *s, size_t extra, clover_error *err);

/* Commits ids[0..n) at the session's end and appends them to the committed
 * ids; with want_logits the last row's logits land in last_logits. Timing
 * by operator goes to ops (may be NULL). On failure the session is forgotten. */
int engine_session_commit(clover_session *s, const int32_t *ids, size_t n, bool want_logits, clover_op_seconds *ops,
                          clover_error *err);

/* Step 1 of SPEC 3: commits the prompt, reusing the longer of the
 * committed ids and the prompt snapshot's ids that is a prefix of (or equal
 * to) it (the snapshot is imported then); otherwise starts afresh. With
 * want_logits the last prompt row's logits are in last_logits afterwards
 * (recommitting everything when a fully reused prompt left none).
 * *reused gets the reused token count. The tail goes in chunks of max_rows
 * (the backend's own split, so the numbers do not change), cut at the
 * request's snapshot point where the snapshot is taken, with p->cancel
 * (may be NULL) checked before each: *cancelled, and the session
 * forgotten, when it was set. Operator seconds and the snapshot figures go
 * to st. */
int engine_session_prepare(clover_session *s, const int32_t *prompt, size_t n, bool want_logits,
                           const clover_generate_params *p, size_t *reused, bool *cancelled,
                           clover_generate_stats *st, clover_error *err);

/* Adds a pass's operator seconds to ops (stats.c). */
void engine_ops_add(clover_op_seconds *ops, const backend_pass_stats *st);

#endif
