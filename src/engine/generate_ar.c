/*
 * generate_ar.c: ordinary next-token decoding (tools/reference
 * generate_autoregressive, DECISIONS 11): the only mode of a model without
 * the block-diffusion record, and `mode=autoregressive` on a Clover model.
 * The same pick and forbidden ids as block diffusion, no penalties (they
 * belong to the record's diffusion loop); the mask id of a Clover model is
 * forbidden too, since it is never an answer token. Every emitted token but
 * the last is committed, so the session ends as prompt + answer[:-1] and a
 * follow-up prompt that extends it reuses everything.
 */
#include <string.h>

#include "base/error.h"
#include "base/timer.h"
#include "engine/request.h"
#include "engine/stats.h"

int engine_generate_ar(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_result *res = rq->res;
    clover_generate_stats *st = &res->stats;
    const size_t V = s->n_vocab, max = rq->p->max_tokens;
    bool cancelled;
    int rc = request_commit_prompt(rq, true, &cancelled, err);
    if (rc || cancelled) return rc;
    if (rq->p->dump_first_preview) {
        rc = engine_dump_first_preview(rq->p->dump_first_preview, rq->prompt, rq->n_prompt, s->last_logits, 1, V,
                                       err);
        if (rc) return rc;
    }
    while (res->n_generated < max) {
        if (request_cancelled(rq)) {
            res->finish = CLOVER_FINISH_CANCELLED;
            return CLOVER_OK;
        }
        double t = timer_now();
        memcpy(s->row, s->last_logits, V * sizeof *s->row);
        request_forbid(rq, s->row);
        int32_t id;
        float conf;
        double u = sampler_draw(&rq->sp, &rq->rng);
        rc = sampler_pick(&rq->sp, s->row, V, u, s->samp, &id, &conf, err);
        st->pick_s += timer_now() - t;
        if (rc) return error_prefix(err, "token %zu", res->n_generated);
        if (!(conf >= 0.0f))
            return error_set(err, CLOVER_E_INTERNAL, "token %zu: the logits are not finite", res->n_generated);
        bool ended;
        if ((rc = request_emit(rq, id, conf, &ended, err))) return rc;
        if (ended || res->n_generated >= max) break;
        t = timer_now();
        rc = engine_session_commit(s, &id, 1, true, &st->commit_ops, err);
        st->commit_s += timer_now() - t;
        if (rc) return error_prefix(err, "decoding token %zu", res->n_generated);
        st->passes++;
    }
    return CLOVER_OK;
}
