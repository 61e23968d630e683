/*
 * waiter.c: a list of (job, socket) under one mutex and a thread that
 * walks it every 50 ms. Lock order: the list's mutex, then a job's (the
 * job side never takes the list's), so a resume from the scheduler and a
 * walk here cannot deadlock. The 50 ms tick bounds how long a departed
 * client's generation keeps running, as before suspension.
 */
#include "waiter.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define WAITER_TICK_NS 50000000L

typedef struct watch {
    job *j;
    int fd;
} watch;

struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC: the tick, or stopping */
    watch *v;
    size_t n, cap;
    int stopping;
    pthread_t thread;
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

static void *waiter_main(void *arg) {
    waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += WAITER_TICK_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        int rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
        if (rc == ETIMEDOUT && !w->stopping) walk(w);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int waiter_start(waiter **out) {
    *out = NULL;
    waiter *w = calloc(1, sizeof *w);
    if (!w) return -1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->mu, NULL);
    if (pthread_create(&w->thread, NULL, waiter_main, w)) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return -1;
    }
    *out = w;
    return 0;
}

int waiter_add(waiter *w, job *j, int fd) {
    pthread_mutex_lock(&w->mu);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        watch *v = realloc(w->v, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&w->mu);
            return -1;
        }
        w->v = v;
        w->cap = cap;
    }
    job_ref(j);
    w->v[w->n++] = (watch){.j = j, .fd = fd};
    pthread_mutex_unlock(&w->mu);
    return 0;
}

void waiter_remove(waiter *w, job *j) {
    job *found = NULL;
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i].j == j) {
            found = j;
            w->v[i] = w->v[--w->n];
            break;
        }
    pthread_mutex_unlock(&w->mu);
    job_unref(found);
}

void waiter_free(waiter *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    for (size_t i = 0; i < w->n; i++)
        job_unref(w->v[i].j);
    free(w->v);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
