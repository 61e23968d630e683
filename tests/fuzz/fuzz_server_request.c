/*
 * fuzz_server_request.c: libFuzzer target of the server's request parsing
 * and validation (tools/server/request_parse): the first byte picks the
 * endpoint ('p': /v1/completions, anything else: /v1/chat/completions), the
 * rest is the body. Any input either parses or is refused with an
 * OpenAI-shaped error (a 4xx/5xx status, a type, a one-line message, which
 * also renders as the JSON error body); a parsed request keeps its promises
 * (roles, ranges, stop sequences, a non-empty prompt). The prompt text of a
 * parsed request is then run through the answer assembly with the request's
 * stop sequences, fed whole and in 3-byte pieces at character boundaries:
 * both must give the same answer. A broken promise traps.
 *
 * Seeds: tests/fuzz/corpus/fuzz_server_request/ (chat and completion bodies
 * with every option).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "answer_stream.h"
#include "request_parse.h"
#include "response.h"

#define REQUIRE(cond)                  \
    do {                               \
        if (!(cond)) __builtin_trap(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(const server_error *e) {
    REQUIRE(e->status >= 400 && e->status < 600 && e->type && e->message[0]);
    REQUIRE(memchr(e->message, '\0', sizeof e->message) && !strchr(e->message, '\n'));
    size_t len = 0;
    char *body = response_error_body(e, &len);
    REQUIRE(body && len > 0 && strstr(body, "\"error\""));
    free(body);
}

static void check_request(const server_request *r) {
    if (r->endpoint == SERVER_ENDPOINT_CHAT) {
        REQUIRE(r->n_messages >= 1 && r->messages);
        for (size_t i = 0; i < r->n_messages; i++) {
            const char *role = r->messages[i].role;
            REQUIRE(role && r->messages[i].content);
            REQUIRE(!strcmp(role, "system") || !strcmp(role, "user") || !strcmp(role, "assistant") ||
                    !strcmp(role, "tool"));
        }
        REQUIRE(r->enable_thinking == 0 || r->enable_thinking == 1);
    } else {
        REQUIRE((r->prompt && r->prompt_len > 0 && strlen(r->prompt) == r->prompt_len) ||
                (!r->prompt && r->n_prompt_ids > 0));
        for (size_t i = 0; i < r->n_prompt_ids; i++)
            REQUIRE(r->prompt_ids[i] >= 0);
    }
    REQUIRE(r->n_stops <= SERVER_MAX_STOPS);
    for (size_t i = 0; i < r->n_stops; i++)
        REQUIRE(r->stops[i] && strlen(r->stops[i]) >= 1 && strlen(r->stops[i]) <= SERVER_MAX_STOP_LEN);
    REQUIRE(!r->has_max_tokens || (r->max_tokens >= 1 && r->max_tokens <= SERVER_MAX_TOKENS_CAP));
    REQUIRE(!r->has_temperature || (r->temperature >= 0.0f && r->temperature <= 2.0f));
    REQUIRE(!r->has_top_p || (r->top_p >= 0.0f && r->top_p <= 1.0f));
    REQUIRE(!r->has_top_k || r->top_k >= 0);
    REQUIRE(!r->has_threshold || (r->threshold >= 0.0f && r->threshold <= 1.0f));
    REQUIRE(!r->has_block_size || r->block_size >= 1);
    REQUIRE(!r->has_presence_penalty || (r->presence_penalty >= -2.0f && r->presence_penalty <= 2.0f));
    REQUIRE(!r->has_frequency_penalty || (r->frequency_penalty >= -2.0f && r->frequency_penalty <= 2.0f));
}

/* The answer assembly over text: whole, then in pieces of about 3 bytes cut at characters. */
static void check_answer(const server_request *r, const char *text, size_t n, int split) {
    answer_stream whole, parts;
    answer_stream_init(&whole, r->stops, r->n_stops, split);
    answer_stream_init(&parts, r->stops, r->n_stops, split);
    REQUIRE(answer_stream_push(&whole, text, n) == 0);
    answer_stream_finish(&whole);
    size_t rn = 0, cn = 0;
    for (size_t at = 0; at < n;) {
        size_t end = at + 3 < n ? at + 3 : n;
        while (end < n && ((unsigned char)text[end] & 0xC0) == 0x80)
            end++;
        REQUIRE(answer_stream_push(&parts, text + at, end - at) == 0);
        rn += parts.reasoning_len;
        cn += parts.content_len;
        at = end;
    }
    answer_stream_finish(&parts);
    rn += parts.reasoning_len;
    cn += parts.content_len;
    REQUIRE(whole.len == parts.len && whole.stopped == parts.stopped);
    REQUIRE(whole.len <= n && (!whole.len || !memcmp(whole.raw, text, whole.len)));
    REQUIRE(rn == whole.reasoning_total && cn == whole.content_total);
    REQUIRE(parts.reasoning_total == rn && parts.content_total == cn);
    REQUIRE(!rn || !memcmp(whole.raw + whole.reasoning_off, parts.raw + parts.reasoning_off, rn));
    REQUIRE(!cn || !memcmp(whole.raw + whole.content_off, parts.raw + parts.content_off, cn));
    REQUIRE(whole.reasoning_off + rn <= whole.len && whole.content_off + cn <= whole.len);
    answer_stream_free(&whole);
    answer_stream_free(&parts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    server_endpoint ep = data[0] == 'p' ? SERVER_ENDPOINT_COMPLETION : SERVER_ENDPOINT_CHAT;
    server_request r;
    server_error e;
    memset(&e, 0, sizeof e);
    int rc = server_request_parse(&r, ep, (const char *)data + 1, size - 1, NULL, &e);
    if (rc != 0) {
        REQUIRE(rc == -1);
        check_error(&e);
        return 0;
    }
    check_request(&r);
    if (r.prompt) check_answer(&r, r.prompt, r.prompt_len, 0);
    for (size_t i = 0; i < r.n_messages; i++)
        check_answer(&r, r.messages[i].content, strlen(r.messages[i].content), 1);
    server_request_free(&r);
    return 0;
}
