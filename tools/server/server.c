/*
 * server.c: the libmicrohttpd daemon, request bodies, keys and the log line.
 *
 * Connections: the gate (gate.c) accepts them and hands each to MHD once
 * its header is in. MHD runs event-driven: an epoll loop in a fixed pool
 * of threads (--http-threads), so an idle or slow connection costs a
 * socket and no thread. A request waiting for the model suspends its
 * connection (routes.c) and the scheduler's progress resumes it; the
 * waiter (waiter.c) notices a suspended client that leaves. Every answer
 * closes its connection (Connection: close), so every request's header
 * passes the gate and its deadline.
 *
 * Deadlines: the header must be in within --request-deadline of the
 * connect (the gate), the body by the same deadline plus its length at a
 * byte-rate floor (BODY_RATE_FLOOR), so neither a trickle nor a stall
 * extends it; the body watch (body_watch.c) answers a late body with a JSON
 * 408. --timeout is MHD's idle timeout for the rest: a client that stops
 * reading its answer.
 *
 * Expect: 100-continue: a request that will be refused whatever its body
 * (no key, too large, not JSON) is answered at once, so MHD never sends the
 * 100 that would invite the body.
 *
 * Bodies: accumulated up to --max-body. A larger body is read and dropped
 * and then answered 413 (answering before it is read would make the kernel
 * reset the connection and the client could lose the answer); one that
 * announces or sends far more is cut off at once.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server_internal.h"
#include "webui.h"

#define DEFAULT_QUEUE 256 /* a queued request costs memory only: 256 concurrent clients of one proxy all wait */
#define DEFAULT_MAX_BODY (8u << 20)
#define DEFAULT_TIMEOUT_S 30
#define DEFAULT_SESSIONS 4
#define DEFAULT_DEADLINE_S 10
#define DEFAULT_PER_ADDRESS 64
#define DEFAULT_MAX_CONNECTIONS 4096
#define DEFAULT_HTTP_THREADS 4
#define DEFAULT_GRACE_S 30
#define FLUSH_S 5          /* after the grace: for the cut answers to reach their clients */
#define MAX_HEADER 16384   /* request line + headers (the gate's limit; MHD gets room for it) */
#define MAX_URL 8192
#define BODY_RATE_FLOOR (128u << 10) /* bytes/s: a body gets --request-deadline plus its length at this rate */
#define MAX_FIELDS 256   /* header lines: MHD keeps each one in its connection's pool */

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
    if (!strncmp(url, "/v1/models/", 11) && url[11]) return ROUTE_MODELS; /* one model: routes.c reads the id */
    return ROUTE_OTHER;
}

/* A copy fit for one log line: printable ASCII, bounded. */
static void printable(char *out, size_t cap, const char *in) {
    size_t k = 0;
    for (; in && *in && k + 1 < cap; in++)
        out[k++] = isprint((unsigned char)*in) ? *in : '?';
    out[k] = '\0';
}

static int connection_fd(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* Equal in time independent of where they differ (and of the key's length, beyond its own). */
static int same_secret(const char *given, size_t gn, const char *key) {
    size_t kn = strlen(key);
    unsigned char diff = (unsigned char)(gn != kn);
    for (size_t i = 0; i < gn; i++)
        diff |= (unsigned char)(given[i] ^ (kn ? key[i % kn] : 0));
    return diff == 0;
}

/* The request carries "Authorization: Bearer KEY" with one of the keys (all are compared). */
static int authorized(const server *s, struct MHD_Connection *conn) {
    if (!s->n_keys) return 1;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    const char *k = h + 7;
    while (*k == ' ')
        k++;
    size_t n = strlen(k);
    while (n && (k[n - 1] == ' ' || k[n - 1] == '\t'))
        n--;
    int ok = 0;
    for (size_t i = 0; i < s->n_keys; i++)
        ok |= same_secret(k, n, s->keys[i]);
    return ok;
}

/* Content-Type names JSON: application/json, any case, parameters allowed. */
static int json_content_type(const char *ct) {
    if (!ct) return 0;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (strncasecmp(ct, "application/json", 16)) return 0;
    ct += 16;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

static int expects_continue(struct MHD_Connection *conn) {
    const char *x = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    return x && !strcasecmp(x, "100-continue");
}

/* The first call: the headers are in. */
static enum MHD_Result on_headers(server *s, struct MHD_Connection *conn, const char *url, const char *method,
                                  void **con_cls) {
    request_ctx *rc = calloc(1, sizeof *rc);
    if (!rc) return MHD_NO;
    rc->t0 = job_now();
    rc->route = route_of(url);
    pthread_mutex_lock(&s->mu);
    s->active++;
    pthread_mutex_unlock(&s->mu);
    printable(rc->method, sizeof rc->method, method);
    printable(rc->path, sizeof rc->path, url);
    if (rc->route == ROUTE_MODELS && url[10] == '/') rc->model_asked = strdup(url + 11);
    *con_cls = rc;
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long length = cl ? strtoull(cl, NULL, 10) : 0;
    double accepted = gate_accepted_at(s->gate, connection_fd(conn));
    rc->deadline = (accepted > 0 ? accepted : rc->t0) + s->o.deadline_s + (double)length / BODY_RATE_FLOOR;
    double left = rc->deadline - rc->t0;
    /* MHD's idle timeout only after the deadline: the body watch answers a late body first */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)(left > 0 ? left : 0) + 3u);
    rc->unauthorized = rc->route != ROUTE_HEALTH && !(!s->o.no_webui && webui_find(url)) && !authorized(s, conn);
    rc->not_json = (rc->route == ROUTE_CHAT || rc->route == ROUTE_COMPLETIONS) && !strcmp(method, "POST") &&
                   !json_content_type(MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                                   MHD_HTTP_HEADER_CONTENT_TYPE));
    server_error e;
    if (!rc->unauthorized && length > (expects_continue(conn) ? s->o.max_body : drain_limit(s))) {
        server_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                         "the request body is %llu bytes; this server takes at most %zu (--max-body)", length,
                         s->o.max_body);
        rc->body_seen = (size_t)length;
        return routes_send_error(conn, rc, &e);
    }
    if (expects_continue(conn) && (rc->unauthorized || rc->not_json)) /* refused whatever the body says */
        return rc->unauthorized ? server_send_unauthorized(conn, rc) : routes_send_unsupported(conn, rc);
    if (length) {
        atomic_store(&rc->body_state, BODY_READING);
        if (body_watch_add(s->bw, &rc->body_state, connection_fd(conn), rc->deadline, s->tls)) return MHD_NO;
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    server *s = cls;
    request_ctx *rc = *con_cls;
    if (!rc) return on_headers(s, conn, url, method, con_cls);
    if (atomic_load(&rc->body_state) == BODY_CUT) return MHD_NO; /* answered 408 by the body watch */
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        rc->body_seen += n;
        if (!rc->too_large && !rc->unauthorized && !rc->not_json &&
            (rc->route == ROUTE_CHAT || rc->route == ROUTE_COMPLETIONS)) {
            if (rc->body.n + n > s->o.max_body) {
                rc->too_large = 1;
                byte_buf_free(&rc->body);
            } else if (byte_buf_append(&rc->body, upload, n)) {
                return MHD_NO;
            }
        }
        return rc->body_seen > drain_limit(s) ? MHD_NO : MHD_YES;
    }
    int reading = BODY_READING;
    if (atomic_compare_exchange_strong(&rc->body_state, &reading, BODY_DONE))
        body_watch_remove(s->bw, &rc->body_state); /* the body is in: the watch lets it go */
    else if (reading == BODY_CUT)
        return MHD_NO;
    if (!rc->job) MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, s->o.timeout_s);
    if (rc->unauthorized) return server_send_unauthorized(conn, rc);
    return routes_dispatch(s, conn, rc, method);
}

enum MHD_Result server_send_unauthorized(struct MHD_Connection *conn, request_ctx *rc) {
    server_error e;
    server_error_set(&e, 401, "invalid_request_error", "invalid_api_key", NULL,
                     "%s", "a valid API key is required: send Authorization: Bearer KEY");
    return routes_send_error(conn, rc, &e);
}

/* Waits (bounded) for a cancelled job to stop, so the log line counts the tokens it made. */
static void wait_for_job_end(job *j) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += 2;
    pthread_mutex_lock(&j->mu);
    while (j->state == JOB_RUNNING && pthread_cond_timedwait(&j->cv, &j->mu, &until) == 0) {
    }
    pthread_mutex_unlock(&j->mu);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)conn;
    server *s = cls;
    request_ctx *rc = *con_cls;
    if (!rc) return;
    *con_cls = NULL;
    if (atomic_load(&rc->body_state) == BODY_READING) body_watch_remove(s->bw, &rc->body_state); /* left mid-body */
    if (atomic_load(&rc->body_state) == BODY_CUT) rc->status = 408;
    int status = rc->status;
    const char *note = "";
    job *j = rc->job;
    int left = 0;
    size_t n_jobs = rc->choices ? rc->n_choices : j ? 1 : 0;
    job **js = rc->choices ? rc->choices : &rc->job;
    for (size_t i = 0; i < n_jobs; i++) {
        job *o = js[i];
        if (rc->watched) waiter_remove(s->waiter, o);
        pthread_mutex_lock(&o->mu);
        left |= o->client_cancelled;
        o->resume = NULL; /* the connection is gone: nothing may resume it */
        o->conn = NULL;
        o->suspended = 0;
        pthread_mutex_unlock(&o->mu);
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) o->cancel = 1; /* nobody will read the rest */
    }
    if (toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED) {
        note = status ? " (timed out while reading the answer: cancelled)" : " (timed out)";
        status = 408;
    } else if (status == 408 && !j) {
        note = " (the body missed --request-deadline)";
    } else if (left || toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
        status = 499;
        note = j ? " (client left: cancelled)" : " (client left)";
    }
    for (size_t i = 0; i < n_jobs; i++)
        if (js[i]->cancel) wait_for_job_end(js[i]);
    metrics_count_request(s->mt, rc->route, status);
    size_t prompt = 0, completion = 0;
    for (size_t i = 0; i < n_jobs; i++) { /* n > 1: the prompt once, every choice's tokens */
        pthread_mutex_lock(&js[i]->mu);
        prompt = js[i]->n_prompt;
        completion += js[i]->completion_tokens;
        pthread_mutex_unlock(&js[i]->mu);
    }
    fprintf(stderr, "clover serve: %s %s %d tokens %zu+%zu %.3f s%s\n", rc->method, rc->path, status, prompt,
            completion, job_now() - rc->t0, note);
    for (size_t i = 0; i < n_jobs; i++)
        job_unref(js[i]);
    free(rc->choices);
    free(rc->model_asked);
    byte_buf_free(&rc->body);
    free(rc);
    pthread_mutex_lock(&s->mu);
    if (--s->active == 0) pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
}

/* A connection handed over by the gate ended: its address's slot is free again. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code) {
    (void)socket_ctx;
    server *s = cls;
    if (code != MHD_CONNECTION_NOTIFY_CLOSED) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) gate_release(s->gate, ci->client_addr);
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
    if (!o->deadline_s) o->deadline_s = DEFAULT_DEADLINE_S;
    if (!o->per_address) o->per_address = DEFAULT_PER_ADDRESS;
    if (!o->max_connections) o->max_connections = DEFAULT_MAX_CONNECTIONS;
    if (!o->http_threads) o->http_threads = DEFAULT_HTTP_THREADS;
    if (!o->grace_set) o->grace_s = DEFAULT_GRACE_S;
}

/* Connections need descriptors: the soft limit goes up to the hard one, and the total stays below it. */
static size_t descriptor_room(size_t want) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return want;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur == RLIM_INFINITY) return want;
    size_t room = rl.rlim_cur > 256 ? (size_t)rl.rlim_cur - 256 : 16; /* 64 of it: MHD's slack over the total */
    return want < room ? want : room;
}

static int listen_on(const struct sockaddr_storage *addr, int ipv6, char *err, size_t len, const server_options *o) {
    int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    socklen_t alen = ipv6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (fd < 0 || bind(fd, (const struct sockaddr *)addr, alen) || listen(fd, 1024)) {
        if (fd >= 0) close(fd);
        return fail(err, len, "cannot listen on %s port %u (in use, or not an address of this machine?)", o->host,
                    o->port);
    }
    return fd;
}

static unsigned bound_port(int fd) {
    struct sockaddr_storage a;
    socklen_t n = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &n)) return 0;
    if (a.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&a)->sin6_port);
    return ntohs(((struct sockaddr_in *)&a)->sin_port);
}

static int copy_keys(server *s, char *err, size_t len) {
    if (!s->o.n_api_keys) return 0;
    s->keys = calloc(s->o.n_api_keys, sizeof *s->keys);
    if (!s->keys) return fail(err, len, "out of memory");
    for (size_t i = 0; i < s->o.n_api_keys; i++) {
        s->keys[i] = strdup(s->o.api_keys[i]);
        if (!s->keys[i]) return fail(err, len, "out of memory");
        s->n_keys++;
    }
    s->o.api_keys = NULL;
    return 0;
}

/* --test-script: the answers, tokenized once. */
static int load_scripts(server *s, const char *text, char *err, size_t len) {
    size_t n = 1;
    for (const char *p = text; *p; p++) n += *p == '\x1e';
    s->scripts = calloc(n, sizeof *s->scripts);
    s->script_len = calloc(n, sizeof *s->script_len);
    if (!s->scripts || !s->script_len) return fail(err, len, "out of memory");
    const char *at = text;
    for (size_t k = 0; k < n; k++) {
        const char *end = strchr(at, '\x1e');
        if (!end) end = at + strlen(at);
        clover_error te = {0};
        if (clover_tokenize(s->model, at, (size_t)(end - at), 1, &s->scripts[k], &s->script_len[k], &te))
            return fail(err, len, "--test-script: %s", te.message);
        s->n_scripts = k + 1;
        if (!s->script_len[k]) return fail(err, len, "--test-script: answer %zu is empty", k);
        at = *end ? end + 1 : end;
    }
    return 0;
}

void server_script_next(server *s, job *j) {
    if (!s->n_scripts) return;
    pthread_mutex_lock(&s->mu);
    size_t k = s->script_next++ % s->n_scripts;
    pthread_mutex_unlock(&s->mu);
    j->script = s->scripts[k];
    j->n_script = s->script_len[k];
    j->params.ignore_eos = 1;
}

static int start_engine(server *s, char *err, size_t len) {
    clover_model_info info;
    clover_model_get_info(s->model, &info);
    size_t ctx = s->o.context ? s->o.context : info.n_ctx_train;
    if (ctx < 2) return fail(err, len, "the context is %zu tokens; give --ctx N (at least 2)", ctx);
    s->prepare = (prepare_config){.model = s->model, .model_id = s->model_id, .context = ctx,
                                  .n_vocab = info.n_vocab, .record = info.record};
    if (s->o.test_script && load_scripts(s, s->o.test_script, err, len)) return -1;
    s->o.test_script = NULL;
    s->mt = metrics_create();
    if (!s->mt) return fail(err, len, "out of memory");
    scheduler_options so = {.queue_capacity = s->o.queue, .n_sessions = s->o.n_sessions,
                            .max_batch = s->o.max_batch ? s->o.max_batch : 8};
    clover_session_params_init(&so.session);
    so.session.n_threads = s->o.n_threads;
    so.session.device = s->o.device;
    so.session.gpu_mem = s->o.gpu_mem;
    /* 64-row prompt chunks, not the CPU's 512: a chunk is one pass the other streams wait behind (a 512-row one
     * takes ~30 s on two cores for the 35B-A3B geometry, a 64-row one ~5 s), and a server serves many streams */
    so.session.max_rows = 64;
    if (s->o.snapshot_set) {
        so.session.no_snapshot = s->o.snapshot_mib == 0;
        so.session.snapshot_max_bytes = s->o.snapshot_mib << 20;
    }
    /* room for the last block: a diffusion answer that ends inside a block still previews all of it */
    so.session.max_context = ctx + (info.record ? info.record->block_size : 1);
    clover_error e = {0};
    if (scheduler_create(&s->sched, s->model, &so, s->mt, &e)) return fail(err, len, "%s", e.message);
    metrics_set_device(s->mt, clover_engine_backend(scheduler_engine(s->sched)));
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
    int ipv6 = 0, tls = s->o.tls_key_pem && s->o.tls_cert_pem;
    s->tls = tls;
    if (copy_keys(s, err, len) || resolve(s->o.host, s->o.port, &addr, &ipv6, err, len) ||
        start_engine(s, err, len)) {
        server_stop(s);
        return -1;
    }
    if (waiter_start(&s->waiter) || body_watch_start(&s->bw)) {
        fail(err, len, "cannot start the waiter threads");
        server_stop(s);
        return -1;
    }
    int lfd = listen_on(&addr, ipv6, err, len, &s->o);
    if (lfd < 0) {
        server_stop(s);
        return -1;
    }
    s->o.max_connections = descriptor_room(s->o.max_connections);
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0) | (tls ? MHD_USE_TLS : 0);
    struct MHD_OptionItem tls_opts[] = {
        {tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, (void *)s->o.tls_key_pem},
        {MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)s->o.tls_cert_pem},
        {MHD_OPTION_END, 0, NULL}};
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)s->o.http_threads, MHD_OPTION_CONNECTION_TIMEOUT, s->o.timeout_s,
        /* room over the gate's total: MHD counts a connection until its cleanup, a moment after the gate's release */
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->o.max_connections + 64u, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)(4 * MAX_HEADER), MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, s, MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
    s->o.tls_key_pem = s->o.tls_cert_pem = NULL;
    if (!s->daemon) {
        close(lfd);
        fail(err, len, tls ? "cannot start HTTPS (is the key or the certificate not PEM, or do they not match?)"
                           : "cannot start the HTTP daemon");
        server_stop(s);
        return -1;
    }
    s->port = bound_port(lfd);
    gate_options go = {.listen_fd = lfd, .per_address = s->o.per_address, .max_connections = s->o.max_connections,
                       .deadline_s = s->o.deadline_s, .max_header = MAX_HEADER, .max_url = MAX_URL,
                       .max_fields = MAX_FIELDS, .tls = tls};
    if (gate_start(&s->gate, s->daemon, &go, err, len)) {
        server_stop(s);
        return -1;
    }
    *out = s;
    return 0;
}

unsigned server_port(const server *s) { return s->port; }

const char *server_device(const server *s, const char **why) {
    clover_engine *e = scheduler_engine(s->sched);
    if (why) *why = clover_engine_device_reason(e);
    return clover_engine_backend(e);
}

/* Waits up to seconds for every request to end; 1 when they all have. */
static int wait_for_requests(server *s, unsigned seconds) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += seconds;
    pthread_mutex_lock(&s->mu);
    while (s->active && pthread_cond_timedwait(&s->idle, &s->mu, &until) == 0) {
    }
    int idle = s->active == 0;
    pthread_mutex_unlock(&s->mu);
    return idle;
}

void server_stop(server *s) {
    if (!s) return;
    gate_close(s->gate);      /* no new connections */
    scheduler_close(s->sched); /* the queued ones: 503 */
    if (s->daemon && !wait_for_requests(s, s->o.grace_s)) {
        scheduler_stop(s->sched); /* past the grace: cut the running one */
        wait_for_requests(s, FLUSH_S);
    }
    scheduler_stop(s->sched); /* every job is done now, so no connection stays suspended */
    if (s->daemon) MHD_stop_daemon(s->daemon);
    gate_free(s->gate);
    waiter_free(s->waiter);
    body_watch_free(s->bw);
    scheduler_free(s->sched);
    metrics_free(s->mt);
    for (size_t i = 0; i < s->n_keys; i++)
        free(s->keys[i]);
    free(s->keys);
    for (size_t k = 0; k < s->n_scripts; k++)
        clover_free(s->scripts[k]);
    free(s->scripts);
    free(s->script_len);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
