/*
 * json_schema.h: a JSON schema compiled into a small graph of nodes that the
 * byte automaton (json_match.h) walks. Compiling is separate from matching so
 * the server can refuse a schema (a 400 naming the construct) before a
 * request is queued, and so the graph is built once per request while the
 * automaton state stays a few hundred bytes that the token masks copy.
 *
 * What is honoured: type (one or a list), object properties / required /
 * additionalProperties, array items / minItems / maxItems, string minLength /
 * maxLength, integer minimum / maximum / exclusive bounds, number, boolean,
 * null, enum, const, anyOf / oneOf whose alternatives begin with different
 * bytes, and annotations (title, description, default, ...), which change
 * nothing. Anything else that constrains a document (pattern, format, $ref,
 * allOf, not, bounds on a non-integer number, ...) is refused by name rather
 * than silently ignored: the output must always validate.
 *
 * Generation choices (each output still validates): an object with declared
 * properties produces only those, in the declared order, optional ones
 * skippable; one without declared properties takes any keys (values per
 * additionalProperties when it is a schema). Property names and literal
 * values (enum, const) are produced in one canonical JSON spelling.
 */
#ifndef CLOVER_GRAMMAR_JSON_SCHEMA_H
#define CLOVER_GRAMMAR_JSON_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"

/* Limits of a compiled schema (refused beyond them, by name). */
#define JS_MAX_PROPS 64    /* properties of one object, alternatives of one enum */
#define JS_MAX_DEPTH 24    /* nested schema levels (the automaton's stack holds 32 frames) */
#define JS_MAX_NODES 4096
#define JS_MAX_LITERAL 4096 /* bytes of one enum / const value or property name */
#define JS_INT_DIGITS 18    /* digits of a generated integer part: |value| < 10^18 */

typedef enum js_kind { JS_OBJECT = 0, JS_ARRAY, JS_STRING, JS_NUMBER, JS_LITERAL, JS_UNION } js_kind;

typedef struct js_prop {
    char *key;       /* the name as JSON string content (escaped, no quotes) */
    uint32_t key_len;
    uint32_t node;   /* the value's schema */
    bool required;
} js_prop;

typedef struct js_node {
    js_kind kind;
    uint8_t first[32]; /* bytes a value of this node can begin with (bitset) */
    /* JS_OBJECT: props (closed), or open keys with values of value_node */
    js_prop *props;
    uint32_t n_props;
    int32_t last_required; /* index of the last required property, -1: none */
    bool open;
    uint32_t value_node;
    /* JS_ARRAY */
    uint32_t item;
    uint32_t min_items, max_items;
    /* JS_STRING: lengths in characters (code points) */
    uint32_t min_len, max_len;
    /* JS_NUMBER */
    bool integer;
    int64_t lo, hi; /* integers: the inclusive range (clamped to +-(10^18-1)) */
    /* JS_LITERAL: canonical JSON texts */
    char **lits;
    uint32_t *lit_len;
    uint32_t n_lits;
    /* JS_UNION: alternatives with disjoint first bytes */
    uint32_t *alts;
    uint32_t n_alts;
} js_node;

typedef struct js_schema {
    js_node *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t root;
    uint32_t any_node;    /* any JSON value (UINT32_MAX until needed) */
    uint32_t string_node; /* any string: an open object's keys (UINT32_MAX until needed) */
} js_schema;

/* Compiles schema text (a JSON schema document). On failure *out is NULL
 * and err names the construct and where it is ("json schema: 'pattern' at
 * /properties/name is not supported"). Free with js_schema_free. */
int js_schema_compile(const char *text, size_t len, js_schema **out, clover_error *err);
void js_schema_free(js_schema *sc);

static inline bool js_first_has(const js_node *n, int c) { return c >= 0 && c < 256 && (n->first[c >> 3] >> (c & 7)) & 1; }

#endif
