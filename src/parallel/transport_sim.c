/*
 * transport_sim.c: N simulated ranks in this process, one thread each, so
 * that a rank can fail or go silent on its own while the driver waits, as a
 * GPU can. The driver posts a collective (a generation number and the
 * buffers); every rank thread does its side (all-to-all: rank s copies its
 * segment for d into recv[d] at the offset of s's segment, which is what
 * NCCL's grouped send/recv delivers) and reports; the driver waits for all
 * of them until the deadline. A rank that does not report in time is a lost
 * rank: the collective fails naming it, the group is broken (transport.c),
 * and the silent thread is released only when the group is closed (a rank
 * that is merely late would still write into the receive buffers: the NCCL
 * group aborts its communicators for that reason; here only the planted
 * silent rank is ever late, and it writes nothing). Planted
 * faults (par_config.fault) make one rank fail or go silent after a given
 * number of collectives, for the tests.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/error.h"
#include "parallel/transport.h"

enum { SIM_IDLE, SIM_ALLTOALLV, SIM_ALLREDUCE };

typedef struct sim sim;
typedef struct sim_rank {
    sim *g;
    size_t r;
    pthread_t th;
    bool started;
    unsigned completed; /* collectives this rank has finished */
} sim_rank;

struct sim {
    par_transport base; /* first: the group is a par_transport */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    bool closing;
    size_t n_done;
    int status[PAR_MAX_RANKS]; /* 0: not reported, 1: done, < 0: failed */
    /* the posted collective */
    int op;
    const void *const *send;
    void *const *recv;
    const size_t *counts;
    const int32_t *const *in;
    int32_t *const *out;
    par_fault fault;
    int fail_rank;
    unsigned fail_after;
    size_t n;
    sim_rank ranks[PAR_MAX_RANKS];
};

/* The posted collective, copied by each rank under the lock when it wakes. */
typedef struct sim_op {
    int op;
    const void *const *send;
    void *const *recv;
    const size_t *counts;
    const int32_t *const *in;
    int32_t *const *out;
} sim_op;

static void sim_rank_work(const sim_op *o, size_t n, size_t r) {
    if (o->op == SIM_ALLTOALLV) {
        size_t off_send = 0;
        for (size_t d = 0; d < n; d++) {
            size_t c = o->counts[r * n + d], off_recv = 0;
            for (size_t s = 0; s < r; s++) off_recv += o->counts[s * n + d];
            if (c) memcpy((char *)o->recv[d] + off_recv, (const char *)o->send[r] + off_send, c);
            off_send += c;
        }
    } else if (o->op == SIM_ALLREDUCE) {
        int32_t m = *o->in[0];
        for (size_t s = 1; s < n; s++)
            if (*o->in[s] > m) m = *o->in[s];
        *o->out[r] = m;
    }
}

static void *sim_rank_main(void *arg) {
    sim_rank *me = arg;
    sim *g = me->g;
    uint64_t seen = 0;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        while (!g->closing && g->gen == seen) pthread_cond_wait(&g->go, &g->mu);
        if (g->closing) break;
        seen = g->gen;
        const bool faulty = g->fault != PAR_FAULT_NONE && (int)me->r == g->fail_rank && me->completed >= g->fail_after;
        if (faulty && g->fault == PAR_FAULT_STALL) {
            /* a lost rank: never reports; released by par_close */
            while (!g->closing) pthread_cond_wait(&g->go, &g->mu);
            break;
        }
        const sim_op o = {g->op, g->send, g->recv, g->counts, g->in, g->out};
        pthread_mutex_unlock(&g->mu);
        if (!faulty) sim_rank_work(&o, g->n, me->r);
        pthread_mutex_lock(&g->mu);
        me->completed++;
        g->status[me->r] = faulty ? -1 : 1;
        g->n_done++;
        pthread_cond_signal(&g->done);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

static int sim_run(sim *g, const char *what, clover_error *err) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += g->base.timeout_ms / 1000;
    deadline.tv_nsec += (long)(g->base.timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&g->mu);
    g->n_done = 0;
    for (size_t r = 0; r < g->n; r++) g->status[r] = 0;
    g->gen++;
    pthread_cond_broadcast(&g->go);
    bool late = false;
    while (g->n_done < g->n && !late) late = pthread_cond_timedwait(&g->done, &g->mu, &deadline) == ETIMEDOUT;
    int rc = CLOVER_OK;
    for (size_t r = 0; r < g->n && !rc; r++) {
        if (g->status[r] < 0)
            rc = error_set(err, CLOVER_E_IO, "parallel (sim): rank %zu of %zu failed in the %s (planted fault); "
                           "the group is closed", r, g->n, what);
        else if (g->status[r] == 0 && g->n_done < g->n)
            rc = error_set(err, CLOVER_E_IO, "parallel (sim): rank %zu of %zu did not finish the %s within %u ms "
                           "(a lost rank); the group is closed", r, g->n, what, g->base.timeout_ms);
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static int sim_alltoallv(par_transport *t, const void *const *send, void *const *recv, const size_t *counts,
                         clover_error *err) {
    sim *g = (sim *)t;
    pthread_mutex_lock(&g->mu);
    g->op = SIM_ALLTOALLV;
    g->send = send;
    g->recv = recv;
    g->counts = counts;
    pthread_mutex_unlock(&g->mu);
    return sim_run(g, "all-to-all", err);
}

static int sim_allreduce(par_transport *t, const int32_t *const *in, int32_t *const *out, clover_error *err) {
    sim *g = (sim *)t;
    pthread_mutex_lock(&g->mu);
    g->op = SIM_ALLREDUCE;
    g->in = in;
    g->out = out;
    pthread_mutex_unlock(&g->mu);
    return sim_run(g, "all-reduce", err);
}

static void sim_close(par_transport *t) {
    sim *g = (sim *)t;
    pthread_mutex_lock(&g->mu);
    g->closing = true;
    pthread_cond_broadcast(&g->go);
    pthread_mutex_unlock(&g->mu);
    for (size_t r = 0; r < g->n; r++)
        if (g->ranks[r].started) pthread_join(g->ranks[r].th, NULL);
    pthread_cond_destroy(&g->go);
    pthread_cond_destroy(&g->done);
    pthread_mutex_destroy(&g->mu);
    mem_free(g);
}

static const par_ops sim_ops = {"sim", sim_alltoallv, sim_allreduce, sim_close};

int par_sim_open(const par_config *cfg, par_transport **out, clover_error *err) {
    sim *g = mem_alloc(sizeof *g);
    if (!g) return error_set(err, CLOVER_E_NOMEM, "parallel (sim): out of memory");
    memset(g, 0, sizeof *g);
    g->base.ops = &sim_ops;
    g->base.n = g->n = cfg->n_ranks;
    g->base.timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 30000;
    g->fault = cfg->fault;
    g->fail_rank = cfg->fail_rank;
    g->fail_after = cfg->fail_after;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->go, NULL);
    pthread_cond_init(&g->done, &ca);
    pthread_condattr_destroy(&ca);
    for (size_t r = 0; r < g->n; r++) {
        g->ranks[r] = (sim_rank){.g = g, .r = r};
        if (pthread_create(&g->ranks[r].th, NULL, sim_rank_main, &g->ranks[r]) != 0) {
            sim_close(&g->base);
            return error_set(err, CLOVER_E_NOMEM, "parallel (sim): cannot start the thread of rank %zu", r);
        }
        g->ranks[r].started = true;
    }
    *out = &g->base;
    return CLOVER_OK;
}
