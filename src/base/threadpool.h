/*
 * threadpool.h: a small fixed pool of pthreads for data-parallel loops.
 *
 * threadpool_run hands out task indices 0..n_tasks-1 dynamically (an atomic
 * counter, so uneven tasks balance) to the pool's workers and to the calling
 * thread, and returns when every task has finished, without waiting for
 * workers that have not reached the run by then. A run allocates nothing.
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
#include <stdint.h>

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

/* Dependent loops in one run (threadpool_phases.c): phase p's tasks start
 * only once every task of the phases before it has finished, as if each
 * phase were its own threadpool_run, but with one publication and one wait
 * for the pool. Up to THREADPOOL_MAX_PHASES phases (more: one run each). */
enum { THREADPOOL_MAX_PHASES = 8 };
typedef struct threadpool_phase {
    size_t n_tasks;
    threadpool_task_fn fn;
    void *ctx;
} threadpool_phase;
void threadpool_run_phases(threadpool *pool, const threadpool_phase *phases, size_t n_phases);
/* One phase as its own run (threadpool_run of its tasks); NULL: nothing. */
void threadpool_run_phase(threadpool *pool, const threadpool_phase *phase);

/* What the pool did since it was made (issue 30's diagnosis on many-core
 * hosts: a run that must wake sleeping workers costs their wake-up). Read
 * by the caller between runs; worker_sleeps and late are approximate while
 * workers run. */
typedef struct threadpool_counts {
    uint64_t runs;          /* runs handed to the workers (not those run inline) */
    uint64_t woke;          /* of those, runs that found workers asleep and woke them */
    uint64_t caller_sleeps; /* waits of the caller past its spin (it slept until the tasks were done) */
    uint64_t worker_sleeps; /* times a worker slept after its spin */
    uint64_t late;          /* workers that reached a run after its tasks were all done */
} threadpool_counts;

/* The counts of pool (all 0 for NULL). */
void threadpool_get_counts(const threadpool *pool, threadpool_counts *out);

/* A record of one run for benchmarks (bench_pool): with a trace set, each
 * thread that reaches a run writes when it started taking tasks and when
 * it found none left (CLOCK_MONOTONIC ns), into [thread]; the caller zeroes
 * it before the run and reads it after. NULL: none (the default). */
typedef struct threadpool_trace {
    uint64_t *arrive, *leave; /* [threadpool_size] each */
} threadpool_trace;
void threadpool_set_trace(threadpool *pool, threadpool_trace *trace);

/* Tests only: each worker waits `us` microseconds after it sees a new run
 * and before it joins it, so that a test can make workers late for runs
 * that the caller finishes alone (0: off, the default). */
void threadpool_set_test_delay(threadpool *pool, unsigned us);

/* The number of online CPUs (at least 1). */
size_t threadpool_cpu_count(void);

#endif
