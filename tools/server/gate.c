/*
 * gate.c: the accept loop, the held connections and the per-address count.
 *
 * Held connections are in accept order in one list, and since every
 * deadline is the accept time plus the same constant, the list is also in
 * deadline order: the gate only ever looks at its head to expire them.
 * A refused connection is answered (JSON), its write side shut, and kept
 * in a second list for a second while its remaining input is drained, so
 * that closing it with unread bytes does not reset the connection and
 * destroy the answer before the client has read it.
 *
 * The per-address count covers a connection from its accept until it is
 * closed, by the gate or (handed over) by MHD, which reports that through
 * gate_release.
 */
#define _GNU_SOURCE /* accept4 */
#include "gate.h"

#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "response.h"

#define GATE_BUCKETS 4096
#define GATE_LINGER_S 1.0
#define GATE_MAX_UNCOUNTED 128 /* refused at the accept and lingering (within the descriptors server.c keeps spare) */

typedef struct addr_key {
    unsigned char a[16];
    int family;
} addr_key;

typedef struct addr_slot {
    addr_key k;
    size_t n;
    struct addr_slot *next;
} addr_slot;

typedef struct held {
    int fd;
    double deadline;
    int closing; /* answered: draining until EOF or the deadline */
    int counted; /* holds a slot in the address table (refused at the accept: not) */
    struct sockaddr_storage addr;
    socklen_t addr_len;
    struct held *prev, *next;
} held;

typedef struct held_list {
    held *head, *tail;
} held_list;

struct gate {
    gate_options o;
    struct MHD_Daemon *daemon;
    int ep, wake;
    pthread_t thread;
    int started, closed;

    pthread_mutex_t mu; /* the address table and total (MHD threads release) */
    addr_slot *buckets[GATE_BUCKETS];
    size_t total;

    held_list waiting, closing; /* the gate thread's own */
    size_t uncounted;           /* of closing: refused at the accept */
    char *scratch;              /* [max_header + 1] */
    double *accepted;           /* [n_fds] by socket */
    size_t n_fds;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the per-address table ---- */

static addr_key key_of(const struct sockaddr *sa) {
    addr_key k;
    memset(&k, 0, sizeof k);
    k.family = sa->sa_family;
    if (sa->sa_family == AF_INET)
        memcpy(k.a, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    else if (sa->sa_family == AF_INET6)
        memcpy(k.a, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    return k;
}

static size_t bucket_of(const addr_key *k) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)k->family;
    for (size_t i = 0; i < sizeof k->a; i++)
        h = (h ^ k->a[i]) * 1099511628211ull;
    return (size_t)(h % GATE_BUCKETS);
}

/* Takes a slot for the address: 0, or 503 when the total is reached, 429 when the address is over its share
 * under pressure (more than half the total in use). */
static int slot_take(gate *g, const struct sockaddr *sa) {
    addr_key k = key_of(sa);
    size_t b = bucket_of(&k);
    pthread_mutex_lock(&g->mu);
    addr_slot *s = g->buckets[b];
    while (s && memcmp(&s->k, &k, sizeof k))
        s = s->next;
    int pressure = 2 * g->total >= g->o.max_connections;
    int full = g->total >= g->o.max_connections                                      ? 503
               : pressure && s && g->o.per_address && s->n >= g->o.per_address ? 429
                                                                                 : 0;
    if (!full && !s) {
        s = calloc(1, sizeof *s);
        if (s) {
            s->k = k;
            s->next = g->buckets[b];
            g->buckets[b] = s;
        } else {
            full = 503;
        }
    }
    if (!full) {
        s->n++;
        g->total++;
    }
    pthread_mutex_unlock(&g->mu);
    return full;
}

void gate_release(gate *g, const struct sockaddr *sa) {
    if (!g || !sa) return;
    addr_key k = key_of(sa);
    size_t b = bucket_of(&k);
    pthread_mutex_lock(&g->mu);
    addr_slot **p = &g->buckets[b];
    while (*p && memcmp(&(*p)->k, &k, sizeof k))
        p = &(*p)->next;
    if (*p) {
        if (--(*p)->n == 0) {
            addr_slot *dead = *p;
            *p = dead->next;
            free(dead);
        }
        if (g->total) g->total--;
    }
    pthread_mutex_unlock(&g->mu);
}

double gate_accepted_at(const gate *g, int fd) {
    return g && fd >= 0 && (size_t)fd < g->n_fds ? g->accepted[fd] : 0.0;
}

/* ---- held connections ---- */

static void list_push(held_list *l, held *h) {
    h->prev = l->tail;
    h->next = NULL;
    if (l->tail)
        l->tail->next = h;
    else
        l->head = h;
    l->tail = h;
}

static void list_remove(held_list *l, held *h) {
    if (h->prev)
        h->prev->next = h->next;
    else
        l->head = h->next;
    if (h->next)
        h->next->prev = h->prev;
    else
        l->tail = h->prev;
    h->prev = h->next = NULL;
}

static void drop(gate *g, held *h) {
    list_remove(h->closing ? &g->closing : &g->waiting, h);
    epoll_ctl(g->ep, EPOLL_CTL_DEL, h->fd, NULL);
    close(h->fd);
    if (h->counted)
        gate_release(g, (struct sockaddr *)&h->addr);
    else
        g->uncounted--;
    free(h);
}

static const char *reason_phrase(int status) {
    switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

void gate_send_error(int fd, int status, const char *type, const char *code, const char *message) {
    server_error e;
    server_error_set(&e, status, type, code, NULL, "%s", message);
    size_t blen = 0;
    char *body = response_error_body(&e, &blen);
    if (!body) return;
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                      "%sConnection: close\r\n\r\n",
                      status, reason_phrase(status), blen,
                      status == 429 || status == 503 ? "Retry-After: 1\r\n" : "");
    if (hl > 0 && (size_t)hl < sizeof head && send(fd, head, (size_t)hl, MSG_DONTWAIT | MSG_NOSIGNAL) == hl)
        (void)!send(fd, body, blen, MSG_DONTWAIT | MSG_NOSIGNAL);
    free(body);
}

/* Reads and discards what is waiting; 1 when the peer has closed or failed. */
static int drain(gate *g, int fd) {
    for (int i = 0; i < 64; i++) {
        ssize_t n = recv(fd, g->scratch, g->o.max_header + 1, MSG_DONTWAIT);
        if (n == 0) return 1;
        if (n < 0) return !(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
    }
    return 0;
}

/* Answers and moves the connection to the closing list. */
static void refuse(gate *g, held *h, int status, const char *type, const char *code, const char *message) {
    gate_send_error(h->fd, status, type, code, message);
    shutdown(h->fd, SHUT_WR);
    list_remove(&g->waiting, h);
    h->closing = 1;
    h->deadline = now_s() + GATE_LINGER_S;
    list_push(&g->closing, h);
    if (drain(g, h->fd)) drop(g, h);
}

static void hand_over(gate *g, held *h) {
    list_remove(&g->waiting, h);
    epoll_ctl(g->ep, EPOLL_CTL_DEL, h->fd, NULL);
    int fd = h->fd;
    /* MHD owns the socket (and closes it, on failure too); the slot is given back by gate_release */
    if (MHD_add_connection(g->daemon, fd, (struct sockaddr *)&h->addr, h->addr_len) != MHD_YES)
        gate_release(g, (struct sockaddr *)&h->addr);
    free(h);
}

static void examine(gate *g, held *h, uint32_t events) {
    if (h->closing) {
        if (drain(g, h->fd) || (events & (EPOLLHUP | EPOLLERR))) drop(g, h);
        return;
    }
    ssize_t n = recv(h->fd, g->scratch, g->o.max_header + 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        drop(g, h);
        return;
    }
    if (n < 0) return;
    char why[160];
    int rc = gate_check_header(g->scratch, (size_t)n, &g->o, why, sizeof why);
    if (rc == 0) {
        hand_over(g, h);
    } else if (rc > 1) {
        refuse(g, h, rc, "invalid_request_error",
               rc == 431   ? "header_too_large"
               : rc == 414 ? "url_too_long"
               : rc == 413 ? "request_too_large"
               : rc == 411 ? "length_required"
               : rc == 505 ? "http_version_not_supported"
                           : "bad_request",
               why);
    } else if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        drop(g, h); /* the client stopped sending before its header was complete */
    }
}

static void accept_all(gate *g) {
    for (;;) {
        struct sockaddr_storage addr;
        socklen_t len = sizeof addr;
        int fd = accept4(g->o.listen_fd, (struct sockaddr *)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return; /* EAGAIN, or out of descriptors: try again at the next wake */
        held *h = calloc(1, sizeof *h);
        if (!h) {
            close(fd);
            continue;
        }
        h->fd = fd;
        h->addr = addr;
        h->addr_len = len;
        int full = slot_take(g, (struct sockaddr *)&addr);
        if (full) { /* answered and lingering like a held one, but holding no slot */
            const char *type = full == 429 ? "rate_limit_error" : "server_error";
            const char *why = full == 429 ? "too many connections from this address while the server is busy "
                                            "(--max-conn-per-addr); retry later"
                                          : "the server holds all the connections it takes (--max-connections); "
                                            "retry later";
            struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = h};
            if (g->uncounted >= GATE_MAX_UNCOUNTED || epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &ev)) {
                gate_send_error(fd, full, type, "too_many_connections", why); /* a flood of refusals: no lingering */
                close(fd);
                free(h);
                continue;
            }
            g->uncounted++;
            list_push(&g->waiting, h);
            refuse(g, h, full, type, "too_many_connections", why);
            continue;
        }
        h->counted = 1;
        double t = now_s();
        if ((size_t)fd < g->n_fds) g->accepted[fd] = t;
        h->deadline = t + g->o.deadline_s;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = h};
        if (epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &ev)) {
            close(fd);
            gate_release(g, (struct sockaddr *)&addr);
            free(h);
            continue;
        }
        list_push(&g->waiting, h);
        if (g->o.tls)
            hand_over(g, h);
        else
            examine(g, h, 0); /* bytes may have come with the connection */
    }
}

static void expire(gate *g, double t) {
    while (g->waiting.head && g->waiting.head->deadline <= t)
        refuse(g, g->waiting.head, 408, "invalid_request_error", "request_timeout",
               "the request header did not arrive in time (--request-deadline)");
    while (g->closing.head && g->closing.head->deadline <= t)
        drop(g, g->closing.head);
}

static int next_timeout_ms(const gate *g, double t) {
    double d = -1;
    if (g->waiting.head) d = g->waiting.head->deadline;
    if (g->closing.head && (d < 0 || g->closing.head->deadline < d)) d = g->closing.head->deadline;
    if (d < 0) return -1;
    double ms = (d - t) * 1000.0 + 1.0;
    return ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

static void *gate_main(void *arg) {
    gate *g = arg;
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(g->ep, evs, 64, next_timeout_ms(g, now_s()));
        if (n < 0 && errno != EINTR) break;
        int stop = 0;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == &g->wake)
                stop = 1;
            else if (evs[i].data.ptr == &g->o.listen_fd)
                accept_all(g);
            else
                examine(g, evs[i].data.ptr, evs[i].events);
        }
        if (stop) break;
        expire(g, now_s());
    }
    close(g->o.listen_fd);
    g->o.listen_fd = -1;
    while (g->waiting.head)
        drop(g, g->waiting.head);
    while (g->closing.head)
        drop(g, g->closing.head);
    return NULL;
}

int gate_start(gate **out, struct MHD_Daemon *daemon, const gate_options *o, char *err, size_t err_len) {
    *out = NULL;
    gate *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    g->o = *o;
    g->daemon = daemon;
    g->ep = g->wake = -1;
    pthread_mutex_init(&g->mu, NULL);
    struct rlimit rl;
    g->n_fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (1u << 24)
                   ? (size_t)rl.rlim_cur
                   : 65536;
    g->accepted = calloc(g->n_fds, sizeof *g->accepted);
    g->scratch = malloc(o->max_header + 1);
    g->ep = epoll_create1(EPOLL_CLOEXEC);
    g->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &g->o.listen_fd};
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &g->wake};
    if (!g->accepted || !g->scratch || g->ep < 0 || g->wake < 0 ||
        epoll_ctl(g->ep, EPOLL_CTL_ADD, o->listen_fd, &lev) || epoll_ctl(g->ep, EPOLL_CTL_ADD, g->wake, &wev) ||
        pthread_create(&g->thread, NULL, gate_main, g)) {
        snprintf(err, err_len, "cannot start the connection gate: %s", strerror(errno));
        g->closed = 1;
        gate_free(g);
        return -1;
    }
    g->started = 1;
    *out = g;
    return 0;
}

void gate_close(gate *g) {
    if (!g || g->closed) return;
    g->closed = 1;
    uint64_t one = 1;
    (void)!write(g->wake, &one, sizeof one);
    if (g->started) pthread_join(g->thread, NULL);
}

void gate_free(gate *g) {
    if (!g) return;
    gate_close(g);
    if (g->ep >= 0) close(g->ep);
    if (g->wake >= 0) close(g->wake);
    if (!g->started && g->o.listen_fd >= 0) close(g->o.listen_fd);
    for (size_t b = 0; b < GATE_BUCKETS; b++)
        while (g->buckets[b]) {
            addr_slot *s = g->buckets[b];
            g->buckets[b] = s->next;
            free(s);
        }
    pthread_mutex_destroy(&g->mu);
    free(g->accepted);
    free(g->scratch);
    free(g);
}
