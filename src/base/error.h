/*
 * error.h: filling a clover_error. Library code reports every failure by
 * returning error_set(err, CODE, "what, where, what was expected", ...),
 * which formats the message (when err is non-NULL) and returns CODE, so a
 * failure is one line at the point where the most context is known.
 */
#ifndef CLOVER_BASE_ERROR_H
#define CLOVER_BASE_ERROR_H

#include "clover.h"

#if defined(__GNUC__)
#define CLOVER_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLOVER_PRINTF(a, b)
#endif

/* Sets err (if non-NULL) and returns code. */
int error_set(clover_error *err, int code, const char *fmt, ...) CLOVER_PRINTF(3, 4);

/* Prepends "prefix: " to an already-set message (adds context on the way up). */
int error_prefix(clover_error *err, const char *fmt, ...) CLOVER_PRINTF(2, 3);

/* Clears err to CLOVER_OK with an empty message. */
void error_clear(clover_error *err);

#endif
