/*
 * backend_cuda_experts_host.h: the host CPU's share of --gpu-mem's misses
 * (backend_cuda_experts_host.c has the steps and why), driven by
 * backend_cuda_experts.c's layer step and the pass's MoE layer.
 */
#ifndef CLOVER_CUDA_BACKEND_CUDA_EXPERTS_HOST_H
#define CLOVER_CUDA_BACKEND_CUDA_EXPERTS_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/expert_pool.h"
#include "model/model.h"

typedef struct cuda_host_share cuda_host_share;

typedef struct cuda_host_share_stats {
    const char *mode;                /* "auto" or "all" (NULL: off) */
    uint64_t experts, pairs, layers; /* computed by the host: (layer, expert) misses, (row, expert) pairs, layers */
    double seconds;                  /* the host's wall time in them */
    double link_gbps, host_gbps, host_row_us; /* the plan's current rates */
} cuda_host_share_stats;

/* CLOVER_GPU_MEM_CPU as an expert_split_mode (off when unset), or a negative status for a bad value. */
int cuda_host_share_mode(const char **name, clover_error *err);

/* The share for mode (off: *out NULL, nothing made): the hook opened through cfg->expert_host_open (refused
 * without one), its pinned buffers for cfg's max_rows, the plan seeded with the link's guessed rate. */
int cuda_host_share_create(const clover_model *m, const backend_config *cfg, int mode, uint64_t expert_bytes,
                           double link_bps, cuda_host_share **out, clover_error *err);
void cuda_host_share_free(cuda_host_share *h);

/* After the routing ids' sync: the experts the host computes this layer ([n_expert] flags for
 * expert_pool_step_host), or NULL for none (always for more rows than the hook takes). */
const uint8_t *cuda_host_share_plan(cuda_host_share *h, const expert_pool *pool, uint32_t il, const int32_t *ids,
                                    size_t n, size_t nk);
/* When the plan gave the host experts: the layer's routing weights and input brought back (a sync of stream). 0,
 * or -1 with the runtime's reason in why. */
int cuda_host_share_fetch(cuda_host_share *h, const float *d_w, const float *d_x, size_t n, void *stream, char *why);
/* After the pool's step: the pairs given zero_slot become the host's. */
void cuda_host_share_take(cuda_host_share *h, uint32_t il, const int32_t *ids, const int32_t *slots, size_t n,
                          size_t nk, int32_t zero_slot);
/* After the layer's device work is enqueued: the host's pairs computed now, their sum uploaded into d_tmp
 * ([n][H] floats of device scratch free until the next layer) and added into y on stream. */
int cuda_host_share_join(cuda_host_share *h, float *y, float *d_tmp, void *stream, clover_error *err);
/* A failed layer step: nothing pending. */
void cuda_host_share_cancel(cuda_host_share *h);
void cuda_host_share_observe_copy(cuda_host_share *h, uint64_t bytes, double seconds);
void cuda_host_share_info(const cuda_host_share *h, cuda_host_share_stats *out);

#endif
