/*
 * bytelevel.h: GPT-2's bytes_to_unicode, the reversible map that lets a
 * BPE vocabulary of printable strings cover every byte. Bytes that are
 * printable Latin-1 ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) stand for
 * themselves; the other 68 take U+0100.. in byte order. Vocabulary files
 * store tokens in this form; the engine works on raw bytes.
 */
#ifndef CLOVER_TEXT_BYTELEVEL_H
#define CLOVER_TEXT_BYTELEVEL_H

#include <stddef.h>
#include <stdint.h>

/* The code point that stands for byte b. */
uint32_t bytelevel_codepoint(uint8_t b);
/* The byte a code point stands for, or -1 if it is not in the alphabet. */
int bytelevel_byte(uint32_t cp);

/* Decodes a token as stored in a file (UTF-8 text s[0..len)) to the bytes
 * it stands for, the way Hugging Face's ByteLevel decoder does: when every
 * character is in the alphabet, the bytes they stand for; otherwise the
 * text itself. out needs len bytes; returns the number written. */
size_t bytelevel_decode_token(const char *s, size_t len, char *out);

#endif
