/*
 * transport.c: the group's front: argument checks, the broken state (a
 * failed collective latches its error, later calls return it at once), the
 * --devices parser, and the stub of NCCL in builds without CUDA.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "parallel/transport.h"

int par_open(const par_config *cfg, par_transport **out, clover_error *err) {
    *out = NULL;
    if (!cfg || cfg->n_ranks < 1 || cfg->n_ranks > PAR_MAX_RANKS)
        return error_set(err, CLOVER_E_INVALID, "parallel: %zu ranks, expected 1..%d", cfg ? cfg->n_ranks : 0,
                         PAR_MAX_RANKS);
    if (cfg->fault != PAR_FAULT_NONE && (cfg->fail_rank < 0 || (size_t)cfg->fail_rank >= cfg->n_ranks))
        return error_set(err, CLOVER_E_INVALID, "parallel: fault planted on rank %d of %zu", cfg->fail_rank,
                         cfg->n_ranks);
    int rc = cfg->kind == PAR_KIND_NCCL ? par_nccl_open(cfg, out, err) : par_sim_open(cfg, out, err);
    if (rc) return rc;
    (*out)->n = cfg->n_ranks;
    (*out)->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 30000;
    return CLOVER_OK;
}

void par_close(par_transport *t) {
    if (t) t->ops->close(t);
}

size_t par_n_ranks(const par_transport *t) { return t->n; }
const char *par_kind_name(const par_transport *t) { return t->ops->name; }

static int par_latched(par_transport *t, int rc, clover_error *err) {
    if (rc && !t->broken) {
        t->broken = rc;
        t->broken_err = *err;
    }
    return rc;
}

int par_alltoallv(par_transport *t, const void *const *send, void *const *recv, const size_t *counts,
                  clover_error *err) {
    clover_error local;
    if (!err) err = &local; /* the broken state keeps the message even when the caller takes none */
    if (t->broken) {
        *err = t->broken_err;
        return t->broken;
    }
    for (size_t s = 0; s < t->n; s++)
        for (size_t d = 0; d < t->n; d++)
            if (counts[s * t->n + d] && (!send[s] || !recv[d]))
                return error_set(err, CLOVER_E_INVALID, "parallel: all-to-all: %zu bytes from rank %zu to %zu "
                                 "but no buffer", counts[s * t->n + d], s, d);
    return par_latched(t, t->ops->alltoallv(t, send, recv, counts, err), err);
}

int par_allreduce_max_i32(par_transport *t, const int32_t *const *in, int32_t *const *out, clover_error *err) {
    clover_error local;
    if (!err) err = &local;
    if (t->broken) {
        *err = t->broken_err;
        return t->broken;
    }
    return par_latched(t, t->ops->allreduce_max_i32(t, in, out, err), err);
}

int par_parse_devices(const char *spec, int n_available, int *out, size_t cap, clover_error *err) {
    if (!spec || !*spec) return error_set(err, CLOVER_E_INVALID, "--devices: empty list (expected e.g. 0,1)");
    size_t n = 0;
    const char *p = spec;
    for (;;) {
        char *end;
        errno = 0;
        long v = (*p >= '0' && *p <= '9') ? strtol(p, &end, 10) : -1;
        if (v < 0 || errno || end == p || (*end && *end != ','))
            return error_set(err, CLOVER_E_INVALID, "--devices '%.64s': expected device numbers separated by "
                             "commas, e.g. 0,1", spec);
        if (n == cap || n >= PAR_MAX_RANKS)
            return error_set(err, CLOVER_E_INVALID, "--devices '%.64s': more than %zu devices", spec,
                             cap < PAR_MAX_RANKS ? cap : (size_t)PAR_MAX_RANKS);
        for (size_t i = 0; i < n; i++)
            if (out[i] == (int)v)
                return error_set(err, CLOVER_E_INVALID, "--devices '%.64s': device %ld is named twice", spec, v);
        out[n++] = (int)v;
        if (!*end) break;
        p = end + 1;
    }
    /* the list is well formed: now whether this host has its devices */
    for (size_t i = 0; i < n && n_available >= 0; i++)
        if (out[i] >= n_available)
            return error_set(err, CLOVER_E_INVALID, "--devices '%.64s': device %d does not exist (this host has "
                             "%d CUDA device%s)", spec, out[i], n_available, n_available == 1 ? "" : "s");
    return (int)n;
}

#ifndef CLOVER_HAVE_NCCL
int par_nccl_open(const par_config *cfg, par_transport **out, clover_error *err) {
    (void)cfg;
    *out = NULL;
    return error_set(err, CLOVER_E_UNSUPPORTED, "--devices: this build has no CUDA backend with NCCL headers, so no "
                     "multi-GPU group; rebuild with a CUDA toolkit that has nccl.h");
}
#endif
