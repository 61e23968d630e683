/*
 * json_match.h: the byte automaton of a compiled schema (json_schema.h): a
 * pushdown matcher whose state is a bounded stack of small frames, so a
 * state is a plain value (copied, hashed, compared byte for byte): the token
 * masks (token_mask.h) copy it once per trie edge and cache masks by it.
 *
 * Fed one byte at a time; JM_END asks whether the document may end here
 * (numbers end on the byte after them, so "12" may end or continue). Bytes
 * are checked as JSON (UTF-8 validated, escapes, no control characters) and
 * against the schema, with bounded whitespace: at most JM_WS_MAX bytes in a
 * row between tokens of the document, none before a colon and none after
 * the document's last byte (then only the end is allowed).
 */
#ifndef CLOVER_GRAMMAR_JSON_MATCH_H
#define CLOVER_GRAMMAR_JSON_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/json_schema.h"

#define JM_MAX_FRAMES 32
#define JM_WS_MAX 8   /* whitespace bytes in a row: room for a newline and an indent, not for a model's drift */
#define JM_END 256    /* the end-of-document symbol */

typedef struct jm_frame {
    uint32_t node; /* schema node; UINT32_MAX: the root */
    uint8_t st;    /* where in the node's syntax */
    uint8_t aux;   /* string: escape / UTF-8 bytes to come; number: the sign */
    uint16_t pad;  /* zero (states are compared byte for byte) */
    uint32_t n;    /* object: next property; array: items; string: characters; number: digits */
    uint32_t k;    /* object: key bytes / chosen property; literal: bytes; string: next UTF-8 byte range */
    uint64_t m;    /* object key / literal: candidate set; integer: magnitude */
} jm_frame;

typedef struct jm_state {
    uint32_t depth; /* frames in use */
    uint32_t ws;    /* whitespace bytes in a row at the current slot */
    jm_frame f[JM_MAX_FRAMES];
} jm_state;

/* The state before the document's first byte. */
void jm_init(jm_state *s);
/* Feeds byte c (0..255) or JM_END; false: not allowed here (s is then
 * undefined: feed a copy when probing). */
bool jm_feed(const js_schema *sc, jm_state *s, int c);
/* Feeds n bytes; false at the first one not allowed. */
bool jm_feed_bytes(const js_schema *sc, jm_state *s, const void *bytes, size_t n);
/* Whether the document may end here (s unchanged). */
bool jm_accepts(const js_schema *sc, const jm_state *s);
/* Whether s is inside a string at a character boundary (no escape or UTF-8
 * sequence open); *room: characters it may still take (UINT32_MAX: no
 * bound). There a token made only of whole string characters (no quote) is
 * allowed exactly when it has at most *room of them (token_mask.c's fast path). */
bool jm_string_content(const js_schema *sc, const jm_state *s, uint32_t *room);
/* Characters of a token made only of whole JSON string characters (valid
 * UTF-8, complete escapes, no quote, no control character), else 0. */
uint32_t jm_string_chars(const void *bytes, size_t n);
/* Bytes of s that define it (the header and the frames in use). */
static inline size_t jm_state_size(const jm_state *s) {
    return offsetof(jm_state, f) + (size_t)s->depth * sizeof(jm_frame);
}
static inline void jm_copy(jm_state *dst, const jm_state *src) {
    __builtin_memcpy(dst, src, jm_state_size(src));
}

#endif
