/* bytelevel.c: GPT-2's byte <-> printable code point map (see bytelevel.h). */
#include "text/bytelevel.h"

#include <string.h>

#include "text/utf8.h"

static int byte_is_printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

uint32_t bytelevel_codepoint(uint8_t b) {
    if (byte_is_printable(b)) return b;
    /* the non-printable bytes, in order: 0x00..0x20 (33), 0x7F..0xA0 (34), 0xAD */
    if (b <= 0x20) return 0x100u + b;
    if (b <= 0xA0) return 0x100u + 33 + (b - 0x7Fu);
    return 0x100u + 67; /* 0xAD */
}

int bytelevel_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_printable(cp) ? (int)cp : -1;
    if (cp < 0x100 + 33) return (int)(cp - 0x100);
    if (cp < 0x100 + 67) return (int)(cp - 0x100 - 33 + 0x7F);
    if (cp == 0x100 + 67) return 0xAD;
    return -1;
}

size_t bytelevel_decode_token(const char *s, size_t len, char *out) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0, n = 0;
    while (i < len) {
        size_t cl = utf8_char_len(u + i, len - i);
        int b = cl ? bytelevel_byte(utf8_decode(u + i, cl)) : -1;
        if (b < 0) {
            memcpy(out, s, len);
            return len;
        }
        out[n++] = (char)b;
        i += cl;
    }
    return n;
}
