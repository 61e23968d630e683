/*
 * chat_template.c: Qwen3.5's ChatML (the rules are listed in
 * chat_template.h) and its inverse on an answer, the split into reasoning
 * and content at </think>.
 *
 * Rendering is a single pass that appends to one buffer; the only look-ahead
 * is the index of the last real user query, found first, because it decides
 * whether an assistant turn keeps its reasoning. Text is copied as bytes:
 * nothing here needs to be valid UTF-8 except for white space at the ends
 * of a message, which |trim removes.
 */
#include "text/chat_template.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/utf8.h"

#define THINK_OPEN "<think>"
#define THINK_CLOSE "</think>"
#define TOOL_RESPONSE_OPEN "<tool_response>"
#define TOOL_RESPONSE_CLOSE "</tool_response>"

/* Qwen3.5's tool block (TRUNK.md 6). The exact Qwen3.5 chat_template.jinja
 * was not available here: the instructions are those of third-party copies
 * of Qwen3.5's and Qwen3.6's chat_template.jinja, word for word. */
#define TOOLS_HEAD "# Tools\n\nYou have access to the following functions:\n\n<tools>"
#define TOOLS_TAIL                                                                                                     \
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"            \
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"         \
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"    \
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "  \
    "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"       \
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in "         \
    "natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the " \
    "question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>"

void clover_chat_options_init(clover_chat_options *o) {
    if (!o) return;
    o->add_generation_prompt = 1;
    o->enable_thinking = 1;
    o->tools = NULL;
    o->n_tools = 0;
    o->tool_calls = NULL;
    o->n_tool_calls = 0;
}

/* ---- white space and substrings ---- */

/* Python's str.isspace(): Unicode White_Space plus the ASCII separators
 * U+001C..U+001F. */
static int is_py_space(uint32_t cp) { return (cp >= 0x1C && cp <= 0x1F) || utf8_is_white_space(cp); }

/* The length of the white-space character at s[0..n), or 0. */
static size_t space_len_at(const uint8_t *s, size_t n) {
    size_t len = utf8_char_len(s, n);
    return len && is_py_space(utf8_decode(s, len)) ? len : 0;
}

void chat_template_trim(const char *text, size_t len, size_t *off, size_t *n) {
    const uint8_t *s = (const uint8_t *)text;
    size_t a = 0, b = len;
    for (size_t k; a < b && (k = space_len_at(s + a, b - a)) > 0;) a += k;
    while (b > a) {
        size_t start = b - 1; /* the start of the last character: at most 3 continuation bytes back */
        while (start > a && b - start < 4 && (s[start] & 0xC0) == 0x80) start--;
        size_t k = space_len_at(s + start, b - start);
        if (k == 0 || start + k != b) break;
        b = start;
    }
    *off = a;
    *n = b - a;
}

/* The first occurrence of needle in s[0..n), or NULL. */
static const char *find(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; m <= n && i <= n - m; i++)
        if (s[i] == needle[0] && !memcmp(s + i, needle, m)) return s + i;
    return NULL;
}

/* The last occurrence of needle in s[0..n), or NULL. */
static const char *find_last(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = n >= m ? n - m + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, needle, m)) return s + i;
    return NULL;
}

/* A span of text (not NUL-terminated). */
typedef struct span {
    const char *p;
    size_t n;
} span;

static span span_of(const char *s) { return (span){s ? s : "", s ? strlen(s) : 0}; }

static span trimmed(span s) {
    size_t off, n;
    chat_template_trim(s.p, s.n, &off, &n);
    return (span){s.p + off, n};
}

static span lstrip_newlines(span s) {
    while (s.n && s.p[0] == '\n') s.p++, s.n--;
    return s;
}

static span rstrip_newlines(span s) {
    while (s.n && s.p[s.n - 1] == '\n') s.n--;
    return s;
}

static int starts_with(span s, const char *prefix) {
    size_t m = strlen(prefix);
    return s.n >= m && !memcmp(s.p, prefix, m);
}

static int ends_with(span s, const char *suffix) {
    size_t m = strlen(suffix);
    return s.n >= m && !memcmp(s.p + s.n - m, suffix, m);
}

/* ---- rendering ---- */

typedef enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL, ROLE_OTHER } role;

static role role_of(const char *r) {
    if (!r) return ROLE_OTHER;
    if (!strcmp(r, "system")) return ROLE_SYSTEM;
    if (!strcmp(r, "user")) return ROLE_USER;
    if (!strcmp(r, "assistant")) return ROLE_ASSISTANT;
    if (!strcmp(r, "tool")) return ROLE_TOOL;
    return ROLE_OTHER;
}

typedef struct writer {
    text_bytes *out;
    int rc;
    clover_error *err;
} writer;

static void put(writer *w, span s) {
    if (!w->rc) w->rc = text_bytes_append(w->out, s.p, s.n, w->err);
}

static void put_str(writer *w, const char *s) { put(w, span_of(s)); }

/* The last user message that is a real query, not a tool result passed
 * back as a user turn; -1 when there is none. */
static long last_query_index(const clover_chat_message *msgs, size_t n) {
    for (size_t i = n; i-- > 0;) {
        if (role_of(msgs[i].role) != ROLE_USER) continue;
        span c = trimmed(span_of(msgs[i].content));
        if (!(starts_with(c, TOOL_RESPONSE_OPEN) && ends_with(c, TOOL_RESPONSE_CLOSE))) return (long)i;
    }
    return -1;
}

/* One call: <tool_call>\n<function=NAME>\n, then per argument
 * <parameter=K>\nV\n</parameter>\n (a string verbatim, another value as
 * tojson writes it), then </function>\n</tool_call>. The arguments were
 * checked to be a JSON object (check_tools); jansson keeps their order. */
static void render_call(writer *w, const clover_chat_tool_call *c) {
    put_str(w, "<tool_call>\n<function=");
    put_str(w, c->name);
    put_str(w, ">\n");
    json_error_t je;
    json_t *args = json_loads(c->arguments, 0, &je);
    if (!args && !w->rc) w->rc = error_set(w->err, CLOVER_E_NOMEM, "chat template: out of memory"); /* it parsed before */
    const char *key;
    json_t *v;
    json_object_foreach(args, key, v) {
        put_str(w, "<parameter=");
        put_str(w, key);
        put_str(w, ">\n");
        if (json_is_string(v)) {
            put(w, (span){json_string_value(v), json_string_length(v)});
        } else {
            char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
            if (!t && !w->rc) w->rc = error_set(w->err, CLOVER_E_NOMEM, "chat template: out of memory");
            put_str(w, t);
            free(t);
        }
        put_str(w, "\n</parameter>\n");
    }
    json_decref(args);
    put_str(w, "</function>\n</tool_call>");
}

/* An assistant turn: its reasoning (given, or split from the content at
 * </think>) and the content that follows. */
static void render_assistant(writer *w, const clover_chat_message *m, int keep_reasoning,
                             const clover_chat_tool_call *calls, size_t n_calls) {
    span content = trimmed(span_of(m->content)), reasoning = {"", 0};
    if (m->reasoning_content) {
        reasoning = span_of(m->reasoning_content);
    } else {
        const char *close = find(content.p, content.n, THINK_CLOSE);
        if (close) {
            /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
            span before = rstrip_newlines((span){content.p, (size_t)(close - content.p)});
            const char *open = find_last(before.p, before.n, THINK_OPEN);
            if (open) {
                size_t skip = (size_t)(open - before.p) + strlen(THINK_OPEN);
                before = (span){before.p + skip, before.n - skip};
            }
            reasoning = lstrip_newlines(before);
            /* content.split('</think>')[-1].lstrip('\n') */
            const char *last = find_last(content.p, content.n, THINK_CLOSE) + strlen(THINK_CLOSE);
            content = lstrip_newlines((span){last, (size_t)(content.p + content.n - last)});
        }
    }
    reasoning = trimmed(reasoning);
    put_str(w, "<|im_start|>assistant\n");
    if (keep_reasoning) {
        put_str(w, THINK_OPEN "\n");
        put(w, reasoning);
        put_str(w, "\n" THINK_CLOSE "\n\n");
    }
    put(w, content);
    for (size_t k = 0; k < n_calls; k++) {
        put_str(w, k ? "\n" : content.n ? "\n\n" : "");
        render_call(w, &calls[k]);
    }
    put_str(w, "<|im_end|>\n");
}

/* The tools' system block; the first system message's content (if any)
 * follows the instructions after a blank line. */
static void render_tools(writer *w, const clover_chat_options *o, const clover_chat_message *first) {
    put_str(w, "<|im_start|>system\n" TOOLS_HEAD);
    for (size_t i = 0; i < o->n_tools; i++) {
        put_str(w, "\n");
        put_str(w, o->tools[i]);
    }
    put_str(w, TOOLS_TAIL);
    if (role_of(first->role) == ROLE_SYSTEM) {
        span c = trimmed(span_of(first->content));
        if (c.n) put_str(w, "\n\n");
        put(w, c);
    }
    put_str(w, "<|im_end|>\n");
}

/* The tool options make sense: every call names an assistant message, in order. */
static int check_tools(const clover_chat_message *msgs, size_t n, const clover_chat_options *o, clover_error *err) {
    if (o->n_tools && !o->tools) return error_set(err, CLOVER_E_INVALID, "chat template: n_tools without tools");
    for (size_t i = 0; i < o->n_tools; i++)
        if (!o->tools[i]) return error_set(err, CLOVER_E_INVALID, "chat template: tool %zu is NULL", i);
    if (o->n_tool_calls && !o->tool_calls)
        return error_set(err, CLOVER_E_INVALID, "chat template: n_tool_calls without tool_calls");
    for (size_t k = 0; k < o->n_tool_calls; k++) {
        const clover_chat_tool_call *c = &o->tool_calls[k];
        if (c->message >= n || role_of(msgs[c->message].role) != ROLE_ASSISTANT)
            return error_set(err, CLOVER_E_INVALID, "chat template: tool call %zu names message %zu, not an assistant turn",
                             k, c->message);
        if (k && c->message < o->tool_calls[k - 1].message)
            return error_set(err, CLOVER_E_INVALID, "chat template: tool call %zu is out of message order", k);
        if (!c->name || !c->arguments)
            return error_set(err, CLOVER_E_INVALID, "chat template: tool call %zu has no name or arguments", k);
        json_error_t je;
        json_t *args = json_loads(c->arguments, 0, &je);
        int object = json_is_object(args);
        json_decref(args);
        if (!object)
            return error_set(err, CLOVER_E_INVALID, "chat template: tool call %zu: arguments are not a JSON object", k);
    }
    return 0;
}

int chat_template_render(const clover_chat_message *msgs, size_t n, const clover_chat_options *opts,
                         text_bytes *out, clover_error *err) {
    clover_chat_options def;
    clover_chat_options_init(&def);
    if (!opts) opts = &def;
    if (!out) return error_set(err, CLOVER_E_INVALID, "chat template: no output buffer");
    if (n == 0 || !msgs) return error_set(err, CLOVER_E_INVALID, "chat template: no messages");
    for (size_t i = 0; i < n; i++) {
        role r = role_of(msgs[i].role);
        if (r == ROLE_OTHER)
            return error_set(err, CLOVER_E_INVALID,
                             "chat template: message %zu has role '%.40s', expected system, user, assistant or tool",
                             i, msgs[i].role ? msgs[i].role : "(null)");
        if (r == ROLE_SYSTEM && i > 0)
            return error_set(err, CLOVER_E_INVALID,
                             "chat template: message %zu is a system message; only the first may be", i);
    }
    long last_query = last_query_index(msgs, n);
    if (last_query < 0)
        return error_set(err, CLOVER_E_INVALID, "chat template: no user message (the conversation needs a query)");
    int bad = check_tools(msgs, n, opts, err);
    if (bad) return bad;
    writer w = {out, text_bytes_append(out, "", 0, err), err};
    if (opts->n_tools) render_tools(&w, opts, &msgs[0]);
    size_t call = 0;
    for (size_t i = 0; i < n; i++) {
        const clover_chat_message *m = &msgs[i];
        size_t first_call = call;
        while (call < opts->n_tool_calls && opts->tool_calls[call].message == i) call++;
        switch (role_of(m->role)) {
        case ROLE_SYSTEM:
            if (opts->n_tools) break; /* inside the tools' block */
            /* fall through */
        case ROLE_USER:
            put_str(&w, "<|im_start|>");
            put_str(&w, m->role);
            put_str(&w, "\n");
            put(&w, trimmed(span_of(m->content)));
            put_str(&w, "<|im_end|>\n");
            break;
        case ROLE_ASSISTANT:
            render_assistant(&w, m, (long)i > last_query, opts->tool_calls + first_call, call - first_call);
            break;
        case ROLE_TOOL:
            /* a run of tool results is one user turn */
            if (i == 0 || role_of(msgs[i - 1].role) != ROLE_TOOL) put_str(&w, "<|im_start|>user");
            put_str(&w, "\n" TOOL_RESPONSE_OPEN "\n");
            put(&w, trimmed(span_of(m->content)));
            put_str(&w, "\n" TOOL_RESPONSE_CLOSE);
            if (i + 1 == n || role_of(msgs[i + 1].role) != ROLE_TOOL) put_str(&w, "<|im_end|>\n");
            break;
        case ROLE_OTHER: break; /* rejected above */
        }
    }
    if (opts->add_generation_prompt) {
        put_str(&w, "<|im_start|>assistant\n");
        put_str(&w, opts->enable_thinking ? THINK_OPEN "\n" : THINK_OPEN "\n\n" THINK_CLOSE "\n\n");
    }
    return w.rc;
}

int clover_chat_render(const clover_model *m, const clover_chat_message *msgs, size_t n,
                       const clover_chat_options *opts, char **text, clover_error *err) {
    (void)m; /* one template for the family: the model's own tokenizer.chat_template is not interpreted */
    if (!text) return error_set(err, CLOVER_E_INVALID, "clover_chat_render: text must not be NULL");
    *text = NULL;
    text_bytes out = {0};
    int rc = chat_template_render(msgs, n, opts, &out, err);
    if (rc) {
        text_bytes_free(&out);
        return rc;
    }
    *text = out.v;
    return CLOVER_OK;
}

/* ---- the answer ---- */

void clover_answer_split(const char *answer, size_t len, int thinking, clover_answer_parts *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!answer) len = 0;
    const char *close = len ? find(answer, len, THINK_CLOSE) : NULL;
    span reasoning = {answer, 0}, content = {answer ? answer + len : answer, 0};
    if (close) {
        reasoning = (span){answer, (size_t)(close - answer)};
        const char *open = find_last(reasoning.p, reasoning.n, THINK_OPEN); /* a think tag the answer repeated */
        if (open) {
            size_t skip = (size_t)(open - reasoning.p) + strlen(THINK_OPEN);
            reasoning = (span){reasoning.p + skip, reasoning.n - skip};
        }
        reasoning = rstrip_newlines(lstrip_newlines(reasoning));
        const char *after = close + strlen(THINK_CLOSE);
        content = lstrip_newlines((span){after, (size_t)(answer + len - after)});
        out->think_closed = 1;
    } else if (thinking) {
        reasoning = rstrip_newlines(lstrip_newlines((span){answer, len}));
    } else {
        content = (span){answer, len};
    }
    out->reasoning_off = reasoning.n ? (size_t)(reasoning.p - answer) : 0;
    out->reasoning_len = reasoning.n;
    out->content_off = content.n ? (size_t)(content.p - answer) : len;
    out->content_len = content.n;
}
