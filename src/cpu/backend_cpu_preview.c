/*
 * backend_cpu_preview.c: the batched read-only preview of backend.h, the
 * pick of each block's masked rows on the backend, the block resolve (the
 * LowConfidence loop of SPEC.md 3 over these previews, backend/resolve.c)
 * and the preview diagnostics. The blocks of a call share passes (as many
 * as fit max_rows; cpu_pass_run_shared, one read of each weight, each row
 * as alone); every check comes before the pass, and a preview changes no
 * committed state, so a failing sequence changes nothing.
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "cpu/backend_cpu_internal.h"
#include "cpu/cpu_simd.h"

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
    if ((rc = cpu_session_preview_room(s, b, err))) return error_prefix(err, "preview");
    return CLOVER_OK;
}

/* The pass of one preview sequence (its rows in the shared pass). */
static cpu_shared_seq preview_seq(backend_session *s, const int32_t *block, size_t b, const backend_preview_opts *opts) {
    return (cpu_shared_seq){.s = s, .ids = block, .n = b, .pos = s->n_past,
                            .ln_ratio = gdn_block_ln_ratio(b, opts->record_block_size), .coreset = opts->coreset,
                            .top_p = opts->coreset_top_p, .hidden = s->dbg_hidden, .hidden_rows = b, .kept = s->dbg_kept};
}

static int preview_args(backend *be, backend_preview_seq *q, clover_error *err) {
    const backend_pick *pick = q->pending ? q->pick : NULL;
    if (q->pending && !q->pick) return error_set(err, CLOVER_E_INVALID, "preview: pending rows but no pick");
    if (be->layer_lo > 0 && !q->in_hidden)
        return error_set(err, CLOVER_E_INVALID, "preview: this backend starts at layer %u: in_hidden is required",
                         be->layer_lo);
    if (be->layer_hi < be->hp->n_layer && (!q->out_hidden || q->pending || q->logits))
        return error_set(err, CLOVER_E_INVALID,
                         "preview: this backend ends before layer %u: out_hidden is required, and no picks or logits",
                         be->layer_hi);
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
    return CLOVER_OK;
}

/* The rows whose logits a preview needs, appended to sc.head_rows (pass
 * rows: the block's start off + the block row): every row when the raw
 * logits are asked for, else the rows still masked (fixed rows need none). */
static size_t preview_head_rows(backend *be, const backend_preview_seq *q, size_t off, size_t *nh) {
    size_t m = 0;
    for (size_t r = 0; r < q->b; r++)
        if (q->logits || (q->pending && q->pending[r])) be->sc.head_rows[*nh + m++] = off + r;
    for (size_t i = 0; i < m; i++) be->sc.own[*nh + i] = (uint32_t)m;
    *nh += m;
    return m;
}

/* The raw logits of head rows a.. into the caller's array, a row a task. */
typedef struct logit_copy {
    float *dst;
    const float *src;
    const size_t *rows;
    size_t off, a, g0, V;
} logit_copy;

static void logit_copy_task(void *ctx, size_t t, size_t thread) {
    (void)thread;
    const logit_copy *c = ctx;
    const size_t i = c->a + t;
    memcpy(c->dst + (c->rows[i] - c->off) * c->V, c->src + (i - c->g0) * c->V, c->V * sizeof(float));
}

/* The picks of one sequence's head rows a..b of the pass (entries of
 * sc.head_rows; its block starts at pass row off) whose logits are in the
 * window that starts at head row g0 (row a at row a - g0 of sc.logits). */
static int preview_picks(backend *be, backend_preview_seq *q, size_t off, size_t a, size_t b, size_t g0,
                         backend_pass_stats *stats, clover_error *err) {
    const size_t V = be->hp->n_vocab;
    const size_t *rows = be->sc.head_rows;
    if (q->logits && b - a > 1 && cpu_grouped()) { /* B rows of vocab floats (32 MB at 32 x 248320): on the pool */
        logit_copy c = {q->logits, be->sc.logits, rows, off, a, g0, V};
        threadpool_run(be->pool, b - a, logit_copy_task, &c);
    } else if (q->logits) {
        for (size_t i = a; i < b; i++)
            memcpy(q->logits + (rows[i] - off) * V, be->sc.logits + (i - g0) * V, V * sizeof(float));
    }
    if (!q->pending) return CLOVER_OK;
    size_t idx[256], lidx[256], n = 0;
    float u[256];
    for (size_t i = a; i < b; i++) { /* blocks beyond 256 rows pick in runs */
        const size_t r = rows[i] - off;
        if (!q->pending[r]) continue;
        idx[n] = r;
        lidx[n] = i - g0;
        u[n] = q->u ? q->u[r] : 0.0f;
        if (++n == 256) {
            int rc = host_pick_rows_at(&be->pick, q->pick, be->sc.logits, lidx, idx, n, q->u ? u : NULL, q->block,
                                       q->b, &q->pick_out, stats, err);
            if (rc) return error_prefix(err, "preview");
            n = 0;
        }
    }
    if (n) {
        int rc = host_pick_rows_at(&be->pick, q->pick, be->sc.logits, lidx, idx, n, q->u ? u : NULL, q->block, q->b,
                                   &q->pick_out, stats, err);
        if (rc) return error_prefix(err, "preview");
    }
    return CLOVER_OK;
}

/* A window's share of the head rows of one block of a preview pass (cpu_head_windows). */
typedef struct preview_heads {
    backend *be;
    backend_preview_seq *seqs;
    const size_t *who;
    const cpu_shared_seq *pass;
    backend_pass_stats *stats;
} preview_heads;

static void preview_head_part(void *ctx, size_t k, size_t a, size_t b, size_t g0) {
    const preview_heads *c = ctx;
    backend_preview_seq *q = &c->seqs[c->who[k]];
    if (!q->rc) q->rc = preview_picks(c->be, q, c->pass[k].off, a, b, g0, c->stats, &q->err);
}

int backend_cpu_preview(backend *be, backend_preview_seq *seqs, size_t n_seqs, backend_pass_stats *stats) {
    enum { MAX_SEQS = 256 };
    int first = CLOVER_OK;
    bool todo[MAX_SEQS];
    for (size_t i = 0; i < n_seqs; i++) {
        backend_preview_seq *q = &seqs[i];
        q->err.code = 0;
        q->err.message[0] = 0;
        if (!be) q->rc = error_set(&q->err, CLOVER_E_INVALID, "preview: no backend");
        else if (i >= MAX_SEQS) q->rc = error_set(&q->err, CLOVER_E_INVALID, "preview: more than %d sequences in a call", MAX_SEQS);
        else q->rc = preview_args(be, q, &q->err);
        if (i < MAX_SEQS) todo[i] = q->rc == 0;
    }
    if (!be) return n_seqs ? seqs[0].rc : CLOVER_E_INVALID;
    threadpool_counts pool0;
    threadpool_get_counts(be->pool, &pool0);
    const size_t R = be->max_rows;
    cpu_shared_seq pass[MAX_SEQS];
    size_t who[MAX_SEQS], at[MAX_SEQS], m[MAX_SEQS];
    for (;;) {
        size_t np = 0, used = 0;
        for (size_t i = 0; i < n_seqs && i < MAX_SEQS; i++) { /* the blocks that fit one pass, in call order */
            if (!todo[i] || used + seqs[i].b > R) continue;
            pass[np] = preview_seq(seqs[i].s, seqs[i].block, seqs[i].b, &seqs[i].opts);
            pass[np].in_h = seqs[i].in_hidden;
            pass[np].out_h = seqs[i].out_hidden;
            who[np++] = i;
            used += seqs[i].b;
            todo[i] = false;
        }
        if (np == 0) break;
        cpu_pass_run_shared(be, pass, np, CPU_PASS_PREVIEW, stats);
        if (be->moe_hook.ctx && be->moe_hook.status(be->moe_hook.ctx, NULL)) { /* a failed simulated rank: every block of the pass fails */
            for (size_t k = 0; k < np; k++) seqs[who[k]].rc = be->moe_hook.status(be->moe_hook.ctx, &seqs[who[k]].err);
            continue;
        }
        size_t nh = 0;
        for (size_t k = 0; k < np; k++) {
            backend_preview_seq *q = &seqs[who[k]];
            q->s->has_preview = true;
            q->s->preview_b = q->b;
            at[k] = nh;
            m[k] = preview_head_rows(be, q, pass[k].off, &nh);
        }
        preview_heads ph = {be, seqs, who, pass, stats};
        cpu_head_windows(be, nh, at, m, np, preview_head_part, &ph, stats);
    }
    cpu_pool_stats_add(be, &pool0, stats);
    for (size_t i = 0; i < n_seqs; i++)
        if (seqs[i].rc && !first) first = seqs[i].rc;
    return first;
}

int backend_cpu_resolve(backend *be, backend_resolve_seq *seqs, size_t n_seqs, const volatile int *cancel,
                        backend_pass_stats *stats) {
    return backend_resolve_by_preview(&backend_cpu, be, seqs, n_seqs, cancel, stats);
}

int backend_cpu_preview_debug(backend_session *s, float *hidden, uint8_t *kept, clover_error *err) {
    if (!s) return error_set(err, CLOVER_E_INVALID, "preview_debug: no session");
    if (!s->has_preview) return error_set(err, CLOVER_E_INVALID, "preview_debug: no preview has run on this session");
    const size_t L = s->hp->n_layer;
    if (hidden) memcpy(hidden, s->dbg_hidden, (L + 1) * s->preview_b * s->hp->n_embd * sizeof(float));
    if (kept) memcpy(kept, s->dbg_kept, L * s->hp->n_expert);
    return CLOVER_OK;
}
