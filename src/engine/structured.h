/*
 * structured.h: structured output in the generation modes (internal): the
 * request's compiled schema, the automaton state after the emitted tokens,
 * and the host picks that apply its token masks. Under a grammar every pick
 * runs on the host from full logits (a backend's device pick cannot mask
 * per row): correctness first, the cost is a logits row per picked row.
 *
 * Block diffusion resolves left to right under the grammar: in each pass
 * the pending rows are picked in order from the first one, each masked by
 * the automaton after the fixed rows and this pass's picks to its left; the
 * first is fixed, and each next one while its confidence is above the
 * threshold (LowConfidence restricted to a growing prefix). So fixed rows
 * are always a prefix of the block, and every one is valid given the rows
 * to its left. Lossless mode drafts the same way, and its verifying commit
 * picks every row on the host under the mask after the drafted rows, so
 * its answer stays --ar's under the same grammar.
 */
#ifndef CLOVER_ENGINE_STRUCTURED_H
#define CLOVER_ENGINE_STRUCTURED_H

#include <stdbool.h>
#include <stddef.h>

#include "clover.h"

struct engine_request;
struct tm_vocab;

/* Compiles p->json_schema (when set) into rq->gm; the session's token trie
 * is built on first use and kept. */
int engine_grammar_setup(struct engine_request *rq, clover_error *err);
void engine_grammar_release(struct engine_request *rq);
void engine_grammar_vocab_free(struct tm_vocab *v);

/* An emitted token advances the document (stop ids do not). */
int engine_grammar_emitted(struct engine_request *rq, int32_t id, clover_error *err);

/* Sets the ids the document cannot take next to -inf in row [n_vocab]
 * (after the emitted tokens). */
int engine_grammar_mask_next(struct engine_request *rq, float *row, clover_error *err);

/* Autoregressive: the next token from s->last_logits under the grammar,
 * with draw u, into rq->tok / tok_conf (and its log-probabilities). */
int engine_grammar_ar_pick(struct engine_request *rq, float u, clover_error *err);

/* Block diffusion: fixes the rows of this pass from the preview's raw
 * logits (s->logits), left to right (see the top); *n_fixed >= 1. */
int engine_grammar_pass(struct engine_request *rq, size_t *n_fixed, clover_error *err);

/* Lossless: the verifying commit's picks (s->pick_id / pick_conf) from
 * every row's logits (s->logits), each under the mask after the drafted
 * rows before it, up to the first row whose pick differs from the draft. */
int engine_grammar_verify(struct engine_request *rq, clover_error *err);

#endif
