/*
 * matmul_mma_rows.cu: the dense Q8_0 product for FEW rows (1..16; meant for 2..16, the 1-row product stays
 * the dp4a decode form) on the tensor cores, mma.sync m16n8k32 s8 with the WEIGHTS as the A operand (16
 * output features x 32 k, one Q8_0 block an mma) and the 8-bit activation rows as B (n = 8 rows a fragment,
 * 2 fragments for 9..16 rows, 4 for 17..32). Bit for bit the canonical order of matmul_igemm.cu (its top comment):
 *   term of block b: (d_w * x_d) * (float)isum, __fmul_rn / __fadd_rn, no contraction;
 *   chain p_j = 0 + term_j + term_{j+8} + ... (block order), j = 0..7;
 *   y = ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)).
 * The integer sum of a block is exact (mma.sync s32 accumulation of 32 products of int8), so the bits equal
 * igemm_q8_kernel's, igemm_kernel's and the dp4a decode kernel's for every row (test_mma_rows).
 *
 * Why: at 2..8 rows the chunk form (matmul_igemm.cu: one 8-warp block an SM, a 4-stage ring of 16 weight
 * rows behind a block-wide barrier a chunk) reads 4096 x 2048 Q8_0 in ~10 us (~21% of the copy bandwidth)
 * and the 8-row dp4a decode form in ~37 us; the few-row try (matmul_igemm_few.cu: 2-byte loads straight into
 * fragments) sat at DRAM 11%, occupancy 24%. Both keep too few bytes in flight. Little's law on the H200:
 * 4.2 TB/s x 600..800 ns loaded latency = 2.5..3.4 MB in flight over 132 SMs, i.e. 19..25 KB per SM
 * (22 KB at 700 ns). Here:
 *  - a warp owns 16*MT output rows (MT = 1 or 2) and KS-th of each 256-value chunk's blocks (KS = 2, 4 or
 *    8: chains q*8/KS .. (q+1)*8/KS - 1 for warp q of its group), so its bytes of a chunk are one
 *    contiguous span of each weight row (68..136 bytes at KS 4..2, 34 at 8) and its register accumulators
 *    ARE those chains; KS is chosen by the matrix's width (narrow matrices split K over 8 warps so that
 *    >= 132 blocks exist: 2048 outputs -> 128 blocks of 8 warps, 16 outputs each);
 *  - each warp streams its rows through its OWN cp.async ring (S stages, 16-byte coalesced pieces; the
 *    rows' 8-bit chunk bytes for its blocks ride in the same stage), synchronised by cp.async.wait_group and
 *    __syncwarp only: no block-wide barrier until the final reduction, so one warp's stall never holds
 *    another's loads. Bytes of weights in flight per SM (S - 1 stages ahead x 16*MT rows x the span):
 *    KS 2 (S 3, 1 block an SM): 8 x 2 x 32 x 136 = 70 KB; KS 4 (S 4, 1 block): 8 x 3 x 32 x 68 = 52 KB;
 *    KS 8 (S 4, 3 blocks an SM when resident): 24 x 3 x 32 x 34 = 78 KB; all above the ~22 KB asked,
 *    wherever the grid fills the SMs (a narrow matrix's 128 blocks hold 8 x 3 x 16 x 34 = 13 KB an SM,
 *    under it: those matrices are ~2 us of bytes and launch/ramp bound anyway);
 *  - a B fragment (a row tile's 8 rows of a block) serves MT mma, an A fragment NT (the rows' tiles).
 * The warps of a group (same outputs, other chains) meet once, through shared memory: each adds its own
 * chains in the tree's order, then warp 0 of the group adds the KS results in the rest of the tree (the
 * balanced tree of 8 leaves is the balanced tree of its KS balanced subtrees).
 * Only dense Q8_0 products with scratch (the rows quantised once by ig_quantize, matmul_igemm.cu's
 * chunk-major layout: chunk c of row r at xq + (c * xq_rows + r) * IG_ACS, block j at 36 j: f32 d, 32 int8)
 * and <= 32 rows; off unless CLOVER_CUDA_MMA_ROWS=N (rows 1..N take it, N <= 32) or cuda_mma_rows_set(N).
 * STATUS: written 2026-12-04 without a device: unverified, timed by bench/device-runs/2026-12-11-mma24.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_matmul.h"
#include "matmul_internal.cuh"
#include "matmul_mma_rows.cuh"

enum { MR_THREADS = 256, MR_WARPS = 8, MR_CHUNK_BYTES = 8 * MM_Q8_0_BYTES, MR_MAX_ROWS = 32, MR_SMEM_MAX = 220 * 1024 };

/* Bytes a stage gives each row: 16-byte multiples whose word count is 4 mod 8, so the 8 rows (g = 0..7) a
 * fragment load touches fall in distinct banks (ig_pad's rule). */
__host__ __device__ constexpr int mr_pad(int b) { return (b / 4) % 8 == 4 ? b : mr_pad(b + 16); }

template <int KS>
struct mr_geom {
    static constexpr int NBL = 8 / KS; /* blocks of a chunk a warp owns: its chains */
    /* 16-byte pieces a row's span can touch: weights start 2-byte aligned (offset <= 14), rows 4 (<= 12) */
    static constexpr int PW = (14 + MM_Q8_0_BYTES * NBL + 15) / 16, PA = (12 + MM_ACT32_BYTES * NBL + 15) / 16;
    static constexpr int RS = mr_pad(16 * (PW > PA ? PW : PA));
};

template <int MT, int KS, int NT, int S>
__host__ __device__ constexpr int mr_stage_bytes() {
    return (16 * MT + 8 * NT) * mr_geom<KS>::RS;
}

__device__ __forceinline__ int mr_ld32(const uint8_t *p) { return *(const int *)p; }
__device__ __forceinline__ int mr_ld32a2(const uint8_t *p) { /* a 2-byte aligned word (Q8_0 codes) */
    const unsigned short *h = (const unsigned short *)p;
    return (int)(h[0] | ((unsigned)h[1] << 16));
}
__device__ __forceinline__ float mr_f16(const uint8_t *p) { return __half2float(*(const __half *)p); }

__device__ __forceinline__ void mr_mma(int *c, int a0, int a1, int a2, int a3, int b0, int b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* The canonical tree over N (a power of 2) consecutive chains: ((v0 + v1) + (v2 + v3)) + ... */
template <int N>
__device__ __forceinline__ float mr_tree(const float *v) {
    if constexpr (N == 1)
        return v[0];
    else
        return __fadd_rn(mr_tree<N / 2>(v), mr_tree<N / 2>(v + N / 2));
}

/* This warp's blocks of chunk c (0 past the matrix's last block). */
template <int KS>
__device__ __forceinline__ int mr_blocks(int nblocks, int c, int q) {
    constexpr int NBL = mr_geom<KS>::NBL;
    return min(NBL, max(0, min(8, nblocks - 8 * c) - q * NBL));
}

template <int MT, int KS, int NT, int S>
__global__ void __launch_bounds__(MR_THREADS) mr_q8_kernel(ig_params p) {
    using G = mr_geom<KS>;
    constexpr int NBL = G::NBL, RS = G::RS, WR = 16 * MT, SB = mr_stage_bytes<MT, KS, NT, S>();
    extern __shared__ __align__(16) uint8_t sm[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tig = lane & 3;
    const int q = warp % KS, grp = warp / KS;
    const int n0 = (blockIdx.x * (MR_WARPS / KS) + grp) * WR;
    const int m_count = min(p.n_rows, 8 * NT);
    const int nblocks = p.n_in / 32, nchunks = (nblocks + 7) / 8;
    const int wb0 = q * NBL * MM_Q8_0_BYTES, xb0 = q * NBL * MM_ACT32_BYTES;
    uint8_t *ring = sm + (size_t)warp * S * SB;
    const unsigned sring = (unsigned)__cvta_generic_to_shared(ring);

    /* chunk c's bytes of this warp into stage s: its weight rows' span and the rows' 8-bit blocks */
    auto copy = [&](int c, int s) {
        const int nb = mr_blocks<KS>(nblocks, c, q);
        if (nb == 0) return;
        const int wspan = nb * MM_Q8_0_BYTES, xspan = nb * MM_ACT32_BYTES;
        uint8_t *st = ring + s * SB;
        const unsigned sst = sring + s * SB;
        for (int idx = lane; idx < WR * G::PW; idx += 32) {
            const int r = idx / G::PW, pc = idx % G::PW, o = n0 + r;
            if (o >= p.n_out) continue;
            const uint8_t *src = p.w + (size_t)o * p.row_bytes + (size_t)c * MR_CHUNK_BYTES + wb0;
            const uint8_t *pq = (const uint8_t *)((uintptr_t)src & ~(uintptr_t)15) + 16 * pc;
            if (pq >= src + wspan) continue;
            if (pq >= p.w_lo && pq + 16 <= p.w_end) {
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sst + r * RS + 16 * pc), "l"(pq)
                             : "memory");
            } else { /* a piece across the tensor's ends: its bytes inside them, one by one */
                uint8_t *d = st + r * RS + 16 * pc;
                for (int i = 0; i < 16; i++)
                    if (pq + i >= p.w_lo && pq + i < p.w_end) d[i] = pq[i];
            }
        }
        /* the rows' blocks: inside row r's IG_ACS-byte slot of chunk c (16-byte aligned, blocks end at 288) */
        for (int idx = lane; idx < m_count * G::PA; idx += 32) {
            const int r = idx / G::PA, pc = idx % G::PA;
            const uint8_t *src = p.xq + ((size_t)c * p.xq_rows + r) * IG_ACS + xb0;
            const uint8_t *pq = (const uint8_t *)((uintptr_t)src & ~(uintptr_t)15) + 16 * pc;
            if (pq >= src + xspan) continue;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sst + (WR + r) * RS + 16 * pc), "l"(pq)
                         : "memory");
        }
    };

    /* where this lane's rows' spans start inside their stage rows: fixed for every chunk (a chunk is 272
     * bytes, a multiple of 16; xq is 256-byte aligned and IG_ACS a multiple of 16) */
    int wo[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            wo[mt][h] = (int)(((uintptr_t)p.w + (size_t)(n0 + 16 * mt + g + 8 * h) * p.row_bytes + wb0) & 15);
    const int xo = xb0 & 15;

    float acc[MT][NT][NBL][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int j = 0; j < NBL; j++)
#pragma unroll
                for (int k = 0; k < 4; k++) acc[mt][nt][j][k] = 0.0f;

#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (s < nchunks) copy(s, s);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    for (int c = 0; c < nchunks; c++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(S - 2) : "memory");
        __syncwarp(); /* chunk c in this warp's stage, from every lane; every lane is past chunk c - 1 */
        if (c + S - 1 < nchunks) copy(c + S - 1, (c + S - 1) % S);
        asm volatile("cp.async.commit_group;" ::: "memory");
        const int nb = mr_blocks<KS>(nblocks, c, q);
        const uint8_t *st = ring + (c % S) * SB, *xs = st + WR * RS + xo;
#pragma unroll
        for (int bl = 0; bl < NBL; bl++) { /* block 8c + q*NBL + bl: chain q*NBL + bl, this warp's acc[..][bl] */
            if (bl >= nb) break;
            int b0[NT], b1[NT];
            float xd0[NT], xd1[NT];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) { /* B: row 8nt+g's codes; C columns: rows 8nt+2tig, +1 */
                const uint8_t *xr = xs + (8 * nt + g) * RS + MM_ACT32_BYTES * bl;
                b0[nt] = mr_ld32(xr + 4 + 4 * tig);
                b1[nt] = mr_ld32(xr + 20 + 4 * tig);
                xd0[nt] = *(const float *)(xs + (8 * nt + 2 * tig) * RS + MM_ACT32_BYTES * bl);
                xd1[nt] = *(const float *)(xs + (8 * nt + 2 * tig + 1) * RS + MM_ACT32_BYTES * bl);
            }
#pragma unroll
            for (int mt = 0; mt < MT; mt++) { /* A: outputs 16mt+g (a0, a2) and 16mt+g+8 (a1, a3) */
                const uint8_t *w0 = st + (16 * mt + g) * RS + wo[mt][0] + MM_Q8_0_BYTES * bl;
                const uint8_t *w1 = st + (16 * mt + g + 8) * RS + wo[mt][1] + MM_Q8_0_BYTES * bl;
                const int a0 = mr_ld32a2(w0 + 2 + 4 * tig), a1 = mr_ld32a2(w1 + 2 + 4 * tig);
                const int a2 = mr_ld32a2(w0 + 18 + 4 * tig), a3 = mr_ld32a2(w1 + 18 + 4 * tig);
                const float dw0 = mr_f16(w0), dw1 = mr_f16(w1);
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    int cc[4] = {0, 0, 0, 0};
                    mr_mma(cc, a0, a1, a2, a3, b0[nt], b1[nt]);
                    float *a = acc[mt][nt][bl];
                    a[0] = __fadd_rn(a[0], __fmul_rn(__fmul_rn(dw0, xd0[nt]), (float)cc[0]));
                    a[1] = __fadd_rn(a[1], __fmul_rn(__fmul_rn(dw0, xd1[nt]), (float)cc[1]));
                    a[2] = __fadd_rn(a[2], __fmul_rn(__fmul_rn(dw1, xd0[nt]), (float)cc[2]));
                    a[3] = __fadd_rn(a[3], __fmul_rn(__fmul_rn(dw1, xd1[nt]), (float)cc[3]));
                }
            }
        }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads(); /* every warp's ring is free: the group's chains meet there */
    float *red = (float *)sm; /* [warp][MT][NT][4][32 lanes] */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int k = 0; k < 4; k++) {
                float v[NBL];
#pragma unroll
                for (int j = 0; j < NBL; j++) v[j] = acc[mt][nt][j][k];
                red[(((warp * MT + mt) * NT + nt) * 4 + k) * 32 + lane] = mr_tree<NBL>(v);
            }
    __syncthreads();
    if (q != 0) return;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int k = 0; k < 4; k++) {
                float v[KS];
#pragma unroll
                for (int j = 0; j < KS; j++) v[j] = red[((((grp * KS + j) * MT + mt) * NT + nt) * 4 + k) * 32 + lane];
                const int o = n0 + 16 * mt + g + (k >= 2 ? 8 : 0), r = 8 * nt + 2 * tig + (k & 1);
                if (o < p.n_out && r < m_count) p.y[(size_t)r * p.n_out + o] = mr_tree<KS>(v);
            }
}

template <int MT, int KS, int NT, int S>
static void mr_launch_t(const ig_params *p, cudaStream_t st) {
    constexpr size_t smem = (size_t)MR_WARPS * S * mr_stage_bytes<MT, KS, NT, S>();
    static_assert(smem <= MR_SMEM_MAX, "mr_q8_kernel: the rings exceed shared memory");
    static_assert((size_t)MR_WARPS * MT * NT * 4 * 32 * sizeof(float) <= smem, "mr_q8_kernel: the reduction");
    static int attr_set = 0;
    if (!attr_set) {
        cudaFuncSetAttribute(mr_q8_kernel<MT, KS, NT, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, MR_SMEM_MAX);
        attr_set = 1;
    }
    const int opb = 16 * MT * (MR_WARPS / KS); /* outputs a block */
    const unsigned grid = (unsigned)((p->n_out + opb - 1) / opb);
    mr_q8_kernel<MT, KS, NT, S><<<grid, MR_THREADS, smem, st>>>(*p);
}

/* CLOVER_CUDA_MMA_ROWS_KS=2, 4 or 8 (read once): every product with that K split and 32 outputs a warp
 * (device A/B runs of the layout; the bits are the same for any split); unset or another value: by shape. */
static int mr_forced_ks(void) {
    static int ks = -1;
    if (ks < 0) {
        const char *e = getenv("CLOVER_CUDA_MMA_ROWS_KS");
        const int v = e ? atoi(e) : 0;
        ks = v == 2 || v == 4 || v == 8 ? v : 0;
    }
    return ks;
}

template <int NT>
static void mr_launch_n(const ig_params *p, cudaStream_t st) {
    /* K split by the matrix's width: as few warps a group as still give >= ~2 blocks an SM (132 SMs);
     * groups of 32 outputs (MT 2) unless even 8 warps a group leave fewer than 132 blocks */
    const int g32 = (p->n_out + 31) / 32, fks = mr_forced_ks();
    if (fks == 2)
        mr_launch_t<2, 2, NT, 3>(p, st);
    else if (fks == 4)
        mr_launch_t<2, 4, NT, 4>(p, st);
    else if (fks == 8)
        mr_launch_t<2, 8, NT, 4>(p, st);
    else if (g32 >= 1056)
        mr_launch_t<2, 2, NT, 3>(p, st); /* the output head: 4 groups a block */
    else if (g32 >= 528)
        mr_launch_t<2, 4, NT, 4>(p, st);
    else if (g32 >= 132)
        mr_launch_t<2, 8, NT, 4>(p, st); /* qkv 8192 x 2048: 256 blocks */
    else
        mr_launch_t<1, 8, NT, 4>(p, st); /* 2048 outputs: 128 blocks */
}

/* 17..32 rows: 4 row tiles (a 17..24-row call computes a 4th tile of stale shared bytes whose columns are never
 * stored: a column of an mma depends only on its own B column). The output head's 2-warp groups drop to 16
 * outputs a warp there (MT 1): MT 2 x NT 4 x 4 chains would be 128 accumulators a thread, and its rings would
 * exceed shared memory; 8 warps x 2 stages ahead x 16 rows x 136 bytes = 35 KB of weights in flight an SM. */
static void mr_launch_32(const ig_params *p, cudaStream_t st) {
    const int g32 = (p->n_out + 31) / 32, fks = mr_forced_ks();
    if (fks == 2 || (!fks && g32 >= 1056))
        mr_launch_t<1, 2, 4, 3>(p, st);
    else if (fks == 4 || (!fks && g32 >= 528))
        mr_launch_t<2, 4, 4, 3>(p, st);
    else if (fks == 8 || g32 >= 132)
        mr_launch_t<2, 8, 4, 4>(p, st);
    else
        mr_launch_t<1, 8, 4, 4>(p, st);
}

void mr_launch(const ig_params *p, cudaStream_t st) {
    if (p->n_rows <= 8)
        mr_launch_n<1>(p, st);
    else if (p->n_rows <= 16)
        mr_launch_n<2>(p, st);
    else
        mr_launch_32(p, st);
}

/* The switch: CLOVER_CUDA_MMA_ROWS=N (0..32, read once; unset or 0: off); cuda_mma_rows_set overrides,
 * a negative value goes back to the environment. */
static int g_mr = -1;
static int mr_cap(void) {
    int v = __atomic_load_n(&g_mr, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("CLOVER_CUDA_MMA_ROWS");
        v = e ? atoi(e) : 0;
        v = v < 0 ? 0 : v > MR_MAX_ROWS ? MR_MAX_ROWS : v;
        __atomic_store_n(&g_mr, v, __ATOMIC_RELAXED);
    }
    return v;
}
extern "C" void cuda_mma_rows_set(int v) {
    __atomic_store_n(&g_mr, v < 0 ? -1 : v > MR_MAX_ROWS ? MR_MAX_ROWS : v, __ATOMIC_RELAXED);
}
extern "C" int cuda_mma_rows_takes(uint32_t type, size_t n_rows) { return mr_take(type, n_rows); }

int mr_take(uint32_t type, size_t n_rows) {
    const int cap = mr_cap();
    return type == MM_Q8_0 && cap > 0 && n_rows >= 1 && n_rows <= (size_t)cap;
}
