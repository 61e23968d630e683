/*
 * threadpool.h: a small fixed pool of pthreads for data-parallel loops.
 *
 * threadpool_run hands out task indices 0..n_tasks-1 dynamically (an atomic
 * counter, so uneven tasks balance) to the pool's workers and to the calling
 * thread, and returns when every task has finished. A run allocates nothing.
 * Between runs the workers spin briefly (the next matmul of a decode step is
 * microseconds away; CLOVER_POOL_SPIN_US, default 50), then sleep on a futex
 * (Linux: one call wakes them all) or a condition variable.
 *
 * One caller at a time per pool. A task that itself calls threadpool_run (on
 * any pool) gets its inner tasks run inline on its own thread, so nesting is
 * safe and never deadlocks. A NULL pool runs everything inline.
 */
#ifndef CLOVER_BASE_THREADPOOL_H
#define CLOVER_BASE_THREADPOOL_H

#include <stddef.h>

#include "clover.h"

typedef struct threadpool threadpool;

/* One task: `task` is its index (< n_tasks), `thread` the index of the thread
 * running it (0 = the caller, < threadpool_size), e.g. to pick scratch. */
typedef void (*threadpool_task_fn)(void *ctx, size_t task, size_t thread);

/* Starts a pool of n_threads threads in all, the caller included (so
 * n_threads - 1 workers); 0 means the number of online CPUs. */
int threadpool_create(threadpool **out, size_t n_threads, clover_error *err);
/* Stops and joins the workers. NULL is a no-op. */
void threadpool_free(threadpool *pool);

/* Threads that run tasks, the caller included; 1 for a NULL pool. */
size_t threadpool_size(const threadpool *pool);

/* Runs fn(ctx, t, thread) for every t < n_tasks; returns when all are done. */
void threadpool_run(threadpool *pool, size_t n_tasks, threadpool_task_fn fn, void *ctx);

/* The number of online CPUs (at least 1). */
size_t threadpool_cpu_count(void);

#endif
