/*
 * response.c: OpenAI's response objects. The non-streaming answer and the
 * streamed one are built from the same job fields, so their usage, finish
 * reason and statistics agree, and the parts of the non-streaming chat
 * answer are the ones answer_stream released as deltas.
 */
#include "response.h"

#include "tool_calls.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static char *dump(json_t *root, size_t *len) {
    if (!root) return NULL;
    char *s = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(root);
    if (s) *len = strlen(s);
    return s;
}

static json_t *error_object(const server_error *e) {
    return json_pack("{s:{s:s,s:s,s:o,s:o}}", "error", "message", e->message, "type",
                     e->type ? e->type : "server_error", "param", e->param[0] ? json_string(e->param) : json_null(),
                     "code", e->code ? json_string(e->code) : json_null());
}

char *response_error_body(const server_error *e, size_t *len) { return dump(error_object(e), len); }

static json_t *model_object(const char *model_id, long long created) {
    return json_pack("{s:s,s:s,s:I,s:s}", "id", model_id, "object", "model", "created", (json_int_t)created,
                     "owned_by", "clover");
}

char *response_models_body(const char *model_id, long long created, size_t *len) {
    return dump(json_pack("{s:s,s:[o]}", "object", "list", "data", model_object(model_id, created)), len);
}

char *response_model_body(const char *model_id, long long created, size_t *len) {
    return dump(model_object(model_id, created), len);
}

static const char *mode_name(clover_mode m) {
    return m == CLOVER_MODE_DIFFUSION ? "diffusion" : m == CLOVER_MODE_AUTOREGRESSIVE ? "autoregressive" : "auto";
}


/* JSON has no NaN or infinity (a rate over zero seconds): those read as 0. */
static double finite_or_zero(double x) { return isfinite(x) ? x : 0.0; }

static json_t *clover_object(const job *j) {
    const clover_generate_stats *s = &j->stats;
    json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f}", "mode", mode_name(j->mode), "seed",
                     (json_int_t)j->params.seed, "prompt_tokens", (json_int_t)j->n_prompt, "reused_tokens",
                     (json_int_t)j->reused_tokens, "passes", (json_int_t)s->passes, "blocks", (json_int_t)s->blocks,
                     "queue_s", finite_or_zero(j->queue_s), "prompt_s", finite_or_zero(s->prompt_s), "total_s", finite_or_zero(s->total_s),
                     "tokens_per_second", finite_or_zero(s->gen_tok_s), "denoise_tokens_per_second", finite_or_zero(s->denoise_tok_s),
                     "prompt_tokens_per_second", finite_or_zero(s->prompt_tok_s));
    if (o && j->cut) json_object_set_new(o, "cut", json_string(j->cut));
    if (o && s->causal_steps) json_object_set_new(o, "causal_steps", json_integer((json_int_t)s->causal_steps));
    return o;
}

static json_t *text_value(const char *s, size_t n) { return json_stringn(s ? s : "", s ? n : 0); }

static json_t *chat_message_parts(const job *j, json_t *content) {
    const char *t = j->text ? j->text : "";
    if (!j->split) return json_pack("{s:s,s:o}", "role", "assistant", "content", content);
    return json_pack("{s:s,s:o,s:o}", "role", "assistant", "content", content, "reasoning_content",
                     text_value(t + j->reasoning_off, j->reasoning_len));
}

/* The call's id: the response's id and the call's place in it (unique per response). */
static json_t *call_id(const job *j, size_t k) {
    const char *dash = strchr(j->id, '-');
    return json_sprintf("call_%s_%zu", dash ? dash + 1 : j->id, k);
}

/* tool_calls: [{id, type, function: {name, arguments}}] (streamed: each with its index). */
static json_t *tool_calls_array(const job *j, int with_index) {
    json_t *a = json_array();
    for (size_t k = 0; a && k < j->n_calls; k++) {
        json_t *c = json_pack("{s:o,s:s,s:{s:s,s:s}}", "id", call_id(j, k), "type", "function", "function", "name",
                              j->calls[k].name, "arguments", j->calls[k].arguments);
        if (c && with_index) json_object_set_new(c, "index", json_integer((json_int_t)k));
        json_array_append_new(a, c);
    }
    return a;
}

static json_t *chat_message(const job *j) {
    const char *t = j->text ? j->text : "";
    json_t *content = text_value(t + j->content_off, j->content_len);
    if (j->tools_on) {
        json_decref(content);
        content = j->n_calls && !j->tool_content_len ? json_null()
                                                     : text_value(j->tool_content, j->tool_content_len);
    }
    json_t *m = chat_message_parts(j, content);
    if (m && j->n_calls) json_object_set_new(m, "tool_calls", tool_calls_array(j, 0));
    return m;
}

/* ---- log-probabilities ---- */

/* A token's bytes as a JSON string: invalid UTF-8 (a token may end inside a
 * character) as U+FFFD, one for each maximal invalid subpart, as Python's
 * bytes.decode(errors="replace") and the tokenizers' decode write it. */
static json_t *token_string(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    char *t = malloc(3 * n + 1);
    if (!t) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xF4 ? 4 : 0;
        size_t q = k ? 1 : 0;
        while (k && q < k && i + q < n) {
            unsigned char d = s[i + q];
            unsigned char lo = 0x80, hi = 0xBF;
            if (q == 1 && c == 0xE0) lo = 0xA0;
            if (q == 1 && c == 0xED) hi = 0x9F;
            if (q == 1 && c == 0xF0) lo = 0x90;
            if (q == 1 && c == 0xF4) hi = 0x8F;
            if (d < lo || d > hi) break;
            q++;
        }
        if (k && q == k) {
            memcpy(t + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(t + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += q ? q : 1;
        }
    }
    json_t *v = json_stringn(t, o);
    free(t);
    return v;
}

static json_t *byte_array(const char *s, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_integer((unsigned char)s[i]));
    return a;
}

/* -inf (fewer finite ids than asked) has no JSON form: OpenAI's floor, -9999. */
static double finite_lp(float x) { return isfinite(x) ? (double)x : -9999.0; }

/* chat: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]} over entries [from, to). */
static json_t *chat_logprobs(const job *j, size_t from, size_t to) {
    json_t *content = json_array();
    for (size_t i = from; content && i < to; i++) {
        const token_lp *t = &j->lp[i];
        json_t *top = json_array();
        for (uint32_t k = 0; top && k < t->n_top; k++)
            json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token", token_string(t->top[k], t->top_len[k]),
                                                 "logprob", finite_lp(t->top_lp[k]), "bytes",
                                                 byte_array(t->top[k], t->top_len[k])));
        json_array_append_new(content, json_pack("{s:o,s:f,s:o,s:o}", "token", token_string(t->bytes, t->len),
                                                 "logprob", finite_lp(t->logprob), "bytes",
                                                 byte_array(t->bytes, t->len), "top_logprobs", top));
    }
    return json_pack("{s:o}", "content", content);
}

/* completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset} over [from, to). */
static json_t *completion_logprobs(const job *j, size_t from, size_t to) {
    json_t *tokens = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (size_t i = from; i < to; i++) {
        const token_lp *t = &j->lp[i];
        json_array_append_new(tokens, token_string(t->bytes, t->len));
        json_array_append_new(lps, json_real(finite_lp(t->logprob)));
        json_t *top = json_object();
        for (uint32_t k = 0; top && k < t->n_top; k++) {
            json_t *key = token_string(t->top[k], t->top_len[k]);
            if (key && !json_object_get(top, json_string_value(key))) /* two ids may read the same */
                json_object_set_new(top, json_string_value(key), json_real(finite_lp(t->top_lp[k])));
            json_decref(key);
        }
        json_array_append_new(tops, top);
        /* an offset into the returned text (a special token's bytes are not in it) */
        json_array_append_new(offs, json_integer((json_int_t)(j->lp_offset_base + t->text_at)));
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", tokens, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

static json_t *logprobs_value(const job *j, size_t from, size_t to) {
    if (!j->want_logprobs) return json_null();
    return j->endpoint == SERVER_ENDPOINT_CHAT ? chat_logprobs(j, from, to) : completion_logprobs(j, from, to);
}

/* ---- bodies ---- */

static json_t *choice_object(const job *j) {
    if (j->endpoint == SERVER_ENDPOINT_CHAT)
        return json_pack("{s:i,s:o,s:s,s:o}", "index", (int)j->choice, "message", chat_message(j), "finish_reason",
                         j->finish_reason, "logprobs", logprobs_value(j, 0, j->n_lp));
    return json_pack("{s:i,s:o,s:s,s:o}", "index", (int)j->choice, "text", text_value(j->text, j->text_len),
                     "finish_reason", j->finish_reason, "logprobs", logprobs_value(j, 0, j->n_lp));
}

/* The usage of n choices: the prompt once, every choice's tokens. */
static json_t *usage_of(job *const *jobs, size_t n) {
    size_t completion = 0;
    for (size_t i = 0; i < n; i++) completion += jobs[i]->completion_tokens;
    const job *j = jobs[0];
    return json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", (json_int_t)j->n_prompt, "completion_tokens",
                     (json_int_t)completion, "total_tokens", (json_int_t)(j->n_prompt + completion),
                     "prompt_tokens_details", "cached_tokens", (json_int_t)j->reused_tokens);
}

char *response_choices_body(job *const *jobs, size_t n, size_t *len) {
    for (size_t i = 0; i < n; i++)
        if (jobs[i]->failed) return response_error_body(&jobs[i]->error, len);
    const job *j = jobs[0];
    json_t *choices = json_array();
    for (size_t i = 0; choices && i < n; i++) json_array_append_new(choices, choice_object(jobs[i]));
    return dump(json_pack("{s:s,s:s,s:I,s:s,s:o,s:o,s:o}", "id", j->id, "object",
                          j->endpoint == SERVER_ENDPOINT_CHAT ? "chat.completion" : "text_completion", "created",
                          (json_int_t)j->created, "model", j->model_id, "choices", choices, "usage",
                          usage_of(jobs, n), "clover", clover_object(j)),
                len);
}

char *response_job_body(const job *j, size_t *len) {
    job *one = (job *)j;
    return response_choices_body(&one, 1, len);
}

/* ---- streams ---- */

static int sse_put(byte_buf *out, json_t *obj) {
    size_t n = 0;
    char *s = dump(obj, &n);
    if (!s) return -1;
    int rc = byte_buf_append(out, "data: ", 6) || byte_buf_append(out, s, n) || byte_buf_append(out, "\n\n", 2);
    free(s);
    return rc ? -1 : 0;
}

/* A chunk with one choice (or none: NULL). */
static json_t *chunk(const job *j, json_t *choice) {
    const char *object = j->endpoint == SERVER_ENDPOINT_CHAT ? "chat.completion.chunk" : "text_completion";
    return json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", j->id, "object", object, "created", (json_int_t)j->created,
                     "model", j->model_id, "choices", choice ? json_pack("[o]", choice) : json_array());
}

int response_sse_start(const job *j, byte_buf *out) {
    if (j->endpoint != SERVER_ENDPOINT_CHAT) return 0;
    return sse_put(out, chunk(j, json_pack("{s:i,s:{s:s,s:s},s:n,s:n}", "index", (int)j->choice, "delta", "role",
                                           "assistant", "content", "", "finish_reason", "logprobs")));
}

/* The log-probabilities not yet streamed go with the next chunk. */
static json_t *pending_logprobs(job *j) {
    json_t *v = logprobs_value(j, j->lp_sent, j->n_lp);
    j->lp_sent = j->n_lp;
    return v;
}

int response_sse_delta(job *j, const char *reasoning, size_t reasoning_len, const char *content, size_t content_len,
                       byte_buf *out) {
    if (!reasoning_len && !content_len) return 0;
    json_t *choice;
    if (j->endpoint == SERVER_ENDPOINT_CHAT) {
        json_t *delta = json_object();
        if (reasoning_len) json_object_set_new(delta, "reasoning_content", text_value(reasoning, reasoning_len));
        if (content_len) json_object_set_new(delta, "content", text_value(content, content_len));
        choice = json_pack("{s:i,s:o,s:n,s:o}", "index", (int)j->choice, "delta", delta, "finish_reason", "logprobs",
                           pending_logprobs(j));
    } else {
        choice = json_pack("{s:i,s:o,s:n,s:o}", "index", (int)j->choice, "text", text_value(content, content_len),
                           "finish_reason", "logprobs", pending_logprobs(j));
    }
    return sse_put(out, chunk(j, choice));
}

int response_sse_end(job *j, byte_buf *out) {
    if (j->failed) {
        if (sse_put(out, error_object(&j->error))) return -1;
    } else {
        if (j->n_calls) { /* the calls whole, in one delta, once the answer is parsed */
            json_t *delta = json_pack("{s:o}", "tool_calls", tool_calls_array(j, 1));
            if (sse_put(out, chunk(j, json_pack("{s:i,s:o,s:n,s:n}", "index", (int)j->choice, "delta", delta,
                                                "finish_reason", "logprobs"))))
                return -1;
        }
        json_t *choice = j->endpoint == SERVER_ENDPOINT_CHAT
                             ? json_pack("{s:i,s:{},s:s,s:o}", "index", (int)j->choice, "delta", "finish_reason",
                                         j->finish_reason, "logprobs", pending_logprobs(j))
                             : json_pack("{s:i,s:s,s:s,s:o}", "index", (int)j->choice, "text", "", "finish_reason",
                                         j->finish_reason, "logprobs", pending_logprobs(j));
        json_t *last = chunk(j, choice);
        if (last) json_object_set_new(last, "clover", clover_object(j));
        if (sse_put(out, last)) return -1;
    }
    if (j->grouped) return 0; /* the request's tail follows the last choice (response_sse_tail) */
    return response_sse_tail(&j, 1, out);
}

int response_sse_tail(job *const *jobs, size_t n, byte_buf *out) {
    const job *j = jobs[0];
    int failed = 0;
    for (size_t i = 0; i < n; i++) failed |= jobs[i]->failed;
    if (j->include_usage && !failed) {
        json_t *u = chunk(j, NULL);
        if (u) json_object_set_new(u, "usage", usage_of(jobs, n));
        if (sse_put(out, u)) return -1;
    }
    return byte_buf_append(out, "data: [DONE]\n\n", 14);
}
