/*
 * route_trace.c: CLOVER_ROUTE_TRACE (route_trace.h): the file opened at the
 * first record, one line per MoE call, flushed at once (a diagnostic: a
 * process that dies keeps what it routed). A file that cannot be opened is
 * one warning and no trace.
 */
#include "backend/route_trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"

static pthread_once_t trace_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *trace_path;
static FILE *trace_file;
static bool trace_failed;
static size_t trace_experts, trace_used;

static void trace_init(void) {
    const char *p = getenv("CLOVER_ROUTE_TRACE");
    trace_path = p && *p ? p : NULL;
}

bool route_trace_enabled(void) {
    pthread_once(&trace_once, trace_init);
    return trace_path != NULL;
}

void route_trace_record(uint32_t layer, size_t n_expert, size_t n_used, size_t rows, const int32_t *ends) {
    if (!route_trace_enabled()) return;
    pthread_mutex_lock(&trace_lock);
    if (!trace_file && !trace_failed) {
        trace_file = fopen(trace_path, "w");
        if (!trace_file) {
            trace_failed = true;
            log_line(LOG_WARN, "CLOVER_ROUTE_TRACE: cannot write '%s': no routing trace", trace_path);
        } else {
            fprintf(trace_file, "clover-route-trace 1\n");
        }
    }
    if (trace_file) {
        if (n_expert != trace_experts || n_used != trace_used) { /* the first record, or another model */
            fprintf(trace_file, "experts %zu used %zu\n", n_expert, n_used);
            trace_experts = n_expert;
            trace_used = n_used;
        }
        fprintf(trace_file, "%u %zu", layer, rows);
        for (size_t e = 0; e < n_expert; e++) {
            int32_t m = ends[e] - (e ? ends[e - 1] : 0);
            if (m > 0) fprintf(trace_file, " %zu:%d", e, m);
        }
        fputc('\n', trace_file);
        fflush(trace_file);
    }
    pthread_mutex_unlock(&trace_lock);
}
