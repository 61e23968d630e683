/*
 * backend_cpu_preview.c: the batched read-only preview of backend.h, the
 * pick of each block's masked rows on the backend, the block resolve (the
 * LowConfidence loop of SPEC.md 3 run inside the backend) and the preview
 * diagnostics. As with commit, the sequences of a call run one after
 * another, each exactly as alone; every check comes before the pass, and a
 * preview changes no committed state, so a failing sequence changes nothing.
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "base/timer.h"
#include "cpu/backend_cpu_internal.h"
#include "parallel/ep_cpu.h"

static int preview_check(backend *be, backend_session *s, const int32_t *block, size_t b,
                         const backend_preview_opts *opts, const backend_pick *pick, clover_error *err) {
    if (!s || !block) return error_set(err, CLOVER_E_INVALID, "preview: a session and block ids are required");
    if (s->be != be) return error_set(err, CLOVER_E_INVALID, "preview: the session belongs to another backend");
    if (!be->can_preview)
        return error_set(err, CLOVER_E_UNSUPPORTED,
                         "preview: the model's GDN layers lack the block-diffusion tensors (ssm_conv1d_right, "
                         "bd_logit_scale, bd_history_bias, bd_history_c): an autoregressive model has no preview");
    if (b == 0 || b > be->max_rows)
        return error_set(err, CLOVER_E_INVALID,
                         "preview: a block of %zu rows, expected 1..%zu (the backend's max_rows)", b, be->max_rows);
    if (opts->record_block_size == 0)
        return error_set(err, CLOVER_E_INVALID, "preview: record_block_size is 0 (the history slot needs ln(b/B))");
    if (opts->coreset && !(opts->coreset_top_p >= 0.0f && opts->coreset_top_p <= 1.0f))
        return error_set(err, CLOVER_E_INVALID, "preview: coreset_top_p %g, expected 0..1",
                         (double)opts->coreset_top_p);
    int rc;
    if ((rc = cpu_check_ids("preview", block, b, be->hp->n_vocab, err))) return rc;
    if (pick && (rc = host_pick_check(&be->pick, pick, err))) return error_prefix(err, "preview");
    if ((rc = cpu_check_room(s, "preview", b, err))) return rc;
    if ((rc = cpu_session_reserve(s, s->n_past + b, err))) return error_prefix(err, "preview");
    return CLOVER_OK;
}

/* The pass and the head: the block's raw logits in sc.logits. */
static void preview_pass(backend *be, backend_session *s, const int32_t *block, size_t b,
                         const backend_preview_opts *opts, backend_pass_stats *stats) {
    cpu_pass p = {.mode = CPU_PASS_PREVIEW,
                  .pos = s->n_past,
                  .ln_ratio = gdn_block_ln_ratio(b, opts->record_block_size),
                  .coreset = opts->coreset,
                  .top_p = opts->coreset_top_p,
                  .hidden = s->dbg_hidden,
                  .hidden_rows = b,
                  .row0 = 0,
                  .kept = s->dbg_kept,
                  .stats = stats};
    cpu_pass_run(s, block, b, &p);
    double t0 = timer_now();
    cpu_head_logits(be, 0, b, be->sc.logits);
    if (stats) stats->head_s += timer_now() - t0;
    s->has_preview = true;
    s->preview_b = b;
}

static int preview_one(backend *be, backend_preview_seq *q, backend_pass_stats *stats, clover_error *err) {
    const backend_pick *pick = q->pending ? q->pick : NULL;
    if (q->pending && !q->pick) return error_set(err, CLOVER_E_INVALID, "preview: pending rows but no pick");
    int rc = preview_check(be, q->s, q->block, q->b, &q->opts, pick, err);
    if (rc) return rc;
    if (pick) {
        if (!q->pick_out.id || !q->pick_out.conf)
            return error_set(err, CLOVER_E_INVALID, "preview: picks need id and conf arrays");
        sampler_params sp = {pick->temperature, pick->top_k, pick->top_p};
        if (!sampler_is_greedy(&sp) && !q->u)
            return error_set(err, CLOVER_E_INVALID, "preview: sampled picks need their draws");
        if (pick->n_top && !q->pick_out.top_id)
            return error_set(err, CLOVER_E_INVALID, "preview: %zu top log-probabilities but no array", pick->n_top);
    }
    const size_t V = be->hp->n_vocab, b = q->b;
    preview_pass(be, q->s, q->block, b, &q->opts, stats);
    if ((rc = ep_cpu_status(be->ep, err))) return rc; /* a failed simulated rank */
    if (q->logits) memcpy(q->logits, be->sc.logits, b * V * sizeof(float));
    if (!pick) return CLOVER_OK;
    size_t idx[256], n = 0;
    float u[256];
    for (size_t r = 0; r < b; r++) /* b <= max_rows; blocks beyond 256 rows pick in runs */
        if (q->pending[r]) {
            idx[n] = r;
            u[n] = q->u ? q->u[r] : 0.0f;
            if (++n == 256) {
                if ((rc = host_pick_rows(&be->pick, pick, be->sc.logits, idx, n, q->u ? u : NULL, q->block, b, &q->pick_out,
                                        stats, err)))
                    return error_prefix(err, "preview");
                n = 0;
            }
        }
    if (n && (rc = host_pick_rows(&be->pick, pick, be->sc.logits, idx, n, q->u ? u : NULL, q->block, b, &q->pick_out, stats,
                                 err)))
        return error_prefix(err, "preview");
    return CLOVER_OK;
}

int backend_cpu_preview(backend *be, backend_preview_seq *seqs, size_t n_seqs, backend_pass_stats *stats) {
    int first = CLOVER_OK;
    for (size_t i = 0; i < n_seqs; i++) {
        backend_preview_seq *q = &seqs[i];
        q->err.code = 0;
        q->err.message[0] = 0;
        q->rc = be ? preview_one(be, q, stats, &q->err) : error_set(&q->err, CLOVER_E_INVALID, "preview: no backend");
        if (q->rc && !first) first = q->rc;
    }
    return first;
}

/* ---- resolve: the LowConfidence loop inside the backend ---- */

static int resolve_one(backend *be, backend_resolve_seq *q, const volatile int *cancel, backend_pass_stats *stats,
                       clover_error *err) {
    const size_t b = q->b;
    q->passes = 0;
    q->cancelled = false;
    if (!q->block || !q->conf || !q->pick || !q->rng || !q->fixed_at)
        return error_set(err, CLOVER_E_INVALID, "resolve: block, conf, pick, rng and fixed_at are required");
    if (b > 256) return error_set(err, CLOVER_E_INVALID, "resolve: a block of %zu rows, at most 256", b);
    if (!(q->threshold >= 0.0f && q->threshold <= 1.0f))
        return error_set(err, CLOVER_E_INVALID, "resolve: threshold %g, expected 0..1", (double)q->threshold);
    int rc = preview_check(be, q->s, q->block, b, &q->opts, q->pick, err);
    if (rc) return rc;
    uint8_t pending[256];
    int32_t id[256];
    float cf[256], u[256];
    for (size_t r = 0; r < b; r++) {
        pending[r] = 1;
        q->fixed_at[r] = 0;
        q->conf[r] = 0.0f;
    }
    sampler_params sp = {q->pick->temperature, q->pick->top_k, q->pick->top_p};
    const bool greedy = sampler_is_greedy(&sp) != 0;
    rng_state rng = {*q->rng};
    backend_pick_out out = {.id = id, .conf = cf};
    size_t n_pending = b;
    while (n_pending > 0) {
        if (q->passes == b)
            return error_set(err, CLOVER_E_INTERNAL, "resolve: %zu passes left %zu of %zu rows unresolved", q->passes,
                             n_pending, b);
        if (cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED)) {
            q->cancelled = true;
            break;
        }
        size_t idx[256], n = 0;
        for (size_t r = 0; r < b; r++) /* the draws: one per pending row, in row order */
            if (pending[r]) {
                idx[n] = r;
                u[n] = greedy ? 0.0f : rng_uniform(&rng);
                n++;
            }
        preview_pass(be, q->s, q->block, b, &q->opts, stats);
        if ((rc = ep_cpu_status(be->ep, err))) return error_prefix(err, "resolve");
        if ((rc = host_pick_rows(&be->pick, q->pick, be->sc.logits, idx, n, greedy ? NULL : u, q->block, b, &out, stats,
                                err)))
            return error_prefix(err, "resolve");
        size_t best = b, fixed = 0;
        for (size_t t = 0; t < n; t++) {
            size_t r = idx[t];
            if (!(cf[r] >= 0.0f))
                return error_set(err, CLOVER_E_INTERNAL, "resolve, row %zu: the preview's logits are not finite", r);
            if (best == b || cf[r] > cf[best]) best = r;
        }
        q->passes++;
        for (size_t t = 0; t < n; t++) {
            size_t r = idx[t];
            if (cf[r] > q->threshold) {
                q->block[r] = id[r], q->conf[r] = cf[r], pending[r] = 0, q->fixed_at[r] = (uint8_t)q->passes;
                fixed++;
            }
        }
        if (fixed == 0) {
            q->block[best] = id[best], q->conf[best] = cf[best], pending[best] = 0;
            q->fixed_at[best] = (uint8_t)q->passes;
            fixed = 1;
        }
        n_pending -= fixed;
        if (q->rec_guess || q->rec_conf)
            for (size_t r = 0; r < b; r++) {
                bool was_fixed = !pending[r] && q->fixed_at[r] != q->passes;
                if (q->rec_guess) q->rec_guess[(q->passes - 1) * b + r] = was_fixed ? q->block[r] : id[r];
                if (q->rec_conf) q->rec_conf[(q->passes - 1) * b + r] = was_fixed ? q->conf[r] : cf[r];
            }
    }
    *q->rng = rng.s;
    return CLOVER_OK;
}

int backend_cpu_resolve(backend *be, backend_resolve_seq *seqs, size_t n_seqs, const volatile int *cancel,
                        backend_pass_stats *stats) {
    int first = CLOVER_OK;
    for (size_t i = 0; i < n_seqs; i++) {
        backend_resolve_seq *q = &seqs[i];
        q->err.code = 0;
        q->err.message[0] = 0;
        q->rc = be ? resolve_one(be, q, cancel, stats, &q->err)
                   : error_set(&q->err, CLOVER_E_INVALID, "resolve: no backend");
        if (q->rc && !first) first = q->rc;
    }
    return first;
}

int backend_cpu_preview_debug(backend_session *s, float *hidden, uint8_t *kept, clover_error *err) {
    if (!s) return error_set(err, CLOVER_E_INVALID, "preview_debug: no session");
    if (!s->has_preview) return error_set(err, CLOVER_E_INVALID, "preview_debug: no preview has run on this session");
    const size_t L = s->hp->n_layer;
    if (hidden) memcpy(hidden, s->dbg_hidden, (L + 1) * s->preview_b * s->hp->n_embd * sizeof(float));
    if (kept) memcpy(kept, s->dbg_kept, L * s->hp->n_expert);
    return CLOVER_OK;
}
