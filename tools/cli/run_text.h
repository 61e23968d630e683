/*
 * run_text.h: `clover run` with text: the prompt (the chat template with
 * one user message, or raw text) tokenized by the model's tokenizer, the
 * answer streamed as it is emitted (with the live block display on a
 * terminal), then a summary on stderr, or everything as one JSON object.
 */
#ifndef CLOVER_CLI_RUN_TEXT_H
#define CLOVER_CLI_RUN_TEXT_H

#include <stddef.h>

#include "clover.h"

typedef struct run_text_request {
    const char *prompt; /* UTF-8, prompt_len bytes */
    size_t prompt_len;
    const char *system; /* chat: a system message, or NULL */
    int chat;           /* the chat template (else raw text) */
    int thinking;       /* chat: the answer opens <think> */
    int json;           /* one JSON object instead of streamed text */
    int visual;         /* draw the blocks when stdout is a terminal */
    size_t chunk;       /* the session's prompt rows per pass (-b), 0: the default */
} run_text_request;

/* Runs the request on s with the generation parameters p (its callbacks are
 * set here). Returns the exit code: 0, or 1 after a one-line error. */
int run_text(const clover_model *m, clover_session *s, const run_text_request *t, clover_generate_params *p);

#endif
