/*
 * scheduler.c: a ring of job pointers under one mutex and a condition
 * variable, and the running jobs (at most max_batch). Each tick the thread
 * admits waiting jobs into free slots (first come, first served), then
 * steps every running job by one pass in one batched engine call
 * (clover_batch_step): all of them every tick, so none starves, and a long
 * prompt advances a chunk per tick between the others' passes. Jobs that
 * are done are settled and leave; new ones join between passes. The thread
 * sleeps when nothing waits or runs. A job whose client left while it
 * waited is dropped without running; one that leaves while running is
 * cancelled through its flag, which the engine checks before every pass.
 */
#include "scheduler.h"

#include <pthread.h>
#include <stdio.h>
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
    /* the running jobs: slots changed under mu, stepped outside it */
    size_t max_batch, n_active;
    job **act_job;          /* [max_batch] */
    job_runner **act_run;   /* [max_batch] */
    clover_request **act_rq; /* [max_batch] */
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

/* Starts a taken job in a free slot (the scheduler thread, mu not held). */
/* job.settled: the finished job counted in the metrics before its client can read it as done */
static void count_settled(job *j, void *user) {
    scheduler *s = user;
    pthread_mutex_lock(&j->mu);
    int cancelled = j->finish_reason && !strcmp(j->finish_reason, "cancelled");
    size_t completion = j->completion_tokens, reused = j->reused_tokens, passes = j->stats.passes;
    double snapshot_s = j->stats.snapshot_s;
    pthread_mutex_unlock(&j->mu);
    metrics_count_generation(s->mt, j->n_prompt, reused, completion, passes, job_now() - j->t_run, snapshot_s,
                             cancelled);
}

static void admit(scheduler *s, job *j) {
    double t0 = job_now();
    j->queue_s = t0 - j->t_submit;
    j->t_run = t0;
    pthread_mutex_lock(&j->mu);
    j->state = JOB_RUNNING;
    job_signal_locked(j);
    pthread_mutex_unlock(&j->mu);
    clover_error err = {0};
    clover_session *sess = session_cache_pick(&s->sessions, j->prompt, j->n_prompt, &err);
    if (!sess && err.code == CLOVER_E_NOMEM) { /* admission: the device holds no further session now */
        char msg[sizeof err.message + 96];
        snprintf(msg, sizeof msg, "the %s device's memory is full (%s); retry when a running request ends",
                 clover_engine_backend(s->sessions.engine), err.message);
        job_fail(j, 503, "server_error", "device_memory_full", msg);
        job_unref(j);
        return;
    }
    if (!sess) {
        job_fail(j, 500, "server_error", NULL, err.message);
        job_unref(j);
        return;
    }
    job_runner *jr = job_start(j, s->model, sess);
    if (!jr) { /* refused at once: the job is done with its error */
        session_cache_release(&s->sessions, sess);
        job_unref(j);
        return;
    }
    j->settled = count_settled, j->settled_user = s; /* read by job_end on this thread */
    pthread_mutex_lock(&s->mu);
    size_t k = s->n_active++;
    s->act_job[k] = j;
    s->act_run[k] = jr;
    s->act_rq[k] = job_runner_request(jr);
    pthread_mutex_unlock(&s->mu);
}

/* Settles slot k's finished job and frees the slot (keeps the others' order). */
static void retire(scheduler *s, size_t k) {
    job *j = s->act_job[k];
    job_runner *jr = s->act_run[k];
    pthread_mutex_lock(&s->mu);
    for (size_t i = k + 1; i < s->n_active; i++) {
        s->act_job[i - 1] = s->act_job[i];
        s->act_run[i - 1] = s->act_run[i];
        s->act_rq[i - 1] = s->act_rq[i];
    }
    s->n_active--;
    pthread_mutex_unlock(&s->mu);
    session_cache_release(&s->sessions, job_runner_session(jr));
    job_end(jr); /* counts it in the metrics (count_settled) before the client can see it done */
    job_unref(j);
}

/* One pass of every running job, then the finished ones leave. */
static void tick(scheduler *s) {
    clover_step_stats st;
    clover_batch_step_ex(s->act_rq, s->n_active, &st); /* the slots change only on this thread */
    metrics_count_step(s->mt, st.sequences, st.rows, st.backend_passes, st.backend_s, st.step_s);
    for (size_t k = s->n_active; k-- > 0;)
        if (clover_request_done(s->act_rq[k])) retire(s, k);
}

static void *scheduler_main(void *arg) {
    scheduler *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->count && !s->n_active && !s->stopping)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->stopping) break;
        const double t_work = job_now();
        while (s->count && s->n_active < s->max_batch) {
            job *j = take(s);
            pthread_mutex_unlock(&s->mu);
            if (j->cancel) { /* the client left while it waited */
                metrics_count_cancelled(s->mt);
                job_fail(j, 499, "cancelled", "client_closed_request",
                         "the client closed the connection before the request ran");
                job_unref(j);
            } else {
                admit(s, j);
            }
            pthread_mutex_lock(&s->mu);
        }
        pthread_mutex_unlock(&s->mu);
        if (s->n_active) tick(s);
        metrics_count_scheduler(s->mt, job_now() - t_work);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    while (s->n_active) tick(s); /* stopping: the running jobs were cancelled; let them end */
    return NULL;
}

static void free_slots(scheduler *s) {
    free(s->act_job);
    free(s->act_run);
    free(s->act_rq);
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
    s->max_batch = o->max_batch ? o->max_batch : 1;
    s->act_job = calloc(s->max_batch, sizeof *s->act_job);
    s->act_run = calloc(s->max_batch, sizeof *s->act_run);
    s->act_rq = calloc(s->max_batch, sizeof *s->act_rq);
    if (!s->ring || !s->act_job || !s->act_run || !s->act_rq) goto nomem;
    /* the reuse cache plus a session for every running job */
    int rc = session_cache_init(&s->sessions, m, (o->n_sessions ? o->n_sessions : 1) + s->max_batch, &o->session,
                                err);
    if (rc) {
        free_slots(s);
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
    if (s) {
        free_slots(s);
        free(s->ring);
    }
    free(s);
    if (err) {
        err->code = CLOVER_E_NOMEM;
        strcpy(err->message, "scheduler: out of memory");
    }
    return CLOVER_E_NOMEM;
}

int scheduler_submit_all(scheduler *s, job **js, size_t n) {
    pthread_mutex_lock(&s->mu);
    int rc = SCHEDULER_QUEUED;
    if (s->stopping) {
        rc = SCHEDULER_STOPPING;
    } else if (n > s->cap - s->count) {
        rc = SCHEDULER_FULL;
    } else {
        for (size_t i = 0; i < n; i++) {
            job_ref(js[i]);
            js[i]->t_submit = job_now();
            s->ring[(s->head + s->count) % s->cap] = js[i];
            s->count++;
        }
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int scheduler_submit(scheduler *s, job *j) { return scheduler_submit_all(s, &j, 1); }

size_t scheduler_queue_length(scheduler *s, int *busy) {
    pthread_mutex_lock(&s->mu);
    size_t n = s->count;
    if (busy) *busy = s->n_active != 0;
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t scheduler_queue_capacity(const scheduler *s) { return s->cap; }

clover_engine *scheduler_engine(scheduler *s) { return s->sessions.engine; }

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
    int busy = s->n_active != 0;
    pthread_mutex_unlock(&s->mu);
    return busy;
}

void scheduler_stop(scheduler *s) {
    if (!s) return;
    scheduler_close(s);
    pthread_mutex_lock(&s->mu);
    for (size_t k = 0; k < s->n_active; k++) { /* past the grace: the answer so far is the answer */
        s->act_job[k]->shutdown_cut = 1;
        s->act_job[k]->cancel = 1;
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
    free_slots(s);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->ring);
    free(s);
}
