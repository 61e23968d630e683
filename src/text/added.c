/*
 * added.c: finding added tokens in text. Hugging Face matches them with an
 * Aho-Corasick automaton in leftmost-longest mode; a model has a few dozen
 * (at most a few thousand) of them, so grouping them by first byte, longest
 * first, and scanning for bytes that start a group gives the same matches
 * with far less machinery: at the leftmost position where any token
 * matches, the longest one that matches there.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/tok_internal.h"

typedef struct sort_key {
    uint32_t first, len, index;
} sort_key;

/* by first byte, then longest first, then file order (equal keys are equal strings) */
static int cmp_longest_first(const void *a, const void *b) {
    const sort_key *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int build_one(tokenizer *t, tok_matcher *m, bool normalized, clover_error *err) {
    memset(m, 0, sizeof *m);
    size_t n = 0;
    for (size_t i = 0; i < t->n_added; i++)
        if (!!(t->added[i].flags & TOK_ADDED_NORMALIZED) == normalized) n++;
    if (n == 0) return CLOVER_OK;
    m->order = malloc(n * sizeof *m->order);
    sort_key *keys = malloc(n * sizeof *keys);
    if (!m->order || !keys) {
        free(keys);
        return error_set(err, CLOVER_E_NOMEM, "%s: out of memory for added tokens", t->name);
    }
    size_t k = 0;
    for (size_t i = 0; i < t->n_added; i++) {
        const tok_added *a = &t->added[i];
        if (!!(a->flags & TOK_ADDED_NORMALIZED) != normalized) continue;
        keys[k++] = (sort_key){.first = (uint8_t)t->arena[a->moff], .len = a->mlen, .index = (uint32_t)i};
    }
    qsort(keys, n, sizeof *keys, cmp_longest_first);
    for (size_t i = 0; i < n; i++) m->order[i] = keys[i].index;
    free(keys);
    m->n = n;
    size_t j = 0;
    for (int b = 0; b < 256; b++) {
        m->start[b] = (uint32_t)j;
        while (j < n && (uint8_t)t->arena[t->added[m->order[j]].moff] == b) j++;
    }
    m->start[256] = (uint32_t)n;
    return CLOVER_OK;
}

int added_build_matchers(tokenizer *t, clover_error *err) {
    int rc = build_one(t, &t->match_raw, false, err);
    if (rc) return rc;
    return build_one(t, &t->match_norm, true, err);
}

int32_t added_find(const tokenizer *t, const tok_matcher *m, const uint8_t *s, size_t from, size_t n, size_t *at) {
    if (m->n == 0) return -1;
    for (size_t p = from; p < n; p++) {
        uint8_t b = s[p];
        uint32_t lo = m->start[b], hi = m->start[b + 1];
        if (lo == hi) continue;
        for (uint32_t k = lo; k < hi; k++) {
            const tok_added *a = &t->added[m->order[k]];
            if (a->mlen <= n - p && memcmp(s + p, t->arena + a->moff, a->mlen) == 0) {
                *at = p;
                return (int32_t)m->order[k];
            }
        }
    }
    return -1;
}
