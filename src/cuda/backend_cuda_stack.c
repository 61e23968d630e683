/*
 * backend_cuda_stack.c: the decode steps of a call's sequences as ONE pass
 * (issue 25). A decode step of one sequence reads every weight once for one
 * row; sixteen sequences one after another read them sixteen times. Here
 * the rows of n one-row commits are stacked into one pass on the backend's
 * stacked executor (a session without KV, backend_cuda_session.c): each
 * product reads its weights once for the n rows (the MoE each routed expert
 * once for the rows routed to it), and the attention and GDN kernels take
 * one descriptor per sequence (its own KV cache and position, its own ring
 * and state: cuda_attention.h, cuda_gdn.h), written into the executor's
 * pinned mirrors here and copied by the pass.
 *
 * Batch invariance: every product takes the kernel a one-row sequence takes
 * alone (the pass's seq_rows = 1: the decode kernels, in groups of 8 rows,
 * which compute each row independently of the others, cuda_matmul.h), the
 * GDN layers the recurrence (one row each), the attention's split plan
 * depends only on each sequence's own length. A sequence alone goes through
 * this same path (n = 1), so alone and stacked differ in nothing but the
 * row's place: tests/unit/test_cuda_batch.c holds it bit for bit.
 *
 * The pass (and the copy of the logits back when a sequence wants them) is
 * a captured CUDA graph per row count, replayed after its first use; the
 * picks follow on the device (pick_rows.cu, the causal form: forbidden ids,
 * greedy or the request's draw), 8 bytes a row back, then one host sync for
 * the whole call. Rows the device hands back (id -2) and rows asking for
 * log-probabilities or top-N are picked on the host from the row's logits
 * by backend/pick.c, the contract's oracle.
 *
 * Chunks (CLOVER_CUDA_STACK_CHUNKS=1, serve25): commits of 2..max_rows rows
 * with no per-row output (prompt chunks; the last one with its pick) stack
 * the same way, sequence i's rows at pass rows row0_i.., the pass's
 * seq_rows the longest chunk. The caller groups them so that every kernel
 * choice that follows a sequence's own row count is the same for all of a
 * pass's chunks and for each chunk alone: float products take the decode
 * kernel up to D rows of a sequence and the chunk form past D (so chunks of
 * 2..D rows and of more than D rows never share a pass), the GDN layers the
 * chunked form for every chunk (seq_rows > 1, as alone), the attention and
 * GDN kernels one descriptor per sequence; integer products give the same
 * bits at any row count. A chunk alone takes this path too (a pass of one),
 * so alone and stacked run the same code. The head runs over each
 * sequence's last row only, gathered (one row at a time for a float head,
 * whose kernel follows the rows), eagerly: no graph per shape.
 */
#include <stdio.h>
#include <string.h>

#include "backend/pick.h"
#include "base/alloc.h"
#include "base/error.h"
#include "cuda/backend_cuda_internal.h"
#include "cuda/cuda_mem.h"
#include "cuda/cuda_pick_rows.h"
#include "cuda/cuda_preview.h"

/* A pick that needs the host: log-probabilities or the top-N (the device gives id and confidence only). */
static bool host_pick_wanted(const backend_commit_seq *q) {
    return q->n_pick && (q->pick_out.logprob || (q->pick->n_top && q->pick_out.top_id));
}

static void fail_all(backend_commit_seq *const *qs, size_t n, int rc, const char *msg) {
    for (size_t i = 0; i < n; i++) {
        qs[i]->rc = rc;
        error_set(&qs[i]->err, rc, "CUDA decode: %s", msg);
    }
}

/* The pass for n rows (and the logits back when want), from the graph of that shape. */
static int stack_pass(backend_session *x, size_t n, bool want, backend_pass_stats *stats, clover_error *err) {
    const size_t V = x->hp->n_vocab;
    char why[CUDA_WHY] = "";
    cuda_pass p = {.pos = 0, .n = n, .head_r0 = 0, .stats = stats, .n_seq = n, .seq_rows = 1};
    void **g = &x->sgraph[want][n];
    if (stats) stats->passes++;
    if (!*g && !x->sgraph_failed) {
        if (cuda_graph_begin(x->stream, why) == 0) {
            int rc = cuda_pass_enqueue(x, &p, err);
            int copy = rc || !want ? 0 : cuda_d2h_async(x->h_logits, x->sc.logits, n * V * sizeof(float), x->stream, why);
            void *exec = NULL;
            int end = cuda_graph_end(x->stream, &exec, why);
            if (rc) {
                cuda_graph_destroy(exec);
                return rc;
            }
            if (copy) {
                cuda_graph_destroy(exec);
                return error_set(err, CLOVER_E_INTERNAL, "CUDA decode: %s", why);
            }
            if (end == 0) *g = exec;
        }
        if (!*g) x->sgraph_failed = true; /* capture refused: eager from now on */
    }
    if (*g) {
        if (cuda_graph_launch(*g, x->stream, why)) return error_set(err, CLOVER_E_INTERNAL, "CUDA decode: %s", why);
        return CLOVER_OK;
    }
    int rc = cuda_pass_enqueue(x, &p, err);
    if (rc) return rc;
    if (want && cuda_d2h_async(x->h_logits, x->sc.logits, n * V * sizeof(float), x->stream, why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA decode: %s", why);
    return CLOVER_OK;
}

/* The stacked pass of chunks: total rows (descriptors and ids written by the caller), n sequences of at most
 * seq_rows rows each; then, when head, the head over each sequence's last row (pass row last[i] gives logits
 * row i) and, when want, those n rows of logits back. Eager: chunk shapes vary too much for a graph each. */
static int stack_chunk_pass(backend_session *x, const int32_t *last, size_t total, size_t n, size_t seq_rows,
                            bool head, bool want, backend_pass_stats *stats, clover_error *err) {
    const size_t V = x->hp->n_vocab, R = x->max_rows;
    cuda_scratch *sc = &x->sc;
    char why[CUDA_WHY] = "";
    cuda_pass p = {.pos = 0, .n = total, .head_r0 = total, .stats = stats, .n_seq = n, .seq_rows = seq_rows};
    if (stats) stats->passes++;
    int rc = cuda_pass_enqueue(x, &p, err);
    if (rc || !head) return rc;
    /* the second half of pk_rows: the first is the picks' (written after this, read by the device later) */
    memcpy(x->h_pk_rows + R, last, n * sizeof(int32_t));
    if (cuda_h2d_async(sc->pk_rows + R, x->h_pk_rows + R, n * sizeof(int32_t), x->stream, why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA chunks: %s", why);
    if (cuda_pass_head_row_free(x))
        rc = cuda_pass_head_rows_at(x, sc->pk_rows + R, n, 0, err);
    else /* a float head's kernel follows its rows: one row each, as a chunk alone computes its last row */
        for (size_t i = 0; i < n && !rc; i++) rc = cuda_pass_head_rows_at(x, sc->pk_rows + R + i, 1, i, err);
    if (rc) return rc;
    if (want && cuda_d2h_async(x->h_logits, sc->logits, n * V * sizeof(float), x->stream, why))
        return error_set(err, CLOVER_E_INTERNAL, "CUDA chunks: %s", why);
    return CLOVER_OK;
}

/* Row i's pick on the host (backend/pick.c) from its logits: the copy already back, or fetched now. */
static int host_pick_row(backend_session *x, host_pick_ctx *pc, backend_commit_seq *q, size_t i, bool have,
                         backend_pass_stats *stats) {
    const size_t V = x->hp->n_vocab;
    float *row = mem_alloc(V * sizeof(float)); /* picking rewrites it: a copy */
    if (!row) return error_set(&q->err, CLOVER_E_NOMEM, "commit: no memory for the picked row");
    char why[CUDA_WHY] = "";
    if (have) memcpy(row, x->h_logits + i * V, V * sizeof(float));
    else if (cuda_d2h(row, x->sc.logits + i * V, V * sizeof(float), why)) {
        mem_free(row);
        return error_set(&q->err, CLOVER_E_INTERNAL, "commit: %s", why);
    }
    backend_pick pk = *q->pick;
    pk.pen = NULL; /* no penalties on the causal path */
    size_t idx = 0;
    int rc = host_pick_rows(pc, &pk, row, &idx, 1, q->u, NULL, 0, &q->pick_out, stats, &q->err);
    if (rc) error_prefix(&q->err, "commit");
    mem_free(row);
    return rc;
}

int cuda_stack_decode(backend_session *x, host_pick_ctx *pc, backend_commit_seq *const *qs, size_t n,
                      backend_pass_stats *stats) {
    if (!n) return CLOVER_OK;
    const size_t V = x->hp->n_vocab, st = x->seq_stride;
    cuda_scratch *sc = &x->sc;
    char why[CUDA_WHY] = "";
    clover_error err = {0};
    if (n > st) {
        fail_all(qs, n, CLOVER_E_INTERNAL, "more sequences than the stacked executor holds");
        return CLOVER_E_INTERNAL;
    }
    bool want = false, head = false;
    size_t total = 0, seq_rows = 0;
    int32_t last[64];
    for (size_t i = 0; i < n; i++) { /* sequence i's rows at pass rows total.. (decode steps: row i) */
        const backend_commit_seq *q = qs[i];
        const backend_session *s = q->s;
        want |= q->last_logits != NULL; /* a host-picked row (log-probabilities) fetches its own row after the sync */
        head |= q->last_logits != NULL || q->n_pick;
        if (total + q->n > x->max_rows || i >= 64) {
            fail_all(qs, n, CLOVER_E_INTERNAL, "more rows than the stacked executor holds");
            return CLOVER_E_INTERNAL;
        }
        memcpy(x->h_ids + total, q->ids, q->n * sizeof(int32_t));
        for (uint32_t l = 0; l < x->hp->n_layer; l++) {
            const cuda_layer *ly = &s->layers[l];
            const size_t slot = (size_t)ly->slot * st + i;
            if (ly->kind == MODEL_LAYER_ATTENTION)
                x->h_aseq[slot] = (cuda_attn_seq){.k_cache = ly->k_cache, .v_cache = ly->v_cache,
                                                  .pos = (int32_t)s->n_past, .row0 = (int32_t)total,
                                                  .n = (int32_t)q->n};
            else
                x->h_gseq[slot] = (cuda_gdn_seq){.ring = ly->ring, .state = ly->state, .row0 = (int32_t)total,
                                                 .n = (int32_t)q->n};
        }
        if (q->n > seq_rows) seq_rows = q->n;
        total += q->n;
        last[i] = (int32_t)(total - 1);
    }
    /* one-row steps: the captured pass (every row's logits); chunks: the eager pass, the head on last rows */
    if (seq_rows == 1) head = true;
    int rc = seq_rows == 1 ? stack_pass(x, n, want, stats, &err)
                           : stack_chunk_pass(x, last, total, n, seq_rows, head, want, stats, &err);
    if (rc) {
        fail_all(qs, n, rc, err.message);
        return rc;
    }
    /* the device picks: every picked row's forbidden ids side by side in pk_forbid (V ids of room; a row that
     * does not fit, or wants what only the host gives, is picked on the host); grouped: the device rows
     * compacted into one launch set, row k from descriptor k; CLOVER_CUDA_PICK_EACH: one launch set per row */
    bool dev[64] = {false};
    size_t off[64] = {0}, slot[64] = {0}, nf = 0, n_dev = 0;
    for (size_t i = 0; i < n; i++) {
        const backend_commit_seq *q = qs[i];
        if (!q->n_pick || host_pick_wanted(q) || q->pick->n_forbid > V - nf) continue;
        dev[i] = true;
        slot[i] = x->pick_each ? i : n_dev;
        n_dev++;
        off[i] = nf;
        if (q->pick->n_forbid) memcpy(x->h_pk_forbid + nf, q->pick->forbid, q->pick->n_forbid * sizeof(int32_t));
        nf += q->pick->n_forbid;
        const size_t k = slot[i];
        x->h_pk_rows[k] = (int32_t)i;
        x->h_pk_u[k] = q->u ? (double)q->u[0] : 0.0;
        x->h_pk_desc[k] = (cuda_pick_row){.src = (int32_t)i, .n_forbid = (int32_t)q->pick->n_forbid,
                                          .forbid = sc->pk_forbid + off[i]};
        x->h_pk_par[k] = (cuda_pick_params){q->pick->temperature, q->pick->top_k, q->pick->top_p};
    }
    const size_t n_out = x->pick_each ? n : n_dev; /* pick slots the host reads back */
    int e = 0;
    /* each row's logits stay on the device, in its own session's scratch (last_logits: a later prompt equal to
     * the committed ids decodes from them without a recommit) */
    for (size_t i = 0; i < n && !e && head; i++)
        e = cuda_d2d(qs[i]->s->sc.logits, sc->logits + i * V, V * sizeof(float), x->stream, why);
    const bool timed = stats && x->ev[0] && x->ev[1];
    if (n_dev) {
        if (timed) cuda_event_record(x->ev[0], x->stream, why);
        e = cuda_h2d_async(sc->pk_rows, x->h_pk_rows, n_out * sizeof(int32_t), x->stream, why) ||
            cuda_h2d_async(sc->pk_u, x->h_pk_u, n_out * sizeof(double), x->stream, why) ||
            (nf && cuda_h2d_async(sc->pk_forbid, x->h_pk_forbid, nf * sizeof(int32_t), x->stream, why));
        if (!e && !x->pick_each) {
            e = cuda_h2d_async(sc->pk_desc, x->h_pk_desc, n_dev * sizeof(cuda_pick_row), x->stream, why) ||
                cuda_h2d_async(sc->pk_par, x->h_pk_par, n_dev * sizeof(cuda_pick_params), x->stream, why);
            if (!e && cuda_pick_rows_group(sc->pk_id, sc->pk_conf, sc->plog, sc->logits, sc->pk_desc, sc->pk_par,
                                           n_dev, V, sc->pk_u, x->stream)) {
                snprintf(why, sizeof why, "pick: %s", cuda_preview_last_error());
                e = 1;
            }
        }
        for (size_t i = 0; i < n && !e && x->pick_each; i++) {
            if (!dev[i]) continue;
            const backend_pick *pk = qs[i]->pick;
            cuda_pick_params cp = {pk->temperature, pk->top_k, pk->top_p};
            if (cuda_pick_rows(sc->pk_id + i, sc->pk_conf + i, sc->plog, sc->logits, sc->pk_rows + i, 1, V,
                               sc->pk_forbid + off[i], pk->n_forbid, NULL, &cp, qs[i]->u ? sc->pk_u + i : NULL,
                               x->stream)) {
                snprintf(why, sizeof why, "pick: %s", cuda_preview_last_error());
                e = 1;
            }
        }
        if (!e)
            e = cuda_d2h_async(x->h_pk_id, sc->pk_id, n_out * sizeof(int32_t), x->stream, why) ||
                cuda_d2h_async(x->h_pk_conf, sc->pk_conf, n_out * sizeof(float), x->stream, why);
        if (!e && timed) cuda_event_record(x->ev[1], x->stream, why);
    }
    if (e || cuda_stream_sync(x->stream, why)) {
        fail_all(qs, n, CLOVER_E_INTERNAL, why);
        return CLOVER_E_INTERNAL;
    }
    if (n_dev && timed) {
        double ps = 0.0;
        if (!cuda_event_seconds(x->ev[0], x->ev[1], &ps, why)) stats->pick_s += ps; /* the device's pick time */
    }
    /* committed: every row is in its session's KV and GDN state */
    int first = CLOVER_OK;
    for (size_t i = 0; i < n; i++) {
        backend_commit_seq *q = qs[i];
        q->s->n_past += q->n;
        q->s->kept_valid = head; /* no head (a chunk with no output): nothing kept */
        q->s->kept_at = q->s->n_past;
        q->s->kept_epoch = q->s->epoch;
        q->rc = CLOVER_OK;
        if (q->last_logits) memcpy(q->last_logits, x->h_logits + i * V, V * sizeof(float));
        if (q->n_pick) {
            int32_t id = dev[i] ? x->h_pk_id[slot[i]] : -2;
            if (id == -1)
                q->rc = error_set(&q->err, CLOVER_E_INVALID, "commit: pick: row 0 has no finite logit left");
            else if (id == -2)
                q->rc = host_pick_row(x, pc, q, i, want, stats);
            else {
                q->pick_out.id[0] = id;
                q->pick_out.conf[0] = x->h_pk_conf[slot[i]];
            }
        }
        if (q->rc && !first) first = q->rc;
    }
    return first;
}
