/*
 * metrics.h: the counters behind GET /metrics (Prometheus text format 0.0.4).
 * Connection threads count requests, the scheduler counts generations; one
 * mutex, taken for a few additions, is cheaper than anything it guards.
 */
#ifndef CLOVER_SERVER_METRICS_H
#define CLOVER_SERVER_METRICS_H

#include <stddef.h>

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

/* A generation the scheduler ran (cancelled: the client left or the server stopped). */
void metrics_count_generation(metrics *m, size_t prompt_tokens, size_t reused_tokens, size_t completion_tokens,
                              size_t passes, double busy_s, int cancelled);
/* A queued request whose client left before it ran. */
void metrics_count_cancelled(metrics *m);

/* The backend the model runs on ("cpu", "cuda"), shown as clover_device{device="..."} 1. */
void metrics_set_device(metrics *m, const char *device);

/* The exposition text (malloc'd, NUL-terminated) or NULL when out of memory. */
char *metrics_render(metrics *m, size_t queue_length, size_t queue_capacity, int busy, size_t *len);

#endif
