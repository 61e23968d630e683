/*
 * test_server_parse.c: the server's request parser (tools/server/request_parse)
 * on hand-written bodies: every field of a full request lands where it
 * should, and each kind of bad body is answered with the status, param and
 * code OpenAI's clients expect.
 */
#include <stdint.h>
#include <string.h>

#include "clover.h"
#include "request_parse.h"
#include "test.h"

static void test_full_chat_request(void) {
    const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"be brief\"},"
                       "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
                       "\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"r\"}],"
                       "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_tokens\":5,"
                       "\"max_completion_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,\"top_k\":-1,\"seed\":-1,"
                       "\"stop\":[\"x\",\"yz\"],\"presence_penalty\":-2,\"frequency_penalty\":1.5,\"n\":1,"
                       "\"threshold\":0.25,\"block_size\":4,\"ignore_eos\":true,\"rule\":\"causal\","
                       "\"chat_template_kwargs\":{\"enable_thinking\":false},\"user\":\"ignored\"}";
    server_request r;
    server_error e;
    CHECK(server_request_parse(&r, SERVER_ENDPOINT_CHAT, body, strlen(body), NULL, &e) == 0);
    CHECK(!strcmp(r.model, "m"));
    CHECK_EQ_INT(r.n_messages, 3);
    CHECK(!strcmp(r.messages[0].role, "system") && !strcmp(r.messages[0].content, "be brief"));
    CHECK(!strcmp(r.messages[1].content, "a\nb") && !r.messages[1].reasoning_content);
    CHECK(!strcmp(r.messages[2].content, "") && !strcmp(r.messages[2].reasoning_content, "r"));
    CHECK(r.stream && r.include_usage);
    CHECK(r.has_max_tokens && r.max_tokens == 7);
    CHECK(r.has_temperature && r.temperature == 0.5f && r.has_top_p && r.top_p == 0.9f);
    CHECK(r.has_top_k && r.top_k == 0);
    CHECK(r.has_seed && r.seed == UINT64_MAX);
    CHECK_EQ_INT(r.n_stops, 2);
    CHECK(!strcmp(r.stops[1], "yz"));
    CHECK(r.presence_penalty == -2.0f && r.frequency_penalty == 1.5f);
    CHECK(r.has_threshold && r.threshold == 0.25f && r.block_size == 4 && r.ignore_eos);
    CHECK(r.rule == CLOVER_RULE_CAUSAL);
    CHECK(r.enable_thinking == 0);
    server_request_free(&r);
}

static void test_completion_prompts(void) {
    server_request r;
    server_error e;
    const char *a = "{\"prompt\":[\"hello\"],\"stop\":\"\\n\"}";
    CHECK(server_request_parse(&r, SERVER_ENDPOINT_COMPLETION, a, strlen(a), NULL, &e) == 0);
    CHECK(r.prompt && !strcmp(r.prompt, "hello") && r.n_stops == 1 && !strcmp(r.stops[0], "\n"));
    CHECK(r.enable_thinking == 1 && !r.stream && !r.has_max_tokens);
    server_request_free(&r);
    const char *b = "{\"prompt\":[[1,2,3]]}";
    CHECK(server_request_parse(&r, SERVER_ENDPOINT_COMPLETION, b, strlen(b), NULL, &e) == 0);
    CHECK(!r.prompt && r.n_prompt_ids == 3 && r.prompt_ids[2] == 3);
    server_request_free(&r);
}

/* Regression (found by fuzz_server_request): logprobs options must not leak into the length cap. */
static void test_logprobs_leave_max_tokens_unset(void) {
    server_request r;
    server_error e;
    const char *a = "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"logprobs\":true,\"top_logprobs\":3}";
    CHECK(server_request_parse(&r, SERVER_ENDPOINT_CHAT, a, strlen(a), NULL, &e) == 0);
    CHECK(r.logprobs && r.top_logprobs == 3 && !r.has_max_tokens);
    server_request_free(&r);
    const char *b = "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"top_logprobs\":0}";
    CHECK(server_request_parse(&r, SERVER_ENDPOINT_CHAT, b, strlen(b), NULL, &e) == 0);
    CHECK(r.top_logprobs == 0 && !r.has_max_tokens);
    server_request_free(&r);
    const char *c = "{\"prompt\":\"x\",\"logprobs\":2}";
    CHECK(server_request_parse(&r, SERVER_ENDPOINT_COMPLETION, c, strlen(c), NULL, &e) == 0);
    CHECK(r.logprobs && r.top_logprobs == 2 && !r.has_max_tokens);
    server_request_free(&r);
}

typedef struct bad_case {
    server_endpoint ep;
    const char *body;
    int status;
    const char *param; /* expected param ("" for none) */
    const char *code;
} bad_case;

static void test_bad_requests(void) {
    static const bad_case cases[] = {
        {SERVER_ENDPOINT_CHAT, "{", 400, "", "invalid_json"},
        {SERVER_ENDPOINT_CHAT, "", 400, "", "invalid_json"},
        {SERVER_ENDPOINT_CHAT, "[1]", 400, "body", "invalid_type"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":\"hi\"}", 400, "messages", "invalid_type"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[]}", 400, "messages", "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{}", 400, "messages", "missing_required_parameter"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", 400, "messages[0].role",
         "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "messages[0].content",
         "invalid_type"},
        {SERVER_ENDPOINT_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]}", 400,
         "messages[0].content[0]", "unsupported_parameter"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-1}", 400,
         "max_tokens", "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"5\"}", 400,
         "max_tokens", "invalid_type"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1e400}", 400, "",
         "invalid_json"},
        {SERVER_ENDPOINT_CHAT,
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":123456789012345678901234}", 400,
         "max_tokens", "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":18446744073709551616}",
         400, "seed", "invalid_type"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":4.5}", 400,
         "max_tokens", "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":2.5}", 400,
         "temperature", "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":-0.1}", 400, "top_p",
         "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":9}", 400, "n",
         "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}", 400,
         "logprobs", "invalid_type"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":21,"
                               "\"logprobs\":true}",
         400, "top_logprobs", "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", 400,
         "top_logprobs", "invalid_value"},
        {SERVER_ENDPOINT_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":6}", 400, "logprobs", "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",\"b\",\"c\","
                               "\"d\",\"e\"]}",
         400, "stop", "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":\"\"}", 400, "stop",
         "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"threshold\":1.5}", 400,
         "threshold", "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"block_size\":0}", 400,
         "block_size", "invalid_value"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"rule\":\"causal_fallback\"}",
         400, "rule", "invalid_value"},
        {SERVER_ENDPOINT_COMPLETION, "{\"prompt\":\"x\",\"rule\":2}", 400, "rule", "invalid_type"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}", 400, "stream",
         "invalid_type"},
        {SERVER_ENDPOINT_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", 400, "",
         "invalid_json"},
        {SERVER_ENDPOINT_COMPLETION, "{\"prompt\":\"\"}", 400, "prompt", "invalid_value"},
        {SERVER_ENDPOINT_COMPLETION, "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt", "unsupported_parameter"},
        {SERVER_ENDPOINT_COMPLETION, "{\"prompt\":[[1],[2]]}", 400, "prompt", "unsupported_parameter"},
        {SERVER_ENDPOINT_COMPLETION, "{\"prompt\":[1,-2]}", 400, "prompt[1]", "invalid_type"},
        {SERVER_ENDPOINT_COMPLETION, "{\"prompt\":\"a\",\"echo\":true}", 400, "echo", "unsupported_parameter"},
        {SERVER_ENDPOINT_COMPLETION, "{\"prompt\":\"a\",\"model\":7}", 400, "model", "invalid_type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        server_request r;
        server_error e;
        memset(&e, 0, sizeof e);
        int rc = server_request_parse(&r, c->ep, c->body, strlen(c->body), NULL, &e);
        CHECK_MSG(rc == -1, "case %zu: %s parsed", i, c->body);
        if (rc == 0) {
            server_request_free(&r);
            continue;
        }
        CHECK_MSG(e.status == c->status, "case %zu: status %d", i, e.status);
        CHECK_MSG(!strcmp(e.param, c->param), "case %zu: param '%s', expected '%s'", i, e.param, c->param);
        CHECK_MSG(e.code && !strcmp(e.code, c->code), "case %zu: code %s, expected %s", i, e.code ? e.code : "-",
                  c->code);
        CHECK_MSG(e.message[0] && strchr(e.message, '\n') == NULL, "case %zu: message '%s'", i, e.message);
        CHECK(r.messages == NULL && r.prompt == NULL && r.model == NULL);
    }
}

/* What JSON allows and jansson's defaults do not: NUL in a string (read as U+FFFD), integers past int64 (a seed
 * up to 2^64 - 1 exact; a number elsewhere kept as a number). */
static void test_wide_json(void) {
    server_request r;
    server_error e;
    const char *nul = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000b\"}],\"stop\":\"\\u0000\"}";
    CHECK(server_request_parse(&r, SERVER_ENDPOINT_CHAT, nul, strlen(nul), NULL, &e) == 0);
    CHECK(!strcmp(r.messages[0].content, "a\xEF\xBF\xBD" "b") && !strcmp(r.stops[0], "\xEF\xBF\xBD"));
    server_request_free(&r);
    const char *seed = "{\"prompt\":\"x\",\"seed\":18446744073709551615,\"user\":{\"seed\":99999999999999999999}}";
    CHECK(server_request_parse(&r, SERVER_ENDPOINT_COMPLETION, seed, strlen(seed), NULL, &e) == 0);
    CHECK(r.has_seed && r.seed == UINT64_MAX);
    server_request_free(&r);
    const char *neg = "{\"prompt\":\"x\",\"seed\":-9223372036854775808}";
    CHECK(server_request_parse(&r, SERVER_ENDPOINT_COMPLETION, neg, strlen(neg), NULL, &e) == 0);
    CHECK(r.has_seed && r.seed == 0x8000000000000000ull);
    server_request_free(&r);
}

int main(void) {
    RUN(test_full_chat_request);
    RUN(test_completion_prompts);
    RUN(test_logprobs_leave_max_tokens_unset);
    RUN(test_bad_requests);
    RUN(test_wide_json);
    return TEST_EXIT();
}
