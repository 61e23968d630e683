/*
 * stream_decode.c: decoding one id at a time for streaming output, where a
 * character may be split across tokens (byte tokens of CJK or emoji).
 *
 * Only whole characters are released. A lead byte and the continuation
 * bytes that can still complete a valid sequence are held (at most 3);
 * as soon as a byte shows the held prefix can never complete, the prefix
 * becomes one U+FFFD and that byte is looked at afresh; a byte that cannot
 * start anything is U+FFFD at once. At flush a held prefix is U+FFFD.
 * This is the "maximal subpart" rule, so the concatenated stream equals
 * tokenizer_decode(..., TOKENIZER_REPLACE_INVALID) of the same ids.
 */
#include "base/error.h"
#include "text/tok_internal.h"
#include "text/utf8.h"

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

void tokenizer_stream_init(tokenizer_stream *s, const tokenizer *t, unsigned flags) {
    s->tok = t;
    s->flags = flags;
    s->n_pending = 0;
}

/* Whether b continues the held prefix toward a valid sequence. */
static bool continues(const tokenizer_stream *s, uint8_t b) {
    if (s->n_pending == 1) return utf8_second_ok(s->pending[0], b);
    return (b & 0xC0) == 0x80;
}

int tokenizer_stream_push(tokenizer_stream *s, int32_t id, text_bytes *out, clover_error *err) {
    const tokenizer *t = s->tok;
    if (!t || !out) return error_set(err, CLOVER_E_INVALID, "tokenizer_stream_push: NULL argument");
    if (id < 0 || id >= t->n_tokens)
        return error_set(err, CLOVER_E_INVALID, "%s: token id %ld is outside the vocabulary (0..%ld)", t->name,
                         (long)id, (long)t->n_tokens - 1);
    int rc = text_bytes_append(out, "", 0, err);
    if (rc) return rc;
    if ((s->flags & TOKENIZER_SKIP_SPECIAL) && t->kind[id] == TOKENIZER_KIND_SPECIAL) return CLOVER_OK;
    const uint8_t *p = (const uint8_t *)t->arena + t->dec_off[id];
    size_t n = t->dec_len[id], i = 0;
    while (i < n) {
        if (s->n_pending) {
            uint8_t b = p[i];
            if (!continues(s, b)) {
                rc = text_bytes_append(out, REPLACEMENT, sizeof REPLACEMENT, err);
                if (rc) return rc;
                s->n_pending = 0;
                continue; /* look at b afresh */
            }
            s->pending[s->n_pending++] = b;
            i++;
            if (s->n_pending == utf8_lead_len(s->pending[0])) {
                rc = text_bytes_append(out, s->pending, s->n_pending, err);
                if (rc) return rc;
                s->n_pending = 0;
            }
            continue;
        }
        /* nothing held: release the valid run, then deal with what stops it */
        size_t valid = utf8_valid_prefix(p + i, n - i);
        rc = text_bytes_append(out, p + i, valid, err);
        if (rc) return rc;
        i += valid;
        if (i == n) break;
        size_t part = utf8_maximal_subpart(p + i, n - i);
        if (i + part == n && utf8_lead_len(p[i]) > part) {
            /* a valid prefix cut by the token's end: hold it */
            for (size_t k = 0; k < part; k++) s->pending[k] = p[i + k];
            s->n_pending = (uint8_t)part;
            break;
        }
        rc = text_bytes_append(out, REPLACEMENT, sizeof REPLACEMENT, err);
        if (rc) return rc;
        i += part;
    }
    return CLOVER_OK;
}

int tokenizer_stream_flush(tokenizer_stream *s, text_bytes *out, clover_error *err) {
    if (!out) return error_set(err, CLOVER_E_INVALID, "tokenizer_stream_flush: NULL argument");
    int rc = text_bytes_append(out, "", 0, err);
    if (rc) return rc;
    if (s->n_pending) {
        s->n_pending = 0;
        return text_bytes_append(out, REPLACEMENT, sizeof REPLACEMENT, err);
    }
    return CLOVER_OK;
}
