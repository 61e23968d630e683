/*
 * request_prompt.c: the prompt phase of a request (SPEC.md 3 step 1) as
 * steps: the reuse decision once (engine_session_prompt_begin), then one
 * chunk of the tail per pass, so a long prompt is committed between other
 * requests' passes instead of stalling them. Chunks are the session's
 * max_rows, cut at the snapshot point (taken when the commit reaches it);
 * the cancel flag is checked before each. An autoregressive request asks
 * the last chunk for the last row's logits (kept for reuse) and its causal
 * pick: the first answer token (so does a lossless one).
 */
#include "base/error.h"
#include "base/timer.h"
#include "engine/request.h"

int request_prompt_plan(engine_request *rq, bool *done, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_stats *st = &rq->res->stats;
    const size_t n = rq->n_prompt;
    double t = timer_now();
    *done = false;
    int rc;
    if (rq->prompt_at == SIZE_MAX) { /* the first step: the reuse decision */
        if (s->max_context && n > s->max_context) /* refused before any of it is processed */
            return error_set(err, CLOVER_E_INVALID, "the prompt is %zu tokens, more than the context of %zu tokens",
                             n, s->max_context);
        size_t reused;
        /* the causal rule's first fallback may read the prompt's last logits (generate_causal.c) */
        rc = engine_session_prompt_begin(s, rq->prompt, n, rq->ar || rq->lossless || rq->causal_rule, rq->p, &reused,
                                         &rq->snap_at, st, err);
        st->prompt_s += timer_now() - t;
        if (rc) return error_prefix(err, "prompt");
        rq->prompt_at = reused;
        st->reused_tokens = reused;
        t = timer_now();
    }
    const size_t a = rq->prompt_at;
    if (a == rq->snap_at) engine_session_take_snapshot(s, rq->prompt, a, st);
    if (a >= n) {
        *done = true;
        st->prompt_s += timer_now() - t;
        return CLOVER_OK;
    }
    if (request_cancelled(rq)) {
        engine_session_forget(s);
        request_cancel(rq);
        *done = true;
        return CLOVER_OK;
    }
    const size_t end = engine_prompt_chunk_end(s, a, n, rq->snap_at);
    const bool causal = rq->ar || rq->lossless; /* lossless: the first token is autoregressive decoding's */
    const bool last = end == n, pick = causal && last && rq->p->max_tokens > 0 && !rq->gm; /* a grammar picks on the host */
    if (pick) rq->tok_u = (float)sampler_draw(&rq->sp, &rq->rng);
    rc = engine_session_plan_commit(s, rq->prompt + a, end - a, (causal || rq->causal_rule) && last,
                                    pick ? &s->pick : NULL,
                                    pick && !sampler_is_greedy(&rq->sp) ? &rq->tok_u : NULL, &rq->tok,
                                    &rq->tok_conf, &st->commit_ops, err);
    if (rc) return error_prefix(err, "prompt");
    if (pick) {
        const lp_rows tl = request_tok_lp(rq);
        request_lp_commit_out(rq, &tl);
    }
    rq->op = RQ_OP_COMMIT;
    rq->op_timer = &st->prompt_s;
    return CLOVER_OK;
}

int request_prompt_absorb(engine_request *rq, const backend_pass_stats *ps, clover_error *err) {
    clover_session *s = rq->s;
    int rc = engine_session_commit_done(s, ps, err);
    if (rc) return error_prefix(err, "prompt");
    rq->prompt_at += s->cseq.n;
    rq->prompt_committed = true;
    return CLOVER_OK;
}
