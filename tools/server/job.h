/*
 * job.h: one generation request on its way from a connection thread to the
 * scheduler and back.
 *
 * Two threads share a job: the connection that made it (waiting for the
 * result, or for stream bytes) and the scheduler (running it). Either may
 * finish with it first: a client can leave while its job is queued or
 * running, and the scheduler can finish before a slow client has read the
 * stream. So a job is reference-counted and everything that changes after
 * submission is guarded by its mutex; the cancel flag is the one exception,
 * a plain int store that the engine polls before every pass.
 */
#ifndef CLOVER_SERVER_JOB_H
#define CLOVER_SERVER_JOB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "byte_buf.h"
#include "clover.h"
#include "request_parse.h"

typedef enum job_state { JOB_QUEUED = 0, JOB_RUNNING = 1, JOB_DONE = 2 } job_state;

/* One emitted token's log-probability and its alternatives (logprobs asked for). */
typedef struct token_lp {
    char *bytes; /* the token's bytes (malloc'd; may end inside a UTF-8 character) */
    size_t len;
    size_t text_at; /* the offset in the answer's text where this token's text starts */
    float logprob;
    uint32_t n_top;
    char *top[CLOVER_MAX_TOP_LOGPROBS]; /* malloc'd */
    size_t top_len[CLOVER_MAX_TOP_LOGPROBS];
    float top_lp[CLOVER_MAX_TOP_LOGPROBS];
} token_lp;

typedef struct job {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC: progress (stream bytes, done) */
    int refs;

    /* the request: written before submission, read-only afterwards */
    server_endpoint endpoint;
    int stream, include_usage;
    int want_passes;      /* stream_options.clover_passes: pass events (webui.h) */
    int split;            /* chat with thinking on: reasoning_content / content */
    char id[48];          /* "chatcmpl-..." / "cmpl-..." (the choices of one request share it) */
    uint32_t choice;      /* this job's choice index (n > 1: one job per choice, seed + choice) */
    int grouped;          /* one of n > 1 choices: the stream's usage and [DONE] come after the last (routes.c) */
    long long created;    /* Unix seconds */
    const char *model_id; /* the server's, outlives every job */
    int32_t *prompt;      /* [n_prompt] */
    size_t n_prompt;
    clover_generate_params params; /* on_token, user and cancel are set by the runner */
    clover_penalties penalties;    /* params.penalties points here when the request overrides them */
    char *stops[SERVER_MAX_STOPS];
    size_t n_stops;
    double t_submit; /* timer: queue wait */
    double t_run;    /* timer: when the scheduler admitted it */
    /* Called by the runner once the result is settled, just before the job reads as done: the scheduler's
     * metrics count it there, so a client that has its answer finds its request counted in /metrics. */
    void (*settled)(struct job *j, void *user);
    void *settled_user;
    /* tool calls (chat with tools, tool_choice not "none"): the content is parsed for them */
    int tools_on;
    char *json_schema;  /* response_format's schema (params.json_schema points at it), or NULL */
    char *tool_prefix;  /* the call's opening the prompt forced (required / named), or NULL */
    char **tool_names;  /* [n_tool_names] the declared functions */
    char **tool_schemas; /* [n_tool_names] each one's tool, a JSON text (its parameters' types) */
    size_t n_tool_names;
    int32_t suppress[1]; /* params.suppress_ids: "<tool_call>" under tool_choice "none" */
    const int32_t *script; /* test hook (--test-script): emitted ids replaced by these, [n_script] */
    size_t n_script;

    volatile int cancel; /* non-zero: stop at the next pass (client gone, shutdown) */
    volatile int shutdown_cut; /* set with cancel by a shutdown past its grace: finish "abort", cut "shutdown" */

    /* The connection's wake-up (server side, under mu): a connection that
     * suspended itself to wait sets suspended; the next progress signal
     * clears it and calls resume(conn). */
    void (*resume)(void *conn);
    void *conn;
    int suspended;

    /* progress and result: under mu */
    job_state state;
    byte_buf sse; /* streaming: event bytes the connection has not sent yet */
    int failed;   /* the request failed: error holds the answer */
    server_error error;
    char *text;   /* the answer (stop sequence cut), NUL-terminated */
    size_t text_len;
    size_t reasoning_off, reasoning_len; /* split: the parts of text (answer_stream) */
    size_t content_off, content_len;
    const char *finish_reason; /* "stop", "length", "tool_calls", "abort" (a shutdown cut) or "cancelled" */
    struct tool_call_out *calls; /* tools_on: the parsed calls, [n_calls] (0: the answer is content) */
    size_t n_calls;
    char *tool_content; /* tools_on: the content released (the calls' preamble, or all of it), NUL-terminated */
    size_t tool_content_len;
    int client_cancelled;      /* the client left before the end */
    const char *cut;           /* why a "length" answer was cut short ("shutdown"), or NULL */
    size_t completion_tokens, reused_tokens;
    /* log-probabilities: written by the scheduler thread while running, read after done */
    int want_logprobs;
    size_t top_logprobs;
    token_lp *lp; /* [n_lp] the emitted tokens' (those that reached the text, in order) */
    size_t n_lp, cap_lp;
    size_t lp_sent;        /* streaming: entries already sent */
    size_t lp_offset_base; /* completions' text_offset of the first token (0) */
    clover_mode mode;
    double queue_s;
    clover_generate_stats stats;
} job;

/* A job holding one reference (the caller's). NULL when out of memory. */
job *job_create(void);
void job_ref(job *j);
void job_unref(job *j);

/* Signals progress (state, stream bytes) to the waiting connection. Call with mu held. */
void job_signal_locked(job *j);

/* Appends stream bytes (the scheduler) and wakes the connection. 0 or -1 (out of memory). */
int job_append_sse(job *j, const char *data, size_t len);

/* Waits, as the connection thread, until the job is done or (want_bytes)
 * stream bytes are waiting. fd is the client's socket: every 50 ms the
 * wait checks that the client is still there; if it has gone, the job is
 * cancelled and 0 returned. 1: ready. Call with mu held (returns with it held). */
int job_wait_locked(job *j, int fd, int want_bytes);

/* Monotonic seconds. */
double job_now(void);

/* 1 when the peer of the connected socket fd has closed or reset it. */
int job_peer_gone(int fd);

#endif
