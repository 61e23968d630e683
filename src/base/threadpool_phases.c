/*
 * threadpool_phases.c: several dependent loops in one run of the pool
 * (threadpool.h, threadpool_run_phases). Why: each run of the pool costs a
 * publication, the waiting workers' wake-up when they slept, and the wait
 * for its last task; a 32-row preview made ~540 runs, and on the 16-core
 * host a lone small product took ~0.16 ms for ~10 us of work a thread
 * (issue 30). Loops whose only
 * dependency is "all of the previous loop first" (the GDN block's conv,
 * then its heads; a product's 8-bit staging, then its tasks) can share one
 * run: the tasks are numbered phase after phase, the pool hands them out in
 * that order, and a task of phase p waits until every task of the phases
 * before it has finished. No deadlock: a waiting task's predecessors were all taken
 * before it, by threads that are running them (a task never waits for a
 * later one). A wait past WAIT_SPIN_US means a thread running one of them
 * lost its core (a shared machine): the waiter then yields between polls.
 */
#include <sched.h>
#include <stdatomic.h>

#include "base/threadpool.h"
#include "base/timer.h"

enum { WAIT_SPIN_US = 20 };

typedef struct phased_run {
    const threadpool_phase *phases;
    size_t n;
    size_t first[THREADPOOL_MAX_PHASES + 1]; /* task index of each phase's first task; first[n] = all */
    _Alignas(64) atomic_size_t done[THREADPOOL_MAX_PHASES]; /* finished tasks per phase (its own line) */
} phased_run;

/* Until phase p's tasks are all done. */
static void wait_phase(phased_run *r, size_t p) {
    const size_t want = r->first[p + 1] - r->first[p];
    double until = 0;
    for (unsigned i = 1; atomic_load_explicit(&r->done[p], memory_order_acquire) < want; i++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if (i % 64) continue;
        const double now = timer_now();
        if (!until) until = now + WAIT_SPIN_US * 1e-6;
        else if (now > until) sched_yield();
    }
}

static void phased_task(void *ctx, size_t task, size_t thread) {
    phased_run *r = ctx;
    size_t p = 0;
    while (task >= r->first[p + 1]) p++; /* a handful of phases: a linear search */
    for (size_t q = 0; q < p; q++) wait_phase(r, q); /* done at once but the last non-empty one, as a rule */
    const threadpool_phase *ph = &r->phases[p];
    ph->fn(ph->ctx, task - r->first[p], thread);
    atomic_fetch_add_explicit(&r->done[p], 1, memory_order_release);
}

void threadpool_run_phase(threadpool *pool, const threadpool_phase *phase) {
    if (phase) threadpool_run(pool, phase->n_tasks, phase->fn, phase->ctx);
}

void threadpool_run_phases(threadpool *pool, const threadpool_phase *phases, size_t n_phases) {
    if (n_phases > THREADPOOL_MAX_PHASES || threadpool_size(pool) == 1) { /* in order, phase by phase */
        for (size_t p = 0; p < n_phases; p++) threadpool_run_phase(pool, &phases[p]);
        return;
    }
    phased_run r = {.phases = phases, .n = n_phases};
    size_t total = 0;
    for (size_t p = 0; p < n_phases; p++) {
        r.first[p] = total;
        total += phases[p].n_tasks;
        atomic_init(&r.done[p], 0);
    }
    r.first[n_phases] = total;
    threadpool_run(pool, total, phased_task, &r);
}
