/*
 * transport_nccl.c: the group over NCCL, one communicator per GPU of this
 * process (ncclCommInitAll), NCCL loaded with dlopen at the first
 * par_open of kind NCCL, so that a binary built here starts and runs on the
 * CPU on a host without libnccl.so.2; asking for a device group there is a
 * one-line error naming the library (CLOVER_NCCL_LIB names another file
 * to load instead). Compiled only in CUDA builds whose
 * toolkit has nccl.h (the header gives the types; no symbol is linked).
 *
 * A collective is one NCCL group: per rank, a send and a receive for every
 * peer with a nonzero count (all-to-all), or an all-reduce, each on the
 * rank's own stream. The driver then polls every stream and every
 * communicator's asynchronous error until the deadline; a rank whose stream
 * errs, whose communicator reports an error, or that is not done in time
 * fails the collective by name, and every communicator is aborted
 * (ncclCommAbort), so no later call can wait on it. NVLink multicast (NVLS)
 * is forced off before the communicators exist: on a shared host it can
 * take GPUs out of service (KINDS.md).
 *
 * Not run in this repository's tests: no machine with two GPUs was lent
 * (docs/MULTI_GPU.md). The CPU tests cover the missing-library error.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "base/alloc.h"
#include "base/error.h"
#include "parallel/transport.h"

typedef struct nccl_api {
    void *lib;
    ncclResult_t (*comm_init_all)(ncclComm_t *, int, const int *);
    ncclResult_t (*comm_destroy)(ncclComm_t);
    ncclResult_t (*comm_abort)(ncclComm_t);
    ncclResult_t (*comm_async_error)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                               cudaStream_t);
    const char *(*error_string)(ncclResult_t);
} nccl_api;

typedef struct nccl_group {
    par_transport base;
    nccl_api api;
    int dev[PAR_MAX_RANKS];
    ncclComm_t comm[PAR_MAX_RANKS];
    cudaStream_t stream[PAR_MAX_RANKS];
    bool aborted;
} nccl_group;

static int nccl_load(nccl_api *a, clover_error *err) {
    memset(a, 0, sizeof *a);
    const char *name = getenv("CLOVER_NCCL_LIB"); /* another build of NCCL, or the tests' missing one */
    if (!name || !*name) name = "libnccl.so.2";
    a->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        const char *why = dlerror();
        const char *nl = why ? strchr(why, '\n') : NULL;
        return error_set(err, CLOVER_E_UNSUPPORTED, "--devices: cannot load %s (%.*s); install NCCL (e.g. "
                         "Debian's libnccl2) or run on one device", name, why ? (int)(nl ? nl - why : (long)strlen(why)) : 1,
                         why ? why : "?");
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&a->comm_init_all, "ncclCommInitAll"}, {(void **)&a->comm_destroy, "ncclCommDestroy"},
        {(void **)&a->comm_abort, "ncclCommAbort"},      {(void **)&a->comm_async_error, "ncclCommGetAsyncError"},
        {(void **)&a->group_start, "ncclGroupStart"},    {(void **)&a->group_end, "ncclGroupEnd"},
        {(void **)&a->send, "ncclSend"},                 {(void **)&a->recv, "ncclRecv"},
        {(void **)&a->all_reduce, "ncclAllReduce"},      {(void **)&a->error_string, "ncclGetErrorString"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(a->lib, syms[i].name);
        if (!*syms[i].slot) {
            dlclose(a->lib);
            a->lib = NULL;
            return error_set(err, CLOVER_E_UNSUPPORTED, "--devices: libnccl.so.2 has no %s (NCCL 2.7 or later "
                             "is needed)", syms[i].name);
        }
    }
    return CLOVER_OK;
}

static void nccl_abort_all(nccl_group *g) {
    if (g->aborted) return;
    for (size_t r = 0; r < g->base.n; r++)
        if (g->comm[r]) g->api.comm_abort(g->comm[r]);
    memset(g->comm, 0, sizeof g->comm);
    g->aborted = true;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* After the group is enqueued: every stream done before the deadline, or the failing rank named. */
static int nccl_wait(nccl_group *g, const char *what, clover_error *err) {
    const double deadline = now_s() + g->base.timeout_ms * 1e-3;
    bool done[PAR_MAX_RANKS] = {false};
    size_t left = g->base.n;
    while (left) {
        for (size_t r = 0; r < g->base.n; r++) {
            if (done[r]) continue;
            ncclResult_t as = ncclSuccess;
            g->api.comm_async_error(g->comm[r], &as);
            if (as != ncclSuccess && as != ncclInProgress) {
                int rc = error_set(err, CLOVER_E_IO, "parallel (NCCL): rank %zu (GPU %d) failed in the %s: %s; "
                                   "the group is closed", r, g->dev[r], what, g->api.error_string(as));
                nccl_abort_all(g);
                return rc;
            }
            cudaSetDevice(g->dev[r]);
            cudaError_t q = cudaStreamQuery(g->stream[r]);
            if (q == cudaSuccess) {
                done[r] = true;
                left--;
            } else if (q != cudaErrorNotReady) {
                int rc = error_set(err, CLOVER_E_IO, "parallel (NCCL): GPU %d (rank %zu) failed in the %s: %s; "
                                   "the group is closed", g->dev[r], r, what, cudaGetErrorString(q));
                nccl_abort_all(g);
                return rc;
            }
        }
        if (left && now_s() > deadline) {
            size_t r = 0;
            while (done[r]) r++;
            int rc = error_set(err, CLOVER_E_IO, "parallel (NCCL): GPU %d (rank %zu) did not finish the %s within "
                               "%u ms (a lost GPU?); the group is closed", g->dev[r], r, what, g->base.timeout_ms);
            nccl_abort_all(g);
            return rc;
        }
        if (left) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    return CLOVER_OK;
}

static int nccl_check(nccl_group *g, ncclResult_t r, const char *what, clover_error *err) {
    if (r == ncclSuccess || r == ncclInProgress) return CLOVER_OK;
    int rc = error_set(err, CLOVER_E_IO, "parallel (NCCL): %s: %s; the group is closed", what,
                       g->api.error_string(r));
    nccl_abort_all(g);
    return rc;
}

static int nccl_alltoallv(par_transport *t, const void *const *send, void *const *recv, const size_t *counts,
                          clover_error *err) {
    nccl_group *g = (nccl_group *)t;
    const size_t n = t->n;
    ncclResult_t res = g->api.group_start();
    for (size_t s = 0; s < n && res == ncclSuccess; s++) {
        size_t off_send = 0, off_recv = 0;
        for (size_t d = 0; d < n && res == ncclSuccess; d++) {
            size_t c = counts[s * n + d];
            if (c) res = g->api.send((const char *)send[s] + off_send, c, ncclUint8, (int)d, g->comm[s], g->stream[s]);
            off_send += c;
            size_t cr = counts[d * n + s]; /* rank s receives from d */
            if (cr && res == ncclSuccess)
                res = g->api.recv((char *)recv[s] + off_recv, cr, ncclUint8, (int)d, g->comm[s], g->stream[s]);
            off_recv += cr;
        }
    }
    ncclResult_t end = g->api.group_end();
    int rc = nccl_check(g, res != ncclSuccess ? res : end, "all-to-all", err);
    return rc ? rc : nccl_wait(g, "all-to-all", err);
}

static int nccl_allreduce(par_transport *t, const int32_t *const *in, int32_t *const *out, clover_error *err) {
    nccl_group *g = (nccl_group *)t;
    ncclResult_t res = g->api.group_start();
    for (size_t r = 0; r < t->n && res == ncclSuccess; r++)
        res = g->api.all_reduce(in[r], out[r], 1, ncclInt32, ncclMax, g->comm[r], g->stream[r]);
    ncclResult_t end = g->api.group_end();
    int rc = nccl_check(g, res != ncclSuccess ? res : end, "all-reduce", err);
    return rc ? rc : nccl_wait(g, "all-reduce", err);
}

static void nccl_close(par_transport *t) {
    nccl_group *g = (nccl_group *)t;
    for (size_t r = 0; r < t->n; r++) {
        if (g->comm[r] && !g->aborted) g->api.comm_destroy(g->comm[r]);
        if (g->stream[r]) {
            cudaSetDevice(g->dev[r]);
            cudaStreamDestroy(g->stream[r]);
        }
    }
    if (g->api.lib) dlclose(g->api.lib);
    mem_free(g);
}

static const par_ops nccl_ops = {"nccl", nccl_alltoallv, nccl_allreduce, nccl_close};

int par_nccl_open(const par_config *cfg, par_transport **out, clover_error *err) {
    *out = NULL;
    if (!cfg->devices) return error_set(err, CLOVER_E_INVALID, "parallel (NCCL): no device list");
    nccl_group *g = mem_alloc(sizeof *g);
    if (!g) return error_set(err, CLOVER_E_NOMEM, "parallel (NCCL): out of memory");
    memset(g, 0, sizeof *g);
    g->base.ops = &nccl_ops;
    g->base.n = cfg->n_ranks;
    g->base.timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 30000;
    int rc = nccl_load(&g->api, err); /* first: a host without NCCL hears about NCCL */
    if (rc) {
        mem_free(g);
        return rc;
    }
    int have = 0;
    if (cudaGetDeviceCount(&have) != cudaSuccess) have = 0;
    for (size_t r = 0; r < cfg->n_ranks; r++)
        if (cfg->devices[r] < 0 || cfg->devices[r] >= have) {
            rc = error_set(err, CLOVER_E_INVALID, "--devices: device %d does not exist (this host has %d CUDA "
                           "device%s)", cfg->devices[r], have, have == 1 ? "" : "s");
            nccl_close(&g->base);
            return rc;
        }
    setenv("NCCL_NVLS_ENABLE", "0", 1); /* never NVLink multicast (the file's header) */
    memcpy(g->dev, cfg->devices, cfg->n_ranks * sizeof *g->dev);
    for (size_t r = 0; r < cfg->n_ranks; r++) {
        cudaSetDevice(g->dev[r]);
        cudaError_t ce = cudaStreamCreateWithFlags(&g->stream[r], cudaStreamNonBlocking);
        if (ce != cudaSuccess) {
            rc = error_set(err, CLOVER_E_IO, "parallel (NCCL): GPU %d: cannot create a stream: %s", g->dev[r],
                           cudaGetErrorString(ce));
            nccl_close(&g->base);
            return rc;
        }
    }
    ncclResult_t res = g->api.comm_init_all(g->comm, (int)cfg->n_ranks, g->dev);
    if (res != ncclSuccess) {
        rc = error_set(err, CLOVER_E_IO, "parallel (NCCL): cannot create the communicators of %zu GPUs: %s",
                       cfg->n_ranks, g->api.error_string(res));
        memset(g->comm, 0, sizeof g->comm);
        nccl_close(&g->base);
        return rc;
    }
    *out = &g->base;
    return CLOVER_OK;
}
