/*
 * route_trace.h: a record of the experts every MoE call routes to, for
 * measuring expert-cache policies on real routing (bench_expert_cache
 * replays it). A diagnostic: CLOVER_ROUTE_TRACE=FILE writes, from the
 * first MoE call of the process on,
 *     clover-route-trace 1
 *     experts E used K
 *     LAYER ROWS EXPERT:ROWS EXPERT:ROWS ...
 * one line per MoE call (one layer of one pass: all the rows of every
 * sequence of the call), the experts it used in ascending order with the
 * rows routed to each (their sum is ROWS x K, less where a coreset left a
 * row fewer than K). A pass starts where LAYER does not rise. The CPU
 * backend records it (cpu/moe.c); a device backend records the same lines
 * from the routing it copies back. The file is written as every output
 * (base/safe_output.h): whole under its name when the process exits, never
 * over the model being read.
 */
#ifndef CLOVER_BACKEND_ROUTE_TRACE_H
#define CLOVER_BACKEND_ROUTE_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether CLOVER_ROUTE_TRACE is set (read once). */
bool route_trace_enabled(void);

/* One MoE call: ends[e] is the end of expert e's run of routed rows (the
 * rows of e are ends[e] - ends[e - 1], ends[-1] = 0), as cpu/moe.c's
 * bucketing leaves them. */
void route_trace_record(uint32_t layer, size_t n_expert, size_t n_used, size_t rows, const int32_t *ends);

#endif
