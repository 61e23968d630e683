/*
 * moe_route.c: router softmax + top-k + renormalisation, and the coreset.
 * Plain loops on purpose: n_expert x k is a few thousand operations a row,
 * nothing next to the expert matrix products.
 */
#include <math.h>

#include "cpu/moe.h"

size_t cpu_moe_topk(int32_t *idx, const float *vals, size_t n, size_t k, const uint8_t *allowed) {
    size_t count = 0;
    for (size_t e = 0; e < n; e++) {
        if (allowed && !allowed[e]) continue;
        float v = vals[e];
        if (count == k && !(v > vals[idx[k - 1]])) continue; /* equal: the earlier index stays */
        size_t p = count < k ? count++ : k - 1;
        while (p > 0 && v > vals[idx[p - 1]]) {
            idx[p] = idx[p - 1];
            p--;
        }
        idx[p] = (int32_t)e;
    }
    return count;
}

size_t cpu_moe_route(int32_t *idx, float *wts, const float *logits, size_t n_expert, size_t k,
                     const uint8_t *allowed, float *probs) {
    /* softmax in float32 as torch's CPU kernel: max, e^(x - max), sum, times 1 / sum */
    float mx = -INFINITY;
    for (size_t e = 0; e < n_expert; e++)
        if (logits[e] > mx) mx = logits[e];
    float sum = 0.0f;
    for (size_t e = 0; e < n_expert; e++) {
        probs[e] = expf(logits[e] - mx);
        sum += probs[e];
    }
    float inv = 1.0f / sum;
    for (size_t e = 0; e < n_expert; e++) probs[e] *= inv;

    size_t m = cpu_moe_topk(idx, probs, n_expert, k, allowed);
    float top = 0.0f;
    for (size_t i = 0; i < m; i++) top += probs[idx[i]];
    for (size_t i = 0; i < m; i++) wts[i] = probs[idx[i]] / top;
    return m;
}

/* order[a] before order[b]: larger total first, then lower index */
static int coreset_before(const double *totals, int32_t a, int32_t b) {
    return totals[a] > totals[b] || (totals[a] == totals[b] && a < b);
}

static void coreset_sift(int32_t *order, const double *totals, size_t root, size_t n) {
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) return;
        /* a max-heap of the LAST elements in sort order, so the sorted array ends ascending in "before" */
        if (child + 1 < n && coreset_before(totals, order[child], order[child + 1])) child++;
        if (!coreset_before(totals, order[root], order[child])) return;
        int32_t t = order[root];
        order[root] = order[child];
        order[child] = t;
        root = child;
    }
}

void cpu_moe_coreset_from_totals(uint8_t *allowed, const double *totals, size_t n_expert, float top_p,
                                 int32_t *order) {
    double total = 0.0;
    for (size_t e = 0; e < n_expert; e++) total += totals[e];
    if (total < 1e-9) total = 1e-9;
    /* heap sort into "before" order: descending total, ascending index on ties */
    for (size_t e = 0; e < n_expert; e++) order[e] = (int32_t)e;
    for (size_t i = n_expert / 2; i-- > 0;) coreset_sift(order, totals, i, n_expert);
    for (size_t end = n_expert; end > 1; end--) {
        int32_t t = order[0];
        order[0] = order[end - 1];
        order[end - 1] = t;
        coreset_sift(order, totals, 0, end - 1);
    }
    double before = 0.0;
    for (size_t i = 0; i < n_expert; i++) {
        int32_t e = order[i];
        allowed[e] = (uint8_t)(i == 0 || before < (double)top_p);
        before += totals[e] / total;
    }
}

size_t cpu_moe_coreset_row(int32_t *idx, double *mx, double *sum, const float *row, size_t n_expert, size_t k) {
    if (k > n_expert) k = n_expert;
    double m = -INFINITY, s = 0.0;
    for (size_t e = 0; e < n_expert; e++)
        if ((double)row[e] > m) m = (double)row[e];
    for (size_t e = 0; e < n_expert; e++) s += exp((double)row[e] - m);
    *mx = m, *sum = s;
    return cpu_moe_topk(idx, row, n_expert, k, NULL);
}

void cpu_moe_coreset_add(double *totals, const int32_t *idx, size_t m, const float *row, double mx, double sum) {
    for (size_t i = 0; i < m; i++) totals[idx[i]] += exp((double)row[idx[i]] - mx) / sum;
}

void cpu_moe_coreset(uint8_t *allowed, const float *logits, size_t b, size_t n_expert, size_t k, float top_p,
                     double *totals, int32_t *order) {
    for (size_t e = 0; e < n_expert; e++) totals[e] = 0.0;
    for (size_t r = 0; r < b; r++) {
        const float *row = logits + r * n_expert;
        double mx, sum;
        size_t m = cpu_moe_coreset_row(order, &mx, &sum, row, n_expert, k);
        cpu_moe_coreset_add(totals, order, m, row, mx, sum);
    }
    cpu_moe_coreset_from_totals(allowed, totals, n_expert, top_p, order);
}
