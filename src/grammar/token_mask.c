/*
 * token_mask.c: the vocabulary trie and the per-state mask cache
 * (token_mask.h says why). The trie is first-child / next-sibling arrays,
 * with the root's 256 children in a direct table; tokens with identical
 * bytes hang off one node through a chain. The walk is a recursion as deep
 * as the longest token, with one automaton state per depth.
 */
#include "grammar/token_mask.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

#define TM_NONE UINT32_MAX

struct tm_vocab {
    size_t n_vocab, n_nodes, cap_nodes, max_len;
    uint32_t *child, *sib; /* [n_nodes] */
    uint8_t *byte;         /* [n_nodes] */
    int32_t *tok;          /* [n_nodes] first token ending here, -1: none */
    int32_t *dup;          /* [n_vocab] next token with the same bytes, -1: none */
    uint8_t *in_trie;      /* [n_vocab] */
    uint32_t *str_chars;   /* [n_vocab] characters of a token of whole string characters, else 0 */
    uint32_t impure_root;  /* a second trie of the other tokens: all a string-content mask must walk */
    uint32_t root_child[2][256]; /* building: the two roots' children by byte (a sibling scan there is 256 long) */
};

typedef struct tm_entry {
    uint64_t hash;
    bool used, accepts;
    jm_state key;
    uint64_t *mask;
} tm_entry;

struct tm_cache {
    const js_schema *sc;
    const tm_vocab *v;
    size_t words;
    tm_entry *tab; /* [cap] open addressing */
    size_t cap, count, max_entries;
    uint64_t *scratch; /* [words] a mask built before it is stored */
    jm_state *st;      /* [max_len + 1] the walk's states */
    uint64_t computed, hits, visited;
};

static int grow_nodes(tm_vocab *v, clover_error *err) {
    size_t cap = v->cap_nodes ? v->cap_nodes * 2 : 1 << 16;
    uint32_t *c = realloc(v->child, cap * sizeof *c);
    if (c) v->child = c;
    uint32_t *s = realloc(v->sib, cap * sizeof *s);
    if (s) v->sib = s;
    uint8_t *b = realloc(v->byte, cap);
    if (b) v->byte = b;
    int32_t *t = realloc(v->tok, cap * sizeof *t);
    if (t) v->tok = t;
    if (!c || !s || !b || !t) return error_set(err, CLOVER_E_NOMEM, "grammar: no memory for the token trie");
    v->cap_nodes = cap;
    return CLOVER_OK;
}

static int new_trie_node(tm_vocab *v, uint8_t byte, uint32_t *out, clover_error *err) {
    int rc;
    if (v->n_nodes == v->cap_nodes && (rc = grow_nodes(v, err))) return rc;
    uint32_t i = (uint32_t)v->n_nodes++;
    v->child[i] = v->sib[i] = TM_NONE;
    v->byte[i] = byte;
    v->tok[i] = -1;
    *out = i;
    return CLOVER_OK;
}

void tm_vocab_free(tm_vocab *v) {
    if (!v) return;
    free(v->child);
    free(v->sib);
    free(v->byte);
    free(v->tok);
    free(v->dup);
    free(v->in_trie);
    free(v->str_chars);
    free(v);
}

/* Adds token id (bytes b) under root; tokens with the same bytes chain through dup. */
static int insert(tm_vocab *v, uint32_t root, const unsigned char *b, size_t len, int32_t id, int32_t *dup,
                  clover_error *err) {
    uint32_t node = root;
    for (size_t i = 0; i < len; i++) {
        uint32_t *direct = i == 0 ? &v->root_child[root != 0][b[0]] : NULL;
        uint32_t ch = direct ? *direct : v->child[node];
        if (!direct)
            while (ch != TM_NONE && v->byte[ch] != b[i]) ch = v->sib[ch];
        if (ch == TM_NONE) {
            int rc = new_trie_node(v, b[i], &ch, err);
            if (rc) return rc;
            v->sib[ch] = v->child[node];
            v->child[node] = ch;
            if (direct) *direct = ch;
        }
        node = ch;
    }
    dup[id] = v->tok[node];
    v->tok[node] = id;
    return CLOVER_OK;
}

int tm_vocab_build(const tokenizer *t, size_t n_vocab, tm_vocab **out, clover_error *err) {
    *out = NULL;
    if (!t) return error_set(err, CLOVER_E_UNSUPPORTED, "structured output: the model has no tokenizer");
    tm_vocab *v = calloc(1, sizeof *v);
    if (!v) return error_set(err, CLOVER_E_NOMEM, "grammar: no memory");
    v->n_vocab = n_vocab;
    memset(v->root_child, 0xFF, sizeof v->root_child); /* TM_NONE */
    v->dup = malloc((n_vocab ? n_vocab : 1) * sizeof *v->dup);
    v->in_trie = calloc(n_vocab ? n_vocab : 1, 1);
    v->str_chars = calloc(n_vocab ? n_vocab : 1, sizeof *v->str_chars);
    uint32_t root;
    int rc = !v->dup || !v->in_trie || !v->str_chars ? error_set(err, CLOVER_E_NOMEM, "grammar: no memory") : CLOVER_OK;
    if (!rc) rc = new_trie_node(v, 0, &root, err);                 /* node 0: every token */
    if (!rc) rc = new_trie_node(v, 0, &v->impure_root, err);       /* node 1: those not of whole string characters */
    const size_t n_tok = (size_t)tokenizer_n_tokens(t);
    for (size_t id = 0; !rc && id < n_vocab; id++) {
        v->dup[id] = -1;
        if (id >= n_tok) continue;
        tokenizer_kind k = tokenizer_token_kind(t, (int32_t)id);
        if (k != TOKENIZER_KIND_NORMAL && k != TOKENIZER_KIND_ADDED) continue;
        size_t len = 0;
        const unsigned char *b = (const unsigned char *)tokenizer_token_bytes(t, (int32_t)id, &len);
        if (!b || len == 0) continue;
        v->str_chars[id] = jm_string_chars(b, len);
        if ((rc = insert(v, 0, b, len, (int32_t)id, v->dup, err))) break;
        if (!v->str_chars[id] && (rc = insert(v, v->impure_root, b, len, (int32_t)id, v->dup, err /* the same bytes: the same chain */))) break;
        v->in_trie[id] = 1;
        if (len > v->max_len) v->max_len = len;
    }
    if (rc) {
        tm_vocab_free(v);
        return rc;
    }
    *out = v;
    return CLOVER_OK;
}

size_t tm_vocab_n(const tm_vocab *v) { return v->n_vocab; }
size_t tm_vocab_max_len(const tm_vocab *v) { return v->max_len; }
bool tm_vocab_has(const tm_vocab *v, int32_t id) { return id >= 0 && (size_t)id < v->n_vocab && v->in_trie[id]; }

void tm_cache_free(tm_cache *c) {
    if (!c) return;
    if (c->tab)
        for (size_t i = 0; i < c->cap; i++) free(c->tab[i].mask);
    free(c->tab);
    free(c->scratch);
    free(c->st);
    free(c);
}

int tm_cache_create(const js_schema *sc, const tm_vocab *v, size_t max_entries, tm_cache **out, clover_error *err) {
    *out = NULL;
    tm_cache *c = calloc(1, sizeof *c);
    if (!c) return error_set(err, CLOVER_E_NOMEM, "grammar: no memory");
    c->sc = sc;
    c->v = v;
    c->words = (v->n_vocab + 63) / 64;
    c->max_entries = max_entries ? max_entries : 1;
    c->cap = 4;
    while (c->cap < 2 * c->max_entries) c->cap *= 2;
    c->tab = calloc(c->cap, sizeof *c->tab);
    c->scratch = calloc(c->words ? c->words : 1, sizeof *c->scratch);
    c->st = malloc((v->max_len + 1) * sizeof *c->st);
    if (!c->tab || !c->scratch || !c->st) {
        tm_cache_free(c);
        return error_set(err, CLOVER_E_NOMEM, "grammar: no memory for the mask cache");
    }
    *out = c;
    return CLOVER_OK;
}

/* The cache key of s: counts that no single token can move across a bound
 * are clamped, so such states share a mask (token_mask.h). */
static void canonical_key(const tm_cache *c, const jm_state *s, jm_state *key) {
    memset(key, 0, sizeof *key);
    jm_copy(key, s);
    const uint32_t C = c->v->max_len + 1 < 0xFFFF ? (uint32_t)c->v->max_len + 1 : 0xFFFF;
    for (uint32_t i = 0; i < key->depth; i++) {
        jm_frame *f = &key->f[i];
        if (f->node == UINT32_MAX) continue;
        const js_node *n = &c->sc->nodes[f->node];
        uint32_t mn, mx;
        if (n->kind == JS_STRING) {
            mn = n->min_len;
            mx = n->max_len;
        } else if (n->kind == JS_ARRAY) {
            mn = n->min_items;
            mx = n->max_items;
        } else {
            continue;
        }
        uint32_t rmin = f->n < mn ? mn - f->n : 0, rmax = mx == UINT32_MAX ? C : mx - f->n;
        f->n = (rmin < C ? rmin : C) << 16 | (rmax < C ? rmax : C);
    }
}

static uint64_t hash_key(const jm_state *k) {
    const unsigned char *p = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < jm_state_size(k); i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void walk(tm_cache *c, uint32_t node, size_t depth, uint64_t *mask) {
    const tm_vocab *v = c->v;
    for (uint32_t ch = v->child[node]; ch != TM_NONE; ch = v->sib[ch]) {
        jm_state *dst = &c->st[depth + 1];
        jm_copy(dst, &c->st[depth]);
        c->visited++;
        if (!jm_feed(c->sc, dst, v->byte[ch])) continue;
        for (int32_t t = v->tok[ch]; t >= 0; t = v->dup[t]) mask[t >> 6] |= 1ull << (t & 63);
        if (v->child[ch] != TM_NONE) walk(c, ch, depth + 1, mask);
    }
}

static void cache_clear(tm_cache *c) {
    for (size_t i = 0; i < c->cap; i++) c->tab[i].used = false; /* masks stay allocated for reuse */
    c->count = 0;
}

const uint64_t *tm_mask(tm_cache *c, const jm_state *s, bool *accepts) {
    jm_state key;
    canonical_key(c, s, &key);
    const uint64_t h = hash_key(&key);
    const size_t ks = jm_state_size(&key);
    size_t i = h & (c->cap - 1);
    for (; c->tab[i].used; i = (i + 1) & (c->cap - 1))
        if (c->tab[i].hash == h && c->tab[i].key.depth == key.depth && !memcmp(&c->tab[i].key, &key, ks)) {
            c->hits++;
            *accepts = c->tab[i].accepts;
            return c->tab[i].mask;
        }
    memset(c->scratch, 0, c->words * sizeof *c->scratch);
    jm_copy(&c->st[0], s);
    uint32_t room;
    if (jm_string_content(c->sc, s, &room)) { /* inside a string: most tokens decided by their length alone */
        const tm_vocab *v = c->v;
        for (size_t t = 0; t < v->n_vocab; t++)
            if (v->str_chars[t] && v->str_chars[t] <= room) c->scratch[t >> 6] |= 1ull << (t & 63);
        walk(c, v->impure_root, 0, c->scratch);
    } else {
        walk(c, 0, 0, c->scratch);
    }
    c->computed++;
    *accepts = jm_accepts(c->sc, s);
    if (c->count >= c->max_entries) {
        cache_clear(c);
        for (i = h & (c->cap - 1); c->tab[i].used; i = (i + 1) & (c->cap - 1)) {
        }
    }
    tm_entry *e = &c->tab[i];
    if (!e->mask) e->mask = malloc(c->words * sizeof *e->mask);
    if (!e->mask) return c->scratch; /* not cached, still correct */
    memcpy(e->mask, c->scratch, c->words * sizeof *e->mask);
    e->used = true;
    e->hash = h;
    e->accepts = *accepts;
    jm_copy(&e->key, &key);
    c->count++;
    return e->mask;
}

void tm_cache_stats(const tm_cache *c, uint64_t *computed, uint64_t *hits, uint64_t *visited) {
    *computed = c->computed;
    *hits = c->hits;
    *visited = c->visited;
}
