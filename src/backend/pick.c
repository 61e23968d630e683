/*
 * pick.c: the pick of backend.h over host rows of logits, for the
 * backends whose logits are in host memory (the CPU backend, the tests'
 * fake backend): forbidden ids, SPEC.md 3.1's penalties and 3.2's sampling,
 * one pool task per row (rows are independent: a task writes only its row
 * and its output slots), plus each row's log-probability and top-N. A
 * device backend implements the same arithmetic in its kernels; this file
 * is then its oracle.
 *
 * The arithmetic is the engine's own oracle code (backend/penalties.c,
 * backend/sampler.c), called on a penalty state made from the caller's
 * sparse counts (scattered into the context's counts for the call and cleared after),
 * so the backend's pick is the reference's bit for bit. The
 * log-probabilities are float64 log-softmax over the forbidden and
 * penalised row (T = 1), rounded once to float32.
 */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "backend/pick.h"
#include "backend/penalties.h"

int host_pick_check(host_pick_ctx *c, const backend_pick *pk, clover_error *err) {
    const size_t V = c->n_vocab;
    if (!pk) return error_set(err, CLOVER_E_INVALID, "pick: no pick parameters");
    if (pk->n_top > BACKEND_MAX_TOP)
        return error_set(err, CLOVER_E_INVALID, "pick: %zu top log-probabilities, at most %d", pk->n_top,
                         BACKEND_MAX_TOP);
    if (pk->n_forbid && !pk->forbid) return error_set(err, CLOVER_E_INVALID, "pick: %zu forbidden ids but no array",
                                                      pk->n_forbid);
    size_t distinct = 0;
    uint32_t *mark = c->counts; /* zero between picks: used as marks here, cleared again */
    int rc = CLOVER_OK;
    for (size_t i = 0; i < pk->n_forbid && !rc; i++) {
        int32_t t = pk->forbid[i];
        if (t < 0 || (size_t)t >= V)
            rc = error_set(err, CLOVER_E_INVALID, "pick: forbidden id %d is outside the vocabulary 0..%zu", (int)t,
                           V - 1);
        else if (!mark[t]) mark[t] = 1, distinct++;
    }
    for (size_t i = 0; i < pk->n_forbid; i++)
        if (pk->forbid[i] >= 0 && (size_t)pk->forbid[i] < V) mark[pk->forbid[i]] = 0;
    if (rc) return rc;
    if (distinct == V) return error_set(err, CLOVER_E_INVALID, "pick: every id of the vocabulary is forbidden");
    const backend_penalties *pen = pk->pen;
    if (pen) {
        if ((pen->n_counts && (!pen->count_ids || !pen->counts)) || (pen->n_stop_ids && !pen->stop_ids))
            return error_set(err, CLOVER_E_INVALID, "pick: penalty arrays missing");
        for (size_t i = 0; i < pen->n_counts; i++)
            if (pen->count_ids[i] < 0 || (size_t)pen->count_ids[i] >= V)
                return error_set(err, CLOVER_E_INVALID, "pick: counted id %d is outside the vocabulary",
                                 (int)pen->count_ids[i]);
        for (size_t i = 0; i < pen->n_stop_ids; i++)
            if (pen->stop_ids[i] < 0 || (size_t)pen->stop_ids[i] >= V)
                return error_set(err, CLOVER_E_INVALID, "pick: stop id %d is outside the vocabulary",
                                 (int)pen->stop_ids[i]);
    }
    sampler_params sp = {pk->temperature, pk->top_k, pk->top_p};
    if (!sampler_is_greedy(&sp) && !c->samp) { /* the sampling scratch, once per context */
        host_pick_ctx *mb = c;
        mb->samp = mem_calloc(c->n_samp, sizeof *mb->samp);
        if (!mb->samp) return error_set(err, CLOVER_E_NOMEM, "pick: no memory for the sampler scratch");
        for (size_t i = 0; i < c->n_samp; i++) {
            if ((rc = sampler_scratch_init(&mb->samp[i], V, err))) {
                for (size_t j = 0; j < i; j++) sampler_scratch_free(&mb->samp[j]);
                mem_free(mb->samp);
                mb->samp = NULL;
                return rc;
            }
        }
    }
    return CLOVER_OK;
}

typedef struct pick_job {
    host_pick_ctx *ctx;
    const backend_pick *pk;
    sampler_params sp;
    penalty_config cfg;
    penalty_state st;
    bool think_open;
    float *logits;
    const size_t *lrows; /* each picked row's row of logits */
    const size_t *rows;
    const float *u;
    const backend_pick_out *out;
    int *rc;
} pick_job;

/* float64 log-sum-exp of the finite part of a row. */
static double row_lse(const float *row, size_t n) {
    double mx = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if ((double)row[i] > mx) mx = (double)row[i];
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        if (row[i] > -INFINITY) sum += exp((double)row[i] - mx);
    return mx + log(sum);
}

/* The n_top largest of row (value descending, ties to the lower id), by insertion. */
static void row_top(const float *row, size_t V, size_t k, double lse, int32_t *ids, float *lp) {
    size_t have = 0;
    for (size_t i = 0; i < V; i++) {
        float v = row[i];
        if (!(v > -INFINITY)) continue;
        if (have == k && !(v > row[ids[k - 1]])) continue;
        size_t j = have < k ? have++ : k - 1;
        while (j > 0 && v > row[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = (int32_t)i;
    }
    for (size_t j = 0; j < k; j++) {
        if (j >= have) ids[j] = -1;
        if (lp) lp[j] = j < have ? (float)((double)row[ids[j]] - lse) : -INFINITY;
    }
}

static void pick_task(void *ctx, size_t task, size_t thread) {
    const pick_job *j = ctx;
    const size_t V = j->ctx->n_vocab, r = j->rows[task];
    float *row = j->logits + j->lrows[task] * V;
    for (size_t i = 0; i < j->pk->n_forbid; i++) row[j->pk->forbid[i]] = -INFINITY;
    if (j->pk->pen) {
        const backend_penalties *pen = j->pk->pen;
        penalty_apply(&j->cfg, &j->st, row, pen->response_len + r + 1, pen->stop_ids, pen->n_stop_ids, j->think_open);
    }
    clover_error e;
    double u = j->u ? (double)j->u[task] : 0.0;
    const backend_pick_out *o = j->out;
    j->rc[task] = sampler_pick(&j->sp, row, V, u, j->ctx->samp ? &j->ctx->samp[thread] : NULL, &o->id[r], &o->conf[r],
                               &e);
    if (j->rc[task] || (!o->logprob && !o->top_id)) return;
    const size_t k = o->top_id ? j->pk->n_top : 0;
    host_pick_logprobs(row, V, o->id[r], k, o->logprob ? &o->logprob[r] : NULL, k ? o->top_id + r * k : NULL,
                       k && o->top_logprob ? o->top_logprob + r * k : NULL);
}

void host_pick_logprobs(const float *row, size_t V, int32_t id, size_t n_top, float *lp, int32_t *top_id,
                        float *top_lp) {
    double lse = row_lse(row, V);
    if (lp) *lp = (float)((double)row[id] - lse);
    if (top_id && n_top) row_top(row, V, n_top, lse, top_id, top_lp);
}

int host_pick_rows(host_pick_ctx *c, const backend_pick *pk, float *logits, const size_t *rows, size_t n, const float *u,
                  const int32_t *block, size_t b, const backend_pick_out *out, backend_pass_stats *stats,
                  clover_error *err) {
    return host_pick_rows_at(c, pk, logits, rows, rows, n, u, block, b, out, stats, err);
}

int host_pick_rows_at(host_pick_ctx *c, const backend_pick *pk, float *logits, const size_t *lrows, const size_t *rows,
                      size_t n, const float *u, const int32_t *block, size_t b, const backend_pick_out *out,
                      backend_pass_stats *stats, clover_error *err) {
    double t0 = timer_now();
    pick_job j = {.ctx = c, .pk = pk, .sp = {pk->temperature, pk->top_k, pk->top_p}, .logits = logits,
                  .lrows = lrows, .rows = rows, .u = u, .out = out};
    int rcs[256], *rc = n <= 256 ? rcs : mem_calloc(n, sizeof *rc);
    if (!rc) return error_set(err, CLOVER_E_NOMEM, "pick: no memory for %zu rows", n);
    j.rc = rc;
    const backend_penalties *pen = pk->pen;
    if (pen) {
        j.cfg.p = pen->p;
        j.cfg.think_end_id = pen->think_end_id;
        for (size_t i = 0; i < pen->n_counts; i++) c->counts[pen->count_ids[i]] = pen->counts[i];
        j.st = (penalty_state){.counts = c->counts, .seen = (int32_t *)pen->count_ids, .n_seen = pen->n_counts,
                               .length = pen->response_len, .n_vocab = c->n_vocab};
        j.think_open = penalty_think_open(&j.cfg, &j.st, block, block ? b : 0);
    }
    threadpool_run(c->pool, n, pick_task, &j);
    if (pen)
        for (size_t i = 0; i < pen->n_counts; i++) c->counts[pen->count_ids[i]] = 0;
    int first = CLOVER_OK;
    for (size_t t = 0; t < n && !first; t++)
        if (rc[t]) first = error_set(err, rc[t], "pick: row %zu has no finite logit left", rows[t]);
    if (rc != rcs) mem_free(rc);
    if (stats) stats->pick_s += timer_now() - t0;
    return first;
}

void host_pick_ctx_free(host_pick_ctx *c) {
    if (!c || !c->samp) return;
    for (size_t i = 0; i < c->n_samp; i++) sampler_scratch_free(&c->samp[i]);
    mem_free(c->samp);
    c->samp = NULL;
}
