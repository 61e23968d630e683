/*
 * test_tokenizer_utf8.c: the tokenizer's byte-level table and UTF-8 rules,
 * against hand-picked values: GPT-2's bytes_to_unicode entries worked out
 * from its definition (printable Latin-1 bytes map to themselves, the other
 * 68 to U+0100.. in byte order), and the maximal-subpart rule of Unicode
 * (chapter 3, "U+FFFD substitution of maximal subparts") on the examples
 * that distinguish it from one-replacement-per-byte. The NFC shortcut
 * (text judged already NFC is not normalized) is checked against
 * utf8proc's full NFC for every code point below U+30000 in contexts that
 * compose, reorder or map.
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "test.h"
#include "text/bytelevel.h"
#include "text/tok_internal.h"
#include "text/utf8.h"

static void test_bytelevel_table(void) {
    CHECK_EQ_INT(bytelevel_codepoint(0x00), 0x100);
    CHECK_EQ_INT(bytelevel_codepoint(0x20), 0x120); /* 'Ġ' */
    CHECK_EQ_INT(bytelevel_codepoint(0x0A), 0x10A); /* 'Ċ' */
    CHECK_EQ_INT(bytelevel_codepoint('!'), '!');
    CHECK_EQ_INT(bytelevel_codepoint('~'), '~');
    CHECK_EQ_INT(bytelevel_codepoint(0x7F), 0x121); /* the 34th non-printable byte */
    CHECK_EQ_INT(bytelevel_codepoint(0xA0), 0x142); /* 'ł' */
    CHECK_EQ_INT(bytelevel_codepoint(0xA1), 0xA1);
    CHECK_EQ_INT(bytelevel_codepoint(0xAD), 0x143); /* soft hyphen, the last one */
    CHECK_EQ_INT(bytelevel_codepoint(0xFF), 0xFF);
    /* a bijection onto 256 code points, inverted by bytelevel_byte */
    int seen[0x200] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t cp = bytelevel_codepoint((uint8_t)b);
        CHECK(cp < 0x200);
        if (cp < 0x200) seen[cp]++;
        CHECK_EQ_INT(bytelevel_byte(cp), b);
    }
    int distinct = 0;
    for (int i = 0; i < 0x200; i++) distinct += seen[i] == 1;
    CHECK_EQ_INT(distinct, 256);
    CHECK_EQ_INT(bytelevel_byte(' '), -1);
    CHECK_EQ_INT(bytelevel_byte(0x144), -1);
    CHECK_EQ_INT(bytelevel_byte(0x4E2D), -1);

    char out[16];
    /* "Ġhello" -> " hello"; "ä½ł" (E4 BD A0) -> 你 */
    size_t n = bytelevel_decode_token("\xC4\xA0hello", 7, out);
    CHECK(n == 6 && memcmp(out, " hello", 6) == 0);
    n = bytelevel_decode_token("\xC3\xA4\xC2\xBD\xC5\x82", 6, out);
    CHECK(n == 3 && memcmp(out, "\xE4\xBD\xA0", 3) == 0);
    /* a character outside the alphabet: the text as written (Hugging Face's rule) */
    n = bytelevel_decode_token("a b", 3, out);
    CHECK(n == 3 && memcmp(out, "a b", 3) == 0);
}

static void test_utf8_prefix_and_subparts(void) {
    const uint8_t *s;
    CHECK_EQ_INT(utf8_valid_prefix((const uint8_t *)"hello world, long ascii", 23), 23);
    CHECK_EQ_INT(utf8_valid_prefix((const uint8_t *)"a\xC3\xA9\x62", 4), 4);
    CHECK_EQ_INT(utf8_valid_prefix((const uint8_t *)"abcdefgh\xFF", 9), 8);
    CHECK_EQ_INT(utf8_valid_prefix((const uint8_t *)"ab\xE4\xBD", 4), 2);
    CHECK_EQ_INT(utf8_valid_prefix((const uint8_t *)"\xF0\x9F\x8E\x89!", 5), 5);
    /* overlong, surrogate, above U+10FFFF: not valid */
    CHECK_EQ_INT(utf8_char_len((const uint8_t *)"\xC0\xAF", 2), 0);
    CHECK_EQ_INT(utf8_char_len((const uint8_t *)"\xE0\x80\xAF", 3), 0);
    CHECK_EQ_INT(utf8_char_len((const uint8_t *)"\xED\xA0\x80", 3), 0);
    CHECK_EQ_INT(utf8_char_len((const uint8_t *)"\xF4\x90\x80\x80", 4), 0);
    CHECK_EQ_INT(utf8_char_len((const uint8_t *)"\xF4\x8F\xBF\xBF", 4), 4);
    CHECK_EQ_INT(utf8_char_len((const uint8_t *)"\xED\x9F\xBF", 3), 3);
    /* maximal subparts: E4 BD is one (a valid prefix); E0 80 is two (80 cannot follow E0);
     * F0 9F 8E cut short is one of three bytes; a lone continuation is one */
    s = (const uint8_t *)"\xE4\xBD\x61";
    CHECK_EQ_INT(utf8_maximal_subpart(s, 3), 2);
    s = (const uint8_t *)"\xE0\x80";
    CHECK_EQ_INT(utf8_maximal_subpart(s, 2), 1);
    s = (const uint8_t *)"\xF0\x9F\x8E";
    CHECK_EQ_INT(utf8_maximal_subpart(s, 3), 3);
    s = (const uint8_t *)"\x80\x80";
    CHECK_EQ_INT(utf8_maximal_subpart(s, 2), 1);
    s = (const uint8_t *)"\xED\xA0\x80";
    CHECK_EQ_INT(utf8_maximal_subpart(s, 3), 1);
    s = (const uint8_t *)"\xF5\x80";
    CHECK_EQ_INT(utf8_maximal_subpart(s, 2), 1);

    uint8_t b[4];
    CHECK_EQ_INT(utf8_encode(0x4F60, b), 3);
    CHECK(memcmp(b, "\xE4\xBD\xA0", 3) == 0);
    CHECK_EQ_INT(utf8_decode(b, 3), 0x4F60);
    CHECK_EQ_INT(utf8_encode(0x1F389, b), 4);
    CHECK(memcmp(b, "\xF0\x9F\x8E\x89", 4) == 0);
    CHECK_EQ_INT(utf8_decode(b, 4), 0x1F389);

    CHECK(utf8_is_white_space(0x85));
    CHECK(utf8_is_white_space(0x3000));
    CHECK(utf8_is_white_space(0x2028));
    CHECK(!utf8_is_white_space(0x180E));
    CHECK(!utf8_is_white_space(0x200B));
    CHECK(!utf8_is_white_space(0x1C));
}

/* If the shortcut calls s stable, full NFC must give s back. */
static int check_stable(const char *s, size_t n) {
    if (!normalize_nfc_stable(s, n)) return 0;
    utf8proc_uint8_t *out = NULL;
    utf8proc_ssize_t m =
        utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &out, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    int ok = m == (utf8proc_ssize_t)n && memcmp(out, s, n) == 0;
    free(out);
    if (!ok) {
        fprintf(stderr, "  judged NFC but is not:");
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %02x", (uint8_t)s[i]);
        fputc('\n', stderr);
    }
    return ok ? 1 : -1;
}

static void test_nfc_shortcut(void) {
    /* contexts: alone, after a base letter, before a combining acute, after a
     * Hangul leading consonant and an LV syllable, before a Hangul vowel */
    static const uint32_t before[] = {0, 'e', 0x1100, 0xAC00, 0x0B47, 0x0301};
    static const uint32_t after[] = {0, 0x0301, 0x1161, 0x11A8, 0x0B3E, 0x0316};
    size_t judged_stable = 0, wrong = 0;
    for (uint32_t cp = 0; cp < 0x30000; cp += (cp < 0x20000 ? 1 : 7)) {
        if (cp >= 0xD800 && cp < 0xE000) continue;
        for (size_t i = 0; i < sizeof before / sizeof before[0]; i++)
            for (size_t j = 0; j < sizeof after / sizeof after[0]; j++) {
                /* utf8proc 2.6 wrongly composes LV + U+11A7; the encoder works around
                 * it (normalize.c) and the parity test checks that against HF */
                if (cp == 0x11A7 && before[i] == 0xAC00) continue;
                uint8_t s[12];
                size_t n = 0;
                if (before[i]) n += utf8_encode(before[i], s + n);
                n += utf8_encode(cp, s + n);
                if (after[j]) n += utf8_encode(after[j], s + n);
                int r = check_stable((const char *)s, n);
                judged_stable += r == 1;
                wrong += r < 0;
            }
    }
    CHECK_EQ_INT(wrong, 0);
    CHECK(judged_stable > 100000); /* the shortcut does apply to ordinary text */
    /* known changes are never judged stable */
    CHECK(!normalize_nfc_stable("e\xCC\x81", 3));                /* e + U+0301 composes */
    CHECK(!normalize_nfc_stable("\xE2\x84\xA6", 3));             /* U+2126 OHM maps to U+03A9 */
    CHECK(!normalize_nfc_stable("\xEA\xB0\x80\xE1\x86\xA8", 6)); /* LV + T composes */
    CHECK(!normalize_nfc_stable("\xE0\xA5\x98", 3));             /* U+0958 is excluded from composition */
    CHECK(normalize_nfc_stable("plain ascii text, long enough", 29));
    CHECK(normalize_nfc_stable("\xC3\xA9\xE4\xB8\xAD\xEA\xB0\x80", 8)); /* é 中 가 */
}

int main(void) {
    RUN(test_bytelevel_table);
    RUN(test_utf8_prefix_and_subparts);
    RUN(test_nfc_shortcut);
    return TEST_EXIT();
}
