/*
 * route_trace.c: CLOVER_ROUTE_TRACE (route_trace.h). The file is opened at
 * the first record and written as every output is (base/safe_output.h): to
 * a temporary beside the path, renamed over it when the process exits
 * (atexit: a finished run, a Ctrl-C'd one, a server stopped by SIGTERM), so
 * a trace under the name is always whole and never replaces the model
 * being read. Each line is flushed at once: a process killed outright
 * leaves the temporary (.NAME.clover-tmp-XXXXXX) holding what it routed. A
 * file that cannot be opened is one warning and no trace.
 */
#include "backend/route_trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"
#include "base/safe_output.h"

static pthread_once_t trace_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *trace_path;
static safe_output trace_out;
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

/* atexit: the whole trace moves to its name. */
static void trace_finish(void) {
    pthread_mutex_lock(&trace_lock);
    trace_failed = true; /* a MoE call still running in another thread records nothing more */
    if (trace_file) {
        bool ok = fflush(trace_file) == 0 && fsync(fileno(trace_file)) == 0;
        ok = fclose(trace_file) == 0 && ok;
        trace_file = NULL;
        trace_out.fd = -1; /* closed with the stream */
        clover_error err = {0};
        if (!ok) {
            safe_output_abort(&trace_out);
            log_line(LOG_WARN, "CLOVER_ROUTE_TRACE: cannot finish '%s': no routing trace", trace_path);
        } else if (safe_output_commit(&trace_out, &err) != CLOVER_OK) {
            log_line(LOG_WARN, "CLOVER_ROUTE_TRACE: %s", err.message);
        }
    }
    pthread_mutex_unlock(&trace_lock);
}

static void trace_open(void) {
    clover_error err = {0};
    if (safe_output_open(&trace_out, trace_path, &err) != CLOVER_OK) {
        trace_failed = true;
        log_line(LOG_WARN, "CLOVER_ROUTE_TRACE: %s: no routing trace", err.message);
        return;
    }
    trace_file = fdopen(trace_out.fd, "w");
    if (trace_file && atexit(trace_finish) != 0) {
        fclose(trace_file); /* closes the descriptor too */
        trace_file = NULL;
        trace_out.fd = -1;
    }
    if (!trace_file) {
        safe_output_abort(&trace_out);
        trace_failed = true;
        log_line(LOG_WARN, "CLOVER_ROUTE_TRACE: cannot write '%s': no routing trace", trace_path);
        return;
    }
    fprintf(trace_file, "clover-route-trace 1\n");
}

void route_trace_record(uint32_t layer, size_t n_expert, size_t n_used, size_t rows, const int32_t *ends) {
    if (!route_trace_enabled()) return;
    pthread_mutex_lock(&trace_lock);
    if (!trace_file && !trace_failed) trace_open();
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
