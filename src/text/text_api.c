/*
 * text_api.c: the public text functions of clover.h over the model's
 * tokenizer (built from its GGUF metadata at load, src/model/model.c).
 *
 * The model's id range can be wider than the tokenizer's: an embedding is
 * often padded past the last token (Qwen3.5: 248077 tokens, 248320 rows).
 * Such ids are valid model ids with no text, so decoding and streaming give
 * them nothing, as Hugging Face's decode does, instead of failing a request
 * that generated one. Everything returned is malloc'd (clover_free).
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/model.h"
#include "text/tokenizer.h"

struct clover_text_stream {
    tokenizer_stream st;
    int32_t n_tokens, n_vocab;
    text_bytes piece; /* what the last push or flush released */
};

void clover_free(void *p) { free(p); }

static int the_tokenizer(const clover_model *m, const char *fn, const tokenizer **out, clover_error *err) {
    *out = NULL;
    if (!m) return error_set(err, CLOVER_E_INVALID, "%s: model must not be NULL", fn);
    if (!m->tokenizer)
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: %s has no tokenizer (no tokenizer.ggml.* metadata)", fn,
                         m->file ? gguf_name(m->file) : "the model");
    *out = m->tokenizer;
    return CLOVER_OK;
}

int clover_tokenize(const clover_model *m, const char *text, size_t len, int allow_special, int32_t **ids,
                    size_t *n_ids, clover_error *err) {
    if (!ids || !n_ids) return error_set(err, CLOVER_E_INVALID, "clover_tokenize: ids and n_ids must not be NULL");
    *ids = NULL;
    *n_ids = 0;
    if (len && !text) return error_set(err, CLOVER_E_INVALID, "clover_tokenize: %zu bytes of text but NULL", len);
    const tokenizer *t;
    int rc = the_tokenizer(m, "clover_tokenize", &t, err);
    if (rc) return rc;
    token_ids out = {0};
    rc = token_ids_push(&out, 0, err); /* a non-NULL array even for empty text */
    out.n = 0;
    if (!rc) rc = tokenizer_encode(t, text ? text : "", len, allow_special ? TOKENIZER_ALLOW_SPECIAL : 0u, &out, err);
    if (rc) {
        token_ids_free(&out);
        return rc;
    }
    *ids = out.v;
    *n_ids = out.n;
    return CLOVER_OK;
}

int clover_detokenize(const clover_model *m, const int32_t *ids, size_t n, int skip_special, char **text,
                      size_t *len, clover_error *err) {
    if (!text) return error_set(err, CLOVER_E_INVALID, "clover_detokenize: text must not be NULL");
    *text = NULL;
    if (len) *len = 0;
    if (n && !ids) return error_set(err, CLOVER_E_INVALID, "clover_detokenize: %zu ids but a NULL array", n);
    const tokenizer *t;
    int rc = the_tokenizer(m, "clover_detokenize", &t, err);
    if (rc) return rc;
    const int32_t n_tokens = tokenizer_n_tokens(t);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= m->hp.n_vocab)
            return error_set(err, CLOVER_E_INVALID, "clover_detokenize: entry %zu is id %d, expected 0..%u", i,
                             ids[i], m->hp.n_vocab - 1);
    int32_t *kept = malloc((n ? n : 1) * sizeof *kept); /* [n] the ids that have text, decoded together */
    if (!kept) return error_set(err, CLOVER_E_NOMEM, "clover_detokenize: no memory for %zu ids", n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < n_tokens) kept[k++] = ids[i];
    text_bytes out = {0};
    rc = text_bytes_append(&out, "", 0, err);
    if (!rc) rc = tokenizer_decode(t, kept, k, skip_special ? TOKENIZER_SKIP_SPECIAL : 0u, &out, err);
    free(kept);
    if (rc) {
        text_bytes_free(&out);
        return rc;
    }
    *text = out.v;
    if (len) *len = out.n;
    return CLOVER_OK;
}

int32_t clover_token_id(const clover_model *m, const char *token_text) {
    if (!m || !m->tokenizer || !token_text) return -1;
    return tokenizer_find(m->tokenizer, token_text, strlen(token_text));
}

int clover_text_stream_create(clover_text_stream **out, const clover_model *m, int skip_special, clover_error *err) {
    if (!out) return error_set(err, CLOVER_E_INVALID, "clover_text_stream_create: out must not be NULL");
    *out = NULL;
    const tokenizer *t;
    int rc = the_tokenizer(m, "clover_text_stream_create", &t, err);
    if (rc) return rc;
    clover_text_stream *s = calloc(1, sizeof *s);
    if (!s) return error_set(err, CLOVER_E_NOMEM, "clover_text_stream_create: out of memory");
    tokenizer_stream_init(&s->st, t, skip_special ? TOKENIZER_SKIP_SPECIAL : 0u);
    s->n_tokens = tokenizer_n_tokens(t);
    s->n_vocab = (int32_t)m->hp.n_vocab;
    rc = text_bytes_append(&s->piece, "", 0, err);
    if (rc) {
        clover_text_stream_free(s);
        return rc;
    }
    *out = s;
    return CLOVER_OK;
}

int clover_text_stream_push(clover_text_stream *s, int32_t id, const char **piece, size_t *len, clover_error *err) {
    if (!s || !piece || !len)
        return error_set(err, CLOVER_E_INVALID, "clover_text_stream_push: stream, piece and len must not be NULL");
    s->piece.n = 0;
    s->piece.v[0] = '\0';
    *piece = s->piece.v;
    *len = 0;
    if (id < 0 || id >= s->n_vocab)
        return error_set(err, CLOVER_E_INVALID, "clover_text_stream_push: id %d, expected 0..%d", id, s->n_vocab - 1);
    if (id < s->n_tokens) {
        int rc = tokenizer_stream_push(&s->st, id, &s->piece, err);
        if (rc) return rc;
    }
    *piece = s->piece.v;
    *len = s->piece.n;
    return CLOVER_OK;
}

int clover_text_stream_flush(clover_text_stream *s, const char **piece, size_t *len, clover_error *err) {
    if (!s || !piece || !len)
        return error_set(err, CLOVER_E_INVALID, "clover_text_stream_flush: stream, piece and len must not be NULL");
    s->piece.n = 0;
    s->piece.v[0] = '\0';
    int rc = tokenizer_stream_flush(&s->st, &s->piece, err);
    *piece = s->piece.v;
    *len = s->piece.n;
    return rc;
}

void clover_text_stream_free(clover_text_stream *s) {
    if (!s) return;
    text_bytes_free(&s->piece);
    free(s);
}
