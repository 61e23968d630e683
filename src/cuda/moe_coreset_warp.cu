/*
 * moe_coreset_warp.cu: the coreset kernel of moe_coreset.cu (SPEC.md 2.2,
 * cpu_moe_coreset) with every row of a 32-row block in flight at once and no
 * thread walking all n * k slots. Same arithmetic, same float64 sums in the
 * same order, so the kept flags and count are the old kernel's bits
 * (CLOVER_CUDA_CORESET=0 runs the old one):
 *  - one block of 32 warps, a warp per row (rows past 32 in rounds): the
 *    row's max by shuffles, e^(l - max) in float64 into the warp's row of
 *    shared memory, then k rounds of a warp arg-max on an order-preserving
 *    32-bit key (two redux.sync per round instead of ten shuffles: the max
 *    key, then the lowest id holding it = the old kernel's "first maximum,
 *    ties to the lower id"). The float64 sums in expert order (the CPU's) are
 *    one warp's, lane r adding row r: the 32 serial chains share each
 *    instruction instead of 32 warps each issuing 256 one-lane adds. Each
 *    row warp then overwrites its row with p = e / sum for its picks (one
 *    division a pick, as before) and 0 elsewhere;
 *  - a thread per expert adds its column of that dense [rows][E] tile in row
 *    order: adding 0.0 to a sum of non-negative terms changes no bit, so this
 *    is the old per-expert sum over the rows that picked it;
 *  - each expert's rank ("larger total, then lower id") counted by several
 *    threads (shared atomics, integer: exact) while one lane of the last
 *    warp adds the totals in expert order; the fractions are written in rank
 *    order so the walk (one thread, the kept prefix only) reads them in a
 *    batch, and every flag is set in parallel from its rank.
 * The old kernel took ~41 us a layer on the H200 at 32 rows (16 warps, two
 * rounds of rows, a thread scanning all 256 slots per expert); here the rows'
 * latency chains (256 float64 adds, 8 arg-max rounds) overlap. Its ~24 us
 * (H100) are one SM's issue rate, so by default the launches below run the
 * cluster form of moe_coreset_cluster.cu (the rows over 8 SMs, the same
 * bits; CLOVER_CUDA_CORESET_CLUSTER=0: this kernel), which replaced the
 * split form (rows over many blocks, their picks through global memory:
 * slower, 2026-12-24-coresplit24).
 */
#include <math.h>
#include <stdint.h>

#include "cuda_check.h"
#include "cuda_ops.h"
#include "cuda_pdl.cuh"
#include "cuda_preview.h"
#include "cuda_switch.h"
#include "moe_coreset_row.cuh"
#include "moe_route.cuh"

enum { CW_WARPS = 32, CW_THREADS = 32 * CW_WARPS, CW_SMEM_MAX = 200 * 1024, CW_ROUTE_ROWS = 4 };

/* One block's coreset of n rows (the kernel's body; k_coreset_warp_multi runs it once a sequence, adding its kept
 * count atomically: integer adds, the same total in any order). */
__device__ __forceinline__ static void coreset_block(uint8_t *allowed, uint32_t *kept_count, const float *logits,
                                                     int n, int E, int k, float top_p, int rw, bool atomic_count) {
    /* dynamic shared memory: P [rw][ES] doubles (a row's e^(l - max), then its picks' probabilities; ES = E
     * rounded up to odd, so lane r reading row r's element e hits its own banks), totals [E], the fractions in
     * rank order [E], the ranks [E] (int) */
    extern __shared__ double sm[];
    const int ES = E | 1;
    double *P = sm, *totals = P + (size_t)rw * ES, *sorted = totals + E;
    int *rank_s = (int *)(sorted + E);
    __shared__ double sums[CW_WARPS], total_s;
    __shared__ int kept_s;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
    pdl_wait(); /* the logits are the router product's output (cuda_pdl.cuh) */
    pdl_trigger();
    for (int e = tid; e < E; e += blockDim.x) rank_s[e] = 0;
    double t = 0.0; /* thread e < E: expert e's total, rows in ascending order */
    for (int r0 = 0; r0 < n; r0 += rw) {
        const int r = r0 + warp, in_round = n - r0 < rw ? n - r0 : rw;
        const bool mine = warp < rw && r < n;
        const float *row = logits + (size_t)r * E;
        double *ex = P + (size_t)warp * ES;
        uint32_t taken = 0; /* bit m: expert lane + 32 m picked (E <= 32 * 32) */
        int pick = -1;      /* lane j < k: the row's j-th pick */
        if (mine) coreset_row_picks(row, ex, E, k, lane, taken, pick);
        __syncthreads();
        if (warp == 0 && lane < in_round) /* lane w: row r0 + w's float64 sum, all rows' chains in one warp */
            sums[lane] = coreset_row_sum(P + (size_t)lane * ES, E);
        __syncthreads();
        if (mine) { /* the row becomes its picks' probabilities (one division a pick, as the old kernel) and 0 */
            const double pv = pick >= 0 ? ex[pick] / sums[warp] : 0.0;
            for (int e = lane, m = 0; e < E; e += 32, m++)
                if (!(taken >> m & 1u)) ex[e] = 0.0;
            if (pick >= 0) ex[pick] = pv;
        }
        __syncthreads();
        if (tid < E)
            for (int w = 0; w < in_round; w++) t += P[(size_t)w * ES + tid];
        __syncthreads();
    }
    for (int e = tid; e < E; e += blockDim.x) /* E <= blockDim: only e == tid */
        totals[e] = t;
    __syncthreads();
    /* ranks by the first 31 warps (G threads an expert, a slice of the others each); the total by the last */
    const int T = blockDim.x - 32, G = T / E > 0 ? T / E : 1;
    if (tid < T) {
        for (int it = tid; it < E * G; it += T) {
            const int e = it % E, part = it / E, a0 = (int)((long)E * part / G), a1 = (int)((long)E * (part + 1) / G);
            const double te = totals[e];
            int c = 0;
            for (int a = a0; a < a1; a++) c += totals[a] > te || (totals[a] == te && a < e);
            if (c) atomicAdd(&rank_s[e], c);
        }
    } else if (tid == T) {
        double total = 0.0;
        for (int e = 0; e < E; e++) total += totals[e];
        total_s = total < 1e-9 ? 1e-9 : total;
    }
    __syncthreads();
    for (int e = tid; e < E; e += blockDim.x) sorted[rank_s[e]] = totals[e] / total_s;
    __syncthreads();
    if (tid == 0) { /* the walk (coreset_walk) */
        const int kept = coreset_walk(sorted, E, top_p);
        kept_s = kept;
        if (atomic_count) atomicAdd(kept_count, (uint32_t)kept);
        else *kept_count += (uint32_t)kept;
    }
    __syncthreads();
    for (int e = tid; e < E; e += blockDim.x) allowed[e] = rank_s[e] < kept_s ? 1 : 0;
}

__global__ void __launch_bounds__(CW_THREADS, 1)
    k_coreset_warp(uint8_t *allowed, uint32_t *kept_count, const float *logits, int n, int E, int k, float top_p,
                   int rw) {
    coreset_block(allowed, kept_count, logits, n, E, k, top_p, rw, false);
}

/* A stacked preview's sequences, a block each (cuda_moe_coreset_route_multi): sequence i's rows from row0, its
 * flags at allowed + i * stride; a sequence without a coreset leaves its flags alone. */
__global__ void __launch_bounds__(CW_THREADS, 1)
    k_coreset_warp_multi(uint8_t *allowed, size_t stride, uint32_t *kept_count, const float *logits,
                         cuda_route_seqs m, int E, int k, int rw) {
    const cuda_route_seq q = m.seq[blockIdx.x];
    if (!q.coreset) return; /* the whole block */
    coreset_block(allowed + blockIdx.x * stride, kept_count, logits + (size_t)q.row0 * E, q.n, E, k, q.top_p, rw,
                  true);
}

/* The routing of every row of a stacked pass: row r inside its sequence's coreset (NULL flags: free), the body
 * of k_route (moe_route_warp), so a row's ids and weights are those of cuda_moe_route(_allowed) on its rows; FAST:
 * its fast form (cuda_route_fast), as k_route's. */
template <int NPER, bool FAST>
__global__ void __launch_bounds__(CW_ROUTE_ROWS * 32)
    k_route_multi(int32_t *idx, float *wts, const float *logits, const uint8_t *allowed, size_t stride,
                  cuda_route_seqs m, int n_rows, int E, int k) {
    pdl_wait(); /* the logits and flags are the previous kernels' outputs */
    pdl_trigger();
    const int r = (int)blockIdx.x * CW_ROUTE_ROWS + (int)(threadIdx.x / 32);
    if (r >= n_rows) return; /* a whole warp */
    int s = -1;
    for (int i = 0; i < m.n_seq && s < 0; i++)
        if (r >= m.seq[i].row0 && r < m.seq[i].row0 + m.seq[i].n) s = i;
    if (s < 0) return; /* a row of no sequence: left as it was */
    const uint8_t *a = m.seq[s].coreset ? allowed + (size_t)s * stride : (const uint8_t *)0;
    moe_route_warp<NPER, FAST>(idx + (size_t)r * k, wts + (size_t)r * k, logits + (size_t)r * E, a, (size_t)E,
                               (size_t)k);
}

template <int NPER>
static void route_multi_launch_n(unsigned grid, unsigned th, cudaStream_t st, int32_t *idx, float *wts,
                                 const float *logits, const uint8_t *allowed, size_t stride, const cuda_route_seqs *m,
                                 int nr, int e, int kk) {
    if (cuda_route_fast())
        pdl_launch(k_route_multi<NPER, true>, grid, th, 0, st, idx, wts, logits, allowed, stride, *m, nr, e, kk);
    else
        pdl_launch(k_route_multi<NPER, false>, grid, th, 0, st, idx, wts, logits, allowed, stride, *m, nr, e, kk);
}

/* The row warps and shared memory of a launch for E experts and k picks; 0, or -1 with `err` set. */
static int coreset_shape(size_t E, size_t k, int *rw_out, size_t *smem_out, char *err, size_t errn) {
    if (E > CW_THREADS) {
        snprintf(err, errn, "cuda_moe_coreset: %zu experts, at most %d", E, CW_THREADS);
        return -1;
    }
    if (k > 32) { /* a pick a lane */
        snprintf(err, errn, "cuda_moe_coreset: k %zu, at most 32", k);
        return -1;
    }
    const size_t tail = 2 * E * sizeof(double) + E * sizeof(int), ES = E | 1;
    int rw = CW_WARPS; /* as many row warps as shared memory holds rows (32 for 256 experts) */
    while (rw > 1 && (size_t)rw * ES * sizeof(double) + tail > CW_SMEM_MAX) rw /= 2;
    const size_t smem = (size_t)rw * ES * sizeof(double) + tail;
    if (smem > CW_SMEM_MAX) {
        snprintf(err, errn, "cuda_moe_coreset: %zu experts need %zu bytes of shared memory", E, smem);
        return -1;
    }
    static int attr_set = 0;
    if (!attr_set) {
        cudaFuncSetAttribute(k_coreset_warp, cudaFuncAttributeMaxDynamicSharedMemorySize, CW_SMEM_MAX);
        cudaFuncSetAttribute(k_coreset_warp_multi, cudaFuncAttributeMaxDynamicSharedMemorySize, CW_SMEM_MAX);
        attr_set = 1;
    }
    *rw_out = rw;
    *smem_out = smem;
    return 0;
}

/* The launch (moe_coreset.cu calls it unless CLOVER_CUDA_CORESET=0): the cluster form (moe_coreset_cluster.cu, the
 * same bits) where it takes the call, else the one-block kernel. 0, or -1 with `err` set. */
int coreset_warp_launch(uint8_t *allowed, uint32_t *kept_count, const float *logits, size_t n, size_t E, size_t k,
                        float top_p, cudaStream_t st, char *err, size_t errn) {
    int rw = 0;
    size_t smem = 0;
    if (coreset_shape(E, k, &rw, &smem, err, errn)) return -1;
    if (coreset_cluster_launch(allowed, kept_count, logits, (int)n, (int)E, (int)k, top_p, st) == 0) return 0;
    pdl_launch(k_coreset_warp, dim3(1), dim3(CW_THREADS), smem, st, allowed, kept_count, logits, (int)n, (int)E,
               (int)k, top_p, rw);
    return 0;
}

/* cuda_moe_coreset_route_multi's launches (moe_coreset.cu checks the arguments): one where the cluster form's fused
 * tail takes them (moe_coreset_cluster.cu), else two; 0, or -1 with `err` set. */
int coreset_route_multi_launch(uint8_t *allowed, size_t stride, uint32_t *kept_count, int32_t *idx, float *wts,
                               const float *logits, const cuda_route_seqs *m, size_t n_rows, size_t E, size_t k,
                               cudaStream_t st, char *err, size_t errn) {
    int rw = 0;
    size_t smem = 0;
    if (coreset_shape(E, k, &rw, &smem, err, errn)) return -1;
    bool any = false;
    for (int i = 0; i < m->n_seq; i++) any = any || m->seq[i].coreset;
    /* one launch where the cluster form fuses the routing (without a coreset the routing below is one launch) */
    if (any && coreset_route_cluster_multi_launch(allowed, stride, kept_count, idx, wts, logits, m, (int)E, (int)k,
                                                  st) == 0)
        return 0;
    if (any && coreset_cluster_multi_launch(allowed, stride, kept_count, logits, m, (int)E, (int)k, st) != 0)
        pdl_launch(k_coreset_warp_multi, dim3((unsigned)m->n_seq), dim3(CW_THREADS), smem, st, allowed, stride,
                   kept_count, logits, *m, (int)E, (int)k, rw);
    const unsigned grid = (unsigned)((n_rows + CW_ROUTE_ROWS - 1) / CW_ROUTE_ROWS), th = CW_ROUTE_ROWS * 32;
    const size_t per = (E + 31) / 32;
    const int nr = (int)n_rows, e = (int)E, kk = (int)k;
    if (per <= 1)
        route_multi_launch_n<1>(grid, th, st, idx, wts, logits, allowed, stride, m, nr, e, kk);
    else if (per <= 2)
        route_multi_launch_n<2>(grid, th, st, idx, wts, logits, allowed, stride, m, nr, e, kk);
    else if (per <= 4)
        route_multi_launch_n<4>(grid, th, st, idx, wts, logits, allowed, stride, m, nr, e, kk);
    else if (per <= 8)
        route_multi_launch_n<8>(grid, th, st, idx, wts, logits, allowed, stride, m, nr, e, kk);
    else if (per <= 16)
        route_multi_launch_n<16>(grid, th, st, idx, wts, logits, allowed, stride, m, nr, e, kk);
    else
        route_multi_launch_n<32>(grid, th, st, idx, wts, logits, allowed, stride, m, nr, e, kk);
    return 0;
}
