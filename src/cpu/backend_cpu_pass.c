/*
 * backend_cpu_pass.c: one pass over the rows of several sequences with
 * one read of each weight (backend_cpu_internal.h, cpu_pass_run_shared).
 * The layer is backend_cpu_pass.c's, step for step; what changes is where
 * the rows live: the sequences' rows are stacked in the scratch (ordered
 * by row count, so rows of one kernel path are adjacent and most products
 * are one or two runs), every product over them goes through
 * matmul_grouped with each row's own sequence's row count, and the mixers
 * (attention, GDN: their state is the sequence's) run per sequence on its
 * slice of the scratch. Norms, residual adds, SwiGLU and routing are per
 * row, so the stacking cannot change them. With cpu_grouped the residual
 * add, the hidden-state copy and the next norm of each row are one pool
 * task (cpu_rms_norm row by row is the same arithmetic as over all rows):
 * at 16 threads, on the calling thread, they were ~0.1 ms a layer of a
 * 32-row preview while the pool waited.
 */
#include <string.h>

#include "base/timer.h"
#include "cpu/backend_cpu_internal.h"
#include "cpu/cpu_simd.h"
#include "cpu/norm.h"
#include "quant/matmul.h"
#include "quant/matmul_group.h"
#include "quant/quant.h"

static void shared_hidden_store(const cpu_shared_seq *q, size_t nq, size_t slot, const float *h, size_t H) {
    for (size_t i = 0; i < nq; i++)
        if (q[i].hidden)
            memcpy(q[i].hidden + (slot * q[i].hidden_rows + q[i].row0) * H, h + q[i].off * H, q[i].n * H * sizeof *h);
}

static void shared_attention(backend *be, cpu_shared_seq *q, size_t nq, size_t il, size_t n, cpu_pass_mode mode) {
    const model_attention_weights *w = &be->model->layers[il].attn;
    cpu_scratch *sc = &be->sc;
    const cpu_attn_dims *d = &be->attn_dims;
    const size_t H = be->hp->n_embd, nh = d->n_head, nkv = d->n_head_kv, hd = d->head_dim;
    const mm_group_item in[3] = {
        {{w->q.type, w->q.data, 2 * nh * hd, H, sc->x, n, sc->qg}, sc->own},
        {{w->k.type, w->k.data, nkv * hd, H, sc->x, n, sc->k}, sc->own},
        {{w->v.type, w->v.data, nkv * hd, H, sc->x, n, sc->v}, sc->own},
    };
    matmul_grouped_batch(be->pool, in, 3);
    for (size_t i = 0; i < nq; i++) {
        cpu_layer *ly = &q[i].s->layers[il];
        const size_t o = q[i].off, m = q[i].n;
        cpu_attn_prepare_pool(be->pool, sc->q + o * nh * hd, sc->gate + o * nh * hd, ly->k_cache, ly->v_cache,
                              sc->qg + o * 2 * nh * hd, sc->k + o * nkv * hd, sc->v + o * nkv * hd, w->q_norm.data,
                              w->k_norm.data, be->inv_freq, d, (int64_t)q[i].pos, m, sc->cs);
        cpu_attn_forward_pool(be->pool, sc->att + o * nh * hd, sc->q + o * nh * hd, sc->gate + o * nh * hd,
                              ly->k_cache, ly->v_cache, d, (int64_t)q[i].pos, m, mode == CPU_PASS_COMMIT,
                              be->attn_ctx, be->attn_scratch);
    }
    matmul_grouped(be->pool, w->o.type, w->o.data, H, nh * hd, sc->att, n, sc->y, sc->own);
}

static void shared_gdn(backend *be, cpu_shared_seq *q, size_t nq, size_t il, size_t n, cpu_pass_mode mode) {
    const model_gdn_weights *w = &be->model->layers[il].gdn;
    const cpu_layer_w *lw = &be->layers[il];
    cpu_scratch *sc = &be->sc;
    const cpu_gdn_dims *d = &be->gdn_dims;
    const size_t H = be->hp->n_embd, cd = cpu_gdn_conv_dim(d), nv = d->n_v_heads, vd = nv * d->v_dim;
    const mm_group_item in[4] = {
        {{w->qkv.type, w->qkv.data, cd, H, sc->x, n, sc->mixed}, sc->own},
        {{w->z.type, w->z.data, vd, H, sc->x, n, sc->z}, sc->own},
        {{w->alpha.type, w->alpha.data, nv, H, sc->x, n, sc->ga}, sc->own},
        {{w->beta.type, w->beta.data, nv, H, sc->x, n, sc->gb}, sc->own},
    };
    matmul_grouped_batch(be->pool, in, mode == CPU_PASS_COMMIT ? 4 : 3);
    for (size_t i = 0; i < nq; i++) {
        cpu_layer *ly = &q[i].s->layers[il];
        const size_t o = q[i].off, m = q[i].n;
        if (mode == CPU_PASS_COMMIT)
            cpu_gdn_mix(sc->gout + o * vd, sc->mixed + o * cd, sc->z + o * vd, sc->gb + o * nv, sc->ga + o * nv,
                        &lw->gdn_w, ly->ring, ly->state, d, m, m == 1 ? CPU_GDN_RECURRENT : CPU_GDN_CHUNKED,
                        be->pool, sc->gdn);
        else
            gdn_block(sc->gout + o * vd, sc->mixed + o * cd, sc->z + o * vd, sc->ga + o * nv, ly->ring, ly->state,
                      &lw->block_w, d, m, q[i].ln_ratio, be->pool, sc->gdn);
    }
    matmul_grouped(be->pool, w->out.type, w->out.data, H, vd, sc->gout, n, sc->y, sc->own);
}

/* h += y, then the hidden-state copy of slot `slot` and x = rms_norm(h) with
 * norm_w (NULL: no norm), row by row on the pool. */
typedef struct resid_job {
    float *h, *x;
    const float *y, *norm_w;
    const cpu_shared_seq *q;
    const uint32_t *group;
    size_t H, slot;
    float eps;
    bool store;
} resid_job;

static void resid_task(void *ctx, size_t r, size_t thread) {
    (void)thread;
    const resid_job *j = ctx;
    const size_t H = j->H;
    float *h = j->h + r * H;
    const float *y = j->y + r * H;
    for (size_t i = 0; i < H; i++) h[i] = h[i] + y[i];
    const cpu_shared_seq *s = &j->q[j->group[r]];
    if (j->store && s->hidden)
        memcpy(s->hidden + (j->slot * s->hidden_rows + s->row0 + (r - s->off)) * H, h, H * sizeof *h);
    if (j->norm_w) cpu_rms_norm(j->x + r * H, h, j->norm_w, 1, H, j->eps);
}

static void resid_epilogue_row(void *ctx, size_t r) { resid_task(ctx, r, 0); }

/* A preview sequence's coreset with its rows' softmaxes and top-k on the pool (a row a task: ~1.7 us each, 32 of
 * them a layer, ~55 us a layer on the calling thread while the pool waited), then the totals added in row order
 * and the walk on the caller: cpu_moe_coreset's steps in its order, so its bits. */
typedef struct {
    const float *logits;
    size_t E, k;
    int32_t *idx;
    double *ms;
    uint32_t *m;
} coreset_rows_job;

static void coreset_row_task(void *ctx, size_t r, size_t thread) {
    (void)thread;
    const coreset_rows_job *j = ctx;
    j->m[r] = (uint32_t)cpu_moe_coreset_row(j->idx + r * j->k, &j->ms[2 * r], &j->ms[2 * r + 1], j->logits + r * j->E,
                                            j->E, j->k);
}

static void shared_coreset(backend *be, uint8_t *allowed, const float *logits, size_t n, size_t E, size_t k,
                           float top_p) {
    cpu_scratch *sc = &be->sc;
    if (n < 2 || threadpool_size(be->pool) < 2 || !cpu_grouped()) {
        cpu_moe_coreset(allowed, logits, n, E, k, top_p, sc->totals, sc->order);
        return;
    }
    coreset_rows_job j = {.logits = logits, .E = E, .k = k, .idx = sc->core_idx, .ms = sc->core_ms, .m = sc->core_m};
    threadpool_run(be->pool, n, coreset_row_task, &j);
    for (size_t e = 0; e < E; e++) sc->totals[e] = 0.0;
    for (size_t r = 0; r < n; r++)
        cpu_moe_coreset_add(sc->totals, j.idx + r * k, j.m[r], logits + r * E, j.ms[2 * r], j.ms[2 * r + 1]);
    cpu_moe_coreset_from_totals(allowed, sc->totals, E, top_p, sc->order);
}

/* The MoE of every row; a preview sequence with the coreset gets its own
 * (from its rows' router logits, computed with its own kernel). before: the
 * residual step that writes its input (NULL: done), run first, in the
 * router product's run of the pool (matmul_grouped_batch_after); after: the
 * residual step that follows (resid_rows'); returns whether it ran it, row
 * by row in the MoE's last run of the pool (cpu_moe_forward_groups_then). */
static bool shared_moe(backend *be, cpu_shared_seq *q, size_t nq, size_t il, size_t n, backend_pass_stats *st,
                       const threadpool_phase *before, resid_job *after) {
    cpu_scratch *sc = &be->sc;
    const cpu_moe_weights *w = &be->layers[il].moe_w;
    const size_t E = w->n_expert;
    bool any = false;
    for (size_t i = 0; i < nq; i++) any |= q[i].coreset;
    if (any || be->moe_hook.ctx) { /* the router here (or another MoE): the residual step in its run, or alone */
        const mm_group_item router = {{w->router_type, w->router, E, w->n_embd, sc->x, n, sc->router}, sc->own};
        if (any) matmul_grouped_batch_after(be->pool, before, &router, 1);
        else threadpool_run_phase(be->pool, before);
        before = NULL;
    }
    for (size_t i = 0; i < nq; i++) {
        sc->allowed_of[i] = NULL;
        if (!q[i].coreset) {
            if (q[i].kept) memset(q[i].kept + il * E, 1, E);
            continue;
        }
        uint8_t *al = sc->allowed_seq + i * E;
        shared_coreset(be, al, sc->router + q[i].off * E, q[i].n, E, w->n_used, q[i].top_p);
        size_t kept = 0;
        for (size_t e = 0; e < E; e++) kept += al[e] != 0;
        st->coreset_kept += kept;
        st->coreset_layers++;
        sc->allowed_of[i] = al;
        if (q[i].kept) memcpy(q[i].kept + il * E, al, E);
    }
    if (be->moe_hook.ctx) { /* another MoE (moe_hook.h: the simulated expert parallelism): each sequence's rows, bit-identical */
        for (size_t i = 0; i < nq; i++)
            be->moe_hook.forward(be->moe_hook.ctx, sc->y + q[i].off * w->n_embd, sc->x + q[i].off * w->n_embd, q[i].n, w,
                           sc->allowed_of[i], be->pool);
        return false;
    }
    const cpu_moe_epilogue epi = {resid_epilogue_row, after};
    return cpu_moe_forward_groups_then(sc->y, sc->x, n, w, sc->group, sc->allowed_of, any ? sc->router : NULL, be->pool,
                                       sc->moe, before, &epi) != 0;
}

static resid_job resid_job_make(backend *be, const cpu_shared_seq *q, const float *norm_w, bool store, size_t slot) {
    cpu_scratch *sc = &be->sc;
    return (resid_job){.h = sc->h, .x = sc->x, .y = sc->y, .norm_w = norm_w, .q = q, .group = sc->group,
                       .H = be->hp->n_embd, .slot = slot, .eps = be->hp->rms_eps, .store = store};
}

static void resid_rows(backend *be, const cpu_shared_seq *q, size_t nq, size_t n, const float *norm_w, bool store,
                       size_t slot) {
    cpu_scratch *sc = &be->sc;
    const size_t H = be->hp->n_embd;
    if (!cpu_grouped()) { /* the old order: on the calling thread */
        for (size_t i = 0; i < n * H; i++) sc->h[i] = sc->h[i] + sc->y[i];
        if (store) shared_hidden_store(q, nq, slot, sc->h, H);
        if (norm_w) cpu_rms_norm(sc->x, sc->h, norm_w, n, H, be->hp->rms_eps);
        return;
    }
    resid_job j = resid_job_make(be, q, norm_w, store, slot);
    threadpool_run(be->pool, n, resid_task, &j);
}

void cpu_pass_run_shared(backend *be, cpu_shared_seq *q, size_t nq, cpu_pass_mode mode, backend_pass_stats *stats) {
    const clover_model *m = be->model;
    const size_t H = be->hp->n_embd, L = be->hp->n_layer;
    const float eps = be->hp->rms_eps;
    cpu_scratch *sc = &be->sc;
    backend_pass_stats unused = {0};
    backend_pass_stats *st = stats ? stats : &unused;

    /* stack the sequences by row count (stable), so rows of one path are adjacent */
    size_t n = 0;
    for (size_t done = 0; done < nq; done++) {
        size_t best = nq;
        for (size_t i = 0; i < nq; i++) {
            bool placed = false;
            for (size_t r = 0; r < n && !placed; r++) placed = sc->group[r] == i;
            if (placed || q[i].n == 0) continue;
            if (best == nq || q[i].n < q[best].n) best = i;
        }
        if (best == nq) break;
        q[best].off = n;
        for (size_t r = 0; r < q[best].n; r++) sc->group[n + r] = (uint32_t)best, sc->own[n + r] = (uint32_t)q[best].n;
        n += q[best].n;
    }
    if (n == 0) return;
    st->passes++;

    const size_t row_bytes = quant_row_bytes(m->token_embd.type, H), lo = be->layer_lo, hi = be->layer_hi;
    for (size_t i = 0; i < nq; i++) {
        if (lo > 0) { /* a later part of a split pass: the rows as the part before left them */
            memcpy(sc->h + q[i].off * H, q[i].in_h, q[i].n * H * sizeof *sc->h);
            continue;
        }
        for (size_t r = 0; r < q[i].n; r++)
            quant_dequantize_row(m->token_embd.type, (const char *)m->token_embd.data + (size_t)q[i].ids[r] * row_bytes,
                                 sc->h + (q[i].off + r) * H, H);
    }
    shared_hidden_store(q, nq, lo, sc->h, H);

    for (size_t l = lo; l < hi; l++) {
        const model_layer *ml = &m->layers[l];
        if (l == lo) cpu_rms_norm(sc->x, sc->h, ml->attn_norm.data, n, H, eps); /* later layers: resid_rows */
        double t0 = timer_now(), p0 = matmul_thread_seconds();
        if (ml->kind == MODEL_LAYER_ATTENTION) {
            shared_attention(be, q, nq, l, n, mode);
            st->attn_s += timer_now() - t0;
            st->attn_mm_s += matmul_thread_seconds() - p0;
        } else {
            shared_gdn(be, q, nq, l, n, mode);
            st->gdn_s += timer_now() - t0;
            st->gdn_mm_s += matmul_thread_seconds() - p0;
        }
        /* the residual step after the mixer: in the router's run of the pool (cpu_grouped), else as before */
        resid_job mid = resid_job_make(be, q, ml->post_norm.data, false, 0);
        const threadpool_phase mid_ph = {n, resid_task, &mid};
        const bool grouped = cpu_grouped();
        if (!grouped) resid_rows(be, q, nq, n, ml->post_norm.data, false, 0);
        t0 = timer_now(), p0 = matmul_thread_seconds();
        const float *next_norm = l + 1 < hi ? m->layers[l + 1].attn_norm.data : NULL;
        resid_job after = resid_job_make(be, q, next_norm, true, l + 1);
        /* the residual steps on either side too, when it could */
        const bool done = shared_moe(be, q, nq, l, n, st, grouped ? &mid_ph : NULL, &after);
        st->moe_s += timer_now() - t0;
        st->moe_mm_s += matmul_thread_seconds() - p0;
        if (!done) resid_rows(be, q, nq, n, next_norm, true, l + 1);
    }
    if (hi < L)
        for (size_t i = 0; i < nq; i++) memcpy(q[i].out_h, sc->h + q[i].off * H, q[i].n * H * sizeof *sc->h);
}

/* The head over head rows [g0, g0 + nr) into sc.logits. */
static void head_logits(backend *be, size_t g0, size_t nr) {
    const clover_model *m = be->model;
    const size_t H = be->hp->n_embd;
    cpu_scratch *sc = &be->sc;
    for (size_t i = 0; i < nr; i++) /* sc.x and sc.h are separate buffers: rows of h stay intact */
        cpu_rms_norm(sc->x + i * H, sc->h + sc->head_rows[g0 + i] * H, m->output_norm.data, 1, H, be->hp->rms_eps);
    matmul_grouped(be->pool, m->output.type, m->output.data, be->hp->n_vocab, H, sc->x, nr, sc->logits, sc->own + g0);
}

void cpu_head_windows(backend *be, size_t nh, const size_t *at, const size_t *m, size_t n_seqs, cpu_head_part_fn each,
                      void *ctx, backend_pass_stats *stats) {
    for (size_t g0 = 0; g0 < nh; g0 += be->logit_rows) {
        const size_t g1 = nh - g0 < be->logit_rows ? nh : g0 + be->logit_rows;
        const double t0 = timer_now(), p0 = matmul_thread_seconds();
        head_logits(be, g0, g1 - g0);
        if (stats) stats->head_s += timer_now() - t0, stats->head_mm_s += matmul_thread_seconds() - p0;
        for (size_t k = 0; k < n_seqs; k++) {
            const size_t a = at[k] > g0 ? at[k] : g0, b = at[k] + m[k] < g1 ? at[k] + m[k] : g1;
            if (a < b) each(ctx, k, a, b, g0);
        }
    }
}
