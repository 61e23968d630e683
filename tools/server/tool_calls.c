/*
 * tool_calls.c: the dumper, the parser and the gate of tool_calls.h.
 *
 * jansson without JSON_COMPACT or an indent separates with ", " and ": "
 * on one line, and without JSON_ENSURE_ASCII keeps UTF-8 as it is, which
 * is Python's json.dumps; objects keep their insertion order (the order
 * the client wrote). Reals are the exception (jansson prints %.17g, Python
 * the shortest repr), so a real in a tool's schema may render differently
 * from transformers.
 *
 * The parser follows Qwen3.5's XML-function form (TRUNK.md 6). A parameter's
 * value is the text between "<parameter=K>\n" and "\n</parameter>"; it is
 * kept as a string when the tool's schema declares K a string, else it is
 * read as JSON when it parses as JSON (42, true, [1], {"a": 1}) and kept as
 * a string when it does not, which inverts the template (strings verbatim,
 * other values as JSON).
 */
#include "tool_calls.h"

#include <stdlib.h>
#include <string.h>

char *tool_json_dumps(const json_t *v) {
    return json_dumps(v, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
}

void tool_calls_free(tool_call_out *calls, size_t n) {
    if (!calls) return;
    for (size_t i = 0; i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
    }
    free(calls);
}

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static const char *find(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; m <= n && i + m <= n; i++)
        if (s[i] == needle[0] && !memcmp(s + i, needle, m)) return s + i;
    return NULL;
}

static int declared(const char *name, size_t len, char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strlen(names[i]) == len && !memcmp(names[i], name, len)) return (int)i;
    return -1;
}

static char *copy(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A cursor over one block's body. */
typedef struct cur {
    const char *p, *end;
} cur;

static void skip_space(cur *c) {
    while (c->p < c->end && is_space(*c->p)) c->p++;
}

static int eat(cur *c, const char *lit) {
    size_t m = strlen(lit);
    if ((size_t)(c->end - c->p) < m || memcmp(c->p, lit, m)) return 0;
    c->p += m;
    return 1;
}

/* "<TAG=" already eaten: the name up to ">", one line, no tag inside; NULL if none. */
static const char *tag_name(cur *c, size_t *len) {
    const char *s = c->p;
    while (c->p < c->end && *c->p != '>' && *c->p != '<' && *c->p != '\n') c->p++;
    if (c->p == c->end || *c->p != '>' || c->p == s) return NULL;
    *len = (size_t)(c->p - s);
    c->p++;
    return s;
}

/* Whether the declared type of parameter key (schema: the tool's tojson
 * text) admits a string: then the value is kept as written. */
static int string_typed(const char *schema, const char *key) {
    if (!schema) return 0;
    json_error_t e;
    json_t *t = json_loads(schema, 0, &e);
    json_t *props = json_object_get(json_object_get(json_object_get(t, "function"), "parameters"), "properties");
    json_t *type = json_object_get(json_object_get(props, key), "type");
    int yes = json_is_string(type) && !strcmp(json_string_value(type), "string");
    size_t i;
    json_t *v;
    if (json_is_array(type)) /* ["string", "null"] */
        json_array_foreach(type, i, v) yes |= json_is_string(v) && !strcmp(json_string_value(v), "string");
    json_decref(t);
    return yes;
}

/* One block's body: <function=NAME> (<parameter=K>\nV\n</parameter>)* </function>,
 * white space between the tags. 0, -1 (malformed) or -2. */
static int parse_block(const char *s, size_t n, char *const *names, char *const *schemas, size_t n_names,
                       tool_call_out *out) {
    cur c = {s, s + n};
    size_t len;
    skip_space(&c);
    if (!eat(&c, "<function=")) return -1;
    const char *name = tag_name(&c, &len);
    int fn = name ? declared(name, len, names, n_names) : -1;
    if (fn < 0) return -1;
    json_t *args = json_object();
    if (!args) return -2;
    int rc = -1;
    for (;;) {
        skip_space(&c);
        if (!eat(&c, "<parameter=")) break;
        const char *key = tag_name(&c, &len);
        if (!key) goto done;
        char *k = copy(key, len);
        if (!k) {
            rc = -2;
            goto done;
        }
        eat(&c, "\n");
        const char *close = find(c.p, (size_t)(c.end - c.p), "</parameter>");
        if (!close || json_object_get(args, k)) { /* not closed, or given twice */
            free(k);
            goto done;
        }
        size_t vlen = (size_t)(close - c.p);
        if (vlen && c.p[vlen - 1] == '\n') vlen--;
        json_t *v = NULL;
        json_error_t e;
        if (!string_typed(schemas ? schemas[fn] : NULL, k)) v = json_loadb(c.p, vlen, JSON_DECODE_ANY, &e);
        if (!v) v = json_stringn(c.p, vlen); /* a string, or a value that is not JSON */
        int bad = !v || json_object_set_new(args, k, v);
        free(k);
        if (bad) {
            rc = v ? -2 : -1; /* json_stringn fails on invalid UTF-8: not a call */
            goto done;
        }
        c.p = close + strlen("</parameter>");
    }
    if (!eat(&c, "</function>")) goto done;
    skip_space(&c);
    if (c.p != c.end) goto done;
    out->name = copy(name, strlen(names[fn]));
    out->arguments = tool_json_dumps(args);
    rc = out->name && out->arguments ? 0 : -2;
done:
    json_decref(args);
    return rc;
}

int tool_calls_parse(const char *text, size_t len, char *const *names, char *const *schemas, size_t n_names,
                     tool_call_out **calls, size_t *n_calls, size_t *content_len) {
    *calls = NULL;
    *n_calls = 0;
    *content_len = len;
    const char *first = find(text, len, TOOL_CALL_OPEN), *end = text + len;
    if (!first) return 0;
    size_t cap = 0, n = 0;
    tool_call_out *v = NULL;
    const char *p = first;
    int rc = 1;
    while (p < end) {
        const char *body = p + strlen(TOOL_CALL_OPEN);
        const char *close = find(body, (size_t)(end - body), TOOL_CALL_CLOSE);
        if (!close || find(body, (size_t)(close - body), TOOL_CALL_OPEN)) {
            rc = -1;
            break;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 2;
            tool_call_out *w = realloc(v, cap * sizeof *w);
            if (!w) {
                rc = -2;
                break;
            }
            v = w;
        }
        memset(&v[n], 0, sizeof v[n]);
        int b = parse_block(body, (size_t)(close - body), names, schemas, n_names, &v[n]);
        n++;
        if (b) {
            rc = b;
            break;
        }
        p = close + strlen(TOOL_CALL_CLOSE);
        while (p < end && is_space(*p)) p++;
        if (p < end && (size_t)(end - p) >= strlen(TOOL_CALL_OPEN) && !memcmp(p, TOOL_CALL_OPEN, strlen(TOOL_CALL_OPEN)))
            continue;
        if (p < end) rc = -1; /* text after a call */
        break;
    }
    if (rc != 1) {
        tool_calls_free(v, n);
        return rc;
    }
    size_t c = (size_t)(first - text);
    while (c && is_space(text[c - 1])) c--;
    *calls = v;
    *n_calls = n;
    *content_len = c;
    return 1;
}

/* ---- the gate ---- */

static int append(tool_gate *g, const char *s, size_t n) {
    if (g->len + n + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 256;
        while (cap < g->len + n + 1) cap *= 2;
        char *p = realloc(g->text, cap);
        if (!p) return -1;
        g->text = p;
        g->cap = cap;
    }
    memcpy(g->text + g->len, s, n);
    g->len += n;
    g->text[g->len] = '\0';
    return 0;
}

int tool_gate_init(tool_gate *g, const char *prefix) {
    memset(g, 0, sizeof *g);
    if (append(g, "", 0)) return -1;
    if (prefix && append(g, prefix, strlen(prefix))) return -1;
    g->held = find(g->text, g->len, TOOL_CALL_OPEN) != NULL;
    return 0;
}

void tool_gate_free(tool_gate *g) {
    free(g->text);
    memset(g, 0, sizeof *g);
}

static void release_to(tool_gate *g, size_t to, const char **out, size_t *out_len) {
    *out = g->text + g->released;
    *out_len = to > g->released ? to - g->released : 0;
    if (to > g->released) g->released = to;
}

int tool_gate_push(tool_gate *g, const char *s, size_t n, const char **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    size_t from = g->len >= strlen(TOOL_CALL_OPEN) ? g->len - (strlen(TOOL_CALL_OPEN) - 1) : 0;
    if (append(g, s, n)) return -1;
    if (g->held) return 0;
    const char *tag = find(g->text + from, g->len - from, TOOL_CALL_OPEN);
    size_t to = tag ? (size_t)(tag - g->text) : g->len;
    if (tag) {
        g->held = 1;
    } else { /* a suffix that may still become the tag */
        size_t m = strlen(TOOL_CALL_OPEN);
        for (size_t k = m - 1 < to ? m - 1 : to; k > 0; k--)
            if (!memcmp(g->text + to - k, TOOL_CALL_OPEN, k)) {
                to -= k;
                break;
            }
    }
    while (to > g->released && is_space(g->text[to - 1])) to--; /* a call's content ends trimmed */
    release_to(g, to, out, out_len);
    return 0;
}

int tool_gate_finish(tool_gate *g, char *const *names, char *const *schemas, size_t n_names, tool_call_out **calls,
                     size_t *n_calls, const char **out, size_t *out_len) {
    size_t content_len = g->len;
    int rc = tool_calls_parse(g->text, g->len, names, schemas, n_names, calls, n_calls, &content_len);
    release_to(g, rc == 1 ? content_len : g->len, out, out_len);
    return rc;
}
