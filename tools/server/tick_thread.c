/*
 * tick_thread.c: the tick loop (tick_thread.h). A stop is the flag under mu
 * and a broadcast, so the thread sees it at its next wake rather than at
 * the end of a tick.
 */
#include "tick_thread.h"

#include <errno.h>

struct timespec tick_deadline(long ns) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += ns;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    return until;
}

static void *tick_main(void *arg) {
    tick_thread *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stopping) {
        struct timespec until = tick_deadline(t->tick_ns);
        int rc = pthread_cond_timedwait(&t->cv, &t->mu, &until);
        t->on_tick(t->arg, rc == ETIMEDOUT && !t->stopping);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int tick_thread_start(tick_thread *t, long tick_ns, void (*on_tick)(void *arg, int ticked), void *arg) {
    t->stopping = 0;
    t->tick_ns = tick_ns;
    t->on_tick = on_tick;
    t->arg = arg;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&t->mu, NULL);
    if (pthread_create(&t->thread, NULL, tick_main, t)) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        return -1;
    }
    return 0;
}

void tick_thread_stop(tick_thread *t) {
    pthread_mutex_lock(&t->mu);
    t->stopping = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
}
