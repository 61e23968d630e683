/*
 * tool_calls.h: OpenAI tool calls over Qwen3.5's XML-function <tool_call>
 * form (TRUNK.md 6), with
 * no model and no I/O (unit-tested in tests/unit/test_server_tools.c).
 *
 * - tool_json_dumps writes a JSON value as Python's json.dumps does by
 *   default (", " and ": ", UTF-8 kept, keys in the order given), which is
 *   what the chat template's tojson writes: a tool is rendered into the
 *   prompt, and a parsed call's arguments are given back, in that form.
 * - tool_calls_parse reads an answer's content: text, then one or more
 *   <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n...
 *   </function>\n</tool_call> blocks (zero or more parameters) separated
 *   only by white space. The parameters become the OpenAI arguments object
 *   (a JSON text). A block that is not of that form, names a function the
 *   request did not declare, repeats a parameter, or has text after it,
 *   makes the whole answer plain content (a malformed call is never an
 *   error).
 * - tool_gate releases streamed content deltas, holding back everything
 *   from the first "<tool_call>" (and trailing white space, and a suffix
 *   that may grow into the tag), so a stream's deltas concatenate to the
 *   non-streaming content whatever the parse decides at the end.
 */
#ifndef CLOVER_SERVER_TOOL_CALLS_H
#define CLOVER_SERVER_TOOL_CALLS_H

#include <jansson.h>
#include <stddef.h>

#define TOOL_CALL_OPEN "<tool_call>"
#define TOOL_CALL_CLOSE "</tool_call>"

/* A malloc'd NUL-terminated text, or NULL (out of memory). */
char *tool_json_dumps(const json_t *v);

typedef struct tool_call_out {
    char *name;      /* malloc'd */
    char *arguments; /* malloc'd: the arguments object, tool_json_dumps'd */
} tool_call_out;

void tool_calls_free(tool_call_out *calls, size_t n);

/* 1: calls found (*calls, *n_calls; *content_len = the text before the first
 * block, trailing white space dropped); 0: no "<tool_call>" in the text;
 * -1: malformed (the text is plain content); -2: out of memory. names: the
 * declared functions; schemas: NULL, or each one's tool as a JSON text
 * ({"type": "function", "function": {..., "parameters": {...}}}) or NULL,
 * where a parameter's declared "type" decides whether its value stays a
 * string. */
int tool_calls_parse(const char *text, size_t len, char *const *names, char *const *schemas, size_t n_names,
                     tool_call_out **calls, size_t *n_calls, size_t *content_len);

typedef struct tool_gate {
    char *text; /* the content so far (a forced opening first) */
    size_t len, cap;
    size_t released; /* text[0..released) has been let through */
    int held;        /* "<tool_call>" was seen: nothing more is released until the end */
} tool_gate;

/* prefix: text the prompt forced (the opening of a call) or NULL. 0 or -1 (out of memory). */
int tool_gate_init(tool_gate *g, const char *prefix);
void tool_gate_free(tool_gate *g);
/* Appends a delta; *out, *out_len: what may be released now (a view into g->text). 0 or -1. */
int tool_gate_push(tool_gate *g, const char *s, size_t n, const char **out, size_t *out_len);
/* The end: parses the text. Returns tool_calls_parse's value; *out, *out_len:
 * the content still to release (up to content_len when calls were found,
 * else the rest of the text). */
int tool_gate_finish(tool_gate *g, char *const *names, char *const *schemas, size_t n_names, tool_call_out **calls,
                     size_t *n_calls, const char **out, size_t *out_len);

#endif
