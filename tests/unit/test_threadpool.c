/*
 * test_threadpool.c: every task runs exactly once, on a thread index below
 * the pool size; runs return only when all tasks are done; a NULL pool and a
 * one-thread pool run inline; nested runs go inline on the calling thread;
 * thousands of back-to-back runs (the decode pattern) neither lose a wake-up
 * nor deadlock; workers that reach a run after its tasks are done (asleep
 * past a zero spin) never touch that run's job once it has returned, and
 * the counts say so; the trace records the threads that took part; a
 * phased run starts no task of a phase before the phases before it are
 * done (an empty phase between them included).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threadpool.h"
#include "test.h"

enum { MAX_TASKS = 4096, MAX_THREADS = 64 };

typedef struct count_ctx {
    atomic_int runs[MAX_TASKS];
    atomic_int per_thread[MAX_THREADS];
    atomic_int bad_thread;
    size_t size;
    int sleep_us;
} count_ctx;

static void count_task(void *ctx, size_t task, size_t thread) {
    count_ctx *c = ctx;
    if (c->sleep_us) {
        struct timespec ts = {0, (long)c->sleep_us * 1000};
        nanosleep(&ts, NULL);
    }
    atomic_fetch_add(&c->runs[task], 1);
    if (thread >= c->size || thread >= MAX_THREADS)
        atomic_fetch_add(&c->bad_thread, 1);
    else
        atomic_fetch_add(&c->per_thread[thread], 1);
}

static count_ctx ctx_storage;

static count_ctx *fresh_ctx(size_t size) {
    memset(&ctx_storage, 0, sizeof ctx_storage);
    ctx_storage.size = size;
    return &ctx_storage;
}

static void check_each_once(const count_ctx *c, size_t n_tasks) {
    int wrong = 0;
    for (size_t t = 0; t < MAX_TASKS; t++)
        if (atomic_load(&c->runs[t]) != (t < n_tasks ? 1 : 0)) wrong++;
    CHECK_MSG(wrong == 0, "%d tasks ran a wrong number of times (n_tasks %zu)", wrong, n_tasks);
    CHECK_EQ_INT(atomic_load(&c->bad_thread), 0);
}

static void test_null_pool_inline(void) {
    CHECK_EQ_INT(threadpool_size(NULL), 1);
    count_ctx *c = fresh_ctx(1);
    threadpool_run(NULL, 100, count_task, c);
    check_each_once(c, 100);
    CHECK_EQ_INT(atomic_load(&c->per_thread[0]), 100);
    c = fresh_ctx(1);
    threadpool_run(NULL, 0, count_task, c);
    check_each_once(c, 0);
}

static void test_one_thread_pool(void) {
    threadpool *p = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&p, 1, &err), CLOVER_OK);
    CHECK_EQ_INT(threadpool_size(p), 1);
    count_ctx *c = fresh_ctx(1);
    threadpool_run(p, 37, count_task, c);
    check_each_once(c, 37);
    CHECK_EQ_INT(atomic_load(&c->per_thread[0]), 37);
    threadpool_free(p);
}

static void test_many_threads(void) {
    static const size_t sizes[] = {2, 3, 8};
    static const size_t task_counts[] = {0, 1, 2, 5, 64, 1000, MAX_TASKS};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        threadpool *p = NULL;
        clover_error err;
        CHECK_EQ_INT(threadpool_create(&p, sizes[s], &err), CLOVER_OK);
        if (!p) continue;
        CHECK_EQ_INT(threadpool_size(p), sizes[s]);
        for (size_t k = 0; k < sizeof task_counts / sizeof task_counts[0]; k++) {
            count_ctx *c = fresh_ctx(sizes[s]);
            threadpool_run(p, task_counts[k], count_task, c);
            check_each_once(c, task_counts[k]); /* all done when run returns */
        }
        threadpool_free(p);
    }
}

/* With tasks that take a while, the caller takes part (thread 0 runs some). */
static void test_caller_participates(void) {
    threadpool *p = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&p, 2, &err), CLOVER_OK);
    count_ctx *c = fresh_ctx(2);
    c->sleep_us = 2000;
    threadpool_run(p, 6, count_task, c);
    check_each_once(c, 6);
    CHECK(atomic_load(&c->per_thread[0]) >= 1);
    threadpool_free(p);
}

typedef struct sum_ctx {
    atomic_long sum;
} sum_ctx;

static void add_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    atomic_fetch_add(&((sum_ctx *)ctx)->sum, (long)task + 1);
}

/* Back-to-back runs, as in a decode step of many small matmuls. */
static void test_back_to_back_runs(void) {
    threadpool *p = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&p, 3, &err), CLOVER_OK);
    long want = 0, bad = 0;
    for (int i = 0; i < 5000; i++) {
        sum_ctx s;
        atomic_init(&s.sum, 0);
        const size_t n = (size_t)(i % 9);
        threadpool_run(p, n, add_task, &s);
        want = (long)(n * (n + 1) / 2);
        if (atomic_load(&s.sum) != want) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    threadpool_free(p);
}

typedef struct nest_ctx {
    threadpool *pool;
    atomic_int inner_runs;
    atomic_int inner_thread_mismatch;
} nest_ctx;

typedef struct inner_ctx {
    nest_ctx *outer;
    size_t outer_thread;
} inner_ctx;

static void inner_task(void *ctx, size_t task, size_t thread) {
    (void)task;
    inner_ctx *ic = ctx;
    atomic_fetch_add(&ic->outer->inner_runs, 1);
    if (thread != ic->outer_thread) atomic_fetch_add(&ic->outer->inner_thread_mismatch, 1);
}

static void outer_task(void *ctx, size_t task, size_t thread) {
    (void)task;
    nest_ctx *nc = ctx;
    inner_ctx ic = {nc, thread};
    threadpool_run(nc->pool, 10, inner_task, &ic); /* would deadlock if not run inline */
}

static void test_nested_runs_inline(void) {
    nest_ctx nc;
    memset(&nc, 0, sizeof nc);
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&nc.pool, 2, &err), CLOVER_OK);
    threadpool_run(nc.pool, 8, outer_task, &nc);
    CHECK_EQ_INT(atomic_load(&nc.inner_runs), 80);
    CHECK_EQ_INT(atomic_load(&nc.inner_thread_mismatch), 0);
    /* The pool still works normally afterwards. */
    count_ctx *c = fresh_ctx(2);
    threadpool_run(nc.pool, 100, count_task, c);
    check_each_once(c, 100);
    threadpool_free(nc.pool);
}

typedef struct late_ctx {
    atomic_int done;   /* tasks run */
    atomic_int closed; /* set by the test once the run returned */
    atomic_int *after; /* tasks that ran after their run returned (shared by every run) */
} late_ctx;

static void late_task(void *ctx, size_t task, size_t thread) {
    (void)task, (void)thread;
    late_ctx *c = ctx;
    if (atomic_load(&c->closed)) atomic_fetch_add(c->after, 1);
    atomic_fetch_add(&c->done, 1);
}

/* Workers held back (threadpool_set_test_delay) reach runs that the caller
 * finished alone: they must find the run closed and leave without reading
 * its job, every run must still have each task run once, all before
 * threadpool_run returns, and no task may run after its run returned. The
 * job lives on the stack and is rewritten right after each return. Then
 * workers that never spin (CLOVER_POOL_SPIN_US=0) sleep between runs:
 * the runs wake them, and the counts say so. */
static void late_runs(threadpool *p, int runs, int gap_every, atomic_int *after, long *wrong) {
    for (int i = 0; i < runs; i++) {
        late_ctx c;
        atomic_init(&c.done, 0);
        atomic_init(&c.closed, 0);
        c.after = after;
        const size_t n = 2 + (size_t)(i % 5);
        threadpool_run(p, n, late_task, &c);
        if (atomic_load(&c.done) != (int)n) (*wrong)++;
        atomic_store(&c.closed, 1);
        if (gap_every && i % gap_every == 0) {
            const struct timespec ts = {0, 300 * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

/* A pool of n threads made with CLOVER_POOL_SPIN_US=0 and CLOVER_POOL_YIELD_US=yield_us (both read when a pool
 * is made, then unset again); NULL (a failed check) if it could not be made. */
static threadpool *pool_idle(size_t n, const char *yield_us) {
    setenv("CLOVER_POOL_SPIN_US", "0", 1);
    setenv("CLOVER_POOL_YIELD_US", yield_us, 1);
    threadpool *p = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&p, n, &err), CLOVER_OK);
    unsetenv("CLOVER_POOL_SPIN_US");
    unsetenv("CLOVER_POOL_YIELD_US");
    return p;
}

static void test_late_workers(void) {
    unsetenv("CLOVER_POOL_WAIT_ALL"); /* the A/B switch's old protocol has no late workers */
    threadpool *p = pool_idle(4, "0");
    if (!p) return;
    atomic_int after;
    atomic_init(&after, 0);
    long wrong = 0;
    threadpool_set_test_delay(p, 200);
    late_runs(p, 300, 0, &after, &wrong);
    threadpool_counts held;
    for (int wait = 0; wait < 2000; wait++) { /* the held-back workers are still in their delay: up to 2 s */
        const struct timespec ms = {0, 1000 * 1000};
        nanosleep(&ms, NULL);
        threadpool_get_counts(p, &held);
        if (held.late > 0) break;
    }
    threadpool_set_test_delay(p, 0);
    late_runs(p, 3000, 8, &after, &wrong);
    threadpool_counts counts;
    threadpool_get_counts(p, &counts);
    CHECK_EQ_INT(wrong, 0);
    CHECK_EQ_INT(atomic_load(&after), 0);
    CHECK_MSG(held.late > 0, "no held-back worker found a closed run (runs %llu)", (unsigned long long)held.runs);
    CHECK_EQ_INT(counts.runs, 3300);
    CHECK_MSG(counts.worker_sleeps > held.worker_sleeps && counts.woke > held.woke,
              "worker sleeps %llu, runs that woke them %llu", (unsigned long long)counts.worker_sleeps,
              (unsigned long long)counts.woke);
    threadpool_free(p);
}

/* The yielding poll after the spin: with no spin and a long yield window
 * (CLOVER_POOL_YIELD_US=500000), workers stay awake through runs 300 us
 * apart, so no worker sleeps and no run wakes one; with both at 0 (the case
 * above) the same gaps put them to sleep. */
static void test_yield_poll_keeps_workers_awake(void) {
    threadpool *p = pool_idle(3, "500000");
    if (!p) return;
    atomic_int after;
    atomic_init(&after, 0);
    long wrong = 0;
    late_runs(p, 200, 1, &after, &wrong);
    threadpool_counts counts;
    threadpool_get_counts(p, &counts);
    CHECK_EQ_INT(wrong, 0);
    CHECK_EQ_INT(counts.runs, 200);
    CHECK_MSG(counts.worker_sleeps == 0 && counts.woke == 0, "worker sleeps %llu, runs that woke them %llu",
              (unsigned long long)counts.worker_sleeps, (unsigned long long)counts.woke);
    threadpool_free(p);
}

/* The trace: the threads that took part in a run wrote arrive <= leave; with
 * tasks that wait for each other every thread takes part. */
typedef struct meet_ctx {
    atomic_size_t started;
    size_t n;
} meet_ctx;

static void meet_task(void *ctx, size_t task, size_t thread) {
    (void)task, (void)thread;
    meet_ctx *m = ctx;
    atomic_fetch_add(&m->started, 1);
    while (atomic_load(&m->started) < m->n) {
    }
}

static void test_trace(void) {
    threadpool *p = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&p, 3, &err), CLOVER_OK);
    if (!p) return;
    uint64_t arrive[3] = {0}, leave[3] = {0};
    threadpool_trace t = {arrive, leave};
    threadpool_set_trace(p, &t);
    meet_ctx m;
    atomic_init(&m.started, 0);
    m.n = 3;
    threadpool_run(p, 3, meet_task, &m);
    threadpool_set_trace(p, NULL);
    for (int i = 0; i < 3; i++) CHECK(arrive[i] != 0 && leave[i] >= arrive[i]);
    threadpool_counts c;
    threadpool_get_counts(p, &c);
    CHECK(c.runs == 1);
    threadpool_get_counts(NULL, &c);
    CHECK(c.runs == 0);
    threadpool_free(p);
}

enum { PH_A = 24, PH_B = 9, PH_C = 5 };

typedef struct phase_ctx {
    atomic_int a[PH_A], b[PH_B], c[PH_C];
    atomic_int early; /* a task that found a task of an earlier phase not finished */
} phase_ctx;

static void phase_a(void *ctx, size_t t, size_t thread) {
    (void)thread;
    phase_ctx *p = ctx;
    if (t % 7 == 3) { /* some slow ones: the next phase's tasks must wait for them */
        const struct timespec ts = {0, 300 * 1000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&p->a[t], (int)t + 1);
}

/* The sum of an earlier phase's n results; a 0 among them (not yet written) counted in early. */
static int sum_done(phase_ctx *p, atomic_int *v, int n) {
    int sum = 0;
    for (int i = 0; i < n; i++) {
        const int x = atomic_load(&v[i]);
        if (x == 0) atomic_fetch_add(&p->early, 1);
        sum += x;
    }
    return sum;
}

static void phase_b(void *ctx, size_t t, size_t thread) {
    (void)thread;
    phase_ctx *p = ctx;
    atomic_store(&p->b[t], sum_done(p, p->a, PH_A) + (int)t);
}

static void phase_c(void *ctx, size_t t, size_t thread) {
    (void)thread;
    phase_ctx *p = ctx;
    atomic_store(&p->c[t], sum_done(p, p->b, PH_B));
}

static void check_phases(threadpool *pool) {
    static phase_ctx p;
    memset(&p, 0, sizeof p);
    const threadpool_phase ph[4] = {{PH_A, phase_a, &p}, {0, phase_a, &p}, {PH_B, phase_b, &p}, {PH_C, phase_c, &p}};
    threadpool_run_phases(pool, ph, 4);
    const int sa = PH_A * (PH_A + 1) / 2, sb = PH_B * sa + PH_B * (PH_B - 1) / 2;
    int wrong = 0;
    for (int i = 0; i < PH_B; i++) wrong += atomic_load(&p.b[i]) != sa + i;
    for (int i = 0; i < PH_C; i++) wrong += atomic_load(&p.c[i]) != sb;
    CHECK_EQ_INT(wrong, 0);
    CHECK_EQ_INT(atomic_load(&p.early), 0);
}

static void test_phases(void) {
    check_phases(NULL); /* inline: phase after phase */
    threadpool *p = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&p, 4, &err), CLOVER_OK);
    if (!p) return;
    threadpool_counts c0, c1;
    threadpool_get_counts(p, &c0);
    for (int i = 0; i < 20; i++) check_phases(p);
    threadpool_get_counts(p, &c1);
    CHECK_EQ_INT(c1.runs - c0.runs, 20); /* one run of the pool each */
    threadpool_free(p);
}

static void test_create_defaults_and_errors(void) {
    threadpool *p = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&p, 0, &err), CLOVER_OK);
    CHECK_EQ_INT(threadpool_size(p), threadpool_cpu_count());
    CHECK(threadpool_cpu_count() >= 1);
    threadpool_free(p);
    p = (threadpool *)&err; /* must be reset to NULL on failure */
    CHECK_EQ_INT(threadpool_create(&p, 100000, &err), CLOVER_E_INVALID);
    CHECK(p == NULL);
    CHECK(strstr(err.message, "threads") != NULL);
    threadpool_free(NULL);
}

int main(void) {
    RUN(test_null_pool_inline);
    RUN(test_one_thread_pool);
    RUN(test_many_threads);
    RUN(test_caller_participates);
    RUN(test_back_to_back_runs);
    RUN(test_nested_runs_inline);
    RUN(test_late_workers);
    RUN(test_yield_poll_keeps_workers_awake);
    RUN(test_trace);
    RUN(test_phases);
    RUN(test_create_defaults_and_errors);
    return TEST_EXIT();
}
