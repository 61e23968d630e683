/*
 * request_step.c: the request's state machine as one step: plan (host work
 * until the request needs the backend), the backend operation, absorb. A
 * request alone (clover_generate) runs its own operations one at a time;
 * the batch API (batch.c) runs the planned operations of many requests in
 * one backend call and then absorbs each. Settling is shared, so a request
 * ends the same way on either path.
 */
#include <string.h>

#include "base/error.h"
#include "base/timer.h"
#include "engine/request.h"
#include "engine/result_text.h"
#include "engine/stats.h"

int engine_request_plan(engine_request *rq, clover_error *err) {
    rq->op = RQ_OP_NONE;
    if (rq->phase == RQ_PROMPT) {
        bool done;
        int rc = request_prompt_plan(rq, &done, err);
        if (rc || !done || rq->phase == RQ_DONE) return rc;
        rq->phase = RQ_BLOCK; /* the prompt is in: the first block, or the first token */
    }
    if (rq->phase == RQ_DONE) return CLOVER_OK;
    if (rq->lossless) return engine_lossless_plan(rq, err);
    return rq->ar ? engine_ar_plan(rq, err) : engine_diffusion_plan(rq, err);
}

int engine_request_absorb(engine_request *rq, const backend_pass_stats *st, clover_error *err) {
    int rc;
    if (rq->phase == RQ_PROMPT)
        rc = request_prompt_absorb(rq, st, err);
    else if (rq->lossless)
        rc = engine_lossless_absorb(rq, st, err);
    else
        rc = rq->ar ? engine_ar_absorb(rq, st, err) : engine_diffusion_absorb(rq, st, err);
    if (rq->op_timer) *rq->op_timer += timer_now() - rq->t_op;
    rq->op = RQ_OP_NONE;
    rq->op_timer = NULL;
    return rc;
}

int engine_request_run(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    for (;;) {
        int rc = engine_request_plan(rq, err);
        if (rc) return rc;
        if (rq->op == RQ_OP_NONE) return CLOVER_OK;
        backend_pass_stats st = {0};
        rq->t_op = timer_now();
        if (rq->op == RQ_OP_COMMIT)
            s->be->commit(s->bk, &s->cseq, 1, &st);
        else if (rq->op == RQ_OP_RESOLVE)
            s->be->resolve(s->bk, &s->rseq, 1, NULL, &st);
        else
            s->be->preview(s->bk, &s->pseq, 1, &st);
        if ((rc = engine_request_absorb(rq, &st, err))) return rc;
    }
}

int engine_request_settle(engine_request *rq, int rc, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_result *out = rq->res;
    if (rc) {
        engine_session_forget(s);
        clover_generate_result_free(out);
        return rc;
    }
    if (out->finish == CLOVER_FINISH_CANCELLED) engine_session_forget(s);
    out->committed_after = s->n_ids;
    rc = engine_result_text(s->model, out, rq->p->skip_special, err);
    if (rc) { /* out of memory: a failed request, which leaves nothing to reuse */
        engine_session_forget(s);
        clover_generate_result_free(out);
        return rc;
    }
    out->stats.total_s = timer_now() - rq->t_start;
    engine_stats_finish(&out->stats, out->n_generated);
    return CLOVER_OK;
}
