/*
 * matmul_igemm_few.cu: the integer chunk products for FEW rows (1..32; a
 * 32-row preview's dense products and its grouped experts, ~8 experts a
 * layer), Q8_0 / Q4_K / Q5_K / Q6_K, dense and grouped-expert, on the tensor
 * cores (mma.sync s8 m16n8k32; Q6_K m16n8k16), bit for bit the canonical
 * order of matmul_igemm.cu (its top comment): the same terms formed by the
 * same float operations, each partial chain p_j summed from 0 in block
 * order, the chains combined in the same fixed tree. So a row's bits equal
 * the other kernels' (and the decode kernel's): tested in test_cuda_matmul.
 *
 * STATUS: written 2026-12-03 without a device; OFF unless
 * CLOVER_CUDA_IGEMM_FEW=1 (or cuda_igemm_few_set(1)). The pack
 * bench/device-runs/2026-12-06-k4s/run.sh tests and times it.
 *
 * Why a second kernel: at few rows the products are latency bound, not
 * issue or bandwidth bound. matmul_igemm.cu runs one 8-warp block per SM
 * (__launch_bounds__(256, 1)) with a 4-stage cp.async ring of one 256-value
 * chunk of 16 weight rows a stage: ~13 KB of weights in flight per SM, and a
 * WIDE MoE block (128 outputs) walks its whole K serially. Little's law on
 * the H200: ~4.2 TB/s copy bandwidth x ~0.9 us loaded DRAM latency = ~3.8 MB
 * in flight over 132 SMs, i.e. >= ~29 KB of weights in flight per SM. Here:
 *  - a block is 8 warps over 16*MT outputs and up to 32 rows; warp w owns a
 *    slice of K that is exactly one partial chain (Q8_0: chain p_w = block w
 *    of every 256-value chunk) or one super-block a round (K-quants: super-
 *    block S*r + s of round r, s = w mod S, S = 8, 4 or 2 slots, MT = 8/S
 *    m-tiles of 16 outputs, so that short rows (n_in 512: 2 super-blocks)
 *    still keep 8 warps busy);
 *  - the weights go straight from global memory into the mma A fragments
 *    (no shared-memory ring, no block-wide barrier per chunk for Q8_0): a
 *    Q8_0 warp loads FW_U = 4 chunks' blocks (16 rows x 34 B x 4) before it
 *    uses them, a K-quant warp a whole super-block (16 x 144..210 B) at once.
 *    Per block 8 warps x ~2.2 KB = ~17-27 KB, two blocks per SM
 *    (__launch_bounds__(256, 2), 32 KB of static shared memory a block):
 *    ~35-54 KB of weights in flight per SM, above the ~29 KB Little asks;
 *  - the 8-bit rows (ig_quantize's chunk-major layout, from the caller's
 *    scratch) are read through the read-only cache: a block's rows are
 *    shared by every block of the same row tile (L1/L2 hits).
 * Q8_0 from FW_Q8_WIDE_OUT = 4096 outputs: 2 m-tiles a warp (32 outputs a block), so a row tile's B fragment
 * serves 2 mma and the 8-bit rows read from L2 per weight byte halve (at 32 rows and 16 outputs a block they
 * are 2x the weight bytes: qkv's 512 blocks x 72 KB = 37 MB of L2 reads for 17.8 MB of weights).
 * Grids: outputs on x (16*MT a block, Q8_0 16 or 32), row tiles (dense) or the grouping
 * pass's tiles of <= 32 slots of one expert (MoE, matmul_gemm.cu) on y: a
 * 32-row preview's 8 experts x 512 outputs are 256 blocks (every one resident
 * at once at 2 per SM), each routed expert read once.
 * Pairs (grid.z = 2): two products of the same 8-bit rows in one launch, the experts' gate and up
 * (cuda_moe_chunk_pair: one grouping, one quantisation) or two dense products of one n_in
 * (cuda_matmul_chunk_ws_pair: a GDN layer's qkv + z, the shared expert's gate + up): twice the blocks in
 * flight, two launches and a quantisation fewer; each output's bits as alone.
 * Order: Q8_0: warp w's register accumulators ARE chain p_w (blocks in
 * order), then ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)) through shared memory,
 * as igemm_q8_kernel. K-quants: a round's terms go to shared memory (double
 * buffered, one barrier a round) and warps owning (m-tile, row tile) pairs add
 * them to p0 (even super-blocks) and p1 (odd) in super-block order, then
 * p0 + p1. The integer sums inside a term are exact, so only these float
 * orders matter, and they are the canonical ones.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_matmul.h"
#include "matmul_internal.cuh"
#include "matmul_igemm_few.cuh"

enum { FW_THREADS = 256, FW_WARPS = 8, FW_BR = 32, FW_NT = 4, FW_U = 4 };
/* Q8_0 from this many outputs: 2 m-tiles a warp (the rows' L2 reads halve; still >= 128 blocks) */
enum { FW_Q8_WIDE_OUT = 4096 };

/* global loads through the read-only path: 4-byte aligned words, 2-byte aligned words (Q8_0, Q6_K), f16 */
__device__ __forceinline__ int fw_w32(const uint8_t *p) { return (int)__ldg((const unsigned *)p); }
__device__ __forceinline__ int fw_w32a2(const uint8_t *p) {
    const unsigned short *h = (const unsigned short *)p;
    return (int)((unsigned)__ldg(h) | ((unsigned)__ldg(h + 1) << 16));
}
__device__ __forceinline__ float fw_f16(const uint8_t *p) {
    return __half2float(__ushort_as_half(__ldg((const unsigned short *)p)));
}
__device__ __forceinline__ float fw_f32(const uint8_t *p) { return __ldg((const float *)p); }
__device__ __forceinline__ int fw_s16(const uint8_t *p) { return (int)__ldg((const short *)p); }

__device__ __forceinline__ void fw_mma_k32(int *c, int a0, int a1, int a2, int a3, int b0, int b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void fw_mma_k16(int *c, int a0, int a1, int b0) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}

template <int T>
__host__ __device__ constexpr int fw_sb_bytes() {
    return T == MM_Q4_K ? MM_Q4_K_BYTES : T == MM_Q5_K ? MM_Q5_K_BYTES : MM_Q6_K_BYTES;
}

/* The term of super-block sb for this warp's 16 outputs (rows v0/v1: its bytes) and the live row tiles, formed
 * exactly as igemm_kernel forms it, stored at dst + i * 128 + q (tile i, C position q: outputs g, g, g+8, g+8;
 * rows 2tig, 2tig+1). xq0: the rows' chunk sb; rb/rc0/rc1: row indices into it (B fragment, C columns). The
 * weights' fragment words are loaded first (all in flight together), then each row tile in turn: its integer
 * sums are 8 registers, not 32 (the kernel keeps 2 blocks an SM in 128 registers a thread). */
template <int T>
__device__ __forceinline__ void fw_kterm(const uint8_t *v0, const uint8_t *v1, const uint8_t *xq0, const int *rb,
                                         const int *rc0, const int *rc1, const bool *live, int tig, float *dst) {
    if (T == MM_Q4_K || T == MM_Q5_K) {
        const unsigned s00 = fw_w32(v0 + 4), s01 = fw_w32(v0 + 8), s02 = fw_w32(v0 + 12);
        const unsigned s10 = fw_w32(v1 + 4), s11 = fw_w32(v1 + 8), s12 = fw_w32(v1 + 12);
        const int qo = T == MM_Q4_K ? 16 : 48;
        int q0[8], q1[8];
#pragma unroll
        for (int cq = 0; cq < 4; cq++) {
            q0[2 * cq] = fw_w32(v0 + qo + 32 * cq + 4 * tig), q0[2 * cq + 1] = fw_w32(v0 + qo + 32 * cq + 16 + 4 * tig);
            q1[2 * cq] = fw_w32(v1 + qo + 32 * cq + 4 * tig), q1[2 * cq + 1] = fw_w32(v1 + qo + 32 * cq + 16 + 4 * tig);
        }
        int h0a = 0, h0b = 0, h1a = 0, h1b = 0;
        if (T == MM_Q5_K) {
            h0a = fw_w32(v0 + 16 + 4 * tig), h0b = fw_w32(v0 + 32 + 4 * tig);
            h1a = fw_w32(v1 + 16 + 4 * tig), h1b = fw_w32(v1 + 32 + 4 * tig);
        }
        const float d0 = fw_f16(v0), dm0 = fw_f16(v0 + 2), d1 = fw_f16(v1), dm1 = fw_f16(v1 + 2);
#pragma unroll
        for (int i = 0; i < FW_NT; i++) {
            if (!live[i]) continue;
            const uint8_t *xb = xq0 + (size_t)rb[i] * IG_ACS, *xc0 = xq0 + (size_t)rc0[i] * IG_ACS;
            const uint8_t *xc1 = xq0 + (size_t)rc1[i] * IG_ACS;
            int sq[4] = {0, 0, 0, 0}, smn[4] = {0, 0, 0, 0};
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int cq = j >> 1;
                int a0, a1, a2, a3;
                mm_k4_frag<T>(j, q0[2 * cq], q1[2 * cq], q0[2 * cq + 1], q1[2 * cq + 1], h0a, h0b, h1a, h1b, a0, a1, a2,
                              a3);
                int sc0, m0, sc1, m1;
                mm_k4_scale_min_words(j, s00, s01, s02, &sc0, &m0);
                mm_k4_scale_min_words(j, s10, s11, s12, &sc1, &m1);
                int cc[4] = {0, 0, 0, 0};
                fw_mma_k32(cc, a0, a1, a2, a3, fw_w32(xb + 4 + 32 * j + 4 * tig), fw_w32(xb + 20 + 32 * j + 4 * tig));
                const int xs0 = fw_s16(xc0 + 260 + 4 * j) + fw_s16(xc0 + 262 + 4 * j);
                const int xs1 = fw_s16(xc1 + 260 + 4 * j) + fw_s16(xc1 + 262 + 4 * j);
                sq[0] += sc0 * cc[0], sq[1] += sc0 * cc[1], sq[2] += sc1 * cc[2], sq[3] += sc1 * cc[3];
                smn[0] += m0 * xs0, smn[1] += m0 * xs1, smn[2] += m1 * xs0, smn[3] += m1 * xs1;
            }
            const float xd0 = fw_f32(xc0), xd1 = fw_f32(xc1);
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const float d = q < 2 ? d0 : d1, dm = q < 2 ? dm0 : dm1, xd = q & 1 ? xd1 : xd0;
                dst[i * 128 + q] = __fmul_rn(xd, __fsub_rn(__fmul_rn(d, (float)sq[q]), __fmul_rn(dm, (float)smn[q])));
            }
        }
    } else { /* Q6_K: 16 groups of 16 values, value 16G + l = 128h + 32k + 16half + l (igemm_kernel's decoding) */
        int fa0[16], fa1[16], sw0[4], sw1[4]; /* the 16 int8 scales of each row as 4 words (2-byte aligned rows) */
#pragma unroll
        for (int k = 0; k < 4; k++) sw0[k] = fw_w32a2(v0 + 192 + 4 * k), sw1[k] = fw_w32a2(v1 + 192 + 4 * k);
#pragma unroll
        for (int G = 0; G < 16; G++) {
            const int h = G >> 3, k = (G >> 1) & 3, l = 16 * (G & 1) + 4 * tig;
            const int qlo = 64 * h + (k & 1 ? 32 : 0) + l, qhi = 128 + 32 * h + l, lsh = k & 2 ? 4 : 0;
            const int a0 = ((fw_w32a2(v0 + qlo) >> lsh) & 0x0F0F0F0F) | (((fw_w32a2(v0 + qhi) >> (2 * k)) & 0x03030303) << 4);
            const int a1 = ((fw_w32a2(v1 + qlo) >> lsh) & 0x0F0F0F0F) | (((fw_w32a2(v1 + qhi) >> (2 * k)) & 0x03030303) << 4);
            fa0[G] = (int)__vsub4((unsigned)a0, 0x20202020u);
            fa1[G] = (int)__vsub4((unsigned)a1, 0x20202020u);
        }
        const float d0 = fw_f16(v0 + 208), d1 = fw_f16(v1 + 208);
#pragma unroll
        for (int i = 0; i < FW_NT; i++) {
            if (!live[i]) continue;
            const uint8_t *xb = xq0 + (size_t)rb[i] * IG_ACS;
            int is[4] = {0, 0, 0, 0};
#pragma unroll
            for (int G = 0; G < 16; G++) {
                int cc[4] = {0, 0, 0, 0};
                fw_mma_k16(cc, fa0[G], fa1[G], fw_w32(xb + 4 + 16 * G + 4 * tig));
                const int sc0 = (int)(int8_t)(sw0[G >> 2] >> (8 * (G & 3))), sc1 = (int)(int8_t)(sw1[G >> 2] >> (8 * (G & 3)));
                is[0] += sc0 * cc[0], is[1] += sc0 * cc[1], is[2] += sc1 * cc[2], is[3] += sc1 * cc[3];
            }
            const float xd0 = fw_f32(xq0 + (size_t)rc0[i] * IG_ACS), xd1 = fw_f32(xq0 + (size_t)rc1[i] * IG_ACS);
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const float d = q < 2 ? d0 : d1, xd = q & 1 ? xd1 : xd0;
                dst[i * 128 + q] = __fmul_rn(__fmul_rn(d, xd), (float)is[q]);
            }
        }
    }
}

/* S: super-block slots a round (K-quants: 2, 4 or 8, even so that slot s's super-blocks all have parity s & 1;
 * Q8_0: 8, one chain a warp). MT = 8 / S m-tiles of 16 outputs a block. */
template <int T, int S, int MQ>
__global__ void __launch_bounds__(FW_THREADS, 2) igemm_few_kernel(ig_params p, const uint8_t *w_up, float *y_up,
                                                                  int n_out_up) {
    /* Q8_0: [0] holds the 8 chains for the final tree; K-quants: a round's terms, double buffered */
    __shared__ __align__(16) float red[2][FW_WARPS][FW_NT][32][4];
    __shared__ int xrow[FW_BR], yrow[FW_BR];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tig = lane & 3;
    static_assert(S == 2 || S == 4 || S == 8, "igemm_few_kernel: an even number of slots a round");
    static_assert(T != MM_Q8_0 || S == 8, "igemm_few_kernel: Q8_0 has 8 chains, one a warp");
    static_assert(MQ == 1 || T == MM_Q8_0, "igemm_few_kernel: MQ > 1 is Q8_0's");
    constexpr int MT = FW_WARPS / S;
    const int n0 = blockIdx.x * 16 * MT * MQ;
    /* blockIdx.z == 1: the pair's second product (same rows and n_in; its weights, outputs and n_out: the experts'
     * up, or a dense product of other outputs); grid.x covers the larger n_out, the other's extra blocks leave */
    const int n_out = blockIdx.z ? n_out_up : p.n_out;
    if (n0 >= n_out) return;
    int m_count, e = 0;
    if (p.perm == NULL) {
        const int m0 = blockIdx.y * FW_BR;
        m_count = min(FW_BR, p.n_rows - m0);
        if (tid < FW_BR) xrow[tid] = yrow[tid] = m0 + min(tid, m_count - 1); /* rows past the tile: a live row */
    } else {
        if ((int)blockIdx.y >= *p.ntiles) return; /* the whole block: past the table's end */
        const int32_t *t = p.tiles + 3 * blockIdx.y;
        e = t[0];
        m_count = t[2];
        if (tid < FW_BR) {
            const int s = p.perm[t[1] + min(tid, m_count - 1)];
            yrow[tid] = s;
            xrow[tid] = p.x_per_slot ? s : s / p.k;
        }
    }
    __syncthreads(); /* xrow, yrow */
    float *const yout = blockIdx.z ? y_up : p.y;
    const uint8_t *wbase = (blockIdx.z ? w_up : p.w) + (size_t)e * p.expert_stride;
    const int mt = warp / S, s = warp % S;
    const int o0 = n0 + 16 * mt + g, o1 = o0 + 8; /* this thread's A rows; past n_out: row 0 (read, never written) */
    const uint8_t *w0 = wbase + (size_t)(o0 < n_out ? o0 : 0) * p.row_bytes;
    const uint8_t *w1 = wbase + (size_t)(o1 < n_out ? o1 : 0) * p.row_bytes;
    bool live[FW_NT];
    int rb[FW_NT], rc0[FW_NT], rc1[FW_NT]; /* the rows (of xq) of the B fragment and of the C columns */
#pragma unroll
    for (int i = 0; i < FW_NT; i++) {
        live[i] = 8 * i < m_count;
        rb[i] = xrow[8 * i + g];
        rc0[i] = xrow[8 * i + 2 * tig];
        rc1[i] = xrow[8 * i + 2 * tig + 1];
    }
    const size_t xstep = (size_t)p.xq_rows * IG_ACS; /* the 8-bit rows' bytes of one 256-value chunk */

    if (T == MM_Q8_0) {
        /* MQ m-tiles a warp (32 outputs a block when 2): each row tile's B fragment serves MQ mma, so the rows'
         * bytes read a weight byte halve; FW_U / MQ chunks a load group keeps the weight bytes in flight alike */
        constexpr int UQ = FW_U / MQ;
        const int nblk = p.n_in / 32, nchunks = (nblk + 7) / 8;
        const uint8_t *wq[MQ][2];
#pragma unroll
        for (int m = 0; m < MQ; m++) {
            const int oa = n0 + 16 * m + g, ob = oa + 8;
            wq[m][0] = wbase + (size_t)(oa < n_out ? oa : 0) * p.row_bytes;
            wq[m][1] = wbase + (size_t)(ob < n_out ? ob : 0) * p.row_bytes;
        }
        float acc[MQ][FW_NT][4];
#pragma unroll
        for (int m = 0; m < MQ; m++)
#pragma unroll
            for (int i = 0; i < FW_NT; i++)
#pragma unroll
                for (int q = 0; q < 4; q++) acc[m][i][q] = 0.0f;
        for (int c0 = 0; c0 < nchunks; c0 += UQ) {
            /* UQ blocks of chain p_warp (block warp of chunks c0..c0+UQ-1) of MQ m-tiles, loaded before any is used */
            int a[UQ][MQ][4];
            float dw[UQ][MQ][2];
#pragma unroll
            for (int u = 0; u < UQ; u++) {
                const int b = 8 * (c0 + u) + warp;
#pragma unroll
                for (int m = 0; m < MQ; m++) {
                    if (b < nblk) {
                        const uint8_t *b0 = wq[m][0] + (size_t)b * MM_Q8_0_BYTES, *b1 = wq[m][1] + (size_t)b * MM_Q8_0_BYTES;
                        a[u][m][0] = fw_w32a2(b0 + 2 + 4 * tig), a[u][m][1] = fw_w32a2(b1 + 2 + 4 * tig);
                        a[u][m][2] = fw_w32a2(b0 + 18 + 4 * tig), a[u][m][3] = fw_w32a2(b1 + 18 + 4 * tig);
                        dw[u][m][0] = fw_f16(b0), dw[u][m][1] = fw_f16(b1);
                    } else {
                        a[u][m][0] = a[u][m][1] = a[u][m][2] = a[u][m][3] = 0;
                        dw[u][m][0] = dw[u][m][1] = 0.0f;
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < UQ; u++) {
                const int c = c0 + u;
                if (8 * c + warp >= nblk) continue; /* past the last block: no term (as igemm_q8_kernel) */
                const uint8_t *xa = p.xq + (size_t)c * xstep + warp * MM_ACT32_BYTES;
#pragma unroll
                for (int i = 0; i < FW_NT; i++) {
                    if (!live[i]) continue;
                    const uint8_t *xb = xa + (size_t)rb[i] * IG_ACS;
                    const int b0 = fw_w32(xb + 4 + 4 * tig), b1 = fw_w32(xb + 20 + 4 * tig);
                    const float xd0 = fw_f32(xa + (size_t)rc0[i] * IG_ACS), xd1 = fw_f32(xa + (size_t)rc1[i] * IG_ACS);
#pragma unroll
                    for (int m = 0; m < MQ; m++) {
                        int cc[4] = {0, 0, 0, 0};
                        fw_mma_k32(cc, a[u][m][0], a[u][m][1], a[u][m][2], a[u][m][3], b0, b1);
                        const float d0 = dw[u][m][0], d1 = dw[u][m][1];
                        acc[m][i][0] = __fadd_rn(acc[m][i][0], __fmul_rn(__fmul_rn(d0, xd0), (float)cc[0]));
                        acc[m][i][1] = __fadd_rn(acc[m][i][1], __fmul_rn(__fmul_rn(d0, xd1), (float)cc[1]));
                        acc[m][i][2] = __fadd_rn(acc[m][i][2], __fmul_rn(__fmul_rn(d1, xd0), (float)cc[2]));
                        acc[m][i][3] = __fadd_rn(acc[m][i][3], __fmul_rn(__fmul_rn(d1, xd1), (float)cc[3]));
                    }
                }
            }
        }
        /* the 8 chains meet: ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)) (red[m]: m-tile m's chains); warp w < 4 MQ
         * writes row tile w % 4 of m-tile w / 4 */
        static_assert(MQ <= 2, "igemm_few_kernel: red holds 2 m-tiles' chains");
#pragma unroll
        for (int m = 0; m < MQ; m++)
#pragma unroll
            for (int i = 0; i < FW_NT; i++)
                if (live[i])
#pragma unroll
                    for (int q = 0; q < 4; q++) red[m][warp][i][lane][q] = acc[m][i][q];
        __syncthreads();
        if (warp < FW_NT * MQ && live[warp % FW_NT]) {
            const int i = warp % FW_NT, m = warp / FW_NT;
#pragma unroll
            for (int q = 0; q < 4; q++) {
                float pp[8];
#pragma unroll
                for (int j = 0; j < 8; j++) pp[j] = red[m][j][i][lane][q];
                const int o = n0 + 16 * m + (q < 2 ? g : g + 8), r = 8 * i + 2 * tig + (q & 1);
                const float v = __fadd_rn(__fadd_rn(__fadd_rn(pp[0], pp[1]), __fadd_rn(pp[2], pp[3])),
                                          __fadd_rn(__fadd_rn(pp[4], pp[5]), __fadd_rn(pp[6], pp[7])));
                if (o < n_out && r < m_count) yout[(size_t)yrow[r] * n_out + o] = v;
            }
        }
        return;
    }

    /* K-quants: round r, warp (mt, s) forms the term of super-block S*r + s; the pairs (m-tile, row tile) are
     * summed by warp j % 8 (pair j = warp + 8 jj: MT * 4 <= 16 pairs) into p0 / p1 */
    constexpr int SB = fw_sb_bytes<T>();
    constexpr int npairs = MT * FW_NT;
    const int nsb = p.n_in / 256, rounds = (nsb + S - 1) / S;
    float pacc[2][2][4];
#pragma unroll
    for (int jj = 0; jj < 2; jj++)
#pragma unroll
        for (int ch = 0; ch < 2; ch++)
#pragma unroll
            for (int q = 0; q < 4; q++) pacc[jj][ch][q] = 0.0f;
    for (int r = 0; r < rounds; r++) {
        float(*tb)[FW_NT][32][4] = red[r & 1];
        const int sb = S * r + s;
        if (sb < nsb) /* the live row tiles' terms into tb[warp][i][lane][q] */
            fw_kterm<T>(w0 + (size_t)sb * SB, w1 + (size_t)sb * SB, p.xq + (size_t)sb * xstep, rb, rc0, rc1, live, tig,
                        &tb[warp][0][lane][0]);
        /* this round's terms everywhere; every warp is past round r - 1's sums, so round r + 1 may write the
         * other buffer, and round r + 2 this one only after the next barrier */
        __syncthreads();
#pragma unroll
        for (int jj = 0; jj < 2; jj++) {
            const int j = warp + FW_WARPS * jj, pmt = j / FW_NT, pi = j % FW_NT;
            if (j >= npairs || !live[pi]) continue;
#pragma unroll
            for (int ss = 0; ss < S; ss++) { /* super-blocks in order: slot ss has parity ss & 1 (S even) */
                if (S * r + ss >= nsb) break;
                const int ch = ss & 1;
#pragma unroll
                for (int q = 0; q < 4; q++) pacc[jj][ch][q] = __fadd_rn(pacc[jj][ch][q], tb[pmt * S + ss][pi][lane][q]);
            }
        }
    }
#pragma unroll
    for (int jj = 0; jj < 2; jj++) {
        const int j = warp + FW_WARPS * jj, pmt = j / FW_NT, pi = j % FW_NT;
        if (j >= npairs || !live[pi]) continue;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const int o = n0 + 16 * pmt + (q < 2 ? g : g + 8), r = 8 * pi + 2 * tig + (q & 1);
            const float v = __fadd_rn(pacc[jj][0][q], pacc[jj][1][q]); /* p0 + p1 */
            if (o < n_out && r < m_count) yout[(size_t)yrow[r] * n_out + o] = v;
        }
    }
}

/* The switch: off unless CLOVER_CUDA_IGEMM_FEW=1 (read once); cuda_igemm_few_set overrides it (tests). */
static int g_few = -1;
static int fw_enabled(void) {
    int v = __atomic_load_n(&g_few, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("CLOVER_CUDA_IGEMM_FEW");
        v = e && strcmp(e, "1") == 0;
        __atomic_store_n(&g_few, v, __ATOMIC_RELAXED);
    }
    return v;
}
extern "C" void cuda_igemm_few_set(int on) { __atomic_store_n(&g_few, on ? 1 : 0, __ATOMIC_RELAXED); }

int fw_take(uint32_t type, size_t n_rows) {
    return fw_enabled() && mm_is_int(type) && n_rows >= 1 && n_rows <= FW_MAX_ROWS;
}

template <int T, int S, int MQ = 1>
static void fw_launch_s(const ig_params *q, unsigned ny, const uint8_t *w_up, float *y_up, int n_out_up,
                        cudaStream_t st) {
    const int bo = 16 * (FW_WARPS / S) * MQ, n_max = w_up && n_out_up > q->n_out ? n_out_up : q->n_out;
    const unsigned nx = (unsigned)((n_max + bo - 1) / bo);
    igemm_few_kernel<T, S, MQ><<<dim3(nx, ny, w_up ? 2 : 1), FW_THREADS, 0, st>>>(*q, w_up, y_up, n_out_up);
}

/* K-quants: 8 slots a round from 8 super-blocks (n_in 2048) up, else 4 or 2 with 2 or 4 m-tiles a block */
template <int T>
static void fw_launch_t(const ig_params *q, unsigned ny, const uint8_t *w_up, float *y_up, int n_out_up,
                        cudaStream_t st) {
    const int nsb = q->n_in / 256;
    if (T == MM_Q8_0 && q->n_out >= FW_Q8_WIDE_OUT) /* >= 128 blocks of 32 outputs: 2 m-tiles a warp */
        fw_launch_s<T, 8, T == MM_Q8_0 ? 2 : 1>(q, ny, w_up, y_up, n_out_up, st);
    else if (T == MM_Q8_0 || nsb >= 8)
        fw_launch_s<T, 8>(q, ny, w_up, y_up, n_out_up, st);
    else if (nsb >= 4)
        fw_launch_s<T, T == MM_Q8_0 ? 8 : 4>(q, ny, w_up, y_up, n_out_up, st);
    else
        fw_launch_s<T, T == MM_Q8_0 ? 8 : 2>(q, ny, w_up, y_up, n_out_up, st);
}

void fw_launch(uint32_t type, const ig_params *q, unsigned n_tiles_y, const void *w_up, float *y_up, int n_out_up,
               cudaStream_t st) {
    const uint8_t *wu = (const uint8_t *)w_up;
    switch (type) {
    case MM_Q8_0: fw_launch_t<MM_Q8_0>(q, n_tiles_y, wu, y_up, n_out_up, st); break;
    case MM_Q4_K: fw_launch_t<MM_Q4_K>(q, n_tiles_y, wu, y_up, n_out_up, st); break;
    case MM_Q5_K: fw_launch_t<MM_Q5_K>(q, n_tiles_y, wu, y_up, n_out_up, st); break;
    case MM_Q6_K: fw_launch_t<MM_Q6_K>(q, n_tiles_y, wu, y_up, n_out_up, st); break;
    default: break;
    }
}
