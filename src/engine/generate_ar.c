/*
 * generate_ar.c: ordinary next-token decoding (tools/reference
 * generate_autoregressive, DECISIONS 11) as steps of the request's state
 * machine: the only mode of a model without the block-diffusion record, and
 * `mode=autoregressive` on a Clover model. The same pick and forbidden ids
 * as block diffusion, no penalties (they belong to the record's diffusion
 * loop); the mask id of a Clover model is forbidden too, since it is never
 * an answer token. The backend picks each token in the commit of the one
 * before it (the causal pick of backend.h); only a prompt that was wholly
 * reused is picked here, from the logits the session kept (on a backend
 * that keeps the last row's logits itself, backend_ops.last_logits, a
 * decode step brings none back; they are fetched only when a later prompt
 * equal to the committed ids decodes from them). Every emitted
 * token but the last is committed, so the session ends as prompt +
 * answer[:-1] and a follow-up prompt that extends it reuses everything.
 */
#include <string.h>

#include "base/error.h"
#include "base/timer.h"
#include "engine/request.h"
#include "engine/stats.h"
#include "engine/structured.h"

/* After the prompt: the first token (picked by the last prompt chunk's
 * commit, or here from the kept logits) and the parity dump. */
static int ar_begin(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_stats *st = &rq->res->stats;
    const size_t V = s->n_vocab;
    int rc;
    if (rq->p->dump_first_preview) {
        rc = engine_dump_first_preview(rq->p->dump_first_preview, rq->prompt, rq->n_prompt, s->last_logits, 1, V,
                                       err);
        if (rc) return rc;
    }
    if (rq->gm && rq->p->max_tokens > 0) { /* under a grammar the host picks (structured.h) */
        if ((rc = engine_grammar_ar_pick(rq, (float)sampler_draw(&rq->sp, &rq->rng), err))) return rc;
    } else if (!rq->prompt_committed && rq->p->max_tokens > 0) {
        double t = timer_now();
        memcpy(s->row, s->last_logits, V * sizeof *s->row);
        request_forbid(rq, s->row);
        double u = sampler_draw(&rq->sp, &rq->rng);
        rc = sampler_pick(&rq->sp, s->row, V, u, s->samp_ready ? &s->samp : NULL, &rq->tok, &rq->tok_conf, err);
        if (!rc) request_lp_host(rq, s->row);
        st->pick_s += timer_now() - t;
        if (rc) return error_prefix(err, "token 0");
    }
    rq->phase = RQ_DECODE;
    return CLOVER_OK;
}

int engine_ar_plan(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_result *res = rq->res;
    clover_generate_stats *st = &res->stats;
    const size_t max = rq->p->max_tokens;
    int rc;
    if (rq->phase == RQ_BLOCK && (rc = ar_begin(rq, err))) return rc; /* RQ_BLOCK: the prompt just ended */
    if (rq->phase != RQ_DECODE) return CLOVER_OK;
    if (res->n_generated >= max) {
        rq->phase = RQ_DONE;
        return CLOVER_OK;
    }
    if (request_cancelled(rq)) {
        request_cancel(rq);
        return CLOVER_OK;
    }
    if (!(rq->tok_conf >= 0.0f))
        return error_set(err, CLOVER_E_INTERNAL, "token %zu: the logits are not finite", res->n_generated);
    bool ended;
    const lp_rows tl = request_tok_lp(rq);
    if ((rc = request_emit(rq, rq->tok, rq->tok_conf, &tl, 0, &ended, err))) return rc;
    /* a full context ends as "length" (max_context 0: no limit known, as the tests' fake models) */
    if (ended || res->n_generated >= max || (s->max_context && s->n_ids >= s->max_context)) {
        rq->phase = RQ_DONE;
        return CLOVER_OK;
    }
    rq->tok_commit = rq->tok;
    rq->tok_u = (float)sampler_draw(&rq->sp, &rq->rng);
    /* the last row's logits come back only when the host needs them (a grammar picks there) or the backend
     * keeps none (a later prompt equal to the committed ids decodes from them); the pick, and the
     * log-probabilities' rows, come from the backend (CLOVER_ENGINE_EAGER_LOGITS: every step, as before) */
    const bool want = rq->gm != NULL || !s->keeps_last || engine_eager_logits();
    rc = engine_session_plan_commit(s, &rq->tok_commit, 1, want, rq->gm ? NULL : &s->pick,
                                    sampler_is_greedy(&rq->sp) ? NULL : &rq->tok_u, &rq->tok, &rq->tok_conf,
                                    &st->commit_ops, err);
    if (rc) return error_prefix(err, "decoding token %zu", res->n_generated);
    request_lp_commit_out(rq, &tl); /* the next token's, into the slot just emitted from */
    rq->op = RQ_OP_COMMIT;
    rq->op_timer = &st->commit_s;
    return CLOVER_OK;
}

int engine_ar_absorb(engine_request *rq, const backend_pass_stats *ps, clover_error *err) {
    int rc = engine_session_commit_done(rq->s, ps, err);
    if (rc) return error_prefix(err, "decoding token %zu", rq->res->n_generated);
    rq->res->stats.passes++;
    rq->res->stats.pick_s += ps->pick_s;
    return rq->gm ? engine_grammar_ar_pick(rq, rq->tok_u, err) : CLOVER_OK; /* under a grammar the host picks */
}
