/*
 * encode.c: the encoding pipeline, in Hugging Face's order:
 *   1. bytes that are not valid UTF-8 are cut out as words of their own
 *      (see tokenizer.h); the valid stretches go on;
 *   2. added tokens not marked "normalized" are matched in the text as
 *      written (special ones only with TOKENIZER_ALLOW_SPECIAL; a special
 *      match that is not allowed still covers its text, as in Hugging Face);
 *   3. the text between them is normalized, then added tokens marked
 *      "normalized" are matched in it;
 *   4. what remains goes through the Split stages and BPE.
 * lstrip / rstrip / single_word behave as Hugging Face's AddedVocabulary
 * (whitespace and word characters in the Unicode sense).
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/error.h"
#include "text/tok_internal.h"
#include "text/utf8.h"

int tokenizer_encoder_create(tokenizer_encoder **out, const tokenizer *t, clover_error *err) {
    *out = NULL;
    tokenizer_encoder *e = calloc(1, sizeof *e);
    if (!e) return error_set(err, CLOVER_E_NOMEM, "tokenizer: out of memory for an encoder");
    e->tok = t;
    uint32_t pairs = 1;
    for (size_t i = 0; i < t->n_split; i++) {
        uint32_t cap = 0;
        pcre2_pattern_info(t->split[i], PCRE2_INFO_CAPTURECOUNT, &cap);
        if (cap + 1 > pairs) pairs = cap + 1;
    }
    e->md = pcre2_match_data_create(pairs, NULL);
    e->mctx = pcre2_match_context_create(NULL);
    e->jit = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    if (!e->md || !e->mctx) {
        tokenizer_encoder_free(e);
        return error_set(err, CLOVER_E_NOMEM, "tokenizer: out of memory for an encoder");
    }
    if (e->jit) pcre2_jit_stack_assign(e->mctx, NULL, e->jit);
    *out = e;
    return CLOVER_OK;
}

void tokenizer_encoder_free(tokenizer_encoder *e) {
    if (!e) return;
    pcre2_match_data_free(e->md);
    pcre2_match_context_free(e->mctx);
    pcre2_jit_stack_free(e->jit);
    free(e->ucs);
    free(e->sym);
    free(e->heap);
    free(e->slots);
    free(e->ckeys);
    free(e->cids);
    free(e);
}

/* ---- Unicode classes for lstrip / rstrip / single_word ---- */

static uint32_t cp_before(const uint8_t *s, size_t end) {
    size_t i = end;
    do i--;
    while (i > 0 && (s[i] & 0xC0) == 0x80);
    return utf8_decode(s + i, end - i);
}

static uint32_t cp_at(const uint8_t *s, size_t n, size_t pos) {
    size_t cl = utf8_char_len(s + pos, n - pos);
    return cl ? utf8_decode(s + pos, cl) : 0xFFFD;
}

/* Rust regex's \w: letters, marks, decimal digits, connector punctuation
 * (Alphabetic approximated by the letter categories and Nl), ZWNJ, ZWJ. */
static bool is_word_char(uint32_t cp) {
    if (cp == 0x200C || cp == 0x200D) return true;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC: return true;
    default: return false;
    }
}

/* Start of the whitespace run that ends at end. */
static size_t space_run_start(const uint8_t *s, size_t end) {
    size_t i = end;
    while (i > 0) {
        size_t j = i;
        do j--;
        while (j > 0 && (s[j] & 0xC0) == 0x80);
        if (!utf8_is_white_space(utf8_decode(s + j, i - j))) break;
        i = j;
    }
    return i;
}

/* End of the whitespace run that starts at pos. */
static size_t space_run_end(const uint8_t *s, size_t n, size_t pos) {
    while (pos < n) {
        size_t cl = utf8_char_len(s + pos, n - pos);
        if (!cl || !utf8_is_white_space(utf8_decode(s + pos, cl))) break;
        pos += cl;
    }
    return pos;
}

/* ---- the pipeline ---- */

static int encode_normalized(tokenizer_encoder *e, const char *s, size_t n, unsigned flags, token_ids *out,
                             clover_error *err);

/* Splits s on the added tokens of m; the text between goes to next(). */
static int split_added(tokenizer_encoder *e, const tok_matcher *m, bool raw, const char *s, size_t n, unsigned flags,
                       token_ids *out, clover_error *err) {
    const tokenizer *t = e->tok;
    const uint8_t *u = (const uint8_t *)s;
    size_t done = 0, scan = 0;
    int rc;
    for (;;) {
        size_t at = 0;
        int32_t k = added_find(t, m, u, scan, n, &at);
        if (k < 0) break;
        const tok_added *a = &t->added[k];
        size_t start = at, stop = at + a->mlen;
        scan = stop;
        if ((a->flags & TOK_ADDED_SPECIAL) && !(flags & TOKENIZER_ALLOW_SPECIAL)) continue;
        if (a->flags & TOK_ADDED_SINGLE_WORD) {
            if ((start > 0 && is_word_char(cp_before(u, start))) || (stop < n && is_word_char(cp_at(u, n, stop))))
                continue;
        }
        if (a->flags & TOK_ADDED_LSTRIP) {
            size_t ls = space_run_start(u, start);
            start = ls > done ? ls : done;
        }
        if (a->flags & TOK_ADDED_RSTRIP) stop = space_run_end(u, n, stop);
        if (start > done) {
            rc = raw ? encode_normalized(e, s + done, start - done, flags, out, err)
                     : pretok_run(e, 0, s + done, start - done, out, err);
            if (rc) return rc;
        }
        rc = token_ids_push(out, a->id, err);
        if (rc) return rc;
        done = stop;
        if (scan < stop) scan = stop;
    }
    if (done < n)
        return raw ? encode_normalized(e, s + done, n - done, flags, out, err)
                   : pretok_run(e, 0, s + done, n - done, out, err);
    return CLOVER_OK;
}

static int encode_normalized(tokenizer_encoder *e, const char *s, size_t n, unsigned flags, token_ids *out,
                             clover_error *err) {
    const char *ns;
    size_t nn;
    int rc = normalize_run(e, s, n, &ns, &nn, err);
    if (rc) return rc;
    if (e->tok->match_norm.n) return split_added(e, &e->tok->match_norm, false, ns, nn, flags, out, err);
    return pretok_run(e, 0, ns, nn, out, err);
}

int tokenizer_encoder_run(tokenizer_encoder *e, const char *text, size_t len, unsigned flags, token_ids *out,
                          clover_error *err) {
    if (!e || !out || (!text && len)) return error_set(err, CLOVER_E_INVALID, "tokenizer_encode: NULL argument");
    const uint8_t *u = (const uint8_t *)text;
    size_t pos = 0;
    while (pos < len) {
        size_t valid = utf8_valid_prefix(u + pos, len - pos);
        int rc;
        if (valid) {
            rc = split_added(e, &e->tok->match_raw, true, text + pos, valid, flags, out, err);
            if (rc) return rc;
            pos += valid;
            continue;
        }
        /* a run of bytes that are not valid UTF-8, up to where a valid character starts */
        size_t end = pos;
        while (end < len && utf8_char_len(u + end, len - end) == 0) end += utf8_maximal_subpart(u + end, len - end);
        rc = bpe_encode_word(e, u + pos, end - pos, out, err);
        if (rc) return rc;
        pos = end;
    }
    return CLOVER_OK;
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, unsigned flags, token_ids *out,
                     clover_error *err) {
    if (!t) return error_set(err, CLOVER_E_INVALID, "tokenizer_encode: NULL tokenizer");
    tokenizer_encoder *e;
    int rc = tokenizer_encoder_create(&e, t, err);
    if (rc) return rc;
    rc = tokenizer_encoder_run(e, text, len, flags, out, err);
    tokenizer_encoder_free(e);
    return rc;
}
