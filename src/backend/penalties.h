/*
 * penalties.h: the response penalties of SPEC.md 3.1 (seed 000's
 * `Penalties`), applied to a block row's logits before the pick.
 *
 * Counts cover the committed response tokens of one request only (never the
 * prompt, never the block being resolved): the loop adds a block's emitted
 * tokens after it resolved. Every operation is float32 in the seed's order
 * (frequency, presence, repetition; then the length ramp on the stop ids and
 * the </think> ramp), so the reference's float32 numpy steps and this code
 * produce the same bits.
 */
#ifndef CLOVER_BACKEND_PENALTIES_H
#define CLOVER_BACKEND_PENALTIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"

/* The values one request uses: the record's, or the request's override. */
typedef struct penalty_config {
    clover_penalties p;
    int32_t think_end_id; /* -1: none (the record's think_end_token_id) */
} penalty_config;

/* Counts of the committed response tokens. Sized for the vocabulary once
 * (at session creation); reset per request touches only the seen ids. */
typedef struct penalty_state {
    uint32_t *counts; /* [n_vocab] */
    int32_t *seen;    /* [n_vocab] ids in first-seen order */
    size_t n_seen;
    size_t length;    /* committed response tokens */
    size_t n_vocab;
} penalty_state;

int penalty_state_init(penalty_state *st, size_t n_vocab, clover_error *err);
void penalty_state_free(penalty_state *st);
void penalty_state_reset(penalty_state *st);
/* Adds committed response tokens (ids < n_vocab). */
void penalty_state_commit(penalty_state *st, const int32_t *ids, size_t n);

/* clamp((pos - start) / window, 0, 1) * strength in float32; window 0 is a
 * step: full strength from pos >= start, nothing before. */
float penalty_ramp(size_t pos, uint32_t start, uint32_t window, float strength);

/* Whether </think> is still open for a pass: the config names a think-end
 * id, it is not among the committed response tokens and not in the block's
 * fixed rows (block holds the mask id on rows still pending). */
bool penalty_think_open(const penalty_config *cfg, const penalty_state *st, const int32_t *block, size_t b);

/* Mutates one row of logits [n_vocab] in place. row_pos is the 1-based
 * response position the row would take (committed response tokens + r + 1);
 * stop_ids (all < n_vocab) receive the length ramp. */
void penalty_apply(const penalty_config *cfg, const penalty_state *st, float *row, size_t row_pos,
                   const int32_t *stop_ids, size_t n_stop, bool think_open);

#endif
