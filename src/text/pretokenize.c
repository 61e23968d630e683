/*
 * pretokenize.c: the Split pre-tokenizer (behaviour Isolated: every match
 * and every stretch between matches is a piece) on PCRE2.
 *
 * The patterns come from files written for Oniguruma (what Hugging Face
 * `tokenizers` runs). The one difference that matters for them is \s: in
 * Oniguruma it is exactly Unicode White_Space, while PCRE2 10.42 (UCP) also
 * counts U+180E MONGOLIAN VOWEL SEPARATOR, and PCRE2's set has changed
 * between releases. So \s and \S are rewritten to the explicit
 * White_Space set before compiling (\S inside a class is left alone).
 * Subjects are validated once by the encoder, so matching skips PCRE2's
 * UTF check (otherwise each match would re-check the rest of the text).
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/tok_internal.h"
#include "text/utf8.h"

/* Unicode White_Space, as the inside of a character class. */
static const char WS_CLASS[] = "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}"
                               "\\x{205f}\\x{3000}";

/* Rewrites \s and \S (outside classes) and \s (inside classes). Returns a
 * malloc'd NUL-terminated pattern, or NULL when out of memory. */
static char *translate_pattern(const char *p, size_t n, size_t *out_n) {
    size_t ws = sizeof WS_CLASS - 1;
    size_t cap = n * (ws + 4) + 1;
    char *o = malloc(cap);
    if (!o) return NULL;
    size_t k = 0;
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[i + 1];
            if (d == 's') {
                if (!in_class) o[k++] = '[';
                memcpy(o + k, WS_CLASS, ws);
                k += ws;
                if (!in_class) o[k++] = ']';
                i++;
                continue;
            }
            if (d == 'S' && !in_class) {
                o[k++] = '[';
                o[k++] = '^';
                memcpy(o + k, WS_CLASS, ws);
                k += ws;
                o[k++] = ']';
                i++;
                continue;
            }
            o[k++] = c;
            o[k++] = d;
            i++;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            o[k++] = c;
            /* a ']' right after '[' or '[^' is a literal */
            if (i + 1 < n && p[i + 1] == '^') o[k++] = p[++i];
            if (i + 1 < n && p[i + 1] == ']') o[k++] = p[++i];
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && p[i + 1] == ':') {
            /* a POSIX class [:name:] inside a class */
            const char *end = NULL;
            for (size_t j = i + 2; j + 1 < n; j++)
                if (p[j] == ':' && p[j + 1] == ']') {
                    end = p + j + 2;
                    break;
                }
            if (end) {
                size_t len = (size_t)(end - (p + i));
                memcpy(o + k, p + i, len);
                k += len;
                i += len - 1;
                continue;
            }
        }
        if (in_class && c == ']') in_class = 0;
        o[k++] = c;
    }
    o[k] = '\0';
    *out_n = k;
    return o;
}

int tok_add_split(tokenizer *t, const char *pattern, size_t len, bool literal, const char *where, clover_error *err) {
    if (t->n_split >= TOK_MAX_SPLIT)
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: %s: more than %d Split pre-tokenizers", t->name, where,
                         TOK_MAX_SPLIT);
    if (utf8_valid_prefix((const uint8_t *)pattern, len) != len)
        return error_set(err, CLOVER_E_FORMAT, "%s: %s: the pattern is not valid UTF-8", t->name, where);
    size_t plen = len;
    char *pat = NULL;
    if (!literal) {
        pat = translate_pattern(pattern, len, &plen);
        if (!pat) return error_set(err, CLOVER_E_NOMEM, "%s: out of memory", t->name);
    }
    int errcode = 0;
    PCRE2_SIZE erroff = 0;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(literal ? pattern : pat), plen, opts, &errcode, &erroff, NULL);
    free(pat);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        return error_set(err, CLOVER_E_UNSUPPORTED, "%s: %s: the regex does not compile with PCRE2: %s (near byte %zu)",
                         t->name, where, (const char *)msg, (size_t)erroff);
    }
    /* JIT when the platform has it; the interpreter otherwise */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    t->split[t->n_split++] = re;
    return CLOVER_OK;
}

static int match_at(tokenizer_encoder *e, const pcre2_code *re, const char *s, size_t n, size_t pos,
                    clover_error *err) {
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, e->md, e->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, e->md, e->mctx);
    if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH) return rc;
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    return error_set(err, CLOVER_E_INTERNAL, "%s: pre-tokenizer regex failed at byte %zu of a %zu-byte piece: %s",
                     e->tok->name, pos, n, (const char *)msg);
}

int pretok_run(tokenizer_encoder *e, size_t stage, const char *s, size_t n, token_ids *out, clover_error *err) {
    const tokenizer *t = e->tok;
    if (n == 0) return CLOVER_OK;
    if (stage >= t->n_split) return bpe_encode_word(e, (const uint8_t *)s, n, out, err);
    const pcre2_code *re = t->split[stage];
    size_t pos = 0, last = 0;
    while (pos < n) {
        int rc = match_at(e, re, s, n, pos, err);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return rc;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* an empty match makes no piece: step over one character */
            size_t cl = utf8_char_len((const uint8_t *)s + ms, n - ms);
            pos = ms + (cl ? cl : 1);
            continue;
        }
        if (ms > last) {
            rc = pretok_run(e, stage + 1, s + last, ms - last, out, err);
            if (rc) return rc;
        }
        rc = pretok_run(e, stage + 1, s + ms, me - ms, out, err);
        if (rc) return rc;
        last = pos = me;
    }
    if (last < n) return pretok_run(e, stage + 1, s + last, n - last, out, err);
    return CLOVER_OK;
}
