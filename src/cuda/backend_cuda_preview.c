/*
 * backend_cuda_preview.c: the read-only preview of backend.h on the GPU, the
 * pick of the block's masked rows on the device, the block resolve (the
 * LowConfidence loop of SPEC.md 3) and the preview diagnostics.
 *
 * One preview of one sequence, all on the session's stream, one sync at the
 * end, the trunk a CUDA graph per block shape (preview_trunk): the block's ids and the pick's inputs (forbidden ids, counted ids and
 * counts, stop ids, the per-row ramps, the draws) go up through pinned
 * mirrors; the trunk runs in preview mode (backend_cuda_pass.c: no causal
 * mask, the GDN block operator over the committed state, the coreset on the
 * device); the head runs only for the rows still masked (every row when the
 * caller wants the raw logits); the pick (pick_rows.cu) runs there; and the
 * host reads back only each picked row's id and confidence (8 bytes a row)
 * and the coreset's kept count. Rows the device pick hands back (id -2, a
 * near-flat sampled row whose head is wider than the device sorts) and
 * requests for log-probabilities or top-N are picked on the host by
 * backend/pick.c from the raw logits, the contract's oracle.
 *
 * Read only: the K/V rows of the block are written past the committed
 * length (never read by a commit, overwritten by the next one), the GDN
 * rings and states are only read, and n_past does not move; the tests hash
 * the exported state before and after.
 *
 * Resolve runs the passes of a block back to back, each a device preview
 * and pick, with the LowConfidence rule applied on the host over the few
 * bytes a pass returns (the cancel flag checked before each pass).
 */
#include <math.h>
#include <string.h>

#include "backend/pick.h"
#include "base/alloc.h"
#include "base/error.h"
#include "base/rng.h"
#include "base/timer.h"
#include "model/gdn_ratio.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_mem.h"
#include "cuda/cuda_pick_rows.h"
#include "cuda/cuda_preview.h"
#include "backend/penalties.h"
#include "backend/sampler.h"
#include "quant/quant.h"

static bool f32_weight(const model_weight *w) { return w->data && w->type == QUANT_F32; }

/* Whether every GDN layer has the block-diffusion tensors, as F32. */
static int can_preview(const backend_session *s, clover_error *err) {
    for (uint32_t l = 0; l < s->hp->n_layer; l++) {
        const model_layer *ml = &s->model->layers[l];
        if (ml->kind != MODEL_LAYER_GDN) continue;
        const model_gdn_weights *w = &ml->gdn;
        if (!w->conv_right.data || !w->logit_scale.data || !w->history_bias.data || !w->history_c.data)
            return error_set(err, CLOVER_E_UNSUPPORTED,
                             "preview: the model's GDN layers lack the block-diffusion tensors (ssm_conv1d_right, "
                             "bd_logit_scale, bd_history_bias, bd_history_c): an autoregressive model has no preview");
        if (!f32_weight(&w->conv_right) || !f32_weight(&w->logit_scale) || !f32_weight(&w->history_bias) ||
            !f32_weight(&w->history_c) || !f32_weight(&w->conv) || !f32_weight(&w->a) || !f32_weight(&w->dt_bias) ||
            !f32_weight(&w->norm))
            return error_set(err, CLOVER_E_UNSUPPORTED,
                             "preview on CUDA: layer %u's GDN small tensors are not all F32 (the block operator reads "
                             "them as f32)",
                             l);
    }
    return CLOVER_OK;
}

int cuda_preview_check(backend_session *s, host_pick_ctx *pc, const int32_t *block, size_t b,
                         const backend_preview_opts *opts, const backend_pick *pick, clover_error *err) {
    if (!block) return error_set(err, CLOVER_E_INVALID, "preview: block ids are required");
    int rc = can_preview(s, err);
    if (rc) return rc;
    if (b == 0 || b > s->max_rows)
        return error_set(err, CLOVER_E_INVALID, "preview: a block of %zu rows, expected 1..%zu (the backend's max_rows)",
                         b, s->max_rows);
    if (opts->record_block_size == 0)
        return error_set(err, CLOVER_E_INVALID, "preview: record_block_size is 0 (the history slot needs ln(b/B))");
    if (opts->coreset && !(opts->coreset_top_p >= 0.0f && opts->coreset_top_p <= 1.0f))
        return error_set(err, CLOVER_E_INVALID, "preview: coreset_top_p %g, expected 0..1",
                         (double)opts->coreset_top_p);
    const uint32_t V = s->hp->n_vocab;
    for (size_t r = 0; r < b; r++)
        if (block[r] < 0 || (uint32_t)block[r] >= V)
            return error_set(err, CLOVER_E_INVALID, "preview: token id %d at row %zu is outside the vocabulary 0..%u",
                             (int)block[r], r, V - 1);
    if (b > s->max_context - s->n_past)
        return error_set(err, CLOVER_E_INVALID,
                         "preview: a block of %zu rows after %zu committed exceeds the session's context of %zu", b,
                         s->n_past, s->max_context);
    if (pick && host_pick_check(pc, pick, err)) return error_prefix(err, "preview");
    return CLOVER_OK;
}

/* Whether </think> is open for this pass (penalty_think_open over the sparse counts). */
bool cuda_think_open(const backend_penalties *pen, const int32_t *block, size_t b) {
    const int32_t c = pen->think_end_id;
    if (c < 0) return false;
    for (size_t i = 0; i < pen->n_counts; i++)
        if (pen->count_ids[i] == c && pen->counts[i] != 0) return false;
    for (size_t i = 0; i < b; i++)
        if (block[i] == c) return false;
    return true;
}

/* The preview's trunk (no head) on the stream: a captured graph per block
 * shape (rows, coreset, ln(b/B), top-p) replayed after its first use, so a
 * pass is one launch; the per-pass facts (ids, position) are copied by the
 * graph from the pinned mirrors written here. Eager when graphs are off
 * (CLOVER_CUDA_NO_GRAPH, a refused capture) or the residual stream is
 * recorded (its copies synchronise). */
static int preview_trunk(backend_session *s, const cuda_pass *p, clover_error *err) {
    char why[CUDA_WHY] = "";
    if (p->stats) p->stats->passes++;
    if (s->pgraph_off || p->hidden) return cuda_pass_enqueue(s, p, err);
    cuda_preview_graph *g = NULL, *slot = &s->pgraph[0];
    for (int i = 0; i < CUDA_PREVIEW_GRAPHS; i++) {
        cuda_preview_graph *c = &s->pgraph[i];
        if (c->exec && c->b == p->n && c->coreset == p->coreset && c->ln_ratio == p->ln_ratio &&
            (!p->coreset || c->top_p == p->top_p))
            g = c;
        if (!c->exec ? slot->exec != NULL : (slot->exec && c->used < slot->used)) slot = c;
    }
    if (!g) {
        if (cuda_graph_begin(s->stream, why) == 0) {
            int rc = cuda_pass_enqueue(s, p, err);
            void *exec = NULL;
            int end = cuda_graph_end(s->stream, &exec, why);
            if (rc) {
                cuda_graph_destroy(exec);
                return rc;
            }
            if (end == 0) {
                cuda_graph_destroy(slot->exec);
                *slot = (cuda_preview_graph){exec, p->n, p->coreset, p->ln_ratio, p->top_p, 0};
                g = slot;
            }
        }
        if (!g) { /* capture refused: eager from now on */
            s->pgraph_off = true;
            return cuda_pass_enqueue(s, p, err);
        }
    }
    /* what cuda_pass_enqueue writes to the pinned mirrors, for the graph's copies */
    for (size_t i = 0; i < s->n_attn; i++) {
        s->h_aseq[i].pos = (int32_t)p->pos;
        s->h_aseq[i].row0 = 0;
        s->h_aseq[i].n = (int32_t)p->n;
    }
    for (size_t i = 0; i < s->n_gdn; i++) {
        s->h_gseq[i].row0 = 0;
        s->h_gseq[i].n = (int32_t)p->n;
    }
    g->used = ++s->pgraph_clock;
    if (cuda_graph_launch(g->exec, s->stream, why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: %s", why);
    return CLOVER_OK;
}

/* The pass, and the device pick of the rows in rows[0..n_pick) (block rows) when pick is set.
 * all_logits: the head for every row (the raw logits then come back into s->h_logits). */
static int preview_enqueue(backend_session *s, const int32_t *block, size_t b, const backend_preview_opts *opts,
                           const backend_pick *pick, const size_t *rows, size_t n_pick, const float *u,
                           bool all_logits, backend_pass_stats *stats, clover_error *err) {
    const size_t V = s->hp->n_vocab;
    cuda_scratch *sc = &s->sc;
    char why[CUDA_WHY] = "";
    int rc;
    const bool dev_pick = pick && n_pick && !all_logits;
    /* the head's rows: all, or the picked ones (logits row t = block row rows[t]) */
    size_t n_head = all_logits ? b : n_pick;
    int32_t *hr = s->h_pk_rows, *sel = s->h_pk_rows + s->max_rows;
    for (size_t t = 0; t < n_head; t++) hr[t] = (int32_t)(all_logits ? t : rows[t]);
    memcpy(s->h_ids, block, b * sizeof(int32_t));
    *s->h_kept_count = 0;
    if (cuda_h2d_async(sc->pk_rows, hr, n_head * sizeof(int32_t), s->stream, why) ||
        cuda_memset(sc->kept_count, 0, sizeof(uint32_t), s->stream, why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: %s", why);
    cuda_pass p = {.pos = s->n_past,
                   .n = b,
                   .head_r0 = b,
                   .stats = stats,
                   .preview = true,
                   .coreset = opts->coreset,
                   .ln_ratio = gdn_block_ln_ratio(b, opts->record_block_size),
                   .top_p = opts->coreset_top_p,
                   .head_rows = sc->pk_rows,
                   .n_head_rows = 0, /* the trunk alone: the head follows, for this pass's rows */
                   .hidden = s->dbg_hidden,
                   .hidden_rows = b,
                   .row0 = 0};
    if ((rc = preview_trunk(s, &p, err)) || (rc = cuda_pass_head_rows(s, sc->pk_rows, n_head, err))) return rc;
    if (dev_pick) {
        const backend_penalties *pen = pick->pen;
        cuda_pick_pen dp = {0};
        for (size_t t = 0; t < n_pick; t++) {
            sel[t] = (int32_t)t;
            s->h_pk_u[t] = u ? (double)u[t] : 0.0;
        }
        int e = cuda_h2d_async(sc->pk_rows + s->max_rows, sel, n_pick * sizeof(int32_t), s->stream, why) ||
                (u && cuda_h2d_async(sc->pk_u, s->h_pk_u, n_pick * sizeof(double), s->stream, why));
        if (!e && pick->n_forbid) {
            memcpy(s->h_pk_forbid, pick->forbid, pick->n_forbid * sizeof(int32_t));
            e = cuda_h2d_async(sc->pk_forbid, s->h_pk_forbid, pick->n_forbid * sizeof(int32_t), s->stream, why);
        }
        if (!e && pen) {
            const clover_penalties *pp = &pen->p;
            bool open = cuda_think_open(pen, block, b);
            dp = (cuda_pick_pen){.count_ids = sc->pk_cids,
                                 .counts = sc->pk_counts,
                                 .n_counts = (int)pen->n_counts,
                                 .frequency = pp->frequency_penalty,
                                 .presence = pp->presence_penalty,
                                 .repetition = pp->repetition_penalty,
                                 .stop_ids = sc->pk_stop,
                                 .n_stop = (int)pen->n_stop_ids,
                                 .ramp_len = sc->pk_ramp,
                                 .apply_len = pp->length_penalty != 0.0f,
                                 .think_id = pen->think_end_id,
                                 .ramp_think = sc->pk_ramp + s->max_rows,
                                 .apply_think = open && pp->think_end_bias != 0.0f && pen->think_end_id >= 0 &&
                                                (size_t)pen->think_end_id < V};
            for (size_t t = 0; t < n_pick; t++) {
                size_t pos = pen->response_len + rows[t] + 1;
                s->h_pk_ramp[t] = dp.apply_len ? penalty_ramp(pos, pp->length_penalty_start,
                                                              pp->length_penalty_window, pp->length_penalty)
                                               : 0.0f;
                s->h_pk_ramp[s->max_rows + t] =
                    dp.apply_think ? penalty_ramp(pos, pp->think_end_start, pp->think_end_window, pp->think_end_bias)
                                   : 0.0f;
            }
            memcpy(s->h_pk_cids, pen->count_ids, pen->n_counts * sizeof(int32_t));
            memcpy(s->h_pk_counts, pen->counts, pen->n_counts * sizeof(uint32_t));
            memcpy(s->h_pk_stop, pen->stop_ids, pen->n_stop_ids * sizeof(int32_t));
            e = (pen->n_counts &&
                 (cuda_h2d_async(sc->pk_cids, s->h_pk_cids, pen->n_counts * 4, s->stream, why) ||
                  cuda_h2d_async(sc->pk_counts, s->h_pk_counts, pen->n_counts * 4, s->stream, why))) ||
                (pen->n_stop_ids && cuda_h2d_async(sc->pk_stop, s->h_pk_stop, pen->n_stop_ids * 4, s->stream, why)) ||
                cuda_h2d_async(sc->pk_ramp, s->h_pk_ramp, 2 * s->max_rows * sizeof(float), s->stream, why);
        }
        if (e) return error_set(err, CLOVER_E_INTERNAL, "CUDA preview pick: %s", why);
        cuda_pick_params cp = {pick->temperature, pick->top_k, pick->top_p};
        if (cuda_pick_rows(sc->pk_id, sc->pk_conf, sc->plog, sc->logits, sc->pk_rows + s->max_rows, n_pick, V,
                           sc->pk_forbid, pick->n_forbid, pen ? &dp : NULL, &cp, u ? sc->pk_u : NULL, s->stream))
            return error_set(err, CLOVER_E_INTERNAL, "CUDA preview pick: %s", cuda_preview_last_error());
        if (cuda_d2h_async(s->h_pk_id, sc->pk_id, n_pick * sizeof(int32_t), s->stream, why) ||
            cuda_d2h_async(s->h_pk_conf, sc->pk_conf, n_pick * sizeof(float), s->stream, why))
            return error_set(err, CLOVER_E_INTERNAL, "CUDA preview pick: %s", why);
    }
    if (all_logits && cuda_d2h_async(s->h_logits, sc->logits, b * V * sizeof(float), s->stream, why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: logits: %s", why);
    if (opts->coreset && cuda_d2h_async(s->h_kept_count, sc->kept_count, sizeof(uint32_t), s->stream, why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: %s", why);
    if (cuda_stream_sync(s->stream, why)) return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: %s", why);
    s->has_preview = true;
    s->preview_b = b;
    s->preview_coreset = opts->coreset;
    if (stats && opts->coreset) {
        stats->coreset_kept += *s->h_kept_count;
        stats->coreset_layers += s->n_run; /* the layers this session ran (a split's back counts its own) */
    }
    return CLOVER_OK;
}

/* preview_enqueue inside the pass's launch mark */
static int preview_run(backend_session *s, const int32_t *block, size_t b, const backend_preview_opts *opts,
                       const backend_pick *pick, const size_t *rows, size_t n_pick, const float *u, bool all_logits,
                       backend_pass_stats *stats, clover_error *err) {
    /* with the coreset, the pass's row launches take PDL as cuda_device.cu's CLOVER_CUDA_PDL_ROWS says (AUTO: off,
     * the trunk, the head and the pick alike, as measured) */
    const int mark = cuda_pdl_rows_pass(opts->coreset ? CUDA_PDL_MARK_CORESET : 0);
    const int rc = preview_enqueue(s, block, b, opts, pick, rows, n_pick, u, all_logits, stats, err);
    cuda_pdl_rows_pass(mark);
    return rc;
}

/* Host picks of rows[0..n) (block rows) over raw logits laid out [b][V] in buf. */
static int host_rows(host_pick_ctx *pc, const backend_pick *pick, float *buf, const size_t *rows, size_t n,
                     const float *u, const int32_t *block, size_t b, const backend_pick_out *out,
                     backend_pass_stats *stats, clover_error *err) {
    for (size_t a = 0; a < n; a += 256) {
        size_t m = n - a < 256 ? n - a : 256;
        int rc = host_pick_rows(pc, pick, buf, rows + a, m, u ? u + a : NULL, block, b, out, stats, err);
        if (rc) return rc;
    }
    return CLOVER_OK;
}

/* One sequence's preview with its picks: raw logits to q->logits when asked. */
int cuda_preview_pick(backend_session *s, host_pick_ctx *pc, const int32_t *block, size_t b,
                      const backend_preview_opts *opts, const backend_pick *pick, const uint8_t *pending,
                      const float *u_rows, const backend_pick_out *out, float *logits, backend_pass_stats *stats,
                      clover_error *err) {
    const size_t V = s->hp->n_vocab;
    s->kept_valid = false; /* a replayed preview graph rewrites sc.logits too */
    size_t rows[256 * 16], n = 0; /* b <= max_rows <= 4096 */
    float u[256 * 16];
    if (pick)
        for (size_t r = 0; r < b; r++)
            if (pending[r]) {
                rows[n] = r;
                u[n] = u_rows ? u_rows[r] : 0.0f;
                n++;
            }
    const bool host_all = logits || (pick && n && (out->logprob || (pick->n_top && out->top_id)));
    int rc = preview_run(s, block, b, opts, pick, rows, n, u_rows ? u : NULL, host_all, stats, err);
    if (rc) return rc;
    if (logits) memcpy(logits, s->h_logits, b * V * sizeof(float));
    if (!pick || !n) return CLOVER_OK;
    if (host_all) /* the oracle over the raw logits (it rewrites them: s->h_logits is scratch) */
        return host_rows(pc, pick, s->h_logits, rows, n, u_rows ? u : NULL, block, b, out, stats, err);
    size_t redo[256 * 16], nr = 0;
    float ur[256 * 16];
    for (size_t t = 0; t < n; t++) {
        int32_t id = s->h_pk_id[t];
        if (id == -1) return error_set(err, CLOVER_E_INVALID, "pick: row %zu has no finite logit left", rows[t]);
        if (id == -2) {
            redo[nr] = rows[t];
            ur[nr++] = u[t];
            continue;
        }
        out->id[rows[t]] = id;
        out->conf[rows[t]] = s->h_pk_conf[t];
    }
    if (!nr) return CLOVER_OK;
    /* the rows the device handed back: their raw logits (logits row t), placed at their block rows */
    float *buf = mem_alloc(b * V * sizeof(float));
    if (!buf) return error_set(err, CLOVER_E_NOMEM, "preview: no memory for %zu rows of logits", b);
    char why[CUDA_WHY] = "";
    size_t t = 0;
    for (size_t i = 0; i < nr; i++) {
        while (rows[t] != redo[i]) t++;
        if (cuda_d2h(buf + redo[i] * V, s->sc.logits + t * V, V * sizeof(float), why)) {
            mem_free(buf);
            return error_set(err, CLOVER_E_INTERNAL, "CUDA preview: %s", why);
        }
    }
    rc = host_rows(pc, pick, buf, redo, nr, u_rows ? ur : NULL, block, b, out, stats, err);
    mem_free(buf);
    return rc;
}

int cuda_preview_seq(backend_session *s, host_pick_ctx *pc, backend_preview_seq *q, backend_pass_stats *stats,
                     clover_error *err) {
    const backend_pick *pick = q->pending ? q->pick : NULL;
    if (q->pending && !q->pick) return error_set(err, CLOVER_E_INVALID, "preview: pending rows but no pick");
    if (s->n_run < s->hp->n_layer && (!q->out_hidden || q->pending || q->logits))
        return error_set(err, CLOVER_E_INVALID,
                         "preview: this backend ends before layer %u: out_hidden is required, and no picks or logits",
                         s->n_run);
    int rc = cuda_preview_check(s, pc, q->block, q->b, &q->opts, pick, err);
    if (rc) return rc;
    if (s->n_run < s->hp->n_layer) { /* the front of a split: the trunk to n_run, its residual handed on */
        char why[CUDA_WHY] = "";
        s->kept_valid = false;
        rc = preview_run(s, q->block, q->b, &q->opts, NULL, NULL, 0, NULL, false, stats, err);
        if (!rc && cuda_d2h(q->out_hidden, s->sc.h, q->b * s->hp->n_embd * sizeof(float), why))
            rc = error_set(err, CLOVER_E_INTERNAL, "CUDA preview: the residual stream: %s", why);
        if (rc) error_prefix(err, "preview");
        return rc;
    }
    if (pick) {
        if (!q->pick_out.id || !q->pick_out.conf)
            return error_set(err, CLOVER_E_INVALID, "preview: picks need id and conf arrays");
        sampler_params sp = {pick->temperature, pick->top_k, pick->top_p};
        if (!sampler_is_greedy(&sp) && !q->u)
            return error_set(err, CLOVER_E_INVALID, "preview: sampled picks need their draws");
        if (pick->n_top && !q->pick_out.top_id)
            return error_set(err, CLOVER_E_INVALID, "preview: %zu top log-probabilities but no array", pick->n_top);
    }
    rc = cuda_preview_pick(s, pc, q->block, q->b, &q->opts, pick, q->pending, q->u, &q->pick_out, q->logits, stats, err);
    if (rc) error_prefix(err, "preview");
    return rc;
}

int cuda_resolve_seq(backend_session *s, host_pick_ctx *pc, backend_resolve_seq *q, const volatile int *cancel,
                     backend_pass_stats *stats, clover_error *err) {
    const size_t b = q->b;
    q->passes = 0;
    q->cancelled = false;
    if (!q->block || !q->conf || !q->pick || !q->rng || !q->fixed_at)
        return error_set(err, CLOVER_E_INVALID, "resolve: block, conf, pick, rng and fixed_at are required");
    if (b > 256) return error_set(err, CLOVER_E_INVALID, "resolve: a block of %zu rows, at most 256", b);
    if (!(q->threshold >= 0.0f && q->threshold <= 1.0f))
        return error_set(err, CLOVER_E_INVALID, "resolve: threshold %g, expected 0..1", (double)q->threshold);
    int rc = cuda_preview_check(s, pc, q->block, b, &q->opts, q->pick, err);
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
        if ((cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED)) ||
            (q->cancel && __atomic_load_n(q->cancel, __ATOMIC_RELAXED))) { /* the call's flag or the sequence's own */
            q->cancelled = true;
            break;
        }
        for (size_t r = 0; r < b; r++) /* the draws: one per pending row, in row order */
            u[r] = pending[r] && !greedy ? rng_uniform(&rng) : 0.0f;
        if ((rc = cuda_preview_pick(s, pc, q->block, b, &q->opts, q->pick, pending, greedy ? NULL : u, &out, NULL, stats,
                               err)))
            return error_prefix(err, "resolve");
        size_t best = b, fixed = 0;
        for (size_t r = 0; r < b; r++) {
            if (!pending[r]) continue;
            if (!(cf[r] >= 0.0f))
                return error_set(err, CLOVER_E_INTERNAL, "resolve, row %zu: the preview's logits are not finite", r);
            if (best == b || cf[r] > cf[best]) best = r;
        }
        q->passes++;
        for (size_t r = 0; r < b; r++)
            if (pending[r] && cf[r] > q->threshold) {
                q->block[r] = id[r], q->conf[r] = cf[r], pending[r] = 0, q->fixed_at[r] = (uint8_t)q->passes;
                fixed++;
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

int cuda_preview_debug(backend_session *s, float *hidden, uint8_t *kept, clover_error *err) {
    if (!s) return error_set(err, CLOVER_E_INVALID, "preview_debug: no session");
    if (!s->has_preview) return error_set(err, CLOVER_E_INVALID, "preview_debug: no preview has run on this session");
    const size_t L = s->hp->n_layer, E = s->hp->n_expert;
    if (hidden) {
        if (!s->dbg_hidden)
            return error_set(err, CLOVER_E_UNSUPPORTED,
                             "preview_debug: this CUDA session records no residual stream (create it with "
                             "CLOVER_CUDA_PREVIEW_HIDDEN set: it costs a sync per layer)");
        memcpy(hidden, s->dbg_hidden, (L + 1) * s->preview_b * s->hp->n_embd * sizeof(float));
    }
    if (kept) {
        if (!s->preview_coreset) {
            memset(kept, 1, L * E);
        } else {
            char why[CUDA_WHY] = "";
            if (cuda_d2h(kept, s->sc.kept, L * E, why))
                return error_set(err, CLOVER_E_INTERNAL, "preview_debug: %s", why);
        }
    }
    return CLOVER_OK;
}
