/*
 * tool_calls.c: the dumper, the parser and the gate of tool_calls.h.
 *
 * jansson without JSON_COMPACT or an indent separates with ", " and ": "
 * on one line, and without JSON_ENSURE_ASCII keeps UTF-8 as it is, which
 * is Python's json.dumps; objects keep their insertion order (the order
 * the client wrote). Reals are the exception (jansson prints %.17g, Python
 * the shortest repr), so a real in a tool's schema may render differently
 * from transformers.
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

static int declared(const char *name, char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return 1;
    return 0;
}

/* One block's JSON: {"name": declared string, "arguments": object}. 0, -1 (malformed) or -2. */
static int parse_block(const char *s, size_t n, char *const *names, size_t n_names, tool_call_out *out) {
    json_error_t e;
    json_t *o = json_loadb(s, n, 0, &e);
    int rc = -1;
    json_t *name = json_object_get(o, "name"), *args = json_object_get(o, "arguments");
    if (json_is_object(o) && json_is_string(name) && json_is_object(args) && json_object_size(o) == 2 &&
        declared(json_string_value(name), names, n_names)) {
        out->name = strdup(json_string_value(name));
        out->arguments = tool_json_dumps(args);
        rc = out->name && out->arguments ? 0 : -2;
    }
    json_decref(o);
    return rc;
}

int tool_calls_parse(const char *text, size_t len, char *const *names, size_t n_names, tool_call_out **calls,
                     size_t *n_calls, size_t *content_len) {
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
        int b = parse_block(body, (size_t)(close - body), names, n_names, &v[n]);
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

int tool_gate_finish(tool_gate *g, char *const *names, size_t n_names, tool_call_out **calls, size_t *n_calls,
                     const char **out, size_t *out_len) {
    size_t content_len = g->len;
    int rc = tool_calls_parse(g->text, g->len, names, n_names, calls, n_calls, &content_len);
    release_to(g, rc == 1 ? content_len : g->len, out, out_len);
    return rc;
}
