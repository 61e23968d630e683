/*
 * response.h: the JSON the server answers, in OpenAI's shapes (chat
 * completion, text completion, their stream chunks, model list, errors),
 * written with jansson, plus the "clover" object with the request's
 * statistics. Bodies are malloc'd (free()); stream events are appended to a
 * byte_buf as Server-Sent Events ("data: {...}\n\n").
 */
#ifndef CLOVER_SERVER_RESPONSE_H
#define CLOVER_SERVER_RESPONSE_H

#include <stddef.h>

#include "byte_buf.h"
#include "job.h"
#include "request_parse.h"

/* Each returns a body (NUL-terminated, *len set) or NULL when out of memory. */
char *response_error_body(const server_error *e, size_t *len);
char *response_models_body(const char *model_id, long long created, size_t *len);
/* GET /v1/models/{id}: the one model object. */
char *response_model_body(const char *model_id, long long created, size_t *len);
/* A finished job's answer: the completion object, or its error when it failed. */
char *response_job_body(const job *j, size_t *len);
/* The same for the n jobs of one request's choices (every one done): their
 * choices in one object, the usage summed (the prompt counted once), the
 * first failure's error instead when one failed. */
char *response_choices_body(job *const *jobs, size_t n, size_t *len);

/* Stream events; each returns 0 or -1 (out of memory). A delta or end
 * chunk carries the log-probabilities collected since the last chunk (and
 * marks them sent: the scheduler thread alone writes a running job's). */
int response_sse_start(const job *j, byte_buf *out); /* chat: the role chunk; completions: nothing */
int response_sse_delta(job *j, const char *reasoning, size_t reasoning_len, const char *content,
                       size_t content_len, byte_buf *out);
/* The end: the finish chunk (with the statistics), the usage chunk when asked
 * for, then "data: [DONE]"; an error event instead when the job failed. */
int response_sse_end(job *j, byte_buf *out);
/* n > 1: after every choice's end (a grouped job's end leaves them out): the usage chunk when asked for, then [DONE]. */
int response_sse_tail(job *const *jobs, size_t n, byte_buf *out);

#endif
