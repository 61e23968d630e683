/*
 * cuda_moe_router.h: the MoE router product and the routing in one launch
 * (src/cuda/moe_router.cu), for 1..CUDA_ROUTER_MAX_ROWS rows and an F32
 * router. Bit for bit what the two launches it replaces write: up to 8 rows
 * cuda_matmul_decode (or cuda_matmul_decode_multi with the second matrix),
 * past 8 cuda_matmul_exact_multi (the same bits: matmul_exact.cu), then
 * cuda_moe_route. Callable from C.
 */
#ifndef CLOVER_CUDA_MOE_ROUTER_H
#define CLOVER_CUDA_MOE_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rows of one fused launch at most: past 8, the last block routes them 8 at a time (moe_router.cu). */
enum { CUDA_ROUTER_MAX_ROWS = 64 };

typedef struct cuda_router_args {
    uint32_t type;        /* weight type: F32 (quant.h's 0) only */
    const void *w;        /* [n_expert][n_in] the router, 16-byte aligned */
    size_t n_expert, n_in; /* n_expert 1..CUDA_ROUTE_MAX_EXPERT, n_in % 8 == 0 */
    const void *w2;       /* NULL, or [n_out2][n_in] of the same type (the shared expert's gate), 16-byte aligned */
    size_t n_out2;
    float *y2;            /* [n_rows][n_out2]: x w2^T (as the decode product writes it) */
    const float *x;       /* [n_rows][n_in], 16-byte aligned */
    size_t n_rows;        /* 1..CUDA_ROUTER_MAX_ROWS */
    float *logits;        /* [n_rows][n_expert]: x w^T */
    int32_t *idx;         /* [n_rows][k]: cuda_moe_route's ids */
    float *wts;           /* [n_rows][k]: and weights */
    size_t k;             /* 1..min(CUDA_ROUTE_MAX_K, n_expert) */
    /* one device word, zero before the first launch; each launch leaves it zero again (its last block resets
     * it), so graphs replay. Launches that may run at the same time (two streams) need a word each. */
    uint32_t *counter;
    int no_stage;         /* 1: weights prefetched into L2 only, never copied to shared memory (A/B timing) */
} cuda_router_args;

/* Whether the fused form takes these arguments (type, shape, alignment, pointers); callers that get false keep
 * the two launches. Needs no device. */
bool cuda_moe_router_ok(const cuda_router_args *a);

/* The fused launch on `stream` (PDL, graph-capturable); 0, or -1 with why (bad arguments: no launch). */
int cuda_moe_router(const cuda_router_args *a, void *stream, char *why, size_t why_len);

/* Fused launches enqueued (or captured) by this process so far: the tests' evidence that a path took this form. */
uint64_t cuda_moe_router_launches(void);

#ifdef __cplusplus
}
#endif

#endif
