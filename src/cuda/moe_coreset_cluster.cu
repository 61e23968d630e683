/*
 * moe_coreset_cluster.cu: the coreset of SPEC.md 2.2 (cpu_moe_coreset) on a Hopper thread-block cluster of 8
 * blocks instead of k_coreset_warp's one block (moe_coreset_warp.cu), with the same float64 sums in the same
 * order, so the kept flags and count are k_coreset_warp's bits. Why: k_coreset_warp took 24 us a layer (H100, a
 * 32-row preview, E 256, k 8; ~1 ms of a 7.2 ms preview) and ncu put 60% of its stalls in the rows' phase: 32 row
 * warps' exps and top-k rounds (~73K warp instructions) issued by ONE SM's 4 schedulers. The split form (rows over
 * 16 blocks, picks through global memory, then the one-block rest) was slower: the rest scanned every pick in
 * global memory per expert. Here the rows spread over 8 SMs and the rest reads them from distributed shared memory:
 *  - rows: block b's row slot w takes row r0 + 4 b + w (32 rows a round; more rows in rounds) with two warps: w's
 *    top-k rounds (coreset_row_topk) beside warp w + 4's exps and their sum by its lane 0 (coreset_row_exps,
 *    coreset_row_sum: expert order, one thread), then the row in the block's shared memory becomes its dense
 *    probabilities (p = e / sum at its picks, one division a pick as before, 0.0 elsewhere);
 *  - cluster.sync; totals: block b owns the experts [b S, (b + 1) S), S = ceil(E / 8); expert e's thread adds its
 *    column over the round's rows in row order, reading the owners' rows through DSMEM (all 32 loads issued before
 *    the adds), its running total kept across rounds: 0.0 + p_row0 + p_row1 + ..., k_coreset_warp's chain (a row
 *    that did not pick e adds an exact 0.0 in both); a cluster.sync before a round overwrites the rows;
 *  - each owner writes its totals into every block's totals (DSMEM), cluster.sync; every block counts the ranks of
 *    its slice ("larger total, then lower id", integer counts: any order) with shared atomics and writes them into
 *    the leader's (block 0) rank array, while one leader thread adds all totals in expert order; cluster.sync;
 *  - the leader alone: the fractions into rank order, the walk by one thread (coreset_block's), every flag from
 *    its rank, the kept count added atomically (stacked clusters add to one counter: integer, order-free). After
 *    the last cluster.sync no block touches another's shared memory, so the others may exit.
 * Predicted before any run: rows ~1/8 of the old phase (~2 us), the one-lane row sum ~1.2 us, four cluster syncs,
 * the column walk, the ranks (overlapping the one-lane total, ~1.2 us) and the walk: ~5-8 us a layer instead of 24.
 * Measured (H200, a standalone harness of these files, not the engine; random logits, E 256, k 8, 32 rows, 40
 * coresets in a graph): 22.5 -> 15.8 us a coreset, the blocks on 8 distinct SMs. %globaltimer per phase: rows
 * 8.0 us (now one row's latency chain a warp: loads, exps, 8 top-k rounds, the 256-add row sum), column walk +
 * sync 1.1, publish 0.5, ranks beside the one-lane total 2.2 (that 256-add chain), last sync 0.5, fractions + walk
 * + flags 4 (random logits keep ~half the experts; a real router's ~8-16 walk shorter). Since: the row sum on
 * its own warp beside the top-k rounds, the top-k's keys made once into registers (E <= 256), the walk's adds a
 * chain no test waits on. In the engine (H100, bench/device-runs/2026-12-25-k2core24, kernel trace with PDL off):
 * 10.1 us a layer against k_coreset_warp's 24.1; a 32-row preview 6.78 -> 6.50 ms.
 * One launch (a cluster a sequence in the stacked form), PDL as the other coreset launches; where the device has no
 * cluster launch or the launch is refused, moe_coreset_warp.cu runs k_coreset_warp instead.
 * CLOVER_CUDA_CORESET_CLUSTER=0 (or cuda_coreset_cluster_set(0)) runs k_coreset_warp always.
 */
#include <cooperative_groups.h>
#include <math.h>
#include <stdint.h>

#include "cuda_check.h"
#include "cuda_ops.h"
#include "cuda_pdl.cuh"
#include "cuda_preview.h"
#include "cuda_switch.h"
#include "moe_coreset_row.cuh"

namespace cg = cooperative_groups;

/* 8: the portable cluster size (no opt-in); 4 rows a block, each with two warps: one for its top-k rounds, one for
 * its exps and their one-lane sum (the sum needs only the exps, so the two chains run side by side) */
enum {
    CC_BLOCKS = 8,
    CC_RW = 4,
    CC_WARPS = 2 * CC_RW,
    CC_THREADS = 32 * CC_WARPS,
    CC_ROWS = CC_BLOCKS * CC_RW, /* rows a round */
    CC_SLICE_MAX = CC_THREADS,      /* experts a block owns: a thread each */
    CC_SMEM_MAX = 64 * 1024         /* E 1024: 4 rows of 1025 doubles + 2 x 1024 doubles + 1024 ints = 52 KiB */
};
static_assert(CUDA_ROUTE_MAX_EXPERT <= CC_BLOCKS * CC_SLICE_MAX, "coreset cluster: a thread an owned expert");

/* The dynamic shared memory of a block for E experts: P [4][E | 1] (its rows; the odd stride as k_coreset_warp's),
 * totals [E] (every expert's, published by the owners), sorted [E] (the fractions in rank order) and rank [E]
 * (int); the last two used in the leader only, but laid out alike in every block so DSMEM offsets agree. */
static size_t cc_smem(int E) {
    return ((size_t)CC_RW * (size_t)(E | 1) + 2 * (size_t)E) * sizeof(double) + (size_t)E * sizeof(int);
}

/* One cluster's coreset of n rows (every block of the cluster calls it; n, E, k are the cluster's, so every
 * block runs the same rounds and reaches the same cluster syncs). */
__device__ __forceinline__ static void coreset_cluster(uint8_t *allowed, uint32_t *kept_count, const float *logits,
                                                       int n, int E, int k, float top_p) {
    cg::cluster_group cluster = cg::this_cluster();
    extern __shared__ double smc[];
    const int ES = E | 1;
    double *P = smc, *totals = P + (size_t)CC_RW * ES, *sorted = totals + E;
    int *rank_all = (int *)(sorted + E);
    __shared__ int rank_s[CC_SLICE_MAX]; /* the ranks of the block's slice, counted by several threads */
    __shared__ double total_s, rsum[CC_RW];
    __shared__ int kept_s;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31, b = (int)cluster.block_rank();
    const int S = (E + CC_BLOCKS - 1) / CC_BLOCKS, e0 = b * S, left = E - e0;
    const int Sb = left < 0 ? 0 : left < S ? left : S; /* the experts this block owns: e0 .. e0 + Sb - 1 */
    rank_s[tid] = 0;
    /* the cluster's row buffers; rank c holds rows 4 c .. 4 c + 3 of a round */
    const double *src[CC_BLOCKS];
#pragma unroll
    for (int c = 0; c < CC_BLOCKS; c++) src[c] = cluster.map_shared_rank(P, c);
    pdl_wait(); /* the logits are the router product's output (cuda_pdl.cuh) */
    pdl_trigger();
    double t = 0.0; /* thread i < Sb: expert e0 + i's total, rows in ascending order */
    const int rw = warp % CC_RW; /* the block's row slot of this warp; warps CC_RW.. are the sum warps */
    const bool sum_warp = warp >= CC_RW;
    double *ex = P + (size_t)rw * ES;
    if (n <= 0) cluster.sync(); /* no round: the sync that starts every block before any DSMEM access */
    for (int r0 = 0; r0 < n; r0 += CC_ROWS) {
        const int r = r0 + CC_RW * b + rw, in_round = n - r0 < CC_ROWS ? n - r0 : CC_ROWS;
        if (r0 > 0) cluster.sync(); /* every block has added the last round's rows before they are overwritten */
        const float *row = logits + (size_t)r * E;
        uint32_t taken = 0; /* bit m: expert lane + 32 m picked (E <= 32 * 32) */
        int pick = -1;      /* lane j < k: the row's j-th pick */
        if (r < n && sum_warp) { /* the row's e^(l - max), then lane 0's sum: k_coreset_warp's sums[w] chain */
            coreset_row_exps(row, ex, E, lane);
            __syncwarp(); /* every lane's e^(l - max) written before lane 0 adds them */
            if (lane == 0) rsum[rw] = coreset_row_sum(ex, E);
        } else if (r < n) {
            coreset_row_topk(row, E, k, lane, taken, pick);
        }
        __syncthreads(); /* the rows' exps and sums */
        if (r < n && !sum_warp) { /* the row becomes its picks' probabilities (one division a pick) and 0 */
            const double pv = pick >= 0 ? ex[pick] / rsum[rw] : 0.0;
            __syncwarp(); /* the picks' reads before the row is overwritten */
            for (int e = lane, m = 0; e < E; e += 32, m++)
                if (!(taken >> m & 1u)) ex[e] = 0.0;
            if (pick >= 0) ex[pick] = pv;
        }
        cluster.sync(); /* the round's rows, every block's, written and visible cluster-wide (release / acquire) */
        if (tid < Sb) {
            const int e = e0 + tid;
            double v[CC_ROWS];
            /* row r0 + j: block j / 4's row slot j % 4. All 32 loads first and unconditional (a row past n is a
             * stale or unwritten row of the buffer, read and not added): no branch between them */
#pragma unroll
            for (int j = 0; j < CC_ROWS; j++) v[j] = src[j / CC_RW][(size_t)(j % CC_RW) * ES + e];
#pragma unroll
            for (int j = 0; j < CC_ROWS; j++)
                if (j < in_round) t += v[j]; /* row order: k_coreset_warp's column walk */
        }
    }
    if (tid < Sb) /* the slice's totals into every block's totals */
#pragma unroll
        for (int c = 0; c < CC_BLOCKS; c++) cluster.map_shared_rank(totals, c)[e0 + tid] = t;
    cluster.sync();
    /* the slice's ranks (G threads an expert, a part of the others each), the total by one leader thread */
    const bool lead = b == 0;
    const int T = lead ? CC_THREADS - 32 : CC_THREADS;
    if (lead && tid == T) {
        const double total = coreset_row_sum(totals, E); /* expert order, from 0.0: k_coreset_warp's total */
        total_s = total < 1e-9 ? 1e-9 : total;
    } else if (Sb > 0 && tid < T) {
        const int G = T / Sb > 0 ? T / Sb : 1;
        for (int it = tid; it < Sb * G; it += T) {
            const int i = it % Sb, part = it / Sb, e = e0 + i;
            const int a0 = (int)((long)E * part / G), a1 = (int)((long)E * (part + 1) / G);
            const double te = totals[e];
            int c = 0;
            for (int a = a0; a < a1; a++) c += totals[a] > te || (totals[a] == te && a < e);
            if (c) atomicAdd(&rank_s[i], c);
        }
    }
    __syncthreads();
    int *rank_lead = cluster.map_shared_rank(rank_all, 0);
    for (int i = tid; i < Sb; i += CC_THREADS) rank_lead[e0 + i] = rank_s[i];
    cluster.sync(); /* the last: past it no block reads or writes another's shared memory */
    if (!lead) return;
    for (int e = tid; e < E; e += CC_THREADS) sorted[rank_all[e]] = totals[e] / total_s;
    __syncthreads();
    if (tid == 0) {
        const int kept = coreset_walk(sorted, E, top_p);
        kept_s = kept;
        atomicAdd(kept_count, (uint32_t)kept);
    }
    __syncthreads();
    for (int e = tid; e < E; e += CC_THREADS) allowed[e] = rank_all[e] < kept_s ? 1 : 0;
}

__global__ void __launch_bounds__(CC_THREADS, 1)
    k_coreset_cluster(uint8_t *allowed, uint32_t *kept_count, const float *logits, int n, int E, int k, float top_p) {
    coreset_cluster(allowed, kept_count, logits, n, E, k, top_p);
}

/* A stacked preview's sequences, a cluster each (k_coreset_warp_multi's contract): sequence i's rows from row0,
 * its flags at allowed + i * stride; a sequence without a coreset leaves its flags alone (its whole cluster
 * returns before any cluster sync). */
__global__ void __launch_bounds__(CC_THREADS, 1)
    k_coreset_cluster_multi(uint8_t *allowed, size_t stride, uint32_t *kept_count, const float *logits,
                            cuda_route_seqs m, int E, int k) {
    const int s = (int)(blockIdx.x / CC_BLOCKS);
    const cuda_route_seq q = m.seq[s];
    if (!q.coreset) return;
    coreset_cluster(allowed + (size_t)s * stride, kept_count, logits + (size_t)q.row0 * E, q.n, E, k, q.top_p);
}

/* On unless CLOVER_CUDA_CORESET_CLUSTER=0 (read once); cuda_coreset_cluster_set: 1/0, negative the environment. */
static int g_cluster = -1;
extern "C" void cuda_coreset_cluster_set(int on) { cuda_switch_set(&g_cluster, on); }

/* 1 where the cluster form may launch: switched on, the device launches clusters (sm_90 on; read once) and the
 * kernels took the shared-memory opt-in. A failed query's error is cleared so the caller's launch status is the
 * fallback kernel's. */
static bool cc_ready(int E, int k) {
    if (!cuda_switch_on(&g_cluster, "CLOVER_CUDA_CORESET_CLUSTER", 1)) return false;
    if (E < 0 || E > CC_BLOCKS * CC_SLICE_MAX || k < 0 || k > 32 || cc_smem(E) > CC_SMEM_MAX) return false;
    static int ok = -1;
    int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);
    if (v < 0) {
        int dev = 0, a = 0;
        v = cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&a, cudaDevAttrClusterLaunch, dev) ==
                                                      cudaSuccess && a != 0;
        v = v && cudaFuncSetAttribute(k_coreset_cluster, cudaFuncAttributeMaxDynamicSharedMemorySize, CC_SMEM_MAX) ==
                     cudaSuccess;
        v = v && cudaFuncSetAttribute(k_coreset_cluster_multi, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      CC_SMEM_MAX) == cudaSuccess;
        if (!v) (void)cudaGetLastError();
        __atomic_store_n(&ok, v, __ATOMIC_RELAXED);
    }
    return v != 0;
}

/* A refused launch (e.g. no 8 SMs of a GPC free for the smem asked) is cleared and reported as not taken, so the
 * caller launches k_coreset_warp; under stream capture such a refusal would already have invalidated the capture,
 * which the caller's launch status then reports, as for any failed launch. */
int coreset_cluster_launch(uint8_t *allowed, uint32_t *kept_count, const float *logits, int n, int E, int k,
                           float top_p, cudaStream_t st) {
    if (!cc_ready(E, k)) return 1;
    if (pdl_launch_cluster(1, CC_BLOCKS, k_coreset_cluster, dim3(CC_BLOCKS), dim3(CC_THREADS), cc_smem(E), st,
                           allowed, kept_count, logits, n, E, k, top_p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return 0;
}

int coreset_cluster_multi_launch(uint8_t *allowed, size_t stride, uint32_t *kept_count, const float *logits,
                                 const cuda_route_seqs *m, int E, int k, cudaStream_t st) {
    if (!cc_ready(E, k) || m->n_seq <= 0) return 1;
    if (pdl_launch_cluster(1, CC_BLOCKS, k_coreset_cluster_multi, dim3((unsigned)(CC_BLOCKS * m->n_seq)),
                           dim3(CC_THREADS), cc_smem(E), st, allowed, stride, kept_count, logits, *m, E, k) !=
        cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    return 0;
}
