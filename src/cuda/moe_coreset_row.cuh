/*
 * moe_coreset_row.cuh: the per-row pieces of the coreset kernels (SPEC.md 2.2) that both the one-block form
 * (moe_coreset_warp.cu) and the cluster form (moe_coreset_cluster.cu) run, in one place so that the two forms'
 * rows are the same instructions and so the same bits: a row's e^(l - max) and top-k picks by one warp, and its
 * float64 sum in expert order by one thread. Also the two files' launch entry points.
 */
#ifndef CLOVER_MOE_CORESET_ROW_CUH
#define CLOVER_MOE_CORESET_ROW_CUH

#include <math.h>
#include <stdint.h>

#include "cuda_preview.h"

/* An order-preserving key of a logit for the arg-max: larger float, larger key; -0 and +0 one key (they
 * compare equal, so the lower id must win, as in the float comparison); NaN 0 = never picked (every float
 * comparison with NaN is false in the old kernel); -inf stays above 0, so it can be picked, as there. */
__device__ static inline uint32_t cw_key(float v) {
    if (v != v) return 0u;
    const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Row r's e^(l - max) into ex [E] (float64), the warp together. */
__device__ __forceinline__ static void coreset_row_exps(const float *row, double *ex, int E, int lane) {
    float fm = -INFINITY;
    for (int e = lane; e < E; e += 32) fm = fmaxf(fm, row[e]);
    for (int o = 16; o > 0; o >>= 1) fm = fmaxf(fm, __shfl_xor_sync(0xffffffffu, fm, o));
    const double mx = (double)fm;
    for (int e = lane; e < E; e += 32) ex[e] = exp((double)row[e] - mx);
}

/* One round of the top-k: the first maximum of the keys not yet taken (ties to the lower id) into pick when this
 * lane is j's; false when nothing is left (the old kernel's invalid slots add nothing). */
__device__ __forceinline__ static bool coreset_topk_round(uint32_t best, int bi, int j, int lane, uint32_t &taken,
                                                          int &pick) {
    const uint32_t top = __reduce_max_sync(0xffffffffu, best);
    if (top == 0u) return false;
    const int g = __reduce_min_sync(0xffffffffu, best == top ? bi : INT32_MAX);
    if ((g & 31) == lane) taken |= 1u << (g >> 5);
    if (lane == j) pick = g;
    return true;
}

/* Row r's top-k picks: lane j < k holds pick j in pick (-1: none), taken the lane's bit set of picked experts
 * (expert lane + 32 m at bit m). The warp calls it together. Up to 256 experts the keys are made once into
 * registers (NPER a lane); past that they are made again each round from the row: the same keys either way. */
__device__ __forceinline__ static void coreset_row_topk(const float *row, int E, int k, int lane, uint32_t &taken,
                                                        int &pick) {
    constexpr int NPER = 8;
    taken = 0;
    pick = -1;
    if (E <= 32 * NPER) {
        uint32_t key[NPER];
#pragma unroll
        for (int m = 0; m < NPER; m++) key[m] = lane + 32 * m < E ? cw_key(row[lane + 32 * m]) : 0u;
        for (int j = 0; j < k; j++) {
            uint32_t best = 0u;
            int bi = INT32_MAX;
#pragma unroll
            for (int m = 0; m < NPER; m++) /* strict: the lowest id of the lane keeps a tie */
                if (!(taken >> m & 1u) && key[m] > best) best = key[m], bi = lane + 32 * m;
            if (!coreset_topk_round(best, bi, j, lane, taken, pick)) break;
        }
        return;
    }
    for (int j = 0; j < k; j++) {
        uint32_t best = 0u;
        int bi = INT32_MAX;
        for (int e = lane, m = 0; e < E; e += 32, m++) {
            const uint32_t key = (taken >> m & 1u) ? 0u : cw_key(row[e]);
            if (key > best) best = key, bi = e; /* strict: the lowest id of the lane keeps a tie */
        }
        if (!coreset_topk_round(best, bi, j, lane, taken, pick)) break;
    }
}

/* Row r's e^(l - max) into ex [E] and its top-k picks (coreset_row_exps, then coreset_row_topk). */
__device__ __forceinline__ static void coreset_row_picks(const float *row, double *ex, int E, int k, int lane,
                                                         uint32_t &taken, int &pick) {
    coreset_row_exps(row, ex, E, lane);
    coreset_row_topk(row, E, k, lane, taken, pick);
}

/* The float64 sum of a row's E values in expert order (the CPU's), one thread; 8 loads issued before their 8 adds. */
__device__ __forceinline__ static double coreset_row_sum(const double *x, int E) {
    double sum = 0.0;
    int e = 0;
    for (; e + 8 <= E; e += 8) {
        const double a0 = x[e], a1 = x[e + 1], a2 = x[e + 2], a3 = x[e + 3];
        const double a4 = x[e + 4], a5 = x[e + 5], a6 = x[e + 6], a7 = x[e + 7];
        sum += a0;
        sum += a1;
        sum += a2;
        sum += a3;
        sum += a4;
        sum += a5;
        sum += a6;
        sum += a7;
    }
    for (; e < E; e++) sum += x[e];
    return sum;
}

/* The walk of cpu_moe_coreset_from_totals over the fractions in rank order, one thread: the experts are kept while
 * the mass before them is < top_p, the first always; the mass never decreases (a NaN stays NaN and compares false),
 * so the kept experts are a prefix of the order. Returns how many. The mass's adds are a chain of their own: kept =
 * the first i > 0 whose mass before is not < top_p, found by a test no add waits on, 32 fractions a step, stopping
 * after the step that found it (a real router keeps ~8-16: one step). */
__device__ __forceinline__ static int coreset_walk(const double *sorted, int E, float top_p) {
    double before = 0.0;
    int kept = E;
    for (int i0 = 0; kept == E && i0 < E; i0 += 32) {
#pragma unroll 8
        for (int q = 0; q < 32; q++) {
            const int i = i0 + q;
            if (i < E) {
                if (i > 0 && kept == E && !(before < (double)top_p)) kept = i;
                before += sorted[i];
            }
        }
    }
    return kept;
}

/* moe_coreset_cluster.cu's launches, called by moe_coreset_warp.cu's (which checked E <= 1024, k <= 32): 0 when
 * launched, 1 when the cluster form does not take the call (switched off, no cluster launch on this device, or
 * the launch refused): the caller then runs its one-block kernel. */
int coreset_cluster_launch(uint8_t *allowed, uint32_t *kept_count, const float *logits, int n, int E, int k,
                           float top_p, cudaStream_t st);
int coreset_cluster_multi_launch(uint8_t *allowed, size_t stride, uint32_t *kept_count, const float *logits,
                                 const cuda_route_seqs *m, int E, int k, cudaStream_t st);
/* Its fused form (the coreset and the routing inside it in one launch; the single form is moe_coreset.cu's): 0 when
 * launched, 1 when it does not take the call (nothing launched: the caller runs the two launches). */
int coreset_route_cluster_multi_launch(uint8_t *allowed, size_t stride, uint32_t *kept_count, int32_t *idx,
                                       float *wts, const float *logits, const cuda_route_seqs *m, int E, int k,
                                       cudaStream_t st);

#endif
