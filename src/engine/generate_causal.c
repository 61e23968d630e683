/*
 * generate_causal.c: block diffusion's second decoding rule, "causal
 * fallback" (clover_generate_params.rule, the record's clover.decode_rule),
 * as steps of the request's state machine beside generate_diffusion.c,
 * which runs everything else of the block exactly as SPEC.md 3: the
 * previews (picks, confidences, forbidden ids, penalties, one draw per
 * pending row), the full-block commit from the block start, the emission.
 * The reference is tools/train/diag.py trace(fallback="causal",
 * max_distance=1, window_fallback=True).
 *
 * The fixes of a pass (window K = 1): rows are read left to right with
 * last = -1; a fixed row sets last; a pending row above the threshold with
 * r - last <= 1 is fixed and sets last. The fixed rows are therefore always
 * a prefix rows[0..f) of the block, and a pass fixes the run of confident
 * rows that starts at the first pending row f. When that run is empty the
 * fallback fixes row f with the trunk's causal pick given the prefix and
 * rows[0..f): one autoregressive step (stats.causal_steps), picked as
 * autoregressive decoding picks (the mask id and the suppressed ids
 * forbidden, no penalties, its draw the next of the request's stream after
 * the pass's draws). The preview's pick of row f is discarded.
 *
 * State. Previews read the session at the block start P (they are
 * read-only); the fallback at f needs the trunk after rows[0..f).
 * f = 0: the logits at the end of the prefix, which the prompt's last
 * chunk and every block commit keep under this rule (want_logits): a host
 * pick, no backend call. f > 0: the block start is checkpointed (once per
 * block, at its first such fallback; the session is still at P), rows[0..f)
 * are committed with the causal pick of the last one, and the checkpoint is
 * restored: P again for the next preview and the block commit.
 * What restore does (backend.h; cpu/backend_cpu_checkpoint.c,
 * cuda/backend_cuda.c): the GDN rings and states are copied back, the
 * committed length set to the checkpoint's, the KV rows at and past it are
 * forgotten (the next commit or preview overwrites them), and the session's
 * epoch bumped with the checkpoint's, so it can be restored again after
 * later commits. The host's ids shrink by f and the kept logits (the
 * fallback commit asks for none, so the host copy is untouched) are valid
 * again as they were at the block start.
 * Why not a second checkpoint C1 after rows[0..c) so a later fallback
 * commits only rows[c..f): restoring C1 after C0 has been restored is what
 * the contract refuses (a checkpoint is stale once an older one was
 * restored: the epoch check), and for good reason: the previews in between
 * may write the block's keys and values at rows P.. (read-only means the
 * committed length and states, not the rows past them: the CPU backend keeps
 * its preview rows there, cpu/backend_cpu_session.c), so C1's KV rows could
 * be gone. Each
 * fallback therefore commits rows[0..f) from P, at most B-1 rows, about
 * one preview's work.
 */
#include <string.h>

#include "base/error.h"
#include "base/timer.h"
#include "engine/request.h"
#include "model/model.h"

/* Row f takes the causal pick (rq->tok, tok_conf, the token's log-probability slot). */
static void fallback_fix(engine_request *rq, size_t f) {
    clover_session *s = rq->s;
    s->block[f] = rq->tok;
    s->block_conf[f] = rq->tok_conf;
    s->pick_id[f] = rq->tok; /* the live view shows what was fixed */
    s->pick_conf[f] = rq->tok_conf;
    if (rq->want_lp) {
        const lp_rows tl = request_tok_lp(rq);
        lp_rows_copy(&s->block_lp, f, &tl, 0, rq->n_top);
    }
    s->pending[f] = 0;
    rq->n_pending--;
    rq->res->stats.causal_steps++;
}

/* f = 0: the pick from the logits at the end of the prefix, on the host (as generate_ar.c's ar_begin). */
static int fallback_host(engine_request *rq, float u, clover_error *err) {
    clover_session *s = rq->s;
    if (!s->last_valid)
        return error_set(err, CLOVER_E_INTERNAL, "rule causal: the prefix's last logits were not kept");
    double t = timer_now();
    memcpy(s->row, s->last_logits, s->n_vocab * sizeof *s->row);
    request_forbid(rq, s->row);
    int rc = sampler_pick(&rq->sp, s->row, s->n_vocab, u, s->samp_ready ? &s->samp : NULL, &rq->tok, &rq->tok_conf,
                          err);
    if (!rc) request_lp_host(rq, s->row);
    rq->res->stats.pick_s += timer_now() - t;
    if (rc) return error_prefix(err, "rule causal, row 0");
    if (!(rq->tok_conf >= 0.0f))
        return error_set(err, CLOVER_E_INTERNAL, "rule causal, row 0: the logits are not finite");
    fallback_fix(rq, 0);
    return CLOVER_OK;
}

int engine_causal_fix(engine_request *rq, size_t *n_fixed, clover_error *err) {
    clover_session *s = rq->s;
    const size_t B = rq->block;
    size_t fixed = 0, first = B;
    long last = -1;
    for (size_t r = 0; r < B; r++) {
        if (!s->pending[r]) {
            last = (long)r;
            continue;
        }
        if (!(s->pick_conf[r] >= 0.0f))
            return error_set(err, CLOVER_E_INTERNAL, "block diffusion, row %zu: the preview's logits are not finite",
                             r);
        if (first == B) first = r;
        if (s->pick_conf[r] > rq->threshold && (long)r - last <= 1) {
            s->block[r] = s->pick_id[r];
            s->block_conf[r] = s->pick_conf[r];
            if (rq->want_lp) lp_rows_copy(&s->block_lp, r, &s->pick_lp, r, rq->n_top);
            s->pending[r] = 0;
            last = (long)r;
            fixed++;
        }
    }
    rq->n_pending -= fixed;
    *n_fixed = fixed;
    if (fixed || first == B) return CLOVER_OK;
    /* the fallback: the first pending row's causal pick, with the next draw of the request's stream */
    const float u = (float)sampler_draw(&rq->sp, &rq->rng);
    if (first == 0) {
        *n_fixed = 1;
        return fallback_host(rq, u, err);
    }
    rq->fb_row = first;
    rq->tok_u = u;
    rq->phase = RQ_CAUSAL; /* the commit of rows[0..first) (engine_causal_plan) */
    return CLOVER_OK;
}

int engine_causal_plan(engine_request *rq, clover_error *err) {
    clover_session *s = rq->s;
    clover_generate_stats *st = &rq->res->stats;
    int rc;
    if (!s->ckpt && (rc = s->be->checkpoint_create(s->bs, &s->ckpt, err))) return error_prefix(err, "rule causal");
    if (!rq->c0_saved) { /* the block start, once per block (the session is still there) */
        if ((rc = s->be->checkpoint_save(s->bs, s->ckpt, err))) {
            engine_session_forget(s);
            return error_prefix(err, "rule causal: checkpoint");
        }
        rq->c0_saved = true;
    }
    s->pick.pen = NULL; /* the causal path has no penalties (pen_plan sets them again for the next preview) */
    rc = engine_session_plan_commit(s, s->block, rq->fb_row, false, &s->pick,
                                    sampler_is_greedy(&rq->sp) ? NULL : &rq->tok_u, &rq->tok, &rq->tok_conf,
                                    &st->commit_ops, err);
    if (rc) return error_prefix(err, "rule causal, row %zu", rq->fb_row);
    const lp_rows tl = request_tok_lp(rq);
    request_lp_commit_out(rq, &tl);
    rq->op = RQ_OP_COMMIT;
    rq->op_timer = &st->commit_s;
    return CLOVER_OK;
}

int engine_causal_absorb(engine_request *rq, const backend_pass_stats *ps, clover_error *err) {
    clover_session *s = rq->s;
    const size_t f = rq->fb_row;
    int rc = engine_session_commit_done(s, ps, err);
    if (rc) return error_prefix(err, "rule causal, row %zu", f);
    rq->res->stats.pick_s += ps->pick_s;
    if ((rc = s->be->checkpoint_restore(s->bs, s->ckpt, err))) {
        engine_session_forget(s);
        return error_prefix(err, "rule causal: restore");
    }
    s->n_ids -= f;
    s->last_valid = rq->c0_last_valid;
    if (!(rq->tok_conf >= 0.0f))
        return error_set(err, CLOVER_E_INTERNAL, "rule causal, row %zu: the logits are not finite", f);
    fallback_fix(rq, f);
    rq->phase = RQ_PASS;
    bool cancel;
    request_report_pass(rq, rq->passes, 1, &cancel);
    if (cancel) {
        request_cancel(rq);
        return CLOVER_OK;
    }
    return rq->n_pending == 0 ? engine_diffusion_block_end(rq, err) : CLOVER_OK;
}
