/*
 * stats.h: a request's statistics (SPEC.md 3 item 5): the timings the loops
 * measure, the operator seconds and coreset sizes the backend reports per
 * pass, and the rates derived from them once the request ends.
 */
#ifndef CLOVER_ENGINE_STATS_H
#define CLOVER_ENGINE_STATS_H

#include <stddef.h>

#include "backend/backend.h"
#include "clover.h"

/* Adds a preview pass: its operator seconds and coreset counts. */
void engine_stats_add_preview(clover_generate_stats *st, const backend_pass_stats *pass);

/* Fills the derived fields (coreset_mean and the three rates) for
 * n_generated tokens. A rate with no measured time is 0. */
void engine_stats_finish(clover_generate_stats *st, size_t n_generated);

#endif
