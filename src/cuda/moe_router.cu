/*
 * moe_router.cu: a decode step's MoE router product and its routing in one
 * launch (cuda_moe_router.h; issue 24).
 *
 * Why: a MoE layer ran the router product (256 x 2048 F32 over 1..8 rows,
 * with the shared expert's 1-output gate) and then cuda_moe_route, a second
 * kernel that can only start once the product has finished and flushed.
 * The routing itself is a few hundred cycles of one warp per row; what it
 * cost was its launch and the dependency (~2-3 us on the H200, x 40
 * layers). Here the blocks that compute the logits count themselves out on
 * a device word, and the last block to finish (it alone sees the count
 * reach the grid size) routes every row from the logits the others wrote:
 * no second kernel, no grid-wide barrier (no block ever waits for another).
 *
 * Bits: a warp takes one (output, row) pair and runs mmv_row<MM_F32>'s
 * 16-byte path for that one row and mmv_reduce<MM_F32> (matmul_mmv.cuh), the
 * operations mmv_kernel and mmv_thin_kernel run for every row, in the same
 * order, so the logits (and the second matrix's outputs) are the decode
 * product's bits; the routing is moe_route_warp (moe_route.cuh), k_route's
 * own body, reading those logits. Pairs are output-major (pair q = o *
 * n_rows + r) and a block has a warp per row (2 at 1 row), so at 8 rows a
 * block is one weight row's 8 pairs (8x the warps of mmv_kernel's
 * one-warp-per-output form, as mmv_thin_kernel), at 1 row two outputs.
 *
 * The counter: each block's writing lanes fence their logits, the block
 * meets at a barrier, and one thread fences again and adds 1 (the release
 * half); the block that reads gridDim.x - 1 resets the word to 0 (so the
 * next launch and a replayed graph start from 0), fences (the acquire half)
 * and routes, reading the logits through L2. A launch touches the word only
 * after its PDL wait, so the previous launch on the stream has completed
 * and left it 0.
 *
 * The fast form (FAST, cuda_route_fast: on unless CLOVER_CUDA_ROUTE_FAST=0) takes
 * moe_route_warp's fast top-k (the same bits) and replaces the fences by one
 * atom.add.acq_rel.gpu of thread 0. Why that is enough (PTX memory model):
 * the lanes' plain stores precede the barrier in program order, the barrier
 * (bar.sync) orders them before thread 0's add, whose release half is
 * cumulative, so they precede it in causality order; the last block's add
 * reads the value every other add wrote (one location's atomics form a
 * chain), its acquire half orders what follows, and its barrier carries that
 * to every warp's loads. So each logit store precedes every routing load in
 * causality order and the load sees it (L1 holds no stale copy either: the
 * loads go through L2). The rows route in parallel either way: a block has
 * at least n_rows warps, one row each.
 *
 * Not this product past 8 rows: at 16 (a warp a row, 16-warp blocks;
 * bench/device-runs/2027-01-26-r16, H100) the same bits, but the 16-sequence
 * AR step 0.2-1.0% slower than the exact product (ex_rows_kernel, a warp's
 * weights reused over its rows) plus k_route: the launch saved costs less
 * than each warp's own pass over its weight row. Past 8 rows the fused form
 * is that exact product's own warps with this counter tail (k_router_rows,
 * below; which row counts take it is the session's CLOVER_CUDA_ROUTER_ROWS).
 *
 * PDL (cuda_pdl.cuh): a block's weight rows are constant, so they are copied
 * to shared memory with cp.async (or, when they would not fit, prefetched
 * into L2) before the wait, while the previous kernel (the layer's norm)
 * finishes.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_moe_router.h"
#include "cuda_ops.h"
#include "matmul_exact.cuh"
#include "matmul_mmv.cuh"
#include "moe_route.cuh"

enum {
    RT_WARPS = 8,           /* warps per block at most (8 rows: the last block routes them in one round) */
    RT_SMEM_MAX = 96 * 1024, /* staged weight rows of a block at most */
    /* past 8 rows, experts a row at most (k_route's register width 8): wider rows' routing registers beside the
     * product's made ptxas spill, so they keep the two launches */
    RTR_MAX_EXPERT = 256, RTR_MAX_NPER = RTR_MAX_EXPERT / 32
};

typedef struct rt_params {
    const uint8_t *w, *w2; /* the router [n_out][n_in], the second matrix [n_out2][n_in] (or NULL) */
    size_t row_bytes;
    int n_out, n_out2, n_in, n_rows, k;
    const float *x;
    float *y, *y2; /* the logits [n_rows][n_out], the second matrix's [n_rows][n_out2] */
    int32_t *idx;
    float *wts;
    unsigned *counter;
    int stage; /* the block's weight rows go to shared memory first */
} rt_params;

/* The weight row of output o: the router's rows, then the second matrix's. */
__device__ __forceinline__ const uint8_t *rt_wrow(const rt_params &p, int o) {
    return o < p.n_out ? p.w + (size_t)o * p.row_bytes : p.w2 + (size_t)(o - p.n_out) * p.row_bytes;
}

/* The counter (the top comment's): each block counts itself out once its warps' logits are written (and, !FAST,
 * fenced); the last block resets the word and routes every row, a warp a row in rounds of the block's nw warps. */
template <int NPER, bool FAST>
__device__ __forceinline__ void rt_count_route(const rt_params &p, int &last, int warp, int nw) {
    __syncthreads(); /* every warp's write (and fence) precedes thread 0's count */
    if (threadIdx.x == 0) {
        unsigned done;
        if (FAST) { /* release: the block's logits before the count; acquire: the others' before the reads below */
            asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(done) : "l"(p.counter) : "memory");
        } else {
            __threadfence();
            done = atomicAdd(p.counter, 1u);
        }
        last = done == gridDim.x - 1;
        if (last) {
            atomicExch(p.counter, 0u); /* every block has counted: the word is free for the next launch */
            if (!FAST) __threadfence(); /* the others' logits, seen through their fences, before the reads below */
        }
    }
    __syncthreads();
    if (!last) return; /* block-uniform */
    for (int r = warp; r < p.n_rows; r += nw) /* a warp per row, as k_route */
        moe_route_warp<NPER, FAST>(p.idx + (size_t)r * p.k, p.wts + (size_t)r * p.k, p.y + (size_t)r * p.n_out, NULL,
                             (size_t)p.n_out, (size_t)p.k);
}

template <int NPER, bool FAST>
__global__ void __launch_bounds__(32 * RT_WARPS) k_router(rt_params p) {
    extern __shared__ __align__(16) uint8_t ws[]; /* stage: the block's weight rows, from output o_first on */
    __shared__ int last;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = (int)(blockDim.x >> 5);
    const int n_pairs = (p.n_out + p.n_out2) * p.n_rows;
    const int q0 = (int)blockIdx.x * nw, q1 = min(q0 + nw, n_pairs);
    const int o_first = q0 / p.n_rows, o_last = (q1 - 1) / p.n_rows;
    /* constant weights: in flight before the wait (cuda_pdl.cuh's rule: nothing written, only weights read) */
    for (int o = o_first; o <= o_last; o++) {
        if (p.stage)
            mmv_copy(ws + (size_t)(o - o_first) * p.row_bytes, rt_wrow(p, o), p.row_bytes);
        else
            pdl_prefetch_l2(rt_wrow(p, o), p.row_bytes);
    }
    if (p.stage) asm volatile("cp.async.commit_group;" ::: "memory");
    pdl_wait(); /* x is the previous kernel's output */
    pdl_trigger();
    if (p.stage) {
        asm volatile("cp.async.wait_all;" ::: "memory"); /* this thread's copies landed */
        __syncthreads();                                   /* and everyone's */
    }
    const int q = q0 + warp;
    if (q < q1) { /* warp-uniform: mmv_row and mmv_reduce shuffle over the whole warp */
        const int o = q / p.n_rows, r = q % p.n_rows;
        const uint8_t *wrow = p.stage ? ws + (size_t)(o - o_first) * p.row_bytes : rt_wrow(p, o);
        const uint8_t *xr[MMV_MAX];
#pragma unroll
        for (int i = 0; i < MMV_MAX; i++) xr[i] = (const uint8_t *)(p.x + (size_t)r * p.n_in);
        float acc[MMV_MAX];
#pragma unroll
        for (int i = 0; i < MMV_MAX; i++) acc[i] = 0.0f;
        mmv_row<MM_F32>(wrow, p.n_in, xr, 1, 1, acc); /* mmv_thin_kernel's call: the decode product's bits */
        const float v = mmv_reduce<MM_F32>(acc[0]);
        if (lane == 0) {
            if (o < p.n_out)
                p.y[(size_t)r * p.n_out + o] = v;
            else
                p.y2[(size_t)r * p.n_out2 + (o - p.n_out)] = v;
            if (!FAST) __threadfence(); /* this logit is visible device-wide before the block counts itself out */
        }
    }
    rt_count_route<NPER, FAST>(p, last, warp, nw);
}

/* Past 8 rows (up to CUDA_ROUTER_MAX_ROWS): cuda_matmul_exact_multi's warp-an-output form (ex_rows_warp, the
 * matmul_exact.cuh code ex_rows_kernel runs, on its grid of 8-warp blocks: the same warps, so the same logits and
 * second outputs), then the counter, and the last block routes the rows, 8 at a time. 133 registers (ptxas, sm_90a;
 * ex_rows_kernel 128): one block an SM where ex_rows_kernel has two, so a grid past the SMs (rows > 16 at 257
 * outputs on 132 SMs) takes two waves: which row counts take it is the caller's (CLOVER_CUDA_ROUTER_ROWS). Bound to
 * two blocks an SM, ptxas spilled. */
template <int NPER, bool FAST>
__global__ void __launch_bounds__(32 * EX_WARPS) k_router_rows(ex_params e, rt_params p) {
    __shared__ int last;
    const int lane = threadIdx.x & 31;
    const long gw = ((long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    ex_rows_warp<MM_F32>(e, gw, lane); /* its lane 0 stores; past the rows, only the PDL wait */
    if (!FAST) __threadfence(); /* the stores visible device-wide before the block counts itself out */
    rt_count_route<NPER, FAST>(p, last, (int)(threadIdx.x >> 5), EX_WARPS);
}

/* Warps per block: one per row (the last block routes every row in one round), at least 2. Small blocks spread
 * the weights over the SMs: at 1 row the 256 + 1 outputs take 129 blocks, each staging 16 KB, where blocks of 8
 * warps would be 33 SMs pulling 64 KB each; at 8 rows a block is one output's 8 rows (257 blocks, 8 KB each). */
static size_t rt_warps(size_t n_rows) { return n_rows < 2 ? 2 : n_rows; }

/* The most distinct outputs a block's nw consecutive pairs touch: at n_rows a row, floor((nw - 1) / n_rows) + 2 (a
 * straddle at both ends), never more than nw or all of them. */
static size_t rt_rows_per_block(size_t n_rows, size_t n_all, size_t nw) {
    size_t m = (nw - 1) / n_rows + 2;
    if (m > nw) m = nw;
    return m < n_all ? m : n_all;
}

extern "C" bool cuda_moe_router_ok(const cuda_router_args *a) {
    if (!a || a->type != MM_F32 || !a->w || !a->x || !a->logits || !a->idx || !a->wts || !a->counter) return false;
    if (a->n_rows < 1 || a->n_rows > CUDA_ROUTER_MAX_ROWS) return false;
    if (a->n_expert < 1 || a->n_expert > CUDA_ROUTE_MAX_EXPERT) return false;
    if (a->n_rows > MMV_MAX && a->n_expert > RTR_MAX_EXPERT) return false;
    if (a->k < 1 || a->k > CUDA_ROUTE_MAX_K || a->k > a->n_expert) return false;
    if (a->n_in < 8 || a->n_in % 8 != 0 || a->n_in > (1u << 28)) return false; /* mmv_row's 16-byte path */
    if (a->w2 ? (!a->y2 || a->n_out2 < 1 || a->n_out2 > (1u << 20)) : a->n_out2 != 0) return false;
    return (((uintptr_t)a->w | (uintptr_t)a->w2 | (uintptr_t)a->x) & 15) == 0;
}

/* Shared memory past 48 KB needs the kernel's opt-in, once per instantiation and device (the attribute is the
 * device's: a split model's two GPUs each need it; a repeated set is harmless, so the flags need no lock). */
template <int NPER, bool FAST>
static void rt_launch_f(const rt_params &p, unsigned grid, unsigned nw, size_t smem, cudaStream_t st) {
    static uint64_t opted = 0; /* bit d: device d has it */
    int dev = 0;
    if (smem > 48 * 1024 && cudaGetDevice(&dev) == cudaSuccess &&
        (dev >= 64 || !(__atomic_load_n(&opted, __ATOMIC_RELAXED) >> dev & 1u))) {
        if (cudaFuncSetAttribute(k_router<NPER, FAST>, cudaFuncAttributeMaxDynamicSharedMemorySize, RT_SMEM_MAX) ==
                cudaSuccess &&
            dev < 64)
            __atomic_fetch_or(&opted, (uint64_t)1 << dev, __ATOMIC_RELAXED);
    }
    pdl_launch(k_router<NPER, FAST>, dim3(grid), dim3(32 * nw), smem, st, p);
}

/* k_router (e NULL) or, past 8 rows, k_router_rows on e's grid of 8-warp blocks */
template <int NPER>
static void rt_launch(const rt_params &p, const ex_params *e, unsigned grid, unsigned nw, size_t smem,
                      cudaStream_t st) {
    const bool fast = cuda_route_fast();
    if constexpr (NPER <= RTR_MAX_NPER) {
        if (e) {
            if (fast)
                pdl_launch(k_router_rows<NPER, true>, dim3(grid), dim3(32 * EX_WARPS), 0, st, *e, p);
            else
                pdl_launch(k_router_rows<NPER, false>, dim3(grid), dim3(32 * EX_WARPS), 0, st, *e, p);
            return;
        }
    }
    if (fast)
        rt_launch_f<NPER, true>(p, grid, nw, smem, st);
    else
        rt_launch_f<NPER, false>(p, grid, nw, smem, st);
}

static uint64_t g_launches;
extern "C" uint64_t cuda_moe_router_launches(void) { return __atomic_load_n(&g_launches, __ATOMIC_RELAXED); }

extern "C" int cuda_moe_router(const cuda_router_args *a, void *stream, char *why, size_t why_len) {
    const char *op = "cuda_moe_router";
    if (!cuda_moe_router_ok(a))
        MM_FAIL("%s: arguments outside the fused form (F32, 1..%d rows, <= %d experts, k <= %d, n_in %% 8, "
                "16-byte aligned)",
                op, (int)CUDA_ROUTER_MAX_ROWS, (int)CUDA_ROUTE_MAX_EXPERT, (int)CUDA_ROUTE_MAX_K);
    rt_params p = {};
    p.w = (const uint8_t *)a->w;
    p.w2 = (const uint8_t *)a->w2;
    p.row_bytes = a->n_in * sizeof(float);
    p.n_out = (int)a->n_expert;
    p.n_out2 = a->w2 ? (int)a->n_out2 : 0;
    p.n_in = (int)a->n_in;
    p.n_rows = (int)a->n_rows;
    p.k = (int)a->k;
    p.x = a->x;
    p.y = a->logits;
    p.y2 = a->y2;
    p.idx = a->idx;
    p.wts = a->wts;
    p.counter = a->counter;
    const size_t n_all = a->n_expert + (size_t)p.n_out2, n_pairs = n_all * a->n_rows;
    size_t nw = rt_warps(a->n_rows);
    unsigned grid = (unsigned)((n_pairs + nw - 1) / nw);
    const size_t smem = rt_rows_per_block(a->n_rows, n_all, nw) * p.row_bytes;
    p.stage = !a->no_stage && smem <= RT_SMEM_MAX;
    size_t dyn = p.stage ? smem : 0;
    ex_params e = {}; /* past 8 rows: cuda_matmul_exact_multi's parameters and grid for these matrices */
    const bool rows = a->n_rows > MMV_MAX;
    if (rows) {
        e.w[0] = p.w, e.y[0] = p.y, e.n_out[0] = p.n_out;
        e.w[1] = p.w2, e.y[1] = p.y2, e.n_out[1] = p.n_out2;
        e.n_seg = p.w2 ? 2 : 1;
        e.tot = (int)n_all, e.n_in = p.n_in, e.n_rows = p.n_rows, e.rw = EX_RW, e.row_bytes = p.row_bytes, e.x = p.x;
        const size_t warps = n_all * ((a->n_rows + EX_RW - 1) / EX_RW);
        grid = (unsigned)((warps + EX_WARPS - 1) / EX_WARPS), nw = EX_WARPS, dyn = 0, p.stage = 0;
    }
    const ex_params *ep = rows ? &e : NULL;
    cudaStream_t st = (cudaStream_t)stream;
    const size_t per = (a->n_expert + 31) / 32; /* k_route's register width */
    if (per <= 1)
        rt_launch<1>(p, ep, grid, (unsigned)nw, dyn, st);
    else if (per <= 2)
        rt_launch<2>(p, ep, grid, (unsigned)nw, dyn, st);
    else if (per <= 4)
        rt_launch<4>(p, ep, grid, (unsigned)nw, dyn, st);
    else if (per <= 8)
        rt_launch<8>(p, ep, grid, (unsigned)nw, dyn, st);
    else if (per <= 16)
        rt_launch<16>(p, ep, grid, (unsigned)nw, dyn, st);
    else
        rt_launch<32>(p, ep, grid, (unsigned)nw, dyn, st);
    __atomic_fetch_add(&g_launches, 1, __ATOMIC_RELAXED);
    return mm_launch_status(op, why, why_len);
}
