/*
 * request.h: one generation request as the loops see it (internal): the
 * parameters resolved and validated against the model (generate.c), the
 * random stream, and the growing result. The two loops (generate_diffusion.c,
 * generate_ar.c) share the emission rule through request_emit, so stop ids,
 * the streaming callback and cancellation behave the same in both modes.
 */
#ifndef CLOVER_ENGINE_REQUEST_H
#define CLOVER_ENGINE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/rng.h"
#include "clover.h"
#include "engine/penalties.h"
#include "engine/sampler.h"
#include "engine/session.h"

typedef struct engine_request {
    clover_session *s;
    const int32_t *prompt;
    size_t n_prompt;
    const clover_generate_params *p;
    sampler_params sp;
    rng_state rng;
    int32_t mask_id;        /* forbidden in every row; -1 without a record */
    /* block diffusion */
    float threshold;        /* the record's or the override */
    size_t block;           /* B of this request: the record's or a divisor of it */
    penalty_config pen;     /* the record's penalties or the override */
    /* the result being built */
    clover_generate_result *res;
    size_t cap_out, cap_blocks;
} engine_request;

/* The two loops. Both fill rq->res (ids, finish, stats) and return a status;
 * the caller forgets the session after a failure or a cancellation. */
int engine_generate_diffusion(engine_request *rq, clover_error *err);
int engine_generate_ar(engine_request *rq, clover_error *err);

/* True when the caller's cancel flag is set. */
bool request_cancelled(const engine_request *rq);

/* Commits the request's prompt (reusing the session's prefix) and records
 * prompt_s and reused_tokens; want_logits keeps the last row's logits
 * (autoregressive decoding). *cancelled: the request was cancelled during
 * the prompt (finish is then set to cancelled). */
int request_commit_prompt(engine_request *rq, bool want_logits, bool *cancelled, clover_error *err);

/* Sets the mask id and the suppressed ids of row [n_vocab] to -inf. */
void request_forbid(const engine_request *rq, float *row);

/* Emits one token: appends it to the result; a stop id (unless ignore_eos)
 * ends the answer with finish "stop"; otherwise the callback sees it and may
 * end it with finish "cancelled". *ended tells the loop to stop. */
int request_emit(engine_request *rq, int32_t id, float conf, bool *ended, clover_error *err);

/* Shows the block being resolved to the caller's on_pass (if any) after
 * `passes` passes, n_fixed_now rows fixed by the last one; *cancel when the
 * callback asks to stop. */
void request_report_pass(engine_request *rq, size_t passes, size_t n_fixed_now, bool *cancel);

/* Records a resolved block's pass count. */
int request_push_block(engine_request *rq, uint32_t passes, clover_error *err);

/* Writes the parity dump (dump.c): the prompt ids and each of the b rows'
 * top-10 logit ids (value descending, ties: lower id) and values, as JSON. */
int engine_dump_first_preview(const char *path, const int32_t *prompt, size_t n_prompt, const float *logits,
                              size_t b, size_t n_vocab, clover_error *err);

#endif
