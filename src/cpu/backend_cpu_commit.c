/*
 * backend_cpu_commit.c: the batched commit of backend.h. Each sequence of a
 * call is committed in turn, exactly as it would be alone (chunks of
 * max_rows from its first row, the same kernels), so its results cannot
 * depend on the others; each one's failure is its own. Every argument is
 * checked, and the KV caches reserved, before the sequence's state changes,
 * so a failing sequence leaves its session exactly as it was.
 *
 * The head runs over the rows whose logits are wanted, with the same row
 * counts as before picks existed: every row of a chunk for all_logits or
 * NLL, else the picked rows, else the last row alone (matmul's one-row
 * path), so logits do not change with what else is asked.
 */
#include <string.h>

#include "base/error.h"
#include "base/timer.h"
#include "cpu/backend_cpu_internal.h"
#include "parallel/ep_cpu.h"

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
    if ((rc = cpu_check_room(s, "commit", q->n, err))) return rc;
    if ((rc = cpu_session_reserve(s, s->n_past + q->n, err))) return error_prefix(err, "commit");
    return CLOVER_OK;
}

/* The head of chunk [r0, r0+nr) of n rows: the logits asked for, the NLL, the picks. */
static int commit_head(backend *be, const backend_commit_seq *q, size_t r0, size_t nr, backend_pass_stats *stats,
                       clover_error *err) {
    const size_t V = be->hp->n_vocab, n = q->n, end = r0 + nr, first_pick = n - q->n_pick;
    const bool last_chunk = end == n;
    size_t lo; /* head rows [lo, end) */
    if (q->all_logits || q->nll)
        lo = r0;
    else if (q->n_pick && first_pick < end)
        lo = first_pick > r0 ? first_pick : r0;
    else if (q->last_logits && last_chunk)
        lo = end - 1;
    else
        return CLOVER_OK;
    float *lg = q->all_logits ? q->all_logits + lo * V : be->sc.logits;
    double t0 = timer_now();
    cpu_head_logits(be, lo - r0, end - lo, lg);
    if (q->nll)
        for (size_t r = lo; r < end; r++) q->nll[r] = cpu_head_nll(lg + (r - lo) * V, V, q->targets[r]);
    if (q->last_logits && last_chunk) memcpy(q->last_logits, lg + (end - 1 - lo) * V, V * sizeof(float));
    if (stats) stats->head_s += timer_now() - t0;
    if (!q->n_pick || first_pick >= end) return CLOVER_OK;
    size_t p0 = first_pick > lo ? first_pick : lo, np = end - p0; /* picked rows of this chunk */
    float *rows = be->sc.logits;
    if (lg != be->sc.logits || p0 != lo) memmove(rows, lg + (p0 - lo) * V, np * V * sizeof(float));
    size_t idx[256];
    const size_t o = p0 - first_pick; /* out index of the chunk's first picked row */
    backend_pick_out out = q->pick_out;
    out.id += o;
    out.conf += o;
    if (out.logprob) out.logprob += o;
    if (out.top_id) out.top_id += o * q->pick->n_top;
    if (out.top_logprob) out.top_logprob += o * q->pick->n_top;
    backend_pick pk = *q->pick;
    pk.pen = NULL; /* no penalties on the causal path */
    for (size_t a = 0; a < np; a += 256) { /* chunks of the index array */
        size_t m = np - a < 256 ? np - a : 256;
        for (size_t i = 0; i < m; i++) idx[i] = a + i;
        int rc = host_pick_rows(&be->pick, &pk, rows, idx, m, q->u ? q->u + o + a : NULL, NULL, 0, &out, stats, err);
        if (rc) return error_prefix(err, "commit");
    }
    return CLOVER_OK;
}

static int commit_one(backend *be, backend_commit_seq *q, backend_pass_stats *stats, clover_error *err) {
    int rc = commit_check(be, q, err);
    if (rc || q->n == 0) return rc;
    backend_session *s = q->s;
    for (size_t r0 = 0; r0 < q->n; r0 += be->max_rows) {
        size_t nr = q->n - r0 < be->max_rows ? q->n - r0 : be->max_rows;
        cpu_pass p = {.mode = CPU_PASS_COMMIT,
                      .pos = s->n_past,
                      .hidden = q->hidden,
                      .hidden_rows = q->n,
                      .row0 = r0,
                      .stats = stats};
        cpu_pass_run(s, q->ids + r0, nr, &p);
        if ((rc = ep_cpu_status(be->ep, err))) return rc; /* a failed simulated rank */
        s->n_past += nr;
        if ((rc = commit_head(be, q, r0, nr, stats, err))) return rc; /* non-finite logits only: a model fault */
    }
    return CLOVER_OK;
}

int backend_cpu_commit(backend *be, backend_commit_seq *seqs, size_t n_seqs, backend_pass_stats *stats) {
    int first = CLOVER_OK;
    for (size_t i = 0; i < n_seqs; i++) {
        backend_commit_seq *q = &seqs[i];
        q->err.code = 0;
        q->err.message[0] = 0;
        q->rc = be ? commit_one(be, q, stats, &q->err) : error_set(&q->err, CLOVER_E_INVALID, "commit: no backend");
        if (q->rc && !first) first = q->rc;
    }
    return first;
}
