/*
 * job_run.c: the per-token path is id -> clover_text_stream (whole UTF-8
 * characters) -> answer_stream (stop sequences, reasoning / content) ->
 * stream event. The same path builds the non-streaming answer, so both
 * kinds of request cut at the same place and count the same tokens. A stop
 * sequence or a departed client ends the generation from the callback
 * (the engine then stops before its next pass).
 */
#include "job_run.h"

#include <stdlib.h>
#include <string.h>

#include "answer_stream.h"
#include "response.h"
#include "tool_calls.h"
#include "webui.h"

typedef struct run_ctx {
    job *j;
    const clover_model *m;
    clover_text_stream *ts;
    answer_stream as;
    byte_buf ev; /* scratch for one event */
    int stop_hit;
    int failed; /* out of memory or a text error: ends the generation */
    tool_gate gate; /* j->tools_on: the content on its way out */
    size_t script_at; /* the test hook: script ids used */
    size_t pushed;    /* answer bytes pushed so far: the text offset of the next token */
    int script_done;
    clover_error err;
} run_ctx;

/* Sends the deltas of the last push / finish (streaming only). */
static int emit_parts(run_ctx *c, const char *reasoning, size_t reasoning_len, const char *content,
                      size_t content_len) {
    job *j = c->j;
    if (!j->stream || (!reasoning_len && !content_len)) return 0;
    c->ev.n = c->ev.off = 0;
    if (response_sse_delta(j, reasoning, reasoning_len, content, content_len, &c->ev) ||
        job_append_sse(j, c->ev.v, c->ev.n))
        return -1;
    return 0;
}

/* The content passes the tool gate (which may hold it) on its way. */
static int emit(run_ctx *c) {
    const char *content = c->as.content;
    size_t content_len = c->as.content_len;
    if (c->j->tools_on && content_len && tool_gate_push(&c->gate, content, content_len, &content, &content_len))
        return -1;
    return emit_parts(c, c->as.reasoning, c->as.reasoning_len, content, content_len);
}

/* The end of the content: the calls parsed (or all of it released as content). */
static int tools_finish(run_ctx *c) {
    job *j = c->j;
    const char *rest = NULL;
    size_t rest_len = 0, n_calls = 0;
    struct tool_call_out *calls = NULL;
    int rc = tool_gate_finish(&c->gate, j->tool_names, j->tool_schemas, j->n_tool_names, &calls, &n_calls, &rest, &rest_len);
    if (rc == -2 || emit_parts(c, NULL, 0, rest, rest_len)) {
        tool_calls_free(calls, n_calls);
        return -1;
    }
    char *content = malloc(c->gate.released + 1);
    if (!content) {
        tool_calls_free(calls, n_calls);
        return -1;
    }
    memcpy(content, c->gate.text, c->gate.released);
    content[c->gate.released] = '\0';
    pthread_mutex_lock(&j->mu);
    j->calls = calls;
    j->n_calls = n_calls;
    j->tool_content = content;
    j->tool_content_len = c->gate.released;
    pthread_mutex_unlock(&j->mu);
    return 0;
}

static int push_text(run_ctx *c, const char *piece, size_t len) {
    c->pushed += len;
    if (answer_stream_push(&c->as, piece, len) || emit(c)) {
        c->failed = 1;
        c->err.code = CLOVER_E_NOMEM;
        strcpy(c->err.message, "out of memory while streaming the answer");
        return -1;
    }
    if (c->as.stopped) c->stop_hit = 1;
    return 0;
}

/* A token's bytes (malloc'd) for its log-probability entry. */
static char *token_bytes(const clover_model *m, int32_t id, size_t *len) {
    char *t = NULL;
    *len = 0;
    if (id < 0 || clover_detokenize(m, &id, 1, 0, &t, len, NULL)) return calloc(1, 1);
    char *copy = malloc(*len + 1);
    if (copy) memcpy(copy, t, *len + 1);
    clover_free(t);
    return copy;
}

/* Keeps the token's log-probability and alternatives (before its text is pushed, so a streamed delta carries it). */
static int keep_logprob(run_ctx *c, const clover_token_info *info, int32_t id) {
    job *j = c->j;
    if (j->n_lp == j->cap_lp) {
        size_t cap = j->cap_lp ? 2 * j->cap_lp : 64;
        token_lp *v = realloc(j->lp, cap * sizeof *v);
        if (!v) return -1;
        j->lp = v;
        j->cap_lp = cap;
    }
    token_lp *t = &j->lp[j->n_lp];
    memset(t, 0, sizeof *t);
    t->logprob = info->logprob;
    t->text_at = c->pushed; /* where its text starts: a special token shows none, so it reads where the next starts */
    t->bytes = token_bytes(c->m, id, &t->len); /* id: the scripted one under --test-script */
    if (!t->bytes) return -1;
    j->n_lp++; /* from here on job_unref frees what it holds */
    size_t n = info->n_top < CLOVER_MAX_TOP_LOGPROBS ? info->n_top : CLOVER_MAX_TOP_LOGPROBS;
    for (size_t k = 0; k < n && info->top_ids[k] >= 0; k++) { /* an id of -1: fewer finite ids than asked */
        t->top[k] = token_bytes(c->m, info->top_ids[k], &t->top_len[k]);
        if (!t->top[k]) return -1;
        t->top_lp[k] = info->top_logprobs[k];
        t->n_top = (uint32_t)k + 1;
    }
    return 0;
}

static int on_token(void *user, const clover_token_info *info) {
    run_ctx *c = user;
    int32_t id = info->id;
    if (c->failed || c->stop_hit || c->script_done) return 1;
    if (c->j->script) id = c->j->script[c->script_at++]; /* the test hook: the scripted answer instead */
    if (c->j->want_logprobs && keep_logprob(c, info, id)) {
        c->failed = 1;
        c->err.code = CLOVER_E_NOMEM;
        strcpy(c->err.message, "out of memory keeping the log-probabilities");
        return 1;
    }
    const char *piece = NULL;
    size_t len = 0;
    if (clover_text_stream_push(c->ts, id, &piece, &len, &c->err)) {
        c->failed = 1;
        return 1;
    }
    if (len && push_text(c, piece, len)) return 1;
    if (c->j->script && c->script_at == c->j->n_script) c->script_done = 1;
    return c->stop_hit || c->script_done || c->j->cancel;
}

/* stream_options.clover_passes: each denoising pass as an event (tools/server/webui/pass_event.c). */
static int on_pass(void *user, const clover_pass_view *v) {
    run_ctx *c = user;
    if (c->failed) return 1;
    if (webui_pass_event(c->j, c->m, v)) {
        c->failed = 1;
        c->err.code = CLOVER_E_NOMEM;
        strcpy(c->err.message, "out of memory streaming a pass event");
        return 1;
    }
    return c->j->cancel;
}

static void set_error(job *j, int status, const char *type, const char *code, const char *message) {
    server_error_set(&j->error, status, type, code, NULL, "%s", message);
    j->failed = 1;
}

static void finish(job *j) {
    pthread_mutex_lock(&j->mu);
    j->state = JOB_DONE;
    job_signal_locked(j);
    pthread_mutex_unlock(&j->mu);
}

void job_fail(job *j, int status, const char *type, const char *code, const char *message) {
    pthread_mutex_lock(&j->mu);
    set_error(j, status, type, code, message);
    j->finish_reason = "cancelled";
    pthread_mutex_unlock(&j->mu);
    if (j->stream) {
        byte_buf ev = {0};
        if (!response_sse_end(j, &ev)) job_append_sse(j, ev.v, ev.n);
        byte_buf_free(&ev);
    }
    finish(j);
}

/* The result fields, from the engine's result and the text. */
static void settle(job *j, run_ctx *c, const clover_generate_result *r) {
    pthread_mutex_lock(&j->mu);
    j->text = c->as.raw ? c->as.raw : calloc(1, 1);
    j->text_len = c->as.len;
    j->reasoning_off = c->as.reasoning_off;
    j->reasoning_len = c->as.reasoning_total;
    j->content_off = c->as.content_off;
    j->content_len = c->as.content_total;
    c->as.raw = NULL;
    if (!j->text) set_error(j, 500, "server_error", NULL, "out of memory while finishing the answer");
    j->completion_tokens = r->n_generated;
    j->reused_tokens = r->stats.reused_tokens;
    j->mode = r->mode;
    j->stats = r->stats;
    if (j->n_calls)
        j->finish_reason = "tool_calls";
    else if (c->stop_hit || c->script_done || r->finish == CLOVER_FINISH_STOP)
        j->finish_reason = "stop";
    else if (r->finish == CLOVER_FINISH_LENGTH)
        j->finish_reason = "length";
    else if (j->shutdown_cut) { /* as vLLM says of an aborted request; clover.cut says why */
        j->finish_reason = "abort";
        j->cut = "shutdown";
    } else
        j->finish_reason = "cancelled";
    pthread_mutex_unlock(&j->mu);
}

struct job_runner {
    run_ctx c;
    clover_request *rq;
    clover_session *s;
};

/* The end of a job: the text flushed, the answer or the error, the
 * stream's end, the job done. rc: the generation's status. */
static void job_finish(run_ctx *c, int rc, clover_generate_result *r) {
    job *j = c->j;
    if (rc == CLOVER_OK && !c->failed && !c->stop_hit) {
        const char *piece = NULL;
        size_t len = 0;
        if (clover_text_stream_flush(c->ts, &piece, &len, &c->err))
            c->failed = 1;
        else if (len)
            push_text(c, piece, len);
    }
    if (rc == CLOVER_OK && !c->failed) {
        answer_stream_finish(&c->as);
        if (emit(c) || (j->tools_on && tools_finish(c))) c->failed = 1;
    }
    if (rc != CLOVER_OK || c->failed) {
        int invalid = rc == CLOVER_E_INVALID;
        pthread_mutex_lock(&j->mu);
        set_error(j, invalid ? 400 : 500, invalid ? "invalid_request_error" : "server_error", NULL, c->err.message);
        j->finish_reason = "cancelled";
        j->completion_tokens = r->n_generated;
        j->stats = r->stats;
        pthread_mutex_unlock(&j->mu);
    } else {
        settle(j, c, r);
    }
    if (j->stream) {
        c->ev.n = c->ev.off = 0;
        if (!response_sse_end(j, &c->ev)) job_append_sse(j, c->ev.v, c->ev.n);
    }
    clover_generate_result_free(r);
    clover_text_stream_free(c->ts);
    answer_stream_free(&c->as);
    tool_gate_free(&c->gate);
    byte_buf_free(&c->ev);
    if (j->settled) j->settled(j, j->settled_user);
    finish(j);
}

job_runner *job_start(job *j, const clover_model *m, clover_session *s) {
    job_runner *jr = calloc(1, sizeof *jr);
    clover_generate_result r;
    memset(&r, 0, sizeof r);
    if (!jr) {
        job_fail(j, 500, "server_error", NULL, "out of memory starting the request");
        return NULL;
    }
    run_ctx *c = &jr->c;
    c->j = j;
    c->m = m;
    jr->s = s;
    answer_stream_init(&c->as, j->stops, j->n_stops, j->split);
    int rc = clover_text_stream_create(&c->ts, m, 1, &c->err);
    if (rc == CLOVER_OK && j->tools_on && tool_gate_init(&c->gate, j->tool_prefix)) {
        rc = c->err.code = CLOVER_E_NOMEM;
        strcpy(c->err.message, "out of memory starting the request");
    }
    if (rc == CLOVER_OK) {
        j->params.on_token = NULL;
        j->params.on_token_info = on_token;
        j->params.user = c;
        if (j->want_passes) j->params.on_pass = on_pass;
        j->params.cancel = &j->cancel;
        rc = clover_request_create(&jr->rq, s, j->prompt, j->n_prompt, &j->params, &c->err);
    }
    if (rc != CLOVER_OK) {
        job_finish(c, rc, &r);
        free(jr);
        return NULL;
    }
    return jr;
}

clover_request *job_runner_request(job_runner *jr) { return jr->rq; }
clover_session *job_runner_session(job_runner *jr) { return jr->s; }

void job_end(job_runner *jr) {
    clover_generate_result r;
    int rc = clover_request_result(jr->rq, &r, &jr->c.err);
    clover_request_free(jr->rq);
    job_finish(&jr->c, rc, &r);
    free(jr);
}

void job_run(job *j, const clover_model *m, clover_session *s) {
    job_runner *jr = job_start(j, m, s);
    if (!jr) return;
    while (clover_request_step(jr->rq) == CLOVER_OK && !clover_request_done(jr->rq)) {}
    job_end(jr);
}
