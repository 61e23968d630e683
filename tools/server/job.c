/*
 * job.c: reference counting, stream bytes and the connection's wait.
 *
 * A client's departure is found by looking at its socket while waiting:
 * readable with nothing to read (recv with MSG_PEEK gives 0) is an orderly
 * close, an error or hang-up a reset. Bytes that are waiting (a pipelined
 * request) mean the client is still there. The 50 ms tick bounds how long a
 * departed client's generation keeps running: the engine checks the cancel
 * flag before every pass.
 */
#include "job.h"

#include "tick_thread.h"
#include "tool_calls.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define JOB_WAIT_TICK_NS 50000000L

job *job_create(void) {
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca)) {
        free(j);
        return NULL;
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc) {
        free(j);
        return NULL;
    }
    if (pthread_mutex_init(&j->mu, NULL)) {
        pthread_cond_destroy(&j->cv);
        free(j);
        return NULL;
    }
    j->refs = 1;
    clover_generate_params_init(&j->params);
    return j;
}

void job_ref(job *j) {
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

void job_unref(job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last) return;
    free(j->prompt);
    for (size_t i = 0; i < j->n_stops; i++)
        free(j->stops[i]);
    byte_buf_free(&j->sse);
    free(j->text);
    free(j->tool_prefix);
    free(j->json_schema);
    for (size_t i = 0; i < j->n_tool_names; i++) {
        free(j->tool_names[i]);
        if (j->tool_schemas) free(j->tool_schemas[i]);
    }
    free(j->tool_names);
    free(j->tool_schemas);
    tool_calls_free(j->calls, j->n_calls);
    free(j->tool_content);
    for (size_t i = 0; i < j->n_lp; i++) {
        free(j->lp[i].bytes);
        for (uint32_t k = 0; k < j->lp[i].n_top; k++)
            free(j->lp[i].top[k]);
    }
    free(j->lp);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

void job_signal_locked(job *j) {
    pthread_cond_broadcast(&j->cv);
    if (j->suspended && j->resume) {
        j->suspended = 0;
        j->resume(j->conn);
    }
}

int job_append_sse(job *j, const char *data, size_t len) {
    pthread_mutex_lock(&j->mu);
    int rc = byte_buf_append(&j->sse, data, len);
    job_signal_locked(j);
    pthread_mutex_unlock(&j->mu);
    return rc;
}

double job_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int job_peer_gone(int fd) {
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return 1;
    if (!(p.revents & POLLIN)) return 0;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return 1;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

int job_wait_locked(job *j, int fd, int want_bytes) {
    for (;;) {
        if (j->state == JOB_DONE || (want_bytes && byte_buf_avail(&j->sse))) return 1;
        struct timespec until = tick_deadline(JOB_WAIT_TICK_NS);
        int rc = pthread_cond_timedwait(&j->cv, &j->mu, &until);
        if (rc == ETIMEDOUT && j->state != JOB_DONE && !(want_bytes && byte_buf_avail(&j->sse))) {
            pthread_mutex_unlock(&j->mu);
            int gone = job_peer_gone(fd);
            pthread_mutex_lock(&j->mu);
            if (gone) {
                j->cancel = 1;
                j->client_cancelled = 1;
                return 0;
            }
        }
    }
}
