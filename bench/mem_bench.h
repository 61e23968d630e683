/*
 * mem_bench.h: the read-only sum that bench_backend.c and bench_quant.c time
 * for the machine's memory read bandwidth, the floor they hold their figures
 * against. The sum keeps eight accumulators so that the adds do not chain
 * and the loads set the pace; on a pool the buffer is cut into
 * BENCH_SUM_TASKS slices, each summed into a slot of its own (no sharing of
 * a running total between threads). Header-only: each bench is one
 * translation unit.
 */
#ifndef CLOVER_BENCH_MEM_BENCH_H
#define CLOVER_BENCH_MEM_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/threadpool.h"
#include "base/timer.h"

enum { BENCH_SUM_TASKS = 64 };

typedef struct bench_sum_job {
    const uint64_t *p;
    size_t words, per_task;
    uint64_t sums[BENCH_SUM_TASKS];
} bench_sum_job;

static inline uint64_t bench_sum_words(const uint64_t *p, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 += p[i], a1 += p[i + 1], a2 += p[i + 2], a3 += p[i + 3];
        a4 += p[i + 4], a5 += p[i + 5], a6 += p[i + 6], a7 += p[i + 7];
    }
    for (; i < n; i++) a0 += p[i];
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

/* Sets *j to sum the bytes / 8 words of p on pool (NULL: one thread); returns its number of tasks. */
static inline size_t bench_sum_job_init(bench_sum_job *j, const uint64_t *p, size_t bytes, const threadpool *pool) {
    *j = (bench_sum_job){.p = p, .words = bytes / 8};
    const size_t tasks = pool ? BENCH_SUM_TASKS : 1;
    j->per_task = (j->words + tasks - 1) / tasks;
    return tasks;
}

/* Words [*a, *b) of task `task` (empty past the end). */
static inline void bench_sum_slice(const bench_sum_job *j, size_t task, size_t *a, size_t *b) {
    *a = task * j->per_task;
    *b = *a + j->per_task < j->words ? *a + j->per_task : j->words;
    if (*b < *a) *b = *a;
}

static inline void bench_sum_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    bench_sum_job *j = ctx;
    size_t a, b;
    bench_sum_slice(j, task, &a, &b);
    j->sums[task % BENCH_SUM_TASKS] += bench_sum_words(j->p + a, b - a);
}

/* Seconds of each of reps runs of `tasks` tasks of fn on pool, into t[0..reps). */
static inline void bench_time_tasks(threadpool *pool, size_t tasks, threadpool_task_fn fn, void *ctx, double *t,
                                    int reps) {
    for (int r = 0; r < reps; r++) {
        double t0 = timer_now();
        threadpool_run(pool, tasks, fn, ctx);
        t[r] = timer_now() - t0;
    }
}

/* Uses the sums (a line only in the unlikely case they come to 42), so that the compiler must compute them. */
static inline void bench_sum_keep(const bench_sum_job *j) {
    uint64_t s = 0;
    for (int i = 0; i < BENCH_SUM_TASKS; i++) s += j->sums[i];
    if (s == 42) printf("(unlikely checksum)\n");
}

#endif
