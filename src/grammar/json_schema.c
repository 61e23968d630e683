/*
 * json_schema.c: the schema compiler (json_schema.h says what is honoured).
 * One recursive walk over the parsed schema; every keyword is either
 * honoured, an annotation (ignored), or refused by name with the JSON
 * pointer of where it sits, so a user learns exactly what to change.
 */
#include "grammar/json_schema.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

#define JS_NONE UINT32_MAX
#define JS_INT_LIMIT 999999999999999999LL /* 10^18 - 1 */

typedef struct compiler {
    js_schema *sc;
    clover_error *err;
    char path[256];
} compiler;

/* Keywords that only annotate: accepted and ignored. */
static const char *const annotations[] = {"title", "description", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
                                          "definitions", "strict", "name", NULL};
/* Keywords honoured somewhere (checked per type below). */
static const char *const honoured[] = {"type", "properties", "required", "additionalProperties", "items",
                                       "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum",
                                       "exclusiveMinimum", "exclusiveMaximum", "enum", "const", "anyOf", "oneOf",
                                       NULL};

static bool in_list(const char *k, const char *const *list) {
    for (size_t i = 0; list[i]; i++)
        if (!strcmp(k, list[i])) return true;
    return false;
}

static int fail(compiler *c, const char *fmt, const char *what) {
    return error_set(c->err, CLOVER_E_INVALID, "json schema: %s%s at %s", what, fmt, c->path[0] ? c->path : "/");
}

static int new_node(compiler *c, js_kind kind, uint32_t *out) {
    js_schema *sc = c->sc;
    if (sc->n_nodes >= JS_MAX_NODES)
        return error_set(c->err, CLOVER_E_INVALID, "json schema: more than %d schema nodes", JS_MAX_NODES);
    if (sc->n_nodes == sc->cap_nodes) {
        uint32_t cap = sc->cap_nodes ? sc->cap_nodes * 2 : 16;
        js_node *v = realloc(sc->nodes, cap * sizeof *v);
        if (!v) return error_set(c->err, CLOVER_E_NOMEM, "json schema: no memory");
        sc->nodes = v;
        sc->cap_nodes = cap;
    }
    js_node *n = &sc->nodes[sc->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->last_required = -1;
    n->max_items = UINT32_MAX;
    n->max_len = UINT32_MAX;
    n->lo = -JS_INT_LIMIT;
    n->hi = JS_INT_LIMIT;
    n->value_node = n->item = JS_NONE;
    *out = sc->n_nodes++;
    return CLOVER_OK;
}

static void set_first(js_node *n, int b) { n->first[b >> 3] |= (uint8_t)(1u << (b & 7)); }

static int add_literal(compiler *c, uint32_t node, const char *text, size_t len) {
    js_node *n = &c->sc->nodes[node];
    if (n->n_lits >= JS_MAX_PROPS) return fail(c, " has more than 64 values", "enum");
    if (len == 0 || len > JS_MAX_LITERAL) return fail(c, " longer than 4096 bytes", "a value");
    char **lits = realloc(n->lits, (n->n_lits + 1) * sizeof *lits);
    if (lits) n->lits = lits;
    uint32_t *ll = realloc(n->lit_len, (n->n_lits + 1) * sizeof *ll);
    if (ll) n->lit_len = ll;
    char *t = malloc(len);
    if (!lits || !ll || !t) {
        free(t);
        return error_set(c->err, CLOVER_E_NOMEM, "json schema: no memory");
    }
    memcpy(t, text, len);
    for (uint32_t i = 0; i < n->n_lits; i++)
        if (n->lit_len[i] == len && !memcmp(n->lits[i], t, len)) { /* a repeated enum value: once is enough */
            free(t);
            return CLOVER_OK;
        }
    n->lits[n->n_lits] = t;
    n->lit_len[n->n_lits++] = (uint32_t)len;
    set_first(n, (unsigned char)t[0]);
    return CLOVER_OK;
}

static int literal_node(compiler *c, const char *const *texts, size_t n, uint32_t *out) {
    int rc = new_node(c, JS_LITERAL, out);
    for (size_t i = 0; !rc && i < n; i++) rc = add_literal(c, *out, texts[i], strlen(texts[i]));
    return rc;
}

static int string_node(compiler *c, uint32_t min_len, uint32_t max_len, uint32_t *out) {
    int rc = new_node(c, JS_STRING, out);
    if (rc) return rc;
    js_node *n = &c->sc->nodes[*out];
    n->min_len = min_len;
    n->max_len = max_len;
    set_first(n, '"');
    return CLOVER_OK;
}

static int number_node(compiler *c, bool integer, uint32_t *out) {
    int rc = new_node(c, JS_NUMBER, out);
    if (rc) return rc;
    js_node *n = &c->sc->nodes[*out];
    n->integer = integer;
    set_first(n, '-');
    for (int d = '0'; d <= '9'; d++) set_first(n, d);
    return CLOVER_OK;
}

/* A union of alternatives; refused when two may begin with the same byte
 * (the automaton decides on the first byte, without backtracking). */
static int union_node(compiler *c, const uint32_t *alts, size_t n_alts, const char *what, uint32_t *out) {
    if (n_alts == 1) {
        *out = alts[0];
        return CLOVER_OK;
    }
    uint8_t seen[32] = {0};
    for (size_t i = 0; i < n_alts; i++) {
        const js_node *a = &c->sc->nodes[alts[i]];
        for (int b = 0; b < 32; b++) {
            if (seen[b] & a->first[b]) return fail(c, " whose alternatives can begin alike (e.g. two of one type) is not supported", what);
            seen[b] |= a->first[b];
        }
    }
    int rc = new_node(c, JS_UNION, out);
    if (rc) return rc;
    js_node *u = &c->sc->nodes[*out];
    u->alts = malloc(n_alts * sizeof *u->alts);
    if (!u->alts) return error_set(c->err, CLOVER_E_NOMEM, "json schema: no memory");
    memcpy(u->alts, alts, n_alts * sizeof *alts);
    u->n_alts = (uint32_t)n_alts;
    memcpy(u->first, seen, sizeof seen);
    return CLOVER_OK;
}

static int any_node(compiler *c, uint32_t *out);

/* The generic (unconstrained) object / array used by any_node. */
static int open_object(compiler *c, uint32_t value_node, uint32_t *out) {
    int rc = new_node(c, JS_OBJECT, out);
    if (rc) return rc;
    uint32_t keys = c->sc->string_node;
    if (keys == JS_NONE && (rc = string_node(c, 0, UINT32_MAX, &keys))) return rc;
    c->sc->string_node = keys;
    js_node *n = &c->sc->nodes[*out];
    n->open = true;
    n->value_node = value_node;
    set_first(n, '{');
    return CLOVER_OK;
}

static int any_node(compiler *c, uint32_t *out) {
    js_schema *sc = c->sc;
    if (sc->any_node != JS_NONE) {
        *out = sc->any_node;
        return CLOVER_OK;
    }
    /* the union refers to itself through the object and array: reserve it first */
    uint32_t u, alts[5];
    int rc = new_node(c, JS_UNION, &u);
    if (rc) return rc;
    sc->any_node = u;
    static const char *const lits[] = {"true", "false", "null"};
    if ((rc = open_object(c, u, &alts[0])) || (rc = new_node(c, JS_ARRAY, &alts[1]))) return rc;
    sc->nodes[alts[1]].item = u;
    set_first(&sc->nodes[alts[1]], '[');
    if ((rc = string_node(c, 0, UINT32_MAX, &alts[2])) || (rc = number_node(c, false, &alts[3])) ||
        (rc = literal_node(c, lits, 3, &alts[4])))
        return rc;
    js_node *n = &sc->nodes[u];
    n->alts = malloc(sizeof alts);
    if (!n->alts) return error_set(c->err, CLOVER_E_NOMEM, "json schema: no memory");
    memcpy(n->alts, alts, sizeof alts);
    n->n_alts = 5;
    for (int i = 0; i < 5; i++)
        for (int b = 0; b < 32; b++) n->first[b] |= sc->nodes[alts[i]].first[b];
    *out = u;
    return CLOVER_OK;
}

static int compile_value(compiler *c, json_t *v, int depth, uint32_t *out);

/* A user's name for a one-line message: at most n-1 bytes, control
 * characters as '?', never cut inside a UTF-8 character. */
static void clean_name(char *dst, size_t n, const char *src) {
    size_t i = 0;
    for (; src[i] && i + 1 < n; i++) dst[i] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ? '?' : src[i];
    if (src[i]) /* cut: drop a partial character at the end */
        while (i > 0 && ((unsigned char)dst[i - 1] & 0xC0) == 0x80) i--;
    if (src[i] && i > 0 && (unsigned char)dst[i - 1] >= 0xC0) i--;
    dst[i] = 0;
}

/* Appends "/seg" to the path for the duration of a child's compile. */
static size_t path_push(compiler *c, const char *seg) {
    size_t at = strlen(c->path);
    char clean[96];
    clean_name(clean, sizeof clean, seg);
    snprintf(c->path + at, sizeof c->path - at, "/%s", clean);
    return at;
}

/* A non-negative integer keyword (minLength, maxItems, ...). */
static int get_count(compiler *c, json_t *o, const char *key, uint32_t *out) {
    json_t *v = json_object_get(o, key);
    if (!v) return CLOVER_OK;
    double d = json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : -1;
    if (!(d >= 0) || d != floor(d)) return fail(c, " must be a non-negative integer", key);
    *out = d > 4e9 ? UINT32_MAX : (uint32_t)d;
    return CLOVER_OK;
}

static int compile_object(compiler *c, json_t *o, int depth, uint32_t *out) {
    json_t *props = json_object_get(o, "properties"), *req = json_object_get(o, "required");
    json_t *addl = json_object_get(o, "additionalProperties");
    if (props && !json_is_object(props)) return fail(c, " must be an object", "properties");
    if (req && !json_is_array(req)) return fail(c, " must be an array", "required");
    if (addl && !json_is_boolean(addl) && !json_is_object(addl))
        return fail(c, " must be a boolean or a schema", "additionalProperties");
    int rc;
    if (!props || json_object_size(props) == 0) {
        if (req && json_array_size(req) > 0)
            return fail(c, " names properties that 'properties' does not declare", "required");
        if (json_is_false(addl)) { /* only {} */
            rc = new_node(c, JS_OBJECT, out);
            if (!rc) set_first(&c->sc->nodes[*out], '{');
            return rc;
        }
        uint32_t val;
        if (json_is_object(addl)) {
            size_t at = path_push(c, "additionalProperties");
            rc = compile_value(c, addl, depth + 1, &val);
            c->path[at] = 0;
        } else {
            rc = any_node(c, &val);
        }
        return rc ? rc : open_object(c, val, out);
    }
    size_t np = json_object_size(props);
    if (np > JS_MAX_PROPS) return fail(c, " has more than 64 properties", "properties");
    js_prop *pv = calloc(np, sizeof *pv);
    if (!pv) return error_set(c->err, CLOVER_E_NOMEM, "json schema: no memory");
    size_t i = 0;
    const char *key;
    json_t *sub;
    rc = CLOVER_OK;
    json_object_foreach(props, key, sub) { /* jansson keeps insertion order */
        json_t *ks = json_string(key);
        char *enc = ks ? json_dumps(ks, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        json_decref(ks);
        if (!enc) {
            rc = error_set(c->err, CLOVER_E_NOMEM, "json schema: no memory");
            break;
        }
        size_t el = strlen(enc);
        if (el - 2 > JS_MAX_LITERAL) {
            free(enc);
            rc = fail(c, " longer than 4096 bytes", "a property name");
            break;
        }
        memmove(enc, enc + 1, el - 2); /* without the quotes */
        pv[i].key = enc;
        pv[i].key_len = (uint32_t)(el - 2);
        char seg[80], name[64];
        clean_name(name, sizeof name, key);
        snprintf(seg, sizeof seg, "properties/%s", name);
        size_t at = path_push(c, seg);
        rc = compile_value(c, sub, depth + 1, &pv[i].node);
        c->path[at] = 0;
        i++;
        if (rc) break;
    }
    for (size_t r = 0; !rc && req && r < json_array_size(req); r++) {
        json_t *name = json_array_get(req, r);
        if (!json_is_string(name)) {
            rc = fail(c, " must list strings", "required");
            break;
        }
        size_t k = 0;
        json_object_foreach(props, key, sub) {
            if (!strcmp(key, json_string_value(name))) break;
            k++;
        }
        if (k >= np) {
            char clean[64];
            clean_name(clean, sizeof clean, json_string_value(name));
            rc = error_set(c->err, CLOVER_E_INVALID,
                           "json schema: required property '%s' at %s is not declared in 'properties'", clean,
                           c->path[0] ? c->path : "/");
            break;
        }
        pv[k].required = true;
    }
    uint32_t node = 0;
    if (!rc) rc = new_node(c, JS_OBJECT, &node);
    if (rc) {
        for (size_t j = 0; j < np; j++) free(pv[j].key);
        free(pv);
        return rc;
    }
    js_node *n = &c->sc->nodes[node];
    n->props = pv;
    n->n_props = (uint32_t)np;
    for (size_t j = 0; j < np; j++)
        if (pv[j].required) n->last_required = (int32_t)j;
    set_first(n, '{');
    *out = node;
    return CLOVER_OK;
}

static int compile_array(compiler *c, json_t *o, int depth, uint32_t *out) {
    json_t *items = json_object_get(o, "items");
    if (items && !json_is_object(items) && !json_is_boolean(items))
        return fail(c, " as a list (tuple validation) is not supported", "items");
    uint32_t mn = 0, mx = UINT32_MAX, item;
    int rc;
    if ((rc = get_count(c, o, "minItems", &mn)) || (rc = get_count(c, o, "maxItems", &mx))) return rc;
    if (mn > mx) return fail(c, " above maxItems (no array fits)", "minItems");
    if (json_is_false(items) && mn > 0) return fail(c, " with items false (no array fits)", "minItems");
    if (json_is_false(items)) mx = 0;
    if (items && json_is_object(items)) {
        size_t at = path_push(c, "items");
        rc = compile_value(c, items, depth + 1, &item);
        c->path[at] = 0;
    } else {
        rc = any_node(c, &item);
    }
    if (rc || (rc = new_node(c, JS_ARRAY, out))) return rc;
    js_node *n = &c->sc->nodes[*out];
    n->item = item;
    n->min_items = mn;
    n->max_items = mx;
    set_first(n, '[');
    return CLOVER_OK;
}

/* An integer bound keyword as the inclusive int64 bound it implies
 * (draft 4's boolean exclusive flags apply to their minimum / maximum). */
static int int_bound(compiler *c, json_t *o, const char *key, bool upper, bool exclusive, int64_t *b) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_boolean(v)) return CLOVER_OK;
    if (!json_is_number(v)) return fail(c, " must be a number", key);
    if (!exclusive && json_is_true(json_object_get(o, upper ? "exclusiveMaximum" : "exclusiveMinimum")))
        exclusive = true;
    const int64_t cap = 2 * JS_INT_LIMIT; /* beyond what is generated either way */
    int64_t r;
    if (json_is_integer(v)) {
        json_int_t iv = json_integer_value(v);
        r = iv > cap ? cap : iv < -cap ? -cap : (int64_t)iv;
        if (exclusive) r += upper ? -1 : 1;
    } else {
        double d = json_real_value(v);
        d = d > 2e18 ? 2e18 : d < -2e18 ? -2e18 : d;
        r = (int64_t)(upper ? floor(d) : ceil(d));
        if (exclusive && (double)r == d) r += upper ? -1 : 1;
    }
    if (upper ? r < *b : r > *b) *b = r;
    return CLOVER_OK;
}

/* One type of a schema object (its other keywords apply). */
static int compile_type(compiler *c, json_t *o, const char *type, int depth, uint32_t *out) {
    int rc;
    if (!strcmp(type, "object")) return compile_object(c, o, depth, out);
    if (!strcmp(type, "array")) return compile_array(c, o, depth, out);
    if (!strcmp(type, "string")) {
        uint32_t mn = 0, mx = UINT32_MAX;
        if ((rc = get_count(c, o, "minLength", &mn)) || (rc = get_count(c, o, "maxLength", &mx))) return rc;
        if (mn > mx) return fail(c, " above maxLength (no string fits)", "minLength");
        return string_node(c, mn, mx, out);
    }
    if (!strcmp(type, "integer")) {
        int64_t lo = -JS_INT_LIMIT, hi = JS_INT_LIMIT;
        if ((rc = int_bound(c, o, "minimum", false, false, &lo)) ||
            (rc = int_bound(c, o, "exclusiveMinimum", false, true, &lo)) ||
            (rc = int_bound(c, o, "maximum", true, false, &hi)) ||
            (rc = int_bound(c, o, "exclusiveMaximum", true, true, &hi)))
            return rc;
        if (lo > JS_INT_LIMIT || hi < -JS_INT_LIMIT)
            return fail(c, " outside +-(10^18-1) is not supported", "an integer range");
        if (lo > hi) return fail(c, " is empty (no integer fits)", "the integer range");
        if ((rc = number_node(c, true, out))) return rc;
        c->sc->nodes[*out].lo = lo;
        c->sc->nodes[*out].hi = hi;
        return CLOVER_OK;
    }
    if (!strcmp(type, "number")) {
        static const char *const nb[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
        for (size_t i = 0; nb[i]; i++)
            if (json_object_get(o, nb[i])) {
                char w[64];
                snprintf(w, sizeof w, "'%s' on a number", nb[i]);
                return fail(c, " is not supported (bounds apply to integers only)", w);
            }
        return number_node(c, false, out);
    }
    if (!strcmp(type, "boolean")) {
        static const char *const b[] = {"true", "false"};
        return literal_node(c, b, 2, out);
    }
    if (!strcmp(type, "null")) {
        static const char *const nl[] = {"null"};
        return literal_node(c, nl, 1, out);
    }
    char w[80], name[44];
    clean_name(name, sizeof name, type);
    snprintf(w, sizeof w, "type '%s'", name);
    return fail(c, " is not a JSON schema type", w);
}

static bool type_matches(json_t *v, json_t *type) {
    if (!type) return true;
    size_t n = json_is_array(type) ? json_array_size(type) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_is_array(type) ? json_array_get(type, i) : type;
        const char *s = json_string_value(t);
        if (!s) continue;
        if ((!strcmp(s, "object") && json_is_object(v)) || (!strcmp(s, "array") && json_is_array(v)) ||
            (!strcmp(s, "string") && json_is_string(v)) || (!strcmp(s, "number") && json_is_number(v)) ||
            (!strcmp(s, "boolean") && json_is_boolean(v)) || (!strcmp(s, "null") && json_is_null(v)) ||
            (!strcmp(s, "integer") &&
             (json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v))))))
            return true;
    }
    return false;
}

/* enum / const: the listed values (filtered by a type beside them). */
static int compile_enum(compiler *c, json_t *o, uint32_t *out) {
    json_t *en = json_object_get(o, "enum"), *cn = json_object_get(o, "const"), *type = json_object_get(o, "type");
    if (en && cn) return fail(c, " together with 'const' is not supported", "'enum'");
    if (en && !json_is_array(en)) return fail(c, " must be an array", "enum");
    const char *key;
    json_t *val;
    json_object_foreach(o, key, val) {
        if (!strcmp(key, "enum") || !strcmp(key, "const") || !strcmp(key, "type") || in_list(key, annotations))
            continue;
        char w[80], name[44];
        clean_name(name, sizeof name, key);
        snprintf(w, sizeof w, "'%s' beside %s", name, en ? "'enum'" : "'const'");
        return fail(c, " is not supported", w);
    }
    int rc = new_node(c, JS_LITERAL, out);
    size_t n = en ? json_array_size(en) : 1;
    for (size_t i = 0; !rc && i < n; i++) {
        json_t *v = en ? json_array_get(en, i) : cn;
        if (!type_matches(v, type)) continue;
        char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        if (!t) return error_set(c->err, CLOVER_E_NOMEM, "json schema: no memory");
        rc = add_literal(c, *out, t, strlen(t));
        free(t);
    }
    if (!rc && c->sc->nodes[*out].n_lits == 0) return fail(c, " allows no value", en ? "enum" : "const");
    return rc;
}

static int compile_value(compiler *c, json_t *v, int depth, uint32_t *out) {
    if (depth > JS_MAX_DEPTH) return fail(c, " is nested deeper than 24 levels", "the schema");
    if (json_is_true(v)) return any_node(c, out);
    if (json_is_false(v)) return fail(c, " (nothing validates) is not supported", "the schema false");
    if (!json_is_object(v)) return fail(c, " must be an object or a boolean", "a schema");
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        if (in_list(key, honoured) || in_list(key, annotations)) continue;
        if (!strcmp(key, "uniqueItems") && json_is_false(val)) continue;
        char w[80], name[64];
        clean_name(name, sizeof name, key);
        snprintf(w, sizeof w, "'%s'", name);
        return fail(c, " is not supported", w);
    }
    if (json_object_get(v, "enum") || json_object_get(v, "const")) return compile_enum(c, v, out);
    json_t *any = json_object_get(v, "anyOf");
    if (!any) any = json_object_get(v, "oneOf");
    if (any) {
        const char *which = json_object_get(v, "anyOf") ? "anyOf" : "oneOf";
        if (json_object_get(v, "anyOf") && json_object_get(v, "oneOf"))
            return fail(c, " together with 'oneOf' is not supported", "'anyOf'");
        json_object_foreach(v, key, val) {
            if (!strcmp(key, which) || in_list(key, annotations)) continue;
            char w[80], name[44];
            clean_name(name, sizeof name, key);
            snprintf(w, sizeof w, "'%s' beside '%s'", name, which);
            return fail(c, " is not supported", w);
        }
        size_t n = json_is_array(any) ? json_array_size(any) : 0;
        if (n == 0 || n > JS_MAX_PROPS) return fail(c, " must be a list of 1 to 64 schemas", which);
        uint32_t alts[JS_MAX_PROPS];
        for (size_t i = 0; i < n; i++) {
            char seg[32];
            snprintf(seg, sizeof seg, "%s/%zu", which, i);
            size_t at = path_push(c, seg);
            int rc = compile_value(c, json_array_get(any, i), depth + 1, &alts[i]);
            c->path[at] = 0;
            if (rc) return rc;
        }
        char w[16];
        snprintf(w, sizeof w, "'%s'", which);
        return union_node(c, alts, n, w, out);
    }
    json_t *type = json_object_get(v, "type");
    if (!type) { /* the type follows from the keywords, else any value */
        if (json_object_get(v, "properties") || json_object_get(v, "required") ||
            json_object_get(v, "additionalProperties"))
            return compile_type(c, v, "object", depth, out);
        if (json_object_get(v, "items") || json_object_get(v, "minItems") || json_object_get(v, "maxItems"))
            return compile_type(c, v, "array", depth, out);
        if (json_object_get(v, "minLength") || json_object_get(v, "maxLength"))
            return compile_type(c, v, "string", depth, out);
        if (json_object_get(v, "minimum") || json_object_get(v, "maximum") ||
            json_object_get(v, "exclusiveMinimum") || json_object_get(v, "exclusiveMaximum"))
            return fail(c, " without a type is not supported (say \"type\": \"integer\")", "a numeric bound");
        return any_node(c, out);
    }
    if (json_is_string(type)) return compile_type(c, v, json_string_value(type), depth, out);
    if (!json_is_array(type) || json_array_size(type) == 0 || json_array_size(type) > 7)
        return fail(c, " must be a type name or a list of them", "type");
    bool has_number = false;
    for (size_t i = 0; i < json_array_size(type); i++)
        if (json_is_string(json_array_get(type, i)) && !strcmp(json_string_value(json_array_get(type, i)), "number"))
            has_number = true;
    uint32_t alts[8];
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(type); i++) {
        const char *t = json_string_value(json_array_get(type, i));
        if (!t) return fail(c, " must list type names", "type");
        if (has_number && !strcmp(t, "integer")) continue; /* number covers it */
        int rc = compile_type(c, v, t, depth, &alts[n++]);
        if (rc) return rc;
    }
    return union_node(c, alts, n, "a type list", out);
}

void js_schema_free(js_schema *sc) {
    if (!sc) return;
    for (uint32_t i = 0; i < sc->n_nodes; i++) {
        js_node *n = &sc->nodes[i];
        for (uint32_t j = 0; j < n->n_props; j++) free(n->props[j].key);
        free(n->props);
        for (uint32_t j = 0; j < n->n_lits; j++) free(n->lits[j]);
        free(n->lits);
        free(n->lit_len);
        free(n->alts);
    }
    free(sc->nodes);
    free(sc);
}

int js_schema_compile(const char *text, size_t len, js_schema **out, clover_error *err) {
    *out = NULL;
    if (!text) return error_set(err, CLOVER_E_INVALID, "json schema: no schema text");
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!root) {
        char why[96];
        clean_name(why, sizeof why, je.text);
        return error_set(err, CLOVER_E_INVALID, "json schema: not valid JSON (line %d: %s)", je.line, why);
    }
    js_schema *sc = calloc(1, sizeof *sc);
    if (!sc) {
        json_decref(root);
        return error_set(err, CLOVER_E_NOMEM, "json schema: no memory");
    }
    sc->any_node = sc->string_node = JS_NONE;
    compiler c = {.sc = sc, .err = err};
    int rc = compile_value(&c, root, 0, &sc->root);
    json_decref(root);
    if (rc) {
        js_schema_free(sc);
        return rc;
    }
    *out = sc;
    return CLOVER_OK;
}
