/*
 * server_internal.h: what server.c (the daemon, bodies, logging) and
 * routes.c (the endpoints) share.
 */
#ifndef CLOVER_SERVER_SERVER_INTERNAL_H
#define CLOVER_SERVER_SERVER_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdint.h>

#include "body_watch.h"
#include "byte_buf.h"
#include "gate.h"
#include "job.h"
#include "metrics.h"
#include "request_prepare.h"
#include "scheduler.h"
#include "server.h"
#include "waiter.h"

struct server {
    struct MHD_Daemon *daemon;
    const clover_model *model;
    server_options o;
    char model_id[128];
    prepare_config prepare;
    scheduler *sched;
    metrics *mt;
    long long started; /* Unix seconds */
    unsigned port;
    pthread_mutex_t mu;
    pthread_cond_t idle; /* signalled when active drops to 0 */
    size_t active;       /* requests between their headers and their end */
    uint64_t rng;        /* SplitMix64 state (under mu): fresh seeds and response ids */
    gate *gate;
    waiter *waiter;
    body_watch *bw;
    int tls;
    char **keys; /* [n_keys] copies of the API keys */
    int32_t **scripts; /* --test-script's answers' ids (clover_free each), [n_scripts] */
    size_t *script_len;
    size_t n_scripts;
    size_t script_next; /* under mu */
    size_t n_keys;
};

/* One HTTP request, from its headers to the end of its response. */
typedef struct request_ctx {
    double t0;
    server_route route;
    char method[12];
    char path[96];    /* printable, for the log line */
    byte_buf body;
    size_t body_seen; /* bytes received, kept or not */
    int too_large;
    int status;       /* the status answered (0: none yet) */
    int unauthorized; /* an API key is required and this request has none that matches */
    char *model_asked; /* GET /v1/models/{id}: the id (malloc'd), else NULL */
    int not_json;     /* a generation request whose Content-Type is not application/json: 415 */
    atomic_int body_state; /* BODY_*: the body's race between its end and its deadline (body_watch.h) */
    double deadline;  /* monotonic: the body must be in by then */
    job *job;         /* a generation request's job (a reference); with n > 1, choice 0 */
    job **choices;    /* n > 1: [n_choices] every choice's job (references; choices[0] == job) */
    size_t n_choices;
    int watched;      /* the job is registered with the waiter */
} request_ctx;

uint64_t server_fresh_value(server *s);
/* The test hook: the next scripted answer for j (nothing when --test-script is off). */
void server_script_next(server *s, job *j);

/* The last call of a request (the whole body is in): answers it. */
enum MHD_Result routes_dispatch(server *s, struct MHD_Connection *conn, request_ctx *rc, const char *method);

/* Queues a JSON body (taking ownership of a malloc'd body) or an error. */
enum MHD_Result routes_send_body(struct MHD_Connection *conn, request_ctx *rc, int status, char *body, size_t len,
                                 const char *content_type);
enum MHD_Result routes_send_error(struct MHD_Connection *conn, request_ctx *rc, const server_error *e);
/* The 401 (no or a wrong API key) and the 415 (a generation body that is not declared JSON). */
enum MHD_Result server_send_unauthorized(struct MHD_Connection *conn, request_ctx *rc);
enum MHD_Result routes_send_unsupported(struct MHD_Connection *conn, request_ctx *rc);

#endif
