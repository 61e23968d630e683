/*
 * server.c: the libmicrohttpd daemon, request bodies and the log line.
 *
 * Threading: one thread per connection (MHD_USE_THREAD_PER_CONNECTION),
 * chosen over one polling thread with suspend/resume because a waiting
 * request must notice its client leaving: MHD does not watch a suspended
 * connection's socket, while a connection thread that waits for the model
 * can look at its own socket every 50 ms and cancel the generation (job.c).
 * The threads are cheap next to the model (one request runs at a time;
 * the others wait in the bounded queue), and their number is capped by
 * the connection limit. Slow clients are bounded by --timeout (MHD drops a
 * connection idle that long while sending the request or reading the
 * answer).
 *
 * Bodies: accumulated up to --max-body. A larger body is read and dropped
 * and then answered 413 (answering before it is read would make the kernel
 * reset the connection and the client could lose the answer); one that
 * announces or sends far more is cut off at once.
 */
#include <ctype.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server_internal.h"

#define DEFAULT_QUEUE 64
#define DEFAULT_MAX_BODY (8u << 20)
#define DEFAULT_TIMEOUT_S 30
#define DEFAULT_SESSIONS 4
#define SHUTDOWN_GRACE_S 5

uint64_t server_fresh_value(server *s) {
    pthread_mutex_lock(&s->mu);
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
    pthread_mutex_unlock(&s->mu);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Bytes a body may reach before the connection is cut instead of answered 413. */
static size_t drain_limit(const server *s) {
    size_t cap = s->o.max_body;
    return cap > ((size_t)-1) / 8 ? (size_t)-1 : 4 * cap + (1u << 20);
}

static server_route route_of(const char *url) {
    static const struct {
        const char *path;
        server_route route;
    } table[] = {{"/v1/chat/completions", ROUTE_CHAT}, {"/v1/completions", ROUTE_COMPLETIONS},
                 {"/v1/models", ROUTE_MODELS},         {"/health", ROUTE_HEALTH},
                 {"/metrics", ROUTE_METRICS}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(url, table[i].path)) return table[i].route;
    return ROUTE_OTHER;
}

/* A copy fit for one log line: printable ASCII, bounded. */
static void printable(char *out, size_t cap, const char *in) {
    size_t k = 0;
    for (; in && *in && k + 1 < cap; in++)
        out[k++] = isprint((unsigned char)*in) ? *in : '?';
    out[k] = '\0';
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    server *s = cls;
    request_ctx *rc = *con_cls;
    if (!rc) { /* the headers are in */
        rc = calloc(1, sizeof *rc);
        if (!rc) return MHD_NO;
        rc->t0 = job_now();
        rc->route = route_of(url);
        pthread_mutex_lock(&s->mu);
        s->active++;
        pthread_mutex_unlock(&s->mu);
        printable(rc->method, sizeof rc->method, method);
        printable(rc->path, sizeof rc->path, url);
        *con_cls = rc;
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > drain_limit(s)) {
            server_error e;
            server_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                             "the request body is %s bytes; this server takes at most %zu (--max-body)", cl,
                             s->o.max_body);
            rc->body_seen = (size_t)strtoull(cl, NULL, 10);
            return routes_send_error(conn, rc, &e);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        rc->body_seen += n;
        if (!rc->too_large && (rc->route == ROUTE_CHAT || rc->route == ROUTE_COMPLETIONS)) {
            if (rc->body.n + n > s->o.max_body) {
                rc->too_large = 1;
                byte_buf_free(&rc->body);
            } else if (byte_buf_append(&rc->body, upload, n)) {
                return MHD_NO;
            }
        }
        return rc->body_seen > drain_limit(s) ? MHD_NO : MHD_YES;
    }
    return routes_dispatch(s, conn, rc, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)conn;
    server *s = cls;
    request_ctx *rc = *con_cls;
    if (!rc) return;
    *con_cls = NULL;
    int status = rc->status;
    const char *note = "";
    job *j = rc->job;
    int left = 0;
    if (j) {
        pthread_mutex_lock(&j->mu);
        left = j->client_cancelled;
        pthread_mutex_unlock(&j->mu);
    }
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && j) j->cancel = 1; /* nobody will read the rest */
    if (toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED) {
        note = status ? " (timed out while reading the answer: cancelled)" : " (timed out)";
        status = 408;
    } else if (left || toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        status = 499;
        note = j ? " (client left: cancelled)" : " (client left)";
    }
    metrics_count_request(s->mt, rc->route, status);
    size_t prompt = 0, completion = 0;
    if (j) {
        pthread_mutex_lock(&j->mu);
        prompt = j->n_prompt;
        completion = j->completion_tokens;
        pthread_mutex_unlock(&j->mu);
    }
    fprintf(stderr, "clover serve: %s %s %d tokens %zu+%zu %.3f s%s\n", rc->method, rc->path, status, prompt,
            completion, job_now() - rc->t0, note);
    job_unref(j);
    byte_buf_free(&rc->body);
    free(rc);
    pthread_mutex_lock(&s->mu);
    if (--s->active == 0) pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    fprintf(stderr, "clover serve: http: %s\n", line);
}

static int fail(char *err, size_t len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int fail(char *err, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

/* The listening address: a numeric address or a name, IPv4 or IPv6. */
static int resolve(const char *host, unsigned port, struct sockaddr_storage *out, int *ipv6, char *err, size_t len) {
    char ps[16];
    snprintf(ps, sizeof ps, "%u", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE},
                    *res = NULL;
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc || !res) return fail(err, len, "--host %s: cannot resolve it (%s)", host, gai_strerror(rc));
    memset(out, 0, sizeof *out);
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *ipv6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return 0;
}

static void options_defaults(server_options *o) {
    if (!o->host) o->host = "127.0.0.1";
    if (!o->model_id) o->model_id = "clover";
    if (!o->queue) o->queue = DEFAULT_QUEUE;
    if (!o->max_body) o->max_body = DEFAULT_MAX_BODY;
    if (!o->timeout_s) o->timeout_s = DEFAULT_TIMEOUT_S;
    if (!o->n_sessions) o->n_sessions = DEFAULT_SESSIONS;
}

static int start_engine(server *s, char *err, size_t len) {
    clover_model_info info;
    clover_model_get_info(s->model, &info);
    size_t ctx = s->o.context ? s->o.context : info.n_ctx_train;
    if (ctx < 2) return fail(err, len, "the context is %zu tokens; give --ctx N (at least 2)", ctx);
    s->prepare = (prepare_config){.model = s->model, .model_id = s->model_id, .context = ctx,
                                  .n_vocab = info.n_vocab, .record = info.record};
    s->mt = metrics_create();
    if (!s->mt) return fail(err, len, "out of memory");
    scheduler_options so = {.queue_capacity = s->o.queue, .n_sessions = s->o.n_sessions,
                            .max_batch = s->o.max_batch ? s->o.max_batch : 8};
    clover_session_params_init(&so.session);
    so.session.n_threads = s->o.n_threads;
    so.session.device = s->o.device;
    if (s->o.snapshot_set) {
        so.session.no_snapshot = s->o.snapshot_mib == 0;
        so.session.snapshot_max_bytes = s->o.snapshot_mib << 20;
    }
    /* room for the last block: a diffusion answer that ends inside a block still previews all of it */
    so.session.max_context = ctx + (info.record ? info.record->block_size : 1);
    clover_error e = {0};
    if (scheduler_create(&s->sched, s->model, &so, s->mt, &e)) return fail(err, len, "%s", e.message);
    return 0;
}

int server_start(server **out, const clover_model *m, const server_options *o, char *err, size_t len) {
    *out = NULL;
    server *s = calloc(1, sizeof *s);
    if (!s) return fail(err, len, "out of memory");
    s->model = m;
    s->o = *o;
    options_defaults(&s->o);
    snprintf(s->model_id, sizeof s->model_id, "%s", s->o.model_id);
    s->o.model_id = s->model_id;
    s->started = (long long)time(NULL);
    s->rng = (uint64_t)s->started * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    struct sockaddr_storage addr;
    int ipv6 = 0;
    if (resolve(s->o.host, s->o.port, &addr, &ipv6, err, len) || start_engine(s, err, len)) {
        server_stop(s);
        return -1;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0);
    size_t limit = 2 * s->o.queue + 64;
    s->daemon = MHD_start_daemon(flags, (uint16_t)s->o.port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
                                 on_mhd_log, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                 MHD_OPTION_CONNECTION_TIMEOUT, s->o.timeout_s, MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned)(limit > 4000 ? 4000 : limit), MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_END);
    if (!s->daemon) {
        fail(err, len, "cannot listen on %s port %u (in use, or not an address of this machine?)", s->o.host,
             s->o.port);
        server_stop(s);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->o.port;
    *out = s;
    return 0;
}

unsigned server_port(const server *s) { return s->port; }

/* Lets the answers of the requests ended by scheduler_stop reach their clients (a few seconds at most). */
static void wait_for_requests(server *s) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += SHUTDOWN_GRACE_S;
    pthread_mutex_lock(&s->mu);
    while (s->active && pthread_cond_timedwait(&s->idle, &s->mu, &until) == 0) {
    }
    pthread_mutex_unlock(&s->mu);
}

void server_stop(server *s) {
    if (!s) return;
    if (s->daemon) MHD_quiesce_daemon(s->daemon);
    scheduler_stop(s->sched);
    if (s->daemon) {
        wait_for_requests(s);
        MHD_stop_daemon(s->daemon);
    }
    scheduler_free(s->sched);
    metrics_free(s->mt);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
