/*
 * request_parse.h: an OpenAI request body (JSON) -> a validated
 * server_request, with no model and no I/O, so that libFuzzer can drive it
 * (tests/fuzz/fuzz_server_request.c).
 *
 * Everything a client can get wrong in the body alone is checked here and
 * answered with an OpenAI-shaped error (HTTP status, type, param, code and
 * one line of message). What needs the model (the prompt's length against
 * the context, the block size against the record) is checked later by
 * request_prepare.c.
 */
#ifndef CLOVER_SERVER_REQUEST_PARSE_H
#define CLOVER_SERVER_REQUEST_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define SERVER_MAX_STOPS 4       /* as OpenAI: up to 4 stop sequences */
#define SERVER_MAX_STOP_LEN 256  /* bytes per stop sequence */
#define SERVER_MAX_TOKENS_CAP (1u << 30)

typedef enum server_endpoint {
    SERVER_ENDPOINT_CHAT = 0,       /* POST /v1/chat/completions */
    SERVER_ENDPOINT_COMPLETION = 1, /* POST /v1/completions */
} server_endpoint;

/* An error answered to the client: {"error": {message, type, param, code}}. */
typedef struct server_error {
    int status;       /* HTTP status: 400, 404, 413, 429, 500, 503 */
    const char *type; /* "invalid_request_error", "not_found_error", ... (static) */
    const char *code; /* a short code (static) or NULL */
    char param[128];  /* the offending field ("messages[2].content") or "" */
    char message[512];
} server_error;

/* Fills e and returns -1 (so callers can `return server_error_set(...)`). */
int server_error_set(server_error *e, int status, const char *type, const char *code, const char *param,
                     const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

typedef struct server_tool_call {
    char *name;      /* function.name */
    char *arguments; /* function.arguments: a JSON text, as given */
} server_tool_call;

typedef struct server_message {
    char *role;              /* "system", "user", "assistant" or "tool" ("developer" becomes "system") */
    char *content;           /* never NULL; text parts joined with "\n" */
    char *reasoning_content; /* assistant turns only; NULL when absent */
    server_tool_call *tool_calls; /* assistant turns: the calls it made, [n_tool_calls] */
    size_t n_tool_calls;
} server_message;

#define SERVER_MAX_TOOLS 128
typedef enum server_tool_choice {
    SERVER_TOOL_AUTO = 0,     /* the model may call a declared tool (the default with tools) */
    SERVER_TOOL_NONE = 1,     /* no call: "<tool_call>" cannot be generated */
    SERVER_TOOL_REQUIRED = 2, /* a call: the answer opens with "<tool_call>\n<function=" */
    SERVER_TOOL_NAMED = 3,    /* a call of tool_choice_name: "<tool_call>\n<function=NAME>\n" is forced */
} server_tool_choice;

typedef struct server_request {
    server_endpoint endpoint;
    char *model; /* as given; NULL when absent */

    /* chat */
    server_message *messages; /* [n_messages], n_messages >= 1 */
    size_t n_messages;
    int enable_thinking; /* 1 unless enable_thinking / chat_template_kwargs.enable_thinking is false */

    /* completions: either text or token ids */
    char *prompt;        /* NUL-terminated; NULL when prompt_ids are given */
    size_t prompt_len;
    int32_t *prompt_ids; /* [n_prompt_ids], each >= 0 (checked against the vocabulary later) */
    size_t n_prompt_ids;

    /* tools (chat): each declared tool as the template renders it (tojson) and its function's name */
    char **tools_json; /* [n_tools] */
    char **tool_names; /* [n_tools] */
    size_t n_tools;
    server_tool_choice tool_choice;
    char *tool_choice_name; /* SERVER_TOOL_NAMED */

    uint32_t n;        /* choices: 1..max_n (n) */
    int logprobs;      /* chat: logprobs true; completions: logprobs >= 0 given */
    uint32_t top_logprobs; /* chat: top_logprobs; completions: the logprobs integer */

    int stream;
    int include_usage; /* stream_options.include_usage */
    int include_passes; /* stream_options.clover_passes: denoising pass events (tools/server/webui) */

    int has_max_tokens;
    uint64_t max_tokens; /* 1..SERVER_MAX_TOKENS_CAP (max_completion_tokens wins over max_tokens) */
    int has_temperature, has_top_p, has_top_k, has_seed;
    float temperature; /* [0, 2] */
    float top_p;       /* [0, 1] */
    int32_t top_k;     /* >= 0 */
    uint64_t seed;     /* any JSON integer (a negative one wraps, as two's complement) */
    int has_presence_penalty, has_frequency_penalty;
    float presence_penalty, frequency_penalty; /* [-2, 2] */

    char *stops[SERVER_MAX_STOPS]; /* non-empty, at most SERVER_MAX_STOP_LEN bytes each */
    size_t n_stops;

    /* Clover extensions */
    int has_threshold, has_block_size;
    float threshold;     /* [0, 1] */
    uint32_t block_size; /* >= 1 */
    int ignore_eos;
    int lossless; /* lossless block diffusion: the answer is autoregressive decoding's */
    int rule;     /* block diffusion's decoding rule: 0 the model's, else CLOVER_RULE_THRESHOLD or _CAUSAL */
    char *json_schema; /* response_format (response_format.h): the schema text, or NULL for free text */
} server_request;

#define SERVER_MAX_TOP_LOGPROBS 20 /* as OpenAI (chat); completions allow 5 */
typedef struct server_parse_options {
    size_t max_stop_len; /* 0: SERVER_MAX_STOP_LEN */
    uint32_t max_n;      /* the largest n (--max-n); 0: 8 */
} server_parse_options;

/* Parses body[0..len) for the endpoint. Returns 0 with req filled (release
 * with server_request_free), or -1 with err filled and req empty. */
int server_request_parse(server_request *req, server_endpoint endpoint, const char *body, size_t len,
                         const server_parse_options *opts, server_error *err);
void server_request_free(server_request *req);

#endif
