/*
 * scheduler.h: the one thread that owns the model's sessions and runs the
 * jobs, and the bounded queue in front of it.
 *
 * Connection threads parse, validate and tokenize, then submit; a full
 * queue is answered at once (429) instead of piling up. The scheduler runs
 * up to max_batch jobs at once (continuous batching): it takes jobs in
 * order into free slots, each on the free session that already holds the
 * longest prefix of its prompt (session_cache), and steps all running jobs
 * by one pass per tick in one batched engine call; jobs join and leave
 * between passes. Every job carries its own output channel and cancel
 * flag, so submission, cancellation, streaming and the connection side do
 * not depend on what else runs. Results do not either: the engine's
 * batched results equal each request run alone, bit for bit.
 */
#ifndef CLOVER_SERVER_SCHEDULER_H
#define CLOVER_SERVER_SCHEDULER_H

#include <stddef.h>

#include "clover.h"
#include "job.h"
#include "metrics.h"

typedef struct scheduler_options {
    size_t queue_capacity; /* jobs that may wait (the running one not counted); >= 1 */
    size_t n_sessions;     /* sessions kept for prefix reuse; >= 1 */
    size_t max_batch;      /* jobs running at once; 0: 1 */
    clover_session_params session; /* threads, rows per pass, context */
} scheduler_options;

typedef struct scheduler scheduler;

int scheduler_create(scheduler **out, const clover_model *m, const scheduler_options *o, metrics *mt,
                     clover_error *err);

enum { SCHEDULER_QUEUED = 0, SCHEDULER_FULL = 1, SCHEDULER_STOPPING = 2 };
/* Queues j (taking a reference of its own) or says why not. */
int scheduler_submit(scheduler *s, job *j);
/* Queues all n jobs, or none of them (FULL when the queue has room for fewer). */
int scheduler_submit_all(scheduler *s, job **js, size_t n);

/* Waiting jobs, and whether any is running. */
size_t scheduler_queue_length(scheduler *s, int *busy);
size_t scheduler_queue_capacity(const scheduler *s);
/* The engine the sessions run on (its backend names the device). */
clover_engine *scheduler_engine(scheduler *s);

/* Stops taking jobs and fails the waiting ones (503); the running ones go on. */
void scheduler_close(scheduler *s);
/* Whether any job is running. */
int scheduler_busy(scheduler *s);
/* Closes, cuts the running jobs short (finish "length", cut "shutdown") and
 * joins the thread. Idempotent. */
void scheduler_stop(scheduler *s);
/* Stops if needed and releases everything. */
void scheduler_free(scheduler *s);

#endif
