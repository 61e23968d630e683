/*
 * cuda_preview.h: the operators a preview pass (SPEC.md 2) has and a commit
 * has not, on the GPU: the GDN block operator of SPEC 2.1 (gdn_block.cu),
 * the expert coreset of SPEC 2.2 and the routing inside it (moe_coreset.cu),
 * and the gather of the rows the head still needs. Device twins of
 * src/cpu/gdn_block.c and src/cpu/moe_route.c, following their arithmetic
 * operation by operation (sums reassociated only where said).
 *
 * Rules as cuda_ops.h: device pointers, `stream` a cudaStream_t as void *,
 * enqueue only (no allocation, sync or host read: capturable), 0 or -1 with
 * the runtime's message in cuda_preview_last_error().
 */
#ifndef CLOVER_CUDA_PREVIEW_H
#define CLOVER_CUDA_PREVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_gdn.h"

#ifdef __cplusplus
extern "C" {
#endif

const char *cuda_preview_last_error(void);

/* Which kernels cuda_moe_coreset and cuda_gdn_block run: 1 the current
 * forms (moe_coreset_warp.cu; gdn_block.cu's two fused launches), 0 the
 * previous ones, -1 (the start) as the environment says: CLOVER_CUDA_CORESET=0
 * and CLOVER_CUDA_GDN_BLOCK=0 select the previous forms. Same results either
 * way; for the tests and benchmarks that compare them in one process. */
void cuda_preview_set_forms(int coreset, int gdn_block);

/* A GDN layer's block-operator weights (device, f32, the file's layout). */
typedef struct cuda_gdn_block_weights {
    const float *conv_w;       /* [conv_dim][K] */
    const float *conv_right;   /* [conv_dim][K-1] (tap 0 multiplies the next row) */
    const float *ssm_a;        /* [nv], -exp(A_log) */
    const float *dt_bias;      /* [nv] */
    const float *norm_w;       /* [dv] */
    const float *logit_scale;  /* [nv] */
    const float *history_bias; /* [nv] */
    const float *history_c;    /* [nv] */
} cuda_gdn_block_weights;

/* Scratch floats of cuda_gdn_block for b rows: the conv output [b][conv_dim]. */
size_t cuda_gdn_block_work_floats(const cuda_gdn_dims *d, int b);

/* y = the gated-norm output of the block operator for b rows (out_proj's
 * input), reading ring and state only (gdn_block_scalar's steps: conv with
 * left and right taps, q/k L2 norm, scores with the history slot
 * history_bias + history_c g + ln_ratio, float32 softmax over b + 1 slots,
 * o = sum_j p v_j + p_hist S^T q dk^-1/2, gated RMSNorm). The dot products
 * and the softmax run in the oracle's sequential order; the L2 norm's sum
 * is a warp tree. */
int cuda_gdn_block(float *y,               // [b][nv][dv]
                   const float *mixed,     // [b][conv_dim], in_proj_qkv output
                   const float *z,         // [b][nv*dv], in_proj_z output
                   const float *a,         // [b][nv], in_proj_a output
                   const float *ring,      // [K-1][conv_dim], committed (read only)
                   const float *state,     // [nv][dk][dv], committed (read only)
                   const cuda_gdn_block_weights *w, const cuda_gdn_dims *d, int b, float ln_ratio,
                   float *work,            // cuda_gdn_block_work_floats
                   void *stream);

/* A stacked preview's sequences for cuda_gdn_block_multi: sequence i's block is rows row0 .. row0 + b - 1 of
 * the pass (mixed, z, a, y and work), over its own committed ring and state, with its own ln_ratio. */
enum { CUDA_GDN_SEQS_MAX = 64 };
typedef struct cuda_gdn_block_seq {
    const float *ring, *state;
    int32_t row0, b;
    float ln_ratio;
} cuda_gdn_block_seq;
typedef struct cuda_gdn_block_seqs {
    int32_t n_seq;
    cuda_gdn_block_seq seq[CUDA_GDN_SEQS_MAX];
} cuda_gdn_block_seqs;

/* cuda_gdn_block of every sequence of m in two launches (grid z a sequence) instead of two a sequence, the same
 * bits (issue 25: 16 sequences' blocks were 32 launches a GDN layer). work: cuda_gdn_block_work_floats for
 * all the rows. 0; 1 when the two-launch form does not take it (CLOVER_CUDA_GDN_BLOCK=0, shapes, alignment,
 * more than CUDA_GDN_SEQS_MAX sequences: nothing launched, the caller runs cuda_gdn_block a sequence); -1 on
 * error (cuda_preview_last_error). */
int cuda_gdn_block_multi(float *y, const float *mixed, const float *z, const float *a, const cuda_gdn_block_weights *w,
                         const cuda_gdn_dims *d, const cuda_gdn_block_seqs *m, float *work, void *stream);
/* The switch of the stacked preview's use of it: on unless CLOVER_CUDA_STACK_GDN=0 (read once; on since its H200
 * run, bench/device-runs/2026-12-18-stack25); 1/0 on/off, negative: the environment again. */
int cuda_stack_gdn_on(void);
void cuda_stack_gdn_set(int on);
/* The head-once form of the block operator's heads (gdn_block_fused.cu; issues 24, 25): a block a (sequence, value
 * head) over all its row tiles, the head's state read once instead of once a tile; the same bits. _on: 0 never, 1
 * every pass (CLOVER_CUDA_GDN_HEAD_ONCE=1), 2 (unset: AUTO) stacked passes of 2+ sequences only (read once); _set:
 * 0, 1, 2 (AUTO), negative the environment again (tests, benches).
 * _groups_set: the groups of 256 threads a block, 1, 2 or 4 (CLOVER_CUDA_GDN_HEAD_ONCE_G), 0 by shape, negative the
 * environment again. _launches: how many launches took it (the tests check it ran). */
int cuda_gdn_head_once_on(void);
void cuda_gdn_head_once_set(int on);
void cuda_gdn_head_once_groups_set(int g);
unsigned long long cuda_gdn_head_once_launches(void);
/* The tile form's rows a tile (gdn_block_fused.cu): 4 where 8-row tiles would leave SMs without a block (a lone
 * preview), else 8; the same bits either way. CLOVER_CUDA_GDN_HEAD_RT=4|8 forces it (read once); _set: 4, 8, 0 by
 * shape, negative the environment again (tests, benches). */
void cuda_gdn_head_rt_set(int rt);

/* Scratch bytes of cuda_moe_coreset for n rows (the old kernel's, CLOVER_CUDA_CORESET=0; callers allocate it). */
size_t cuda_moe_coreset_work_bytes(size_t n, size_t k);

/* allowed[e] = 1 for the experts of the block's coreset (cpu_moe_coreset:
 * per row the float64 softmax probabilities of its top-k router logits, ties
 * to the lower id, summed per expert in row order, experts sorted by total
 * descending then id, kept while the mass before them is < top_p, the first
 * always), else 0; *kept_count += the kept experts (a device counter). The
 * float64 sums run in the CPU's order (the device exp may differ in the last
 * ulp), so equal logits give the same set but at float64 ties. */
/* The coreset kernel's cluster form (moe_coreset_cluster.cu: a thread-block cluster of 8 blocks, the rows' exps and
 * picks over 8 SMs, the totals through distributed shared memory; a cluster a sequence in the stacked form): the same
 * bits as the one-block form (k_coreset_warp), which runs where the device has no cluster launch. On unless
 * CLOVER_CUDA_CORESET_CLUSTER=0 (read once); 1/0 on/off, negative the environment again (tests, benches). */
void cuda_coreset_cluster_set(int on);

int cuda_moe_coreset(uint8_t *allowed,        // [E]
                     uint32_t *kept_count,    // [1], added to
                     const float *logits,     // [n][E] router logits
                     size_t n, size_t n_expert, size_t k, float top_p, void *work, void *stream);

/* The bits of cuda_moe_coreset then cuda_moe_route_allowed (idx, wts [n][k]) on the same rows: the flags, the
 * kept count, every row's ids and weights. One launch where the cluster form takes it (moe_coreset_cluster.cu:
 * each block of the cluster routes its rows inside the coreset it has just computed, with k_route's routing), else
 * the two calls (k_route's launch and dependency were ~6-9 us of a ~141 us preview layer, H100). k <= n_expert,
 * k <= CUDA_ROUTE_MAX_K (else -1, nothing launched); work as cuda_moe_coreset's. */
int cuda_moe_coreset_route(uint8_t *allowed, uint32_t *kept_count, int32_t *idx, float *wts,
                           const float *logits,  // [n][E] router logits
                           size_t n, size_t n_expert, size_t k, float top_p, void *work, void *stream);
/* The fused form's switch (it and the stacked cuda_moe_coreset_route_multi's): on unless
 * CLOVER_CUDA_CORESET_ROUTE=0 (read once); 1/0 on/off, negative the environment again (tests, benches). Off, or
 * where it cannot run (the cluster form off or refused, k 0), the two launches run. _launches: how
 * many fused launches were taken (the tests check the form they compare ran). */
void cuda_coreset_route_set(int on);
unsigned long long cuda_coreset_route_launches(void);

/* A stacked preview's sequences for cuda_moe_coreset_route_multi: sequence i's rows are row0 .. row0 + n - 1
 * of the pass, routed inside its coreset (its flags at allowed + i * stride) when coreset, else freely. */
enum { CUDA_ROUTE_SEQS_MAX = 64 };
typedef struct cuda_route_seq {
    int32_t row0, n, coreset;
    float top_p;
} cuda_route_seq;
typedef struct cuda_route_seqs {
    int32_t n_seq;
    cuda_route_seq seq[CUDA_ROUTE_SEQS_MAX];
} cuda_route_seqs;

/* Every sequence's coreset (one launch, a cluster or a block a sequence) and every row's routing (one launch) of a
 * stacked preview: the bits of cuda_moe_coreset then cuda_moe_route_allowed (or cuda_moe_route) per sequence on its
 * rows, in two launches instead of two a sequence (issue 25: at 16 sequences ~24 us x 16 a layer of coresets); in
 * one where the fused form takes it (cuda_coreset_route_set; sequences sharing no row: a cluster routes its own).
 * 0; 1 when this form does not take the call (nothing launched: the old coreset form, CLOVER_CUDA_CORESET=0;
 * more than CUDA_ROUTE_SEQS_MAX sequences): the caller runs the per-sequence calls; -1 on error. */
int cuda_moe_coreset_route_multi(uint8_t *allowed, size_t stride, uint32_t *kept_count, int32_t *idx, float *wts,
                                 const float *logits,  // [n_rows][E]: the sequences' rows one after another
                                 const cuda_route_seqs *m, size_t n_rows, size_t n_expert, size_t k, void *stream);
/* The switch of the stacked preview's use of it: on unless CLOVER_CUDA_STACK_ROUTE=0 (read once; on since its H200
 * run, bench/device-runs/2026-12-18-stack25); 1/0 on/off, negative: the environment again (tests, benches). */
int cuda_stack_route_on(void);
void cuda_stack_route_set(int on);

/* (cuda_moe_route_allowed, the routing inside the coreset, is in cuda_ops.h
 * beside cuda_moe_route: one kernel for both.) */

/* used[ids[i]] = 1 for n_slots routing slots (a diagnostic: the experts a
 * pass reads, for the benchmarks' floors). */
int cuda_mark_experts(uint8_t *used, const int32_t *ids, size_t n_slots, void *stream);

/* dst[i] = src[rows[i]] for n rows of `width` floats (rows: device int32). */
int cuda_gather_rows(float *dst, const float *src, const int32_t *rows, size_t n, size_t width, void *stream);

#ifdef __cplusplus
}
#endif

#endif
