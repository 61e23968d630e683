/*
 * utf8.h: strict UTF-8 (Unicode Table 3-7: no overlongs, no surrogates,
 * nothing above U+10FFFF) for the tokenizer: where valid text ends, how
 * many bytes one U+FFFD stands for (the maximal subpart of an ill-formed
 * sequence), and code point decoding/encoding.
 */
#ifndef CLOVER_TEXT_UTF8_H
#define CLOVER_TEXT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Total length of the sequence a lead byte starts (1..4), 0 if it cannot lead. */
static inline size_t utf8_lead_len(uint8_t b) {
    if (b < 0x80) return 1;
    if (b < 0xC2) return 0;
    if (b < 0xE0) return 2;
    if (b < 0xF0) return 3;
    if (b < 0xF5) return 4;
    return 0;
}

/* Whether b may follow lead as the second byte of a sequence. */
static inline int utf8_second_ok(uint8_t lead, uint8_t b) {
    switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
    }
}

/* Length (1..4) of the valid character starting s[0..n), or 0. */
size_t utf8_char_len(const uint8_t *s, size_t n);
/* Length of the longest valid UTF-8 prefix of s[0..n). */
size_t utf8_valid_prefix(const uint8_t *s, size_t n);
/* Where no valid character starts (n > 0): the bytes (1..3) of the maximal
 * subpart that one U+FFFD replaces. */
size_t utf8_maximal_subpart(const uint8_t *s, size_t n);
/* The code point of a valid character of length len. */
uint32_t utf8_decode(const uint8_t *s, size_t len);
/* Writes cp (<= 0x10FFFF) as UTF-8, returns its length. */
size_t utf8_encode(uint32_t cp, uint8_t out[4]);
/* Unicode White_Space (what Oniguruma's and Rust regex's \s match). */
int utf8_is_white_space(uint32_t cp);

#endif
