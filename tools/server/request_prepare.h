/*
 * request_prepare.h: a parsed request + the model -> a job ready to queue:
 * the model name checked, the chat rendered through the model's template,
 * the prompt tokenized, its length checked against the context, the Clover
 * options checked against the model's record, the engine's parameters
 * filled. Runs on the connection thread (the model and its tokenizer are
 * shared read-only), so the scheduler only generates.
 */
#ifndef CLOVER_SERVER_REQUEST_PREPARE_H
#define CLOVER_SERVER_REQUEST_PREPARE_H

#include <stddef.h>
#include <stdint.h>

#include "clover.h"
#include "job.h"
#include "request_parse.h"

typedef struct prepare_config {
    const clover_model *model;
    const char *model_id;       /* the name clients use (GET /v1/models) */
    size_t context;             /* tokens a session may hold: prompt + answer */
    size_t n_vocab;
    const clover_record *record; /* NULL: an autoregressive model */

} prepare_config;

/* Fills the request part of j. fresh is a new random value per request: the
 * seed when the request gives none, and the response id. Returns 0, or -1
 * with e filled. */
int request_prepare(const server_request *r, const prepare_config *c, uint64_t fresh, job *j, server_error *e);

#endif
