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

#include "backend/backend.h"
#include "clover.h"
#include "engine/logprobs.h"
#include "backend/penalties.h"
#include "backend/sampler.h"
#include "engine/snapshot.h"

struct clover_session {
    const clover_model *model;
    const backend_ops *be;
    backend *bk;       /* the backend object the session runs on */
    bool own_bk;       /* created for this session alone (clover_session_create) */
    bool active;       /* a clover_request is running on it */
    backend_session *bs;
    size_t n_vocab;
    size_t max_rows;  /* rows per backend pass */
    size_t max_block; /* the record's block size (0: no record) */
    size_t max_context; /* committed ids at most (the backend's context; 0: no limit known): checked before a prompt, ends an answer */

    int32_t *ids; /* [cap_ids] committed ids; the backend holds exactly n_ids rows */
    size_t n_ids, cap_ids;

    float *last_logits; /* [n_vocab] the last committed row's logits, when last_valid */
    bool last_valid;
    bool keeps_last;    /* the backend keeps the last row's logits (backend_ops.last_logits): decode brings none back */

    engine_snapshot snap;     /* the prompt snapshot (snapshot.h); may outlive a forgotten sequence */
    bool snapshot_on;         /* clover_session_params.no_snapshot unset */
    size_t snapshot_max_bytes;

    int32_t *stop_ids; /* the model's stop ids: record + EOS, deduplicated, < n_vocab, ascending */
    size_t n_stop_ids;

    /* per-request scratch */
    float *logits;      /* [max_block][n_vocab] the first preview's raw logits (the parity dump) */
    float *row;         /* [n_vocab] autoregressive work row (a pick from the kept logits) */
    uint8_t *is_stop;   /* [n_vocab] ids that end the answer in this request */
    int32_t *block;     /* [max_block] the block being resolved (mask id on pending rows) */
    float *block_conf;  /* [max_block] confidence of each fixed row */
    uint8_t *pending;   /* [max_block] */
    int32_t *pick_id;   /* [max_block] this pass's pick per row */
    float *pick_conf;   /* [max_block] */
    float *pick_u;      /* [max_block] the draws of the pending rows, taken in row order */
    uint32_t *pen_counts; /* [n_vocab] the counts of pen.seen, in its order (backend_penalties) */
    uint8_t *view_fixed;  /* [max_block] the fixed flags a clover_pass_view shows */
    lp_rows pick_lp;      /* [max_block] this pass's picks' log-probabilities (requests that want them) */
    lp_rows block_lp;     /* [max_block] those of each fixed row */
    penalty_state pen;
    sampler_scratch samp; /* the host pick from the kept logits (sampled requests) */
    bool samp_ready;

    /* the backend operation this session's request planned for the next pass */
    backend_commit_seq cseq;
    backend_preview_seq pseq;
    backend_resolve_seq rseq; /* a whole block resolved by the backend (generate_diffusion.c) */
    int32_t *rblock;          /* [max_block] its output ids */
    int32_t *rec_guess;       /* [max_block][max_block] its record */
    float *rec_conf;
    uint8_t *fixed_at;        /* [max_block] */
    backend_pick pick;
    backend_penalties pick_pen;
    clover_op_seconds *commit_ops; /* where the planned commit's operator seconds go */
    backend_checkpoint *ckpt; /* lossless mode: the state at the block start (made on first use) */
    struct tm_vocab *gvocab;  /* structured output: the token trie (engine/structured.h), made on first use */
};

/* The backend object sessions run on when `chosen` is asked for
 * (backend_select.c): chosen itself, or the failover over it (a device
 * backend, or CLOVER_FAULT_INJECT set); *ops gets the ops to call it with. */
int engine_backend_open(const clover_model *model, const backend_config *cfg, const backend_ops *chosen,
                        const backend_ops **ops, backend **bk, clover_error *err);

/* clover_engine_create over a given backend (batch.c; tests pass a fake
 * one); why: the choice's reason (NULL: "asked for"). */
int engine_create_on(clover_engine **out, const clover_model *model, const backend_ops *ops,
                     const clover_session_params *params, const char *why, clover_error *err);

/* clover_session_create over a given backend (tests pass a fake one);
 * bk: a backend object to share (NULL: one is created for this session). */
int engine_session_create(clover_session **out, const clover_model *model, const backend_ops *be,
                          const clover_session_params *params, clover_error *err);
int engine_session_create_on(clover_session **out, const clover_model *model, const backend_ops *be, backend *bk,
                             const clover_session_params *params, clover_error *err);
/* The backend config a session's parameters ask for on backend ops (whose
 * default_rows is the rows per pass when the parameters give none). */
/* --gpu-mem's rules before any backend is made (params->gpu_mem set): device CUDA asked for, a CUDA build,
 * not with --gpu-layers; 0 or a one-line error. */
int engine_gpu_mem_check(const clover_session_params *params, clover_error *err);
void engine_backend_config(const clover_model *model, const clover_session_params *params, const backend_ops *ops,
                           backend_config *cfg);

/* CLOVER_ENGINE_EAGER_LOGITS set (any value): every autoregressive decode
 * step copies the last row's logits to the host, as before the pick moved
 * onto the backend for good (A/B timing, and the old path's tests). */
bool engine_eager_logits(void);

/* Makes the sampler scratch of the host pick ready (sampled requests only). */
int engine_session_sampler_ready(clover_session *s, clover_error *err);

/* Forgets the committed sequence (backend reset, no ids). */
void engine_session_forget(clover_session *s);

/* Room for extra more committed ids. */
int engine_session_reserve(clover_session *s, size_t extra, clover_error *err);

/* Plans a commit of ids[0..n) at the session's end into s->cseq (the ids
 * must stay valid until commit_done); with want_logits the last row's
 * logits land in last_logits; with pick (may be NULL) the last row's causal
 * pick goes to *id, *conf (u: its draw, NULL when greedy). Operator seconds
 * go to ops (may be NULL). On failure the session is forgotten. */
int engine_session_plan_commit(clover_session *s, const int32_t *ids, size_t n, bool want_logits,
                               const backend_pick *pick, const float *u, int32_t *id, float *conf,
                               clover_op_seconds *ops, clover_error *err);
/* After the backend ran s->cseq (alone or in a batch): appends the ids, or
 * forgets the session on the sequence's failure (its message into err). */
int engine_session_commit_done(clover_session *s, const backend_pass_stats *st, clover_error *err);

/* Step 1 of SPEC 3, its first half: validates the prompt and decides the
 * reuse: the longer of the committed ids and the prompt snapshot's ids that
 * is a prefix of (or equal to) it (the snapshot is imported then);
 * otherwise the sequence starts afresh. With want_logits a fully reused
 * prompt needs kept logits (else it is recommitted). *reused gets the
 * reused count, *at the snapshot point (SIZE_MAX: none). The tail is then
 * committed in chunks by the request (request.c), each ending at
 * engine_prompt_chunk_end. */
int engine_session_prompt_begin(clover_session *s, const int32_t *prompt, size_t n, bool want_logits,
                                const clover_generate_params *p, size_t *reused, size_t *at,
                                clover_generate_stats *st, clover_error *err);
/* The end of the prompt chunk starting at a: max_rows at most, cut at the snapshot point. */
size_t engine_prompt_chunk_end(const clover_session *s, size_t a, size_t n, size_t at);
/* Takes the prompt snapshot of prompt[0..at) (an optimisation: a failure leaves none). */
void engine_session_take_snapshot(clover_session *s, const int32_t *prompt, size_t at, clover_generate_stats *st);

/* Adds a pass's operator seconds to ops (stats.c). */
void engine_ops_add(clover_op_seconds *ops, const backend_pass_stats *st);

#endif
