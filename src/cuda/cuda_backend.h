/*
 * cuda_backend.h: the CUDA backend as the rest of the library sees it (only
 * in builds with CLOVER_HAVE_CUDA): the ops table, whether a model can run
 * on it here, and the device report of `clover info --device`.
 */
#ifndef CLOVER_CUDA_CUDA_BACKEND_H
#define CLOVER_CUDA_CUDA_BACKEND_H

#include <stddef.h>

#include "backend/backend.h"

/* Contract v2's table (backend_cuda.c): what the engine runs on. */
extern const backend_ops backend_cuda;

/* 0 when a device is there and the model's types and shapes are ones the
 * kernels take; else CLOVER_E_UNSUPPORTED and the reason. Uploads nothing. */
int cuda_backend_usable(const clover_model *m, clover_error *err);

/* 1 when the session's decode steps replay a captured CUDA graph (after the
 * first one), 0 when they are enqueued kernel by kernel (CLOVER_CUDA_NO_GRAPH
 * set, or the capture was refused). */
int cuda_backend_graph_used(const backend_session *s);

/* --gpu-mem's figures of a backend (tests, benches): all 0 without the option or before its first session
 * (the pool is made with it). Bytes unless said. */
typedef struct cuda_gpu_mem_info {
    uint64_t gpu_mem;     /* the budget asked for */
    uint64_t dense;       /* the dense weights on the device */
    uint64_t reserve;     /* what the pool left for one session (its KV, state, scratch) and the margins */
    uint64_t sessions;    /* what the live sessions hold */
    uint64_t pool_budget; /* the pool's share of the budget */
    uint64_t pool_bytes;  /* n_slots * slot_bytes, <= pool_budget */
    uint64_t slot_bytes;
    size_t n_slots;
    uint64_t hits, misses; /* expert uses (one per layer step and expert) */
    uint64_t evictions;
    uint64_t copied;      /* bytes copied host to device */
    double copy_s;        /* device time of those copies */
    const char *host_mode; /* where the copies come from: "copy", "ring", "stage1" or "pin" (NULL: no pool) */
    uint64_t host_copy_bytes; /* "copy": the pinned host copy's size */
    double host_fill_s;   /* "copy": the time to fill it from the model's mapping */
    const char *remap;    /* who maps experts to slots: "host" (a sync a layer) or "device" (NULL: no pool) */
    const char *cpu_mode; /* CLOVER_GPU_MEM_CPU: "auto" or "all" when the host computes misses (NULL: off) */
    uint64_t host_experts, host_pairs; /* misses the host computed ((layer, expert) uses), their (row, expert) pairs */
    double host_s;                     /* the host's wall time in them */
    uint64_t prefetched, prefetch_hits; /* CLOVER_GPU_MEM_PREFETCH: experts guessed and copied; those used next */
} cuda_gpu_mem_info;
void cuda_backend_gpu_mem(const backend *be, cuda_gpu_mem_info *out);

/* clover_device_report's text (see clover.h). */
size_t cuda_backend_report(const clover_model *m, size_t max_context, char *buf, size_t n);

#endif
