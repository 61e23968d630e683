/*
 * generate_lossless.c: lossless block diffusion (issue 18) as steps of the
 * request's state machine: self-speculative decoding with the Clover trunk
 * alone. The answer is autoregressive decoding's (generate_ar.c) token for
 * token, with the same sampling options and seed.
 *
 * The first answer token is autoregressive decoding's: the prompt's last
 * chunk picks it causally (request_prompt.c), with draw 0 of the request's
 * stream. Each block then holds the known token t at row 0 and B-1 drafted
 * rows, resolved by previews exactly as block diffusion resolves them
 * (generate_diffusion.c: the threshold, the penalties, its own draws from
 * draft_rng, so the request's stream stays the verifier's). The resolved
 * block is committed with every row's causal pick (contract v2's verifying
 * commit): pick i is what autoregressive decoding puts at row i+1, drawn
 * with the u autoregressive decoding would use for that token (the draws
 * are taken from a copy of the stream; the stream then advances by the
 * picks that were used, so it stays where --ar's is). Drafts are accepted
 * while they equal the pick; the pick at the first difference (or after
 * the last row) is the next block's known token.
 *
 * Undoing the rejected tail: the GDN states cannot be rewound, so the
 * state at the block start is checkpointed before the verify and, when a
 * tail was rejected (or the answer ended inside the block), restored and
 * the kept rows committed again. A fully accepted block costs one commit.
 * The cheaper alternative (keep the per-row GDN states of the verify and
 * pick the one at the accepted end) would need a per-row state output in
 * the contract; the recommit costs a commit of the kept rows, which is
 * small next to the previews. What stays committed is prompt + answer[:-1]
 * like --ar. Float note: the verify commits a block in one chunk where
 * --ar commits row by row, so logits can differ in the last bits; a pick
 * flips only where its top-2 margin (or, sampled, the draw's distance to a
 * bucket edge) is that small (tests/unit/test_lossless.c).
 */
#include <string.h>

#include "base/error.h"
#include "base/timer.h"
#include "engine/request.h"
#include "model/model.h"
#include "engine/stats.h"
#include "engine/structured.h"

/* The first token from the kept logits when the prompt was wholly reused
 * (as generate_ar.c's ar_begin), and the checkpoint made once. */
static int lossless_begin(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    int rc;
    if (!s->ckpt && (rc = s->be->checkpoint_create(s->bs, &s->ckpt, err))) return error_prefix(err, "lossless");
    if (rq->gm && rq->p->max_tokens > 0) { /* under a grammar the host picks (structured.h) */
        if ((rc = engine_grammar_ar_pick(rq, (float)sampler_draw(&rq->sp, &rq->rng), err))) return rc;
    } else if (!rq->prompt_committed && rq->p->max_tokens > 0) {
        double t = timer_now();
        memcpy(s->row, s->last_logits, s->n_vocab * sizeof *s->row);
        request_forbid(rq, s->row);
        double u = sampler_draw(&rq->sp, &rq->rng);
        rc = sampler_pick(&rq->sp, s->row, s->n_vocab, u, s->samp_ready ? &s->samp : NULL, &rq->tok, &rq->tok_conf,
                          err);
        if (!rc) request_lp_host(rq, s->row);
        rq->res->stats.pick_s += timer_now() - t;
        if (rc) return error_prefix(err, "token 0");
    }
    rq->lossless_begun = true;
    return CLOVER_OK;
}

/* A new block: the known token is emitted (as --ar emits it before its
 * commit) and sits at row 0; the other rows are masked drafts. */
static int block_start(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_result *res = rq->res;
    const size_t max = rq->p->max_tokens;
    int rc;
    if (!rq->lossless_begun && (rc = lossless_begin(rq, err))) return rc;
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
    /* a full context: "length" (max_context 0: no limit known) */
    if (ended || res->n_generated >= max || (s->max_context && s->n_ids + rq->block > s->max_context)) {
        penalty_state_commit(&s->pen, &rq->tok, 1);
        rq->phase = RQ_DONE;
        return CLOVER_OK;
    }
    const int32_t mask = (int32_t)s->model->record.mask_token_id;
    for (size_t r = 0; r < rq->block; r++) {
        s->block[r] = r ? mask : rq->tok;
        s->block_conf[r] = r ? 0.0f : rq->tok_conf;
        s->pending[r] = r ? 1 : 0;
        s->pick_id[r] = s->block[r];
        s->pick_conf[r] = s->block_conf[r];
    }
    rq->passes = 0;
    rq->n_pending = rq->block - 1;
    bool cancel;
    request_report_pass(rq, 0, 0, &cancel);
    if (cancel) {
        request_cancel(rq);
        return CLOVER_OK;
    }
    if (rq->n_pending == 0) { /* a block of one row: nothing to draft */
        rc = request_push_block(rq, 0, err);
        if (rc) return rc;
        res->stats.blocks++;
        rq->phase = RQ_VERIFY;
    } else {
        rq->phase = RQ_PASS;
    }
    return CLOVER_OK;
}

/* The verifying commit: the checkpoint, then the block with every row's
 * causal pick, drawn from a copy of the request's stream. */
static int verify_plan(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_stats *st = &rq->res->stats;
    const size_t B = rq->block;
    int rc = s->be->checkpoint_save(s->bs, s->ckpt, err);
    if (rc) {
        engine_session_forget(s);
        return error_prefix(err, "lossless checkpoint");
    }
    rng_state r = rq->rng;
    for (size_t i = 0; i < B; i++) s->pick_u[i] = (float)sampler_draw(&rq->sp, &r);
    s->pick.pen = NULL; /* the causal path has no penalties (ignored by commit anyway) */
    const bool greedy = sampler_is_greedy(&rq->sp) != 0;
    if (rq->gm) { /* under a grammar: every row's logits, picked on the host (structured.h) */
        rc = engine_session_plan_commit(s, s->block, B, true, NULL, NULL, NULL, NULL, &st->commit_ops, err);
        if (rc) return error_prefix(err, "lossless verify");
        s->cseq.all_logits = s->logits;
        rq->op = RQ_OP_COMMIT;
        rq->op_timer = &st->commit_s;
        return CLOVER_OK;
    }
    rc = engine_session_plan_commit(s, s->block, B, true, &s->pick, greedy ? NULL : s->pick_u, s->pick_id, s->pick_conf,
                                    &st->commit_ops, err);
    if (rc) return error_prefix(err, "lossless verify");
    request_lp_commit_out(rq, &s->pick_lp);
    s->cseq.n_pick = B; /* every row: pick i is the token after row i */
    rq->op = RQ_OP_COMMIT;
    rq->op_timer = &st->commit_s;
    return CLOVER_OK;
}

/* Accepts the drafted prefix the picks agree with, emitting it; sets the
 * next known token and how many block rows stay committed. */
static int verify_accept(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_result *res = rq->res;
    const size_t B = rq->block, max = rq->p->max_tokens;
    size_t used = 0, emitted = 1, keep = B;
    bool ended = false;
    for (size_t i = 0; i < B; i++) {
        used++;
        if (!(s->pick_conf[i] >= 0.0f))
            return error_set(err, CLOVER_E_INTERNAL, "lossless verify, row %zu: the logits are not finite", i);
        if (i + 1 < B && s->pick_id[i] == s->block[i + 1]) {
            int rc = request_emit(rq, s->block[i + 1], s->pick_conf[i], &s->pick_lp, i, &ended, err);
            if (rc) return rc;
            emitted++;
            if (ended || res->n_generated >= max) { /* --ar leaves answer[:-1] committed */
                ended = true;
                keep = i + 1;
                break;
            }
            continue;
        }
        rq->tok = s->pick_id[i];
        rq->tok_conf = s->pick_conf[i];
        if (rq->want_lp) {
            const lp_rows tl = request_tok_lp(rq);
            lp_rows_copy(&tl, 0, &s->pick_lp, i, rq->n_top);
        }
        keep = i + 1;
        break;
    }
    for (size_t i = 0; i < used; i++) (void)sampler_draw(&rq->sp, &rq->rng); /* the draws --ar took */
    penalty_state_commit(&s->pen, s->block, emitted);
    res->accepted_per_block[res->n_blocks - 1] = (uint32_t)emitted;
    res->commits_per_block[res->n_blocks - 1] = keep < B ? 2 : 1;
    res->stats.accepted_drafts += emitted - 1;
    rq->keep = keep;
    rq->lossless_ended = ended;
    rq->phase = keep < B ? RQ_RECOMMIT : ended ? RQ_DONE : RQ_BLOCK;
    return CLOVER_OK;
}

/* Back to the block start, the kept rows committed again. */
static int recommit_plan(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_stats *st = &rq->res->stats;
    int rc = s->be->checkpoint_restore(s->bs, s->ckpt, err);
    if (rc) {
        engine_session_forget(s);
        return error_prefix(err, "lossless restore");
    }
    s->n_ids -= rq->block;
    st->recommits++;
    rc = engine_session_plan_commit(s, s->block, rq->keep, true, NULL, NULL, NULL, NULL, &st->commit_ops, err);
    if (rc) return error_prefix(err, "lossless recommit");
    rq->op = RQ_OP_COMMIT;
    rq->op_timer = &st->commit_s;
    return CLOVER_OK;
}

int engine_lossless_plan(engine_request *rq, clover_error *err) {
    for (;;) {
        switch (rq->phase) {
        case RQ_BLOCK: {
            int rc = block_start(rq, err);
            if (rc) return rc;
            break;
        }
        case RQ_PASS: return engine_diffusion_plan(rq, err);
        case RQ_VERIFY: return verify_plan(rq, err);
        case RQ_RECOMMIT: return recommit_plan(rq, err);
        default: return CLOVER_OK; /* RQ_DONE */
        }
        if (rq->phase == RQ_DONE) return CLOVER_OK;
    }
}

int engine_lossless_absorb(engine_request *rq, const backend_pass_stats *ps, clover_error *err) {
    clover_session *s = rq->s;
    if (rq->op == RQ_OP_PREVIEW) return engine_diffusion_absorb(rq, ps, err); /* a draft pass; RQ_VERIFY when resolved */
    int rc = engine_session_commit_done(s, ps, err);
    if (rc) return error_prefix(err, rq->phase == RQ_VERIFY ? "lossless verify" : "lossless recommit");
    if (rq->phase == RQ_VERIFY && rq->gm && (rc = engine_grammar_verify(rq, err))) return rc;
    if (rq->phase == RQ_VERIFY) return verify_accept(rq, err);
    rq->phase = rq->lossless_ended ? RQ_DONE : RQ_BLOCK; /* after RQ_RECOMMIT */
    return CLOVER_OK;
}
