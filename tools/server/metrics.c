/*
 * metrics.c: counters under one mutex; requests by route and status in a
 * small table (the statuses the server answers are few and fixed).
 */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "byte_buf.h"

#define METRICS_MAX_STATUSES 16
/* sequences per engine step: powers of two up to the most a step can carry in one backend call (64) */
#define STEP_BUCKETS 7
static const unsigned step_bounds[STEP_BUCKETS] = {1, 2, 4, 8, 16, 32, 64};

struct metrics {
    pthread_mutex_t mu;
    int statuses[METRICS_MAX_STATUSES]; /* the distinct statuses seen, in order */
    size_t n_statuses;
    unsigned long long requests[ROUTE_COUNT][METRICS_MAX_STATUSES];
    unsigned long long prompt_tokens, reused_tokens, completion_tokens, passes, generations, cancelled;
    double busy_s;
    char device[16]; /* the engine's backend */
    /* the scheduler's engine steps: sequences per step as a histogram (STEP_BUCKETS upper bounds, then +Inf) */
    unsigned long long steps, step_seqs, step_rows, step_passes, step_le[STEP_BUCKETS + 1];
    double backend_s, step_s, sched_s, snapshot_s;
};

const char *metrics_route_name(server_route r) {
    static const char *names[ROUTE_COUNT] = {"/v1/chat/completions", "/v1/completions", "/v1/models",
                                             "/health", "/metrics", "other"};
    return r < ROUTE_COUNT ? names[r] : "other";
}

metrics *metrics_create(void) {
    metrics *m = calloc(1, sizeof *m);
    if (m && pthread_mutex_init(&m->mu, NULL)) {
        free(m);
        return NULL;
    }
    return m;
}

void metrics_free(metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void metrics_count_request(metrics *m, server_route route, int status) {
    if (route >= ROUTE_COUNT) route = ROUTE_OTHER;
    pthread_mutex_lock(&m->mu);
    size_t k = 0;
    while (k < m->n_statuses && m->statuses[k] != status)
        k++;
    if (k == m->n_statuses && k < METRICS_MAX_STATUSES) m->statuses[m->n_statuses++] = status;
    if (k < METRICS_MAX_STATUSES) m->requests[route][k]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_count_generation(metrics *m, size_t prompt_tokens, size_t reused_tokens, size_t completion_tokens,
                              size_t passes, double busy_s, double snapshot_s, int cancelled) {
    pthread_mutex_lock(&m->mu);
    m->generations++;
    m->prompt_tokens += prompt_tokens;
    m->reused_tokens += reused_tokens;
    m->completion_tokens += completion_tokens;
    m->passes += passes;
    m->busy_s += busy_s;
    m->snapshot_s += snapshot_s;
    m->cancelled += cancelled != 0;
    pthread_mutex_unlock(&m->mu);
}

void metrics_count_step(metrics *m, size_t sequences, size_t rows, uint64_t passes, double backend_s, double step_s) {
    size_t k = 0;
    while (k < STEP_BUCKETS && sequences > step_bounds[k])
        k++;
    pthread_mutex_lock(&m->mu);
    if (sequences) { /* a step that only emitted the requests' last tokens ran no pass */
        m->steps++;
        m->step_seqs += sequences;
        m->step_rows += rows;
        m->step_passes += passes;
        m->step_le[k]++;
    }
    m->backend_s += backend_s;
    m->step_s += step_s;
    pthread_mutex_unlock(&m->mu);
}

void metrics_count_scheduler(metrics *m, double seconds) {
    pthread_mutex_lock(&m->mu);
    m->sched_s += seconds;
    pthread_mutex_unlock(&m->mu);
}

void metrics_count_cancelled(metrics *m) {
    pthread_mutex_lock(&m->mu);
    m->cancelled++;
    pthread_mutex_unlock(&m->mu);
}

static int put(byte_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int put(byte_buf *b, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line) return -1; /* a cut line would break the exposition: fail instead */
    return byte_buf_append(b, line, (size_t)n);
}

static int put_counter(byte_buf *b, const char *name, const char *help, const char *type, double v) {
    return put(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

void metrics_set_device(metrics *m, const char *device) {
    pthread_mutex_lock(&m->mu);
    snprintf(m->device, sizeof m->device, "%s", device ? device : "");
    pthread_mutex_unlock(&m->mu);
}

char *metrics_render(metrics *m, size_t queue_length, size_t queue_capacity, int busy, size_t *len) {
    byte_buf b = {0};
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    rc |= put(&b, "# HELP clover_requests_total HTTP requests answered, by route and status "
                  "(499: the client left first).\n# TYPE clover_requests_total counter\n");
    for (int r = 0; r < ROUTE_COUNT; r++)
        for (size_t k = 0; k < m->n_statuses; k++)
            if (m->requests[r][k])
                rc |= put(&b, "clover_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                          metrics_route_name((server_route)r), m->statuses[k], m->requests[r][k]);
    rc |= put_counter(&b, "clover_generations_total", "Generations run by the scheduler.", "counter",
                      (double)m->generations);
    rc |= put_counter(&b, "clover_prompt_tokens_total", "Prompt tokens of the generations (tokens in).", "counter",
                      (double)m->prompt_tokens);
    rc |= put_counter(&b, "clover_reused_tokens_total", "Prompt tokens reused from a kept session's prefix.",
                      "counter", (double)m->reused_tokens);
    rc |= put_counter(&b, "clover_completion_tokens_total", "Generated tokens (tokens out).", "counter",
                      (double)m->completion_tokens);
    rc |= put_counter(&b, "clover_passes_total", "Denoising (or decoding) passes.", "counter", (double)m->passes);
    rc |= put_counter(&b, "clover_busy_seconds_total", "Seconds the model spent generating.", "counter", m->busy_s);
    rc |= put_counter(&b, "clover_cancelled_requests_total",
                      "Generations stopped or dropped because the client left (or the server stopped).", "counter",
                      (double)m->cancelled);
    rc |= put(&b, "# HELP clover_step_sequences Requests carried by one engine step (each running request "
                  "advances one pass a step; they share its backend calls).\n"
                  "# TYPE clover_step_sequences histogram\n");
    unsigned long long cum = 0;
    for (size_t k = 0; k <= STEP_BUCKETS; k++) {
        cum += m->step_le[k];
        if (k < STEP_BUCKETS)
            rc |= put(&b, "clover_step_sequences_bucket{le=\"%u\"} %llu\n", step_bounds[k], cum);
        else
            rc |= put(&b, "clover_step_sequences_bucket{le=\"+Inf\"} %llu\n", cum);
    }
    rc |= put(&b, "clover_step_sequences_sum %llu\nclover_step_sequences_count %llu\n", m->step_seqs, m->steps);
    rc |= put_counter(&b, "clover_step_rows_total", "Token rows the engine steps carried (prompt chunks, decode rows, "
                      "preview blocks).", "counter", (double)m->step_rows);
    rc |= put_counter(&b, "clover_backend_passes_total",
                      "Model passes the backend ran for the steps (sequences per pass: clover_step_sequences_sum "
                      "over this).", "counter", (double)m->step_passes);
    rc |= put_counter(&b, "clover_backend_seconds_total", "Seconds the engine steps spent inside backend calls.",
                      "counter", m->backend_s);
    rc |= put_counter(&b, "clover_step_seconds_total",
                      "Seconds of the engine steps (backend calls plus planning, host picks and streaming).", "counter",
                      m->step_s);
    rc |= put_counter(&b, "clover_snapshot_seconds_total",
                      "Seconds the steps spent taking and restoring prompt snapshots (part of their host work).",
                      "counter", m->snapshot_s);
    rc |= put_counter(&b, "clover_scheduler_seconds_total",
                      "Seconds the scheduler thread worked (steps, admitting and retiring requests).", "counter",
                      m->sched_s);
    if (m->device[0])
        rc |= put(&b, "# HELP clover_device The backend the model runs on (cpu, cuda).\n# TYPE clover_device gauge\n"
                      "clover_device{device=\"%s\"} 1\n", m->device);
    pthread_mutex_unlock(&m->mu);
    rc |= put_counter(&b, "clover_queue_length", "Requests waiting for the model.", "gauge", (double)queue_length);
    rc |= put_counter(&b, "clover_queue_capacity", "Requests that may wait before 429.", "gauge",
                      (double)queue_capacity);
    rc |= put_counter(&b, "clover_busy", "1 while a generation runs.", "gauge", (double)busy);
    if (rc) {
        byte_buf_free(&b);
        return NULL;
    }
    *len = b.n;
    return b.v;
}
