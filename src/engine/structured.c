/*
 * structured.c: structured output in the generation modes (structured.h
 * says the rules). The masks come from grammar/token_mask.c's cache; the
 * picks from backend_pick.c's host pick (forbidden ids, penalties, sampling
 * with the request's draws), so a masked row is picked exactly as the
 * backend would pick it with those ids forbidden.
 */
#include "engine/structured.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/pick.h"
#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "engine/request.h"
#include "grammar/json_match.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "model/model.h"

/* Cached masks at most: about 32 MB of them whatever the vocabulary. */
#define GRAMMAR_CACHE_BYTES (32u << 20)

typedef struct engine_grammar engine_grammar;

struct engine_grammar {
    js_schema *sc;
    tm_cache *cache;
    const tm_vocab *vocab;
    jm_state emitted; /* after the emitted tokens */
    host_pick_ctx hp;
};

void engine_grammar_vocab_free(struct tm_vocab *v) { tm_vocab_free(v); }

int engine_grammar_setup(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    if (!rq->p->json_schema) return CLOVER_OK;
    if (!s->model->tokenizer)
        return error_set(err, CLOVER_E_UNSUPPORTED, "structured output: the model has no tokenizer");
    engine_grammar *g = calloc(1, sizeof *g);
    if (!g) return error_set(err, CLOVER_E_NOMEM, "structured output: no memory");
    rq->gm = g;
    int rc = js_schema_compile(rq->p->json_schema, strlen(rq->p->json_schema), &g->sc, err);
    if (rc) return rc;
    if (!s->gvocab && (rc = tm_vocab_build(s->model->tokenizer, s->n_vocab, &s->gvocab, err))) return rc;
    g->vocab = s->gvocab;
    size_t per = (s->n_vocab + 63) / 64 * 8 + sizeof(jm_state), entries = GRAMMAR_CACHE_BYTES / per;
    if ((rc = tm_cache_create(g->sc, g->vocab, entries < 16 ? 16 : entries, &g->cache, err))) return rc;
    jm_init(&g->emitted);
    g->hp.n_vocab = s->n_vocab;
    g->hp.n_samp = 1; /* inline picks: one sampler scratch */
    g->hp.counts = mem_calloc(s->n_vocab, sizeof *g->hp.counts);
    if (!g->hp.counts) return error_set(err, CLOVER_E_NOMEM, "structured output: no memory");
    return CLOVER_OK;
}

void engine_grammar_release(engine_request *rq) {
    engine_grammar *g = rq->gm;
    if (!g) return;
    js_schema_free(g->sc);
    tm_cache_free(g->cache);
    mem_free(g->hp.counts);
    g->hp.counts = NULL;
    host_pick_ctx_free(&g->hp);
    free(g);
    rq->gm = NULL;
}

/* The document after one more token (a stop id leaves it as it is). */
static int advance(engine_request *rq, jm_state *st, int32_t id, clover_error *err) {
    if (rq->s->is_stop[id]) return CLOVER_OK;
    size_t len = 0;
    const char *b = tokenizer_token_bytes(rq->s->model->tokenizer, id, &len);
    if (!tm_vocab_has(rq->gm->vocab, id) || !b || !jm_feed_bytes(rq->gm->sc, st, b, len))
        return error_set(err, CLOVER_E_INTERNAL, "structured output: token %d does not continue the document", id);
    return CLOVER_OK;
}

int engine_grammar_emitted(engine_request *rq, int32_t id, clover_error *err) {
    return advance(rq, &rq->gm->emitted, id, err);
}

/* Row under the mask of state st: -inf where the document cannot go. */
static int mask_row(engine_request *rq, const jm_state *st, float *row, clover_error *err) {
    clover_session *s = rq->s;
    bool accepts;
    const uint64_t *m = tm_mask(rq->gm->cache, st, &accepts);
    if (!m) return error_set(err, CLOVER_E_NOMEM, "structured output: no memory for a token mask");
    size_t allowed = 0;
    const size_t V = s->n_vocab;
    /* the stop ids: exactly where the document may end (set after the bitset, which leaves them out) */
    float stop_v[64];
    const size_t n_stop = s->n_stop_ids < 64 ? s->n_stop_ids : 64;
    for (size_t i = 0; i < n_stop; i++) stop_v[i] = row[s->stop_ids[i]];
    for (size_t w = 0; w * 64 < V; w++) {
        uint64_t bits = m[w];
        const size_t end = w * 64 + 64 < V ? w * 64 + 64 : V;
        if (bits == ~0ull) {
            allowed += end - w * 64;
            continue;
        }
        for (size_t i = w * 64; i < end; i++)
            if (!((bits >> (i & 63)) & 1)) row[i] = -INFINITY;
            else allowed++;
    }
    for (size_t i = 0; i < n_stop; i++) row[s->stop_ids[i]] = accepts ? stop_v[i] : -INFINITY;
    for (size_t i = 0; i < rq->p->n_stop_ids; i++) /* a request's extra stop ids only where they end it */
        if (!accepts) row[rq->p->stop_ids[i]] = -INFINITY;
    if (!allowed && !accepts)
        return error_set(err, CLOVER_E_INVALID, "structured output: no token of the vocabulary continues the document");
    return CLOVER_OK;
}

int engine_grammar_mask_next(engine_request *rq, float *row, clover_error *err) {
    return mask_row(rq, &rq->gm->emitted, row, err);
}

int engine_grammar_ar_pick(engine_request *rq, float u, clover_error *err) {
    clover_session *s = rq->s;
    double t = timer_now();
    memcpy(s->row, s->last_logits, s->n_vocab * sizeof *s->row);
    request_forbid(rq, s->row);
    int rc = mask_row(rq, &rq->gm->emitted, s->row, err);
    if (!rc)
        rc = sampler_pick(&rq->sp, s->row, s->n_vocab, u, s->samp_ready ? &s->samp : NULL, &rq->tok, &rq->tok_conf,
                          err);
    if (!rc) request_lp_host(rq, s->row);
    rq->res->stats.pick_s += timer_now() - t;
    return rc ? error_prefix(err, "token %zu", rq->res->n_generated) : CLOVER_OK;
}

/* Picks row r of s->logits under state st into s->pick_id[r] / pick_conf[r]
 * (and the pass's log-probability row r), with draw u (NULL: greedy). */
static int pick_row(engine_request *rq, const jm_state *st, size_t r, const float *u, clover_error *err) {
    clover_session *s = rq->s;
    float *row = s->logits + r * s->n_vocab;
    int rc = mask_row(rq, st, row, err);
    if (rc) return rc;
    backend_pick_out out = {.id = s->pick_id, .conf = s->pick_conf};
    if (rq->want_lp) lp_rows_out(&s->pick_lp, 0, rq->n_top, &out);
    const size_t rows[1] = {r};
    return host_pick_rows(&rq->gm->hp, &s->pick, s->logits, rows, 1, u, s->block, rq->block, &out, NULL, err);
}

int engine_grammar_pass(engine_request *rq, size_t *n_fixed, clover_error *err) {
    clover_session *s = rq->s;
    const size_t B = rq->block;
    const bool greedy = sampler_is_greedy(&rq->sp) != 0;
    const int32_t mask = (int32_t)s->model->record.mask_token_id;
    jm_state st;
    jm_copy(&st, &rq->gm->emitted);
    size_t r = rq->lossless ? 1 : 0; /* lossless: row 0 is emitted already */
    int rc = host_pick_check(&rq->gm->hp, &s->pick, err);
    for (; !rc && r < B && !s->pending[r]; r++) rc = advance(rq, &st, s->block[r], err);
    size_t fixed = 0;
    for (; !rc && r < B; r++) {
        if ((rc = pick_row(rq, &st, r, greedy ? NULL : &s->pick_u[r], err))) break;
        if (fixed && !(s->pick_conf[r] > rq->threshold)) break;
        s->block[r] = s->pick_id[r];
        s->block_conf[r] = s->pick_conf[r];
        if (rq->want_lp) lp_rows_copy(&s->block_lp, r, &s->pick_lp, r, rq->n_top);
        s->pending[r] = 0;
        fixed++;
        rc = advance(rq, &st, s->block[r], err);
    }
    if (rc) return error_prefix(err, "block diffusion pass");
    for (size_t i = r + 1; i < B; i++) /* not picked in this pass: no guess to show */
        if (s->pending[i]) {
            s->pick_id[i] = mask;
            s->pick_conf[i] = 0.0f;
        }
    rq->n_pending -= fixed;
    *n_fixed = fixed;
    return CLOVER_OK;
}

int engine_grammar_verify(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    const size_t B = rq->block;
    const bool greedy = sampler_is_greedy(&rq->sp) != 0;
    jm_state st;
    jm_copy(&st, &rq->gm->emitted); /* row 0 is emitted: pick 0 follows it */
    int rc = host_pick_check(&rq->gm->hp, &s->pick, err);
    for (size_t i = 0; !rc && i < B; i++) {
        if ((rc = pick_row(rq, &st, i, greedy ? NULL : &s->pick_u[i], err))) break;
        if (i + 1 >= B || s->pick_id[i] != s->block[i + 1]) break; /* later picks are not used */
        rc = advance(rq, &st, s->block[i + 1], err);
    }
    return rc ? error_prefix(err, "lossless verify") : CLOVER_OK;
}

int clover_json_schema_check(const char *schema, clover_error *err) {
    js_schema *sc = NULL;
    int rc = js_schema_compile(schema, schema ? strlen(schema) : 0, &sc, err);
    js_schema_free(sc);
    return rc;
}
