/*
 * run_report.h: how `clover run` and `clover chat` print a generation
 * result: one JSON object with every field (machine-readable), the ids and
 * full statistics (the --ids form), or a short summary line for stderr
 * after a streamed answer.
 */
#ifndef CLOVER_CLI_RUN_REPORT_H
#define CLOVER_CLI_RUN_REPORT_H

#include <stdio.h>

#include "clover.h"

/* The text side of a request, for the JSON object (NULL fields are left out). */
typedef struct run_text_info {
    const int32_t *prompt_ids;
    size_t n_prompt;
    int chat;     /* the prompt went through the chat template: split the answer */
    int thinking; /* the generation prompt opened <think> */
} run_text_info;

const char *run_mode_name(clover_mode m);

/* Prints the JSON object on stdout; 0, or 1 after a one-line error. */
int run_print_json(const clover_generate_result *r, const run_text_info *t);

/* The --ids form on stdout: the ids, then every statistic. */
void run_print_ids_and_stats(const clover_generate_result *r);

/* A summary for after a streamed answer: finish, blocks and passes per
 * block, rates, prompt and reuse. */
void run_print_summary(FILE *f, const clover_generate_result *r);

/* A failed request as one line on stderr, "clover CMD: message", with what
 * to do when the prompt does not fit the context (hint: the option or the
 * command that makes room). */
void run_print_error(const char *cmd, const clover_error *err, const char *hint);

/* 1 when the answer stopped because the context is full (finish "length"
 * before max_tokens), after a note on stderr saying so and what to do. */
int run_note_context_full(const char *cmd, const clover_generate_result *r, size_t max_tokens, const char *hint);

#endif
