/*
 * threadpool.c: the pool of threadpool.h.
 *
 * A run publishes its job (fn, ctx, n_tasks) and bumps a generation counter;
 * workers notice the new generation (spinning for a short while after their
 * last job, else woken from a futex or a condition variable) and take task
 * indices from an atomic counter until none are left. The caller works too
 * and returns once every task has finished: it does not wait for workers
 * that never got to the run. On a VM a sleeping worker takes ~20-100 us to
 * wake (the dev VM: ~23 us at 2 threads, bench_pool), and a run that waited
 * for every worker to count out made the caller spin past its own spin and
 * sleep too: an empty run after a gap took 108 us there against 23 for the
 * wake-up alone, and a preview makes ~540 runs (issue 30). So a worker
 * registers (active) before it reads the job and leaves at once when the
 * caller has already closed that run (closed); the caller, once the tasks
 * are done, closes the run and waits only for the registered workers, which
 * are past their last task, before the job fields are rewritten.
 *
 * Many threads (issue 30, 16 on the H200 host's Xeon): a worker past its
 * spin sleeps on a futex on the generation word itself (Linux; elsewhere
 * the condition variable), so that one wake-up call starts every sleeper at
 * once; the caller wakes only when someone sleeps (a count of sleepers), and
 * the counters the threads write during a run (next_task, done, active) and
 * the word the idle ones poll (generation) have a cache line each.
 * CLOVER_POOL_SPIN_US (read when a pool is made) sets the spin before
 * sleeping (default 50).
 *
 * After the spin an idle thread (a worker between runs, the caller waiting
 * for the others' tasks) polls on with sched_yield() between polls for
 * CLOVER_POOL_YIELD_US more (default 2000; 0: sleep right after the spin).
 * On the H200 host's VM a thread that sleeps takes ~1-7 ms to run again (a
 * halted vCPU; bench_pool, 16 threads: the slowest arrival after a 300 us
 * gap 3.5 ms median), and the serial work between a pass's runs often
 * exceeds 50 us: a 32-row AMX preview of the 35B-A3B file woke sleeping
 * workers in 262 of its 282 runs and took 0.249 s, 0.151 s with a 2 ms spin
 * (bench/device-runs/2026-12-16-pool30). Yielding instead of spinning keeps
 * that on a loaded machine (CI's parallel tests) from holding a core others
 * are waiting for. CLOVER_POOL_CONDVAR=1 keeps the condition variable,
 * CLOVER_POOL_WAIT_ALL=1 the wait for every worker, CLOVER_POOL_PIN=1 pins
 * worker i to CPU i (A/B timing).
 */
#define _GNU_SOURCE /* pthread_setaffinity_np, sched_getaffinity */
#include "base/threadpool.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#define POOL_HAVE_FUTEX 1
#else
#define POOL_HAVE_FUTEX 0
#endif

#include "base/alloc.h"
#include "base/error.h"

enum {
    THREADPOOL_MAX_THREADS = 4096,
    SPIN_NS = 50 * 1000, /* how long an idle thread polls before sleeping (CLOVER_POOL_SPIN_US) */
    YIELD_NS = 2000 * 1000, /* the yielding poll after the spin (CLOVER_POOL_YIELD_US) */
    SPIN_MAX_US = 1000 * 1000,
};

typedef struct worker {
    threadpool *pool;
    size_t index; /* 1..n_threads-1 */
    pthread_t thread;
} worker;

struct threadpool {
    size_t n_threads; /* the caller included */
    worker *workers;  /* [n_threads - 1] */
    size_t n_started;

    uint64_t spin_ns;  /* an idle thread's poll before it sleeps */
    uint64_t yield_ns; /* then its poll with sched_yield() between polls */
    bool futex;       /* sleepers wait on generation's futex, not on `wake` */
    bool wait_all;    /* CLOVER_POOL_WAIT_ALL: a run waits for every worker to count out */
    bool pin;         /* CLOVER_POOL_PIN: worker i on CPU i */

    pthread_mutex_t lock;
    pthread_cond_t wake; /* a new generation (or stop), without futex */
    pthread_cond_t done; /* the caller's wait: the tasks done, or (wait_all) every worker out */
    atomic_bool stop;

    /* The current job: written by the caller before the generation is bumped. */
    threadpool_task_fn fn;
    void *ctx;
    size_t n_tasks;

    _Alignas(64) atomic_uint generation; /* polled by idle workers: a line of its own */
    atomic_uint sleepers;                /* workers asleep or about to be (the futex's wake-up; counts) */
    _Alignas(64) atomic_size_t next_task; /* taken once a task by every thread */
    _Alignas(64) atomic_size_t tasks_done; /* tasks finished in the current run */
    _Alignas(64) atomic_size_t active;     /* workers registered in the current run and not yet out */
    atomic_uint closed;                    /* the last generation whose run the caller closed */
    atomic_size_t left;                    /* workers out of the current run (wait_all) */
    atomic_bool caller_asleep;             /* the caller waits on `done` */

    threadpool_trace *trace; /* bench_pool's record of a run, or NULL */
    atomic_uint test_delay_us; /* threadpool_set_test_delay */

    /* threadpool_counts: the caller's (runs, caller_sleeps, woke) and the workers' (relaxed). */
    uint64_t runs, caller_sleeps, woke;
    atomic_uint_fast64_t worker_sleeps, late;
};

/* Set while this thread runs tasks: its index, and that a nested run must go inline. */
static _Thread_local bool tls_in_task;
static _Thread_local size_t tls_thread_index;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* An idle thread's poll, called at each iteration i of its loop since t0: true while it should poll on (a pure
 * spin for spin_ns, then a yield every 64 polls for yield_ns more), false once it is time to sleep. */
static bool keep_polling(const threadpool *p, unsigned i, uint64_t t0) {
    if ((i & 63) != 0) return true;
    const uint64_t el = now_ns() - t0;
    if (el < p->spin_ns) return true;
    if (el >= p->spin_ns + p->yield_ns) return false;
    sched_yield();
    return true;
}

size_t threadpool_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (size_t)n : 1;
}

size_t threadpool_size(const threadpool *pool) { return pool ? pool->n_threads : 1; }

/* Takes tasks until none are left; adds the number it ran to tasks_done
 * (seq_cst: against the caller's caller_asleep, notify_caller). */
static void run_tasks(threadpool *p, size_t thread) {
    const threadpool_task_fn fn = p->fn;
    void *ctx = p->ctx;
    const size_t n = p->n_tasks;
    threadpool_trace *trace = p->trace;
    if (trace) trace->arrive[thread] = now_ns();
    size_t ran = 0;
    for (;;) {
        size_t t = atomic_fetch_add_explicit(&p->next_task, 1, memory_order_relaxed);
        if (t >= n) break;
        fn(ctx, t, thread);
        ran++;
    }
    if (trace) trace->leave[thread] = now_ns();
    if (ran) atomic_fetch_add_explicit(&p->tasks_done, ran, memory_order_seq_cst);
}

#if POOL_HAVE_FUTEX
static void futex_wait_u32(atomic_uint *word, unsigned expected) {
    syscall(SYS_futex, (unsigned *)(void *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}
static void futex_wake_all(atomic_uint *word) {
    syscall(SYS_futex, (unsigned *)(void *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}
#endif

/* Futex sleepers: wakes them after the generation was bumped. seq_cst
 * with a sleeper's increment and the bump: either the sleeper sees the new
 * generation or this sees it counted (and the futex's own check of the
 * word covers the gap before its wait). */
static void wake_workers(threadpool *p) {
#if POOL_HAVE_FUTEX
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) != 0) futex_wake_all(&p->generation);
#else
    (void)p;
#endif
}

/* Waits for a generation other than `seen`; returns it. */
static unsigned wait_generation(threadpool *p, unsigned seen) {
    unsigned g = atomic_load_explicit(&p->generation, memory_order_acquire);
    if (g != seen) return g;
    const uint64_t t0 = now_ns();
    for (unsigned i = 1;; i++) {
        cpu_relax();
        g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen) return g;
        if (!keep_polling(p, i, t0)) break;
    }
    atomic_fetch_add_explicit(&p->worker_sleeps, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
#if POOL_HAVE_FUTEX
    if (p->futex) {
        while ((g = atomic_load_explicit(&p->generation, memory_order_seq_cst)) == seen) futex_wait_u32(&p->generation, seen);
        atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
        return g;
    }
#endif
    pthread_mutex_lock(&p->lock);
    while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen)
        pthread_cond_wait(&p->wake, &p->lock);
    pthread_mutex_unlock(&p->lock);
    atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_relaxed);
    return g;
}

/* After a worker's update of a counter the caller may sleep on (seq_cst,
 * as the caller's flag): either the caller sees the update before it
 * sleeps or this sees it asleep and wakes it (under the lock, so that the
 * signal cannot fall between its check and its wait). */
static void notify_caller(threadpool *p) {
    if (!atomic_load_explicit(&p->caller_asleep, memory_order_seq_cst)) return;
    pthread_mutex_lock(&p->lock);
    pthread_cond_signal(&p->done);
    pthread_mutex_unlock(&p->lock);
}

/* CLOVER_POOL_PIN=1 (A/B timing on many-core hosts, issue 30): worker i
 * stays on CPU i of the process's allowed set (the caller, thread 0, is the
 * user's thread and is left alone). Linux only; elsewhere, or when the set
 * is smaller than the pool, the workers are not pinned. */
static void pin_worker(size_t index) {
#if defined(__linux__) && defined(CPU_SETSIZE)
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    size_t seen = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed)) continue;
        if (seen++ == index) {
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
    }
#else
    (void)index;
#endif
}

static void *worker_main(void *arg) {
    worker *w = arg;
    threadpool *p = w->pool;
    if (p->pin) pin_worker(w->index);
    tls_in_task = true;
    tls_thread_index = w->index;
    unsigned seen = 0;
    for (;;) {
        seen = wait_generation(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        const unsigned delay = atomic_load_explicit(&p->test_delay_us, memory_order_relaxed);
        if (delay) {
            const struct timespec ts = {(time_t)(delay / 1000000), (long)(delay % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
        if (p->wait_all) {
            run_tasks(p, w->index);
            atomic_fetch_add_explicit(&p->left, 1, memory_order_seq_cst);
            notify_caller(p);
            continue;
        }
        /* Register, then look whether the caller closed this run already
         * (seq_cst both, against the caller's close and then its read of
         * active): if not, the caller waits for this worker before it
         * rewrites the job; if so, the job may be the next run's, half
         * written: leave without reading it. Generations compare modulo
         * 2^32 (a worker never lags 2^31 runs). */
        atomic_fetch_add_explicit(&p->active, 1, memory_order_seq_cst);
        if ((int)(atomic_load_explicit(&p->closed, memory_order_seq_cst) - seen) >= 0) {
            atomic_fetch_add_explicit(&p->late, 1, memory_order_relaxed);
            atomic_fetch_sub_explicit(&p->active, 1, memory_order_seq_cst);
            continue;
        }
        run_tasks(p, w->index);
        notify_caller(p);
        atomic_fetch_sub_explicit(&p->active, 1, memory_order_seq_cst);
    }
    return NULL;
}

static void stop_workers(threadpool *p) {
    pthread_mutex_lock(&p->lock);
    atomic_store_explicit(&p->stop, true, memory_order_release);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_seq_cst);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
#if POOL_HAVE_FUTEX
    futex_wake_all(&p->generation);
#endif
    for (size_t i = 0; i < p->n_started; i++) pthread_join(p->workers[i].thread, NULL);
    p->n_started = 0;
}

/* A duration in microseconds from the environment (capped at SPIN_MAX_US), in ns; dflt_ns when unset. */
static uint64_t env_ns(const char *name, uint64_t dflt_ns) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt_ns;
    const unsigned long us = strtoul(v, NULL, 10);
    return (uint64_t)(us < SPIN_MAX_US ? us : SPIN_MAX_US) * 1000u;
}

/* A switch from the environment: set and not "0". */
static bool env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

int threadpool_create(threadpool **out, size_t n_threads, clover_error *err) {
    *out = NULL;
    if (n_threads == 0) n_threads = threadpool_cpu_count();
    if (n_threads > THREADPOOL_MAX_THREADS)
        return error_set(err, CLOVER_E_INVALID, "threadpool: %zu threads requested, at most %d", n_threads,
                         THREADPOOL_MAX_THREADS);
    threadpool *p = mem_calloc(1, sizeof *p);
    if (!p) return error_set(err, CLOVER_E_NOMEM, "threadpool: out of memory");
    p->n_threads = n_threads;
    p->spin_ns = env_ns("CLOVER_POOL_SPIN_US", SPIN_NS);
    p->yield_ns = env_ns("CLOVER_POOL_YIELD_US", YIELD_NS);
    p->futex = POOL_HAVE_FUTEX && !env_on("CLOVER_POOL_CONDVAR");
    p->wait_all = env_on("CLOVER_POOL_WAIT_ALL");
    p->pin = env_on("CLOVER_POOL_PIN");
    if (n_threads > 1) {
        p->workers = mem_calloc(n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            mem_free(p);
            return error_set(err, CLOVER_E_NOMEM, "threadpool: out of memory for %zu workers", n_threads - 1);
        }
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, false);
    atomic_init(&p->next_task, 0);
    atomic_init(&p->tasks_done, 0);
    atomic_init(&p->active, 0);
    atomic_init(&p->closed, 0);
    atomic_init(&p->left, 0);
    atomic_init(&p->caller_asleep, false);
    atomic_init(&p->worker_sleeps, 0);
    atomic_init(&p->late, 0);
    atomic_init(&p->test_delay_us, 0);
    for (size_t i = 0; i + 1 < n_threads; i++) {
        worker *w = &p->workers[i];
        w->pool = p;
        w->index = i + 1;
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0) {
            threadpool_free(p);
            return error_set(err, CLOVER_E_NOMEM, "threadpool: cannot start thread %zu of %zu: %s", i + 2, n_threads,
                             strerror(rc));
        }
        p->n_started++;
    }
    *out = p;
    return CLOVER_OK;
}

void threadpool_free(threadpool *pool) {
    if (!pool) return;
    stop_workers(pool);
    pthread_cond_destroy(&pool->done);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->lock);
    mem_free(pool->workers);
    mem_free(pool);
}

static void run_inline(size_t n_tasks, threadpool_task_fn fn, void *ctx) {
    const bool was_in_task = tls_in_task;
    const size_t thread = was_in_task ? tls_thread_index : 0;
    tls_in_task = true;
    for (size_t t = 0; t < n_tasks; t++) fn(ctx, t, thread);
    tls_in_task = was_in_task;
}

/* The caller's wait until *counter reaches want: a spin, then sleep on
 * `done` (notify_caller's other half). */
static void caller_wait(threadpool *p, atomic_size_t *counter, size_t want) {
    if (atomic_load_explicit(counter, memory_order_acquire) == want) return;
    const uint64_t t0 = now_ns();
    for (unsigned i = 1;; i++) {
        cpu_relax();
        if (atomic_load_explicit(counter, memory_order_acquire) == want) return;
        if (!keep_polling(p, i, t0)) break;
    }
    p->caller_sleeps++;
    pthread_mutex_lock(&p->lock);
    atomic_store_explicit(&p->caller_asleep, true, memory_order_seq_cst);
    while (atomic_load_explicit(counter, memory_order_seq_cst) != want) pthread_cond_wait(&p->done, &p->lock);
    atomic_store_explicit(&p->caller_asleep, false, memory_order_relaxed);
    pthread_mutex_unlock(&p->lock);
}

void threadpool_run(threadpool *pool, size_t n_tasks, threadpool_task_fn fn, void *ctx) {
    if (n_tasks == 0) return;
    if (!pool || pool->n_threads == 1 || n_tasks == 1 || tls_in_task) {
        run_inline(n_tasks, fn, ctx);
        return;
    }
    threadpool *p = pool;
    /* No worker reads the job now (the last run was closed with none
     * registered, or every worker counted out of it); the bump publishes
     * it. Without futex the bump is under the lock, so that a worker
     * between its last check and its wait cannot miss the broadcast. */
    if (!p->futex) pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&p->tasks_done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->left, 0, memory_order_relaxed);
    const unsigned g = atomic_fetch_add_explicit(&p->generation, 1, memory_order_seq_cst) + 1;
    p->runs++;
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) != 0) p->woke++;
    if (p->futex) {
        wake_workers(p);
    } else {
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }

    tls_in_task = true;
    tls_thread_index = 0;
    run_tasks(p, 0);
    tls_in_task = false;

    caller_wait(p, &p->tasks_done, n_tasks);
    if (p->wait_all) {
        caller_wait(p, &p->left, p->n_threads - 1);
        return;
    }
    /* Close the run, then wait for the workers registered in it: they are
     * past their last task (every task is done), so this is their way out,
     * a few instructions, unless the OS took a core from one. */
    atomic_store_explicit(&p->closed, g, memory_order_seq_cst);
    for (unsigned i = 1; atomic_load_explicit(&p->active, memory_order_seq_cst) != 0; i++) {
        cpu_relax();
        if ((i & 1023) == 0) sched_yield();
    }
}

void threadpool_set_test_delay(threadpool *pool, unsigned us) {
    if (pool) atomic_store_explicit(&pool->test_delay_us, us, memory_order_relaxed);
}

void threadpool_set_trace(threadpool *pool, threadpool_trace *trace) {
    if (pool) pool->trace = trace;
}

void threadpool_get_counts(const threadpool *pool, threadpool_counts *out) {
    *out = (threadpool_counts){0};
    if (!pool) return;
    out->runs = pool->runs;
    out->woke = pool->woke;
    out->caller_sleeps = pool->caller_sleeps;
    out->worker_sleeps = atomic_load_explicit(&pool->worker_sleeps, memory_order_relaxed);
    out->late = atomic_load_explicit(&pool->late, memory_order_relaxed);
}
