/*
 * metrics.h: the counters behind GET /metrics (Prometheus text format 0.0.4).
 * Connection threads count requests, the scheduler counts generations; one
 * mutex, taken for a few additions, is cheaper than anything it guards.
 */
#ifndef CLOVER_SERVER_METRICS_H
#define CLOVER_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* The routes, as labels: a fixed set, so a client cannot grow the label space. */
typedef enum server_route {
    ROUTE_CHAT = 0,
    ROUTE_COMPLETIONS,
    ROUTE_MODELS,
    ROUTE_HEALTH,
    ROUTE_METRICS,
    ROUTE_OTHER,
    ROUTE_COUNT
} server_route;

const char *metrics_route_name(server_route r); /* "/v1/chat/completions", ..., "other" */

typedef struct metrics metrics;

metrics *metrics_create(void); /* NULL when out of memory */
void metrics_free(metrics *m);

/* A request answered with an HTTP status (499: the client left first). */
void metrics_count_request(metrics *m, server_route route, int status);

/* A generation the scheduler ran (cancelled: the client left or the server stopped); snapshot_s: its
 * seconds taking and restoring the prompt snapshot (host work between the passes). */
void metrics_count_generation(metrics *m, size_t prompt_tokens, size_t reused_tokens, size_t completion_tokens,
                              size_t passes, double busy_s, double snapshot_s, int cancelled);
/* One engine step of the scheduler (clover_batch_step_ex): the requests and
 * token rows it carried, the model passes the backend ran for them, the
 * seconds inside the backend and of the whole step. How full the passes are
 * is sequences / passes; the step's host work is step_s - backend_s. A
 * step with no sequence (it only emitted last tokens) adds its seconds only. */
void metrics_count_step(metrics *m, size_t sequences, size_t rows, uint64_t passes, double backend_s, double step_s);
/* Seconds the scheduler thread worked (admitting, stepping, retiring) in one round of its loop. */
void metrics_count_scheduler(metrics *m, double seconds);

/* A queued request whose client left before it ran. */
void metrics_count_cancelled(metrics *m);

/* The backend the model runs on ("cpu", "cuda"), shown as clover_device{device="..."} 1. */
void metrics_set_device(metrics *m, const char *device);

/* The exposition text (malloc'd, NUL-terminated) or NULL when out of memory. */
char *metrics_render(metrics *m, size_t queue_length, size_t queue_capacity, int busy, size_t *len);

#endif
