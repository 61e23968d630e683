/*
 * generate_diffusion.c: LowConfidence block diffusion (SPEC.md 3, seed 000's
 * clover_generate_with, tools/reference generate_block_diffusion) as steps
 * of the request's state machine.
 *
 * A block of B mask rows sits at the session's end. Each pass previews the
 * block (read-only) and the backend picks every pending row: forbidden ids,
 * the penalties of 3.1 (the counts of the committed response go with the
 * pass), the sampling of 3.2 with one draw per pending row, taken here in
 * ascending row order whether or not the row is fixed in this pass. Rows
 * above the threshold are fixed, or else the single most confident one
 * (ties: the lowest row). Each pass fixes at least one row, so B passes
 * resolve a block; the limit is still checked, as an error, never a hang.
 * The block is emitted in position order once it is resolved (a stop id
 * may be fixed before the rows ahead of it), and committed causally unless
 * the answer ended in it.
 *
 * When the backend offers resolve (backend.h), a block's passes run in one
 * backend operation instead (the same rule, the same draws, the cancel flag
 * checked before each pass), and the record of every pass is replayed to
 * the live view and the statistics afterwards, so results, views and
 * counts are the loop's. The loop stays for what resolve does not return:
 * log-probabilities, the parity dump's raw logits, lossless drafts (their
 * row 0 is known), and the causal-fallback rule (generate_causal.c), whose
 * passes depend on commits between them.
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/timer.h"
#include "engine/request.h"
#include "engine/stats.h"
#include "engine/structured.h"
#include "model/model.h"

/* A new block: every row masked, shown to on_pass at pass 0. */
static void block_begin(engine_request *rq) {
    clover_session *s = rq->s;
    const int32_t mask = (int32_t)s->model->record.mask_token_id;
    for (size_t r = 0; r < rq->block; r++) {
        s->block[r] = mask;
        s->block_conf[r] = 0.0f;
        s->pending[r] = 1;
        s->pick_id[r] = mask; /* what a pass view shows before the first pass */
        s->pick_conf[r] = 0.0f;
    }
    rq->passes = 0;
    rq->n_pending = rq->block;
    rq->c0_saved = false; /* the causal rule's checkpoint is saved at this block's first fallback commit */
    rq->c0_last_valid = s->last_valid;
    bool cancel;
    request_report_pass(rq, 0, 0, &cancel);
    rq->phase = cancel ? RQ_DONE : RQ_PASS;
    if (cancel) request_cancel(rq);
}

/* The block's penalties for the backend's pick: the counts of the committed response. */
static void pen_plan(engine_request *rq) {
    clover_session *s = rq->s;
    for (size_t i = 0; i < s->pen.n_seen; i++) s->pen_counts[i] = s->pen.counts[s->pen.seen[i]];
    s->pick_pen = (backend_penalties){.p = rq->pen.p,
                                      .think_end_id = rq->pen.think_end_id,
                                      .count_ids = s->pen.seen,
                                      .counts = s->pen_counts,
                                      .n_counts = s->pen.n_seen,
                                      .response_len = s->pen.length,
                                      .stop_ids = s->stop_ids,
                                      .n_stop_ids = s->n_stop_ids};
    s->pick.pen = &s->pick_pen;
}

static backend_preview_opts preview_opts(const clover_record *rec) {
    return (backend_preview_opts){.record_block_size = rec->block_size,
                                  .coreset = rec->coreset_enabled != 0,
                                  .coreset_top_p = rec->coreset_top_p};
}

/* Whether this block resolves inside the backend (see the top). */
static bool resolve_usable(const engine_request *rq) {
    return rq->s->be->resolve && rq->passes == 0 && !rq->lossless && !rq->want_lp && !rq->gm && !rq->causal_rule &&
           rq->block <= 255 &&
           !(rq->p->dump_first_preview && !rq->first_preview_done);
}

/* The whole block in one backend operation. */
static void resolve_plan(engine_request *rq) {
    clover_session *s = rq->s;
    pen_plan(rq);
    backend_resolve_seq *q = &s->rseq;
    memset(q, 0, sizeof *q);
    memcpy(s->rblock, s->block, rq->block * sizeof *s->rblock); /* every row masked */
    *q = (backend_resolve_seq){.s = s->bs, .block = s->rblock, .conf = s->block_conf, .b = rq->block,
                               .opts = preview_opts(&s->model->record), .pick = &s->pick,
                               .threshold = rq->threshold, .rng = &rq->rng.s, .rec_guess = s->rec_guess,
                               .rec_conf = s->rec_conf, .fixed_at = s->fixed_at, .cancel = rq->p->cancel};
    rq->op = RQ_OP_RESOLVE;
    rq->op_timer = &rq->res->stats.preview_s;
}

/* The preview of the next pass, with the draws and the penalty counts. */
static void pass_plan(engine_request *rq) {
    clover_session *s = rq->s;
    const clover_record *rec = &s->model->record;
    const size_t B = rq->block;
    const bool greedy = sampler_is_greedy(&rq->sp) != 0;
    rng_state *rng = rq->lossless ? &rq->draft_rng : &rq->rng; /* lossless: rng is the verifier's */
    for (size_t r = 0; r < B; r++) /* the draws: one per pending row, in row order */
        s->pick_u[r] = s->pending[r] ? (float)sampler_draw(&rq->sp, rng) : 0.0f;
    pen_plan(rq);
    backend_preview_seq *q = &s->pseq;
    memset(q, 0, sizeof *q);
    q->s = s->bs;
    q->block = s->block;
    q->b = B;
    q->opts = preview_opts(rec);
    q->pending = s->pending;
    q->pick = &s->pick;
    q->u = greedy ? NULL : s->pick_u;
    q->pick_out = (backend_pick_out){.id = s->pick_id, .conf = s->pick_conf};
    if (rq->want_lp) lp_rows_out(&s->pick_lp, 0, rq->n_top, &q->pick_out);
    q->logits = !rq->first_preview_done && rq->p->dump_first_preview ? s->logits : NULL;
    if (rq->gm) { /* under a grammar: raw logits, picked on the host (structured.h) */
        q->pending = NULL;
        q->logits = s->logits;
    }
    rq->op = RQ_OP_PREVIEW;
    rq->op_timer = &rq->res->stats.preview_s;
}

int engine_diffusion_plan(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_result *res = rq->res;
    for (;;) {
        switch (rq->phase) {
        case RQ_BLOCK: /* a block that no longer fits the context ends the answer as "length" */
            if (res->n_generated >= rq->p->max_tokens || (s->max_context && s->n_ids + rq->block > s->max_context)) {
                rq->phase = RQ_DONE;
                return CLOVER_OK;
            }
            block_begin(rq);
            break;
        case RQ_PASS:
            if (rq->passes == rq->block)
                return error_set(err, CLOVER_E_INTERNAL,
                                 "block diffusion: %zu passes left %zu of %zu rows unresolved (at most one pass per row)",
                                 rq->passes, rq->n_pending, rq->block);
            if (request_cancelled(rq)) {
                request_cancel(rq);
                return CLOVER_OK;
            }
            if (resolve_usable(rq))
                resolve_plan(rq);
            else
                pass_plan(rq);
            return CLOVER_OK;
        case RQ_CAUSAL: return engine_causal_plan(rq, err);
        case RQ_COMMIT_BLOCK: { /* the causal rule keeps the last row's logits: the next block's row-0 fallback */
            int rc = engine_session_plan_commit(s, s->block, rq->block, rq->causal_rule, NULL, NULL, NULL, NULL,
                                                &res->stats.commit_ops, err);
            if (rc) return error_prefix(err, "block commit");
            rq->op = RQ_OP_COMMIT;
            rq->op_timer = &res->stats.commit_s;
            return CLOVER_OK;
        }
        default: return CLOVER_OK; /* RQ_DONE */
        }
        if (rq->phase == RQ_DONE) return CLOVER_OK;
    }
}

/* The LowConfidence rule over this pass's picks: every pending row above
 * the threshold is fixed, else the most confident one (ties: the lowest row). */
static int pass_fix(engine_request *rq, size_t *n_fixed, clover_error *err) {
    clover_session *s = rq->s;
    const size_t B = rq->block;
    size_t best = B, fixed = 0;
    for (size_t r = 0; r < B; r++) {
        if (!s->pending[r]) continue;
        if (!(s->pick_conf[r] >= 0.0f))
            return error_set(err, CLOVER_E_INTERNAL, "block diffusion, row %zu: the preview's logits are not finite",
                             r);
        if (best == B || s->pick_conf[r] > s->pick_conf[best]) best = r;
    }
    for (size_t r = 0; r < B; r++)
        if (s->pending[r] && s->pick_conf[r] > rq->threshold) {
            s->block[r] = s->pick_id[r];
            s->block_conf[r] = s->pick_conf[r];
            if (rq->want_lp) lp_rows_copy(&s->block_lp, r, &s->pick_lp, r, rq->n_top);
            s->pending[r] = 0;
            fixed++;
        }
    if (fixed == 0 && best < B) {
        s->block[best] = s->pick_id[best];
        s->block_conf[best] = s->pick_conf[best];
        if (rq->want_lp) lp_rows_copy(&s->block_lp, best, &s->pick_lp, best, rq->n_top);
        s->pending[best] = 0;
        fixed = 1;
    }
    rq->n_pending -= fixed;
    *n_fixed = fixed;
    return CLOVER_OK;
}

/* A resolved block: counted, emitted in position order, then committed
 * unless the answer ended in it. */
int engine_diffusion_block_end(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_result *res = rq->res;
    const size_t max = rq->p->max_tokens;
    res->stats.passes += rq->passes;
    res->stats.blocks++;
    int rc = request_push_block(rq, (uint32_t)rq->passes, err);
    if (rc) return rc;
    if (rq->lossless) { /* a draft: the verifying commit decides what is emitted (generate_lossless.c) */
        rq->phase = RQ_VERIFY;
        return CLOVER_OK;
    }
    size_t remaining = max - res->n_generated < rq->block ? max - res->n_generated : rq->block, take = remaining;
    bool ended = false;
    for (size_t i = 0; i < remaining && !ended; i++) {
        if ((rc = request_emit(rq, s->block[i], s->block_conf[i], &s->block_lp, i, &ended, err))) return rc;
        if (ended) take = i + 1;
    }
    penalty_state_commit(&s->pen, s->block, take);
    rq->phase = ended || res->n_generated >= max ? RQ_DONE : RQ_COMMIT_BLOCK;
    return CLOVER_OK;
}

/* A block the backend resolved: its record replayed pass by pass to the
 * live view (as the loop would have shown it), then the block's end. */
static int resolve_absorb(engine_request *rq, const backend_pass_stats *ps, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_stats *st = &rq->res->stats;
    const backend_resolve_seq *q = &s->rseq;
    const size_t B = rq->block;
    const int32_t mask = (int32_t)s->model->record.mask_token_id;
    if (q->rc) {
        *err = q->err;
        return error_prefix(err, "block diffusion pass");
    }
    engine_stats_add_preview(st, ps);
    st->pick_s += ps->pick_s;
    st->preview_s -= ps->pick_s; /* the call's time goes to preview_s afterwards */
    rq->first_preview_done = true;
    for (size_t p = 1; p <= q->passes; p++) {
        size_t now = 0, fixed = 0;
        for (size_t r = 0; r < B; r++) {
            const bool f = s->fixed_at[r] && s->fixed_at[r] <= p;
            s->pending[r] = !f;
            s->block[r] = f ? s->rblock[r] : mask;
            s->pick_id[r] = s->rec_guess[(p - 1) * B + r];
            s->pick_conf[r] = s->rec_conf[(p - 1) * B + r];
            now += s->fixed_at[r] == p;
            fixed += f;
        }
        rq->passes = p;
        rq->n_pending = B - fixed;
        bool cancel;
        request_report_pass(rq, p, now, &cancel);
        if (cancel) {
            request_cancel(rq);
            return CLOVER_OK;
        }
    }
    if (q->cancelled || rq->n_pending) { /* the flag stopped it before a pass */
        request_cancel(rq);
        return CLOVER_OK;
    }
    return engine_diffusion_block_end(rq, err);
}

int engine_diffusion_absorb(engine_request *rq, const backend_pass_stats *ps, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_stats *st = &rq->res->stats;
    int rc;
    if (rq->op == RQ_OP_RESOLVE) return resolve_absorb(rq, ps, err);
    if (rq->phase == RQ_CAUSAL) return engine_causal_absorb(rq, ps, err);
    if (rq->op == RQ_OP_COMMIT) {
        if ((rc = engine_session_commit_done(s, ps, err))) return error_prefix(err, "block commit");
        rq->phase = RQ_BLOCK;
        return CLOVER_OK;
    }
    if (s->pseq.rc) {
        *err = s->pseq.err;
        return error_prefix(err, "block diffusion pass");
    }
    engine_stats_add_preview(st, ps);
    st->pick_s += ps->pick_s;
    st->preview_s -= ps->pick_s; /* the call's time goes to preview_s afterwards */
    if (!rq->first_preview_done && rq->p->dump_first_preview) {
        rc = engine_dump_first_preview(rq->p->dump_first_preview, rq->prompt, rq->n_prompt, s->logits, rq->block,
                                       s->n_vocab, err);
        if (rc) return rc;
    }
    rq->first_preview_done = true;
    rq->passes++;
    double t = timer_now();
    size_t n_fixed = 0;
    rc = rq->gm            ? engine_grammar_pass(rq, &n_fixed, err)
         : rq->causal_rule ? engine_causal_fix(rq, &n_fixed, err)
                           : pass_fix(rq, &n_fixed, err);
    st->pick_s += timer_now() - t;
    if (rc) return rc;
    if (rq->phase == RQ_CAUSAL) return CLOVER_OK; /* the fallback's commit first; the pass is shown after it */
    bool cancel;
    request_report_pass(rq, rq->passes, n_fixed, &cancel);
    if (cancel) {
        request_cancel(rq);
        return CLOVER_OK;
    }
    return rq->n_pending == 0 ? engine_diffusion_block_end(rq, err) : CLOVER_OK;
}
