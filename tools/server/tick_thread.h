/*
 * tick_thread.h: a thread that wakes every tick, under a mutex that also
 * guards its owner's list, until it is stopped. The body watch and the
 * waiter each walk a list of sockets this way; the condition variable runs
 * on CLOCK_MONOTONIC so that a change of the wall clock neither stalls a
 * tick nor hurries one.
 *
 * The owner embeds a tick_thread and takes its mu around its own list; the
 * thread holds mu while it calls on_tick and lets go only while it waits.
 */
#ifndef CLOVER_SERVER_TICK_THREAD_H
#define CLOVER_SERVER_TICK_THREAD_H

#include <pthread.h>
#include <time.h>

typedef struct tick_thread {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC: the tick, or stopping */
    int stopping;
    long tick_ns;
    /* Called with mu held after every wake; ticked: a whole tick passed and the thread is not stopping
     * (else a stop or a spurious wake). */
    void (*on_tick)(void *arg, int ticked);
    void *arg;
    pthread_t thread;
} tick_thread;

/* The CLOCK_MONOTONIC time ns nanoseconds (under a second) from now, for pthread_cond_timedwait. */
struct timespec tick_deadline(long ns);

/* Starts the thread (on_tick every tick_ns). 0, or -1 (no thread; then there is nothing to stop). */
int tick_thread_start(tick_thread *t, long tick_ns, void (*on_tick)(void *arg, int ticked), void *arg);
/* Stops and joins the thread and destroys mu and cv; mu must not be held. */
void tick_thread_stop(tick_thread *t);

#endif
