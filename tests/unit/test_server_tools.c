/*
 * test_server_tools.c: tool calls in the server, without a model.
 *  - Rendering: the conversations of tests/fixtures/tool_chat/cases.json go
 *    through the server's request parser (tools re-written as tojson does)
 *    and clover_chat_render; the text must equal what transformers'
 *    apply_chat_template wrote with Qwen3's real template
 *    (tools/reference/make_tool_chats.py).
 *  - Parsing: hand-written answers, well-formed and malformed, against
 *    hand-written expected calls.
 *  - The gate: answers cut into random pieces; the released deltas must
 *    concatenate to the parse's content, whatever the cuts.
 *  - Bad requests: a 400 naming the field.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clover.h"
#include "request_parse.h"
#include "test.h"
#include "tool_calls.h"

/* Renders a parsed request as request_prepare does (tools, history calls; thinking as asked). */
static char *render(const server_request *r) {
    clover_chat_message *msgs = calloc(r->n_messages, sizeof *msgs);
    clover_chat_tool_call calls[64];
    size_t nc = 0;
    for (size_t i = 0; i < r->n_messages; i++) {
        msgs[i] = (clover_chat_message){.role = r->messages[i].role, .content = r->messages[i].content,
                                        .reasoning_content = r->messages[i].reasoning_content};
        for (size_t k = 0; k < r->messages[i].n_tool_calls && nc < 64; k++)
            calls[nc++] = (clover_chat_tool_call){i, r->messages[i].tool_calls[k].name,
                                                  r->messages[i].tool_calls[k].arguments};
    }
    clover_chat_options o;
    clover_chat_options_init(&o);
    o.enable_thinking = r->enable_thinking;
    o.tools = (const char *const *)r->tools_json;
    o.n_tools = r->n_tools;
    o.tool_calls = calls;
    o.n_tool_calls = nc;
    char *text = NULL;
    clover_error err = {0};
    int rc = clover_chat_render(NULL, msgs, r->n_messages, &o, &text, &err);
    CHECK_MSG(rc == CLOVER_OK, "render: %s", err.message);
    free(msgs);
    return text;
}

static void test_fixture_renderings(void) {
    char path[1024];
    json_error_t je;
    json_t *root = json_load_file(test_source_path("tests/fixtures/tool_chat/cases.json", path, sizeof path), 0, &je);
    CHECK_MSG(root != NULL, "%s: %s", path, je.text);
    json_t *cases = json_object_get(root, "cases");
    CHECK(json_array_size(cases) >= 5);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        json_t *body = json_pack("{s:O,s:O,s:b}", "messages", json_object_get(c, "messages"), "tools",
                                 json_object_get(c, "tools"), "enable_thinking", 0);
        char *text = json_dumps(body, JSON_COMPACT);
        server_request r;
        server_error e = {0};
        int rc = server_request_parse(&r, SERVER_ENDPOINT_CHAT, text, strlen(text), NULL, &e);
        CHECK_MSG(rc == 0, "case %zu: %s", i, e.message);
        if (!rc) {
            char *got = render(&r);
            const char *want = json_string_value(json_object_get(c, "text"));
            CHECK_MSG(got && want && !strcmp(got, want), "case %s:\n[%s]\nexpected:\n[%s]",
                      json_string_value(json_object_get(c, "name")), got ? got : "(null)", want);
            clover_free(got);
            server_request_free(&r);
        }
        free(text);
        json_decref(body);
    }
    json_decref(root);
}

static char *names[] = {"get_weather", "local_time"};

/* Parses and checks the result: rc, and for rc 1 the calls ("name|args" each) and the content length. */
static void parse_is(const char *text, int want_rc, const char *const *want_calls, size_t want_n,
                     size_t want_content) {
    tool_call_out *calls = NULL;
    size_t n = 0, content = 0;
    int rc = tool_calls_parse(text, strlen(text), names, 2, &calls, &n, &content);
    CHECK_MSG(rc == want_rc, "[%s]: rc %d, expected %d", text, rc, want_rc);
    if (rc == 1 && want_rc == 1) {
        CHECK_EQ_INT(n, want_n);
        CHECK_EQ_INT(content, want_content);
        for (size_t k = 0; k < n && k < want_n; k++) {
            char both[512];
            snprintf(both, sizeof both, "%s|%s", calls[k].name, calls[k].arguments);
            CHECK_MSG(!strcmp(both, want_calls[k]), "call %zu: [%s], expected [%s]", k, both, want_calls[k]);
        }
    }
    tool_calls_free(calls, n);
}

static void test_parse(void) {
    const char *one[] = {"get_weather|{\"city\": \"Paris\"}"};
    parse_is("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", 1, one, 1,
             0);
    /* compact JSON from the model comes back in tojson's form; content before it, trimmed */
    parse_is("Let me look.\n\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}</tool_call>\n", 1,
             one, 1, 12);
    const char *two[] = {"get_weather|{\"city\": \"Oslo\", \"unit\": \"celsius\"}", "local_time|{}"};
    parse_is("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"celsius\"}}\n"
             "</tool_call>\n<tool_call>\n{\"name\": \"local_time\", \"arguments\": {}}\n</tool_call>",
             1, two, 2, 0);
    const char *nested[] = {"local_time|{\"zone\": \"é\\\"</x>\", \"list\": [1, {\"a\": null}]}"};
    parse_is("<tool_call>{\"name\": \"local_time\", \"arguments\": {\"zone\": \"é\\\"</x>\", \"list\": [1, {\"a\": null}]}}"
             "</tool_call>",
             1, nested, 1, 0);
    parse_is("Just an answer.", 0, NULL, 0, 0);
    parse_is("", 0, NULL, 0, 0);
    /* malformed: plain content */
    parse_is("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call>\n{\"name\": \"unknown_fn\", \"arguments\": {}}\n</tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call>\n{\"name\": \"local_time\", \"arguments\": \"{}\"}\n</tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call>\n{\"name\": \"local_time\", \"arguments\": {}, \"x\": 1}\n</tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call>\n{\"name\": \"local_time\", \"arguments\": {}}\n", -1, NULL, 0, 0); /* not closed */
    parse_is("<tool_call>\n{\"name\": \"local_time\", \"arguments\": {}}\n</tool_call> and then text", -1, NULL, 0, 0);
    parse_is("<tool_call><tool_call>{\"name\": \"local_time\", \"arguments\": {}}</tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call>[1, 2]</tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call></tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
             "<tool_call>\n{\"name\": \"get_weather\"",
             -1, NULL, 0, 0);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Feeds text in random pieces through a gate; the released bytes must be the parse's content. */
static void gate_case(const char *prefix, const char *text, int want_rc, const char *want_content) {
    for (int trial = 0; trial < 50; trial++) {
        tool_gate g;
        CHECK(tool_gate_init(&g, prefix) == 0);
        char out[4096];
        size_t on = 0, n = strlen(text), at = 0;
        while (at < n) {
            size_t k = 1 + next() % 7;
            if (k > n - at) k = n - at;
            const char *d;
            size_t dl;
            CHECK(tool_gate_push(&g, text + at, k, &d, &dl) == 0);
            if (dl) memcpy(out + on, d, dl);
            on += dl;
            at += k;
            /* nothing from the first "<tool_call>" on is released early */
            const char *tag = strstr(g.text, TOOL_CALL_OPEN);
            if (tag) CHECK(g.released <= (size_t)(tag - g.text));
        }
        tool_call_out *calls = NULL;
        size_t nc = 0;
        const char *d;
        size_t dl;
        int rc = tool_gate_finish(&g, names, 2, &calls, &nc, &d, &dl);
        if (dl) memcpy(out + on, d, dl);
        on += dl;
        out[on] = '\0';
        CHECK_EQ_INT(rc, want_rc);
        CHECK_MSG(!strcmp(out, want_content), "trial %d: released [%s], expected [%s]", trial, out, want_content);
        tool_calls_free(calls, nc);
        tool_gate_free(&g);
    }
}

static void test_gate(void) {
    gate_case(NULL, "Plain text, <tool no call>  \n", 0, "Plain text, <tool no call>  \n");
    gate_case(NULL, "Checking.\n<tool_call>\n{\"name\": \"local_time\", \"arguments\": {}}\n</tool_call>", 1,
              "Checking.");
    gate_case(NULL, "Checking.\n<tool_call>\n{\"name\": broken</tool_call>", -1,
              "Checking.\n<tool_call>\n{\"name\": broken</tool_call>");
    /* a forced opening: the answer continues it */
    gate_case("<tool_call>\n{\"name\": \"", "local_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>", 1, "");
    gate_case("<tool_call>\n{\"name\": \"", "gibberish", -1, "<tool_call>\n{\"name\": \"gibberish");
}

/* A body that must be refused 400 naming param. */
static void refused(const char *body, const char *param) {
    server_request r;
    server_error e = {0};
    server_parse_options o = {.max_n = 4};
    int rc = server_request_parse(&r, SERVER_ENDPOINT_CHAT, body, strlen(body), &o, &e);
    CHECK_MSG(rc == -1 && e.status == 400 && !strcmp(e.param, param), "[%s]: rc %d status %d param [%s] (%s)", body,
              rc, e.status, e.param, e.message);
    if (rc == 0) server_request_free(&r);
}

#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define TOOL(name) "{\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"parameters\":{}}}"

static void test_bad_requests(void) {
    refused("{" MSG ",\"tools\":{}}", "tools");
    refused("{" MSG ",\"tools\":[1]}", "tools[0]");
    refused("{" MSG ",\"tools\":[{\"type\":\"code\",\"function\":{\"name\":\"f\"}}]}", "tools[0].type");
    refused("{" MSG ",\"tools\":[{\"type\":\"function\"}]}", "tools[0].function");
    refused("{" MSG ",\"tools\":[" TOOL("ok") ",{\"type\":\"function\",\"function\":{\"name\":\"bad name\"}}]}",
            "tools[1].function.name");
    refused("{" MSG ",\"tools\":[" TOOL("f") "," TOOL("f") "]}", "tools[1].function.name");
    refused("{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]}",
            "tools[0].function.parameters");
    refused("{" MSG ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":3}}]}",
            "tools[0].function.description");
    refused("{" MSG ",\"tools\":[" TOOL("f") "],\"tool_choice\":\"always\"}", "tool_choice");
    refused("{" MSG ",\"tools\":[" TOOL("f") "],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}",
            "tool_choice.function.name");
    refused("{" MSG ",\"tool_choice\":\"required\"}", "tool_choice");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":null,"
            "\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{oops\"}}]}]}",
            "messages[1].tool_calls[0].function.arguments");
    refused("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\",\"tool_calls\":[{\"type\":\"function\","
            "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
            "messages[0].tool_calls");
    refused("{" MSG ",\"n\":5}", "n");
    refused("{" MSG ",\"n\":0}", "n");
    /* accepted: tool_choice none without tools, n at the limit, null tool content */
    server_request r;
    server_error e = {0};
    server_parse_options o = {.max_n = 4};
    const char *ok = "{" MSG ",\"tool_choice\":\"none\",\"n\":4}";
    CHECK_MSG(server_request_parse(&r, SERVER_ENDPOINT_CHAT, ok, strlen(ok), &o, &e) == 0, "%s", e.message);
    CHECK_EQ_INT(r.n, 4);
    CHECK_EQ_INT(r.tool_choice, SERVER_TOOL_NONE);
    server_request_free(&r);
}

int main(void) {
    RUN(test_fixture_renderings);
    RUN(test_parse);
    RUN(test_gate);
    RUN(test_bad_requests);
    return TEST_EXIT();
}
