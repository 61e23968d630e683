/*
 * backend_cuda_stack_preview.c: a call's previews, and its block resolves
 * pass by pass, as stacked passes (issue 25). One preview of one 32-row
 * block reads every weight (and ~200 routed experts a layer) for 32 rows;
 * sixteen sequences' blocks side by side in one pass read them once for
 * 512 rows. The sequences' blocks sit one after another in the executor's
 * rows (backend_cuda_stack.c's executor, a session without KV):
 *  - the products take the kernels each block takes alone (its rows choose
 *    them, cuda_matmul.h: the integer path has the same bits at any row
 *    count, the TF32 and f32 kernels compute each row independently), so
 *    only blocks whose rows choose the same kernels share a pass (more than
 *    8 rows, or at most 8);
 *  - attention without the causal mask over each sequence's own KV cache
 *    (its block's K/V rows written past its committed length, as alone);
 *  - per sequence, on its rows: the GDN block operator over its committed
 *    ring and state, the coreset and the routing inside it (its kept flags
 *    are copied to its session for preview_debug);
 *  - the head over the masked rows of every block at once when its bits do
 *    not depend on the row count (a quantised head, or a float file's f32
 *    one), else block by block; then each block's pick on the device with
 *    its own forbidden ids, penalties, ramps and draws.
 * One host sync per pass. Nothing of a session changes (previews are read
 * only). A block whose pick the device hands back (id -2) is picked on the
 * host from its row's logits (backend/pick.c).
 *
 * Resolve runs the LowConfidence loop of every block in lock step: each
 * round is one stacked preview of the blocks still resolving, then each
 * block fixes its rows on the host exactly as backend_cuda_preview.c's
 * cuda_resolve_seq does alone (the same draws, order and rules).
 *
 * What the stack does not take runs alone (cuda_preview_seq /
 * cuda_resolve_seq): raw logits, log-probabilities or top-N, a session
 * recording its residual stream, penalty lists that do not fit the pick's
 * buffers.
 */
#include <string.h>

#include "backend/pick.h"
#include "backend/penalties.h"
#include "backend/sampler.h"
#include "base/alloc.h"
#include "base/error.h"
#include "base/rng.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_matmul.h"
#include "cuda/cuda_mem.h"
#include "cuda/cuda_pick_rows.h"
#include "cuda/cuda_preview.h"
#include "model/gdn_ratio.h"

enum { MAX_SEQS = 64, MAX_B = 256 };

/* One block of a stacked preview pass. */
typedef struct sp_item {
    backend_session *s;
    const int32_t *block;
    size_t b;
    const backend_preview_opts *opts;
    const backend_pick *pick; /* NULL: no picks */
    size_t rows[MAX_B];       /* the picked block rows, ascending */
    size_t n_pick;
    float u[MAX_B];           /* their draws (sampling) */
    bool sampled;
    backend_pick_out out;     /* indexed by block row */
    int rc;
    clover_error *err;
} sp_item;

/* Whether the stack x takes a block of b rows (beyond the checks of a preview alone). */
static bool stack_takes(const backend_session *x, const backend_session *s, size_t b, const backend_pick *pick) {
    const size_t V = x->hp->n_vocab;
    /* diagnostic sessions (the residual stream, expert marks, no graphs) keep their own pass */
    if (s->dbg_hidden || s->count_experts || s->pgraph_off || b > x->max_rows || b > MAX_B || x->stack_preview_off)
        return false;
    if (!pick) return true;
    if (pick->n_forbid > V) return false;
    const backend_penalties *pen = pick->pen;
    return !pen || (pen->n_counts <= V && pen->n_stop_ids <= V);
}

/* Pass row t of the stacked logits (the block's j-th picked row, block row r) picked on the host into it->out. */
static int host_pick_one(backend_session *x, host_pick_ctx *pc, sp_item *it, size_t t, size_t j, size_t r,
                         backend_pass_stats *stats) {
    const size_t V = x->hp->n_vocab;
    float *buf = mem_alloc(it->b * V * sizeof(float));
    if (!buf) return error_set(it->err, CLOVER_E_NOMEM, "preview: no memory for %zu rows of logits", it->b);
    char why[CUDA_WHY] = "";
    if (cuda_d2h(buf + r * V, x->sc.logits + t * V, V * sizeof(float), why)) {
        mem_free(buf);
        return error_set(it->err, CLOVER_E_INTERNAL, "CUDA preview: %s", why);
    }
    size_t idx = r;
    int rc = host_pick_rows(pc, it->pick, buf, &idx, 1, it->sampled ? &it->u[j] : NULL, it->block, it->b, &it->out,
                            stats, it->err);
    mem_free(buf);
    return rc;
}

/* Every block's picked rows in grouped launches (cuda_pick_rows_group: one set per plog's worth of rows, a
 * descriptor per row: its logits row t, its block's forbidden ids and penalties, its ramps at t), after the
 * lists and draws are on the device; the bits of cuda_pick_rows per block (CLOVER_CUDA_PICK_EACH). */
static int group_picks(backend_session *x, const sp_item *it, size_t m, const size_t *t0, const size_t *fo,
                       const cuda_pick_pen *dp, size_t n_head, clover_error *err) {
    const size_t V = x->hp->n_vocab, R = x->max_rows, cap = cuda_session_pick_rows(x);
    cuda_scratch *sc = &x->sc;
    char why[CUDA_WHY] = "";
    for (size_t i = 0; i < m; i++) {
        const backend_pick *pk = it[i].pick;
        if (!pk || !it[i].n_pick) continue;
        for (size_t j = 0; j < it[i].n_pick; j++) {
            const size_t t = t0[i] + j;
            cuda_pick_row d = {.src = (int32_t)t, .n_forbid = (int32_t)pk->n_forbid, .forbid = sc->pk_forbid + fo[i],
                               .has_pen = pk->pen != NULL};
            if (pk->pen) {
                d.pen = dp[i];
                d.pen.ramp_len = sc->pk_ramp + t;
                d.pen.ramp_think = sc->pk_ramp + R + t;
            }
            x->h_pk_desc[t] = d;
            x->h_pk_par[t] = (cuda_pick_params){pk->temperature, pk->top_k, pk->top_p};
        }
    }
    if (cuda_h2d_async(sc->pk_desc, x->h_pk_desc, n_head * sizeof(cuda_pick_row), x->stream, why) ||
        cuda_h2d_async(sc->pk_par, x->h_pk_par, n_head * sizeof(cuda_pick_params), x->stream, why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA preview pick: %s", why);
    for (size_t c0 = 0; c0 < n_head; c0 += cap) {
        const size_t cnt = n_head - c0 < cap ? n_head - c0 : cap;
        if (cuda_pick_rows_group(sc->pk_id + c0, sc->pk_conf + c0, sc->plog, sc->logits, sc->pk_desc + c0,
                                 sc->pk_par + c0, cnt, V, sc->pk_u + c0, x->stream))
            return error_set(err, CLOVER_E_INTERNAL, "CUDA preview pick: %s", cuda_preview_last_error());
    }
    return CLOVER_OK;
}

/* One stacked pass over m blocks (rows, penalty lists and sequences fit: the caller grouped them). */
static void stack_pass(backend_session *x, host_pick_ctx *pc, sp_item *it, size_t m, backend_pass_stats *stats) {
    const size_t V = x->hp->n_vocab, R = x->max_rows, st = x->seq_stride, L = x->hp->n_layer, E = x->hp->n_expert;
    cuda_scratch *sc = &x->sc;
    char why[CUDA_WHY] = "";
    clover_error perr = {0};
    cuda_stack_seq sseq[MAX_SEQS];
    size_t row0 = 0, seq_rows = 0, n_head = 0, t0[MAX_SEQS], n_core = 0;
    /* rows, descriptors, the head's rows (block row r of sequence i is pass row row0_i + r) */
    for (size_t i = 0; i < m; i++) {
        backend_session *s = it[i].s;
        const size_t b = it[i].b;
        memcpy(x->h_ids + row0, it[i].block, b * sizeof(int32_t));
        for (uint32_t l = 0; l < L; l++) {
            const cuda_layer *ly = &s->layers[l];
            const size_t slot = (size_t)ly->slot * st + i;
            if (ly->kind == MODEL_LAYER_ATTENTION)
                x->h_aseq[slot] = (cuda_attn_seq){.k_cache = ly->k_cache, .v_cache = ly->v_cache,
                                                  .pos = (int32_t)s->n_past, .row0 = (int32_t)row0, .n = (int32_t)b};
            else
                x->h_gseq[slot] = (cuda_gdn_seq){.ring = ly->ring, .state = ly->state, .row0 = (int32_t)row0,
                                                 .n = (int32_t)b};
        }
        sseq[i] = (cuda_stack_seq){.s = s, .row0 = row0, .n = b, .coreset = it[i].opts->coreset,
                                   .ln_ratio = gdn_block_ln_ratio(b, it[i].opts->record_block_size),
                                   .top_p = it[i].opts->coreset_top_p};
        n_core += it[i].opts->coreset;
        t0[i] = n_head;
        for (size_t j = 0; j < it[i].n_pick; j++) x->h_pk_rows[n_head++] = (int32_t)(row0 + it[i].rows[j]);
        if (b > seq_rows) seq_rows = b;
        row0 += b;
    }
    const size_t n = row0;
    int e = cuda_memset(sc->kept_count, 0, sizeof(uint32_t), x->stream, why) ||
            (n_head && cuda_h2d_async(sc->pk_rows, x->h_pk_rows, n_head * sizeof(int32_t), x->stream, why));
    int rc = CLOVER_OK;
    if (e) rc = error_set(&perr, CLOVER_E_INTERNAL, "CUDA preview: %s", why);
    cuda_pass p = {.pos = 0, .n = n, .head_r0 = n, .stats = stats, .preview = true, .n_seq = m, .seq_rows = seq_rows,
                   .sseq = sseq};
    if (!rc && stats) stats->passes++;
    if (!rc) { /* a pass with a coreset: its row launches' PDL as cuda_device.cu's CLOVER_CUDA_PDL_ROWS says */
        const int mark = cuda_pdl_rows_pass(n_core ? CUDA_PDL_MARK_STACKED : 0);
        rc = cuda_pass_enqueue(x, &p, &perr);
        cuda_pdl_rows_pass(mark);
    }
    /* the head: every block's masked rows at once when the row count changes no bit, else block by block */
    if (!rc && n_head) {
        if (cuda_pass_head_row_free(x))
            rc = cuda_pass_head_rows_at(x, sc->pk_rows, n_head, 0, &perr);
        else
            for (size_t i = 0; i < m && !rc; i++)
                rc = cuda_pass_head_rows_at(x, sc->pk_rows + t0[i], it[i].n_pick, t0[i], &perr);
    }
    /* the picks: each block's forbidden ids, counted ids, counts and stop ids side by side, its ramps and
     * draws at its picked rows' places */
    cuda_pick_pen dp[MAX_SEQS];
    size_t fo[MAX_SEQS], nf = 0, nc = 0, ns = 0;
    int32_t *sel = x->h_pk_rows + R;
    for (size_t i = 0; i < m && !rc; i++) {
        const backend_pick *pk = it[i].pick;
        memset(&dp[i], 0, sizeof dp[i]);
        fo[i] = nf;
        if (!pk || !it[i].n_pick) continue;
        for (size_t j = 0; j < it[i].n_pick; j++) {
            sel[t0[i] + j] = (int32_t)(t0[i] + j);
            x->h_pk_u[t0[i] + j] = it[i].sampled ? (double)it[i].u[j] : 0.0;
            x->h_pk_ramp[t0[i] + j] = 0.0f;
            x->h_pk_ramp[R + t0[i] + j] = 0.0f;
        }
        if (pk->n_forbid) memcpy(x->h_pk_forbid + nf, pk->forbid, pk->n_forbid * sizeof(int32_t));
        nf += pk->n_forbid;
        const backend_penalties *pen = pk->pen;
        if (!pen) continue;
        const clover_penalties *pp = &pen->p;
        const bool open = cuda_think_open(pen, it[i].block, it[i].b);
        dp[i] = (cuda_pick_pen){.count_ids = sc->pk_cids + nc,
                                .counts = sc->pk_counts + nc,
                                .n_counts = (int)pen->n_counts,
                                .frequency = pp->frequency_penalty,
                                .presence = pp->presence_penalty,
                                .repetition = pp->repetition_penalty,
                                .stop_ids = sc->pk_stop + ns,
                                .n_stop = (int)pen->n_stop_ids,
                                .ramp_len = sc->pk_ramp + t0[i],
                                .apply_len = pp->length_penalty != 0.0f,
                                .think_id = pen->think_end_id,
                                .ramp_think = sc->pk_ramp + R + t0[i],
                                .apply_think = open && pp->think_end_bias != 0.0f && pen->think_end_id >= 0 &&
                                               (size_t)pen->think_end_id < V};
        for (size_t j = 0; j < it[i].n_pick; j++) {
            size_t pos = pen->response_len + it[i].rows[j] + 1;
            x->h_pk_ramp[t0[i] + j] =
                dp[i].apply_len
                    ? penalty_ramp(pos, pp->length_penalty_start, pp->length_penalty_window, pp->length_penalty)
                    : 0.0f;
            x->h_pk_ramp[R + t0[i] + j] =
                dp[i].apply_think ? penalty_ramp(pos, pp->think_end_start, pp->think_end_window, pp->think_end_bias)
                                  : 0.0f;
        }
        if (pen->n_counts) {
            memcpy(x->h_pk_cids + nc, pen->count_ids, pen->n_counts * sizeof(int32_t));
            memcpy(x->h_pk_counts + nc, pen->counts, pen->n_counts * sizeof(uint32_t));
        }
        if (pen->n_stop_ids) memcpy(x->h_pk_stop + ns, pen->stop_ids, pen->n_stop_ids * sizeof(int32_t));
        nc += pen->n_counts;
        ns += pen->n_stop_ids;
    }
    const bool timed = stats && x->ev[0] && x->ev[1] && !rc && n_head; /* the picks' device time -> pick_s */
    if (timed) cuda_event_record(x->ev[0], x->stream, why);
    if (!rc && n_head) {
        e = cuda_h2d_async(sc->pk_rows + R, sel, n_head * sizeof(int32_t), x->stream, why) ||
            cuda_h2d_async(sc->pk_u, x->h_pk_u, n_head * sizeof(double), x->stream, why) ||
            cuda_h2d_async(sc->pk_ramp, x->h_pk_ramp, n_head * sizeof(float), x->stream, why) ||
            cuda_h2d_async(sc->pk_ramp + R, x->h_pk_ramp + R, n_head * sizeof(float), x->stream, why) ||
            (nf && cuda_h2d_async(sc->pk_forbid, x->h_pk_forbid, nf * sizeof(int32_t), x->stream, why)) ||
            (nc && (cuda_h2d_async(sc->pk_cids, x->h_pk_cids, nc * sizeof(int32_t), x->stream, why) ||
                    cuda_h2d_async(sc->pk_counts, x->h_pk_counts, nc * sizeof(uint32_t), x->stream, why))) ||
            (ns && cuda_h2d_async(sc->pk_stop, x->h_pk_stop, ns * sizeof(int32_t), x->stream, why));
        if (e) rc = error_set(&perr, CLOVER_E_INTERNAL, "CUDA preview pick: %s", why);
        if (!rc && !x->pick_each) rc = group_picks(x, it, m, t0, fo, dp, n_head, &perr);
        for (size_t i = 0; i < m && !rc && x->pick_each; i++) {
            const backend_pick *pk = it[i].pick;
            if (!pk || !it[i].n_pick) continue;
            cuda_pick_params cp = {pk->temperature, pk->top_k, pk->top_p};
            if (cuda_pick_rows(sc->pk_id + t0[i], sc->pk_conf + t0[i], sc->plog, sc->logits, sc->pk_rows + R + t0[i],
                               it[i].n_pick, V, sc->pk_forbid + fo[i], pk->n_forbid, pk->pen ? &dp[i] : NULL, &cp,
                               it[i].sampled ? sc->pk_u + t0[i] : NULL, x->stream))
                rc = error_set(&perr, CLOVER_E_INTERNAL, "CUDA preview pick: %s", cuda_preview_last_error());
        }
        if (!rc && (cuda_d2h_async(x->h_pk_id, sc->pk_id, n_head * sizeof(int32_t), x->stream, why) ||
                    cuda_d2h_async(x->h_pk_conf, sc->pk_conf, n_head * sizeof(float), x->stream, why)))
            rc = error_set(&perr, CLOVER_E_INTERNAL, "CUDA preview pick: %s", why);
        if (!rc && timed) cuda_event_record(x->ev[1], x->stream, why);
    }
    /* each coreset block's kept flags to its session (preview_debug) */
    for (size_t i = 0; i < m && !rc; i++)
        if (it[i].opts->coreset && cuda_d2d(it[i].s->sc.kept, sc->kept + i * L * E, L * E, x->stream, why))
            rc = error_set(&perr, CLOVER_E_INTERNAL, "CUDA preview: %s", why);
    *x->h_kept_count = 0;
    if (!rc && n_core && cuda_d2h_async(x->h_kept_count, sc->kept_count, sizeof(uint32_t), x->stream, why))
        rc = error_set(&perr, CLOVER_E_INTERNAL, "CUDA preview: %s", why);
    if (cuda_stream_sync(x->stream, why) && !rc) rc = error_set(&perr, CLOVER_E_INTERNAL, "CUDA preview: %s", why);
    if (rc) {
        for (size_t i = 0; i < m; i++) {
            it[i].rc = rc;
            *it[i].err = perr;
        }
        return;
    }
    if (timed) {
        double ps = 0.0;
        if (!cuda_event_seconds(x->ev[0], x->ev[1], &ps, why)) stats->pick_s += ps;
    }
    if (stats && n_core) {
        stats->coreset_kept += *x->h_kept_count;
        stats->coreset_layers += L * n_core;
    }
    for (size_t i = 0; i < m; i++) {
        sp_item *q = &it[i];
        q->s->has_preview = true;
        q->s->preview_b = q->b;
        q->s->preview_coreset = q->opts->coreset;
        q->rc = CLOVER_OK;
        for (size_t j = 0; j < q->n_pick && !q->rc; j++) {
            const size_t t = t0[i] + j, r = q->rows[j];
            const int32_t id = x->h_pk_id[t];
            if (id == -1)
                q->rc = error_set(q->err, CLOVER_E_INVALID, "pick: row %zu has no finite logit left", r);
            else if (id == -2)
                q->rc = host_pick_one(x, pc, q, t, j, r, stats);
            else {
                q->out.id[r] = id;
                q->out.conf[r] = x->h_pk_conf[t];
            }
        }
    }
}

/* A group of one: the session's own preview pass (backend_cuda_preview.c), the same rows and draws. */
static void one_alone(host_pick_ctx *pc, sp_item *it, backend_pass_stats *stats) {
    uint8_t pending[MAX_B] = {0};
    float u_rows[MAX_B] = {0};
    for (size_t j = 0; j < it->n_pick; j++) {
        pending[it->rows[j]] = 1;
        u_rows[it->rows[j]] = it->u[j];
    }
    it->rc = cuda_preview_pick(it->s, pc, it->block, it->b, it->opts, it->n_pick ? it->pick : NULL,
                               it->n_pick ? pending : NULL, it->sampled ? u_rows : NULL, &it->out, NULL, stats,
                               it->err);
}

/* Runs items[0..n) as stacked passes: blocks whose rows choose the same kernels together, as many as the
 * executor's rows, sequences and pick buffers hold. */
static void stack_run(backend_session *x, host_pick_ctx *pc, sp_item *items, size_t n, backend_pass_stats *stats) {
    const size_t V = x->hp->n_vocab, R = x->max_rows;
    sp_item *grp = mem_alloc(MAX_SEQS * sizeof *grp);
    if (!grp) {
        for (size_t i = 0; i < n; i++)
            items[i].rc = error_set(items[i].err, CLOVER_E_NOMEM, "preview: no memory for a stacked pass");
        return;
    }
    for (int cls = 0; cls < 2; cls++) { /* blocks of more than 8 rows, then blocks of at most 8 */
        size_t i = 0;
        while (i < n) {
            size_t m = 0, rows = 0, nf = 0, nc = 0, ns = 0, heads = 0;
            size_t idx[MAX_SEQS];
            for (; i < n && m < MAX_SEQS; i++) {
                sp_item *q = &items[i];
                if ((q->b > CUDA_MATMUL_DECODE_MAX_ROWS) != (cls == 0)) continue;
                const backend_pick *pk = q->pick;
                const size_t f = pk ? pk->n_forbid : 0, c = pk && pk->pen ? pk->pen->n_counts : 0,
                             s = pk && pk->pen ? pk->pen->n_stop_ids : 0;
                if (rows + q->b > R || nf + f > V || nc + c > V || ns + s > V || heads + q->n_pick > R) break;
                rows += q->b, nf += f, nc += c, ns += s, heads += q->n_pick;
                idx[m] = i;
                grp[m++] = *q;
            }
            if (!m) {
                if (i < n && (items[i].b > CUDA_MATMUL_DECODE_MAX_ROWS) == (cls == 0)) { /* cannot happen: b <= R */
                    items[i].rc = error_set(items[i].err, CLOVER_E_INTERNAL, "preview: a block larger than a pass");
                    i++;
                }
                continue;
            }
            if (m == 1)
                one_alone(pc, &grp[0], stats); /* a block alone keeps its own pass (and its captured graph) */
            else
                stack_pass(x, pc, grp, m, stats);
            for (size_t k = 0; k < m; k++) items[idx[k]].rc = grp[k].rc;
        }
    }
    mem_free(grp);
}

/* The picked rows and draws of a block: pending rows in ascending order. */
static void item_rows(sp_item *it, const uint8_t *pending, const float *u_rows) {
    it->n_pick = 0;
    if (!it->pick || !pending) return;
    for (size_t r = 0; r < it->b; r++)
        if (pending[r]) {
            it->rows[it->n_pick] = r;
            it->u[it->n_pick] = u_rows ? u_rows[r] : 0.0f;
            it->n_pick++;
        }
}

int cuda_stack_previews(struct backend *be, backend_session *x, host_pick_ctx *pc, backend_preview_seq *seqs,
                        size_t n_seqs, backend_pass_stats *stats) {
    sp_item *items = mem_calloc(n_seqs ? n_seqs : 1, sizeof *items);
    size_t *of = mem_calloc(n_seqs ? n_seqs : 1, sizeof *of);
    if (!items || !of) {
        mem_free(items);
        mem_free(of);
        return 1; /* the caller runs them alone */
    }
    size_t n = 0;
    for (size_t i = 0; i < n_seqs; i++) {
        backend_preview_seq *q = &seqs[i];
        q->err.code = 0;
        q->err.message[0] = 0;
        const backend_pick *pick = q->pending ? q->pick : NULL;
        if (!q->s) q->rc = error_set(&q->err, CLOVER_E_INVALID, "preview: no session");
        else if (q->s->be != be)
            q->rc = error_set(&q->err, CLOVER_E_INVALID, "preview: the session belongs to another backend");
        else if (q->logits || q->in_hidden || q->out_hidden || !stack_takes(x, q->s, q->b, pick) ||
                 (pick && (q->pick_out.logprob || (pick->n_top && q->pick_out.top_id))))
            q->rc = cuda_preview_seq(q->s, pc, q, stats, &q->err); /* alone */
        else if (q->pending && !q->pick)
            q->rc = error_set(&q->err, CLOVER_E_INVALID, "preview: pending rows but no pick");
        else if ((q->rc = cuda_preview_check(q->s, pc, q->block, q->b, &q->opts, pick, &q->err)))
            ; /* as alone: the check's own message */
        else if (pick && (!q->pick_out.id || !q->pick_out.conf))
            q->rc = error_set(&q->err, CLOVER_E_INVALID, "preview: picks need id and conf arrays");
        else if (pick && !sampler_is_greedy(&(sampler_params){pick->temperature, pick->top_k, pick->top_p}) && !q->u)
            q->rc = error_set(&q->err, CLOVER_E_INVALID, "preview: sampled picks need their draws");
        else {
            sp_item *it = &items[n];
            *it = (sp_item){.s = q->s, .block = q->block, .b = q->b, .opts = &q->opts, .pick = pick,
                            .sampled = q->u != NULL, .out = q->pick_out, .err = &q->err};
            item_rows(it, q->pending, q->u);
            of[n++] = i;
        }
    }
    stack_run(x, pc, items, n, stats);
    int first = CLOVER_OK;
    for (size_t k = 0; k < n; k++) {
        seqs[of[k]].rc = items[k].rc;
        if (items[k].rc) error_prefix(&seqs[of[k]].err, "preview");
    }
    for (size_t i = 0; i < n_seqs; i++)
        if (seqs[i].rc && !first) first = seqs[i].rc;
    mem_free(items);
    mem_free(of);
    return first;
}

/* One block's LowConfidence loop, a round at a time (cuda_resolve_seq's, split at its preview). */
typedef struct rs_state {
    backend_resolve_seq *q;
    uint8_t pending[MAX_B];
    int32_t id[MAX_B];
    float cf[MAX_B], u[MAX_B];
    rng_state rng;
    bool greedy, active;
    size_t n_pending;
} rs_state;

int cuda_stack_resolves(struct backend *be, backend_session *x, host_pick_ctx *pc, backend_resolve_seq *seqs,
                        size_t n_seqs, const volatile int *cancel, backend_pass_stats *stats) {
    rs_state *rs = mem_calloc(n_seqs ? n_seqs : 1, sizeof *rs);
    sp_item *items = mem_calloc(n_seqs ? n_seqs : 1, sizeof *items);
    size_t *of = mem_calloc(n_seqs ? n_seqs : 1, sizeof *of);
    if (!rs || !items || !of) {
        mem_free(rs);
        mem_free(items);
        mem_free(of);
        return 1; /* the caller runs them alone */
    }
    size_t n_active = 0;
    for (size_t i = 0; i < n_seqs; i++) {
        backend_resolve_seq *q = &seqs[i];
        rs_state *r = &rs[i];
        r->q = q;
        q->err.code = 0;
        q->err.message[0] = 0;
        q->rc = CLOVER_OK;
        q->passes = 0;
        q->cancelled = false;
        if (!q->s) q->rc = error_set(&q->err, CLOVER_E_INVALID, "resolve: no session");
        else if (q->s->be != be)
            q->rc = error_set(&q->err, CLOVER_E_INVALID, "resolve: the session belongs to another backend");
        else if (!q->block || !q->conf || !q->pick || !q->rng || !q->fixed_at)
            q->rc = error_set(&q->err, CLOVER_E_INVALID, "resolve: block, conf, pick, rng and fixed_at are required");
        else if (q->b > MAX_B)
            q->rc = error_set(&q->err, CLOVER_E_INVALID, "resolve: a block of %zu rows, at most 256", q->b);
        else if (!(q->threshold >= 0.0f && q->threshold <= 1.0f))
            q->rc = error_set(&q->err, CLOVER_E_INVALID, "resolve: threshold %g, expected 0..1", (double)q->threshold);
        else if (!stack_takes(x, q->s, q->b, q->pick))
            q->rc = cuda_resolve_seq(q->s, pc, q, cancel, stats, &q->err); /* alone */
        else if (!(q->rc = cuda_preview_check(q->s, pc, q->block, q->b, &q->opts, q->pick, &q->err))) {
            for (size_t k = 0; k < q->b; k++) {
                r->pending[k] = 1;
                q->fixed_at[k] = 0;
                q->conf[k] = 0.0f;
            }
            sampler_params sp = {q->pick->temperature, q->pick->top_k, q->pick->top_p};
            r->greedy = sampler_is_greedy(&sp) != 0;
            r->rng = (rng_state){*q->rng};
            r->n_pending = q->b;
            r->active = true;
            n_active++;
        }
    }
    while (n_active) {
        size_t n = 0;
        for (size_t i = 0; i < n_seqs; i++) {
            rs_state *r = &rs[i];
            backend_resolve_seq *q = r->q;
            if (!r->active) continue;
            if (r->n_pending == 0) { /* resolved */
                *q->rng = r->rng.s;
                r->active = false;
                n_active--;
                continue;
            }
            if (q->passes == q->b) {
                q->rc = error_set(&q->err, CLOVER_E_INTERNAL, "resolve: %zu passes left %zu of %zu rows unresolved",
                                  q->passes, r->n_pending, q->b);
                r->active = false;
                n_active--;
                continue;
            }
            if ((cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED)) ||
                (q->cancel && __atomic_load_n(q->cancel, __ATOMIC_RELAXED))) {
                q->cancelled = true;
                *q->rng = r->rng.s;
                r->active = false;
                n_active--;
                continue;
            }
            for (size_t k = 0; k < q->b; k++) /* the draws: one per pending row, in row order */
                r->u[k] = r->pending[k] && !r->greedy ? rng_uniform(&r->rng) : 0.0f;
            sp_item *it = &items[n];
            *it = (sp_item){.s = q->s, .block = q->block, .b = q->b, .opts = &q->opts, .pick = q->pick,
                            .sampled = !r->greedy, .out = {.id = r->id, .conf = r->cf}, .err = &q->err};
            item_rows(it, r->pending, r->greedy ? NULL : r->u);
            of[n++] = i;
        }
        if (!n) break;
        stack_run(x, pc, items, n, stats);
        for (size_t k = 0; k < n; k++) {
            rs_state *r = &rs[of[k]];
            backend_resolve_seq *q = r->q;
            const size_t b = q->b;
            if (items[k].rc) {
                q->rc = items[k].rc;
                error_prefix(&q->err, "resolve");
                r->active = false;
                n_active--;
                continue;
            }
            size_t best = b, fixed = 0;
            bool bad = false;
            for (size_t j = 0; j < b; j++) {
                if (!r->pending[j]) continue;
                if (!(r->cf[j] >= 0.0f)) {
                    q->rc = error_set(&q->err, CLOVER_E_INTERNAL,
                                      "resolve, row %zu: the preview's logits are not finite", j);
                    bad = true;
                    break;
                }
                if (best == b || r->cf[j] > r->cf[best]) best = j;
            }
            if (bad) {
                r->active = false;
                n_active--;
                continue;
            }
            q->passes++;
            for (size_t j = 0; j < b; j++)
                if (r->pending[j] && r->cf[j] > q->threshold) {
                    q->block[j] = r->id[j], q->conf[j] = r->cf[j], r->pending[j] = 0;
                    q->fixed_at[j] = (uint8_t)q->passes;
                    fixed++;
                }
            if (fixed == 0) {
                q->block[best] = r->id[best], q->conf[best] = r->cf[best], r->pending[best] = 0;
                q->fixed_at[best] = (uint8_t)q->passes;
                fixed = 1;
            }
            r->n_pending -= fixed;
            if (q->rec_guess || q->rec_conf)
                for (size_t j = 0; j < b; j++) {
                    bool was_fixed = !r->pending[j] && q->fixed_at[j] != q->passes;
                    if (q->rec_guess) q->rec_guess[(q->passes - 1) * b + j] = was_fixed ? q->block[j] : r->id[j];
                    if (q->rec_conf) q->rec_conf[(q->passes - 1) * b + j] = was_fixed ? q->conf[j] : r->cf[j];
                }
        }
    }
    int first = CLOVER_OK;
    for (size_t i = 0; i < n_seqs; i++)
        if (seqs[i].rc && !first) first = seqs[i].rc;
    mem_free(rs);
    mem_free(items);
    mem_free(of);
    return first;
}
