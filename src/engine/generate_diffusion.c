/*
 * generate_diffusion.c: LowConfidence block diffusion (SPEC.md 3, seed 000's
 * clover_generate_with, tools/reference generate_block_diffusion).
 *
 * A block of B mask rows sits at the session's end. Each pass previews the
 * block (read-only), then every pending row is forbidden its mask /
 * suppressed ids, penalised (3.1) and picked (3.2: a sampled row takes one
 * draw whether or not it is fixed in this pass, the draws in ascending row
 * order before the rows are picked in parallel on the session's pool); rows
 * above the threshold are fixed, or else the single most confident one
 * (ties: the lowest row). Each pass fixes at least one row, so B passes
 * resolve a block; the limit is still checked, as an error, never a hang.
 * The block is emitted in position order once it is resolved (a stop id
 * may be fixed before the rows ahead of it), and committed causally unless
 * the answer ended in it.
 */
#include <math.h>

#include "base/error.h"
#include "base/timer.h"
#include "engine/request.h"
#include "engine/stats.h"
#include "model/model.h"

/* One pick task: row s->pick_rows[task] forbidden, penalised (in place) and
 * picked with its pre-drawn u. Rows are independent: only the row and this
 * task's slots are written. */
typedef struct pick_job {
    engine_request *rq;
    bool think_open;
} pick_job;

static void pick_task(void *ctx, size_t task, size_t thread) {
    const pick_job *job = ctx;
    engine_request *rq = job->rq;
    clover_session *s = rq->s;
    const size_t r = s->pick_rows[task], V = s->n_vocab;
    float *row = s->logits + r * V; /* [V] */
    request_forbid(rq, row);
    penalty_apply(&rq->pen, &s->pen, row, s->pen.length + r + 1, s->stop_ids, s->n_stop_ids, job->think_open);
    s->pick_rc[task] = sampler_pick(&rq->sp, row, V, s->pick_u[task], s->samp ? &s->samp[thread] : NULL,
                                    &s->pick_id[r], &s->pick_conf[r], &s->pick_err[task]);
}

/* One pass's picks for the pending rows, then the LowConfidence rule:
 * every row above the threshold is fixed, else the most confident one
 * (ties: the lowest row). */
static int pass_pick(engine_request *rq, bool think_open, size_t *n_pending, size_t *n_fixed, clover_error *err) {
    clover_session *s = rq->s;
    const size_t B = rq->block;
    size_t n = 0;
    for (size_t r = 0; r < B; r++) /* the draws: one per pending row, in row order */
        if (s->pending[r]) {
            s->pick_rows[n] = r;
            s->pick_u[n] = sampler_draw(&rq->sp, &rq->rng);
            n++;
        }
    pick_job job = {rq, think_open};
    threadpool_run(s->pool, n, pick_task, &job);
    size_t best = B;
    for (size_t t = 0; t < n; t++) {
        size_t r = s->pick_rows[t];
        if (s->pick_rc[t]) {
            *err = s->pick_err[t];
            return error_prefix(err, "block diffusion, row %zu", r);
        }
        if (!(s->pick_conf[r] >= 0.0f))
            return error_set(err, CLOVER_E_INTERNAL, "block diffusion, row %zu: the preview's logits are not finite",
                             r);
        if (best == B || s->pick_conf[r] > s->pick_conf[best]) best = r;
    }
    size_t fixed = 0;
    for (size_t t = 0; t < n; t++) {
        size_t r = s->pick_rows[t];
        if (s->pick_conf[r] > rq->threshold) {
            s->block[r] = s->pick_id[r];
            s->block_conf[r] = s->pick_conf[r];
            s->pending[r] = 0;
            fixed++;
        }
    }
    if (fixed == 0 && best < B) {
        s->block[best] = s->pick_id[best];
        s->block_conf[best] = s->pick_conf[best];
        s->pending[best] = 0;
        fixed = 1;
    }
    *n_pending -= fixed;
    *n_fixed = fixed;
    return CLOVER_OK;
}

/* Resolves one block in place (s->block, s->block_conf), showing it to the
 * caller's on_pass at the start and after every pass. *cancelled when the
 * cancel flag or on_pass stopped it first. */
static int resolve_block(engine_request *rq, bool *cancelled, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_result *res = rq->res;
    clover_generate_stats *st = &res->stats;
    const clover_record *rec = &s->model->record;
    const size_t B = rq->block;
    const backend_preview_opts opts = {.record_block_size = rec->block_size,
                                       .coreset = rec->coreset_enabled != 0,
                                       .coreset_top_p = rec->coreset_top_p};
    for (size_t r = 0; r < B; r++) {
        s->block[r] = (int32_t)rec->mask_token_id;
        s->block_conf[r] = 0.0f;
        s->pending[r] = 1;
        s->pick_id[r] = (int32_t)rec->mask_token_id; /* what a pass view shows before the first pass */
        s->pick_conf[r] = 0.0f;
    }
    size_t n_pending = B, passes = 0, n_fixed = 0;
    request_report_pass(rq, 0, 0, cancelled);
    if (*cancelled) return CLOVER_OK;
    while (n_pending > 0) {
        if (passes == B)
            return error_set(err, CLOVER_E_INTERNAL,
                             "block diffusion: %zu passes left %zu of %zu rows unresolved (at most one pass per row)",
                             passes, n_pending, B);
        if (request_cancelled(rq)) {
            *cancelled = true;
            return CLOVER_OK;
        }
        bool think_open = penalty_think_open(&rq->pen, &s->pen, s->block, B);
        backend_pass_stats ps = {0};
        double t = timer_now();
        int rc = s->be->preview(s->bs, s->block, B, &opts, s->logits, &ps, err);
        st->preview_s += timer_now() - t;
        if (rc) return error_prefix(err, "block diffusion pass");
        engine_stats_add_preview(st, &ps);
        if (st->passes + passes == 0 && rq->p->dump_first_preview) {
            rc = engine_dump_first_preview(rq->p->dump_first_preview, rq->prompt, rq->n_prompt, s->logits, B,
                                           s->n_vocab, err);
            if (rc) return rc;
        }
        passes++;
        t = timer_now();
        rc = pass_pick(rq, think_open, &n_pending, &n_fixed, err);
        st->pick_s += timer_now() - t;
        if (rc) return rc;
        request_report_pass(rq, passes, n_fixed, cancelled);
        if (*cancelled) return CLOVER_OK;
    }
    st->passes += passes;
    st->blocks++;
    return request_push_block(rq, (uint32_t)passes, err);
}

int engine_generate_diffusion(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_result *res = rq->res;
    clover_generate_stats *st = &res->stats;
    const size_t B = rq->block, max = rq->p->max_tokens;
    bool cancelled;
    int rc = request_commit_prompt(rq, false, &cancelled, err);
    if (rc || cancelled) return rc;
    while (res->n_generated < max) {
        size_t remaining = max - res->n_generated < B ? max - res->n_generated : B;
        if ((rc = resolve_block(rq, &cancelled, err))) return rc;
        if (cancelled) {
            res->finish = CLOVER_FINISH_CANCELLED;
            return CLOVER_OK;
        }
        size_t take = remaining;
        bool ended = false;
        for (size_t i = 0; i < remaining && !ended; i++) {
            if ((rc = request_emit(rq, s->block[i], s->block_conf[i], &ended, err))) return rc;
            if (ended) take = i + 1;
        }
        penalty_state_commit(&s->pen, s->block, take);
        if (ended || res->n_generated >= max) break;
        double t = timer_now();
        rc = engine_session_commit(s, s->block, B, false, &st->commit_ops, err);
        st->commit_s += timer_now() - t;
        if (rc) return error_prefix(err, "block commit");
    }
    return CLOVER_OK;
}
