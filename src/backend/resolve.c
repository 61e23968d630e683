/*
 * resolve.c: backend.h's block resolve over a backend's own
 * batched preview, for the host backends (the CPU backend, the tests' fake
 * backend): each pass previews the still-unresolved blocks of every
 * sequence of the call in one preview call (so the CPU backend shares its
 * weight reads across them), picks only the rows still masked (draws from
 * each request's stream in ascending row order, taken before the pass),
 * and applies LowConfidence: every pending row above the threshold is
 * fixed, else the most confident one (ties: the lowest row). The record of
 * every pass is what the engine's own loop would show after that pass.
 * The cancel flag is checked before each pass; a failing sequence stops
 * alone (a preview changes no committed state).
 */
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "base/error.h"
#include "base/rng.h"
#include "backend/sampler.h"

enum { RESOLVE_MAX_ROWS = 255 }; /* fixed_at holds the pass number in a byte */

typedef struct resolve_state {
    uint8_t pending[RESOLVE_MAX_ROWS];
    int32_t id[RESOLVE_MAX_ROWS];
    float cf[RESOLVE_MAX_ROWS], u[RESOLVE_MAX_ROWS];
    size_t n_pending;
    rng_state rng;
    bool greedy, active;
} resolve_state;

static int resolve_check(backend_resolve_seq *q, clover_error *err) {
    if (!q->block || !q->conf || !q->pick || !q->rng || !q->fixed_at)
        return error_set(err, CLOVER_E_INVALID, "resolve: block, conf, pick, rng and fixed_at are required");
    if (q->b == 0 || q->b > RESOLVE_MAX_ROWS)
        return error_set(err, CLOVER_E_INVALID, "resolve: a block of %zu rows, expected 1..%d", q->b, RESOLVE_MAX_ROWS);
    if (!(q->threshold >= 0.0f && q->threshold <= 1.0f))
        return error_set(err, CLOVER_E_INVALID, "resolve: threshold %g, expected 0..1", (double)q->threshold);
    return CLOVER_OK;
}

/* LowConfidence over one pass's picks; records the pass. */
static int resolve_fix(backend_resolve_seq *q, resolve_state *st, clover_error *err) {
    const size_t b = q->b;
    size_t best = b, fixed = 0;
    for (size_t r = 0; r < b; r++) {
        if (!st->pending[r]) continue;
        if (!(st->cf[r] >= 0.0f))
            return error_set(err, CLOVER_E_INTERNAL, "resolve, row %zu: the preview's logits are not finite", r);
        if (best == b || st->cf[r] > st->cf[best]) best = r;
    }
    q->passes++;
    for (size_t r = 0; r < b; r++)
        if (st->pending[r] && st->cf[r] > q->threshold) {
            q->block[r] = st->id[r], q->conf[r] = st->cf[r], st->pending[r] = 0, q->fixed_at[r] = (uint8_t)q->passes;
            fixed++;
        }
    if (fixed == 0) {
        q->block[best] = st->id[best], q->conf[best] = st->cf[best], st->pending[best] = 0;
        q->fixed_at[best] = (uint8_t)q->passes;
        fixed = 1;
    }
    st->n_pending -= fixed;
    for (size_t r = 0; r < b && (q->rec_guess || q->rec_conf); r++) {
        const bool earlier = q->fixed_at[r] && q->fixed_at[r] != q->passes; /* fixed by an earlier pass */
        if (q->rec_guess) q->rec_guess[(q->passes - 1) * b + r] = earlier ? q->block[r] : st->id[r];
        if (q->rec_conf) q->rec_conf[(q->passes - 1) * b + r] = earlier ? q->conf[r] : st->cf[r];
    }
    return CLOVER_OK;
}

int backend_resolve_by_preview(const backend_ops *ops, backend *be, backend_resolve_seq *seqs, size_t n,
                               const volatile int *cancel, backend_pass_stats *stats) {
    resolve_state *st = mem_calloc(n ? n : 1, sizeof *st);
    backend_preview_seq *pq = mem_calloc(n ? n : 1, sizeof *pq);
    size_t *who = mem_calloc(n ? n : 1, sizeof *who);
    int first = CLOVER_OK;
    for (size_t i = 0; i < n; i++) {
        backend_resolve_seq *q = &seqs[i];
        q->err.code = 0, q->err.message[0] = 0;
        q->passes = 0, q->cancelled = false;
        q->rc = !st || !pq || !who ? error_set(&q->err, CLOVER_E_NOMEM, "resolve: no memory for %zu sequences", n)
                                   : resolve_check(q, &q->err);
        if (q->rc) continue;
        sampler_params sp = {q->pick->temperature, q->pick->top_k, q->pick->top_p};
        st[i] = (resolve_state){.n_pending = q->b, .rng = {*q->rng}, .greedy = sampler_is_greedy(&sp) != 0, .active = true};
        for (size_t r = 0; r < q->b; r++) st[i].pending[r] = 1, q->fixed_at[r] = 0, q->conf[r] = 0.0f;
    }
    for (bool any = st != NULL; any;) {
        size_t m = 0;
        const bool stop = cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED);
        for (size_t i = 0; i < n; i++) {
            backend_resolve_seq *q = &seqs[i];
            if (q->rc || !st[i].active) continue;
            if (st[i].n_pending == 0) {
                st[i].active = false;
                continue;
            }
            if (stop || (q->cancel && __atomic_load_n(q->cancel, __ATOMIC_RELAXED))) { /* before every pass */
                q->cancelled = true;
                st[i].active = false;
                continue;
            }
            if (q->passes == q->b) {
                q->rc = error_set(&q->err, CLOVER_E_INTERNAL, "resolve: %zu passes left %zu of %zu rows unresolved",
                                  q->passes, st[i].n_pending, q->b);
                continue;
            }
            for (size_t r = 0; r < q->b; r++) /* the draws: one per pending row, in row order */
                st[i].u[r] = st[i].pending[r] && !st[i].greedy ? rng_uniform(&st[i].rng) : 0.0f;
            pq[m] = (backend_preview_seq){.s = q->s, .block = q->block, .b = q->b, .opts = q->opts,
                                          .pending = st[i].pending, .pick = q->pick, .u = st[i].greedy ? NULL : st[i].u,
                                          .pick_out = {.id = st[i].id, .conf = st[i].cf}};
            who[m++] = i;
        }
        any = m > 0;
        if (!any) break;
        ops->preview(be, pq, m, stats);
        for (size_t k = 0; k < m; k++) {
            backend_resolve_seq *q = &seqs[who[k]];
            if (pq[k].rc) {
                q->rc = pq[k].rc;
                q->err = pq[k].err;
                continue;
            }
            q->rc = resolve_fix(q, &st[who[k]], &q->err);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!seqs[i].rc && st) *seqs[i].rng = st[i].rng.s;
        if (seqs[i].rc && !first) first = seqs[i].rc;
    }
    mem_free(st), mem_free(pq), mem_free(who);
    return first;
}
