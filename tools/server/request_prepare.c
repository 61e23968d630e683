/*
 * request_prepare.c: defaults follow the engine where OpenAI leaves room:
 * an omitted temperature is greedy (reproducible answers), an omitted seed
 * is a fresh random one (reported back in the "clover" object, where a
 * negative seed a client gave shows as given), an omitted
 * max_tokens is the rest of the context for chat and 16 for completions
 * (OpenAI's legacy default). Special tokens in the rendered chat are parsed
 * as such (the template writes them); a completions prompt is tokenized the
 * same way so that hand-written ChatML works. A chat's prompt snapshot is
 * taken where its generation prompt starts; completions take none.
 */
#include "request_prepare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COMPLETION_DEFAULT_MAX_TOKENS 16
#define SEED_MASK ((1ull << 48) - 1) /* a fresh seed stays a small positive JSON integer */

static int engine_error(server_error *e, const char *param, const clover_error *err) {
    int invalid = err->code == CLOVER_E_INVALID || err->code == CLOVER_E_UNSUPPORTED;
    return server_error_set(e, invalid ? 400 : 500, invalid ? "invalid_request_error" : "server_error", NULL, param,
                            "%s", err->message);
}

/* The next turn renders this one's generation prompt as the assistant's
 * answer (its reasoning dropped), so the part it keeps ends where the last
 * "<|im_start|>" (the generation prompt's) begins: the engine keeps a
 * snapshot of the state there (a special token is tokenized on its own, so
 * the ids before it are exactly those of the conversation so far). */
static void snapshot_before_generation_prompt(const prepare_config *c, job *j) {
    int32_t open = clover_token_id(c->model, "<|im_start|>");
    size_t at = 0;
    for (size_t i = j->n_prompt; open >= 0 && i-- > 0;)
        if (j->prompt[i] == open) {
            at = i;
            break;
        }
    if (at > 0)
        j->params.snapshot_at = at;
    else
        j->params.no_snapshot = 1;
}

/* A forced call's opening (tool_choice required or named): the answer
 * continues it, and the parser reads it as the answer's start. Required
 * leaves the function's name to the model; named writes its whole tag. */
static char *forced_opening(const server_request *r) {
    static const char open[] = "<tool_call>\n<function=";
    if (r->tool_choice == SERVER_TOOL_REQUIRED) return strdup(open);
    if (r->tool_choice != SERVER_TOOL_NAMED) return NULL;
    size_t n = strlen(open) + strlen(r->tool_choice_name) + 4;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s>\n", open, r->tool_choice_name);
    return s;
}

/* The tool side of a chat: what the template renders, what the answer is parsed for. */
static int chat_tools(const server_request *r, const prepare_config *c, job *j, clover_chat_options *o,
                      clover_chat_tool_call **calls, server_error *e) {
    size_t n_calls = 0;
    for (size_t i = 0; i < r->n_messages; i++)
        n_calls += r->messages[i].n_tool_calls;
    *calls = calloc(n_calls ? n_calls : 1, sizeof **calls);
    if (!*calls) return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < r->n_messages; i++)
        for (size_t t = 0; t < r->messages[i].n_tool_calls; t++)
            (*calls)[k++] = (clover_chat_tool_call){i, r->messages[i].tool_calls[t].name,
                                                    r->messages[i].tool_calls[t].arguments};
    o->tool_calls = *calls;
    o->n_tool_calls = n_calls;
    o->tools = (const char *const *)r->tools_json;
    o->n_tools = r->n_tools;
    if (!r->n_tools) return 0;
    if (r->tool_choice == SERVER_TOOL_NONE) { /* the call's opening tag cannot be generated */
        int32_t id = clover_token_id(c->model, "<tool_call>");
        if (id >= 0) {
            j->suppress[0] = id;
            j->params.suppress_ids = j->suppress;
            j->params.n_suppress_ids = 1;
        }
        return 0;
    }
    j->tools_on = 1;
    j->tool_names = calloc(r->n_tools, sizeof *j->tool_names);
    j->tool_schemas = calloc(r->n_tools, sizeof *j->tool_schemas);
    if (!j->tool_names || !j->tool_schemas) return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < r->n_tools; i++) {
        j->tool_names[i] = strdup(r->tool_names[i]);
        j->tool_schemas[i] = strdup(r->tools_json[i]);
        j->n_tool_names = i + 1;
        if (!j->tool_names[i] || !j->tool_schemas[i])
            return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    if (r->tool_choice == SERVER_TOOL_REQUIRED || r->tool_choice == SERVER_TOOL_NAMED) {
        j->tool_prefix = forced_opening(r);
        if (!j->tool_prefix) return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        o->enable_thinking = 0; /* the call opens right after the generation prompt: no reasoning */
    }
    return 0;
}

static int chat_prompt(const server_request *r, const prepare_config *c, job *j, server_error *e) {
    clover_chat_message *msgs = calloc(r->n_messages, sizeof *msgs);
    if (!msgs) return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < r->n_messages; i++)
        msgs[i] = (clover_chat_message){.role = r->messages[i].role, .content = r->messages[i].content,
                                        .reasoning_content = r->messages[i].reasoning_content};
    clover_chat_options o;
    clover_chat_options_init(&o);
    o.add_generation_prompt = 1;
    o.enable_thinking = r->enable_thinking;
    clover_chat_tool_call *calls = NULL;
    if (chat_tools(r, c, j, &o, &calls, e)) {
        free(msgs);
        free(calls);
        return -1;
    }
    char *text = NULL;
    clover_error err = {0};
    int rc = clover_chat_render(c->model, msgs, r->n_messages, &o, &text, &err);
    free(msgs);
    free(calls);
    if (rc) return engine_error(e, "messages", &err);
    if (j->tool_prefix) {
        size_t n = strlen(text), m = strlen(j->tool_prefix);
        char *both = malloc(n + m + 1);
        if (both) {
            memcpy(both, text, n);
            memcpy(both + n, j->tool_prefix, m + 1);
        }
        clover_free(text);
        if (!both) return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        rc = clover_tokenize(c->model, both, n + m, 1, &j->prompt, &j->n_prompt, &err);
        free(both);
    } else {
        rc = clover_tokenize(c->model, text, strlen(text), 1, &j->prompt, &j->n_prompt, &err);
        clover_free(text);
    }
    if (rc) return engine_error(e, "messages", &err);
    snapshot_before_generation_prompt(c, j);
    return 0;
}

static int completion_prompt(const server_request *r, const prepare_config *c, job *j, server_error *e) {
    clover_error err = {0};
    j->params.no_snapshot = 1; /* a continued completion extends the committed ids: nothing re-rendered */
    if (r->prompt) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (clover_tokenize(c->model, r->prompt, r->prompt_len, 1, &ids, &n, &err))
            return engine_error(e, "prompt", &err);
        j->prompt = malloc((n ? n : 1) * sizeof *ids);
        if (j->prompt) memcpy(j->prompt, ids, n * sizeof *ids);
        clover_free(ids);
        if (!j->prompt) return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        j->n_prompt = n;
        return 0;
    }
    for (size_t i = 0; i < r->n_prompt_ids; i++)
        if ((size_t)r->prompt_ids[i] >= c->n_vocab)
            return server_error_set(e, 400, "invalid_request_error", "invalid_value", "prompt",
                                    "prompt[%zu]: token id %d is outside the vocabulary (0..%zu)", i,
                                    r->prompt_ids[i], c->n_vocab - 1);
    j->prompt = malloc(r->n_prompt_ids * sizeof *j->prompt);
    if (!j->prompt) return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    memcpy(j->prompt, r->prompt_ids, r->n_prompt_ids * sizeof *j->prompt);
    j->n_prompt = r->n_prompt_ids;
    return 0;
}

static int check_length(const server_request *r, const prepare_config *c, job *j, server_error *e) {
    const char *what = r->endpoint == SERVER_ENDPOINT_CHAT ? "messages" : "prompt";
    if (j->n_prompt == 0)
        return server_error_set(e, 400, "invalid_request_error", "invalid_value", what,
                                "%s: the prompt is empty after tokenization", what);
    if (j->n_prompt >= c->context)
        return server_error_set(e, 400, "invalid_request_error", "context_length_exceeded", what,
                                "this model's context is %zu tokens and the prompt has %zu; shorten the %s", c->context,
                                j->n_prompt, what);
    size_t room = c->context - j->n_prompt;
    if (r->has_max_tokens) {
        if (r->max_tokens > room)
            return server_error_set(e, 400, "invalid_request_error", "context_length_exceeded", "max_tokens",
                                    "this model's context is %zu tokens: the prompt has %zu and max_tokens asks for "
                                    "%llu more (at most %zu)",
                                    c->context, j->n_prompt, (unsigned long long)r->max_tokens, room);
        j->params.max_tokens = (size_t)r->max_tokens;
    } else {
        j->params.max_tokens = r->endpoint == SERVER_ENDPOINT_CHAT || room < COMPLETION_DEFAULT_MAX_TOKENS
                                   ? room
                                   : COMPLETION_DEFAULT_MAX_TOKENS;
    }
    return 0;
}

static int check_record(const server_request *r, const prepare_config *c, server_error *e) {
    if (!c->record) {
        if (r->has_block_size || r->has_threshold || r->lossless || r->rule) {
            const char *f = r->has_block_size ? "block_size"
                            : r->has_threshold ? "threshold"
                            : r->lossless      ? "lossless"
                                               : "rule";
            return server_error_set(e, 400, "invalid_request_error", "unsupported_parameter", f,
                                    "%s: this model has no block-diffusion record (it decodes autoregressively)", f);
        }
        return 0;
    }
    if (r->has_block_size && c->record->block_size % r->block_size != 0)
        return server_error_set(e, 400, "invalid_request_error", "invalid_value", "block_size",
                                "block_size: expected a divisor of the model's block size %u, got %u",
                                c->record->block_size, r->block_size);
    if (r->rule == CLOVER_RULE_CAUSAL && (r->lossless || r->json_schema))
        return server_error_set(e, 400, "invalid_request_error", "unsupported_parameter", "rule",
                                "rule: \"causal\" does not combine with %s (its blocks are resolved by the "
                                "threshold rule)",
                                r->lossless ? "lossless" : "response_format");
    return 0;
}

int request_prepare(const server_request *r, const prepare_config *c, uint64_t fresh, job *j, server_error *e) {
    if (r->model && strcmp(r->model, c->model_id) != 0)
        return server_error_set(e, 404, "invalid_request_error", "model_not_found", "model",
                                "the model '%.100s' does not exist: this server serves '%.100s'", r->model,
                                c->model_id);
    if (check_record(r, c, e)) return -1;
    j->endpoint = r->endpoint;
    if ((r->endpoint == SERVER_ENDPOINT_CHAT ? chat_prompt(r, c, j, e) : completion_prompt(r, c, j, e)) ||
        check_length(r, c, j, e))
        return -1;

    clover_generate_params *p = &j->params;
    p->temperature = r->has_temperature ? r->temperature : 0.0f;
    p->top_p = r->has_top_p ? r->top_p : 1.0f;
    p->top_k = r->has_top_k ? r->top_k : 0;
    p->seed = r->has_seed ? r->seed : fresh & SEED_MASK;
    p->ignore_eos = r->ignore_eos;
    if (r->logprobs) {
        j->want_logprobs = 1;
        j->top_logprobs = r->top_logprobs;
        p->logprobs = 1;
        p->top_logprobs = r->top_logprobs;
    }
    p->lossless = r->lossless;
    if (r->json_schema) { /* structured output: the whole answer is the document */
        if (!(j->json_schema = strdup(r->json_schema)))
            return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        p->json_schema = j->json_schema;
    }
    if (r->has_threshold) p->threshold = r->threshold;
    if (r->rule) p->rule = (clover_rule)r->rule;
    if (r->has_block_size) p->block_size = r->block_size;
    if (r->has_presence_penalty || r->has_frequency_penalty) {
        clover_penalties_from_record(c->record, &j->penalties);
        if (r->has_presence_penalty) j->penalties.presence_penalty = r->presence_penalty;
        if (r->has_frequency_penalty) j->penalties.frequency_penalty = r->frequency_penalty;
        p->penalties = &j->penalties;
    }
    for (size_t i = 0; i < r->n_stops; i++) {
        j->stops[i] = strdup(r->stops[i]);
        if (!j->stops[i]) return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        j->n_stops = i + 1;
    }
    j->stream = r->stream;
    j->include_usage = r->stream && r->include_usage;
    j->want_passes = r->stream && r->include_passes;
    j->split = r->endpoint == SERVER_ENDPOINT_CHAT && r->enable_thinking && !j->tool_prefix && !r->json_schema;

    snprintf(j->id, sizeof j->id, "%s-%016llx", r->endpoint == SERVER_ENDPOINT_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)fresh);
    j->created = (long long)time(NULL);
    j->model_id = c->model_id;
    return 0;
}
