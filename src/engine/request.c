/*
 * request.c: what both generation modes share: the emission rule of SPEC.md
 * 3 item 3 (a stop id is kept and counted but not streamed; the callback may
 * cancel), the forbidden ids, the live view and the growing result arrays
 * (grown by doubling, at most once per block or token: never inside the
 * per-row work).
 */
#include "engine/request.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "backend/pick.h"
#include "engine/structured.h"

bool request_cancelled(const engine_request *rq) {
    return rq->p->cancel && __atomic_load_n(rq->p->cancel, __ATOMIC_RELAXED) != 0;
}

void request_forbid(const engine_request *rq, float *row) {
    for (size_t i = 0; i < rq->n_forbid; i++) row[rq->forbid[i]] = -INFINITY; /* validated: 0 <= id < n_vocab */
}

void request_cancel(engine_request *rq) {
    rq->res->finish = CLOVER_FINISH_CANCELLED;
    rq->phase = RQ_DONE;
}

/* Room for one more token in the result (capacity doubles). */
static int reserve_tokens(engine_request *rq, clover_error *err) {
    clover_generate_result *r = rq->res;
    if (r->n_generated < rq->cap_out) return CLOVER_OK;
    size_t c = rq->cap_out ? rq->cap_out * 2 : 64, bytes;
    if (!mem_mul_ok(c, sizeof(int32_t) + sizeof(float), &bytes))
        return error_set(err, CLOVER_E_NOMEM, "generate: result too large");
    int32_t *ids = mem_alloc(c * sizeof *ids);
    float *conf = mem_alloc(c * sizeof *conf);
    if (!ids || !conf) {
        mem_free(ids);
        mem_free(conf);
        return error_set(err, CLOVER_E_NOMEM, "generate: no memory for %zu result tokens", c);
    }
    if (r->n_generated) {
        memcpy(ids, r->ids, r->n_generated * sizeof *ids);
        memcpy(conf, r->confidences, r->n_generated * sizeof *conf);
    }
    mem_free(r->ids);
    mem_free(r->confidences);
    r->ids = ids;
    r->confidences = conf;
    if (rq->want_lp) {
        int rc = lp_result_grow(r, r->n_generated, c, err);
        if (rc) return rc; /* ids and confidences keep their room: growing again is harmless */
    }
    rq->cap_out = c;
    return CLOVER_OK;
}

lp_rows request_tok_lp(engine_request *rq) { return (lp_rows){&rq->tok_lp_v, rq->tok_top_id, rq->tok_top_lp}; }

void request_lp_commit_out(engine_request *rq, const lp_rows *lp) {
    if (rq->want_lp) lp_rows_out(lp, 0, rq->n_top, &rq->s->cseq.pick_out);
}

void request_lp_host(engine_request *rq, const float *row) {
    if (rq->want_lp)
        host_pick_logprobs(row, rq->s->n_vocab, rq->tok, rq->n_top, &rq->tok_lp_v, rq->tok_top_id, rq->tok_top_lp);
}

int request_emit(engine_request *rq, int32_t id, float conf, const lp_rows *lp, size_t lpi, bool *ended,
                 clover_error *err) {
    clover_generate_result *r = rq->res;
    *ended = false;
    int rc = reserve_tokens(rq, err);
    if (rc) return rc;
    if (rq->want_lp && !lp) return error_set(err, CLOVER_E_INTERNAL, "generate: token %zu has no log-probabilities",
                                             r->n_generated);
    if (rq->gm && (rc = engine_grammar_emitted(rq, id, err))) return rc;
    r->ids[r->n_generated] = id;
    r->confidences[r->n_generated] = conf;
    if (rq->want_lp) lp_result_put(r, r->n_generated, lp, lpi);
    r->n_generated++;
    if (rq->s->is_stop[id] && !rq->p->ignore_eos) {
        r->finish = CLOVER_FINISH_STOP;
        *ended = true;
        return CLOVER_OK;
    }
    if (rq->p->on_token && rq->p->on_token(rq->p->user, id, conf) != 0) {
        r->finish = CLOVER_FINISH_CANCELLED;
        *ended = true;
        return CLOVER_OK;
    }
    if (rq->p->on_token_info) {
        const size_t n = r->n_generated - 1, k = r->n_top_logprobs;
        const clover_token_info info = {.index = n,
                                        .id = id,
                                        .confidence = conf,
                                        .logprob = rq->want_lp ? r->logprobs[n] : 0.0f,
                                        .n_top = k,
                                        .top_ids = k ? r->top_ids + n * k : NULL,
                                        .top_logprobs = k ? r->top_logprobs + n * k : NULL};
        if (rq->p->on_token_info(rq->p->user, &info) != 0) {
            r->finish = CLOVER_FINISH_CANCELLED;
            *ended = true;
        }
    }
    return CLOVER_OK;
}

void request_report_pass(engine_request *rq, size_t passes, size_t n_fixed_now, bool *cancel) {
    *cancel = false;
    if (!rq->p->on_pass) return;
    clover_session *s = rq->s;
    size_t n_fixed = 0;
    for (size_t r = 0; r < rq->block; r++) {
        s->view_fixed[r] = !s->pending[r];
        n_fixed += s->view_fixed[r];
    }
    const clover_pass_view v = {.block_index = rq->res->n_blocks,
                                .pass = passes,
                                .block_size = rq->block,
                                .position = s->n_ids,
                                .emitted = rq->res->n_generated,
                                .ids = s->block,
                                .fixed = s->view_fixed,
                                .guesses = s->pick_id,
                                .confidences = s->pick_conf,
                                .n_fixed = n_fixed,
                                .n_fixed_now = n_fixed_now};
    *cancel = rq->p->on_pass(rq->p->user, &v) != 0;
}

/* Grows one per-block array to c entries, keeping n. */
static int grow_u32(uint32_t **a, size_t n, size_t c, clover_error *err) {
    size_t bytes;
    if (!mem_mul_ok(c, sizeof(uint32_t), &bytes)) return error_set(err, CLOVER_E_NOMEM, "generate: too many blocks");
    uint32_t *v = mem_alloc(bytes);
    if (!v) return error_set(err, CLOVER_E_NOMEM, "generate: no memory for %zu block counts", c);
    if (n) memcpy(v, *a, n * sizeof *v);
    mem_free(*a);
    *a = v;
    return CLOVER_OK;
}

int request_push_block(engine_request *rq, uint32_t passes, clover_error *err) {
    clover_generate_result *r = rq->res;
    if (r->n_blocks == rq->cap_blocks) {
        size_t c = rq->cap_blocks ? rq->cap_blocks * 2 : 16;
        int rc = grow_u32(&r->passes_per_block, r->n_blocks, c, err);
        if (!rc && rq->lossless) rc = grow_u32(&r->accepted_per_block, r->n_blocks, c, err);
        if (!rc && rq->lossless) rc = grow_u32(&r->commits_per_block, r->n_blocks, c, err);
        if (rc) return rc;
        rq->cap_blocks = c;
    }
    if (rq->lossless) r->accepted_per_block[r->n_blocks] = r->commits_per_block[r->n_blocks] = 0;
    r->passes_per_block[r->n_blocks++] = passes;
    return CLOVER_OK;
}
