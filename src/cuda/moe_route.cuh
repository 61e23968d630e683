/*
 * moe_route.cuh: one warp's routing of one row, the body of ops_small.cu's
 * k_route (cuda_moe_route, cuda_moe_route_allowed) and of moe_router.cu's
 * fused router product (whose last block routes the rows its grid has just
 * written). One copy of the logic, so both write the same ids and weights.
 *
 * Lane l holds experts l, l + 32, ... (NPER of them, NPER * 32 >= E).
 * Softmax as cpu_moe_route (max, e^(x - max), sum, times 1 / sum; the max
 * and sum by warp shuffles), then k rounds of a warp arg-max on
 * (probability descending, id ascending), which is cpu_moe_topk's order:
 * each lane keeps a bit mask of its candidates and clears the winner's bit.
 * A row holding a NaN or an inf logit, or only -inf, has every probability
 * NaN (the sum is NaN), and the CPU then takes the first k candidates in id
 * order with NaN weights: a NaN probability ranks as 0 here, so all tie and
 * the lowest ids win, the same picks.
 * allowed (NULL: every expert) restricts the top-k to a preview's coreset
 * (cpu_moe_route with allowed): the softmax stays over all experts, fewer than
 * k allowed leave padding slots of the lowest ids outside the set, weight 0.
 */
#ifndef CLOVER_CUDA_MOE_ROUTE_CUH
#define CLOVER_CUDA_MOE_ROUTE_CUH

#include <math.h>
#include <stdint.h>

/* The whole warp calls it (shuffles) for one row: row = its E logits, idx / wts = its k slots. The logits are
 * read through L2 (__ldcg): in the fused router they were written by other blocks of the same grid, which this
 * SM's L1 does not see; for k_route it is the same value by the same single read. */
template <int NPER>
__device__ __forceinline__ void moe_route_warp(int32_t *idx, float *wts, const float *row, const uint8_t *allowed,
                                               size_t E, size_t k) {
    const unsigned lane = threadIdx.x & 31;
    float p[NPER];
    uint32_t cand = 0; /* bit i: expert lane + 32 i is a candidate not yet chosen */
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < NPER; i++) {
        const size_t e = lane + 32 * (size_t)i;
        p[i] = e < E ? __ldcg(row + e) : -INFINITY;
        if (e < E && (!allowed || allowed[e])) cand |= 1u << i;
        mx = fmaxf(mx, p[i]); /* fmaxf drops NaN, as the CPU's `>` does */
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NPER; i++) {
        const size_t e = lane + 32 * (size_t)i;
        p[i] = e < E ? expf(p[i] - mx) : 0.0f;
        s += p[i];
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float inv = 1.0f / s;
#pragma unroll
    for (int i = 0; i < NPER; i++) p[i] *= inv;

    int32_t my_id = -1; /* lane j < m: the j-th pick and its probability */
    float my_p = 0.0f;
    size_t m = 0;
    for (size_t j = 0; j < k; j++) {
        float best = -INFINITY; /* probabilities are >= 0 (NaN ranks as 0): -inf is "none" */
        int32_t bi = INT32_MAX;
#pragma unroll
        for (int i = 0; i < NPER; i++) {
            const float key = isnan(p[i]) ? 0.0f : p[i];
            if ((cand >> i & 1u) && key > best) { /* strict: the lower id (earlier i) keeps a tie */
                best = key;
                bi = (int32_t)(lane + 32 * i);
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(0xffffffffu, best, o);
            const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ob > best || (ob == best && oi < bi)) {
                best = ob;
                bi = oi;
            }
        }
        if (bi == INT32_MAX) break; /* fewer than k candidates (uniform over the warp) */
        float wp = 0.0f;
        if ((unsigned)bi % 32 == lane) {
#pragma unroll
            for (int i = 0; i < NPER; i++)
                if ((int32_t)(lane + 32 * i) == bi) {
                    wp = p[i];
                    cand &= ~(1u << i);
                }
        }
        wp = __shfl_sync(0xffffffffu, wp, (unsigned)bi % 32);
        if (lane == j) {
            my_id = bi;
            my_p = wp;
        }
        m = j + 1;
    }
    float top = 0.0f;
    for (size_t j = 0; j < m; j++) top += __shfl_sync(0xffffffffu, my_p, (unsigned)j); /* descending, as the CPU */
    if (lane < m) {
        idx[lane] = my_id;
        wts[lane] = my_p / top;
    }
    if (allowed && m < k) { /* padding slots: the lowest ids outside the set, in order, weight 0 */
        size_t j = m;
        for (size_t base = 0; base < E && j < k; base += 32) {
            const size_t e = base + lane;
            const bool out = e < E && !allowed[e];
            const unsigned mask = __ballot_sync(0xffffffffu, out);
            const size_t slot = j + (size_t)__popc(mask & ((1u << lane) - 1u));
            if (out && slot < k) {
                idx[slot] = (int32_t)e;
                wts[slot] = 0.0f;
            }
            j += (size_t)__popc(mask);
        }
    }
}

#endif
