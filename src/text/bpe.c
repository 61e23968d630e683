/*
 * bpe.c: byte-pair merging of one pre-tokenized word, with a cache.
 *
 * The word starts as its byte tokens in a linked list; a min-heap holds
 * the candidate merges of neighbours ordered by (rank, position), so the
 * lowest-ranked merge is applied first and ties go to the leftmost. Heap
 * entries are not removed when a merge changes their neighbourhood; a
 * popped entry is applied only if its left symbol is still alive, has a
 * right neighbour, and that pair still merges into the same token: the
 * exact rule of Hugging Face's Word::merge_all, so results agree even for
 * vocabularies where two different pairs make the same token.
 * O(n log n) per word, so a megabyte without a space is not quadratic.
 *
 * Natural text repeats its words, so merged words (up to 255 bytes) are
 * kept in a per-encoder cache; it is emptied when full rather than
 * managed, which keeps it simple and bounded (a few MB).
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/tok_internal.h"

enum {
    CACHE_SLOTS = TOK_WORD_CACHE_SLOTS,
    CACHE_MAX_WORDS = CACHE_SLOTS / 2,
    CACHE_MAX_WORD = 255,
    CACHE_MAX_KEY_BYTES = 2 << 20,
    CACHE_MAX_IDS = 1 << 20,
};

static void cache_clear(tokenizer_encoder *e) {
    memset(e->slots, 0, CACHE_SLOTS * sizeof *e->slots);
    e->n_cached = 0;
    e->ckeys_n = 0;
    e->cids_n = 0;
}

static const word_slot *cache_find(const tokenizer_encoder *e, const uint8_t *w, size_t n, uint64_t h) {
    for (size_t i = h & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
        const word_slot *s = &e->slots[i];
        if (s->key_len == 0) return NULL;
        if (s->hash == h && s->key_len == n && memcmp(e->ckeys + s->key_off, w, n) == 0) return s;
    }
}

/* Best effort: a failure to grow just leaves the word out of the cache. */
static void cache_put(tokenizer_encoder *e, const uint8_t *w, size_t n, uint64_t h, const int32_t *ids, size_t k) {
    if (k > 0xFFFF) return;
    if (!e->slots) {
        e->slots = calloc(CACHE_SLOTS, sizeof *e->slots);
        if (!e->slots) return;
    }
    if (e->n_cached >= CACHE_MAX_WORDS || e->ckeys_n + n > CACHE_MAX_KEY_BYTES || e->cids_n + k > CACHE_MAX_IDS)
        cache_clear(e);
    if (tok_grow((void **)&e->ckeys, &e->ckeys_cap, e->ckeys_n + n, 1, NULL) ||
        tok_grow((void **)&e->cids, &e->cids_cap, e->cids_n + k, sizeof *e->cids, NULL))
        return;
    size_t i = h & (CACHE_SLOTS - 1);
    while (e->slots[i].key_len != 0) i = (i + 1) & (CACHE_SLOTS - 1);
    memcpy(e->ckeys + e->ckeys_n, w, n);
    memcpy(e->cids + e->cids_n, ids, k * sizeof *ids);
    e->slots[i] = (word_slot){.hash = h,
                              .key_off = (uint32_t)e->ckeys_n,
                              .ids_off = (uint32_t)e->cids_n,
                              .key_len = (uint16_t)n,
                              .n_ids = (uint16_t)k};
    e->ckeys_n += n;
    e->cids_n += k;
    e->n_cached++;
}

static bool item_less(const bpe_item *a, const bpe_item *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(bpe_item *h, size_t *n, bpe_item x) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!item_less(&x, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static bpe_item heap_pop(bpe_item *h, size_t *n) {
    bpe_item top = h[0], x = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && item_less(&h[c + 1], &h[c])) c++;
        if (!item_less(&h[c], &x)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

static void push_pair(const tokenizer *t, bpe_item *heap, size_t *nh, const bpe_sym *sym, int32_t pos) {
    const tok_merge *m = tok_merge_find(t, sym[pos].id, sym[sym[pos].next].id);
    if (m) heap_push(heap, nh, (bpe_item){.rank = m->rank, .pos = (uint32_t)pos, .id = m->id});
}

/* The word's initial symbols: its byte tokens (Hugging Face's merge_word:
 * a byte without a token becomes unk, fused with its neighbours if asked,
 * or is dropped when there is no unk token). */
static size_t initial_symbols(const tokenizer *t, const uint8_t *w, size_t n, bpe_sym *sym) {
    size_t k = 0;
    bool pending_unk = false;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[w[i]];
        if (id < 0) {
            if (t->unk_id < 0) continue;
            if (pending_unk && t->fuse_unk) continue;
            id = t->unk_id;
            pending_unk = true;
        } else {
            pending_unk = false;
        }
        sym[k] = (bpe_sym){.id = id, .prev = (int32_t)k - 1, .next = (int32_t)k + 1};
        k++;
    }
    if (k) sym[k - 1].next = -1;
    return k;
}

int bpe_encode_word(tokenizer_encoder *e, const uint8_t *w, size_t n, token_ids *out, clover_error *err) {
    const tokenizer *t = e->tok;
    if (n == 0) return CLOVER_OK;
    if (n == 1 && t->byte_id[w[0]] >= 0) return token_ids_push(out, t->byte_id[w[0]], err);
    if (n > INT32_MAX) return error_set(err, CLOVER_E_INVALID, "%s: a %zu-byte word is too long", t->name, n);

    uint64_t h = 0;
    bool cacheable = n <= CACHE_MAX_WORD;
    if (cacheable) {
        h = tok_hash_bytes(w, n);
        const word_slot *s = e->slots ? cache_find(e, w, n, h) : NULL;
        if (s) {
            int rc = tok_grow((void **)&out->v, &out->cap, out->n + s->n_ids, sizeof *out->v, err);
            if (rc) return rc;
            memcpy(out->v + out->n, e->cids + s->ids_off, s->n_ids * sizeof *out->v);
            out->n += s->n_ids;
            return CLOVER_OK;
        }
    }
    if (t->ignore_merges) {
        int32_t id = tok_vocab_find(t, w, n);
        if (id >= 0) {
            if (cacheable) cache_put(e, w, n, h, &id, 1);
            return token_ids_push(out, id, err);
        }
    }

    int rc = tok_grow((void **)&e->sym, &e->sym_cap, n, sizeof *e->sym, err);
    if (!rc) rc = tok_grow((void **)&e->heap, &e->heap_cap, n, sizeof *e->heap, err);
    if (rc) return rc;
    bpe_sym *sym = e->sym;
    size_t k = initial_symbols(t, w, n, sym);
    if (k == 0) return CLOVER_OK;

    bpe_item *heap = e->heap;
    size_t nh = 0;
    /* The merge table is megabytes: ask for the slots of the next pairs
     * ahead of probing them, so the cache misses overlap. */
    enum { AHEAD = 16 };
    for (size_t i = 0; i + 1 < k && i < AHEAD; i++)
        __builtin_prefetch(&t->merges[tok_merge_home(t, sym[i].id, sym[i + 1].id)]);
    for (size_t i = 0; i + 1 < k; i++) {
        if (i + AHEAD + 1 < k)
            __builtin_prefetch(&t->merges[tok_merge_home(t, sym[i + AHEAD].id, sym[i + AHEAD + 1].id)]);
        push_pair(t, heap, &nh, sym, (int32_t)i);
    }
    while (nh) {
        bpe_item top = heap_pop(heap, &nh);
        bpe_sym *left = &sym[top.pos];
        if (left->id < 0 || left->next < 0) continue;
        const tok_merge *m = tok_merge_find(t, left->id, sym[left->next].id);
        if (!m || m->id != top.id) continue; /* stale: the neighbourhood changed */
        int32_t right = left->next;
        left->id = top.id;
        left->next = sym[right].next;
        sym[right].id = -1;
        if (left->next >= 0) sym[left->next].prev = (int32_t)top.pos;
        /* each merge removes a symbol and adds at most two entries; the heap
         * never holds more than the symbols that are left plus those popped */
        if (nh + 2 > e->heap_cap) {
            rc = tok_grow((void **)&e->heap, &e->heap_cap, nh + 2, sizeof *e->heap, err);
            if (rc) return rc;
            heap = e->heap;
        }
        if (left->prev >= 0) push_pair(t, heap, &nh, sym, left->prev);
        if (left->next >= 0) push_pair(t, heap, &nh, sym, (int32_t)top.pos);
    }

    size_t start = out->n;
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        rc = token_ids_push(out, sym[i].id, err);
        if (rc) return rc;
    }
    if (cacheable) cache_put(e, w, n, h, out->v + start, out->n - start);
    return CLOVER_OK;
}
