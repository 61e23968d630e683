/*
 * test_server_tools.c: tool calls in the server, without a model.
 *  - Rendering: conversations go through the server's request parser
 *    (tools re-written as tojson does) and clover_chat_render; the text must
 *    equal, byte for byte, the expected prompts hand-written from TRUNK.md 6
 *    (Qwen3.5's XML-function calling) and the instruction text of
 *    third-party copies of Qwen3.5's / 3.6's chat_template.jinja (the exact
 *    Qwen3.5 file was not available, so transformers cannot render them).
 *  - Parsing: hand-written Qwen3.5 answers, well-formed and malformed,
 *    against hand-written expected calls (arguments typed by the schemas).
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

/* ---- the renderings, hand-written from TRUNK.md 6 (Qwen3.5's XML-function
 * calling) and the instruction text of third-party copies of Qwen3.5's /
 * Qwen3.6's chat_template.jinja (the exact Qwen3.5 file was not available
 * here, so no transformers rendering can be the reference) ---- */

/* The tools as the client sends them (compact) and as tojson writes them. */
#define WEATHER                                                                                                        \
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"The weather of a city, now.\","   \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"type\":"          \
    "\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\"]}}}"
#define WEATHER_TOJSON                                                                                                 \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather of a city, "    \
    "now.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": "    \
    "{\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}"
#define CLOCK                                                                                                          \
    "{\"type\":\"function\",\"function\":{\"name\":\"local_time\",\"description\":\"L'heure locale \xe2\x80\x94 24 h\"," \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"zone\":{\"type\":\"string\"},\"offset\":{\"type\":"        \
    "\"integer\"},\"dst\":{\"type\":\"boolean\"}}}}}"
#define CLOCK_TOJSON                                                                                                   \
    "{\"type\": \"function\", \"function\": {\"name\": \"local_time\", \"description\": \"L'heure locale \xe2\x80\x94 " \
    "24 h\", \"parameters\": {\"type\": \"object\", \"properties\": {\"zone\": {\"type\": \"string\"}, \"offset\": "  \
    "{\"type\": \"integer\"}, \"dst\": {\"type\": \"boolean\"}}}}}"

#define TOOLS_OPEN "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>"
#define INSTRUCTIONS                                                                                                   \
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"        \
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"                      \
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"    \
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "  \
    "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- "     \
    "Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural "  \
    "language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question " \
    "like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>"
#define NO_THINK "<|im_start|>assistant\n<think>\n\n</think>\n\n"
#define CALL(id, name, args)                                                                                           \
    "{\"id\":\"" id "\",\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"arguments\":\"" args "\"}}"

typedef struct render_case {
    const char *name, *body, *want;
} render_case;

static const render_case render_cases[] = {
    {"tools_with_system",
     "{\"tools\":[" WEATHER "," CLOCK "],\"messages\":[{\"role\":\"system\",\"content\":\" Be brief.\\n\"},"
     "{\"role\":\"user\",\"content\":\"Weather in Paris?\"}]}",
     TOOLS_OPEN "\n" WEATHER_TOJSON "\n" CLOCK_TOJSON "\n</tools>" INSTRUCTIONS "\n\nBe brief.<|im_end|>\n"
                "<|im_start|>user\nWeather in Paris?<|im_end|>\n" NO_THINK},
    {"tools_without_system",
     "{\"tools\":[" WEATHER "],\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}]}",
     TOOLS_OPEN "\n" WEATHER_TOJSON "\n</tools>" INSTRUCTIONS "<|im_end|>\n"
                "<|im_start|>user\nWeather in Paris?<|im_end|>\n" NO_THINK},
    {"tools_with_blank_system", /* an empty system content adds nothing after the instructions */
     "{\"tools\":[" WEATHER "],\"messages\":[{\"role\":\"system\",\"content\":\"  \"},"
     "{\"role\":\"user\",\"content\":\"Hi\"}]}",
     TOOLS_OPEN "\n" WEATHER_TOJSON "\n</tools>" INSTRUCTIONS "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n" NO_THINK},
    {"round_trip",
     "{\"tools\":[" WEATHER "],\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"I should ask the tool.\",\"tool_calls\":["
     CALL("call_1", "get_weather", "{\\\"city\\\": \\\"Paris\\\"}") "]},"
     "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"{\\\"sky\\\": \\\"sunny\\\", \\\"c\\\": 21}\"}]}",
     TOOLS_OPEN "\n" WEATHER_TOJSON "\n</tools>" INSTRUCTIONS "<|im_end|>\n"
                "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
                "<|im_start|>assistant\n<think>\nI should ask the tool.\n</think>\n\n"
                "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
                "<|im_end|>\n<|im_start|>user\n<tool_response>\n{\"sky\": \"sunny\", \"c\": 21}\n</tool_response>"
                "<|im_end|>\n" NO_THINK},
    {"two_calls_earlier_turn",
     "{\"tools\":[" WEATHER "," CLOCK "],\"messages\":[{\"role\":\"system\",\"content\":\"You help.\"},"
     "{\"role\":\"user\",\"content\":\"Weather and time in Oslo?\"},"
     "{\"role\":\"assistant\",\"content\":\"Checking both.\",\"tool_calls\":["
     CALL("a", "get_weather", "{\\\"city\\\":\\\"Oslo\\\",\\\"unit\\\":\\\"celsius\\\"}") ","
     CALL("b", "local_time", "{\\\"zone\\\":\\\"Europe/Oslo\\\",\\\"offset\\\":1,\\\"dst\\\":false}") "]},"
     "{\"role\":\"tool\",\"tool_call_id\":\"a\",\"content\":\"rain, 9 C\"},"
     "{\"role\":\"tool\",\"tool_call_id\":\"b\",\"content\":\"14:05\"},"
     "{\"role\":\"assistant\",\"content\":\"Rain, 9 C; it is 14:05.\"},"
     "{\"role\":\"user\",\"content\":\"Thanks! And Rome?\"}]}",
     TOOLS_OPEN "\n" WEATHER_TOJSON "\n" CLOCK_TOJSON "\n</tools>" INSTRUCTIONS "\n\nYou help.<|im_end|>\n"
                "<|im_start|>user\nWeather and time in Oslo?<|im_end|>\n"
                "<|im_start|>assistant\nChecking both.\n\n"
                "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
                "<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>\n"
                "<tool_call>\n<function=local_time>\n<parameter=zone>\nEurope/Oslo\n</parameter>\n"
                "<parameter=offset>\n1\n</parameter>\n<parameter=dst>\nfalse\n</parameter>\n</function>\n</tool_call>"
                "<|im_end|>\n<|im_start|>user\n<tool_response>\nrain, 9 C\n</tool_response>\n"
                "<tool_response>\n14:05\n</tool_response><|im_end|>\n"
                "<|im_start|>assistant\nRain, 9 C; it is 14:05.<|im_end|>\n"
                "<|im_start|>user\nThanks! And Rome?<|im_end|>\n" NO_THINK},
    {"calls_after_reasoning_with_content", /* no arguments; a multi-line string; a nested value as tojson writes it */
     "{\"tools\":[" CLOCK "],\"messages\":[{\"role\":\"user\",\"content\":\"Time?\"},"
     "{\"role\":\"assistant\",\"content\":\"One moment.\",\"reasoning_content\":\"Use local_time.\",\"tool_calls\":["
     CALL("c", "local_time", "{}") ","
     CALL("d", "local_time", "{\\\"zone\\\":\\\"line 1\\\\nline 2\\\",\\\"extra\\\":{\\\"a\\\":[1,null],\\\"b\\\":\\\"\xc3\xa9\\\"}}")
     "]},{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":\"09:00\"}]}",
     TOOLS_OPEN "\n" CLOCK_TOJSON "\n</tools>" INSTRUCTIONS "<|im_end|>\n<|im_start|>user\nTime?<|im_end|>\n"
                "<|im_start|>assistant\n<think>\nUse local_time.\n</think>\n\nOne moment.\n\n"
                "<tool_call>\n<function=local_time>\n</function>\n</tool_call>\n"
                "<tool_call>\n<function=local_time>\n<parameter=zone>\nline 1\nline 2\n</parameter>\n"
                "<parameter=extra>\n{\"a\": [1, null], \"b\": \"\xc3\xa9\"}\n</parameter>\n</function>\n</tool_call>"
                "<|im_end|>\n<|im_start|>user\n<tool_response>\n09:00\n</tool_response><|im_end|>\n" NO_THINK},
};

static void test_renderings(void) {
    for (size_t i = 0; i < sizeof render_cases / sizeof render_cases[0]; i++) {
        const render_case *c = &render_cases[i];
        /* thinking off, as a forced call renders; the think rules are test_chat_template's */
        char body[8192];
        snprintf(body, sizeof body, "{\"chat_template_kwargs\":{\"enable_thinking\":false},%s", c->body + 1);
        server_request r;
        server_error e = {0};
        int rc = server_request_parse(&r, SERVER_ENDPOINT_CHAT, body, strlen(body), NULL, &e);
        CHECK_MSG(rc == 0, "case %s: %s", c->name, e.message);
        if (rc) continue;
        char *got = render(&r);
        CHECK_MSG(got && !strcmp(got, c->want), "case %s:\n[%s]\nexpected:\n[%s]", c->name, got ? got : "(null)",
                  c->want);
        clover_free(got);
        server_request_free(&r);
    }
}

static char *names[] = {"get_weather", "local_time"};
static char *schemas[] = {WEATHER, CLOCK};

/* Parses and checks the result: rc, and for rc 1 the calls ("name|args" each) and the content length. */
static void parse_is(const char *text, int want_rc, const char *const *want_calls, size_t want_n,
                     size_t want_content) {
    tool_call_out *calls = NULL;
    size_t n = 0, content = 0;
    int rc = tool_calls_parse(text, strlen(text), names, schemas, 2, &calls, &n, &content);
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

#define P(k, v) "<parameter=" k ">\n" v "\n</parameter>\n"

static void test_parse(void) {
    const char *one[] = {"get_weather|{\"city\": \"Paris\"}"};
    parse_is("<tool_call>\n<function=get_weather>\n" P("city", "Paris") "</function>\n</tool_call>", 1, one, 1, 0);
    /* no newlines inside the tags; content before it, trimmed */
    parse_is("Let me look.\n\n<tool_call><function=get_weather><parameter=city>Paris</parameter></function>"
             "</tool_call>\n",
             1, one, 1, 12);
    const char *two[] = {"get_weather|{\"city\": \"Oslo\", \"unit\": \"celsius\"}", "local_time|{}"};
    parse_is("<tool_call>\n<function=get_weather>\n" P("city", "Oslo") P("unit", "celsius") "</function>\n</tool_call>\n"
             "<tool_call>\n<function=local_time>\n</function>\n</tool_call>",
             1, two, 2, 0);
    /* declared types: a string stays a string even when it reads as JSON; others are JSON when they parse */
    const char *typed[] = {"local_time|{\"zone\": \"42\", \"offset\": -3, \"dst\": true}"};
    parse_is("<tool_call>\n<function=local_time>\n" P("zone", "42") P("offset", "-3") P("dst", "true")
             "</function>\n</tool_call>",
             1, typed, 1, 0);
    const char *quoted[] = {"get_weather|{\"city\": \"\\\"Paris\\\"\"}"};
    parse_is("<tool_call>\n<function=get_weather>\n" P("city", "\"Paris\"") "</function>\n</tool_call>", 1, quoted, 1,
             0);
    /* undeclared parameters: JSON when it parses, else the text; a multi-line string; a value "not an int" */
    const char *loose[] = {"local_time|{\"extra\": {\"a\": [1, null]}, \"note\": \"not json \xc3\xa9\", "
                           "\"zone\": \"line 1\\nline 2\\n\", \"offset\": \"soon\"}"};
    parse_is("<tool_call>\n<function=local_time>\n" P("extra", "{\"a\": [1,null]}") P("note", "not json \xc3\xa9")
                 P("zone", "line 1\nline 2\n") P("offset", "soon") "</function>\n</tool_call>",
             1, loose, 1, 0);
    parse_is("Just an answer.", 0, NULL, 0, 0);
    parse_is("", 0, NULL, 0, 0);
    /* malformed: plain content */
    parse_is("<tool_call>\n<function=unknown_fn>\n</function>\n</tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call>\n<function=>\n</function>\n</tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call>\n<function=local_time>\n</tool_call>", -1, NULL, 0, 0); /* no </function> */
    parse_is("<tool_call>\n<function=local_time>\n<parameter=zone>\nUTC\n</function>\n</tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call>\n<function=local_time>\n" P("zone", "UTC") P("zone", "CET") "</function>\n</tool_call>", -1,
             NULL, 0, 0); /* a parameter twice */
    parse_is("<tool_call>\n<function=local_time>\nsome words\n</function>\n</tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call>\n<function=local_time>\n</function>\ntrailing\n</tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call>\n<function=local_time>\n</function>\n", -1, NULL, 0, 0); /* not closed */
    parse_is("<tool_call>\n<function=local_time>\n</function>\n</tool_call> and then text", -1, NULL, 0, 0);
    parse_is("<tool_call><tool_call><function=local_time></function></tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call></tool_call>", -1, NULL, 0, 0);
    /* Qwen3's JSON form is not Qwen3.5's: content */
    parse_is("<tool_call>\n{\"name\": \"local_time\", \"arguments\": {}}\n</tool_call>", -1, NULL, 0, 0);
    parse_is("<tool_call>\n<function=local_time>\n</function>\n</tool_call>\n<tool_call>\n<function=local_", -1, NULL,
             0, 0);
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
        int rc = tool_gate_finish(&g, names, schemas, 2, &calls, &nc, &d, &dl);
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
    gate_case(NULL, "Checking.\n<tool_call>\n<function=local_time>\n</function>\n</tool_call>", 1, "Checking.");
    gate_case(NULL, "Checking.\n<tool_call>\n<function=broken</tool_call>", -1,
              "Checking.\n<tool_call>\n<function=broken</tool_call>");
    /* the forced openings: required leaves the name to the model, a named choice writes the tag */
    gate_case("<tool_call>\n<function=", "local_time>\n" P("zone", "UTC") "</function>\n</tool_call>", 1, "");
    gate_case("<tool_call>\n<function=local_time>\n", P("offset", "2") "</function>\n</tool_call>", 1, "");
    gate_case("<tool_call>\n<function=", "gibberish", -1, "<tool_call>\n<function=gibberish");
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
    RUN(test_renderings);
    RUN(test_parse);
    RUN(test_gate);
    RUN(test_bad_requests);
    return TEST_EXIT();
}
