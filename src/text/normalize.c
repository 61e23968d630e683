/*
 * normalize.c: the Unicode normalizer (NFC for Qwen; NFD, NFKC, NFKD and
 * sequences of them are the same machinery) through utf8proc, into the
 * encoder's reusable buffer so no allocation happens per call.
 *
 * Most text is already NFC, and normalizing it anyway costs as much as the
 * rest of encoding. So NFC runs only on text that holds a character that
 * could change: one with a nonzero combining class, one that NFC maps to
 * something else on its own, or one that can be the second half of a
 * canonical composition (a combining mark, a Hangul vowel or final, a few
 * vowel signs). Text without such a character is its own NFC: nothing
 * reorders, nothing maps, nothing composes. The set is computed once from
 * utf8proc's own tables, so it follows whatever Unicode version utf8proc
 * has. Below U+0300 there is none of them, so ASCII and Latin-1 text is
 * passed over a word at a time. The other forms use a byte threshold
 * (norm_min_byte) instead.
 *
 * utf8proc 2.6 composes an LV syllable with U+11A7, which is not a
 * trailing consonant (Unicode's T range starts after it; Python and
 * Hugging Face leave the pair alone), so composition runs separately on
 * the stretches between U+11A7s.
 */
#include <pthread.h>
#include <utf8proc.h>

#include "base/error.h"
#include "text/tok_internal.h"
#include "text/utf8.h"

enum { NFC_TABLE_END = 0x30000 }; /* beyond: asked of utf8proc one by one (rare) */

static uint8_t nfc_maybe[NFC_TABLE_END / 8]; /* written once under nfc_once, read-only after */
static pthread_once_t nfc_once = PTHREAD_ONCE_INIT;

/* Whether cp's full canonical decomposition is more than cp itself, into d. */
static utf8proc_ssize_t decompose(uint32_t cp, utf8proc_int32_t d[8]) {
    int boundclass = 0;
    return utf8proc_decompose_char((utf8proc_int32_t)cp, d, 8, UTF8PROC_DECOMPOSE, &boundclass);
}

static bool changes_alone(uint32_t cp, utf8proc_int32_t d[8], utf8proc_ssize_t n) {
    if (n == 1 && (uint32_t)d[0] == cp) return false;
    if (n < 1 || n > 8) return true;
    utf8proc_ssize_t m = utf8proc_normalize_utf32(d, n, UTF8PROC_COMPOSE | UTF8PROC_STABLE);
    return !(m == 1 && (uint32_t)d[0] == cp);
}

static void nfc_table_build(void) {
    for (uint32_t cp = 0xC0; cp < NFC_TABLE_END; cp++) {
        if (cp >= 0xD800 && cp < 0xE000) continue;
        if (utf8proc_get_property((utf8proc_int32_t)cp)->combining_class)
            nfc_maybe[cp >> 3] |= (uint8_t)(1u << (cp & 7));
        utf8proc_int32_t d[8];
        utf8proc_ssize_t n = decompose(cp, d);
        if (n == 1 && (uint32_t)d[0] == cp) continue;
        /* every later part of a decomposition can be the second half of a composition */
        for (utf8proc_ssize_t j = 1; j < n && j < 8; j++)
            if ((uint32_t)d[j] < NFC_TABLE_END) nfc_maybe[d[j] >> 3] |= (uint8_t)(1u << (d[j] & 7));
        if (changes_alone(cp, d, n)) nfc_maybe[cp >> 3] |= (uint8_t)(1u << (cp & 7));
    }
}

static bool nfc_maybe_cp(uint32_t cp) {
    if (cp < NFC_TABLE_END) return (nfc_maybe[cp >> 3] >> (cp & 7)) & 1;
    if (utf8proc_get_property((utf8proc_int32_t)cp)->combining_class) return true;
    utf8proc_int32_t d[8];
    utf8proc_ssize_t n = decompose(cp, d);
    return n != 1 || (uint32_t)d[0] != cp;
}

bool normalize_nfc_stable(const char *text, size_t n) {
    pthread_once(&nfc_once, nfc_table_build);
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (i < n) {
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        /* bytes below 0xCC are ASCII, continuation bytes, or lead bytes of code points below U+0300 */
        if (s[i] < 0xCC) {
            i++;
            continue;
        }
        size_t cl = utf8_char_len(s + i, n - i);
        if (cl == 0) return false; /* not reached: the text is valid */
        if (nfc_maybe_cp(utf8_decode(s + i, cl))) return false;
        i += cl;
    }
    return true;
}

/* Composes ucs[0..n) in place, never across a U+11A7; returns the new length. */
static utf8proc_ssize_t compose(utf8proc_int32_t *ucs, utf8proc_ssize_t n, utf8proc_option_t opts) {
    utf8proc_ssize_t w = 0, start = 0;
    for (utf8proc_ssize_t i = 0; i <= n; i++) {
        if (i < n && ucs[i] != 0x11A7) continue;
        if (i > start) {
            utf8proc_ssize_t m = utf8proc_normalize_utf32(ucs + start, i - start, opts);
            if (m < 0) return m;
            memmove(ucs + w, ucs + start, (size_t)m * sizeof *ucs);
            w += m;
        }
        if (i < n) ucs[w++] = 0x11A7;
        start = i + 1;
    }
    return w;
}

static bool needs_work(const tokenizer *t, const char *s, size_t n) {
    if (t->norm_opts == (UTF8PROC_STABLE | UTF8PROC_COMPOSE)) return !normalize_nfc_stable(s, n);
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < n; i++)
        if (u[i] >= t->norm_min_byte) return true;
    return false;
}

int normalize_run(tokenizer_encoder *e, const char *s, size_t n, const char **out, size_t *out_n, clover_error *err) {
    const tokenizer *t = e->tok;
    *out = s;
    *out_n = n;
    if (!t->norm_opts || n == 0 || !needs_work(t, s, n)) return CLOVER_OK;
    if (n > (size_t)PTRDIFF_MAX / 8)
        return error_set(err, CLOVER_E_INVALID, "%s: a %zu-byte text is too long to normalize", t->name, n);
    utf8proc_option_t opts = (utf8proc_option_t)t->norm_opts;
    int rc = tok_grow((void **)&e->ucs, &e->ucs_cap, n + 1, sizeof *e->ucs, err);
    if (rc) return rc;
    for (;;) {
        utf8proc_ssize_t got = utf8proc_decompose((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, e->ucs,
                                                  (utf8proc_ssize_t)(e->ucs_cap - 1), opts);
        if (got < 0)
            return error_set(err, CLOVER_E_INTERNAL, "%s: normalizer failed: %s", t->name, utf8proc_errmsg(got));
        if ((size_t)got + 1 <= e->ucs_cap) {
            if (opts & UTF8PROC_COMPOSE) got = compose(e->ucs, got, opts);
            /* writes UTF-8 over the code points (it needs one spare slot) */
            utf8proc_ssize_t len = got < 0 ? got : utf8proc_reencode(e->ucs, got, opts & ~UTF8PROC_COMPOSE);
            if (len < 0)
                return error_set(err, CLOVER_E_INTERNAL, "%s: normalizer failed: %s", t->name, utf8proc_errmsg(len));
            *out = (const char *)e->ucs;
            *out_n = (size_t)len;
            return CLOVER_OK;
        }
        rc = tok_grow((void **)&e->ucs, &e->ucs_cap, (size_t)got + 1, sizeof *e->ucs, err);
        if (rc) return rc;
    }
}
