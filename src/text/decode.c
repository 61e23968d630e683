/*
 * decode.c: ids back to bytes. Each id contributes the bytes it stands
 * for (see tok_internal.h); the result may end inside a UTF-8 character,
 * which is what the stream decoder is for. TOKENIZER_REPLACE_INVALID
 * cleans the whole result in one pass, with the same rule as the stream
 * decoder (one U+FFFD per maximal invalid subpart).
 */
#include "base/error.h"
#include "text/tok_internal.h"
#include "text/utf8.h"

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Appends s[0..n) to out with invalid sequences replaced. */
static int append_replacing(text_bytes *out, const uint8_t *s, size_t n, clover_error *err) {
    size_t pos = 0;
    while (pos < n) {
        size_t valid = utf8_valid_prefix(s + pos, n - pos);
        int rc = text_bytes_append(out, s + pos, valid, err);
        if (rc) return rc;
        pos += valid;
        if (pos < n) {
            rc = text_bytes_append(out, REPLACEMENT, sizeof REPLACEMENT, err);
            if (rc) return rc;
            pos += utf8_maximal_subpart(s + pos, n - pos);
        }
    }
    return CLOVER_OK;
}

int tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, unsigned flags, text_bytes *out,
                     clover_error *err) {
    if (!t || !out || (!ids && n)) return error_set(err, CLOVER_E_INVALID, "tokenizer_decode: NULL argument");
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->n_tokens)
            return error_set(err, CLOVER_E_INVALID,
                             "%s: token id %ld at position %zu is outside the vocabulary (0..%ld)", t->name,
                             (long)ids[i], i, (long)t->n_tokens - 1);
    size_t start = out->n;
    int rc = text_bytes_append(out, "", 0, err);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if ((flags & TOKENIZER_SKIP_SPECIAL) && t->kind[id] == TOKENIZER_KIND_SPECIAL) continue;
        rc = text_bytes_append(out, t->arena + t->dec_off[id], t->dec_len[id], err);
        if (rc) return rc;
    }
    if (!(flags & TOKENIZER_REPLACE_INVALID)) return CLOVER_OK;
    size_t len = out->n - start;
    if (utf8_valid_prefix((const uint8_t *)out->v + start, len) == len) return CLOVER_OK;
    /* rewrite the tail through a copy */
    text_bytes raw = {0};
    rc = text_bytes_append(&raw, out->v + start, len, err);
    if (rc) return rc;
    out->n = start;
    rc = append_replacing(out, (const uint8_t *)raw.v, len, err);
    text_bytes_free(&raw);
    return rc;
}
