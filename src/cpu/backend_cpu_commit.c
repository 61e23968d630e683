/*
 * backend_cpu_commit.c: the batched commit of backend.h. Each sequence is
 * split into chunks of max_rows from its first row, as alone; the next
 * chunks of several sequences share one pass (cpu_pass_run_shared: one
 * read of each weight, each row computed as in its sequence's pass alone)
 * as long as their rows fit the scratch, so its results cannot depend on
 * the others; each one's failure is its own. Every argument is checked,
 * and the KV caches reserved, before the sequence's state changes, so a
 * failing sequence leaves its session exactly as it was.
 *
 * The head runs over the rows whose logits are wanted, with the same row
 * counts as before picks existed: every row of a chunk for all_logits or
 * NLL, else the picked rows, else the last row alone (matmul's one-row
 * path), so logits do not change with what else is asked; the head rows
 * of all sequences of a pass share one read of the head.
 */
#include <string.h>

#include "base/error.h"
#include "cpu/backend_cpu_internal.h"

int cpu_check_ids(const char *what, const int32_t *ids, size_t n, uint32_t n_vocab, clover_error *err) {
    for (size_t r = 0; r < n; r++)
        if (ids[r] < 0 || (uint32_t)ids[r] >= n_vocab)
            return error_set(err, CLOVER_E_INVALID, "%s: token id %d at row %zu is outside the vocabulary 0..%u", what,
                             (int)ids[r], r, n_vocab - 1);
    return CLOVER_OK;
}

int cpu_check_room(const backend_session *s, const char *what, size_t n, clover_error *err) {
    if (n > s->be->max_context - s->n_past)
        return error_set(err, CLOVER_E_INVALID, "%s: %zu rows after %zu committed exceed the session's context of %zu",
                         what, n, s->n_past, s->be->max_context);
    return CLOVER_OK;
}

static int commit_check(backend *be, const backend_commit_seq *q, clover_error *err) {
    backend_session *s = q->s;
    if (!s) return error_set(err, CLOVER_E_INVALID, "commit: no session");
    if (s->be != be) return error_set(err, CLOVER_E_INVALID, "commit: the session belongs to another backend");
    if (q->n == 0) {
        if (q->last_logits || q->n_pick)
            return error_set(err, CLOVER_E_INVALID, "commit: no rows, so there are no last logits and no picks");
        return CLOVER_OK;
    }
    const uint32_t V = be->hp->n_vocab;
    int rc;
    if (!q->ids) return error_set(err, CLOVER_E_INVALID, "commit: %zu rows but no ids", q->n);
    if ((rc = cpu_check_ids("commit", q->ids, q->n, V, err))) return rc;
    if ((q->nll != NULL) != (q->targets != NULL))
        return error_set(err, CLOVER_E_INVALID, "commit: targets and nll must be given together");
    if (q->targets && (rc = cpu_check_ids("commit targets", q->targets, q->n, V, err))) return rc;
    if (q->n_pick) {
        if (q->n_pick > q->n)
            return error_set(err, CLOVER_E_INVALID, "commit: %zu picks of %zu rows", q->n_pick, q->n);
        if (!q->pick_out.id || !q->pick_out.conf)
            return error_set(err, CLOVER_E_INVALID, "commit: picks need id and conf arrays");
        if ((rc = host_pick_check(&be->pick, q->pick, err))) return error_prefix(err, "commit");
        sampler_params sp = {q->pick->temperature, q->pick->top_k, q->pick->top_p};
        if (!sampler_is_greedy(&sp) && !q->u)
            return error_set(err, CLOVER_E_INVALID, "commit: sampled picks need their draws");
        if (q->pick->n_top && !q->pick_out.top_id)
            return error_set(err, CLOVER_E_INVALID, "commit: %zu top log-probabilities but no array", q->pick->n_top);
    }
    if (be->layer_lo > 0 && !q->in_hidden)
        return error_set(err, CLOVER_E_INVALID, "commit: this backend starts at layer %u: in_hidden is required",
                         be->layer_lo);
    if (be->layer_hi < be->hp->n_layer &&
        (!q->out_hidden || q->last_logits || q->all_logits || q->nll || q->n_pick))
        return error_set(err, CLOVER_E_INVALID,
                         "commit: this backend ends before layer %u: out_hidden is required, and no logits, NLL or "
                         "picks",
                         be->layer_hi);
    if ((rc = cpu_check_room(s, "commit", q->n, err))) return rc;
    if ((rc = cpu_session_reserve(s, s->n_past + q->n, err))) return error_prefix(err, "commit");
    return CLOVER_OK;
}

/* The head rows [lo, end) of chunk [r0, r0+nr) of a sequence of n rows
 * (lo == end: none). */
static size_t commit_head_lo(const backend_commit_seq *q, size_t r0, size_t nr) {
    const size_t n = q->n, end = r0 + nr, first_pick = n - q->n_pick;
    if (q->all_logits || q->nll) return r0;
    if (q->n_pick && first_pick < end) return first_pick > r0 ? first_pick : r0;
    if (q->last_logits && end == n) return end - 1;
    return end;
}

/* What head rows [lo, end) of a sequence give (a window's share of a
 * chunk's head rows): NLL, the logits asked for, the picks. lg: their
 * logits, row lo at row lg_row0 of sc.logits. */
static int commit_head_out(backend *be, const backend_commit_seq *q, size_t lo, size_t end, float *lg,
                           size_t lg_row0, backend_pass_stats *stats, clover_error *err) {
    const size_t V = be->hp->n_vocab, n = q->n, first_pick = n - q->n_pick;
    if (q->nll)
        for (size_t r = lo; r < end; r++) q->nll[r] = cpu_head_nll(lg + (r - lo) * V, V, q->targets[r]);
    if (q->all_logits) memcpy(q->all_logits + lo * V, lg, (end - lo) * V * sizeof(float));
    if (q->last_logits && end == n) memcpy(q->last_logits, lg + (end - 1 - lo) * V, V * sizeof(float));
    if (!q->n_pick || first_pick >= end) return CLOVER_OK;
    const size_t p0 = first_pick > lo ? first_pick : lo, np = end - p0; /* picked rows of this window */
    size_t idx[256], lidx[256];
    backend_pick pk = *q->pick;
    pk.pen = NULL; /* no penalties on the causal path */
    for (size_t a = 0; a < np; a += 256) { /* runs of the index arrays */
        size_t m = np - a < 256 ? np - a : 256;
        for (size_t i = 0; i < m; i++) idx[i] = p0 - first_pick + a + i, lidx[i] = lg_row0 + (p0 - lo) + a + i;
        int rc = host_pick_rows_at(&be->pick, &pk, be->sc.logits, lidx, idx, m, q->u ? q->u + (p0 - first_pick) + a : NULL,
                                   NULL, 0, &q->pick_out, stats, err);
        if (rc) return error_prefix(err, "commit");
    }
    return CLOVER_OK;
}

/* A window's share of the head rows of one sequence of a commit pass (cpu_head_windows). */
typedef struct commit_heads {
    backend *be;
    backend_commit_seq *seqs;
    const size_t *who, *lo, *at;
    backend_pass_stats *stats;
} commit_heads;

static void commit_head_part(void *ctx, size_t k, size_t a, size_t b, size_t g0) {
    const commit_heads *c = ctx;
    backend_commit_seq *q = &c->seqs[c->who[k]];
    if (q->rc) return; /* failed in an earlier window */
    const size_t V = c->be->hp->n_vocab, first = c->lo[k] + (a - c->at[k]);
    int rc = commit_head_out(c->be, q, first, first + (b - a), c->be->sc.logits + (a - g0) * V, a - g0, c->stats,
                             &q->err);
    if (rc) q->rc = rc; /* non-finite logits only: a model fault */
}

int backend_cpu_commit(backend *be, backend_commit_seq *seqs, size_t n_seqs, backend_pass_stats *stats) {
    int first = CLOVER_OK;
    enum { MAX_SEQS = 256 };
    size_t done[MAX_SEQS]; /* rows committed so far per sequence (SIZE_MAX: finished or failed) */
    for (size_t i = 0; i < n_seqs; i++) {
        backend_commit_seq *q = &seqs[i];
        q->err.code = 0;
        q->err.message[0] = 0;
        if (!be) q->rc = error_set(&q->err, CLOVER_E_INVALID, "commit: no backend");
        else if (i >= MAX_SEQS) q->rc = error_set(&q->err, CLOVER_E_INVALID, "commit: more than %d sequences in a call", MAX_SEQS);
        else q->rc = commit_check(be, q, &q->err);
        if (i < MAX_SEQS) done[i] = q->rc || q->n == 0 ? SIZE_MAX : 0;
    }
    if (!be) return n_seqs ? seqs[0].rc : CLOVER_E_INVALID;
    threadpool_counts pool0;
    threadpool_get_counts(be->pool, &pool0);
    const size_t R = be->max_rows;
    cpu_shared_seq pass[MAX_SEQS];
    size_t who[MAX_SEQS];
    for (;;) {
        size_t np = 0, rows = 0;
        for (size_t i = 0; i < n_seqs && i < MAX_SEQS; i++) { /* the next chunks that fit one pass, in call order */
            if (done[i] == SIZE_MAX) continue;
            backend_commit_seq *q = &seqs[i];
            const size_t nr = q->n - done[i] < R ? q->n - done[i] : R;
            if (rows + nr > R) continue;
            const size_t H = be->hp->n_embd;
            pass[np] = (cpu_shared_seq){.s = q->s, .ids = q->ids + done[i], .n = nr, .pos = q->s->n_past,
                                        .hidden = q->hidden, .hidden_rows = q->n, .row0 = done[i],
                                        .in_h = q->in_hidden ? q->in_hidden + done[i] * H : NULL,
                                        .out_h = q->out_hidden ? q->out_hidden + done[i] * H : NULL};
            who[np++] = i;
            rows += nr;
        }
        if (np == 0) break;
        cpu_pass_run_shared(be, pass, np, CPU_PASS_COMMIT, stats);
        if (be->moe_hook.ctx && be->moe_hook.status(be->moe_hook.ctx, NULL)) { /* a failed simulated rank: every sequence of the pass fails */
            for (size_t k = 0; k < np; k++) {
                seqs[who[k]].rc = be->moe_hook.status(be->moe_hook.ctx, &seqs[who[k]].err);
                done[who[k]] = SIZE_MAX;
            }
            continue;
        }
        /* the head rows of every sequence of the pass, one read of the head */
        size_t nh = 0, lo[MAX_SEQS], at[MAX_SEQS], mh[MAX_SEQS];
        for (size_t k = 0; k < np; k++) {
            backend_commit_seq *q = &seqs[who[k]];
            q->s->n_past += pass[k].n;
            lo[k] = commit_head_lo(q, done[who[k]], pass[k].n);
            at[k] = nh;
            const size_t end = done[who[k]] + pass[k].n, m = end - lo[k];
            for (size_t r = 0; r < m; r++) {
                be->sc.head_rows[nh + r] = pass[k].off + (lo[k] - done[who[k]]) + r;
                be->sc.own[nh + r] = (uint32_t)m;
            }
            mh[k] = m;
            nh += m;
        }
        commit_heads ch = {be, seqs, who, lo, at, stats};
        cpu_head_windows(be, nh, at, mh, np, commit_head_part, &ch, stats);
        for (size_t k = 0; k < np; k++) {
            const size_t i = who[k];
            const size_t end = done[i] + pass[k].n;
            done[i] = seqs[i].rc || end == seqs[i].n ? SIZE_MAX : end;
        }
    }
    cpu_pool_stats_add(be, &pool0, stats);
    for (size_t i = 0; i < n_seqs; i++)
        if (seqs[i].rc && !first) first = seqs[i].rc;
    return first;
}
