/*
 * request_parse.c: the JSON body of /v1/chat/completions and
 * /v1/completions -> server_request.
 *
 * Strict about what it uses (types, ranges, the shapes OpenAI documents),
 * lenient about what it does not (unknown fields are ignored, as OpenAI
 * clients send many), and explicit about what it cannot honour (best_of,
 * echo, logit_bias, ...): those are a 400 naming the field rather than
 * a silently different answer. A JSON null means "not given". jansson
 * rejects invalid UTF-8 and "\u0000" in strings, so every string here is
 * valid UTF-8 without NUL bytes.
 */
#include "request_parse.h"

#include "clover.h"
#include "json_wide.h"
#include "response_format.h"
#include "tool_calls.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TYPE_INVALID "invalid_request_error"

/* Length of the valid UTF-8 character at s (NUL-terminated), or 0. */
static size_t utf8_valid_len(const unsigned char *s) {
    size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!n || (n == 2 && s[0] < 0xC2) || (n == 4 && s[0] > 0xF4)) return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0;
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;
    return n;
}

/* One line of valid UTF-8: a quoted client string may hold control
 * characters, and a precision (%.40s) may cut a character in two. */
static void message_clean(char *m) {
    unsigned char *s = (unsigned char *)m;
    while (*s) {
        size_t n = utf8_valid_len(s);
        if (n == 1 && (*s < 0x20 || *s == 0x7F)) *s = ' ';
        if (!n) {
            *s = '?';
            n = 1;
        }
        s += n;
    }
}

int server_error_set(server_error *e, int status, const char *type, const char *code, const char *param,
                     const char *fmt, ...) {
    if (!e) return -1;
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    message_clean(e->message);
    return -1;
}

static int bad_type(server_error *e, const char *param, const char *expected) {
    return server_error_set(e, 400, TYPE_INVALID, "invalid_type", param, "%s: expected %s", param, expected);
}

static int bad_value(server_error *e, const char *param, const char *fmt_expected, double got) {
    return server_error_set(e, 400, TYPE_INVALID, "invalid_value", param, "%s: expected %s, got %.17g", param,
                            fmt_expected, got);
}

static int unsupported(server_error *e, const char *param, const char *what) {
    return server_error_set(e, 400, TYPE_INVALID, "unsupported_parameter", param, "%s: %s", param, what);
}

/* Present and not null. */
static json_t *field(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v) ? v : NULL;
}

static int get_bool(json_t *obj, const char *key, int *out, int *has, server_error *e) {
    json_t *v = field(obj, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return bad_type(e, key, "true or false");
    *out = json_is_true(v);
    if (has) *has = 1;
    return 0;
}

static int get_float(json_t *obj, const char *key, double lo, double hi, const char *range, float *out, int *has,
                     server_error *e) {
    json_t *v = field(obj, key);
    if (!v) return 0;
    if (!json_is_number(v)) return bad_type(e, key, "a number");
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) return bad_value(e, key, range, x);
    *out = (float)x;
    *has = 1;
    return 0;
}

static int get_int(json_t *obj, const char *key, long long lo, long long hi, const char *range, long long *out,
                   int *has, server_error *e) {
    json_t *v = field(obj, key);
    if (!v) return 0;
    if (!json_is_integer(v)) {
        if (json_is_real(v)) return bad_value(e, key, range, json_real_value(v));
        return bad_type(e, key, "an integer");
    }
    long long x = (long long)json_integer_value(v);
    if (x < lo || x > hi) return bad_value(e, key, range, (double)x);
    *out = x;
    *has = 1;
    return 0;
}

/* A C string of the JSON string s[0..n): a "\u0000" in it (JSON allows it) becomes U+FFFD, the character for
 * one that cannot be shown, so that no text is silently cut at the NUL. */
static char *dup_string(const char *s, size_t n) {
    size_t nuls = 0;
    for (size_t i = 0; i < n; i++)
        nuls += s[i] == '\0';
    char *p = malloc(n + 2 * nuls + 1), *q = p;
    if (!p) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i]) {
            *q++ = s[i];
        } else {
            memcpy(q, "\xEF\xBF\xBD", 3);
            q += 3;
        }
    }
    *q = '\0';
    return p;
}

static int no_memory(server_error *e) {
    return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory while reading the request");
}

/* content: a string, null, or an array of {"type": "text", "text": ...} parts (joined with "\n"). */
static int parse_content(json_t *v, const char *param, char **out, server_error *e) {
    if (!v || json_is_null(v)) {
        *out = dup_string("", 0);
        return *out ? 0 : no_memory(e);
    }
    if (json_is_string(v)) {
        *out = dup_string(json_string_value(v), json_string_length(v));
        return *out ? 0 : no_memory(e);
    }
    if (!json_is_array(v)) return bad_type(e, param, "a string or an array of text parts");
    size_t total = 0, i;
    json_t *part;
    char where[128];
    json_array_foreach(v, i, part) {
        snprintf(where, sizeof where, "%s[%zu]", param, i);
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type))
            return bad_type(e, where, "an object with a \"type\"");
        if (strcmp(json_string_value(type), "text") != 0)
            return unsupported(e, where, "only \"text\" content parts are supported");
        if (!json_is_string(text)) return bad_type(e, where, "a text part with a string \"text\"");
        total += json_string_length(text) + 1;
    }
    char *s = malloc(total + 1), *p = s;
    if (!s) return no_memory(e);
    json_array_foreach(v, i, part) {
        json_t *text = json_object_get(part, "text");
        if (i) *p++ = '\n';
        memcpy(p, json_string_value(text), json_string_length(text));
        p += json_string_length(text);
    }
    *out = dup_string(s, (size_t)(p - s)); /* NULs as in a string */
    free(s);
    return *out ? 0 : no_memory(e);
}

/* An assistant turn's tool_calls: [{id, type: "function", function: {name, arguments: JSON text}}]. */
static int parse_message_calls(json_t *m, size_t i, server_message *out, server_error *e) {
    char where[96];
    snprintf(where, sizeof where, "messages[%zu].tool_calls", i);
    json_t *calls = field(m, "tool_calls");
    if (!calls) return 0;
    if (!json_is_array(calls)) return bad_type(e, where, "an array of tool calls");
    if (!json_array_size(calls)) return 0;
    if (strcmp(out->role, "assistant"))
        return server_error_set(e, 400, TYPE_INVALID, "invalid_value", where, "%s: only assistant messages make calls",
                                where);
    out->tool_calls = calloc(json_array_size(calls), sizeof *out->tool_calls);
    if (!out->tool_calls) return no_memory(e);
    size_t k;
    json_t *c;
    json_array_foreach(calls, k, c) {
        snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu]", i, k);
        json_t *type = json_object_get(c, "type"), *fn = json_object_get(c, "function");
        if (!json_is_object(c) || !json_is_object(fn))
            return bad_type(e, where, "an object {\"type\": \"function\", \"function\": {name, arguments}}");
        if (type && !json_is_null(type) && !(json_is_string(type) && !strcmp(json_string_value(type), "function"))) {
            snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu].type", i, k);
            return bad_type(e, where, "\"function\"");
        }
        json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
        snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu].function.name", i, k);
        if (!json_is_string(name) || !json_string_length(name)) return bad_type(e, where, "a function name");
        snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu].function.arguments", i, k);
        if (!json_is_string(args)) return bad_type(e, where, "a string holding a JSON object");
        json_error_t je;
        uint64_t wide;
        int has_wide;
        json_t *parsed = json_wide_load(json_string_value(args), json_string_length(args), &wide, &has_wide, &je);
        int object = json_is_object(parsed);
        json_decref(parsed);
        if (!object) return bad_type(e, where, "a string holding a JSON object");
        server_tool_call *t = &out->tool_calls[out->n_tool_calls++];
        t->name = dup_string(json_string_value(name), json_string_length(name));
        t->arguments = dup_string(json_string_value(args), json_string_length(args));
        if (!t->name || !t->arguments) return no_memory(e);
    }
    return 0;
}

/* A function name as OpenAI allows it: [A-Za-z0-9_-]{1,64}. */
static int valid_function_name(const char *s, size_t n) {
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* tools: [{type: "function", function: {name, description?, parameters?: object, strict?}}] and tool_choice. */
static int parse_tools(json_t *root, server_request *r, server_error *e) {
    json_t *tools = field(root, "tools");
    char where[96];
    if (tools) {
        if (!json_is_array(tools)) return bad_type(e, "tools", "an array of {\"type\": \"function\", \"function\": ...}");
        size_t n = json_array_size(tools);
        if (n > SERVER_MAX_TOOLS)
            return server_error_set(e, 400, TYPE_INVALID, "invalid_value", "tools",
                                    "tools: expected at most %d tools, got %zu", SERVER_MAX_TOOLS, n);
        r->tools_json = calloc(n ? n : 1, sizeof *r->tools_json);
        r->tool_names = calloc(n ? n : 1, sizeof *r->tool_names);
        if (!r->tools_json || !r->tool_names) return no_memory(e);
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            snprintf(where, sizeof where, "tools[%zu]", i);
            if (!json_is_object(t)) return bad_type(e, where, "an object {\"type\": \"function\", \"function\": ...}");
            json_t *type = json_object_get(t, "type"), *fn = json_object_get(t, "function");
            snprintf(where, sizeof where, "tools[%zu].type", i);
            if (!json_is_string(type) || strcmp(json_string_value(type), "function"))
                return bad_type(e, where, "\"function\" (the only kind of tool)");
            snprintf(where, sizeof where, "tools[%zu].function", i);
            if (!json_is_object(fn)) return bad_type(e, where, "an object {name, description, parameters}");
            json_t *name = json_object_get(fn, "name"), *desc = json_object_get(fn, "description"),
                   *params = json_object_get(fn, "parameters");
            snprintf(where, sizeof where, "tools[%zu].function.name", i);
            if (!json_is_string(name)) return bad_type(e, where, "a string of 1 to 64 letters, digits, _ or -");
            if (!valid_function_name(json_string_value(name), json_string_length(name)))
                return server_error_set(e, 400, TYPE_INVALID, "invalid_value", where,
                                        "%s: expected 1 to 64 letters, digits, _ or -, got \"%.64s\"", where,
                                        json_string_value(name));
            for (size_t k = 0; k < i; k++)
                if (!strcmp(r->tool_names[k], json_string_value(name)))
                    return server_error_set(e, 400, TYPE_INVALID, "invalid_value", where,
                                            "%s: \"%s\" is declared twice (also tools[%zu])", where,
                                            json_string_value(name), k);
            snprintf(where, sizeof where, "tools[%zu].function.description", i);
            if (desc && !json_is_null(desc) && !json_is_string(desc)) return bad_type(e, where, "a string");
            snprintf(where, sizeof where, "tools[%zu].function.parameters", i);
            if (params && !json_is_null(params) && !json_is_object(params))
                return bad_type(e, where, "a JSON Schema object");
            r->tool_names[i] = dup_string(json_string_value(name), json_string_length(name));
            r->tools_json[i] = tool_json_dumps(t);
            r->n_tools = i + 1;
            if (!r->tool_names[i] || !r->tools_json[i]) return no_memory(e);
        }
    }
    json_t *tc = field(root, "tool_choice");
    r->tool_choice = r->n_tools ? SERVER_TOOL_AUTO : SERVER_TOOL_NONE;
    if (!tc) return 0;
    static const char *expected = "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
    if (json_is_string(tc)) {
        const char *v = json_string_value(tc);
        if (!strcmp(v, "none")) r->tool_choice = SERVER_TOOL_NONE;
        else if (!strcmp(v, "auto")) r->tool_choice = r->n_tools ? SERVER_TOOL_AUTO : SERVER_TOOL_NONE;
        else if (!strcmp(v, "required")) r->tool_choice = SERVER_TOOL_REQUIRED;
        else return server_error_set(e, 400, TYPE_INVALID, "invalid_value", "tool_choice", "tool_choice: expected %s, got \"%.40s\"", expected, v);
    } else if (json_is_object(tc)) {
        json_t *fn = json_object_get(tc, "function"), *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        if (!json_is_string(name)) return bad_type(e, "tool_choice.function.name", "a declared function's name");
        r->tool_choice_name = dup_string(json_string_value(name), json_string_length(name));
        if (!r->tool_choice_name) return no_memory(e);
        r->tool_choice = SERVER_TOOL_NAMED;
        size_t k = 0;
        while (k < r->n_tools && strcmp(r->tool_names[k], r->tool_choice_name)) k++;
        if (k == r->n_tools)
            return server_error_set(e, 400, TYPE_INVALID, "invalid_value", "tool_choice.function.name",
                                    "tool_choice.function.name: \"%.64s\" is not among the declared tools",
                                    r->tool_choice_name);
    } else {
        return bad_type(e, "tool_choice", expected);
    }
    if ((r->tool_choice == SERVER_TOOL_REQUIRED || r->tool_choice == SERVER_TOOL_NAMED) && !r->n_tools)
        return server_error_set(e, 400, TYPE_INVALID, "invalid_value", "tool_choice",
                                "tool_choice: a call is required but no tools are declared");
    return 0;
}

static int parse_messages(json_t *root, server_request *r, server_error *e) {
    json_t *msgs = json_object_get(root, "messages");
    if (!msgs || json_is_null(msgs))
        return server_error_set(e, 400, TYPE_INVALID, "missing_required_parameter", "messages",
                                "messages: required (an array of {role, content} objects)");
    if (!json_is_array(msgs)) return bad_type(e, "messages", "an array of {role, content} objects");
    size_t n = json_array_size(msgs);
    if (n == 0)
        return server_error_set(e, 400, TYPE_INVALID, "invalid_value", "messages",
                                "messages: expected at least one message, got an empty array");
    r->messages = calloc(n, sizeof *r->messages);
    if (!r->messages) return no_memory(e);
    r->n_messages = n;
    char where[64];
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        server_message *out = &r->messages[i];
        snprintf(where, sizeof where, "messages[%zu]", i);
        if (!json_is_object(m)) return bad_type(e, where, "an object with \"role\" and \"content\"");
        json_t *role = json_object_get(m, "role");
        snprintf(where, sizeof where, "messages[%zu].role", i);
        if (!json_is_string(role)) return bad_type(e, where, "\"system\", \"user\", \"assistant\" or \"tool\"");
        const char *rs = json_string_value(role);
        if (!strcmp(rs, "developer")) rs = "system";
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") && strcmp(rs, "tool"))
            return server_error_set(e, 400, TYPE_INVALID, "invalid_value", where,
                                    "%s: expected \"system\", \"user\", \"assistant\" or \"tool\", got \"%.40s\"",
                                    where, rs);
        out->role = dup_string(rs, strlen(rs));
        if (!out->role) return no_memory(e);
        if (parse_message_calls(m, i, out, e)) return -1;
        snprintf(where, sizeof where, "messages[%zu].content", i);
        if (parse_content(json_object_get(m, "content"), where, &out->content, e)) return -1;
        json_t *rc = json_object_get(m, "reasoning_content");
        snprintf(where, sizeof where, "messages[%zu].reasoning_content", i);
        if (rc && !json_is_null(rc)) {
            if (!json_is_string(rc)) return bad_type(e, where, "a string");
            out->reasoning_content = dup_string(json_string_value(rc), json_string_length(rc));
            if (!out->reasoning_content) return no_memory(e);
        }
    }
    /* enable_thinking: top level, or as the chat template's kwarg (the top level wins) */
    int has = 0, on = 1;
    json_t *kw = field(root, "chat_template_kwargs");
    if (kw && !json_is_object(kw)) return bad_type(e, "chat_template_kwargs", "an object");
    if (kw && get_bool(kw, "enable_thinking", &on, &has, e))
        return server_error_set(e, 400, TYPE_INVALID, "invalid_type", "chat_template_kwargs.enable_thinking",
                                "chat_template_kwargs.enable_thinking: expected true or false");
    if (get_bool(root, "enable_thinking", &on, &has, e)) return -1;
    r->enable_thinking = on;
    return 0;
}

static int parse_id_array(json_t *arr, const char *param, server_request *r, server_error *e) {
    size_t n = json_array_size(arr);
    r->prompt_ids = malloc(n * sizeof *r->prompt_ids);
    if (!r->prompt_ids) return no_memory(e);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            char where[64];
            snprintf(where, sizeof where, "%s[%zu]", param, i);
            return bad_type(e, where, "a token id (an integer >= 0)");
        }
        r->prompt_ids[i] = (int32_t)json_integer_value(v);
    }
    r->n_prompt_ids = n;
    return 0;
}

/* prompt: a string, an array of one string, an array of token ids, or an array of one such array. */
static int parse_prompt(json_t *root, server_request *r, server_error *e) {
    static const char *expected = "a string or an array of token ids (one prompt: n = 1)";
    json_t *p = json_object_get(root, "prompt");
    if (!p || json_is_null(p))
        return server_error_set(e, 400, TYPE_INVALID, "missing_required_parameter", "prompt",
                                "prompt: required (%s)", expected);
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        if (json_string_length(p) == 0)
            return server_error_set(e, 400, TYPE_INVALID, "invalid_value", "prompt", "prompt: is empty");
        r->prompt = dup_string(json_string_value(p), json_string_length(p));
        if (!r->prompt) return no_memory(e);
        r->prompt_len = strlen(r->prompt);
        return 0;
    }
    if (!json_is_array(p)) return bad_type(e, "prompt", expected);
    if (json_array_size(p) == 0)
        return server_error_set(e, 400, TYPE_INVALID, "invalid_value", "prompt", "prompt: is empty");
    if (!json_is_integer(json_array_get(p, 0)))
        return unsupported(e, "prompt", "several prompts in one request are not supported (n = 1)");
    return parse_id_array(p, "prompt", r, e);
}

static int parse_stop(json_t *root, const server_parse_options *o, server_request *r, server_error *e) {
    json_t *s = field(root, "stop");
    if (!s) return 0;
    size_t max_len = o && o->max_stop_len ? o->max_stop_len : SERVER_MAX_STOP_LEN;
    int many = json_is_array(s);
    if (!many && !json_is_string(s)) return bad_type(e, "stop", "a string or an array of up to 4 strings");
    size_t n = many ? json_array_size(s) : 1;
    if (n > SERVER_MAX_STOPS)
        return server_error_set(e, 400, TYPE_INVALID, "invalid_value", "stop",
                                "stop: expected at most %d strings, got %zu", SERVER_MAX_STOPS, n);
    for (size_t i = 0; i < n; i++) {
        json_t *v = many ? json_array_get(s, i) : s;
        char where[32];
        if (many)
            snprintf(where, sizeof where, "stop[%zu]", i);
        else
            snprintf(where, sizeof where, "stop");
        if (!json_is_string(v)) return bad_type(e, where, "a string");
        char *stop = dup_string(json_string_value(v), json_string_length(v));
        if (!stop) return no_memory(e);
        size_t len = strlen(stop);
        if (len == 0 || len > max_len) {
            free(stop);
            return server_error_set(e, 400, TYPE_INVALID, "invalid_value", where,
                                    "%s: expected 1 to %zu bytes of UTF-8, got %zu", where, max_len, len);
        }
        r->stops[r->n_stops++] = stop;
    }
    return 0;
}

/* Options OpenAI documents that this server cannot honour: a clear 400, not a different answer. */
static int reject_unsupported(json_t *root, server_error *e) {
    json_t *v;
    if ((v = field(root, "best_of")) && !(json_is_integer(v) && json_integer_value(v) == 1))
        return unsupported(e, "best_of", "only best_of = 1 is supported");
    if ((v = field(root, "echo")) && !json_is_false(v)) return unsupported(e, "echo", "echo is not supported");
    if ((v = field(root, "suffix")) && !(json_is_string(v) && json_string_length(v) == 0))
        return unsupported(e, "suffix", "suffix (insertion) is not supported");
    if ((v = field(root, "logit_bias")) && !(json_is_object(v) && json_object_size(v) == 0))
        return unsupported(e, "logit_bias", "logit_bias is not supported");
    return 0;
}

static int parse_options(json_t *root, const server_parse_options *o, server_request *r, server_error *e) {
    long long x = 0;
    int has = 0;
    uint32_t max_n = o && o->max_n ? o->max_n : 8;
    char range[64];
    snprintf(range, sizeof range, "an integer from 1 to %u (--max-n)", max_n);
    r->n = 1;
    if (get_int(root, "n", 1, max_n, range, &x, &has, e)) return -1;
    if (has) r->n = (uint32_t)x;
    /* chat: logprobs true/false and top_logprobs 0..20; completions: logprobs 0..5 (the alternatives) */
    has = 0;
    if (r->endpoint == SERVER_ENDPOINT_CHAT) {
        if (get_bool(root, "logprobs", &r->logprobs, NULL, e)) return -1;
        if (get_int(root, "top_logprobs", 0, SERVER_MAX_TOP_LOGPROBS, "an integer from 0 to 20", &x, &has, e))
            return -1;
        if (has) {
            r->top_logprobs = (uint32_t)x;
            if (x > 0 && !r->logprobs)
                return server_error_set(e, 400, TYPE_INVALID, "invalid_value", "top_logprobs",
                                        "top_logprobs: needs logprobs: true");
        }
    } else {
        if (field(root, "top_logprobs")) return unsupported(e, "top_logprobs", "completions take logprobs: N");
        if (get_int(root, "logprobs", 0, 5, "an integer from 0 to 5", &x, &has, e)) return -1;
        if (has) {
            r->logprobs = 1;
            r->top_logprobs = (uint32_t)x;
        }
    }
    if (get_bool(root, "stream", &r->stream, NULL, e)) return -1;
    json_t *so = field(root, "stream_options");
    if (so && !json_is_object(so)) return bad_type(e, "stream_options", "an object");
    if (so && get_bool(so, "include_usage", &r->include_usage, NULL, e))
        return bad_type(e, "stream_options.include_usage", "true or false");
    if (so && get_bool(so, "clover_passes", &r->include_passes, NULL, e))
        return bad_type(e, "stream_options.clover_passes", "true or false");

    const char *mt_range = "an integer from 1 to 1073741824";
    has = 0; /* get_int only sets it: left from (top_)logprobs, it made their value the length cap */
    if (get_int(root, "max_tokens", 1, SERVER_MAX_TOKENS_CAP, mt_range, &x, &has, e)) return -1;
    if (get_int(root, "max_completion_tokens", 1, SERVER_MAX_TOKENS_CAP, mt_range, &x, &has, e)) return -1;
    r->has_max_tokens = has;
    r->max_tokens = (uint64_t)x;

    if (get_float(root, "temperature", 0.0, 2.0, "a number in [0, 2]", &r->temperature, &r->has_temperature, e))
        return -1;
    if (get_float(root, "top_p", 0.0, 1.0, "a number in [0, 1]", &r->top_p, &r->has_top_p, e)) return -1;
    has = 0;
    if (get_int(root, "top_k", -1, INT32_MAX, "an integer >= 0 (0 or -1: off)", &x, &has, e)) return -1;
    if (has) {
        r->has_top_k = 1;
        r->top_k = x < 0 ? 0 : (int32_t)x;
    }
    json_t *seed = field(root, "seed");
    if (seed) {
        if (!json_is_integer(seed)) return bad_type(e, "seed", "an integer");
        r->seed = (uint64_t)(long long)json_integer_value(seed);
        r->has_seed = 1;
    }
    if (get_float(root, "presence_penalty", -2.0, 2.0, "a number in [-2, 2]", &r->presence_penalty,
                  &r->has_presence_penalty, e))
        return -1;
    if (get_float(root, "frequency_penalty", -2.0, 2.0, "a number in [-2, 2]", &r->frequency_penalty,
                  &r->has_frequency_penalty, e))
        return -1;
    if (get_float(root, "threshold", 0.0, 1.0, "a number in [0, 1]", &r->threshold, &r->has_threshold, e))
        return -1;
    has = 0;
    if (get_int(root, "block_size", 1, 1 << 20, "an integer >= 1 (a divisor of the model's block size)", &x, &has,
                e))
        return -1;
    if (has) {
        r->has_block_size = 1;
        r->block_size = (uint32_t)x;
    }
    if (get_bool(root, "ignore_eos", &r->ignore_eos, NULL, e)) return -1;
    if (get_bool(root, "lossless", &r->lossless, NULL, e)) return -1;
    json_t *rule = field(root, "rule");
    if (rule) {
        if (!json_is_string(rule)) return bad_type(e, "rule", "\"threshold\" or \"causal\"");
        const char *v = json_string_value(rule);
        if (!strcmp(v, "threshold"))
            r->rule = CLOVER_RULE_THRESHOLD;
        else if (!strcmp(v, "causal"))
            r->rule = CLOVER_RULE_CAUSAL;
        else
            return server_error_set(e, 400, TYPE_INVALID, "invalid_value", "rule",
                                    "rule: expected \"threshold\" or \"causal\", got \"%.40s\"", v);
    }
    return 0;
}

int server_request_parse(server_request *req, server_endpoint endpoint, const char *body, size_t len,
                         const server_parse_options *opts, server_error *err) {
    memset(req, 0, sizeof *req);
    req->endpoint = endpoint;
    req->enable_thinking = 1;
    json_error_t jerr;
    uint64_t wide_seed = 0;
    int has_wide_seed = 0;
    json_t *root = body ? json_wide_load(body, len, &wide_seed, &has_wide_seed, &jerr) : NULL;
    if (!root) {
        return server_error_set(err, 400, TYPE_INVALID, "invalid_json", NULL,
                                "the body is not valid JSON: %s (line %d, column %d)",
                                body ? jerr.text : "no body", body ? jerr.line : 0, body ? jerr.column : 0);
    }
    int rc = -1;
    if (!json_is_object(root)) {
        bad_type(err, "body", "a JSON object");
        goto done;
    }
    json_t *model = field(root, "model");
    if (model) {
        if (!json_is_string(model)) {
            bad_type(err, "model", "a string");
            goto done;
        }
        req->model = dup_string(json_string_value(model), json_string_length(model));
        if (!req->model) {
            no_memory(err);
            goto done;
        }
    }
    if (reject_unsupported(root, err)) goto done;
    if (endpoint == SERVER_ENDPOINT_CHAT ? parse_messages(root, req, err) : parse_prompt(root, req, err)) goto done;
    if (parse_stop(root, opts, req, err) || parse_options(root, opts, req, err)) goto done;
    if (has_wide_seed) req->seed = wide_seed; /* past int64: json_wide.h */
    if (endpoint == SERVER_ENDPOINT_CHAT && parse_tools(root, req, err)) goto done;
    if (endpoint == SERVER_ENDPOINT_COMPLETION && field(root, "tools")) {
        unsupported(err, "tools", "tools belong to /v1/chat/completions");
        goto done;
    }
    if (response_format_parse(root, &req->json_schema, err)) goto done; /* structured output */
    if (req->json_schema && req->n_tools && req->tool_choice != SERVER_TOOL_NONE) {
        unsupported(err, "response_format", "a JSON schema together with tools is not supported");
        goto done;
    }
    rc = 0;
done:
    json_decref(root);
    if (rc) server_request_free(req);
    return rc;
}

void server_request_free(server_request *req) {
    if (!req) return;
    for (size_t i = 0; i < req->n_messages; i++) {
        free(req->messages[i].role);
        free(req->messages[i].content);
        free(req->messages[i].reasoning_content);
        for (size_t k = 0; k < req->messages[i].n_tool_calls; k++) {
            free(req->messages[i].tool_calls[k].name);
            free(req->messages[i].tool_calls[k].arguments);
        }
        free(req->messages[i].tool_calls);
    }
    for (size_t i = 0; i < req->n_tools; i++) {
        free(req->tools_json[i]);
        free(req->tool_names[i]);
    }
    free(req->tools_json);
    free(req->tool_names);
    free(req->tool_choice_name);
    free(req->json_schema);
    free(req->messages);
    free(req->model);
    free(req->prompt);
    free(req->prompt_ids);
    for (size_t i = 0; i < req->n_stops; i++)
        free(req->stops[i]);
    memset(req, 0, sizeof *req);
}
