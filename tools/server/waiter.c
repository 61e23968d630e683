/*
 * waiter.c: a list of (job, socket) under one mutex and a thread that
 * walks it every 50 ms. Lock order: the list's mutex, then a job's (the
 * job side never takes the list's), so a resume from the scheduler and a
 * walk here cannot deadlock. The 50 ms tick bounds how long a departed
 * client's generation keeps running, as before suspension.
 */
#include "waiter.h"

#include <stdlib.h>

#include "tick_thread.h"

#define WAITER_TICK_NS 50000000L

typedef struct watch {
    job *j;
    int fd;
} watch;

struct waiter {
    tick_thread t; /* its mu guards v */
    watch *v;
    size_t n, cap;
};

static void walk(waiter *w) {
    for (size_t i = 0; i < w->n; i++) {
        job *j = w->v[i].j;
        pthread_mutex_lock(&j->mu);
        if (j->suspended && job_peer_gone(w->v[i].fd)) {
            j->cancel = 1;
            j->client_cancelled = 1;
            job_signal_locked(j); /* resumes it: MHD then finds the socket closed */
        }
        pthread_mutex_unlock(&j->mu);
    }
}

/* Walks after a whole tick only: a wake before one is the stop (or spurious). */
static void on_tick(void *arg, int ticked) {
    if (ticked) walk(arg);
}

int waiter_start(waiter **out) {
    *out = NULL;
    waiter *w = calloc(1, sizeof *w);
    if (!w) return -1;
    if (tick_thread_start(&w->t, WAITER_TICK_NS, on_tick, w)) {
        free(w);
        return -1;
    }
    *out = w;
    return 0;
}

int waiter_add(waiter *w, job *j, int fd) {
    pthread_mutex_lock(&w->t.mu);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        watch *v = realloc(w->v, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&w->t.mu);
            return -1;
        }
        w->v = v;
        w->cap = cap;
    }
    job_ref(j);
    w->v[w->n++] = (watch){.j = j, .fd = fd};
    pthread_mutex_unlock(&w->t.mu);
    return 0;
}

void waiter_remove(waiter *w, job *j) {
    job *found = NULL;
    pthread_mutex_lock(&w->t.mu);
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i].j == j) {
            found = j;
            w->v[i] = w->v[--w->n];
            break;
        }
    pthread_mutex_unlock(&w->t.mu);
    job_unref(found);
}

void waiter_free(waiter *w) {
    if (!w) return;
    tick_thread_stop(&w->t);
    for (size_t i = 0; i < w->n; i++)
        job_unref(w->v[i].j);
    free(w->v);
    free(w);
}
