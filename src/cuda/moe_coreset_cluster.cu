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
 * The fused tail (k_coreset_route, k_coreset_route_multi; CLOVER_CUDA_CORESET_ROUTE=0 or cuda_coreset_route_set(0):
 * off): the routing inside the coreset in the same launch, one launch a layer instead of two. Why: k_route was a
 * second launch of 8 small blocks (ncu: 6% occupancy) and its dependency, ~6-9 us of a ~141 us preview layer (H100).
 * Every block ranks into every block's rank array (not the leader's alone) and then walks the same totals in the same
 * order itself, so every block holds the leader's flags with no further cluster sync and no DSMEM copy (a NaN total
 * makes total_s NaN and the walk stop at 1 before it reads a fraction its ranks left unwritten: the same in every
 * block); block b then routes its rows of each 32-row round (those of the rows phase, 8 warps: two rounds at once)
 * with k_route's moe_route_warp<NPER, FAST> reading its shared flags: the same function on the same inputs, so the
 * same ids and weights. The leader alone writes the global flags and adds the kept count, as before. A sequence
 * without a coreset (stacked) is routed freely by its cluster.
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
#include "moe_route.cuh"

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
 * (int); the last two used in the leader only (every block in the fused form), but laid out alike in every block so
 * DSMEM offsets agree; the fused form adds the flags [E] (bytes) its rows are routed with. */
static size_t cc_smem(int E, bool flags = false) {
    return ((size_t)CC_RW * (size_t)(E | 1) + 2 * (size_t)E) * sizeof(double) + (size_t)E * sizeof(int) +
           (flags ? (size_t)E : 0);
}

/* One cluster's coreset of n rows (every block of the cluster calls it; n, E, k are the cluster's, so every
 * block runs the same rounds and reaches the same cluster syncs). ALL (the fused form): every block ends with the
 * flags in its shared memory (returned; the caller reads them after the call's last __syncthreads); else the other
 * blocks return NULL after the last cluster sync. */
template <bool ALL>
__device__ __forceinline__ static const uint8_t *coreset_cluster(uint8_t *allowed, uint32_t *kept_count,
                                                                 const float *logits, int n, int E, int k,
                                                                 float top_p) {
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
    /* the slice's ranks (G threads an expert, a part of the others each), the total by one thread of a block that
     * walks (the leader; every block with ALL) */
    const bool lead = b == 0, walks = ALL || lead;
    const int T = walks ? CC_THREADS - 32 : CC_THREADS;
    if (walks && tid == T) {
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
    for (int c = 0; c < (ALL ? CC_BLOCKS : 1); c++) { /* into the leader's rank array; with ALL every block's */
        int *rank_c = cluster.map_shared_rank(rank_all, c);
        for (int i = tid; i < Sb; i += CC_THREADS) rank_c[e0 + i] = rank_s[i];
    }
    cluster.sync(); /* the last: past it no block reads or writes another's shared memory */
    if (!walks) return nullptr;
    for (int e = tid; e < E; e += CC_THREADS) sorted[rank_all[e]] = totals[e] / total_s;
    __syncthreads();
    if (tid == 0) {
        const int kept = coreset_walk(sorted, E, top_p);
        kept_s = kept;
        if (lead) atomicAdd(kept_count, (uint32_t)kept);
    }
    __syncthreads();
    uint8_t *flags = (uint8_t *)(rank_all + E);
    for (int e = tid; e < E; e += CC_THREADS) {
        const uint8_t f = rank_all[e] < kept_s ? 1 : 0;
        if (lead) allowed[e] = f;
        if (ALL) flags[e] = f;
    }
    if (ALL) __syncthreads(); /* the flags, before any warp routes with them */
    return flags;
}

__global__ void __launch_bounds__(CC_THREADS, 1)
    k_coreset_cluster(uint8_t *allowed, uint32_t *kept_count, const float *logits, int n, int E, int k, float top_p) {
    coreset_cluster<false>(allowed, kept_count, logits, n, E, k, top_p);
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
    coreset_cluster<false>(allowed + (size_t)s * stride, kept_count, logits + (size_t)q.row0 * E, q.n, E, k, q.top_p);
}

/* The fused tail's routing of a cluster's n rows (allowed: its flags, NULL: free): block b's warp w takes row
 * 32 j + 4 b + w % 4 for j = w / 4, w / 4 + 2, ... (the rows phase's rows of this block, two rounds at once), the
 * body of k_route with its template arguments, so the same ids and weights. */
template <int NPER, bool FAST>
__device__ __forceinline__ static void cluster_route(int32_t *idx, float *wts, const float *logits,
                                                     const uint8_t *allowed, int n, int E, int k) {
    const int b = (int)cg::this_cluster().block_rank(), warp = (int)threadIdx.x / 32;
    for (int r = warp / CC_RW * CC_ROWS + CC_RW * b + warp % CC_RW; r < n; r += CC_WARPS / CC_RW * CC_ROWS)
        moe_route_warp<NPER, FAST>(idx + (size_t)r * k, wts + (size_t)r * k, logits + (size_t)r * E, allowed,
                                   (size_t)E, (size_t)k); /* r: the whole warp's */
}

/* cuda_moe_coreset then cuda_moe_route_allowed's k_route<NPER, FAST> in one launch (the top comment's fused tail). */
template <int NPER, bool FAST>
__global__ void __launch_bounds__(CC_THREADS, 1)
    k_coreset_route(uint8_t *allowed, uint32_t *kept_count, int32_t *idx, float *wts, const float *logits, int n,
                    int E, int k, float top_p) {
    const uint8_t *flags = coreset_cluster<true>(allowed, kept_count, logits, n, E, k, top_p);
    cluster_route<NPER, FAST>(idx, wts, logits, flags, n, E, k);
}

/* k_coreset_cluster_multi then moe_coreset_warp.cu's k_route_multi<NPER, FAST> in one launch: sequence s's cluster
 * routes its rows inside its coreset, or freely without one (the launch takes only sequences that share no row, so
 * each row is its one sequence's, as k_route_multi finds it). */
template <int NPER, bool FAST>
__global__ void __launch_bounds__(CC_THREADS, 1)
    k_coreset_route_multi(uint8_t *allowed, size_t stride, uint32_t *kept_count, int32_t *idx, float *wts,
                          const float *logits, cuda_route_seqs m, int E, int k) {
    const int s = (int)(blockIdx.x / CC_BLOCKS);
    const cuda_route_seq q = m.seq[s];
    const float *lg = logits + (size_t)q.row0 * E;
    const uint8_t *flags = NULL;
    if (q.coreset) {
        flags = coreset_cluster<true>(allowed + (size_t)s * stride, kept_count, lg, q.n, E, k, q.top_p);
    } else {
        pdl_wait(); /* the logits are the router product's output (cuda_pdl.cuh) */
        pdl_trigger();
    }
    cluster_route<NPER, FAST>(idx + (size_t)q.row0 * k, wts + (size_t)q.row0 * k, lg, flags, q.n, E, k);
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

/* ---- the fused tail's switch and launches ---- */
/* On unless CLOVER_CUDA_CORESET_ROUTE=0 (read once); cuda_coreset_route_set: 1/0, negative the environment. The
 * count of fused launches taken lets the tests check that the form they compare ran. */
static int g_route = -1;
static unsigned long long g_route_launches;
extern "C" void cuda_coreset_route_set(int on) { cuda_switch_set(&g_route, on); }
extern "C" unsigned long long cuda_coreset_route_launches(void) {
    return __atomic_load_n(&g_route_launches, __ATOMIC_RELAXED);
}

/* One fused call: the single form (m NULL: n rows, top_p) or the stacked one (m, stride). */
typedef struct cr_call {
    uint8_t *allowed;
    size_t stride;
    uint32_t *kept;
    int32_t *idx;
    float *wts;
    const float *logits;
    const cuda_route_seqs *m;
    int n, E, k;
    float top_p;
} cr_call;

/* The kernels of one (NPER, FAST), their shared-memory opt-in taken once (a failed one: not launched, the error
 * cleared, so the caller's fallback reports its own status). */
template <int NPER, bool FAST>
static cudaError_t cr_launch_nf(const cr_call &c, cudaStream_t st) {
    static int ok = -1;
    int v = __atomic_load_n(&ok, __ATOMIC_RELAXED);
    if (v < 0) {
        v = cudaFuncSetAttribute(k_coreset_route<NPER, FAST>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 CC_SMEM_MAX) == cudaSuccess &&
            cudaFuncSetAttribute(k_coreset_route_multi<NPER, FAST>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 CC_SMEM_MAX) == cudaSuccess;
        if (!v) (void)cudaGetLastError();
        __atomic_store_n(&ok, v, __ATOMIC_RELAXED);
    }
    if (!v) return cudaErrorNotSupported;
    const size_t smem = cc_smem(c.E, true);
    if (!c.m)
        return pdl_launch_cluster(1, CC_BLOCKS, k_coreset_route<NPER, FAST>, dim3(CC_BLOCKS), dim3(CC_THREADS), smem,
                                  st, c.allowed, c.kept, c.idx, c.wts, c.logits, c.n, c.E, c.k, c.top_p);
    return pdl_launch_cluster(1, CC_BLOCKS, k_coreset_route_multi<NPER, FAST>,
                              dim3((unsigned)(CC_BLOCKS * c.m->n_seq)), dim3(CC_THREADS), smem, st, c.allowed,
                              c.stride, c.kept, c.idx, c.wts, c.logits, *c.m, c.E, c.k);
}

template <int NPER> static cudaError_t cr_launch_n(const cr_call &c, cudaStream_t st) {
    return cuda_route_fast() ? cr_launch_nf<NPER, true>(c, st) : cr_launch_nf<NPER, false>(c, st);
}

/* 0 when the fused kernel was launched (k_route's NPER: the smallest holding E, as ops_small.cu's route_launch picks
 * it); 1 when it does not take the call (switched off, the cluster form off or unavailable, shapes k_route or the
 * cluster would not take) or its launch was refused (cleared, as coreset_cluster_launch does): nothing launched, the
 * caller runs the two launches. */
static int cr_launch(const cr_call &c, cudaStream_t st) {
    if (!cuda_switch_on(&g_route, "CLOVER_CUDA_CORESET_ROUTE", 1)) return 1;
    if (c.E < 1 || c.E > CUDA_ROUTE_MAX_EXPERT || c.k < 1 || c.k > CUDA_ROUTE_MAX_K || c.k > c.E) return 1;
    if (!cc_ready(c.E, c.k) || cc_smem(c.E, true) > CC_SMEM_MAX) return 1;
    const int per = (c.E + 31) / 32;
    const cudaError_t e = per <= 1    ? cr_launch_n<1>(c, st)
                          : per <= 2  ? cr_launch_n<2>(c, st)
                          : per <= 4  ? cr_launch_n<4>(c, st)
                          : per <= 8  ? cr_launch_n<8>(c, st)
                          : per <= 16 ? cr_launch_n<16>(c, st)
                                      : cr_launch_n<32>(c, st);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return 1;
    }
    __atomic_fetch_add(&g_route_launches, 1ull, __ATOMIC_RELAXED);
    return 0;
}

int coreset_route_cluster_launch(uint8_t *allowed, uint32_t *kept_count, int32_t *idx, float *wts,
                                 const float *logits, int n, int E, int k, float top_p, cudaStream_t st) {
    const cr_call c = {allowed, 0, kept_count, idx, wts, logits, NULL, n, E, k, top_p};
    return cr_launch(c, st);
}

/* Each cluster routes its own sequence's rows, so sequences sharing a row (k_route_multi: the row is the first
 * one's) take the two launches; the pass's are disjoint, in row order. */
int coreset_route_cluster_multi_launch(uint8_t *allowed, size_t stride, uint32_t *kept_count, int32_t *idx,
                                       float *wts, const float *logits, const cuda_route_seqs *m, int E, int k,
                                       cudaStream_t st) {
    if (m->n_seq <= 0) return 1;
    for (int i = 0, end = 0; i < m->n_seq; i++) {
        if (m->seq[i].n <= 0) continue;
        if (m->seq[i].row0 < end) return 1;
        end = m->seq[i].row0 + m->seq[i].n;
    }
    const cr_call c = {allowed, stride, kept_count, idx, wts, logits, m, 0, E, k, 0.0f};
    return cr_launch(c, st);
}
