/*
 * sampler.c: SPEC.md 3.2 (seed 000's `clover_pick` / `greedy_pick`) with
 * the reference's arithmetic (tools/reference DECISIONS 1, 10).
 *
 * A full sort of a 248k-entry row per pick would dominate a sampled pass,
 * so the sampled path first lists only the candidates whose probability is
 * at least 1e-12 of the total. Candidates are sorted by value, and a
 * probability only falls with the value, so the listed ones are exactly the
 * head of the full sorted order: the top-p cut and the walk agree with the
 * full sort whenever they end inside the head. When they do not (the head
 * holds less than top_p, or the draw lands in the tail: a chance of about
 * 1e-7), the pick is redone over every candidate with the same draw.
 */
#include "backend/sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

#define SAMPLER_HEAD_MIN_P 1e-12

int sampler_scratch_init(sampler_scratch *sc, size_t n_vocab, clover_error *err) {
    memset(sc, 0, sizeof *sc);
    size_t n = n_vocab ? n_vocab : 1;
    sc->cand = mem_calloc(n, sizeof *sc->cand);
    if (!sc->cand) {
        sampler_scratch_free(sc);
        return error_set(err, CLOVER_E_NOMEM, "sampler: no memory for %zu candidates", n_vocab);
    }
    sc->n_vocab = n_vocab;
    return CLOVER_OK;
}

void sampler_scratch_free(sampler_scratch *sc) {
    mem_free(sc->cand);
    memset(sc, 0, sizeof *sc);
}

int sampler_is_greedy(const sampler_params *p) { return !((double)p->temperature >= 1e-6); }

double sampler_draw(const sampler_params *p, rng_state *rng) {
    return sampler_is_greedy(p) ? 0.0 : (double)rng_uniform(rng);
}

int32_t sampler_argmax(const float *row, size_t n) {
    int32_t id = -1;
    float best = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (row[i] > best) {
            best = row[i];
            id = (int32_t)i;
        }
    return id;
}

/* exp(float32(row[id] - mx)) / sum exp(float32(l - mx)), the sum in float64. */
static float confidence_at(const float *row, size_t n, int32_t id, float mx) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        float d = row[i] - mx;
        sum += exp((double)d);
    }
    float d = row[id] - mx;
    return (float)(exp((double)d) / sum);
}

float sampler_confidence(const float *row, size_t n, int32_t id) {
    int32_t top = sampler_argmax(row, n);
    if (top < 0 || !isfinite(row[top]) || id < 0 || (size_t)id >= n) return NAN;
    return confidence_at(row, n, id, row[top]);
}

/* Value descending, then id ascending. */
static int cand_cmp(const void *a, const void *b) {
    const sampler_cand *x = a, *y = b;
    if (x->val > y->val) return -1;
    if (x->val < y->val) return 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The k-th largest value (k from 0) of c[0..n).val, reordering c (Hoare
 * quickselect; the order is rebuilt by the sort afterwards). */
static float select_desc(sampler_cand *c, size_t n, size_t k) {
    ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
    while (lo < hi) {
        float pivot = c[lo + (hi - lo) / 2].val;
        ptrdiff_t i = lo, j = hi;
        while (i <= j) {
            while (c[i].val > pivot)
                i++;
            while (c[j].val < pivot)
                j--;
            if (i <= j) {
                sampler_cand t = c[i];
                c[i] = c[j];
                c[j] = t;
                i++;
                j--;
            }
        }
        if (kk <= j)
            hi = j;
        else if (kk >= i)
            lo = i;
        else
            return c[kk].val;
    }
    return c[lo].val;
}

/* Lists the candidates in sampling order with their probabilities (e):
 * top-k (exact) or, without top-k, the head of probability >= 1e-12 when
 * head_only. *complete: every candidate the full sort would hold is listed. */
static size_t build_candidates(const sampler_params *p, const float *row, size_t n, sampler_scratch *sc,
                               bool head_only, bool *complete) {
    sampler_cand *c = sc->cand;
    const float t = p->temperature;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(row[i])) {
            c[m].id = (int32_t)i;
            c[m].val = row[i] / t;
            m++;
        }
    *complete = true;
    if (m == 0) return 0;
    if (p->top_k > 0 && (size_t)p->top_k < m) {
        float cut = select_desc(c, m, (size_t)p->top_k - 1);
        size_t k = 0;
        for (size_t i = 0; i < m; i++)
            if (c[i].val >= cut) c[k++] = c[i];
        m = k;
    }
    float m0 = c[0].val;
    for (size_t i = 1; i < m; i++)
        if (c[i].val > m0) m0 = c[i].val;
    double z = 0.0;
    for (size_t i = 0; i < m; i++) {
        float d = c[i].val - m0;
        c[i].e = exp((double)d);
        z += c[i].e;
    }
    size_t k = m;
    if (head_only && !(p->top_k > 0)) {
        k = 0;
        for (size_t i = 0; i < m; i++)
            if (c[i].e >= SAMPLER_HEAD_MIN_P * z) c[k++] = c[i];
        *complete = k == m;
    }
    for (size_t i = 0; i < k; i++)
        c[i].e /= z;
    qsort(c, k, sizeof *c, cand_cmp);
    return k;
}

/* The top-p cut and the walk over c[0..m). Returns false when the answer
 * lies past an incomplete list (redo with every candidate). */
static bool walk_candidates(const sampler_params *p, const sampler_cand *c, size_t m, bool complete, double u,
                            int32_t *id) {
    const double tp = (double)p->top_p;
    size_t keep = m;
    double z = 1.0;
    bool cut = false;
    if (tp > 0.0 && tp < 1.0) {
        double before = 0.0;
        for (size_t i = 0; i < m; i++) {
            if (before > tp) {
                keep = i;
                cut = true;
                break;
            }
            before += c[i].e;
        }
        if (!cut && !complete) {
            if (!(before > tp)) return false; /* the cut lies in the tail */
            cut = true;                        /* the first candidate past the head is dropped */
        }
        if (keep == 0) keep = 1;
        z = 0.0;
        for (size_t i = 0; i < keep; i++)
            z += c[i].e;
    }
    for (size_t i = 0; i < keep; i++) {
        double pi = c[i].e / z;
        if (u < pi) {
            *id = c[i].id;
            return true;
        }
        u -= pi;
    }
    if (!complete && !cut) return false; /* the draw lands in the tail */
    *id = c[keep - 1].id;
    return true;
}

int sampler_pick(const sampler_params *p, const float *row, size_t n, double u, sampler_scratch *sc, int32_t *id,
                 float *conf, clover_error *err) {
    int32_t top = sampler_argmax(row, n);
    if (top < 0)
        return error_set(err, CLOVER_E_INVALID, "sampler: every token of the row is forbidden (no finite logit)");
    if (!isfinite(row[top]))
        return error_set(err, CLOVER_E_INTERNAL, "sampler: the row has an infinite logit at id %d", top);
    if (sampler_is_greedy(p)) {
        *id = top;
        *conf = confidence_at(row, n, top, row[top]);
        return CLOVER_OK;
    }
    if (!sc || n > sc->n_vocab)
        return error_set(err, CLOVER_E_INTERNAL, "sampler: row of %zu entries, scratch for %zu", n,
                         sc ? sc->n_vocab : 0);
    bool complete;
    size_t m = build_candidates(p, row, n, sc, true, &complete);
    int32_t pick = -1;
    if (!walk_candidates(p, sc->cand, m, complete, u, &pick)) {
        m = build_candidates(p, row, n, sc, false, &complete);
        if (!walk_candidates(p, sc->cand, m, complete, u, &pick))
            return error_set(err, CLOVER_E_INTERNAL, "sampler: no pick over the complete candidate list");
    }
    *id = pick;
    *conf = confidence_at(row, n, pick, row[top]);
    return CLOVER_OK;
}
