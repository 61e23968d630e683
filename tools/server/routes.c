/*
 * routes.c: the endpoints. A generation request is parsed, prepared and
 * queued on an MHD pool thread; then its connection suspends itself until
 * the scheduler's progress resumes it (job_signal_locked), so no thread is
 * held while the model works. A non-streaming request answers once its job
 * is done; a stream starts once its job runs, so a request that never ran
 * (queued at shutdown: 503, or failed) is answered with its own status and
 * a JSON error rather than a 200 stream carrying an error event. While a
 * stream waits for the next tokens its connection is suspended again.
 */
#include <stdlib.h>
#include <string.h>

#include "response.h"
#include "server_internal.h"
#include "webui.h"

enum MHD_Result routes_send_body(struct MHD_Connection *conn, request_ctx *rc, int status, char *body, size_t len,
                                 const char *content_type) {
    if (!body) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                                  "\"param\":null,\"code\":null}}";
        status = 500;
        body = strdup(oom);
        len = sizeof oom - 1;
        if (!body) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close"); /* the next request goes through the gate */
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == 429 || status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 405) {
        const char *allow = rc->route == ROUTE_CHAT || rc->route == ROUTE_COMPLETIONS ? "POST" : "GET, HEAD";
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    }
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    if (ok == MHD_YES) rc->status = status;
    return ok;
}

enum MHD_Result routes_send_error(struct MHD_Connection *conn, request_ctx *rc, const server_error *e) {
    size_t len = 0;
    char *body = response_error_body(e, &len);
    return routes_send_body(conn, rc, e->status, body, len, "application/json");
}

enum MHD_Result routes_send_unsupported(struct MHD_Connection *conn, request_ctx *rc) {
    server_error e;
    server_error_set(&e, 415, "invalid_request_error", "unsupported_media_type", NULL, "%s",
                     "the body must be JSON, sent with Content-Type: application/json");
    return routes_send_error(conn, rc, &e);
}

static enum MHD_Result send_json(struct MHD_Connection *conn, request_ctx *rc, char *body, size_t len) {
    return routes_send_body(conn, rc, 200, body, len, "application/json");
}

/* ---- streaming ---- */

/* A stream sends its choices one after another (n > 1: each choice's
 * chunks whole, in index order; the later ones are generated meanwhile and
 * wait in their buffers), then the request's tail (usage, [DONE]). */
typedef struct stream_ctx {
    job **jobs; /* [n] references */
    size_t n, cur;
    struct MHD_Connection *conn;
    byte_buf tail; /* n > 1: response_sse_tail, once every choice is sent */
    int tail_made;
} stream_ctx;

static void resume_connection(void *conn) { MHD_resume_connection(conn); }

/* Suspends the connection until the job's next progress (call with j->mu held, then return). */
static void suspend_locked(job *j, struct MHD_Connection *conn) {
    j->suspended = 1;
    MHD_suspend_connection(conn);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ctx *sc = cls;
    for (;;) {
        if (sc->cur == sc->n) { /* every choice sent: the tail */
            if (!sc->tail_made) {
                sc->tail_made = 1;
                if (response_sse_tail(sc->jobs, sc->n, &sc->tail)) return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            size_t n = byte_buf_avail(&sc->tail) ? byte_buf_take(&sc->tail, buf, max) : 0;
            return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
        }
        job *j = sc->jobs[sc->cur];
        pthread_mutex_lock(&j->mu);
        size_t n = byte_buf_avail(&j->sse) ? byte_buf_take(&j->sse, buf, max) : 0;
        ssize_t rc = (ssize_t)n;
        int next = 0;
        if (!n) {
            if (j->state == JOB_DONE)
                next = 1;
            else if (j->client_cancelled || !j->resume)
                rc = MHD_CONTENT_READER_END_WITH_ERROR;
            else
                suspend_locked(j, sc->conn); /* 0 bytes now: called again once resumed */
        }
        pthread_mutex_unlock(&j->mu);
        if (!next) return rc;
        if (sc->n == 1) return MHD_CONTENT_READER_END_OF_STREAM; /* its end carried the tail */
        sc->cur++;
    }
}

static void stream_free(void *cls) {
    stream_ctx *sc = cls;
    for (size_t i = 0; i < sc->n; i++)
        job_unref(sc->jobs[i]);
    free(sc->jobs);
    byte_buf_free(&sc->tail);
    free(sc);
}

/* The request's jobs: every choice's, or the one. */
static job **jobs_of(request_ctx *rc, size_t *n) {
    *n = rc->choices ? rc->n_choices : 1;
    return rc->choices ? rc->choices : &rc->job;
}

static void cancel_all(request_ctx *rc) {
    size_t n;
    job **js = jobs_of(rc, &n);
    for (size_t i = 0; i < n; i++)
        js[i]->cancel = 1;
}

static int connection_fd(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static enum MHD_Result start_stream(struct MHD_Connection *conn, request_ctx *rc) {
    size_t n;
    job **js = jobs_of(rc, &n);
    stream_ctx *sc = calloc(1, sizeof *sc);
    job **copy = calloc(n, sizeof *copy);
    if (!sc || !copy) {
        free(sc);
        free(copy);
        cancel_all(rc);
        return MHD_NO;
    }
    for (size_t i = 0; i < n; i++) {
        job_ref(js[i]);
        copy[i] = js[i];
    }
    *sc = (stream_ctx){.jobs = copy, .n = n, .conn = conn};
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, sc, stream_free);
    if (!r) {
        cancel_all(rc);
        stream_free(sc);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    if (ok == MHD_YES)
        rc->status = 200;
    else
        cancel_all(rc);
    return ok;
}

/* ---- generation ---- */

/* The job is queued: answer it if it is far enough, else suspend until it is. Called again on each resume. */
static enum MHD_Result answer_or_wait(struct MHD_Connection *conn, request_ctx *rc) {
    job *j = rc->job;
    pthread_mutex_lock(&j->mu);
    if (j->client_cancelled) {
        pthread_mutex_unlock(&j->mu);
        return MHD_NO; /* the client left: its generation is cancelled */
    }
    int done = j->state == JOB_DONE, failed = j->failed;
    if (!done && !(j->stream && j->state == JOB_RUNNING)) {
        suspend_locked(j, conn);
        pthread_mutex_unlock(&j->mu);
        return MHD_YES;
    }
    pthread_mutex_unlock(&j->mu);
    if (j->stream && !(done && failed)) return start_stream(conn, rc);
    size_t n, len = 0;
    job **js = jobs_of(rc, &n);
    for (size_t i = 1; i < n; i++) { /* n > 1: every choice done (waiting on one at a time) */
        job *o = js[i];
        pthread_mutex_lock(&o->mu);
        if (o->client_cancelled) {
            pthread_mutex_unlock(&o->mu);
            return MHD_NO;
        }
        if (o->state != JOB_DONE) {
            suspend_locked(o, conn);
            pthread_mutex_unlock(&o->mu);
            return MHD_YES;
        }
        if (o->failed && !failed) {
            failed = 1;
            j = o;
        }
        pthread_mutex_unlock(&o->mu);
    }
    char *body = response_choices_body(js, n, &len);
    return routes_send_body(conn, rc, failed ? j->error.status : 200, body, len, "application/json");
}

/* n > 1: the other choices, each its own job (the same prompt and id, seed + index), queued after choice 0. */
static int more_choices(server *s, const server_request *req, uint64_t fresh, request_ctx *rc, struct MHD_Connection *conn,
                        server_error *e) {
    rc->choices = calloc(req->n, sizeof *rc->choices);
    if (!rc->choices) return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    rc->choices[0] = rc->job;
    rc->n_choices = 1;
    rc->job->grouped = 1;
    for (uint32_t k = 1; k < req->n; k++) {
        job *o = job_create();
        if (!o) return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        rc->choices[rc->n_choices++] = o;
        if (request_prepare(req, &s->prepare, fresh, o, e)) return -1;
        server_script_next(s, o);
        o->params.seed = rc->job->params.seed + k; /* each choice draws its own stream */
        o->choice = k;
        o->grouped = 1;
        if (o->stream && response_sse_start(o, &o->sse))
            return server_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        o->resume = resume_connection;
        o->conn = conn;
    }
    return 0;
}

static enum MHD_Result generate(server *s, struct MHD_Connection *conn, request_ctx *rc) {
    if (rc->job) return answer_or_wait(conn, rc); /* resumed */
    server_error e = {0};
    if (rc->not_json) return routes_send_unsupported(conn, rc);
    if (rc->too_large) {
        server_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                         "the request body is %zu bytes or more; this server takes at most %zu (--max-body)",
                         rc->body_seen, s->o.max_body);
        return routes_send_error(conn, rc, &e);
    }
    server_request req;
    server_endpoint ep = rc->route == ROUTE_CHAT ? SERVER_ENDPOINT_CHAT : SERVER_ENDPOINT_COMPLETION;
    server_parse_options po = {.max_n = (uint32_t)(s->o.max_n ? s->o.max_n : 8)};
    if (server_request_parse(&req, ep, rc->body.v ? rc->body.v : "", rc->body.n, &po, &e))
        return routes_send_error(conn, rc, &e);
    byte_buf_free(&rc->body);
    if (req.n > scheduler_queue_capacity(s->sched)) { /* the choices queue as one: more than fit would wait forever */
        server_error_set(&e, 400, "invalid_request_error", "n_too_large", "n",
                         "n is %u, but this server queues at most %zu requests at once (--queue); ask for fewer",
                         (unsigned)req.n, scheduler_queue_capacity(s->sched));
        server_request_free(&req);
        return routes_send_error(conn, rc, &e);
    }
    job *j = job_create();
    if (!j) {
        server_request_free(&req);
        server_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        return routes_send_error(conn, rc, &e);
    }
    uint64_t fresh = server_fresh_value(s);
    int bad = request_prepare(&req, &s->prepare, fresh, j, &e);
    if (!bad) server_script_next(s, j);
    rc->job = j;
    if (!bad && req.n > 1 && more_choices(s, &req, fresh, rc, conn, &e)) bad = 1;
    server_request_free(&req);
    if (!bad && j->stream && response_sse_start(j, &j->sse)) {
        server_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        bad = 1;
    }
    j->resume = resume_connection;
    j->conn = conn;
    size_t n_jobs;
    job **js = jobs_of(rc, &n_jobs);
    size_t watched = 0;
    for (; !bad && watched < n_jobs; watched++)
        if (waiter_add(s->waiter, js[watched], connection_fd(conn))) {
            server_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
            bad = 1;
            break;
        }
    /* from here on, a resumed call answers (on_completed lets the jobs go) */
    if (bad) {
        for (size_t i = 0; i < n_jobs; i++) {
            if (i < watched) waiter_remove(s->waiter, js[i]);
            js[i]->resume = NULL;
            job_unref(js[i]);
        }
        free(rc->choices);
        rc->choices = NULL;
        rc->n_choices = 0;
        rc->job = NULL;
        return routes_send_error(conn, rc, &e);
    }
    rc->watched = 1;
    int q = scheduler_submit_all(s->sched, js, n_jobs); /* n choices: queued together or not at all */
    if (q == SCHEDULER_FULL) {
        server_error_set(&e, 429, "rate_limit_error", "queue_full", NULL,
                         "the server is busy: %zu requests are already waiting (--queue); retry later",
                         scheduler_queue_capacity(s->sched));
        return routes_send_error(conn, rc, &e);
    }
    if (q == SCHEDULER_STOPPING) {
        server_error_set(&e, 503, "server_error", "shutting_down", NULL, "the server is shutting down");
        return routes_send_error(conn, rc, &e);
    }
    return answer_or_wait(conn, rc);
}

/* ---- the rest ---- */

static enum MHD_Result metrics_page(server *s, struct MHD_Connection *conn, request_ctx *rc) {
    int busy = 0;
    size_t waiting = scheduler_queue_length(s->sched, &busy), len = 0;
    char *text = metrics_render(s->mt, waiting, scheduler_queue_capacity(s->sched), busy, &len);
    return routes_send_body(conn, rc, 200, text, len, "text/plain; version=0.0.4; charset=utf-8");
}

enum MHD_Result routes_dispatch(server *s, struct MHD_Connection *conn, request_ctx *rc, const char *method) {
    server_error e = {0};
    int is_post = !strcmp(method, "POST"), is_get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    size_t len = 0;
    switch (rc->route) {
    case ROUTE_CHAT:
    case ROUTE_COMPLETIONS:
        if (is_post) return generate(s, conn, rc);
        break;
    case ROUTE_MODELS:
        if (is_get && rc->model_asked) {
            if (strcmp(rc->model_asked, s->model_id)) {
                server_error_set(&e, 404, "invalid_request_error", "model_not_found", "model",
                                 "this server has no model '%.100s'; it serves '%s'", rc->model_asked, s->model_id);
                return routes_send_error(conn, rc, &e);
            }
            char *body = response_model_body(s->model_id, s->started, &len);
            return send_json(conn, rc, body, len);
        }
        if (is_get) {
            char *body = response_models_body(s->model_id, s->started, &len);
            return send_json(conn, rc, body, len);
        }
        break;
    case ROUTE_HEALTH:
        if (is_get) return send_json(conn, rc, strdup("{\"status\":\"ok\"}"), 15);
        break;
    case ROUTE_METRICS:
        if (is_get) return metrics_page(s, conn, rc);
        break;
    default:
        if (is_get && !s->o.no_webui) { /* the chat page (tools/server/webui) */
            const webui_asset *a = webui_find(rc->path);
            char *copy = a ? malloc(a->len + 1) : NULL;
            if (copy) memcpy(copy, a->data, a->len);
            if (a) return routes_send_body(conn, rc, 200, copy, a->len, a->content_type);
        }
        server_error_set(&e, 404, "invalid_request_error", "unknown_url", NULL, "unknown route %s %s", rc->method,
                         rc->path);
        return routes_send_error(conn, rc, &e);
    }
    server_error_set(&e, 405, "invalid_request_error", "method_not_allowed", NULL, "%s is not allowed on %s (use %s)",
                     rc->method, rc->path,
                     rc->route == ROUTE_CHAT || rc->route == ROUTE_COMPLETIONS ? "POST" : "GET");
    return routes_send_error(conn, rc, &e);
}
