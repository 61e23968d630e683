/*
 * tensor_progress.h: the progress bar and option parsing that `clover convert`
 * and `clover quantize` share. Both stream a model tensor by tensor through a
 * library call that reports (tensor, index, count, bytes done, bytes total);
 * this draws that as one redrawn line on a terminal, at most ten times a
 * second, so neither command carries its own copy.
 */
#ifndef CLOVER_CLI_TENSOR_PROGRESS_H
#define CLOVER_CLI_TENSOR_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct cli_tensor_progress {
    double t0, last; /* start and last redraw, timer_now() seconds */
    int drawn;       /* a bar is on the line: end it with a newline */
} cli_tensor_progress;

/* Starts the clock. */
void cli_tensor_progress_start(cli_tensor_progress *p);

/* The library's progress callback; user is a cli_tensor_progress. */
void cli_tensor_progress_draw(void *user, const char *tensor, size_t index, size_t count, uint64_t done,
                              uint64_t total);

/* Ends the bar's line when one was drawn. */
void cli_tensor_progress_end(cli_tensor_progress *p);

/* Parses a --threads value (1..4096) into *out; on failure prints
 * "clover CMD: --threads 'S' is not a thread count (1..4096)" and returns -1. */
int cli_parse_threads(const char *cmd, const char *s, long *out);

#endif
