/*
 * tok_internal.h: the tokenizer's data, shared by the files of src/text/
 * (loaders build it, the encoder and decoders read it). Not for other
 * modules: they use tokenizer.h.
 *
 * Everything an id decodes to lives in one byte arena addressed by
 * offsets, so the loaders can grow it freely. The BPE vocabulary is keyed
 * by raw bytes (the byte-level form is decoded once at load); merges are
 * keyed by the pair of ids they join. Both tables are open addressing,
 * sized at load and never changed after, so lookups need no locking.
 */
#ifndef CLOVER_TEXT_TOK_INTERNAL_H
#define CLOVER_TEXT_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <string.h>

#include "text/tokenizer.h"

enum {
    TOK_MAX_ID = 1 << 24, /* ids beyond this are refused (a hostile file cannot make us allocate 2^31 rows) */
    TOK_MAX_SPLIT = 8,    /* Split stages in a pre-tokenizer sequence */
    TOK_MAX_ADDED_LEN = 4096,
    TOK_WORD_CACHE_SLOTS = 1 << 16, /* per encoder; allocated on first use */
};

/* Flags of an added token (Hugging Face AddedToken). */
enum {
    TOK_ADDED_SPECIAL = 1u,
    TOK_ADDED_LSTRIP = 2u,
    TOK_ADDED_RSTRIP = 4u,
    TOK_ADDED_SINGLE_WORD = 8u,
    TOK_ADDED_NORMALIZED = 16u,
};

typedef struct tok_vocab_entry {
    uint32_t off, len; /* raw bytes in the arena */
    int32_t id;
} tok_vocab_entry;

typedef struct tok_slot {
    uint32_t hash;
    int32_t entry; /* index into vocab, -1 when empty */
} tok_slot;

typedef struct tok_merge {
    uint64_t key;  /* (left id << 32) | right id */
    uint32_t rank; /* position in the merge list: lower merges first */
    int32_t id;    /* the merged token; -1 marks an empty slot */
} tok_merge;

typedef struct tok_added {
    uint32_t off, len;   /* content as written (what the id decodes to) */
    uint32_t moff, mlen; /* the form matched in text (normalized when TOK_ADDED_NORMALIZED) */
    int32_t id;
    uint32_t flags;
} tok_added;

/* Added tokens grouped by first byte, longest first, for a leftmost-longest scan. */
typedef struct tok_matcher {
    uint32_t start[257]; /* group b is order[start[b] .. start[b+1]) */
    uint32_t *order;     /* indices into tokenizer.added */
    size_t n;
} tok_matcher;

struct tokenizer {
    char name[256]; /* the file, for messages */

    int32_t n_tokens;
    uint8_t *kind;     /* [n_tokens] tokenizer_kind */
    uint32_t *dec_off; /* [n_tokens] what each id decodes to: arena offset */
    uint32_t *dec_len; /* [n_tokens] and length */

    tok_vocab_entry *vocab; /* the BPE vocabulary */
    size_t n_vocab, cap_vocab;
    tok_slot *vocab_slots; /* raw bytes -> vocab entry */
    size_t vocab_mask;
    tok_merge *merges; /* (left, right) -> rank, merged id */
    size_t merge_bits, n_merges, cap_merges;
    int32_t byte_id[256]; /* the single-byte tokens, -1 if absent */
    int32_t unk_id;       /* for bytes without a token; -1: dropped (as Hugging Face does) */
    bool fuse_unk, ignore_merges;

    tok_added *added;
    size_t n_added, cap_added;
    tok_matcher match_raw;  /* added tokens matched in the text as written */
    tok_matcher match_norm; /* those matched after normalization */

    unsigned norm_opts;    /* utf8proc options, 0 for no normalizer */
    uint8_t norm_min_byte; /* text with no byte >= this is left as it is */
    pcre2_code *split[TOK_MAX_SPLIT];
    size_t n_split;

    char *arena;
    size_t arena_n, arena_cap;
    tokenizer_specials specials;
};

/* ---- building (vocab.c), used by the loaders ---- */

int tok_create(tokenizer **out, const char *name, clover_error *err);
/* A BPE vocabulary token as the file stores it (byte-level form). */
int tok_add_vocab(tokenizer *t, int32_t id, const char *s, size_t len, clover_error *err);
/* After every tok_add_vocab: builds the bytes -> id table and the byte tokens. */
int tok_index_vocab(tokenizer *t, size_t n_merges_hint, clover_error *err);
/* Looks a token up by its byte-level form; -1 when absent. */
int32_t tok_vocab_find_text(const tokenizer *t, const char *s, size_t len);
/* Merge number rank of "a b" (byte-level forms); a, b and a+b must be in the vocabulary. */
int tok_add_merge(tokenizer *t, const char *a, size_t alen, const char *b, size_t blen, uint32_t rank,
                  clover_error *err);
int tok_add_added(tokenizer *t, int32_t id, const char *content, size_t len, uint32_t flags, clover_error *err);
/* Compiles one Split stage (pretokenize.c); literal: the pattern is a plain string. */
int tok_add_split(tokenizer *t, const char *pattern, size_t len, bool literal, const char *where, clover_error *err);
/* After everything: id table, added-token matchers, special ids. */
int tok_finish(tokenizer *t, clover_error *err);
/* Sets *slot to the id of the token with this text, if there is one. */
void tok_set_special_by_text(const tokenizer *t, int32_t *slot, const char *text);
/* Appends an id to specials.eos_ids (once; ignored when -1). After tok_finish. */
void tok_add_eos(tokenizer *t, int32_t id);

/* Appends n bytes to the arena; *off receives their offset. */
int tok_arena_add(tokenizer *t, const void *data, size_t n, uint32_t *off, clover_error *err);

/* ---- hashing ---- */

static inline uint64_t tok_hash_bytes(const void *data, size_t n) {
    const uint8_t *p = (const uint8_t *)data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h;
}

static inline int32_t tok_vocab_find(const tokenizer *t, const void *bytes, size_t n) {
    uint32_t h = (uint32_t)tok_hash_bytes(bytes, n);
    for (size_t i = h & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
        const tok_slot *s = &t->vocab_slots[i];
        if (s->entry < 0) return -1;
        if (s->hash == h) {
            const tok_vocab_entry *v = &t->vocab[s->entry];
            if (v->len == n && memcmp(t->arena + v->off, bytes, n) == 0) return v->id;
        }
    }
}

/* Where the merge of (a, b) would sit first. */
static inline size_t tok_merge_home(const tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - t->merge_bits));
}

static inline const tok_merge *tok_merge_find(const tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t mask = ((size_t)1 << t->merge_bits) - 1;
    for (size_t i = tok_merge_home(t, a, b);; i = (i + 1) & mask) {
        const tok_merge *m = &t->merges[i];
        if (m->id < 0) return NULL;
        if (m->key == key) return m;
    }
}

/* ---- encoding internals ---- */

typedef struct bpe_sym {
    int32_t id;         /* -1 once merged into its left neighbour */
    int32_t prev, next; /* -1 at the ends */
} bpe_sym;

typedef struct bpe_item {
    uint32_t rank, pos;
    int32_t id;
} bpe_item;

typedef struct word_slot {
    uint64_t hash;
    uint32_t key_off, ids_off;
    uint16_t key_len, n_ids; /* key_len 0: empty */
} word_slot;

struct tokenizer_encoder {
    const tokenizer *tok;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
    int32_t *ucs; /* normalization buffer (code points, then UTF-8 in place) */
    size_t ucs_cap;
    bpe_sym *sym;
    size_t sym_cap;
    bpe_item *heap;
    size_t heap_cap;
    word_slot *slots; /* the cache of merged words: [TOK_WORD_CACHE_SLOTS] or NULL */
    size_t n_cached;
    uint8_t *ckeys;
    size_t ckeys_n, ckeys_cap;
    int32_t *cids;
    size_t cids_n, cids_cap;
};

/* Grows a buffer of elem-sized items to hold at least need (doubling). */
int tok_grow(void **p, size_t *cap, size_t need, size_t elem, clover_error *err);

/* bpe.c: one pre-tokenized word (raw bytes) to ids. */
int bpe_encode_word(tokenizer_encoder *e, const uint8_t *w, size_t n, token_ids *out, clover_error *err);
/* normalize.c: s or a normalized copy in the encoder's buffer. */
bool normalize_nfc_stable(const char *text, size_t n); /* valid UTF-8 that NFC leaves as it is (true is certain) */
int normalize_run(tokenizer_encoder *e, const char *s, size_t n, const char **out, size_t *out_n, clover_error *err);
/* pretokenize.c: splits s with the Split stages from `stage` on and encodes each piece. */
int pretok_run(tokenizer_encoder *e, size_t stage, const char *s, size_t n, token_ids *out, clover_error *err);
/* added.c: groups the added tokens for matching. */
int added_build_matchers(tokenizer *t, clover_error *err);
/* The leftmost-longest added token of m in s[from..n): its index in
 * t->added, or -1; *at is where it starts. */
int32_t added_find(const tokenizer *t, const tok_matcher *m, const uint8_t *s, size_t from, size_t n, size_t *at);

#endif
