/*
 * matmul_igemm_wide.cu: the integer chunk product for MANY rows (64+: prompts)
 * of Q8_0, Q4_K and Q5_K weights, dense, rows pre-quantised in scratch
 * (ig_quantize's chunk-major layout). Q6_K and the grouped experts keep
 * matmul_igemm.cu's kernels (a 512-row prompt routes ~16 rows to an expert).
 * ON by default since its H200 run (bench/device-runs/2026-12-07-verify:
 * 39/39 cases bit for bit against matmul_igemm.cu, memcheck/racecheck clean;
 * q8_0 qkv at 512 rows 195.6 -> 158.5 us, q4_K 245.8 -> 121.7 us, prompt 512
 * 5,068 -> 5,156 tok/s); CLOVER_CUDA_IGEMM_WIDE=0 (or cuda_igemm_wide_set(0))
 * is the way back to the old kernels.
 *
 * Bits: the canonical order of matmul_igemm.cu's top comment, unchanged. For
 * every output, term_b = (d_w * x_d) * (float)isum (IEEE, no contraction),
 * partial p_j = 0 + term_j + term_{j+8} + ... in block order, then
 * ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)). Here warp w owns partial
 * p_w, i.e. block w of every 256-value chunk, for the WHOLE tile, visiting the
 * chunks in order (as igemm_q8_kernel does for its 16 x 32 tile); the eight
 * partials meet in shared memory at the end in that tree. Only which thread
 * holds which (output, row) changes, never an operation or its order.
 * (float)isum is formed without a conversion instruction (I2F runs at 16 a clock
 * an SM on sm_90, the bottleneck of a naive form): the mma's accumulator input
 * is 0x4B400000 (1.5 * 2^23 as a float's bits), so its output's bits are
 * those of the float 12582912 + isum (|isum| <= 32 * 128 * 127 < 2^22: exact),
 * and subtracting 12582912.0f gives isum exactly: the same float as the cast.
 *
 * Tile: a block of 8 warps computes 64 outputs x 64 rows. The tile's state is
 * 8 partials per output (64 x 64 x 8 floats = 128 KiB): that, not shared
 * memory, bounds the tile (128 accumulator registers a thread at 256
 * threads; one block an SM). Warp w: 4 m-tiles (64 outputs) x 8 n-tiles (64
 * rows) of m16n8k32 for block w of each chunk: each A fragment (a weight
 * block, 2-byte aligned, with its f16 scale) is decoded once for 8 mma, each
 * B fragment (a row's block, 4-byte aligned, with its f32 scale) once for 4.
 * The weight rows' and the rows' chunks stream through a 4-stage cp.async
 * ring (38 KiB a stage: 64 x 304 bytes of weights + 64 x 304 of rows).
 * ldmatrix does not fit: it needs each 16-byte fragment row 16-byte aligned,
 * and a Q8_0 block's 32 values start 2 bytes into its 34 (the weights), a
 * row block's 4 bytes into its 36 (the 8-bit rows): 4-byte (rows) and
 * 2-byte (weights) loads instead, each fragment loaded once for 4-8 mma.
 *
 * Expected (H200, 132 SMs, ~1.75 GHz under load; qkv 8192 x 2048 at 512 rows,
 * 8.6 G MAC): per mma (4096 MAC) a warp issues ~19 instructions (the mma, 16
 * float operations for the 4 terms, ~2 fragment loads amortised): issue-bound
 * at ~5 clocks a mma an SM = ~820 MAC/clock/SM = ~190 T MAC/s (~380 TOPS
 * int8, against ~990 dense for mma.sync's tensor peak): ~45 us. L2 -> SM
 * bytes: the weights once per 64 rows (8 x 17.8 MB) and the 8-bit rows once
 * per 64 outputs (128 x 1.25 MB): 302 MB, ~45-55 us at 5.5-7 TB/s. Predicted
 * 55-75 us for that product (today's igemm_q8_kernel: 194 us), i.e. ~240-330
 * GB/s of weights; the tile is compute/L2-bound, not DRAM-bound (17.8 MB).
 * The ceiling of any Q8_0 tile under the canonical order is this float work,
 * 4-5 operations an output a 32-value block (128 float lanes an SM: ~820
 * MAC/clock/SM), not the tensor cores: wgmma would not raise it.
 * The old kernel reads the weights 16x and the rows 512x (16-output tiles):
 * ~930 MB of L2 traffic and ~95 instructions an mma.
 * Q4_K/Q5_K (igw_k_kernel below, 128 outputs x 64 rows): ~18 instructions an
 * mma (the mma, 8 integer multiply-adds of the sub-block scales and mins,
 * fragment loads and nibble decoding amortised over 2-4 mma; the float terms
 * once per super-block), issue-bound like Q8_0: 8192 x 2048 at 512 rows
 * ~45-60 us; L2 -> SM bytes 75 MB of weights + 80 MB of rows (~25 us).
 */
#include <stdlib.h>
#include <string.h>

#include "matmul_internal.cuh"
#include "matmul_igemm.cuh"
#include "matmul_igemm_wide.cuh"
#include "cuda_pdl.cuh"
#include "cuda_switch.h"

enum {
    IW_CHUNK = 256,  /* values a chunk (matmul_igemm.cu's IG_CHUNK) */
    IW_BO = 64,      /* outputs a block */
    IW_BR = 64,      /* rows a block */
    IW_THREADS = 256, /* igw_q8_kernel's */
    IW_STAGES = 4,
    IW_SBP = 304,    /* shared bytes a weight row's chunk (272 + up to 15 of misalignment; 76 words = 4 mod 8) */
    IW_CB = 8 * MM_Q8_0_BYTES, /* 272: a 256-value chunk of a Q8_0 row (a multiple of 16) */
    IW_PPR = IW_CB / 16 + 1,   /* 16-byte pieces that cover a row's chunk at any 2-byte alignment */
    IW_PA = IG_ACS / 16,       /* pieces of a row's 8-bit chunk */
    IW_STS = IW_BO * IW_SBP + IW_BR * IG_ACS, /* 38912 bytes a stage */
    IW_SMEM = IW_STAGES * IW_STS,             /* 155648 */
};
static_assert(IW_SBP >= IW_CB + 16 && IW_SBP % 16 == 0 && (IW_SBP / 4) % 8 == 4, "igw: weight row stride");
static_assert((int)IGW_MOE_TILE == (int)IW_BR, "igw: a grouped tile is a block's rows");
static_assert(IG_ACS % 16 == 0 && (IG_ACS / 4) % 8 == 4, "igw: row stride");
static_assert(8 * IW_BO * IW_BR * sizeof(float) <= (size_t)IW_SMEM, "igw: the partials overlay the stages");

#define IW_MAGIC 0x4B400000 /* 12582912.0f */

__device__ __forceinline__ int iw_ld32(const uint8_t *p) { return *(const int *)p; }
__device__ __forceinline__ int iw_ld32a2(const uint8_t *p) {
    const unsigned short *h = (const unsigned short *)p;
    return (int)(h[0] | ((unsigned)h[1] << 16));
}

/* d = a * b + (MAGIC, MAGIC, MAGIC, MAGIC): the integer sums biased into a float's bits */
__device__ __forceinline__ void iw_mma(int *d, const int *a, int b0, int b1, int c) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%10,%10,%10};"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(c));
}

/* Chunk c of the block's weight rows and rows into stage st (weights: row r at r * IW_SBP + (its address & 15),
 * the 16-byte pieces that cover it, as ig_copy_chunk places them; rows: the chunk's m_count rows are contiguous
 * in the chunk-major scratch, copied as they lie, row i at IW_BO * IW_SBP + i * IG_ACS). */
template <int NT>
__device__ __forceinline__ void iw_copy(const ig_params &p, int n0, int m0, int m_count, int c, uint8_t *st) {
    const unsigned sd = (unsigned)__cvta_generic_to_shared(st);
    const uint8_t *xa = p.xq + ((size_t)c * p.xq_rows + m0) * IG_ACS;
    for (int idx = threadIdx.x; idx < m_count * IW_PA; idx += NT)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sd + IW_BO * IW_SBP + 16 * idx),
                     "l"(xa + 16 * idx)
                     : "memory");
    const int cb = min(8, p.n_in / 32 - 8 * c) * MM_Q8_0_BYTES;
    for (int idx = threadIdx.x; idx < IW_BO * IW_PPR; idx += NT) {
        const int r = idx / IW_PPR, pc = idx - r * IW_PPR, o = n0 + r;
        if (o >= p.n_out) continue;
        const uint8_t *src = p.w + (size_t)o * p.row_bytes + (size_t)c * IW_CB;
        const uint8_t *q = (const uint8_t *)((uintptr_t)src & ~(uintptr_t)15) + 16 * pc;
        if (q >= src + cb) continue;
        if (q >= p.w_lo && q + 16 <= p.w_end) {
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sd + r * IW_SBP + 16 * pc), "l"(q)
                         : "memory");
        } else { /* the tensor's first or last bytes: byte by byte, inside it */
            uint8_t *d = st + r * IW_SBP + 16 * pc;
            for (int i = 0; i < 16; i++)
                if (q + i >= p.w_lo && q + i < p.w_end) d[i] = q[i];
        }
    }
}

/* grid (row tiles of 64, output tiles of 64); dense only (p.perm == NULL), p.xq set */
__global__ void __launch_bounds__(IW_THREADS, 1) igw_q8_kernel(ig_params p) {
    extern __shared__ __align__(16) uint8_t sm[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tig = lane & 3;
    const int m0 = blockIdx.x * IW_BR, n0 = blockIdx.y * IW_BO, m_count = min(IW_BR, p.n_rows - m0);
    const int nchunks = (p.n_in + IW_CHUNK - 1) / IW_CHUNK, nblk = p.n_in / 32;
    pdl_wait(); /* the rows are the kernel before's output (cuda_pdl.cuh) */
    pdl_trigger();
#pragma unroll
    for (int s = 0; s < IW_STAGES - 1; s++) {
        if (s < nchunks) iw_copy<IW_THREADS>(p, n0, m0, m_count, s, sm + s * IW_STS);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    /* this thread's weight rows 16 mt + g (+ 8): their bytes' offset in a stage row (a chunk is 272 bytes,
     * a multiple of 16, so a row's misalignment is the same in every chunk) */
    int woff[4][2];
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = 16 * mt + g + 8 * h;
            woff[mt][h] = r * IW_SBP + (int)(((uintptr_t)p.w + (size_t)(n0 + r) * p.row_bytes) & 15) +
                          warp * MM_Q8_0_BYTES;
        }
    float acc[4][8][4];
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[mt][nt][q] = 0.0f;
    const int magic = IW_MAGIC;
    for (int c = 0; c < nchunks; c++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(IW_STAGES - 2) : "memory");
        __syncthreads(); /* chunk c everywhere; every warp is past chunk c-1 */
        if (c + IW_STAGES - 1 < nchunks)
            iw_copy<IW_THREADS>(p, n0, m0, m_count, c + IW_STAGES - 1, sm + ((c + IW_STAGES - 1) % IW_STAGES) * IW_STS);
        asm volatile("cp.async.commit_group;" ::: "memory");
        if (warp >= nblk - 8 * c) continue; /* past the last block (n_in % 256 != 0) */
        const uint8_t *stg = sm + (c % IW_STAGES) * IW_STS, *xs = stg + IW_BO * IW_SBP + warp * MM_ACT32_BYTES;
        int a[4][4];
        float dw[4][2];
#pragma unroll
        for (int mt = 0; mt < 4; mt++) {
            const uint8_t *b0 = stg + woff[mt][0], *b1 = stg + woff[mt][1];
            a[mt][0] = iw_ld32a2(b0 + 2 + 4 * tig), a[mt][1] = iw_ld32a2(b1 + 2 + 4 * tig);
            a[mt][2] = iw_ld32a2(b0 + 18 + 4 * tig), a[mt][3] = iw_ld32a2(b1 + 18 + 4 * tig);
            dw[mt][0] = __half2float(*(const __half *)b0), dw[mt][1] = __half2float(*(const __half *)b1);
        }
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            if (8 * nt >= m_count) break; /* warp-uniform: row tiles past the block's rows */
            const uint8_t *xb = xs + (8 * nt + g) * IG_ACS, *xc = xs + (8 * nt + 2 * tig) * IG_ACS;
            const int b0 = iw_ld32(xb + 4 + 4 * tig), b1 = iw_ld32(xb + 20 + 4 * tig);
            const float xd0 = *(const float *)xc, xd1 = *(const float *)(xc + IG_ACS);
#pragma unroll
            for (int mt = 0; mt < 4; mt++) {
                int d[4];
                iw_mma(d, a[mt], b0, b1, magic);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const float s = __fmul_rn(dw[mt][q >> 1], q & 1 ? xd1 : xd0);
                    const float f = __fsub_rn(__int_as_float(d[q]), 12582912.0f); /* = (float)isum, exactly */
                    acc[mt][nt][q] = __fadd_rn(acc[mt][nt][q], __fmul_rn(s, f));
                }
            }
        }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads(); /* the stages are free: the 8 partials meet there, red[warp][(mt, nt, q)][lane] */
    float *red = (float *)sm;
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int q = 0; q < 4; q++) red[(warp * 128 + (mt * 8 + nt) * 4 + q) * 32 + lane] = acc[mt][nt][q];
    __syncthreads();
    for (int k = tid; k < IW_BO * IW_BR; k += IW_THREADS) {
        const int l = k & 31, q = (k >> 5) & 3, nt = (k >> 7) & 7, mt = k >> 10;
        const int o = n0 + 16 * mt + (l >> 2) + 8 * (q >> 1), r = 8 * nt + 2 * (l & 3) + (q & 1);
        if (o >= p.n_out || r >= m_count) continue;
        float pp[8];
#pragma unroll
        for (int j = 0; j < 8; j++) pp[j] = red[j * IW_BO * IW_BR + k];
        p.y[(size_t)(m0 + r) * p.n_out + o] = __fadd_rn(__fadd_rn(__fadd_rn(pp[0], pp[1]), __fadd_rn(pp[2], pp[3])),
                                                        __fadd_rn(__fadd_rn(pp[4], pp[5]), __fadd_rn(pp[6], pp[7])));
    }
}

/* ---- Q4_K / Q5_K: 128 outputs x 64 rows a block ----
 * The canonical order for the K-quants: term_c = x_d * (d * (float)sum_q - dmin * (float)sum_m) per super-block
 * c (sum_q = sum_j sc_j isum_j, sum_m = sum_j m_j xs_j: integers, exact in any order), P = 2 partials (the even
 * and the odd super-blocks, each in order), then p0 + p1: igemm_kernel's arithmetic, expression for expression.
 * Two partials per output let the tile grow: 8 warps as 4 (32 outputs each) x 2 (32 rows each), a warp 2 m-tiles
 * x 4 n-tiles, sub-block j outermost so that the 64 integer sums of a super-block stay in registers beside the
 * 64 float partials; each thread holds both partials of its outputs, so they meet in registers (no shared
 * reduction). A weight fragment is decoded once for 4 mma, a row fragment once for 2.
 * The integer sums are formed as the few-row kernels' ig_k_superblock2 forms them (the same integers, so the same
 * bits): each sub-block's scale byte cut by one byte_perm from words unpacked once a chunk, the mins' sum_m by two
 * IMMA a tile once a chunk (ig_k_mins_mma) where it was a multiply-add an output a sub-block beside four 16-bit
 * loads and two adds of the rows' sub-block sums (opmix34: ~12 of the tiles' ~51 instructions an IMMA). H100,
 * bench/device-runs/2027-01-17-k2w39 (three rounds, old / new): the stacked 16-sequence diffusion pass 302.0 ->
 * 311.9 agg tok/s (+3.3%; its gate / up launches 95.1 -> 83.0 us, down 97.4 -> 88.0), prompt 512 8,866 -> 8,991
 * tok/s (+1.4%).
 * Q4_K/Q5_K rows are 16-byte aligned (mm_align; 144/176-byte super-blocks), so a row's chunk is whole pieces. */
/* BR rows (slots) a tile: 64, or 32 (grouped tiles only, CLOVER_CUDA_IGW_T32: a 512-row pass's ~16 slots an
 * expert) with 3 ring stages (84-97 KiB) so that two blocks share an SM. */
template <int T, int BR = IW_BR>
struct iwk {
    static constexpr int CB = T == MM_Q4_K ? MM_Q4_K_BYTES : MM_Q5_K_BYTES; /* a super-block: the chunk */
    static constexpr int ST = BR == 32 ? 3 : IW_STAGES;
    static constexpr int BO = 128, SBP = CB, STS = BO * SBP + BR * IG_ACS, SMEM = ST * STS;
    static_assert(CB % 16 == 0 && (SBP / 4) % 8 == 4, "iwk: 16-byte pieces, conflict-free fragment rows");
    static_assert(BR == 32 || BR == 64, "iwk: 32 or 64 rows a tile");
};

template <int T, int NT>
__device__ __forceinline__ void iwk_copy(const ig_params &p, const uint8_t *wbase, const int *xrow, int n0,
                                         int m_count, int c, uint8_t *st) {
    constexpr int CB = iwk<T>::CB, BO = iwk<T>::BO, PPR = CB / 16;
    const unsigned sd = (unsigned)__cvta_generic_to_shared(st);
    const uint8_t *xa = p.xq + (size_t)c * p.xq_rows * IG_ACS;
    for (int idx = threadIdx.x; idx < m_count * IW_PA; idx += NT) { /* row i's chunk: IW_PA pieces */
        const int i = idx / IW_PA, pc = idx - i * IW_PA;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sd + BO * CB + 16 * idx),
                     "l"(xa + (size_t)xrow[i] * IG_ACS + 16 * pc)
                     : "memory");
    }
    for (int idx = threadIdx.x; idx < BO * PPR; idx += NT) {
        const int r = idx / PPR, pc = idx - r * PPR, o = n0 + r;
        if (o >= p.n_out) continue;
        const uint8_t *q = wbase + (size_t)o * p.row_bytes + (size_t)c * CB + 16 * pc;
        if (q >= p.w_lo && q + 16 <= p.w_end)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sd + r * CB + 16 * pc), "l"(q) : "memory");
    }
}

/* W warps over a tile of BR rows: 8 warps and 64 rows as 4 over the outputs x 2 over the rows (MT = 2 m-tiles a
 * warp); 16 warps and 64 rows (CLOVER_CUDA_IGW_W16) as 8 x 2 (MT = 1); 8 warps and 32 rows (CLOVER_CUDA_IGW_T32)
 * as 8 x 1 (MT = 1), two blocks an SM. The same fragments, sums and float terms per output in the same order in
 * every form, only more warps for the same tile (206 registers at 8 warps and 64 rows: one block, 2 warps a
 * scheduler; half the partials a thread in the others). */
template <int T, int W, int BR = IW_BR>
__global__ void __launch_bounds__(32 * W, BR == 32 ? 2 : 1) igw_k_kernel(ig_params p) {
    constexpr int CB = iwk<T, BR>::CB, BO = iwk<T, BR>::BO, STS = iwk<T, BR>::STS, ST = iwk<T, BR>::ST;
    constexpr int qo = T == MM_Q4_K ? 16 : 48;
    static_assert((W == 8 || W == 16) && (BR == 64 || W == 8), "igw_k: 8 or 16 warps; 8 at 32 rows");
    /* threads; warps over the rows and over the outputs; m-tiles a warp */
    constexpr int NT = 32 * W, WN = BR / 32, WM = W / WN, MT = 8 / WM;
    extern __shared__ __align__(16) uint8_t sm[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tig = lane & 3;
    const int wm = warp & (WM - 1), wn = warp >> (WM == 8 ? 3 : 2); /* the warp's 16 MT outputs and 32 rows */
    /* the block's rows: dense (p.perm NULL) rows m0.. of x and y; grouped, tile blockIdx.x of the grouping pass
     * (matmul_gemm.cu): up to BR slots s of one expert, 8-bit row x_per_slot ? s : s / k, output row s */
    __shared__ int xrow[BR], yrow[BR];
    const int n0 = blockIdx.y * BO;
    const uint8_t *wbase = p.w;
    int m_count;
    pdl_wait(); /* the tiles and the rows are earlier kernels' outputs (cuda_pdl.cuh) */
    pdl_trigger();
    if (p.perm == NULL) {
        const int m0 = blockIdx.x * BR;
        m_count = min(BR, p.n_rows - m0);
        for (int i = tid; i < BR; i += NT) xrow[i] = yrow[i] = m0 + i;
    } else {
        if ((int)blockIdx.x >= *p.ntiles) return; /* the whole block: past the pass's tiles */
        const int32_t *t = p.tiles + 3 * blockIdx.x;
        wbase = p.w + (size_t)t[0] * p.expert_stride;
        m_count = t[2];
        for (int i = tid; i < BR; i += NT) {
            const int s = i < m_count ? p.perm[t[1] + i] : 0;
            yrow[i] = s;
            xrow[i] = p.x_per_slot ? s : s / p.k;
        }
    }
    __syncthreads(); /* xrow, yrow */
    const int nchunks = p.n_in / IW_CHUNK;
    /* live n-tiles of this warp (warp-uniform) */
    const int ntl = max(0, min(4, (m_count - 32 * wn + 7) / 8));
#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
        if (s < nchunks) iwk_copy<T, NT>(p, wbase, xrow, n0, m_count, s, sm + s * STS);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    float cur[MT][4][4], oth[MT][4][4]; /* the partial of this chunk's parity, and the other */
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int q = 0; q < 4; q++) cur[mt][nt][q] = oth[mt][nt][q] = 0.0f;
    for (int c = 0; c < nchunks; c++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(ST - 2) : "memory");
        __syncthreads(); /* chunk c everywhere; every warp is past chunk c-1 */
        if (c + ST - 1 < nchunks)
            iwk_copy<T, NT>(p, wbase, xrow, n0, m_count, c + ST - 1, sm + ((c + ST - 1) % ST) * STS);
        asm volatile("cp.async.commit_group;" ::: "memory");
        /* a warp whose rows are all past the tile's (a grouped tile of <= 32 slots: the 16 slots an expert of a
         * stacked 512-row pass) decodes nothing: it would decode every weight fragment for no mma, and the
         * scheduler slots are the kernel's bound. It writes no output (its rows are not the tile's). */
        if (ntl == 0) continue;
        const uint8_t *stg = sm + (c % ST) * STS, *ab = stg + BO * CB + (32 * wn) * IG_ACS;
        const uint8_t *wr[MT][2]; /* rows 16 (MT wm + mt) + g (+ 8) */
        int sq[MT][4][4], smn[MT][4][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int q = 0; q < 4; q++) sq[mt][nt][q] = smn[mt][nt][q] = 0;
        /* the integers as ig_k_superblock2 forms them: scale bytes by byte_perm, the mins by two IMMA a tile */
        unsigned scw[MT][2][2];
        int ma[MT][2], ha[MT][2], hb[MT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                wr[mt][h] = stg + (16 * (MT * wm + mt) + g + 8 * h) * CB;
                const unsigned s0 = iw_ld32(wr[mt][h] + 4), s1 = iw_ld32(wr[mt][h] + 8),
                               s2 = iw_ld32(wr[mt][h] + 12);
                unsigned mn[2];
                ig_k_scale_min4(s0, s1, s2, scw[mt][h], mn); /* byte j & 3 of word j >> 2: sub-block j's */
                ma[mt][h] = ig_k_mins_a(mn, tig);
                ha[mt][h] = hb[mt][h] = 0;
                if (T == MM_Q5_K)
                    ha[mt][h] = iw_ld32(wr[mt][h] + 16 + 4 * tig), hb[mt][h] = iw_ld32(wr[mt][h] + 32 + 4 * tig);
            }
#pragma unroll
        for (int cq = 0; cq < 4; cq++) { /* the 32-byte run of sub-blocks 2 cq (low nibbles) and 2 cq + 1 */
            int qa[MT][2], qb[MT][2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    qa[mt][h] = iw_ld32(wr[mt][h] + qo + 32 * cq + 4 * tig),
                    qb[mt][h] = iw_ld32(wr[mt][h] + qo + 32 * cq + 16 + 4 * tig);
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                const int j = 2 * cq + hh;
                int a[MT][4], sc[MT][2];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    mm_k4_frag<T>(j, qa[mt][0], qa[mt][1], qb[mt][0], qb[mt][1], ha[mt][0], hb[mt][0], ha[mt][1],
                                  hb[mt][1], a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
                    sc[mt][0] = (int)__byte_perm(scw[mt][0][j >> 2], 0u, 0x4440u | (j & 3));
                    sc[mt][1] = (int)__byte_perm(scw[mt][1][j >> 2], 0u, 0x4440u | (j & 3));
                }
                /* Each mma's four multiply-adds wait on it (ncu: the top stall `wait`); issuing two n-tiles' mma
                 * before their multiply-adds was measured and gained nothing (p2w40, H100: the stacked pass 314.5
                 * -> 309.6 agg tok/s, prompt 512 8,983 -> 8,967 tok/s, gate / up 83.0 -> 84.9 us): removed. */
#pragma unroll
                for (int nt = 0; nt < 4; nt++) {
                    if (nt >= ntl) break;
                    const uint8_t *xb = ab + (8 * nt + g) * IG_ACS;
                    const int b0 = iw_ld32(xb + 4 + 32 * j + 4 * tig), b1 = iw_ld32(xb + 20 + 32 * j + 4 * tig);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        int d[4];
                        iw_mma(d, a[mt], b0, b1, 0);
                        sq[mt][nt][0] += sc[mt][0] * d[0], sq[mt][nt][1] += sc[mt][0] * d[1];
                        sq[mt][nt][2] += sc[mt][1] * d[2], sq[mt][nt][3] += sc[mt][1] * d[3];
                    }
                }
            }
        }
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            if (nt >= ntl) break;
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                ig_k_mins_mma(ma[mt][0], ma[mt][1], ab + (8 * nt + g) * IG_ACS, tig, smn[mt][nt]);
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            const float d0 = __half2float(*(const __half *)wr[mt][0]), dm0 = __half2float(*(const __half *)(wr[mt][0] + 2));
            const float d1 = __half2float(*(const __half *)wr[mt][1]), dm1 = __half2float(*(const __half *)(wr[mt][1] + 2));
#pragma unroll
            for (int nt = 0; nt < 4; nt++) {
                if (nt >= ntl) break;
                const uint8_t *xc = ab + (8 * nt + 2 * tig) * IG_ACS;
                const float xd0 = *(const float *)xc, xd1 = *(const float *)(xc + IG_ACS);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const float d = q < 2 ? d0 : d1, dm = q < 2 ? dm0 : dm1, xd = q & 1 ? xd1 : xd0;
                    const float t = __fmul_rn(xd, __fsub_rn(__fmul_rn(d, (float)sq[mt][nt][q]),
                                                            __fmul_rn(dm, (float)smn[mt][nt][q])));
                    cur[mt][nt][q] = __fadd_rn(cur[mt][nt][q], t);
                }
            }
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++) /* the next chunk adds to the other partial */
#pragma unroll
            for (int nt = 0; nt < 4; nt++)
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const float t = cur[mt][nt][q];
                    cur[mt][nt][q] = oth[mt][nt][q], oth[mt][nt][q] = t;
                }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    /* after the loop cur holds p_{nchunks mod 2}: p0 = cur when nchunks is even */
    const bool even = (nchunks & 1) == 0;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int o = n0 + 16 * (MT * wm + mt) + g + 8 * (q >> 1), r = 32 * wn + 8 * nt + 2 * tig + (q & 1);
                const float p0 = even ? cur[mt][nt][q] : oth[mt][nt][q], p1 = even ? oth[mt][nt][q] : cur[mt][nt][q];
                if (o < p.n_out && r < m_count) p.y[(size_t)yrow[r] * p.n_out + o] = __fadd_rn(p0, p1);
            }
}

/* grid (row tiles of BR, or the grouping pass's n_tiles tiles; output tiles of 128) */
template <int T, int W, int BR = IW_BR>
static int igw_launch_k(const ig_params *p, unsigned n_tiles, cudaStream_t st) {
    constexpr int BO = iwk<T, BR>::BO, SMEM = iwk<T, BR>::SMEM;
    /* rows (and experts) 16-byte aligned (cuda_matmul's contract): a row's chunk is whole pieces */
    if (((uintptr_t)p->w | p->row_bytes | (p->perm ? p->expert_stride : 0)) & 15) return 0;
    const unsigned rt = p->perm ? n_tiles : (unsigned)((p->n_rows + BR - 1) / BR);
    const unsigned ot = (unsigned)((p->n_out + BO - 1) / BO);
    if (ot > 65535 || rt == 0) return 0;
    static int attr_set = 0;
    if (!attr_set) {
        if (cudaFuncSetAttribute(igw_k_kernel<T, W, BR>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM) !=
            cudaSuccess) {
            (void)cudaGetLastError();
            return 0;
        }
        attr_set = 1;
    }
    pdl_launch_rows(igw_k_kernel<T, W, BR>, dim3(rt, ot), dim3(32 * W), SMEM, st, *p);
    return 1;
}

/* The K-quant kernel's 16-warp form (64-row tiles): on unless CLOVER_CUDA_IGW_W16=0 (cuda_igw_w16_set); the same
 * bits. H100, bench/device-runs/2027-01-14-w16x36 (seq2, one machine, two rounds): prompt 512 7,491 -> 8,065 and
 * 7,501 -> 8,053 tok/s. A 16-warp form of igw_q8_kernel (two warps a partial) was measured beside it and removed:
 * 20% more instructions (its weight fragments decoded by two warps; ncu 196 -> 128 registers, 12.5 -> 24.9%
 * occupancy, 191.5 -> 183.7 us) for nothing measurable end to end (prompt 7,491 -> 7,519, 7,501 -> 7,487). */
static int g_w16 = -1;
extern "C" void cuda_igw_w16_set(int on) { cuda_switch_set(&g_w16, on); }

template <int T>
static int igw_launch_kw(const ig_params *p, unsigned n_tiles, cudaStream_t st) {
    return cuda_switch_on(&g_w16, "CLOVER_CUDA_IGW_W16", 1) ? igw_launch_k<T, 16>(p, n_tiles, st)
                                                            : igw_launch_k<T, 8>(p, n_tiles, st);
}

/* The grouped experts on igw_k_kernel (on unless CLOVER_CUDA_IGW_MOE=0; cuda_igw_moe_set): tiles of 64 slots x
 * 128 outputs, where matmul_igemm.cu's grouped tiles are 32 slots x 16 outputs and re-read a tile's 8-bit rows from
 * L2 for every 16 outputs (a stacked preview's 4096 slots: ~1.1 GB of L2 reads a product, 150 us on the H200). H200,
 * bench/device-runs/2026-12-19-igw25: a stacked preview's gate / up 150 -> 97 us, down 216 -> 114; prompt 512
 * 5,584 -> 6,068 tok/s; the same bits (test_moe_igw). */
static int g_igw_moe = -1;
static unsigned long long g_igw_moe_launches;
extern "C" void cuda_igw_moe_set(int on) { cuda_switch_set(&g_igw_moe, on); }
extern "C" unsigned long long cuda_igw_moe_launches(void) {
    return __atomic_load_n(&g_igw_moe_launches, __ATOMIC_RELAXED);
}

/* The grouped tiles of 32 slots (igw_k_kernel<T, 8, 32>: 8 warps over the outputs, 3 ring stages, two blocks an
 * SM): on unless CLOVER_CUDA_IGW_T32=0. Why: a 512-row pass routes ~16 slots to an expert, so its 64-slot tiles are
 * a quarter full, one 512-thread block an SM (H100 trace, w16x36 seq2: a stacked pass's pair 98.6 us a layer over
 * 1,280 such blocks, ~10 waves); two half-size blocks an SM overlap one's waits with the other's work. Same bits.
 * H100 (bench/device-runs/2027-01-15-t32x37, three rounds): prompt 512 8,062 / 8,069 / 8,077 -> 8,792 / 8,836 /
 * 8,891 tok/s; the stacked diffusion pass's pair 98.6 -> 95.1 us, down 110.8 -> 97.4 (its ~12-slot tiles are at
 * ~half the DRAM floor of reading every expert once), the pass within noise (298.3 -> 295.5 agg tok/s, -1%). */
static int g_t32 = -1;
extern "C" void cuda_igw_t32_set(int on) { cuda_switch_set(&g_t32, on); }
int igw_moe_tile(void) { return cuda_switch_on(&g_t32, "CLOVER_CUDA_IGW_T32", 1) ? 32 : IW_BR; }

int igw_moe_takes(uint32_t type, const ig_params *p) {
    return cuda_switch_on(&g_igw_moe, "CLOVER_CUDA_IGW_MOE", 1) && (type == MM_Q4_K || type == MM_Q5_K) &&
           !p->wide && !p->tall && ((p->row_bytes | p->expert_stride) & 15) == 0;
}

int igw_moe_launch(uint32_t type, const ig_params *p, int tile, unsigned n_tiles, cudaStream_t st) {
    if (!p->perm || !p->xq || (tile != 32 && tile != IW_BR)) return 0;
    const int ok = tile == 32 ? (type == MM_Q4_K   ? igw_launch_k<MM_Q4_K, 8, 32>(p, n_tiles, st)
                                 : type == MM_Q5_K ? igw_launch_k<MM_Q5_K, 8, 32>(p, n_tiles, st)
                                                   : 0)
                   : type == MM_Q4_K ? igw_launch_kw<MM_Q4_K>(p, n_tiles, st)
                   : type == MM_Q5_K ? igw_launch_kw<MM_Q5_K>(p, n_tiles, st)
                                     : 0;
    if (ok) __atomic_fetch_add(&g_igw_moe_launches, 1, __ATOMIC_RELAXED);
    return ok;
}

/* The switch: on unless CLOVER_CUDA_IGEMM_WIDE=0 (read once); cuda_igemm_wide_set overrides (tests, benches). */
static int g_wide = -1;
static int igw_enabled(void) {
    int v = __atomic_load_n(&g_wide, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("CLOVER_CUDA_IGEMM_WIDE");
        v = !(e && strcmp(e, "0") == 0);
        __atomic_store_n(&g_wide, v, __ATOMIC_RELAXED);
    }
    return v;
}
extern "C" void cuda_igemm_wide_set(int on) { __atomic_store_n(&g_wide, on ? 1 : 0, __ATOMIC_RELAXED); }

int igw_launch(uint32_t type, const ig_params *p, cudaStream_t st) {
    if (!igw_enabled() || !p->xq || p->perm || p->wide || p->n_rows < IGW_MIN_ROWS) return 0;
    if (type == MM_Q4_K) return igw_launch_kw<MM_Q4_K>(p, 0, st);
    if (type == MM_Q5_K) return igw_launch_kw<MM_Q5_K>(p, 0, st);
    if (type != MM_Q8_0) return 0;
    const unsigned rt = (unsigned)((p->n_rows + IW_BR - 1) / IW_BR), ot = (unsigned)((p->n_out + IW_BO - 1) / IW_BO);
    if (ot > 65535) return 0;
    static int attr_set = 0;
    if (!attr_set) {
        if (cudaFuncSetAttribute(igw_q8_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, IW_SMEM) != cudaSuccess) {
            (void)cudaGetLastError(); /* not sticky: the caller's kernel runs instead */
            return 0;
        }
        attr_set = 1;
    }
    pdl_launch_rows(igw_q8_kernel, dim3(rt, ot), dim3(IW_THREADS), IW_SMEM, st, *p);
    return 1;
}
