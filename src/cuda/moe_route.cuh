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
 *
 * FAST (on unless CLOVER_CUDA_ROUTE_FAST=0, cuda_route_fast in ops_small.cu): the same
 * picks, order and weight bits in fewer dependent steps, for the fused
 * router's tail (one warp a row after the grid's last block counts out) and
 * the other callers (k_route, moe_coreset_warp.cu's k_route_multi).
 * The max is one integer warp reduction (redux.sync) on the floats' order-
 * preserving integer images instead of 5 shuffle stages: the same value (up
 * to the sign of a zero max, which x - max and e^ cannot tell apart). The sum
 * keeps its 5-stage tree: its order is the weights' bits. The top-k ranks
 * keys: a probability p >= +0 compares as its bits, so key = bits + 1 for a
 * candidate (NaN: 1, ranking as 0) and 0 for none. Each lane keeps its best
 * (key, slot) by a log2(NPER)-deep tree; a round is one redux max of the
 * lanes' bests and a ballot of the lanes holding it: one lane (the usual
 * case) wins, several (a tie) go to a redux min of their ids, the lower id
 * as before; the winner clears its slot and rebuilds its tree. The winner's
 * id reaches slot j's lane by a shuffle nothing in the next round waits for;
 * its probability is the key's bits - 1 (in a NaN row, where every key is 1,
 * the winner's own value by a shuffle). The weights' sum adds the same
 * probabilities in the same order, and each weight is the same division.
 */
#ifndef CLOVER_CUDA_MOE_ROUTE_CUH
#define CLOVER_CUDA_MOE_ROUTE_CUH

#include <math.h>
#include <stdint.h>

/* A float's integer image in the same order (-inf < ... < -0 < +0 < ... < +inf; NaN never comes here), and back
 * (the map is its own inverse): a warp's float max as one redux.sync. */
__device__ __forceinline__ int mr_ord(float f) {
    const int b = __float_as_int(f);
    return b >= 0 ? b : b ^ 0x7fffffff;
}
__device__ __forceinline__ float mr_unord(int o) { return __int_as_float(o >= 0 ? o : o ^ 0x7fffffff); }

/* A lane's best candidate of the fast form: the largest key and the lowest slot holding it (a tree over the slots
 * in order, the higher half taking over only when strictly larger), log2(NPER) steps deep. */
template <int NPER>
__device__ __forceinline__ void mr_lane_best(const uint32_t (&key)[NPER], uint32_t &bk, int &bs) {
    uint32_t tk[NPER];
    int ts[NPER];
#pragma unroll
    for (int i = 0; i < NPER; i++) {
        tk[i] = key[i];
        ts[i] = i;
    }
#pragma unroll
    for (int w = 1; w < NPER; w *= 2)
#pragma unroll
        for (int i = 0; i + w < NPER; i += 2 * w)
            if (tk[i + w] > tk[i]) {
                tk[i] = tk[i + w];
                ts[i] = ts[i + w];
            }
    bk = tk[0];
    bs = ts[0];
}

/* The whole warp calls it (shuffles) for one row: row = its E logits, idx / wts = its k slots. The logits are
 * read through L2 (__ldcg): in the fused router they were written by other blocks of the same grid, which this
 * SM's L1 does not see; for k_route it is the same value by the same single read. FAST: the top-comment's fast
 * form, the same bits. */
template <int NPER, bool FAST = false>
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
    if (FAST)
        mx = mr_unord(__reduce_max_sync(0xffffffffu, mr_ord(mx)));
    else
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
    float top = 0.0f; /* the fast form's sum of the picks' probabilities, in pick order */
    if (FAST) {
        /* inv is NaN (every probability NaN) or finite, the same in every lane */
        const bool row_nan = isnan(inv);
        uint32_t key[NPER]; /* bits + 1 of a candidate's probability (NaN: 1), 0: none */
#pragma unroll
        for (int i = 0; i < NPER; i++)
            key[i] = (cand >> i & 1u) ? (isnan(p[i]) ? 1u : __float_as_uint(p[i]) + 1u) : 0u;
        uint32_t bk;
        int bs;
        mr_lane_best<NPER>(key, bk, bs);
        for (size_t j = 0; j < k; j++) {
            const uint32_t mk = __reduce_max_sync(0xffffffffu, bk);
            if (mk == 0) break; /* fewer than k candidates (uniform over the warp) */
            const bool hold = bk == mk;
            const unsigned held = __ballot_sync(0xffffffffu, hold);
            const int32_t bid = (int32_t)(lane + 32 * bs);
            bool win;
            int32_t id;
            unsigned w;
            if (held & (held - 1)) { /* lanes tie: the lowest of their ids (as the strict > keeps the lower id) */
                id = (int32_t)__reduce_min_sync(0xffffffffu, hold ? (unsigned)bid : 0xffffffffu);
                w = (unsigned)id & 31;
                win = lane == w;
            } else {
                w = (unsigned)__ffs((int)held) - 1;
                id = __shfl_sync(0xffffffffu, bid, w);
                win = hold;
            }
            float pj = __uint_as_float(mk - 1u); /* a finite row: the key's own bits */
            if (row_nan) { /* every probability NaN: the winner's own value, as the other form shuffles it */
                float wp = p[0];
#pragma unroll
                for (int i = 1; i < NPER; i++)
                    if (i == bs) wp = p[i];
                pj = __shfl_sync(0xffffffffu, wp, w);
            }
            top += pj; /* 0 + p_0 + p_1 ...: the other form's sum, the same order */
            if (lane == j) {
                my_id = id;
                my_p = pj;
            }
#pragma unroll
            for (int i = 0; i < NPER; i++)
                if (win && i == bs) key[i] = 0u;
            mr_lane_best<NPER>(key, bk, bs);
            m = j + 1;
        }
    } else {
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
        for (size_t j = 0; j < m; j++) top += __shfl_sync(0xffffffffu, my_p, (unsigned)j); /* descending, as the CPU */
    }
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
