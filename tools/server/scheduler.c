/*
 * scheduler.c: a ring of job pointers under one mutex and a condition
 * variable; the thread sleeps when the ring is empty. A job whose client
 * left while it waited is dropped without running.
 */
#include "scheduler.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "job_run.h"
#include "session_cache.h"

struct scheduler {
    const clover_model *model;
    metrics *mt;
    session_cache sessions;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    job **ring; /* [cap] */
    size_t cap, head, count;
    job *running;
    int stopping;
    int started, joined;
    pthread_t thread;
};

static job *take(scheduler *s) {
    job *j = s->ring[s->head];
    s->ring[s->head] = NULL;
    s->head = (s->head + 1) % s->cap;
    s->count--;
    return j;
}

static void run_one(scheduler *s, job *j) {
    double t0 = job_now();
    j->queue_s = t0 - j->t_submit;
    pthread_mutex_lock(&j->mu);
    j->state = JOB_RUNNING;
    job_signal_locked(j);
    pthread_mutex_unlock(&j->mu);
    clover_error err = {0};
    clover_session *sess = session_cache_pick(&s->sessions, j->prompt, j->n_prompt, &err);
    if (!sess) {
        job_fail(j, 500, "server_error", NULL, err.message);
        return;
    }
    job_run(j, s->model, sess);
    pthread_mutex_lock(&j->mu);
    int cancelled = j->finish_reason && !strcmp(j->finish_reason, "cancelled");
    size_t completion = j->completion_tokens, reused = j->reused_tokens, passes = j->stats.passes;
    pthread_mutex_unlock(&j->mu);
    metrics_count_generation(s->mt, j->n_prompt, reused, completion, passes, job_now() - t0, cancelled);
}

static void *scheduler_main(void *arg) {
    scheduler *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->count && !s->stopping)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->stopping) break;
        job *j = take(s);
        if (j->cancel) { /* the client left while it waited */
            pthread_mutex_unlock(&s->mu);
            metrics_count_cancelled(s->mt);
            job_fail(j, 499, "cancelled", "client_closed_request",
                     "the client closed the connection before the request ran");
            job_unref(j);
            pthread_mutex_lock(&s->mu);
            continue;
        }
        s->running = j;
        pthread_mutex_unlock(&s->mu);
        run_one(s, j);
        pthread_mutex_lock(&s->mu);
        s->running = NULL;
        pthread_mutex_unlock(&s->mu);
        job_unref(j);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int scheduler_create(scheduler **out, const clover_model *m, const scheduler_options *o, metrics *mt,
                     clover_error *err) {
    *out = NULL;
    scheduler *s = calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->model = m;
    s->mt = mt;
    s->cap = o->queue_capacity ? o->queue_capacity : 1;
    s->ring = calloc(s->cap, sizeof *s->ring);
    if (!s->ring) goto nomem;
    int rc = session_cache_init(&s->sessions, m, o->n_sessions, &o->session, err);
    if (rc) {
        free(s->ring);
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, scheduler_main, s)) {
        scheduler_free(s);
        if (err) {
            err->code = CLOVER_E_INTERNAL;
            strcpy(err->message, "scheduler: cannot start its thread");
        }
        return CLOVER_E_INTERNAL;
    }
    s->started = 1;
    *out = s;
    return CLOVER_OK;
nomem:
    if (s) free(s->ring);
    free(s);
    if (err) {
        err->code = CLOVER_E_NOMEM;
        strcpy(err->message, "scheduler: out of memory");
    }
    return CLOVER_E_NOMEM;
}

int scheduler_submit(scheduler *s, job *j) {
    pthread_mutex_lock(&s->mu);
    int rc = SCHEDULER_QUEUED;
    if (s->stopping) {
        rc = SCHEDULER_STOPPING;
    } else if (s->count == s->cap) {
        rc = SCHEDULER_FULL;
    } else {
        job_ref(j);
        j->t_submit = job_now();
        s->ring[(s->head + s->count) % s->cap] = j;
        s->count++;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

size_t scheduler_queue_length(scheduler *s, int *busy) {
    pthread_mutex_lock(&s->mu);
    size_t n = s->count;
    if (busy) *busy = s->running != NULL;
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t scheduler_queue_capacity(const scheduler *s) { return s->cap; }

void scheduler_close(scheduler *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    job *waiting[64];
    while (s->count) { /* fail the waiting jobs outside the lock, a batch at a time */
        size_t k = 0;
        while (s->count && k < 64)
            waiting[k++] = take(s);
        pthread_mutex_unlock(&s->mu);
        for (size_t i = 0; i < k; i++) {
            job_fail(waiting[i], 503, "server_error", "shutting_down", "the server is shutting down");
            job_unref(waiting[i]);
        }
        pthread_mutex_lock(&s->mu);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

int scheduler_busy(scheduler *s) {
    pthread_mutex_lock(&s->mu);
    int busy = s->running != NULL;
    pthread_mutex_unlock(&s->mu);
    return busy;
}

void scheduler_stop(scheduler *s) {
    if (!s) return;
    scheduler_close(s);
    pthread_mutex_lock(&s->mu);
    if (s->running) { /* past the grace: the answer so far is the answer */
        s->running->shutdown_cut = 1;
        s->running->cancel = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (s->started && !s->joined) {
        pthread_join(s->thread, NULL);
        s->joined = 1;
    }
}

void scheduler_free(scheduler *s) {
    if (!s) return;
    scheduler_stop(s);
    session_cache_free(&s->sessions);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->ring);
    free(s);
}
