/*
 * body_watch.c: an array of (state, socket, deadline) under one mutex and
 * a thread that walks it every 100 ms (the deadline is seconds; a tenth
 * more is nothing). Removal swaps with the last entry: O(n) to find, with n
 * the bodies in flight, once per request.
 */
#include "body_watch.h"

#include <stdlib.h>
#include <sys/socket.h>

#include "gate.h"
#include "job.h"
#include "tick_thread.h"

#define BODY_WATCH_TICK_NS 100000000L

typedef struct entry {
    atomic_int *state;
    int fd, tls;
    double deadline;
} entry;

struct body_watch {
    tick_thread t; /* its mu guards v */
    entry *v;
    size_t n, cap;
};

static void cut(const entry *e) {
    if (!e->tls) {
        char junk[4096]; /* what is waiting is read first, so that the shutdown does not reset the answer */
        for (int i = 0; i < 16 && recv(e->fd, junk, sizeof junk, MSG_DONTWAIT) > 0; i++) {
        }
        gate_send_error(e->fd, 408, "invalid_request_error", "request_timeout",
                        "the request body did not arrive in time (--request-deadline)");
    }
    shutdown(e->fd, SHUT_RDWR); /* MHD reads the end and closes the connection */
}

static void walk(body_watch *w, double now) {
    for (size_t i = 0; i < w->n;) {
        entry *e = &w->v[i];
        if (atomic_load(e->state) != BODY_READING) { /* done meanwhile: the MHD thread removes it */
            i++;
            continue;
        }
        int reading = BODY_READING;
        if (e->deadline <= now && atomic_compare_exchange_strong(e->state, &reading, BODY_CUT)) {
            cut(e);
            w->v[i] = w->v[--w->n];
            continue;
        }
        i++;
    }
}

/* Walks at every wake, not only after a whole tick: a walk cuts only bodies
 * past their deadline, so an early one is harmless. */
static void on_tick(void *arg, int ticked) {
    (void)ticked;
    walk(arg, job_now());
}

int body_watch_start(body_watch **out) {
    *out = NULL;
    body_watch *w = calloc(1, sizeof *w);
    if (!w) return -1;
    if (tick_thread_start(&w->t, BODY_WATCH_TICK_NS, on_tick, w)) {
        free(w);
        return -1;
    }
    *out = w;
    return 0;
}

void body_watch_free(body_watch *w) {
    if (!w) return;
    tick_thread_stop(&w->t);
    free(w->v);
    free(w);
}

int body_watch_add(body_watch *w, atomic_int *state, int fd, double deadline, int tls) {
    pthread_mutex_lock(&w->t.mu);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        entry *v = realloc(w->v, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&w->t.mu);
            return -1;
        }
        w->v = v;
        w->cap = cap;
    }
    w->v[w->n++] = (entry){.state = state, .fd = fd, .tls = tls, .deadline = deadline};
    pthread_mutex_unlock(&w->t.mu);
    return 0;
}

void body_watch_remove(body_watch *w, atomic_int *state) {
    if (!w) return;
    pthread_mutex_lock(&w->t.mu);
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i].state == state) {
            w->v[i] = w->v[--w->n];
            break;
        }
    pthread_mutex_unlock(&w->t.mu);
}
