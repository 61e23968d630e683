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
/* A finished job's answer: the completion object, or its error when it failed. */
char *response_job_body(const job *j, size_t *len);

/* Stream events; each returns 0 or -1 (out of memory). */
int response_sse_start(const job *j, byte_buf *out); /* chat: the role chunk; completions: nothing */
int response_sse_delta(const job *j, const char *reasoning, size_t reasoning_len, const char *content,
                       size_t content_len, byte_buf *out);
/* The end: the finish chunk (with the statistics), the usage chunk when asked
 * for, then "data: [DONE]"; an error event instead when the job failed. */
int response_sse_end(const job *j, byte_buf *out);

#endif
