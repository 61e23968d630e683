/*
 * tokenizer.c: the tokenizer's small shared pieces: the growable id and
 * byte buffers of tokenizer.h, lookups by id and by text, and freeing.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/tok_internal.h"

void token_ids_free(token_ids *ids) {
    if (!ids) return;
    free(ids->v);
    *ids = (token_ids){0};
}

int token_ids_push(token_ids *ids, int32_t id, clover_error *err) {
    if (ids->n == ids->cap) {
        int rc = tok_grow((void **)&ids->v, &ids->cap, ids->n + 1, sizeof *ids->v, err);
        if (rc) return rc;
    }
    ids->v[ids->n++] = id;
    return CLOVER_OK;
}

void text_bytes_free(text_bytes *b) {
    if (!b) return;
    free(b->v);
    *b = (text_bytes){0};
}

int text_bytes_append(text_bytes *b, const void *data, size_t n, clover_error *err) {
    if (n == SIZE_MAX) return error_set(err, CLOVER_E_NOMEM, "tokenizer: text too long");
    int rc = tok_grow((void **)&b->v, &b->cap, b->n + n + 1, 1, err);
    if (rc) return rc;
    if (n) memcpy(b->v + b->n, data, n);
    b->n += n;
    b->v[b->n] = '\0';
    return CLOVER_OK;
}

int32_t tokenizer_n_tokens(const tokenizer *t) { return t->n_tokens; }

const tokenizer_specials *tokenizer_get_specials(const tokenizer *t) { return &t->specials; }

tokenizer_kind tokenizer_token_kind(const tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n_tokens) return TOKENIZER_KIND_NONE;
    return (tokenizer_kind)t->kind[id];
}

const char *tokenizer_token_bytes(const tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_tokens) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->dec_len[id];
    return t->arena + t->dec_off[id];
}

int32_t tokenizer_find(const tokenizer *t, const char *text, size_t len) {
    for (size_t i = 0; i < t->n_added; i++) {
        const tok_added *a = &t->added[i];
        if (a->len == len && memcmp(t->arena + a->off, text, len) == 0) return a->id;
    }
    if (!t->vocab_slots || len == 0) return -1;
    return tok_vocab_find(t, text, len);
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n_split; i++) pcre2_code_free(t->split[i]);
    free(t->kind);
    free(t->dec_off);
    free(t->dec_len);
    free(t->vocab);
    free(t->vocab_slots);
    free(t->merges);
    free(t->added);
    free(t->match_raw.order);
    free(t->match_norm.order);
    free(t->arena);
    free(t);
}
