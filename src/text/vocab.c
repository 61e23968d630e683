/*
 * vocab.c: building a tokenizer, whatever file it comes from. The loaders
 * (vocab_json.c, vocab_gguf.c) only translate their format into calls
 * here, so both produce the same tables and are checked the same way:
 * ids in range, merges naming tokens that exist, added tokens not empty.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/alloc.h"
#include "base/error.h"
#include "text/bytelevel.h"
#include "text/tok_internal.h"

int tok_grow(void **p, size_t *cap, size_t need, size_t elem, clover_error *err) {
    if (need <= *cap) return CLOVER_OK;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (!mem_mul_ok(n, 2, &n)) return error_set(err, CLOVER_E_NOMEM, "tokenizer: buffer size overflows");
    }
    size_t bytes;
    if (!mem_mul_ok(n, elem, &bytes)) return error_set(err, CLOVER_E_NOMEM, "tokenizer: buffer size overflows");
    void *q = realloc(*p, bytes);
    if (!q) return error_set(err, CLOVER_E_NOMEM, "tokenizer: out of memory growing a buffer to %zu bytes", bytes);
    *p = q;
    *cap = n;
    return CLOVER_OK;
}

int tok_arena_add(tokenizer *t, const void *data, size_t n, uint32_t *off, clover_error *err) {
    size_t need;
    if (!mem_add_ok(t->arena_n, n + 1, &need) || need > UINT32_MAX)
        return error_set(err, CLOVER_E_FORMAT, "%s: token text exceeds 4 GiB in total", t->name);
    int rc = tok_grow((void **)&t->arena, &t->arena_cap, need, 1, err);
    if (rc) return rc;
    if (n) memcpy(t->arena + t->arena_n, data, n);
    t->arena[t->arena_n + n] = '\0';
    *off = (uint32_t)t->arena_n;
    t->arena_n += n;
    return CLOVER_OK;
}

int tok_create(tokenizer **out, const char *name, clover_error *err) {
    *out = NULL;
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return error_set(err, CLOVER_E_NOMEM, "tokenizer: out of memory");
    snprintf(t->name, sizeof t->name, "%s", name ? name : "tokenizer");
    t->unk_id = -1;
    tokenizer_specials *s = &t->specials;
    s->bos = s->eos = s->pad = s->unk = -1;
    s->im_start = s->im_end = s->endoftext = s->think = s->think_end = s->mask = -1;
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    *out = t;
    return CLOVER_OK;
}

int tok_add_vocab(tokenizer *t, int32_t id, const char *s, size_t len, clover_error *err) {
    if (id < 0 || id >= TOK_MAX_ID)
        return error_set(err, CLOVER_E_FORMAT, "%s: vocabulary token '%.*s' has id %ld, expected 0..%d", t->name,
                         (int)(len < 64 ? len : 64), s, (long)id, TOK_MAX_ID - 1);
    if (len == 0) return error_set(err, CLOVER_E_FORMAT, "%s: vocabulary token %ld is empty", t->name, (long)id);
    int rc = tok_grow((void **)&t->vocab, &t->cap_vocab, t->n_vocab + 1, sizeof *t->vocab, err);
    if (rc) return rc;
    /* decode straight into the arena's tail: the raw form is never longer */
    size_t need;
    if (!mem_add_ok(t->arena_n, len + 1, &need) || need > UINT32_MAX)
        return error_set(err, CLOVER_E_FORMAT, "%s: token text exceeds 4 GiB in total", t->name);
    rc = tok_grow((void **)&t->arena, &t->arena_cap, need, 1, err);
    if (rc) return rc;
    size_t n = bytelevel_decode_token(s, len, t->arena + t->arena_n);
    uint32_t off = (uint32_t)t->arena_n;
    t->arena_n += n;
    t->arena[t->arena_n] = '\0';
    t->vocab[t->n_vocab++] = (tok_vocab_entry){.off = off, .len = (uint32_t)n, .id = id};
    return CLOVER_OK;
}

static size_t table_size_for(size_t n) {
    size_t size = 16;
    while (size < n * 2 + 1) size *= 2;
    return size;
}

int tok_index_vocab(tokenizer *t, size_t n_merges_hint, clover_error *err) {
    size_t size = table_size_for(t->n_vocab);
    t->vocab_slots = malloc(size * sizeof *t->vocab_slots);
    if (!t->vocab_slots) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory for the vocabulary", t->name);
    for (size_t i = 0; i < size; i++) t->vocab_slots[i] = (tok_slot){.hash = 0, .entry = -1};
    t->vocab_mask = size - 1;
    for (size_t e = 0; e < t->n_vocab; e++) {
        const tok_vocab_entry *v = &t->vocab[e];
        uint32_t h = (uint32_t)tok_hash_bytes(t->arena + v->off, v->len);
        size_t i = h & t->vocab_mask;
        bool dup = false;
        for (; t->vocab_slots[i].entry >= 0; i = (i + 1) & t->vocab_mask) {
            const tok_vocab_entry *o = &t->vocab[t->vocab_slots[i].entry];
            if (t->vocab_slots[i].hash == h && o->len == v->len &&
                memcmp(t->arena + o->off, t->arena + v->off, v->len) == 0) {
                dup = true; /* the same bytes twice: the first one is found, as a map would keep */
                break;
            }
        }
        if (!dup) t->vocab_slots[i] = (tok_slot){.hash = h, .entry = (int32_t)e};
    }
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = tok_vocab_find(t, &c, 1);
    }

    if (n_merges_hint > (size_t)TOK_MAX_ID * 4)
        return error_set(err, CLOVER_E_FORMAT, "%s: %zu merges, expected at most %d", t->name, n_merges_hint,
                         TOK_MAX_ID * 4);
    size_t bits = 4;
    while (((size_t)1 << bits) < n_merges_hint * 2 + 1) bits++;
    t->merge_bits = bits;
    t->cap_merges = (size_t)1 << bits;
    t->merges = malloc(t->cap_merges * sizeof *t->merges);
    if (!t->merges) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory for %zu merges", t->name, n_merges_hint);
    for (size_t i = 0; i < t->cap_merges; i++) t->merges[i] = (tok_merge){.key = 0, .rank = 0, .id = -1};
    return CLOVER_OK;
}

int32_t tok_vocab_find_text(const tokenizer *t, const char *s, size_t len) {
    char small[256];
    char *buf = len <= sizeof small ? small : malloc(len);
    if (!buf) return -1;
    size_t n = bytelevel_decode_token(s, len, buf);
    int32_t id = tok_vocab_find(t, buf, n);
    if (buf != small) free(buf);
    return id;
}

int tok_add_merge(tokenizer *t, const char *a, size_t alen, const char *b, size_t blen, uint32_t rank,
                  clover_error *err) {
    if (t->n_merges * 2 + 2 > t->cap_merges)
        return error_set(err, CLOVER_E_INTERNAL, "%s: more merges than announced", t->name);
    int32_t ia = tok_vocab_find_text(t, a, alen), ib = tok_vocab_find_text(t, b, blen);
    if (ia < 0 || ib < 0) {
        const char *which = ia < 0 ? a : b;
        int wlen = (int)(ia < 0 ? alen : blen);
        return error_set(err, CLOVER_E_FORMAT, "%s: merge %u ('%.*s %.*s'): token '%.*s' is not in the vocabulary",
                         t->name, rank, (int)alen, a, (int)blen, b, wlen, which);
    }
    char small[512];
    size_t n = alen + blen;
    char *joined = n <= sizeof small ? small : malloc(n);
    if (!joined) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", t->name);
    memcpy(joined, a, alen);
    memcpy(joined + alen, b, blen);
    int32_t id = tok_vocab_find_text(t, joined, n);
    if (joined != small) free(joined);
    if (id < 0)
        return error_set(err, CLOVER_E_FORMAT, "%s: merge %u ('%.*s %.*s'): the merged token is not in the vocabulary",
                         t->name, rank, (int)alen, a, (int)blen, b);
    uint64_t key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
    size_t mask = t->cap_merges - 1;
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - t->merge_bits));
    for (; t->merges[i].id >= 0; i = (i + 1) & mask) {
        if (t->merges[i].key == key) break; /* a repeated pair: the later line wins, as in Hugging Face */
    }
    if (t->merges[i].id < 0) t->n_merges++;
    t->merges[i] = (tok_merge){.key = key, .rank = rank, .id = id};
    return CLOVER_OK;
}

int tok_add_added(tokenizer *t, int32_t id, const char *content, size_t len, uint32_t flags, clover_error *err) {
    if (id < 0 || id >= TOK_MAX_ID)
        return error_set(err, CLOVER_E_FORMAT, "%s: added token '%.*s' has id %ld, expected 0..%d", t->name,
                         (int)(len < 64 ? len : 64), content, (long)id, TOK_MAX_ID - 1);
    if (len == 0 || len > TOK_MAX_ADDED_LEN)
        return error_set(err, CLOVER_E_FORMAT, "%s: added token %ld has %zu bytes, expected 1..%d", t->name, (long)id,
                         len, TOK_MAX_ADDED_LEN);
    int rc = tok_grow((void **)&t->added, &t->cap_added, t->n_added + 1, sizeof *t->added, err);
    if (rc) return rc;
    uint32_t off;
    rc = tok_arena_add(t, content, len, &off, err);
    if (rc) return rc;
    t->added[t->n_added++] =
        (tok_added){.off = off, .len = (uint32_t)len, .moff = off, .mlen = (uint32_t)len, .id = id, .flags = flags};
    return CLOVER_OK;
}

/* The form a normalized added token is matched in: its content normalized. */
static int normalize_added(tokenizer *t, tok_added *a, clover_error *err) {
    if (!(a->flags & TOK_ADDED_NORMALIZED) || !t->norm_opts) return CLOVER_OK;
    utf8proc_uint8_t *out = NULL;
    utf8proc_ssize_t n =
        utf8proc_map((const utf8proc_uint8_t *)t->arena + a->off, a->len, &out, (utf8proc_option_t)t->norm_opts);
    if (n < 0) {
        /* not valid UTF-8: it can never match normalized text, so keep it as written */
        return CLOVER_OK;
    }
    if (n == 0) {
        free(out);
        return error_set(err, CLOVER_E_FORMAT, "%s: added token %ld normalizes to nothing", t->name, (long)a->id);
    }
    uint32_t off;
    int rc = tok_arena_add(t, out, (size_t)n, &off, err);
    free(out);
    if (rc) return rc;
    a->moff = off;
    a->mlen = (uint32_t)n;
    return CLOVER_OK;
}

void tok_set_special_by_text(const tokenizer *t, int32_t *slot, const char *text) {
    int32_t id = tokenizer_find(t, text, strlen(text));
    if (id >= 0) *slot = id;
}

int tok_finish(tokenizer *t, clover_error *err) {
    int32_t max_id = -1;
    for (size_t i = 0; i < t->n_vocab; i++)
        if (t->vocab[i].id > max_id) max_id = t->vocab[i].id;
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].id > max_id) max_id = t->added[i].id;
    t->n_tokens = max_id + 1;
    size_t n = t->n_tokens > 0 ? (size_t)t->n_tokens : 1;
    t->kind = calloc(n, 1);
    t->dec_off = calloc(n, sizeof *t->dec_off);
    t->dec_len = calloc(n, sizeof *t->dec_len);
    if (!t->kind || !t->dec_off || !t->dec_len)
        return error_set(err, CLOVER_E_NOMEM, "%s: out of memory for %zu tokens", t->name, n);
    for (size_t i = 0; i < t->n_vocab; i++) {
        const tok_vocab_entry *v = &t->vocab[i];
        t->kind[v->id] = TOKENIZER_KIND_NORMAL;
        t->dec_off[v->id] = v->off;
        t->dec_len[v->id] = v->len;
    }
    for (size_t i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        t->kind[a->id] = (a->flags & TOK_ADDED_SPECIAL) ? TOKENIZER_KIND_SPECIAL : TOKENIZER_KIND_ADDED;
        t->dec_off[a->id] = a->off;
        t->dec_len[a->id] = a->len;
        int rc = normalize_added(t, a, err);
        if (rc) return rc;
    }
    int rc = added_build_matchers(t, err);
    if (rc) return rc;

    tokenizer_specials *s = &t->specials;
    s->im_start = tokenizer_find(t, "<|im_start|>", 12);
    s->im_end = tokenizer_find(t, "<|im_end|>", 10);
    s->endoftext = tokenizer_find(t, "<|endoftext|>", 13);
    s->think = tokenizer_find(t, "<think>", 7);
    s->think_end = tokenizer_find(t, "</think>", 8);
    s->mask = -1;
    static const char *const mask_names[] = {"<|mask|>", "<|MASK|>", "<mask>", "[MASK]"};
    for (size_t i = 0; i < sizeof mask_names / sizeof mask_names[0] && s->mask < 0; i++)
        s->mask = tokenizer_find(t, mask_names[i], strlen(mask_names[i]));
    return CLOVER_OK;
}

void tok_add_eos(tokenizer *t, int32_t id) {
    tokenizer_specials *s = &t->specials;
    if (id < 0 || id >= t->n_tokens) return;
    for (size_t i = 0; i < s->n_eos; i++)
        if (s->eos_ids[i] == id) return;
    if (s->n_eos < TOKENIZER_MAX_EOS) s->eos_ids[s->n_eos++] = id;
}
