/*
 * prefill.h: clover_generate with the prompt's progress on a terminal
 * (prefill.c says how, and why the answer cannot change).
 */
#ifndef CLOVER_CLI_PREFILL_H
#define CLOVER_CLI_PREFILL_H

#include <stddef.h>

#include "clover.h"

/* clover_generate(s, ids, n, p, r, err); when stderr is a terminal and the
 * prompt is long, with a progress line while the prompt is committed.
 * chunk: the session's prompt rows per pass (-b), 0 for the default. */
int cli_generate(clover_session *s, const int32_t *ids, size_t n, const clover_generate_params *p, size_t chunk,
                 clover_generate_result *r, clover_error *err);

#endif
