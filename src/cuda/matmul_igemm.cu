/*
 * matmul_igemm.cu: the integer chunk products (2+ rows) for Q8_0 / Q4_K /
 * Q5_K / Q6_K weights, on the tensor cores (mma.sync s8, m16n8k32; Q6_K's
 * scales cover 16 values, so m16n8k16 there), dense and grouped-expert.
 *
 * Why integer: the activations are rounded to 8 bits in blocks exactly as the
 * decode products and the CPU's integer path round them (the same device
 * quantiser code, matmul_internal.cuh), the integer sums are exact, and every
 * output applies the block scales and adds the per-block terms in one fixed
 * float order, the canonical order of every integer product on the GPU:
 *   term_b as act_scalar.c forms it, IEEE roundings, no contraction (__f*_rn):
 *     Q8_0:        (d_w * x_d) * (float)isum
 *     Q4_K, Q5_K:  x_d * (d * (float)sum_q - dmin * (float)sum_m)
 *     Q6_K:        (d_w * x_d) * (float)isum
 *   P interleaved partials, p_j = 0 + term_j + term_{j+P} + ... in block
 *   order (P = 8 for Q8_0's 32-value blocks, 2 for the K-quants' 256), then
 *   Q8_0: ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7)); K: p0 + p1.
 * That is the decode kernel's natural lane layout (matmul_mmv.cu: 8 lane
 * groups of 4 over Q8_0 blocks, 2 of 16 over super-blocks, then a butterfly),
 * so a row's bits are the same at 1 row or 512, whatever its neighbours,
 * decode or chunk. Against the CPU's sequential sum (act_scalar.c) only the
 * grouping of the sums of the terms differs: <= 1e-5 relative, tested.
 *
 * Layout: a thread block (8 warps) computes 16 outputs x up to BR rows (32,
 * or 16/8 for few rows or long n_in). The rows come rounded to 8 bits once
 * per product (ig_quantize, chunk-major 304-byte pieces in the caller's
 * scratch: cuda_matmul_chunk_ws, cuda_moe_chunk), or without scratch each
 * block rounds its rows into its own shared memory (cuda_matmul_chunk: the
 * same bytes, slower). The weights (and the rows' chunk) stream through a
 * 4-stage cp.async ring of 256-value chunks, the raw blocks copied as they
 * are (a 16-byte piece that is unaligned or crosses the tensor's ends is
 * copied byte by byte). Warp w takes the 8 rows of tile w&3 and half of the
 * canonical partials (w>>2: Q8_0 blocks 0-3 or 4-7 of each chunk, K-quants
 * the even or odd super-blocks); the halves meet in the tree's last addition
 * through shared memory. WIDE (MoE tiles of <= 8 slots, when the slots per
 * expert are few, as in a 32-row preview): 128 outputs a block, each warp one
 * m-tile with every partial. Dense grids put the row tiles on x, so the
 * blocks that share weight rows run together and the re-reads hit L2. MoE:
 * the tiles of matmul_gemm.cu's grouping pass (up to BR slots of one expert
 * each) on grid.y, each routed expert's rows read once per tile.
 * Measured (H200, bench/device-runs/cuda-matmul-notes.md): issue-bound, not yet at the bandwidth.
 * X2 (CLOVER_CUDA_IG_X2=1, off until measured): igemm_q8_kernel and the WIDE Q4_K / Q5_K form with two chunks a
 * ring stage (one wait and one barrier for two chunks; the same bits), ig_launch_k / ig_launch_q8 pick it.
 * Tile loop (CLOVER_CUDA_MOE_TILE_LOOP, on unless 0): a WIDE grouped launch's grid.y is ~2 waves of blocks instead of
 * the worst-case tile count (288 for 32 rows x top-8 of 256 experts; a preview fills ~30), each block walking tiles
 * y, y + gridDim.y, ... with the one-tile code unchanged (the same bits): the empty blocks' scheduling was most of a
 * preview's expert products (ig_tile_rows).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "matmul_internal.cuh"
#include "matmul_igemm.cuh"
#include "cuda_pdl.cuh"
#include "cuda_device.h"
#include "cuda_switch.h"

enum { IG_BO = 16, IG_THREADS = 256, IG_STAGES = 4, IG_CHUNK = 256, IG_SMEM_MAX = 220 * 1024 };
enum { IG_W3_STAGES = 3, IG_W3_BLOCKS = 3 }; /* W3's ring and its blocks an SM (ig_launch_k) */

__device__ __forceinline__ int ig_ld32(const uint8_t *p) { return *(const int *)p; }
__device__ __forceinline__ int ig_ld32a2(const uint8_t *p) {
    const unsigned short *h = (const unsigned short *)p;
    return (int)(h[0] | ((unsigned)h[1] << 16));
}
__device__ __forceinline__ float ig_f16(const uint8_t *p) { return __half2float(*(const __half *)p); }

__device__ __forceinline__ void mma_s8_k16(int *c, int a0, int a1, int b0) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}

/* Bytes of one 256-value chunk of a weight row. */
template <int T>
__host__ __device__ constexpr int ig_chunk_bytes() {
    return T == MM_Q8_0 ? 8 * MM_Q8_0_BYTES : T == MM_Q4_K ? MM_Q4_K_BYTES : T == MM_Q5_K ? MM_Q5_K_BYTES : MM_Q6_K_BYTES;
}

/* Copies chunk c of the block's weight rows into stage buffer dst (row r at
 * dst + r*sbp + (src & 15), src the chunk's first byte). */
template <int T, bool PREQ, int BO>
__device__ __forceinline__ void ig_copy_chunk(const ig_params &p, const uint8_t *wbase, int n0, int c, uint8_t *dst,
                                              const int *xrow, int m_count) {
    if (PREQ) { /* the chunk's 8-bit rows: IG_ACS bytes each, 16-byte aligned (ig_quantize_kernel's layout) */
        constexpr int PA = IG_ACS / 16;
        uint8_t *da = dst + BO * p.sbp;
        for (int idx = threadIdx.x; idx < m_count * PA; idx += IG_THREADS) {
            const int i = idx / PA, pc = idx % PA;
            const uint8_t *src = p.xq + ((size_t)c * p.xq_rows + xrow[i]) * IG_ACS + 16 * pc;
            const unsigned sa = (unsigned)__cvta_generic_to_shared(da + i * IG_ACS + 16 * pc);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(src) : "memory");
        }
    }
    constexpr int CB = ig_chunk_bytes<T>(), PPR = (CB + 15) / 16 + 1;
    const int nbk = T == MM_Q8_0 ? min(8, p.n_in / 32 - 8 * c) : 1;
    const int cb = T == MM_Q8_0 ? nbk * MM_Q8_0_BYTES : CB;
    for (int idx = threadIdx.x; idx < BO * PPR; idx += IG_THREADS) {
        const int r = idx / PPR, pc = idx % PPR, o = n0 + r;
        if (o >= p.n_out) continue;
        const uint8_t *src = wbase + (size_t)o * p.row_bytes + (size_t)c * CB;
        const uint8_t *lo = (const uint8_t *)((uintptr_t)src & ~(uintptr_t)15), *q = lo + 16 * pc;
        if (q >= src + cb) continue;
        uint8_t *d = dst + r * p.sbp + 16 * pc;
        if (q >= p.w_lo && q + 16 <= p.w_end) {
            const unsigned sa = (unsigned)__cvta_generic_to_shared(d);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(q) : "memory");
        } else {
            for (int i = 0; i < 16; i++)
                if (q + i >= p.w_lo && q + i < p.w_end) d[i] = q[i];
        }
    }
}

/* This thread's copy pieces of a PREQ block, set once before the first chunk: ig_copy_chunk divides every
 * piece index by the pieces a row takes and recomputes each address per chunk (~30 instructions a piece,
 * 5-9 pieces a thread a chunk in the WIDE form: about a quarter of a WIDE block's instructions). Here a
 * piece keeps its row's first byte and its slot, and a chunk adds c * CB: the same bytes to the same
 * shared-memory places as ig_copy_chunk (a piece's start is recomputed from the chunk's first byte, so
 * Q6_K's 210-byte chunks, not a multiple of 16, shift as they do there). A piece is two words, as registers
 * are what cap the WIDE form's blocks an SM (64-bit row pointers and a separate slot were 111 registers at one
 * block's bounds, 90 now): a source offset from the block's first weight row (BO rows of one tensor, well under
 * 4 GiB) and a stage place, all ones when idle. Aligned, the offset is the piece's own first byte and the place
 * its place; otherwise the offset is its row's first byte and the place is shifted left once with the piece's
 * slot in the low 5 bits (places are 16-byte multiples; a row takes at most 19 pieces). The rows' pieces: a
 * WIDE tile (BO = 128) has at most 8 rows, the others 32. */
template <int T, int BO>
struct ig_pieces {
    static constexpr int CB = ig_chunk_bytes<T>(), PPR = (CB + 15) / 16 + 1, PA = IG_ACS / 16;
    static constexpr int ROWS = BO == 8 * IG_BO ? 8 : 32;
    static constexpr int NW = (BO * PPR + IG_THREADS - 1) / IG_THREADS, NA = (ROWS * PA + IG_THREADS - 1) / IG_THREADS;
    static_assert(PPR <= 32, "ig_pieces: a piece's slot in 5 bits");
    const uint8_t *wb;   /* the block's first weight row (row n0 of wbase) */
    unsigned woff[NW];   /* aligned: the piece's first byte - wb; else its row's first byte - wb */
    unsigned wdst[NW];   /* its place in a stage (16-byte piece pc of row r); not aligned: place << 1 | pc */
    unsigned aoff[NA];   /* the rows' pieces (chunk 0) - p.xq */
    unsigned adst[NA];   /* ~0u when idle */
    /* every row's chunks 16-byte aligned and whole (a chunk a multiple of 16 bytes, the rows and experts on
     * 16-byte boundaries, Q8_0 rows of whole chunks): a piece is then always inside the tensor and its row, and
     * copy() issues it without the range checks and the byte-by-byte fallback (the SASS of the grouped Q4_K pair
     * spent ~175 of ~500 instructions a warp a chunk on them; H100 ncu, 2026-12-25-k2core24). The same bytes to
     * the same places. */
    bool aligned;

    __device__ __forceinline__ void init(const ig_params &p, const uint8_t *wbase, int n0, const int *xrow, int m_count,
                                         int tid) {
        aligned = p.aligned_ok && CB % 16 == 0 &&
                  ((p.row_bytes | p.expert_stride | (size_t)(uintptr_t)wbase) & 15) == 0 &&
                  (T != MM_Q8_0 || p.n_in % IG_CHUNK == 0);
        wb = wbase + (size_t)n0 * p.row_bytes;
#pragma unroll
        for (int j = 0; j < NW; j++) {
            const int idx = tid + j * IG_THREADS, r = idx / PPR, pc = idx % PPR, o = n0 + r;
            /* aligned: a row's CB / 16 pieces, its last (PPR - 1: a misaligned row's spill) idle */
            const bool live = idx < BO * PPR && o < p.n_out && !(aligned && 16 * pc >= CB);
            const unsigned place = (unsigned)(r * p.sbp + 16 * pc);
            woff[j] = (unsigned)((size_t)r * p.row_bytes) + (aligned ? 16u * pc : 0u);
            wdst[j] = !live ? ~0u : aligned ? place : place << 1 | (unsigned)pc;
        }
#pragma unroll
        for (int j = 0; j < NA; j++) {
            const int idx = tid + j * IG_THREADS, i = idx / PA, pc = idx % PA;
            const bool live = idx < m_count * PA;
            aoff[j] = live ? (unsigned)((size_t)xrow[i] * IG_ACS + 16 * pc) : 0u;
            adst[j] = live ? (unsigned)(BO * p.sbp + i * IG_ACS + 16 * pc) : ~0u;
        }
    }

    /* chunk c into the stage at dst (ig_copy_chunk's bytes and places, PREQ) */
    __device__ __forceinline__ void copy(const ig_params &p, int c, uint8_t *dst) const {
        const unsigned sd = (unsigned)__cvta_generic_to_shared(dst);
        const uint8_t *xa = p.xq + (size_t)c * p.xq_rows * IG_ACS;
#pragma unroll
        for (int j = 0; j < NA; j++)
            if (adst[j] != ~0u)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sd + adst[j]), "l"(xa + aoff[j])
                             : "memory");
        const uint8_t *wc = wb + (size_t)c * CB;
        /* aligned: the offsets summed in 32 bits (a block's rows span < 4 GiB), one 64-bit add a piece: W3's weight
         * copy 62 -> 37 SASS instructions a chunk; no change measured in the passes (H100, 2027-01-23-pfd44) */
        if (aligned) {
            const unsigned co = (unsigned)c * (unsigned)CB;
#pragma unroll
            for (int j = 0; j < NW; j++)
                if (wdst[j] != ~0u)
                    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sd + wdst[j]),
                                 "l"(wb + (co + woff[j]))
                                 : "memory");
            return;
        }
        const int nbk = T == MM_Q8_0 ? min(8, p.n_in / 32 - 8 * c) : 1;
        const int cb = T == MM_Q8_0 ? nbk * MM_Q8_0_BYTES : CB;
#pragma unroll
        for (int j = 0; j < NW; j++) {
            if (wdst[j] == ~0u) continue;
            const uint8_t *src = wc + woff[j];
            const uint8_t *q = (const uint8_t *)((uintptr_t)src & ~(uintptr_t)15) + 16 * (wdst[j] & 31u);
            if (q >= src + cb) continue;
            const unsigned place = wdst[j] >> 1 & ~15u;
            if (q >= p.w_lo && q + 16 <= p.w_end) {
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sd + place), "l"(q) : "memory");
            } else {
                uint8_t *d = dst + place;
                for (int i = 0; i < 16; i++)
                    if (q + i >= p.w_lo && q + i < p.w_end) d[i] = q[i];
            }
        }
    }
};

/* Q5_K's fifth-bit words of rows r0 (w0) and r1 (w1) for this lane (0 for Q4_K). */
template <int T>
__device__ __forceinline__ void ig_k_high(const uint8_t *w0, const uint8_t *w1, int tig, int &h0a, int &h0b, int &h1a,
                                          int &h1b) {
    h0a = h0b = h1a = h1b = 0;
    if (T == MM_Q5_K) {
        h0a = ig_ld32(w0 + 16 + 4 * tig), h0b = ig_ld32(w0 + 32 + 4 * tig);
        h1a = ig_ld32(w1 + 16 + 4 * tig), h1b = ig_ld32(w1 + 32 + 4 * tig);
    }
}

/* A Q4_K / Q5_K super-block's canonical terms x_d * (d * sum_q - dmin * sum_m) from its integer sums, added to
 * partial 1 (second) or 0 of each live tile. */
template <int NT, int PL>
__device__ __forceinline__ void ig_k_terms(const uint8_t *w0, const uint8_t *w1, const uint8_t *const (&xc0)[NT],
                                           const uint8_t *const (&xc1)[NT], const bool (&live)[NT], bool second,
                                           const int (&sq)[NT][4], const int (&smn)[NT][4], float (&acc)[NT][PL][4]) {
    const float d0 = ig_f16(w0), dm0 = ig_f16(w0 + 2), d1 = ig_f16(w1), dm1 = ig_f16(w1 + 2);
#pragma unroll
    for (int i = 0; i < NT; i++) {
        if (!live[i]) continue;
        const float xd0 = *(const float *)xc0[i], xd1 = *(const float *)xc1[i];
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const float d = q < 2 ? d0 : d1, dm = q < 2 ? dm0 : dm1, xd = q & 1 ? xd1 : xd0;
            const float t = __fmul_rn(xd, __fsub_rn(__fmul_rn(d, (float)sq[i][q]), __fmul_rn(dm, (float)smn[i][q])));
            if (second) /* a branch: a register array takes no runtime index */
                acc[i][1 % PL][q] = __fadd_rn(acc[i][1 % PL][q], t);
            else
                acc[i][0][q] = __fadd_rn(acc[i][0][q], t);
        }
    }
}

/* One Q4_K / Q5_K super-block (a 256-value chunk) of weight rows r0 (w0) and r1 = r0 + 8 (w1, both in a stage)
 * against the NT row tiles of 8 rows: tile i's B fragment row at xb[i] (its row g) and its C columns' rows at
 * xc0[i], xc1[i] (rows 2 tig, 2 tig + 1; each a 304-byte chunk: scale, 256 codes, 16 pair sums). The integer
 * sums of the 8 sub-blocks (scales and mins applied exactly), then the canonical term x_d * (d * sum_q - dmin *
 * sum_m) added to partial 1 (second) or 0: the same operations for igemm_kernel and igp_kernel. */
template <int T, int NT, int PL>
__device__ __forceinline__ void ig_k_superblock(const uint8_t *w0, const uint8_t *w1, const uint8_t *const (&xb)[NT],
                                                const uint8_t *const (&xc0)[NT], const uint8_t *const (&xc1)[NT],
                                                const bool (&live)[NT], int tig, bool second, float (&acc)[NT][PL][4]) {
    const unsigned s00 = ig_ld32(w0 + 4), s01 = ig_ld32(w0 + 8), s02 = ig_ld32(w0 + 12);
    const unsigned s10 = ig_ld32(w1 + 4), s11 = ig_ld32(w1 + 8), s12 = ig_ld32(w1 + 12);
    constexpr int qo = T == MM_Q4_K ? 16 : 48;
    int sq[NT][4] = {}, smn[NT][4] = {};
    int h0a, h0b, h1a, h1b;
    ig_k_high<T>(w0, w1, tig, h0a, h0b, h1a, h1b);
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int cq = j >> 1;
        int a0, a1, a2, a3;
        mm_k4_frag<T>(j, ig_ld32(w0 + qo + 32 * cq + 4 * tig), ig_ld32(w1 + qo + 32 * cq + 4 * tig),
                      ig_ld32(w0 + qo + 32 * cq + 16 + 4 * tig), ig_ld32(w1 + qo + 32 * cq + 16 + 4 * tig), h0a, h0b,
                      h1a, h1b, a0, a1, a2, a3);
        int sc0, m0, sc1, m1;
        mm_k4_scale_min_words(j, s00, s01, s02, &sc0, &m0);
        mm_k4_scale_min_words(j, s10, s11, s12, &sc1, &m1);
#pragma unroll
        for (int i = 0; i < NT; i++) {
            if (!live[i]) continue;
            int cc[4] = {0, 0, 0, 0};
            mma_s8_k32(cc, a0, a1, a2, a3, ig_ld32(xb[i] + 4 + 32 * j + 4 * tig),
                       ig_ld32(xb[i] + 20 + 32 * j + 4 * tig));
            const int16_t *bs0 = (const int16_t *)(xc0[i] + 4 + 256), *bs1 = (const int16_t *)(xc1[i] + 4 + 256);
            const int xs0 = bs0[2 * j] + bs0[2 * j + 1], xs1 = bs1[2 * j] + bs1[2 * j + 1];
            sq[i][0] += sc0 * cc[0], sq[i][1] += sc0 * cc[1], sq[i][2] += sc1 * cc[2], sq[i][3] += sc1 * cc[3];
            smn[i][0] += m0 * xs0, smn[i][1] += m0 * xs1, smn[i][2] += m1 * xs0, smn[i][3] += m1 * xs1;
        }
    }
    ig_k_terms<NT, PL>(w0, w1, xc0, xc1, live, second, sq, smn, acc);
}

/* ig_k_superblock's integer sums in fewer instructions (CLOVER_CUDA_IG_K2, on unless 0): the same integers, so the
 * same bits. Its SASS spent ~45 instructions a sub-block on one mma (H100 build): each 32-byte code run loaded
 * twice (once a nibble half), the scales and mins cut out one at a time, and the mins' activation sums read as
 * four 16-bit loads and two adds a sub-block. Here a run's four words are loaded once for both of its sub-blocks,
 * the eight 6-bit scales and mins of a row are unpacked four at a time (bytes of two words each), and the mins'
 * sums are taken once a super-block: sum_m = sum_j m_j * (s_2j + s_2j+1), first with dp2a (two int16 x two int8
 * products and the accumulator: exact, m_j doubled into a byte pair by one byte_perm), since 2026-12-07 by two IMMA
 * a row tile (ig_k_mins_mma: opmix34 counted the dp2a chain at 4 IDP + ~1 load of the pair's 51 instructions an
 * IMMA), and each sub-block's scale byte is cut by one byte_perm.
 * Integer sums in any order are the same integers, so the canonical terms are unchanged. H100
 * (bench/device-runs/2026-12-25-k2core24): a block commit 12.44 -> 11.83 ms (the experts' pair 108.8 -> 99.7 us a
 * layer, down 61.6 -> 56.4), a 32-row preview -0.14 ms; the pair is then at 52% of DRAM peak, its top stall the
 * chunk barrier. */
template <int T, int NT, int PL>
__device__ __forceinline__ void ig_k_superblock2(const uint8_t *w0, const uint8_t *w1, const uint8_t *const (&xb)[NT],
                                                 const uint8_t *const (&xc0)[NT], const uint8_t *const (&xc1)[NT],
                                                 const bool (&live)[NT], int tig, bool second,
                                                 float (&acc)[NT][PL][4]) {
    const unsigned s00 = ig_ld32(w0 + 4), s01 = ig_ld32(w0 + 8), s02 = ig_ld32(w0 + 12);
    const unsigned s10 = ig_ld32(w1 + 4), s11 = ig_ld32(w1 + 8), s12 = ig_ld32(w1 + 12);
    unsigned sc0[2], mn0[2], sc1[2], mn1[2]; /* sub-block j's scale and min: byte j & 3 of word j >> 2, rows r0, r1 */
    ig_k_scale_min4(s00, s01, s02, sc0, mn0);
    ig_k_scale_min4(s10, s11, s12, sc1, mn1);
    constexpr int qo = T == MM_Q4_K ? 16 : 48;
    const uint8_t *q0 = w0 + qo + 4 * tig, *q1 = w1 + qo + 4 * tig;
    int sq[NT][4] = {}, smn[NT][4] = {};
    int h0a, h0b, h1a, h1b;
    ig_k_high<T>(w0, w1, tig, h0a, h0b, h1a, h1b);
#pragma unroll
    for (int cq = 0; cq < 4; cq++) { /* the 32-byte run of sub-blocks 2cq (low nibbles) and 2cq + 1 (high) */
        const int q0a = ig_ld32(q0 + 32 * cq), q1a = ig_ld32(q1 + 32 * cq);
        const int q0b = ig_ld32(q0 + 32 * cq + 16), q1b = ig_ld32(q1 + 32 * cq + 16);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int j = 2 * cq + h;
            int a0, a1, a2, a3;
            mm_k4_frag<T>(j, q0a, q1a, q0b, q1b, h0a, h0b, h1a, h1b, a0, a1, a2, a3);
            const int sa = (int)__byte_perm(sc0[j >> 2], 0u, 0x4440u | (j & 3)); /* byte j & 3, zero-extended */
            const int sb = (int)__byte_perm(sc1[j >> 2], 0u, 0x4440u | (j & 3));
#pragma unroll
            for (int i = 0; i < NT; i++) {
                if (!live[i]) continue;
                int cc[4] = {0, 0, 0, 0};
                mma_s8_k32(cc, a0, a1, a2, a3, ig_ld32(xb[i] + 4 + 32 * j + 4 * tig),
                           ig_ld32(xb[i] + 20 + 32 * j + 4 * tig));
                sq[i][0] += sa * cc[0], sq[i][1] += sa * cc[1], sq[i][2] += sb * cc[2], sq[i][3] += sb * cc[3];
            }
        }
    }
    /* sum_m of each live tile: two IMMA (ig_k_mins_mma) */
    const int ma0 = ig_k_mins_a(mn0, tig), ma1 = ig_k_mins_a(mn1, tig);
#pragma unroll
    for (int i = 0; i < NT; i++)
        if (live[i]) ig_k_mins_mma(ma0, ma1, xb[i], tig, smn[i]);
    ig_k_terms<NT, PL>(w0, w1, xc0, xc1, live, second, sq, smn, acc);
}

/* ig_k_superblock2 for the two super-blocks of an S2 stage (chunks c and c + 1, c even) of one live row tile
 * (WIDE: NT = 1): the integer sums of both in one straight run, sub-block by sub-block, so the fragment decodes and
 * mma of one overlap the other's (no branch between them); then chunk c's term into partial 0 and chunk c + 1's
 * into partial 1, as ig_k_superblock2 adds them one chunk at a time: the same integers and float operations. */
template <int T, int PL>
__device__ __forceinline__ void ig_k_superblock2_x2(const uint8_t *const (&w0)[2], const uint8_t *const (&w1)[2],
                                                    const uint8_t *const (&xb)[2][1],
                                                    const uint8_t *const (&xc0)[2][1],
                                                    const uint8_t *const (&xc1)[2][1], int tig,
                                                    float (&acc)[1][PL][4]) {
    constexpr int qo = T == MM_Q4_K ? 16 : 48;
    unsigned sc0[2][2], mn0[2][2], sc1[2][2], mn1[2][2];
    int h0a[2], h0b[2], h1a[2], h1b[2];
    int sq[2][1][4] = {}, smn[2][1][4] = {};
#pragma unroll
    for (int h = 0; h < 2; h++) { /* the scales and mins as ig_k_superblock2 cuts them */
        const unsigned s00 = ig_ld32(w0[h] + 4), s01 = ig_ld32(w0[h] + 8), s02 = ig_ld32(w0[h] + 12);
        const unsigned s10 = ig_ld32(w1[h] + 4), s11 = ig_ld32(w1[h] + 8), s12 = ig_ld32(w1[h] + 12);
        ig_k_scale_min4(s00, s01, s02, sc0[h], mn0[h]);
        ig_k_scale_min4(s10, s11, s12, sc1[h], mn1[h]);
        ig_k_high<T>(w0[h], w1[h], tig, h0a[h], h0b[h], h1a[h], h1b[h]);
    }
#pragma unroll
    for (int cq = 0; cq < 4; cq++) {
        int q0a[2], q1a[2], q0b[2], q1b[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint8_t *q0 = w0[h] + qo + 4 * tig + 32 * cq, *q1 = w1[h] + qo + 4 * tig + 32 * cq;
            q0a[h] = ig_ld32(q0), q1a[h] = ig_ld32(q1), q0b[h] = ig_ld32(q0 + 16), q1b[h] = ig_ld32(q1 + 16);
        }
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int j = 2 * cq + hh;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int a0, a1, a2, a3;
                mm_k4_frag<T>(j, q0a[h], q1a[h], q0b[h], q1b[h], h0a[h], h0b[h], h1a[h], h1b[h], a0, a1, a2, a3);
                const int sa = (int)__byte_perm(sc0[h][j >> 2], 0u, 0x4440u | (j & 3));
                const int sb = (int)__byte_perm(sc1[h][j >> 2], 0u, 0x4440u | (j & 3));
                int cc[4] = {0, 0, 0, 0};
                mma_s8_k32(cc, a0, a1, a2, a3, ig_ld32(xb[h][0] + 4 + 32 * j + 4 * tig),
                           ig_ld32(xb[h][0] + 20 + 32 * j + 4 * tig));
                sq[h][0][0] += sa * cc[0], sq[h][0][1] += sa * cc[1], sq[h][0][2] += sb * cc[2],
                    sq[h][0][3] += sb * cc[3];
            }
        }
    }
#pragma unroll
    for (int h = 0; h < 2; h++) /* sum_m: two IMMA a super-block (ig_k_mins_mma) */
        ig_k_mins_mma(ig_k_mins_a(mn0[h], tig), ig_k_mins_a(mn1[h], tig), xb[h][0], tig, smn[h][0]);
    const bool live[1] = {true};
    ig_k_terms<1, PL>(w0[0], w1[0], xc0[0], xc1[0], live, false, sq[0], smn[0], acc); /* chunk c: partial 0 */
    ig_k_terms<1, PL>(w0[1], w1[1], xc0[1], xc1[1], live, true, sq[1], smn[1], acc);  /* chunk c + 1: partial 1 */
}

/* WIDE (MoE tiles of <= 8 rows): 8 warps over 128 outputs, each warp one m-tile, every partial.
 * S2 > 0 (CLOVER_CUDA_IG_X2; WIDE Q4_K / Q5_K with K2 only): the ring's chunks waited for and barriered two at a
 * time (S2 stages of two chunks, 2 * S2 chunk slots), the two super-blocks of a stage summed together
 * (ig_k_superblock2_x2). Chunk 2s goes to partial 0 and 2s + 1 to partial 1, as chunk parity gives them in the
 * one-chunk form: every partial's terms in the same order, so the same bits.
 * TALL (NTL > 0: igemm_tall_kernel, grouped Q4_K / Q5_K tiles of <= 32 slots): 4 warps' m-tiles over 64 outputs,
 * warp w m-tile w & 3 and the chunks of parity kh = w >> 2 (partial p_kh, as the 16-output form's halves) for the
 * tile's first NTL n-tiles of 8 slots: each A fragment decoded once for NTL mma. NTL is the tile's live n-tiles
 * rounded up to 1, 2 or 4 (igemm_tall_kernel picks it a tile), so the sums run on a constant-true mask.
 * igemm_tile is one block's work (igemm_kernel's body): dense, output tile blockIdx.y of row tile blockIdx.x;
 * grouped, output tile blockIdx.x of the grouping pass's tile ty (below the tile count: the caller checked). It
 * returns with the block's stores issued; under the tile loop igemm_kernel's barrier then frees the stages, xrow
 * and yrow for the next tile. */
template <int T, bool PREQ, bool WIDE, bool K2, int S2, int NTL = 0, int NS1 = IG_STAGES>
__device__ __forceinline__ void igemm_tile(const ig_params &p, unsigned ty) {
    constexpr bool TALL = NTL > 0;
    static_assert(!TALL || (PREQ && !WIDE && S2 == 0 && (T == MM_Q4_K || T == MM_Q5_K) && NTL <= 4),
                  "igemm_tile: the tall tiles are the grouped K-quants' with the rows in scratch");
    constexpr int BO = WIDE ? 8 * IG_BO : TALL ? 4 * IG_BO : IG_BO;
    constexpr int CPS = S2 ? 2 : 1, NST = S2 ? S2 : NS1, NSLOT = CPS * NST;
    extern __shared__ __align__(16) uint8_t sm[];
    /* WIDE: + ty >> 30 (0: ty < 2^17) keeps ptxas from hoisting the threads' set-up (the copy pieces' places)
     * out of igemm_kernel's tile loop, where it held ~25 more registers across the chunk loop */
    const int tid = threadIdx.x + (WIDE || TALL ? (int)(ty >> 30) : 0);
    const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, tig = lane & 3;
    /* PREQ: each stage is the weights' chunk then the rows' chunk; else the rows (whole n_in) come first */
    const int sts = BO * p.sbp + (PREQ ? p.br * IG_ACS : 0);
    uint8_t *act = sm, *stages = sm + (PREQ ? 0 : p.br * p.act_stride);
    int *xrow = (int *)(stages + NSLOT * sts), *yrow = xrow + p.br;
    int n0, m_count, e = 0;
    if (p.perm == NULL) {
        const int m0 = blockIdx.x * p.br;
        n0 = blockIdx.y * BO;
        m_count = min(p.br, p.n_rows - m0);
        for (int i = tid; i < p.br; i += IG_THREADS) xrow[i] = yrow[i] = m0 + i;
    } else {
        const int32_t *t = p.tiles + 3 * ty;
        n0 = blockIdx.x * BO;
        e = t[0];
        m_count = t[2];
        for (int i = tid; i < p.br; i += IG_THREADS) {
            const int s = i < m_count ? p.perm[t[1] + i] : 0;
            yrow[i] = s;
            xrow[i] = p.x_per_slot ? s : s / p.k;
        }
    }
    const uint8_t *wbase = p.w + (size_t)e * p.expert_stride;
    constexpr int CB = ig_chunk_bytes<T>();
    const int nchunks = (p.n_in + IG_CHUNK - 1) / IG_CHUNK;
    __syncthreads(); /* xrow */
    ig_pieces<T, BO> pcs; /* PREQ: the copy pieces, set once a tile */
    if (PREQ) pcs.init(p, wbase, n0, xrow, m_count, tid);
    /* the first chunks in flight before anything else (one commit group a stage) */
#pragma unroll
    for (int s = 0; s < NST - 1; s++) {
#pragma unroll
        for (int h = 0; h < CPS; h++) {
            const int cs = CPS * s + h;
            if (cs < nchunks) {
                if (PREQ)
                    pcs.copy(p, cs, stages + cs * sts);
                else
                    ig_copy_chunk<T, PREQ, BO>(p, wbase, n0, cs, stages + cs * sts, xrow, m_count);
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    /* the block's rows, rounded to 8 bits as matmul_act.cu does, a warp per piece */
    if (!PREQ) {
        const int q8 = T == MM_Q8_0, wide = !q8 || p.n_in % 256 == 0, qb = wide ? 256 : 32;
        const int nb = p.n_in / qb, bb = q8 ? (wide ? 8 : 1) * MM_ACT32_BYTES : MM_ACTK_BYTES;
        for (int j = warp; j < m_count * nb; j += IG_THREADS / 32) {
            const int i = j / nb, b = j % nb;
            const float *src = p.x + (size_t)xrow[i] * p.n_in + (size_t)b * qb;
            uint8_t *dst = act + i * p.act_stride + b * bb;
            if (!q8)
                mm_act_block_k(src, dst, lane);
            else if (wide)
                mm_act_blocks_32x8(src, dst, lane);
            else
                mm_act_block_32(src, dst, lane);
        }
    }
    /* warp w: the block's 16 outputs for the 8 rows of tile w&3, and half of the canonical order's partials
     * (kh = w>>2): Q8_0 blocks 4kh..4kh+3 of each chunk (partials p_{4kh..4kh+3}), K-quants the chunks of
     * parity kh (partial p_kh); the two halves meet at the end in the tree's last addition */
    constexpr int NT = TALL ? NTL : 1, NS = TALL ? 1 : 4, PL = T == MM_Q8_0 ? (WIDE ? 8 : 4) : (WIDE ? 2 : 1);
    const int mt = WIDE ? warp : TALL ? warp & 3 : 0, nt0 = WIDE || TALL ? 0 : warp & 3, kh = WIDE ? 0 : warp >> 2;
    bool live[NT];
    float acc[NT][PL][4];
    /* this thread's activation rows: B fragments (row g of each tile) and the C columns (2tig, 2tig+1), as
     * offsets from the rows' base (PREQ: the stage's chunk; else the whole rows) */
    int xb[NT], xc0[NT], xc1[NT];
    const int astr = PREQ ? IG_ACS : p.act_stride;
#pragma unroll
    for (int i = 0; i < NT; i++) {
        const int nt = nt0 + NS * i;
        live[i] = 8 * nt < m_count;
        xb[i] = (8 * nt + g) * astr;
        xc0[i] = (8 * nt + 2 * tig) * astr;
        xc1[i] = xc0[i] + astr;
#pragma unroll
        for (int j = 0; j < PL; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[i][j][q] = 0.0f;
    }
    const int r0 = 16 * mt + g, r1 = r0 + 8;
    const uint8_t *wrow0 = wbase + (size_t)(n0 + r0) * p.row_bytes, *wrow1 = wbase + (size_t)(n0 + r1) * p.row_bytes;

    const int nsteps = (nchunks + CPS - 1) / CPS;
    for (int st = 0; st < nsteps; st++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(NST - 2) : "memory");
        __syncthreads(); /* step st's chunks everywhere (and the rows); every warp is past step st-1 */
#pragma unroll
        for (int h = 0; h < CPS; h++) {
            const int cn = CPS * (st + NST - 1) + h;
            if (cn < nchunks) {
                uint8_t *sd = stages + (cn % NSLOT) * sts;
                if (PREQ)
                    pcs.copy(p, cn, sd);
                else
                    ig_copy_chunk<T, PREQ, BO>(p, wbase, n0, cn, sd, xrow, m_count);
            }
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        if constexpr (CPS == 2) { /* S2: the stage's two super-blocks (chunks c, c + 1: partials 0, 1), or a last */
            const int c = 2 * st;
            const uint8_t *w0[2], *w1[2], *pb[2][1], *pc0[2][1], *pc1[2][1];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const uint8_t *stg = stages + ((c + h) % NSLOT) * sts, *ab = stg + BO * p.sbp;
                w0[h] = stg + r0 * p.sbp + (((uintptr_t)wrow0 + (size_t)(c + h) * CB) & 15);
                w1[h] = stg + r1 * p.sbp + (((uintptr_t)wrow1 + (size_t)(c + h) * CB) & 15);
                pb[h][0] = ab + xb[0], pc0[h][0] = ab + xc0[0], pc1[h][0] = ab + xc1[0];
            }
            if (!live[0]) continue; /* (a WIDE tile has a slot: never taken) */
            if (c + 1 < nchunks)
                ig_k_superblock2_x2<T>(w0, w1, pb, pc0, pc1, tig, acc);
            else
                ig_k_superblock2<T, NT, PL>(w0[0], w1[0], pb[0], pc0[0], pc1[0], live, tig, false, acc);
            continue;
        }
        const int c = st;
        /* a warp whose row tile is empty sums nothing (a WIDE tile always has a slot); past this check the sums see
         * only `on` (constant true): the chunk's code is one branch-free run, so the compiler overlaps one
         * sub-block's mma with the next's decode instead of waiting out each mma (H100 ncu of a commit's expert
         * pair, bench/device-runs/2027-01-03-xtile25: a branch between every two sub-blocks, `wait` the top stall) */
        if (!live[0]) continue;
        bool on[NT]; /* TALL: the first NTL n-tiles, whatever their slots (a dead row's sums are never stored) */
#pragma unroll
        for (int i = 0; i < NT; i++) on[i] = true;
        const uint8_t *stg = stages + (c % NSLOT) * sts;
        const uint8_t *ab = PREQ ? stg + BO * p.sbp : act; /* the rows' bytes of this chunk at ab + xo */
        const uint8_t *w0 = stg + r0 * p.sbp + (((uintptr_t)wrow0 + (size_t)c * CB) & 15);
        const uint8_t *w1 = stg + r1 * p.sbp + (((uintptr_t)wrow1 + (size_t)c * CB) & 15);
        if (T == MM_Q8_0) {
            const int nbk = min(8, p.n_in / 32 - 8 * c);
#pragma unroll
            for (int bl = 0; bl < (WIDE ? 8 : 4); bl++) { /* block 8c + blk of the chunk: partial blk, slot bl */
                const int blk = (WIDE ? 0 : 4 * kh) + bl;
                if (blk >= nbk) break;
                const uint8_t *b0 = w0 + blk * MM_Q8_0_BYTES, *b1 = w1 + blk * MM_Q8_0_BYTES;
                const int a0 = ig_ld32a2(b0 + 2 + 4 * tig), a1 = ig_ld32a2(b1 + 2 + 4 * tig);
                const int a2 = ig_ld32a2(b0 + 18 + 4 * tig), a3 = ig_ld32a2(b1 + 18 + 4 * tig);
                const float dw0 = ig_f16(b0), dw1 = ig_f16(b1);
                const int xo = ((PREQ ? 0 : 8 * c) + blk) * MM_ACT32_BYTES;
#pragma unroll
                for (int i = 0; i < NT; i++) {
                    if (!on[i]) continue;
                    int cc[4] = {0, 0, 0, 0};
                    mma_s8_k32(cc, a0, a1, a2, a3, ig_ld32(ab + xb[i] + xo + 4 + 4 * tig),
                               ig_ld32(ab + xb[i] + xo + 20 + 4 * tig));
                    const float xd0 = *(const float *)(ab + xc0[i] + xo), xd1 = *(const float *)(ab + xc1[i] + xo);
                    acc[i][bl][0] = __fadd_rn(acc[i][bl][0], __fmul_rn(__fmul_rn(dw0, xd0), (float)cc[0]));
                    acc[i][bl][1] = __fadd_rn(acc[i][bl][1], __fmul_rn(__fmul_rn(dw0, xd1), (float)cc[1]));
                    acc[i][bl][2] = __fadd_rn(acc[i][bl][2], __fmul_rn(__fmul_rn(dw1, xd0), (float)cc[2]));
                    acc[i][bl][3] = __fadd_rn(acc[i][bl][3], __fmul_rn(__fmul_rn(dw1, xd1), (float)cc[3]));
                }
            }
        } else if (!WIDE && (c & 1) != kh) { /* the other half's super-block */
        } else if (T == MM_Q4_K || T == MM_Q5_K) {
            const int xo = PREQ ? 0 : c * MM_ACTK_BYTES;
            const uint8_t *pb[NT], *pc0[NT], *pc1[NT];
#pragma unroll
            for (int i = 0; i < NT; i++) pb[i] = ab + xb[i] + xo, pc0[i] = ab + xc0[i] + xo, pc1[i] = ab + xc1[i] + xo;
            if (K2) /* partial c mod 2 */
                ig_k_superblock2<T, NT, PL>(w0, w1, pb, pc0, pc1, on, tig, WIDE && (c & 1), acc);
            else
                ig_k_superblock<T, NT, PL>(w0, w1, pb, pc0, pc1, on, tig, WIDE && (c & 1), acc);
        } else { /* Q6_K: 16 groups of 16 values, value 16G + l = 128h + 32k + 16half + l */
            const int xo = PREQ ? 0 : c * MM_ACTK_BYTES;
            int is[NT][4];
#pragma unroll
            for (int i = 0; i < NT; i++)
#pragma unroll
                for (int q = 0; q < 4; q++) is[i][q] = 0;
#pragma unroll
            for (int G = 0; G < 16; G++) {
                const int h = G >> 3, k = (G >> 1) & 3, l = 16 * (G & 1) + 4 * tig;
                const int qlo = 64 * h + (k & 1 ? 32 : 0) + l, qhi = 128 + 32 * h + l, lsh = k & 2 ? 4 : 0;
                int a0 = ((ig_ld32a2(w0 + qlo) >> lsh) & 0x0F0F0F0F) | (((ig_ld32a2(w0 + qhi) >> (2 * k)) & 0x03030303) << 4);
                int a1 = ((ig_ld32a2(w1 + qlo) >> lsh) & 0x0F0F0F0F) | (((ig_ld32a2(w1 + qhi) >> (2 * k)) & 0x03030303) << 4);
                a0 = (int)__vsub4((unsigned)a0, 0x20202020u);
                a1 = (int)__vsub4((unsigned)a1, 0x20202020u);
                const int sc0 = ((const int8_t *)w0)[192 + G], sc1 = ((const int8_t *)w1)[192 + G];
#pragma unroll
                for (int i = 0; i < NT; i++) {
                    if (!on[i]) continue;
                    int cc[4] = {0, 0, 0, 0};
                    mma_s8_k16(cc, a0, a1, ig_ld32(ab + xb[i] + xo + 4 + 16 * G + 4 * tig));
                    is[i][0] += sc0 * cc[0], is[i][1] += sc0 * cc[1], is[i][2] += sc1 * cc[2], is[i][3] += sc1 * cc[3];
                }
            }
            const float d0 = ig_f16(w0 + 208), d1 = ig_f16(w1 + 208);
#pragma unroll
            for (int i = 0; i < NT; i++) {
                if (!on[i]) continue;
                const float xd0 = *(const float *)(ab + xc0[i] + xo), xd1 = *(const float *)(ab + xc1[i] + xo);
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const float d = q < 2 ? d0 : d1, xd = q & 1 ? xd1 : xd0;
                    const float t = __fmul_rn(__fmul_rn(d, xd), (float)is[i][q]);
                    if (WIDE && (c & 1))
                        acc[i][1 % PL][q] = __fadd_rn(acc[i][1 % PL][q], t);
                    else
                        acc[i][0][q] = __fadd_rn(acc[i][0][q], t);
                }
            }
        }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    if (WIDE) { /* every partial in this thread: the whole tree */
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const int o = n0 + (q < 2 ? r0 : r1), r = 2 * tig + (q & 1);
            const float v =
                PL == 8 ? __fadd_rn(__fadd_rn(__fadd_rn(acc[0][0][q], acc[0][1 % PL][q]),
                                              __fadd_rn(acc[0][2 % PL][q], acc[0][3 % PL][q])),
                                    __fadd_rn(__fadd_rn(acc[0][4 % PL][q], acc[0][5 % PL][q]),
                                              __fadd_rn(acc[0][6 % PL][q], acc[0][7 % PL][q])))
                        : __fadd_rn(acc[0][0][q], acc[0][1 % PL][q]);
            if (live[0] && o < p.n_out && r < m_count) p.y[(size_t)yrow[r] * p.n_out + o] = v;
        }
        return; /* (the tile loop's barrier follows in igemm_kernel) */
    }
    __syncthreads(); /* the stages are free: the halves meet there */
    float *red = (float *)stages; /* [4 row tiles][32 lanes][4]; TALL [4 m-tiles][NT n-tiles][32 lanes][4] */
    float L[NT][4];
#pragma unroll
    for (int i = 0; i < NT; i++)
#pragma unroll
        for (int q = 0; q < 4; q++)
            L[i][q] = PL >= 4 ? __fadd_rn(__fadd_rn(acc[i][0][q], acc[i][1 % PL][q]),
                                          __fadd_rn(acc[i][2 % PL][q], acc[i][3 % PL][q]))
                              : acc[i][0][q];
    if (kh == 1)
#pragma unroll
        for (int i = 0; i < NT; i++)
#pragma unroll
            for (int q = 0; q < 4; q++) red[(((TALL ? mt * NT + i : nt0) * 32) + lane) * 4 + q] = L[i][q];
    __syncthreads();
    if (kh == 0) {
#pragma unroll
        for (int i = 0; i < NT; i++) {
            if (!live[i]) continue;
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int o = n0 + (q < 2 ? r0 : r1), r = 8 * (nt0 + NS * i) + 2 * tig + (q & 1);
                /* Q8_0: ((p0+p1)+(p2+p3)) + ((p4+p5)+(p6+p7)); K-quants: p0 + p1 */
                const float v = __fadd_rn(L[i][q], red[(((TALL ? mt * NT + i : nt0) * 32) + lane) * 4 + q]);
                if (o < p.n_out && r < m_count) p.y[(size_t)yrow[r] * p.n_out + o] = v;
            }
        }
    }
}

/* A pair launch (p.w_up: gate and up on grid.z): block z 1 takes the second product, its weights at the same
 * offsets from their base and its own outputs. */
__device__ __forceinline__ void ig_pair_pick(ig_params &p) {
    if (p.w_up && blockIdx.z) {
        const ptrdiff_t d = p.w_up - p.w;
        p.w += d, p.w_lo += d, p.w_end += d;
        p.y = p.y_up;
    }
}

/* The tile loop (WIDE grouped launches, CLOVER_CUDA_MOE_TILE_LOOP, on unless 0): grid.y is then min(the worst-case
 * tile count, ~2 waves of blocks; ig_tile_rows), and block y walks the tiles y, y + gridDim.y, ... below the count,
 * each with igemm_tile's arithmetic unchanged (the bits of one block a tile). With the loop off (grid.y the worst
 * case) every block has at most its own tile. A barrier between tiles: every warp is past the last tile's reads of
 * the stages (its ring drained: cp.async.wait_all in igemm_tile), xrow and yrow before the next tile writes them. */
template <int T, bool PREQ, bool WIDE, bool K2, int S2, int NS1 = IG_STAGES>
__global__ void __launch_bounds__(IG_THREADS, S2 ? 2 : NS1 == IG_W3_STAGES ? IG_W3_BLOCKS : 1)
    igemm_kernel(ig_params p) {
    static_assert(S2 == 0 || (PREQ && WIDE && K2 && (T == MM_Q4_K || T == MM_Q5_K) && S2 >= 2),
                  "igemm_kernel: two chunks a stage in the grouped K-quants' WIDE form only");
    static_assert(NS1 == IG_STAGES || (NS1 == IG_W3_STAGES && S2 == 0 && PREQ && WIDE),
                  "igemm_kernel: the 3-stage ring (three blocks an SM) in the WIDE form only");
    ig_pair_pick(p);
    pdl_wait(); /* the tiles and the rows are earlier kernels' outputs (cuda_pdl.cuh) */
    pdl_trigger();
    if (p.perm != NULL && (int)blockIdx.y >= *p.ntiles) return;
    for (unsigned ty = blockIdx.y;;) {
        igemm_tile<T, PREQ, WIDE, K2, S2, 0, NS1>(p, ty);
        if (!WIDE || p.perm == NULL) return; /* dense, and the non-WIDE tiles: one a block */
        ty += gridDim.y;
        if ((int)ty >= *p.ntiles) return;
        __syncthreads(); /* the last tile's reads of the stages, xrow and yrow are over */
    }
}

/* WR (on unless CLOVER_CUDA_IG_WR=0; cuda_ig_wr_set): the grouped Q4_K WIDE tiles with a ring per warp instead of a
 * ring per block. Why: ncu of the 16-row AR step's W3 pair (H100, bench/device-runs/
 * 2027-01-23-pfd44) showed its warps waiting on the chunk barrier as soon as their data came earlier (an L2 prefetch
 * halved long_scoreboard and doubled the barrier's stall): a block's 8 warps move in lockstep, chunk by chunk. Here
 * warp w copies its own 16 weight rows of each chunk (144 pieces of 16 bytes, the rows 144 bytes apart: 4 g + tig
 * is a different bank for every lane of the fragment loads) into its own 3-stage ring and waits only on its own
 * cp.async groups (and a __syncwarp); the tile's 8 rows of 8-bit activations, every chunk of them, are copied once
 * a tile behind the tile's one barrier (19.5 KB at n_in 2048: ~75 KB a block, three an SM, as W3). Each warp's sums
 * are igemm_tile's WIDE ones (ig_k_superblock2, chunk c's term into partial c & 1, then p0 + p1): the same bits
 * (test_cuda_moe_tiles). Taken where W3 would be, for aligned rows and experts (16-byte pieces) only. Measured (H100,
 * bench/device-runs/2027-01-24-wr45, two rounds against W3's block ring): the 16-row AR step 1,990 / 2,004 -> 2,066 /
 * 2,066 agg tok/s (+3.2%), a commit 10.00 / 10.00 -> 9.73 / 9.77 ms, the previews (AUTO: not theirs) within 0.05
 * ms; ncu: the down 51 -> 46.4 us, the pair 86.5 us as before (DRAM 69%, a warp's issues 11.2 cycles apart: the
 * barrier stall is gone and long_scoreboard leads). */
enum { IG_WR_WARP_ROWS = 16 };
template <int T>
__global__ void __launch_bounds__(IG_THREADS, IG_W3_BLOCKS) igemm_warp_kernel(ig_params p) {
    static_assert(T == MM_Q4_K, "igemm_warp_kernel: the grouped Q4_K tiles");
    constexpr int CB = ig_chunk_bytes<T>(), PPR = CB / 16, WP = IG_WR_WARP_ROWS * PPR, NWP = (WP + 31) / 32;
    constexpr int NST = IG_W3_STAGES, PA = IG_ACS / 16, WSTS = IG_WR_WARP_ROWS * CB; /* a warp's stage: 2,304 B */
    static_assert(CB % 16 == 0, "igemm_warp_kernel: whole 16-byte pieces a row");
    ig_pair_pick(p);
    pdl_wait(); /* the tiles and the rows are earlier kernels' outputs (cuda_pdl.cuh) */
    pdl_trigger();
    if ((int)blockIdx.y >= *p.ntiles) return;
    extern __shared__ __align__(16) uint8_t sm[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tig = lane & 3;
    const int nchunks = p.n_in / IG_CHUNK, n0 = blockIdx.x * (8 * IG_BO), wr0 = n0 + IG_WR_WARP_ROWS * warp;
    uint8_t *act = sm, *ring = sm + (size_t)nchunks * 8 * IG_ACS + (size_t)warp * NST * WSTS;
    /* this lane's weight pieces of each chunk: piece j * 32 + lane of the warp's 144 (row pi / PPR, 16 bytes pc) */
    unsigned woff[NWP], wdst[NWP];
#pragma unroll
    for (int j = 0; j < NWP; j++) {
        const int pi = j * 32 + lane, r = pi / PPR, pc = pi % PPR;
        const bool live = pi < WP && wr0 + r < p.n_out;
        woff[j] = (unsigned)((size_t)r * p.row_bytes) + 16u * pc;
        wdst[j] = live ? (unsigned)(r * CB + 16 * pc) : ~0u;
    }
    const unsigned ring_s = (unsigned)__cvta_generic_to_shared(ring);
    /* chunk c of the warp's rows from wb into its stage c % NST (the offsets summed in 32 bits, as ig_pieces) */
    auto copy_chunk = [&](const uint8_t *wb, int c) {
        const unsigned sd = ring_s + (unsigned)(c % NST) * WSTS, co = (unsigned)c * CB;
#pragma unroll
        for (int j = 0; j < NWP; j++)
            if (wdst[j] != ~0u)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sd + wdst[j]), "l"(wb + (co + woff[j]))
                             : "memory");
    };
    for (unsigned ty = blockIdx.y;;) {
        const int32_t *t = p.tiles + 3 * ty;
        const int e = t[0], first = t[1], m_count = t[2];
        /* the tile's rows, every chunk: act[c][i] = chunk c of row i (one commit group, before the ring's) */
        const unsigned act_s = (unsigned)__cvta_generic_to_shared(act);
        for (int idx = tid; idx < nchunks * m_count * PA; idx += IG_THREADS) {
            const int pc = idx % PA, ci = idx / PA, i = ci % m_count, c = ci / m_count;
            const int s = p.perm[first + i], xr = p.x_per_slot ? s : s / p.k;
            const uint8_t *src = p.xq + ((size_t)c * p.xq_rows + xr) * IG_ACS + 16 * pc;
            const unsigned dst = act_s + (unsigned)((c * 8 + i) * IG_ACS + 16 * pc);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        const uint8_t *wb = p.w + (size_t)e * p.expert_stride + (size_t)wr0 * p.row_bytes;
#pragma unroll
        for (int s = 0; s < NST - 1; s++) { /* the warp's first chunks (a commit group each) */
            if (s < nchunks) copy_chunk(wb, s);
            asm volatile("cp.async.commit_group;" ::: "memory");
        }
        asm volatile("cp.async.wait_group %0;" ::"n"(NST - 1) : "memory"); /* this thread's rows */
        __syncthreads();                                                     /* everyone's rows */
        float acc[1][2][4];
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int q = 0; q < 4; q++) acc[0][h][q] = 0.0f;
        const bool on[1] = {true};
        for (int c = 0; c < nchunks; c++) {
            asm volatile("cp.async.wait_group %0;" ::"n"(NST - 2) : "memory");
            __syncwarp(); /* chunk c's pieces from every lane; every lane past chunk c - 1, whose stage is reused */
            if (c + NST - 1 < nchunks) copy_chunk(wb, c + NST - 1);
            asm volatile("cp.async.commit_group;" ::: "memory");
            const uint8_t *stg = ring + (c % NST) * WSTS, *ab = act + (size_t)c * 8 * IG_ACS;
            const uint8_t *pb[1] = {ab + g * IG_ACS}, *pc0[1] = {ab + 2 * tig * IG_ACS},
                          *pc1[1] = {ab + (2 * tig + 1) * IG_ACS};
            ig_k_superblock2<T, 1, 2>(stg + g * CB, stg + (g + 8) * CB, pb, pc0, pc1, on, tig, c & 1, acc);
        }
        asm volatile("cp.async.wait_all;" ::: "memory");
#pragma unroll
        for (int q = 0; q < 4; q++) { /* igemm_tile's WIDE store: p0 + p1 */
            const int o = wr0 + (q < 2 ? g : g + 8), r = 2 * tig + (q & 1);
            if (o < p.n_out && r < m_count)
                p.y[(size_t)p.perm[first + r] * p.n_out + o] = __fadd_rn(acc[0][0][q], acc[0][1][q]);
        }
        ty += gridDim.y;
        if ((int)ty >= *p.ntiles) return;
        __syncthreads(); /* every warp is past this tile's rows before the next tile's copy */
    }
}

/* TALL (cuda_moe_tall_set; the grouped Q4_K / Q5_K products of a preview routed inside its coreset): the grouping
 * pass's tiles of <= 32 slots of one expert, 64 outputs a block, on the tile loop's grid (as the WIDE launches).
 * Why: a coreset preview's ~8 kept experts each take all 32 rows, and the WIDE form's tiles of 8 slots x 128 outputs
 * decode every weight fragment once per 8 slots (4 tiles an expert, each walking the expert's K alone: ~500
 * instructions a warp a chunk, the pair ~18 us a layer on an H100 for ~9.4 MB of weights; H100 ncu,
 * bench/device-runs/2027-01-04-prof26). Here warp w decodes the A fragments of m-tile w & 3 in the chunks of parity
 * w >> 2 once for up to 4 mma (igemm_tile's TALL form). Bits: a slot's outputs are the 16-output form's partials
 * p0 (even super-blocks) + p1 (odd), each term formed by ig_k_superblock2 / ig_k_superblock as every form forms it:
 * the canonical order, whatever the tile's size or neighbours (test_cuda_matmul's test_moe_tall: bit for bit the
 * WIDE form). Each tile takes the smallest of the 1-, 2- and 4-n-tile bodies that holds its slots. The integer sums
 * are ig_k_superblock2's whatever CLOVER_CUDA_IG_K2 says (the same integers as ig_k_superblock's; with the older
 * sums ptxas spilled at two blocks an SM). Measured (H200, bench/device-runs/2027-01-07-tall29): the decode saved is
 * not what bounds a preview's pair (22.0 us a layer against WIDE's 17.3: the longer chain a block), while its down
 * (one chunk a warp) gains (9.8 against 11.6); off by default. */
template <int T>
__global__ void __launch_bounds__(IG_THREADS, 2) igemm_tall_kernel(ig_params p) {
    ig_pair_pick(p);
    pdl_wait(); /* the tiles and the rows are earlier kernels' outputs (cuda_pdl.cuh) */
    pdl_trigger();
    if ((int)blockIdx.y >= *p.ntiles) return;
    for (unsigned ty = blockIdx.y;;) {
        const int m = p.tiles[3 * ty + 2];
        if (m > 16)
            igemm_tile<T, true, false, true, 0, 4>(p, ty);
        else if (m > 8)
            igemm_tile<T, true, false, true, 0, 2>(p, ty);
        else
            igemm_tile<T, true, false, true, 0, 1>(p, ty);
        ty += gridDim.y;
        if ((int)ty >= *p.ntiles) return;
        __syncthreads(); /* the last tile's reads of the stages (its halves' meeting too), xrow and yrow are over */
    }
}

/* Q8_0 with the rows in scratch (PREQ), tiles of up to 32 rows (not WIDE): the form of every dense Q8_0 chunk
 * product of the backend. igemm_kernel's layout gives warp w the 8 rows of tile w&3 and 4 of the 8 partials,
 * so each A fragment (a weight block, decoded from its 2-byte aligned bytes with its f16 scale) is decoded by
 * 4 warps, and its copy loop recomputes every piece's address each chunk: ~95 instructions an mma, issue-
 * bound at 13-16 us a 4096 x 2048 product whatever the rows (ncu, bench/device-runs/cuda-matmul-notes.md). Here warp w owns
 * partial p_w alone, i.e. block w of every 256-value chunk, for all of the block's row tiles: each weight
 * block is decoded once for up to 4 mma (one a row tile), and the copy pieces' addresses are set once and
 * advanced by a constant a chunk (a Q8_0 chunk is 272 bytes, a multiple of 16, so a row's alignment within
 * the stage never changes). Same terms, each partial's terms added in the same block order, the same tree
 * ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)) through shared memory: the bits of igemm_kernel and of the decode
 * kernel (test_row_invariance).
 * S2 > 0 (CLOVER_CUDA_IG_X2): the ring's chunks waited for and barriered two at a time (S2 stages of two chunks,
 * the same 2 * S2 chunk slots), both chunks' fragments loaded and their mma issued before the float adds, chunk
 * 2s's term into each partial before chunk 2s + 1's: the same additions in the same order, so the same bits. */
template <int S2>
__global__ void __launch_bounds__(IG_THREADS, 3) igemm_q8_kernel(ig_params p) {
    constexpr int BO = IG_BO, CB = 8 * MM_Q8_0_BYTES, PPR = (CB + 15) / 16 + 1, PA = IG_ACS / 16, NT = 4;
    /* chunks a stage, stages, chunk slots of the ring (chunk c in slot c % NSLOT) */
    constexpr int CPS = S2 ? 2 : 1, NST = S2 ? S2 : IG_STAGES, NSLOT = CPS * NST;
    static_assert(NST >= 2 && NSLOT >= IG_STAGES, "igemm_q8_kernel: the ring");
    /* the fixed piece arrays below hold every piece (rows: <= NT * 8 of 19 pieces; weights: BO rows of 18);
     * warp w owns block w of a 256-value chunk (8 warps, 8 blocks); the partials' reduction (8 warps x NT tiles
     * x 32 lanes x 4) fits in the stages of the smallest tile (8 rows; ig_pad gives sbp >= CB + 16) */
    static_assert(NT * 8 * PA <= 3 * IG_THREADS && BO * PPR <= 2 * IG_THREADS, "igemm_q8_kernel: copy pieces");
    static_assert(IG_THREADS / 32 == 8 && IG_CHUNK / 32 == 8, "igemm_q8_kernel: a warp per Q8_0 block of a chunk");
    static_assert(8 * NT * 32 * 4 * sizeof(float) <= (size_t)IG_STAGES * (BO * (CB + 16) + 8 * IG_ACS),
                  "igemm_q8_kernel: the reduction overlays the stages");
    extern __shared__ __align__(16) uint8_t sm[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tig = lane & 3;
    const int sts = BO * p.sbp + p.br * IG_ACS;
    uint8_t *stages = sm;
    int *xrow = (int *)(stages + NSLOT * sts), *yrow = xrow + p.br;
    int n0, m_count, e = 0;
    /* the product's weights, their bytes, its outputs: p's, or under ig_launch_seg this block's product's (picked
     * with constant indices: a dynamic index into p would copy it to local memory) */
    const uint8_t *pw = p.w, *pw_lo = p.w_lo, *pw_end = p.w_end;
    int pn_out = p.n_out;
    float *py = p.y;
    if (p.perm == NULL) {
        const int m0 = blockIdx.x * p.br;
        int by = (int)blockIdx.y;
        if (p.n_seg > 0) { /* block-uniform: the last product whose first tile is at or before this block */
            int t0 = 0;
            pw = p.seg_w[0], pn_out = p.seg_n_out[0], py = p.seg_y[0];
#pragma unroll
            for (int sg = 1; sg < IG_SEG_MAX; sg++)
                if (sg < p.n_seg && by >= p.seg_t0[sg])
                    pw = p.seg_w[sg], pn_out = p.seg_n_out[sg], py = p.seg_y[sg], t0 = p.seg_t0[sg];
            by -= t0;
            pw_lo = pw, pw_end = pw + (size_t)pn_out * p.row_bytes;
        }
        n0 = by * BO;
        /* launched with PDL (p.pf): the block's weight rows start towards L2 while the kernel before finishes;
         * the first row tile's blocks only (the others read the same rows) */
        if (p.pf && blockIdx.x == 0 && n0 < pn_out)
            pdl_prefetch_l2(pw + (size_t)n0 * p.row_bytes, (size_t)min(BO, pn_out - n0) * p.row_bytes);
        pdl_wait();
        pdl_trigger();
        m_count = min(p.br, p.n_rows - m0);
        for (int i = tid; i < p.br; i += IG_THREADS) xrow[i] = yrow[i] = m0 + i;
    } else {
        pdl_wait(); /* the tiles are an earlier kernel's */
        pdl_trigger();
        if ((int)blockIdx.y >= *p.ntiles) return;
        const int32_t *t = p.tiles + 3 * blockIdx.y;
        n0 = blockIdx.x * BO;
        e = t[0];
        m_count = t[2];
        for (int i = tid; i < p.br; i += IG_THREADS) {
            const int s = i < m_count ? p.perm[t[1] + i] : 0;
            yrow[i] = s;
            xrow[i] = p.x_per_slot ? s : s / p.k;
        }
    }
    const uint8_t *wbase = pw + (size_t)e * p.expert_stride;
    const int nchunks = (p.n_in + IG_CHUNK - 1) / IG_CHUNK, nblk = p.n_in / 32;
    __syncthreads(); /* xrow */
    /* this thread's copy pieces, set once: 16-byte pieces of the rows' chunk (<= 3) and of the weights (<= 2) */
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(stages);
    const size_t xstep = (size_t)p.xq_rows * IG_ACS; /* the rows' bytes of one chunk */
    const uint8_t *asrc[3];
    unsigned adst[3];
    bool alive[3];
#pragma unroll
    for (int j = 0; j < 3; j++) {
        const int idx = tid + j * IG_THREADS, i = idx / PA, pc = idx % PA;
        alive[j] = idx < m_count * PA;
        asrc[j] = p.xq + (size_t)(alive[j] ? xrow[i] : 0) * IG_ACS + 16 * pc;
        adst[j] = (unsigned)(BO * p.sbp + i * IG_ACS + 16 * pc);
    }
    const uint8_t *wq[2];
    unsigned wdst[2];
    int wrel[2]; /* the piece's offset from the row's first byte of the chunk (-15 .. CB) */
    bool wlive[2];
    /* every row 16-byte aligned and of whole chunks: a piece is always inside its row (ig_pieces.aligned's rule),
     * issued without the range checks; a row's last piece (a misaligned row's spill) idle */
    const bool aligned = p.aligned_ok && ((p.row_bytes | (size_t)(uintptr_t)wbase) & 15) == 0 && nblk % 8 == 0;
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int idx = tid + j * IG_THREADS, r = idx / PPR, pc = idx % PPR, o = n0 + r;
        wlive[j] = idx < BO * PPR && o < pn_out && !(aligned && 16 * pc >= CB);
        const uint8_t *src = wbase + (size_t)(wlive[j] ? o : 0) * p.row_bytes;
        const uint8_t *q = (const uint8_t *)((uintptr_t)src & ~(uintptr_t)15) + 16 * pc;
        wq[j] = q;
        wrel[j] = (int)(q - src);
        wdst[j] = (unsigned)(r * p.sbp + 16 * pc);
    }
    auto issue = [&](int c) {
        const unsigned st = sbase + (unsigned)((c % NSLOT) * sts);
#pragma unroll
        for (int j = 0; j < 3; j++)
            if (alive[j])
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(st + adst[j]), "l"(asrc[j] + (size_t)c * xstep)
                             : "memory");
        if (aligned) {
#pragma unroll
            for (int j = 0; j < 2; j++)
                if (wlive[j])
                    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(st + wdst[j]),
                                 "l"(wq[j] + (size_t)c * CB)
                                 : "memory");
            return;
        }
        const int cb = min(8, nblk - 8 * c) * MM_Q8_0_BYTES;
#pragma unroll
        for (int j = 0; j < 2; j++) {
            if (!wlive[j] || wrel[j] >= cb) continue;
            const uint8_t *q = wq[j] + (size_t)c * CB;
            if (q >= pw_lo && q + 16 <= pw_end) {
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(st + wdst[j]), "l"(q) : "memory");
            } else { /* the tensor's first or last bytes: byte by byte, inside it */
                uint8_t *d = stages + (c % NSLOT) * sts + wdst[j];
                for (int i = 0; i < 16; i++)
                    if (q + i >= pw_lo && q + i < pw_end) d[i] = q[i];
            }
        }
    };
#pragma unroll
    for (int s = 0; s < NST - 1; s++) { /* one commit group a stage */
#pragma unroll
        for (int h = 0; h < CPS; h++)
            if (CPS * s + h < nchunks) issue(CPS * s + h);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    const int r0 = g, r1 = g + 8;
    const int off0 = (int)(((uintptr_t)(wbase + (size_t)(n0 + r0) * p.row_bytes)) & 15);
    const int off1 = (int)(((uintptr_t)(wbase + (size_t)(n0 + r1) * p.row_bytes)) & 15);
    bool live[NT];
    float acc[NT][4];
#pragma unroll
    for (int i = 0; i < NT; i++) {
        live[i] = 8 * i < m_count;
#pragma unroll
        for (int q = 0; q < 4; q++) acc[i][q] = 0.0f;
    }
    const int nsteps = (nchunks + CPS - 1) / CPS;
    for (int s = 0; s < nsteps; s++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(NST - 2) : "memory");
        __syncthreads(); /* step s's chunks everywhere; every warp is past step s-1 */
#pragma unroll
        for (int h = 0; h < CPS; h++)
            if (CPS * (s + NST - 1) + h < nchunks) issue(CPS * (s + NST - 1) + h);
        asm volatile("cp.async.commit_group;" ::: "memory");
        const int c = CPS * s;
        if (warp >= nblk - 8 * c) continue; /* past the last block (n_in % 256 != 0) */
        if (CPS == 1) {
            const uint8_t *stg = stages + (c % NSLOT) * sts, *ab = stg + BO * p.sbp;
            const uint8_t *b0 = stg + r0 * p.sbp + off0 + warp * MM_Q8_0_BYTES;
            const uint8_t *b1 = stg + r1 * p.sbp + off1 + warp * MM_Q8_0_BYTES;
            const int a0 = ig_ld32a2(b0 + 2 + 4 * tig), a1 = ig_ld32a2(b1 + 2 + 4 * tig);
            const int a2 = ig_ld32a2(b0 + 18 + 4 * tig), a3 = ig_ld32a2(b1 + 18 + 4 * tig);
            const float dw0 = ig_f16(b0), dw1 = ig_f16(b1);
            const uint8_t *xa = ab + warp * MM_ACT32_BYTES;
            /* the row tiles' terms; lv a constant for the usual live counts (live is monotone: 8 i < m_count), so
             * that code is branch-free and the tiles' mma overlap (igemm_tile's `on`: the same operations) */
            auto tiles = [&](const bool (&lv)[NT]) {
#pragma unroll
                for (int i = 0; i < NT; i++) {
                    if (!lv[i]) continue;
                    const uint8_t *xb = xa + (8 * i + g) * IG_ACS, *xc = xa + (8 * i + 2 * tig) * IG_ACS;
                    int cc[4] = {0, 0, 0, 0};
                    mma_s8_k32(cc, a0, a1, a2, a3, ig_ld32(xb + 4 + 4 * tig), ig_ld32(xb + 20 + 4 * tig));
                    const float xd0 = *(const float *)xc, xd1 = *(const float *)(xc + IG_ACS);
                    acc[i][0] = __fadd_rn(acc[i][0], __fmul_rn(__fmul_rn(dw0, xd0), (float)cc[0]));
                    acc[i][1] = __fadd_rn(acc[i][1], __fmul_rn(__fmul_rn(dw0, xd1), (float)cc[1]));
                    acc[i][2] = __fadd_rn(acc[i][2], __fmul_rn(__fmul_rn(dw1, xd0), (float)cc[2]));
                    acc[i][3] = __fadd_rn(acc[i][3], __fmul_rn(__fmul_rn(dw1, xd1), (float)cc[3]));
                }
            };
            if (live[NT - 1]) { /* 32 rows (a preview's, a commit's) */
                const bool all[NT] = {true, true, true, true};
                tiles(all);
            } else if (live[1] && !live[2]) { /* 9..16 (a 16-sequence decode step) */
                const bool two[NT] = {true, true, false, false};
                tiles(two);
            } else if (!live[1]) { /* 2..8 */
                const bool one[NT] = {true, false, false, false};
                tiles(one);
            } else {
                tiles(live);
            }
            continue;
        }
        /* two chunks: h = 1 present unless the count is odd or its block is past the end (n_in % 256 != 0) */
        const bool two = c + 1 < nchunks && warp < nblk - 8 * (c + 1);
        int a[2][4];
        float dw[2][2];
        const uint8_t *xa[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int ch = two ? c + h : c; /* a lone chunk loads its own bytes twice: no branch between the two */
            const uint8_t *stg = stages + (ch % NSLOT) * sts;
            const uint8_t *b0 = stg + r0 * p.sbp + off0 + warp * MM_Q8_0_BYTES;
            const uint8_t *b1 = stg + r1 * p.sbp + off1 + warp * MM_Q8_0_BYTES;
            a[h][0] = ig_ld32a2(b0 + 2 + 4 * tig), a[h][1] = ig_ld32a2(b1 + 2 + 4 * tig);
            a[h][2] = ig_ld32a2(b0 + 18 + 4 * tig), a[h][3] = ig_ld32a2(b1 + 18 + 4 * tig);
            dw[h][0] = ig_f16(b0), dw[h][1] = ig_f16(b1);
            xa[h] = stg + BO * p.sbp + warp * MM_ACT32_BYTES;
        }
        auto tiles2 = [&](const bool (&lv)[NT]) { /* lv: as the one-chunk form's tiles() */
#pragma unroll
            for (int i = 0; i < NT; i++) {
                if (!lv[i]) continue;
                int cc[2][4];
                float xd[2][2];
#pragma unroll
                for (int h = 0; h < 2; h++) { /* both chunks' mma first */
                    const uint8_t *xb = xa[h] + (8 * i + g) * IG_ACS, *xc = xa[h] + (8 * i + 2 * tig) * IG_ACS;
                    cc[h][0] = cc[h][1] = cc[h][2] = cc[h][3] = 0;
                    mma_s8_k32(cc[h], a[h][0], a[h][1], a[h][2], a[h][3], ig_ld32(xb + 4 + 4 * tig),
                               ig_ld32(xb + 20 + 4 * tig));
                    xd[h][0] = *(const float *)xc, xd[h][1] = *(const float *)(xc + IG_ACS);
                }
#pragma unroll
                for (int h = 0; h < 2; h++) { /* then the terms, chunk c's before chunk c + 1's */
                    if (h == 1 && !two) break;
                    acc[i][0] = __fadd_rn(acc[i][0], __fmul_rn(__fmul_rn(dw[h][0], xd[h][0]), (float)cc[h][0]));
                    acc[i][1] = __fadd_rn(acc[i][1], __fmul_rn(__fmul_rn(dw[h][0], xd[h][1]), (float)cc[h][1]));
                    acc[i][2] = __fadd_rn(acc[i][2], __fmul_rn(__fmul_rn(dw[h][1], xd[h][0]), (float)cc[h][2]));
                    acc[i][3] = __fadd_rn(acc[i][3], __fmul_rn(__fmul_rn(dw[h][1], xd[h][1]), (float)cc[h][3]));
                }
            }
        };
        if (live[NT - 1]) {
            const bool all[NT] = {true, true, true, true};
            tiles2(all);
        } else if (live[1] && !live[2]) {
            const bool two[NT] = {true, true, false, false};
            tiles2(two);
        } else if (!live[1]) {
            const bool one[NT] = {true, false, false, false};
            tiles2(one);
        } else {
            tiles2(live);
        }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads(); /* the stages are free: the 8 partials meet there ([8 warps][4 tiles][32 lanes][4]) */
    float *red = (float *)stages;
#pragma unroll
    for (int i = 0; i < NT; i++)
        if (live[i])
#pragma unroll
            for (int q = 0; q < 4; q++) red[((warp * NT + i) * 32 + lane) * 4 + q] = acc[i][q];
    __syncthreads();
    if (warp < NT && live[warp]) { /* warp i writes row tile i */
        const int i = warp;
        float pp[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int q = 0; q < 4; q++) pp[j][q] = red[((j * NT + i) * 32 + lane) * 4 + q];
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const int o = n0 + (q < 2 ? r0 : r1), r = 8 * i + 2 * tig + (q & 1);
            const float v = __fadd_rn(__fadd_rn(__fadd_rn(pp[0][q], pp[1][q]), __fadd_rn(pp[2][q], pp[3][q])),
                                      __fadd_rn(__fadd_rn(pp[4][q], pp[5][q]), __fadd_rn(pp[6][q], pp[7][q])));
            if (o < pn_out && r < m_count) py[(size_t)yrow[r] * pn_out + o] = v;
        }
    }
}

/* PERSIST (grouped Q4_K / Q5_K experts with few slots a pass, a preview's; CLOVER_CUDA_MOE_PERSIST=1, off by
 * default, cuda_moe_persist_set): the WIDE form's arithmetic on a fixed grid of ~1-2 blocks an SM that walks the
 * grouping pass's tiles. Why: the WIDE launch's grid.y is the worst-case tile count (288 for 256 slots on 256
 * experts) while a preview fills ~32 (32 rows x top-8 on ~8 experts), so 1,000-4,000 empty blocks (each with
 * ~100 KiB of shared memory, each reading the tile count) queue behind the working ones; and each used expert's
 * rows are re-read by 4 tiles of 8 slots, each block walking K alone (the down product: 2 chunks, mostly latency).
 * Work split: an item is (tile, 128 outputs); block b takes items b, b + G, b + 2G, ... (G = gridDim.x; outputs
 * fastest, so the items of one tile, and the tiles of one expert, run side by side and share L2). At the start
 * the block resolves its items' tiles (expert, first output, count, the slots' rows) into shared memory (the
 * grid is sized on the host so that a block has at most `maxk`), then streams every item's chunks through ONE
 * 4-stage cp.async ring: the next item's first chunks are in flight while this item's last are summed, with no
 * barrier beyond the ring's one a chunk. Tiles hold TS = 8, 16 or 32 slots of one expert (NT = TS / 8 n-tiles
 * a warp): each A fragment (two weight rows' nibbles and scales) is decoded once for NT mma, and an expert's
 * rows are read once per TS slots. Bits: warp w owns m-tile w (16 outputs) for all NT n-tiles with both of the
 * K-quants' partials, exactly as the WIDE form's warp does for its one n-tile: term_c = x_d * (d * (float)sq -
 * dmin * (float)smn) (integer sq, smn), p_{c mod 2} += term_c in chunk order, y = p0 + p1. A row's outputs do
 * not depend on its tile, so they are the WIDE form's bits whatever TS (test_moe_persist: bit for bit).
 * Estimate (H200, the 35B-A3B preview: 8 experts x 32 slots): gate / up 512 x 2048 at TS 8: 128 items, one an SM,
 * 8 chunks of ~420 instructions a warp (8 warps on 4 schedulers: ~850 clocks a chunk) + ~2 us of start: ~5-7 us
 * (WIDE 19.4 us); down 2048 x 512 at TS 16: ~256 items on 2 blocks an SM, 2 chunks each: ~4-6 us (16.75 us). */
enum { IGP_THREADS = IG_THREADS };

template <int T, int NT>
__global__ void __launch_bounds__(IGP_THREADS, NT == 4 ? 1 : 2) igp_kernel(ig_params p, int maxk) {
    static_assert(T == MM_Q4_K || T == MM_Q5_K, "igp_kernel: the K-quants of 4 and 5 bits");
    constexpr int BO = 8 * IG_BO, TS = 8 * NT, CB = ig_chunk_bytes<T>(), PPR = (CB + 15) / 16 + 1, PA = IG_ACS / 16;
    constexpr int NW = (BO * PPR + IGP_THREADS - 1) / IGP_THREADS, NA = (TS * PA + IGP_THREADS - 1) / IGP_THREADS;
    extern __shared__ __align__(16) uint8_t sm[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tig = lane & 3;
    const int sts = BO * p.sbp + TS * IG_ACS; /* a stage: the weights' chunk, then the slots' rows' chunk */
    uint8_t *stages = sm;
    /* the block's items: [maxk][3] expert, first output, slots; [maxk][TS] each slot's row of xq and of y */
    int *dsc = (int *)(stages + IG_STAGES * sts), *dxr = dsc + 3 * maxk, *dyr = dxr + TS * maxk;
    const int ot = (p.n_out + BO - 1) / BO, G = (int)gridDim.x, b = (int)blockIdx.x;
    pdl_wait(); /* the tiles are an earlier kernel's (cuda_pdl.cuh) */
    pdl_trigger();
    const int nitems = min(*p.ntiles, p.tiles_cap) * ot;
    const int nk = b < nitems ? min(maxk, (nitems - 1 - b) / G + 1) : 0;
    if (nk == 0) return; /* the whole block: no barrier skipped by some threads only */
    for (int idx = tid; idx < nk * TS; idx += IGP_THREADS) {
        const int k = idx / TS, i = idx % TS, it = b + k * G;
        const int32_t *t = p.tiles + 3 * (it / ot);
        const int m = t[2], s = i < m ? p.perm[t[1] + i] : 0;
        dyr[idx] = s;
        dxr[idx] = p.x_per_slot ? s : s / p.k;
        if (i == 0) dsc[3 * k] = t[0], dsc[3 * k + 1] = it % ot * BO, dsc[3 * k + 2] = m;
    }
    __syncthreads(); /* the items */
    const int nchunks = p.n_in / IG_CHUNK, S = nk * nchunks; /* K-quants: n_in % 256 == 0 */
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(stages);
    /* chunk c of item k into stage st: ig_copy_chunk's bytes (PREQ) to the same places of a stage */
    auto issue = [&](int k, int c, int st) {
        const int n0 = dsc[3 * k + 1], m = dsc[3 * k + 2];
        const unsigned sd = sbase + (unsigned)(st * sts);
        const uint8_t *xq = p.xq + (size_t)c * p.xq_rows * IG_ACS;
#pragma unroll
        for (int j = 0; j < NA; j++) {
            const int idx = tid + j * IGP_THREADS, i = idx / PA, pc = idx % PA;
            if (idx < m * PA)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sd + BO * p.sbp + i * IG_ACS + 16 * pc),
                             "l"(xq + (size_t)dxr[k * TS + i] * IG_ACS + 16 * pc)
                             : "memory");
        }
        const uint8_t *wb = p.w + (size_t)dsc[3 * k] * p.expert_stride + (size_t)c * CB;
#pragma unroll
        for (int j = 0; j < NW; j++) {
            const int idx = tid + j * IGP_THREADS, r = idx / PPR, pc = idx % PPR, o = n0 + r;
            if (idx >= BO * PPR || o >= p.n_out) continue;
            const uint8_t *src = wb + (size_t)o * p.row_bytes;
            const uint8_t *q = (const uint8_t *)((uintptr_t)src & ~(uintptr_t)15) + 16 * pc;
            if (q >= src + CB) continue;
            if (q >= p.w_lo && q + 16 <= p.w_end) {
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sd + r * p.sbp + 16 * pc), "l"(q)
                             : "memory");
            } else { /* the tensor's first or last bytes: byte by byte, inside it */
                uint8_t *d = stages + st * sts + r * p.sbp + 16 * pc;
                for (int i = 0; i < 16; i++)
                    if (q + i >= p.w_lo && q + i < p.w_end) d[i] = q[i];
            }
        }
    };
    int ik = 0, ic = 0; /* the next (item, chunk) to copy */
#pragma unroll
    for (int s = 0; s < IG_STAGES - 1; s++) {
        if (s < S) {
            issue(ik, ic, s);
            if (++ic == nchunks) ic = 0, ik++;
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
    /* warp w: m-tile w (outputs n0 + 16w .. +15) x the item's NT n-tiles (slots 8i .. 8i+7), both partials */
    const int r0 = 16 * warp + g, r1 = r0 + 8;
    float acc[NT][2][4];
    bool live[NT] = {};
    const uint8_t *wrow0 = NULL, *wrow1 = NULL;
    int k = 0, c = 0; /* the (item, chunk) being summed */
    for (int s = 0; s < S; s++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(IG_STAGES - 2) : "memory");
        __syncthreads(); /* step s everywhere; every warp is past step s-1, whose stage the next copy takes */
        if (s + IG_STAGES - 1 < S) {
            issue(ik, ic, (s + IG_STAGES - 1) % IG_STAGES);
            if (++ic == nchunks) ic = 0, ik++;
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        if (c == 0) { /* a new item: its weight rows, its live n-tiles, the partials from 0 */
            const uint8_t *wbase = p.w + (size_t)dsc[3 * k] * p.expert_stride;
            const int n0 = dsc[3 * k + 1], m = dsc[3 * k + 2];
            wrow0 = wbase + (size_t)(n0 + r0) * p.row_bytes;
            wrow1 = wbase + (size_t)(n0 + r1) * p.row_bytes;
#pragma unroll
            for (int i = 0; i < NT; i++) {
                live[i] = 8 * i < m;
#pragma unroll
                for (int j = 0; j < 2; j++)
#pragma unroll
                    for (int q = 0; q < 4; q++) acc[i][j][q] = 0.0f;
            }
        }
        const uint8_t *stg = stages + (s % IG_STAGES) * sts, *ab = stg + BO * p.sbp;
        const uint8_t *w0 = stg + r0 * p.sbp + (((uintptr_t)wrow0 + (size_t)c * CB) & 15);
        const uint8_t *w1 = stg + r1 * p.sbp + (((uintptr_t)wrow1 + (size_t)c * CB) & 15);
        const uint8_t *pb[NT], *pc0[NT], *pc1[NT];
#pragma unroll
        for (int i = 0; i < NT; i++)
            pb[i] = ab + (8 * i + g) * IG_ACS, pc0[i] = ab + (8 * i + 2 * tig) * IG_ACS, pc1[i] = pc0[i] + IG_ACS;
        ig_k_superblock<T, NT, 2>(w0, w1, pb, pc0, pc1, live, tig, c & 1, acc); /* super-block c: partial c mod 2 */
        if (++c == nchunks) { /* the item's last chunk: y = p0 + p1 */
            const int n0 = dsc[3 * k + 1], m = dsc[3 * k + 2];
#pragma unroll
            for (int i = 0; i < NT; i++) {
                if (!live[i]) continue;
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    const int o = n0 + (q < 2 ? r0 : r1), r = 8 * i + 2 * tig + (q & 1);
                    const float v = __fadd_rn(acc[i][0][q], acc[i][1][q]);
                    if (o < p.n_out && r < m) p.y[(size_t)dyr[k * TS + r] * p.n_out + o] = v;
                }
            }
            c = 0, k++;
        }
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
}

/* The chunk-major 8-bit rows of PREQ: chunk c of row r at xq + (c * n_rows + r) * IG_ACS, written byte for byte
 * as matmul_act.cu writes them (a warp per 32-value block for Q8_0, per 256 for the K-quants). */
__global__ void ig_quantize_kernel(uint32_t type, const float *x, const float *u, int n_rows, int n_in,
                                   uint8_t *xq) {
    const int lane = threadIdx.x & 31;
    const size_t gw = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    pdl_wait(); /* x is the kernel before's output (cuda_pdl.cuh) */
    pdl_trigger();
    ig_quant_warp(type, x, u, n_rows, n_in, xq, gw, lane);
}

/* Shared-memory row stride of the 8-bit rows and of a weight chunk: 16-byte
 * multiples whose word count is 4 mod 8, so that the 8 rows a fragment load
 * touches fall in distinct banks. */
static int ig_pad(size_t bytes) {
    size_t s = (bytes + 15) / 16 * 16;
    while ((s / 4) % 8 != 4) s += 16;
    return (int)s;
}

/* The Q8_0 form igemm_q8_kernel: on unless CLOVER_CUDA_IG_Q8=0 (read once), so a device run can time and
 * compare both forms in one binary. */
static int g_ig_q8 = -1;
static int ig_q8_enabled(void) {
    if (g_ig_q8 < 0) {
        const char *v = getenv("CLOVER_CUDA_IG_Q8");
        g_ig_q8 = !(v && strcmp(v, "0") == 0);
    }
    return g_ig_q8;
}

/* Shared memory of a launch whose ring has `slots` chunk slots (IG_STAGES, or 2 * S2 in the X2 forms). */
static size_t ig_smem_slots(const ig_params *p, int slots) {
    if (p->xq)
        return (size_t)slots * ((size_t)p->bo * p->sbp + (size_t)p->br * IG_ACS) + 2 * sizeof(int) * p->br;
    return (size_t)p->br * p->act_stride + (size_t)slots * p->bo * p->sbp + 2 * sizeof(int) * p->br;
}
static size_t ig_smem(const ig_params *p) { return ig_smem_slots(p, IG_STAGES); }

int ig_plan(uint32_t type, size_t n_in, int max_rows, int preq, ig_params *p) {
    if (!mm_is_int(type)) return 0;
    p->bo = p->wide ? 8 * IG_BO : p->tall ? 4 * IG_BO : IG_BO;
    if (p->wide) max_rows = 8;
    if (p->tall) max_rows = 32;
    int cb = type == MM_Q8_0 ? 8 * MM_Q8_0_BYTES : (int)mm_block_bytes(type);
    p->sbp = ig_pad((size_t)cb + 16);
    p->act_stride = ig_pad(mm_act_row_bytes(type, n_in));
    p->xq = preq ? (const uint8_t *)16 : NULL; /* a placeholder for ig_smem; the caller sets it */
    int br = max_rows > 16 ? 32 : max_rows > 8 ? 16 : 8; /* the smallest tile that holds the rows */
    for (; br >= 8; br /= 2) {
        p->br = br;
        if (ig_smem(p) <= IG_SMEM_MAX) return 1;
    }
    return 0;
}

size_t ig_xq_bytes(size_t n_in, size_t n_rows) {
    return mm_align256((n_in + IG_CHUNK - 1) / IG_CHUNK * n_rows * IG_ACS);
}

void ig_quantize(uint32_t type, const float *x, size_t n_rows, size_t n_in, uint8_t *xq, cudaStream_t st,
                 const float *u) {
    const size_t warps = n_rows * (n_in / (type == MM_Q8_0 ? 32 : 256));
    if (warps)
        pdl_launch_rows(ig_quantize_kernel, dim3((unsigned)((warps + 7) / 8)), dim3(256), 0, st, type, x, u,
                        (int)n_rows, (int)n_in, xq);
}

/* ig_k_superblock2 for the Q4_K / Q5_K super-blocks: on unless CLOVER_CUDA_IG_K2=0 (cuda_ig_k2_set: 1/0, negative:
 * the environment again). */
static int g_ig_k2 = -1;
extern "C" void cuda_ig_k2_set(int on) { cuda_switch_set(&g_ig_k2, on); }

/* ig_pieces' aligned copies: on unless CLOVER_CUDA_IG_ALIGNED=0 (cuda_ig_aligned_set: 1/0, negative: the
 * environment again). */
static int g_ig_aligned = -1;
extern "C" void cuda_ig_aligned_set(int on) { cuda_switch_set(&g_ig_aligned, on); }

/* The X2 forms (two chunks a ring stage: half the waits and barriers, both chunks' decodes and mma before their
 * float adds; the same bits): igemm_q8_kernel<S2> and igemm_kernel's WIDE Q4_K / Q5_K form with K2. Measured on an
 * H100 (bench/device-runs/2026-12-30-x2ig24/RESULTS.md): they pay where a grid is under one wave (a 2048-output Q8_0
 * product of 32 rows 19.9 -> 16.6 us, the shared expert's pair 11.5 -> 9.1 us in bench_cuda_matmul) and on the
 * grouped Q4_K experts (a preview's pair 22.3 -> 19.3 us, a commit's 87.4 -> 83.3), and lose on the many-wave Q8_0
 * grids (the head 344 -> 371 us, the GDN's segmented product 23.4 -> 25.4). In the passes (x2ig24 RESULTS.md,
 * same file): the grouped tiles' X2 changed nothing in a preview or a commit under PDL and cost the 16-sequence AR
 * step 8-12% of its tokens/s (bench_batch, an H100, 2026-12-06). So CLOVER_CUDA_IG_X2 unset is AUTO: dense Q8_0
 * grids of 32-row tiles that fit one wave at 3 stages only; "1" every X2 form (A/B), "0" none.
 * cuda_ig_x2_set: 0 none, 1 all, 2 / 3 all at that many stages, 4 auto, negative: the environment again. Stages of
 * two chunks under "1": 3 where that keeps the one-chunk form's blocks an SM (cudaOccupancy...) or the grid is one
 * wave anyway, else 2; CLOVER_CUDA_IG_X2_STAGES=2 or 3 forces it (A/B timing), as cuda_ig_x2_set(2 or 3) does. */
enum { IG_X2_OFF = 0, IG_X2_ALL = 1, IG_X2_AUTO = 4 };
static int g_ig_x2 = INT_MIN, g_ig_x2_st = INT_MIN, g_ig_x2_force;
extern "C" void cuda_ig_x2_set(int on) {
    __atomic_store_n(&g_ig_x2, on < 0 ? INT_MIN : on == 0 ? IG_X2_OFF : on == IG_X2_AUTO ? IG_X2_AUTO : IG_X2_ALL,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&g_ig_x2_force, on == 2 || on == 3 ? on : 0, __ATOMIC_RELAXED);
}
/* IG_X2_OFF, IG_X2_ALL or IG_X2_AUTO */
static int ig_x2_mode(void) {
    int v = __atomic_load_n(&g_ig_x2, __ATOMIC_RELAXED);
    if (v == INT_MIN) {
        const char *e = getenv("CLOVER_CUDA_IG_X2");
        v = e && strcmp(e, "0") == 0 ? IG_X2_OFF : e && strcmp(e, "1") == 0 ? IG_X2_ALL : IG_X2_AUTO;
        __atomic_store_n(&g_ig_x2, v, __ATOMIC_RELAXED);
    }
    return v;
}
static unsigned long long g_ig_x2_launches[2]; /* X2 launches with 2 / 3 stages (tests: taken) */
extern "C" unsigned long long cuda_ig_x2_launches(int stages) {
    return stages == 2 || stages == 3 ? __atomic_load_n(&g_ig_x2_launches[stages - 2], __ATOMIC_RELAXED) : 0;
}

static pthread_mutex_t g_ig_mu = PTHREAD_MUTEX_INITIALIZER; /* adds to the two caches below */

/* Blocks an SM of kernel f at smem bytes of shared memory (f's attribute set to IG_SMEM_MAX first); a few
 * (kernel, smem) answers kept, so the query runs once a shape, not at every launch (nor in a graph capture after). */
static int ig_blocks_sm(const void *f, size_t smem) {
    static struct { const void *f; size_t smem; int bps; } cache[32];
    static int n; /* entries below n are whole (release / acquire); added under g_ig_mu */
    const int m = __atomic_load_n(&n, __ATOMIC_ACQUIRE);
    for (int i = 0; i < m; i++)
        if (cache[i].f == f && cache[i].smem == smem) return cache[i].bps;
    int bps = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, f, IG_THREADS, smem) != cudaSuccess) bps = 0;
    pthread_mutex_lock(&g_ig_mu);
    const int k = n;
    if (k < 32) {
        cache[k].f = f, cache[k].smem = smem, cache[k].bps = bps;
        __atomic_store_n(&n, k + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_ig_mu);
    return bps;
}
/* The stages of two chunks for an X2 launch of `blocks` blocks: f3 the 3-stage kernel, f1 the one-chunk form (both
 * ig_attr'd). 3 where its blocks an SM are the one-chunk form's, or where the grid fits one wave at its own (a
 * 2048-output product of 32 rows: 128 blocks, one an SM either way, so more chunks in flight cost no occupancy). */
static int ig_x2_stages(const ig_params *p, const void *f1, const void *f3, size_t blocks) {
    const int set = __atomic_load_n(&g_ig_x2_force, __ATOMIC_RELAXED);
    const int force = set ? set : cuda_env_int(&g_ig_x2_st, "CLOVER_CUDA_IG_X2_STAGES", 0);
    if ((force == 2 || force == 3) && ig_smem_slots(p, 2 * force) <= IG_SMEM_MAX) return force;
    if (ig_smem_slots(p, 6) > IG_SMEM_MAX) return 2;
    const int b1 = ig_blocks_sm(f1, ig_smem_slots(p, IG_STAGES)), b3 = ig_blocks_sm(f3, ig_smem_slots(p, 6));
    return b3 > 0 && (b3 >= b1 || blocks <= (size_t)b3 * (size_t)cuda_sm_count()) ? 3 : 2;
}

/* Once a kernel: the dynamic shared memory it may take (IG_SMEM_MAX). */
static void ig_attr(const void *f) {
    static const void *done[64];
    static int n; /* as ig_blocks_sm's */
    const int m = __atomic_load_n(&n, __ATOMIC_ACQUIRE);
    for (int i = 0; i < m; i++)
        if (done[i] == f) return;
    cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, IG_SMEM_MAX);
    pthread_mutex_lock(&g_ig_mu);
    const int k = n;
    if (k < 64) {
        done[k] = f;
        __atomic_store_n(&n, k + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_ig_mu);
}

/* The tile loop of igemm_kernel's WIDE grouped launches (see igemm_kernel): on unless CLOVER_CUDA_MOE_TILE_LOOP=0
 * (cuda_moe_tile_loop_set: 1/0, negative: the environment again). Why: grid.y is the worst-case tile count (288 for
 * 32 rows x top-8 of 256 experts) while a preview's coreset fills ~28-40 tiles, so ~90% of the blocks (each with
 * ~100 KB of shared memory) only read the tile count and leave, and the block scheduler's time on them showed in
 * the kernel trace (H100: the pair 20.3 us, the down 16.6 us for ~13 MB of weights a layer; the pair's second
 * product dispatched only after all of the first's 1,152 blocks). The cap on grid.y: about two waves of the
 * launch's blocks, ceil(2 * SMs * blocks an SM / (grid.x * grid.z)), at least 1, from the shapes only (a graph
 * replays it whatever the tiles); CLOVER_CUDA_MOE_TILE_CAP=N or cuda_moe_tile_cap_set(N) forces N (A/B timing,
 * tests; 0: by shape, negative: the environment again). */
static int g_tile_loop = -1, g_tile_cap = INT_MIN;
static unsigned long long g_tile_loop_launches;
extern "C" void cuda_moe_tile_loop_set(int on) { cuda_switch_set(&g_tile_loop, on); }
extern "C" void cuda_moe_tile_cap_set(int cap) {
    __atomic_store_n(&g_tile_cap, cap < 0 ? INT_MIN : cap, __ATOMIC_RELAXED);
}
extern "C" unsigned long long cuda_moe_tile_loop_launches(void) {
    return __atomic_load_n(&g_tile_loop_launches, __ATOMIC_RELAXED);
}
/* grid.y of a WIDE grouped launch of kernel f (ig_attr'd) at smem bytes: the worst case, or the cap below it */
static unsigned ig_tile_rows(const void *f, size_t smem, dim3 grid) {
    if (!cuda_switch_on(&g_tile_loop, "CLOVER_CUDA_MOE_TILE_LOOP", 1)) return grid.y;
    const int force = cuda_env_int(&g_tile_cap, "CLOVER_CUDA_MOE_TILE_CAP", 0);
    size_t cap = force > 0 ? (size_t)force : 0;
    if (!cap) {
        const int bps = ig_blocks_sm(f, smem);
        const size_t per_y = (size_t)grid.x * grid.z, waves = 2 * (size_t)cuda_sm_count() * (size_t)(bps > 0 ? bps : 1);
        cap = (waves + per_y - 1) / per_y;
    }
    if (cap < 1) cap = 1;
    if (cap >= grid.y) return grid.y;
    __atomic_fetch_add(&g_tile_loop_launches, 1, __ATOMIC_RELAXED);
    return (unsigned)cap;
}

template <int T, bool PREQ, bool WIDE, bool K2, int S2, int NS1 = IG_STAGES>
static void ig_launch_s(const ig_params *p, dim3 grid, cudaStream_t st) {
    const void *f = (const void *)igemm_kernel<T, PREQ, WIDE, K2, S2, NS1>;
    ig_attr(f);
    ig_params q = *p;
    q.aligned_ok = cuda_switch_on(&g_ig_aligned, "CLOVER_CUDA_IG_ALIGNED", 1);
    const size_t smem = ig_smem_slots(p, S2 ? 2 * S2 : NS1);
    if (WIDE && p->perm) grid.y = ig_tile_rows(f, smem, grid); /* the tile loop (igemm_kernel) */
    pdl_launch_rows(igemm_kernel<T, PREQ, WIDE, K2, S2, NS1>, grid, dim3(IG_THREADS), smem, st, q);
    if (S2) __atomic_fetch_add(&g_ig_x2_launches[S2 - 2], 1, __ATOMIC_RELAXED);
}

/* W3 (CLOVER_CUDA_IG_W3; cuda_ig_w3_set): the grouped Q4_K WIDE tiles on a 3-stage ring at three blocks an SM
 * instead of 4 stages at two. Why: ncu of the 16-row AR step's expert pair (H100, bench/device-runs/2027-01-20-arstep41
 * seq2) had it at 46% of issue slots and 63% of DRAM with both its registers (111) and its shared memory (~100 KB)
 * capping it at two blocks (4 warps a scheduler), a warp issuing every 7.4 cycles. The 3-stage ring still keeps two
 * chunks in flight a block; the registers fit 80 (ig_pieces' two-word form) without spills. Only Q4_K: Q5_K's and
 * Q6_K's stages (128 rows x 208 / 240 bytes) do not fit three blocks. The same arithmetic on the same chunks in the
 * same order: the same bits (test_cuda_moe_tiles). Measured (H100, bench/device-runs/2027-01-22-w3w43, two rounds):
 * the 16-row AR step 1,962 / 1,970 -> 2,016 / 2,003 agg tok/s (+2.2%; the pair 88.8 -> 83.5 us and the down 58.5 ->
 * 51.0 under ncu: six warps a scheduler, but each issuing every ~10 cycles, so the issue rate barely moved), the
 * commit 10.19 / 10.21 -> 10.04 / 10.01 ms, while a lone preview lost, with its coreset 0.2 ms (5.25 / 5.21 ->
 * 5.43 / 5.42) and without 0.14 (5.09 / 4.99 -> 5.20 / 5.15): its tiles fill under a wave, where the deeper ring of
 * a lone block is what counts. So the mode: 2 (AUTO, unset) every grouped launch outside a preview
 * (cuda_moe_args.preview), 1 every one, 0 none. Taken where the device holds three such blocks an SM
 * (cudaOccupancy...). */
static int g_ig_w3 = INT_MIN;
static unsigned long long g_ig_w3_launches;
enum { IG_W3_ALL = 1, IG_W3_AUTO = 2 }; /* (0: none) */
extern "C" void cuda_ig_w3_set(int mode) { __atomic_store_n(&g_ig_w3, mode < 0 ? INT_MIN : mode, __ATOMIC_RELAXED); }
extern "C" unsigned long long cuda_ig_w3_launches(void) { return __atomic_load_n(&g_ig_w3_launches, __ATOMIC_RELAXED); }

/* WR's switch (igemm_warp_kernel): on unless CLOVER_CUDA_IG_WR=0 (read once; cuda_ig_wr_set: 1/0, negative: the
 * environment again). Where WR does not apply (rows or experts not 16-byte aligned, the tile's rows over shared
 * memory at three blocks an SM) W3's block ring takes the launch. */
static int g_ig_wr = -1;
static unsigned long long g_ig_wr_launches;
extern "C" void cuda_ig_wr_set(int on) { cuda_switch_set(&g_ig_wr, on); }
extern "C" unsigned long long cuda_ig_wr_launches(void) {
    return __atomic_load_n(&g_ig_wr_launches, __ATOMIC_RELAXED);
}
/* igemm_warp_kernel in place of W3's launch where it applies (1: launched) */
template <int T>
static int ig_launch_wr(const ig_params *p, dim3 grid, cudaStream_t st) {
    if (!cuda_switch_on(&g_ig_wr, "CLOVER_CUDA_IG_WR", 1) || !p->xq || !p->perm || p->n_in % IG_CHUNK) return 0;
    if (((uintptr_t)p->w | (uintptr_t)p->w_up | p->row_bytes | p->expert_stride) & 15) return 0;
    const size_t smem = (size_t)(p->n_in / IG_CHUNK) * 8 * IG_ACS +
                        (size_t)8 * IG_W3_STAGES * IG_WR_WARP_ROWS * ig_chunk_bytes<T>();
    const void *f = (const void *)igemm_warp_kernel<T>;
    if (smem > IG_SMEM_MAX) return 0;
    ig_attr(f);
    if (ig_blocks_sm(f, smem) < IG_W3_BLOCKS) return 0;
    grid.y = ig_tile_rows(f, smem, grid); /* the tile loop's grid, as the WIDE launches */
    pdl_launch_rows(igemm_warp_kernel<T>, grid, dim3(IG_THREADS), smem, st, *p);
    __atomic_fetch_add(&g_ig_wr_launches, 1, __ATOMIC_RELAXED);
    return 1;
}

template <int T, bool PREQ, bool WIDE, bool K2>
static void ig_launch_k(const ig_params *p, dim3 grid, cudaStream_t st) {
    constexpr bool X2 = PREQ && WIDE && K2 && (T == MM_Q4_K || T == MM_Q5_K);
    const int mode = X2 ? ig_x2_mode() : IG_X2_OFF; /* AUTO: one-chunk here (see ig_x2_mode's comment) */
    if (X2 && mode == IG_X2_ALL) {
        constexpr int S2a = X2 ? 2 : 0, S2b = X2 ? 3 : 0; /* 0: never launched (the branch is dead) */
        ig_attr((const void *)igemm_kernel<T, PREQ, WIDE, K2, 0>);
        ig_attr((const void *)igemm_kernel<T, PREQ, WIDE, K2, S2b>);
        if (ig_x2_stages(p, (const void *)igemm_kernel<T, PREQ, WIDE, K2, 0>,
                         (const void *)igemm_kernel<T, PREQ, WIDE, K2, S2b>, (size_t)grid.x * grid.y * grid.z) == 3)
            ig_launch_s<T, PREQ, WIDE, K2, S2b>(p, grid, st);
        else
            ig_launch_s<T, PREQ, WIDE, K2, S2a>(p, grid, st);
        return;
    }
    if constexpr (PREQ && WIDE && K2 && T == MM_Q4_K) { /* W3 (above) */
        const void *f3 = (const void *)igemm_kernel<T, PREQ, WIDE, K2, 0, IG_W3_STAGES>;
        const int w3 = cuda_env_int(&g_ig_w3, "CLOVER_CUDA_IG_W3", IG_W3_AUTO);
        if (p->perm && (w3 == IG_W3_ALL || (w3 == IG_W3_AUTO && !p->preview))) {
            ig_attr(f3);
            if (ig_launch_wr<T>(p, grid, st)) return; /* WR (igemm_warp_kernel), where it is on and applies */
            if (ig_blocks_sm(f3, ig_smem_slots(p, IG_W3_STAGES)) >= IG_W3_BLOCKS) {
                ig_launch_s<T, PREQ, WIDE, K2, 0, IG_W3_STAGES>(p, grid, st);
                __atomic_fetch_add(&g_ig_w3_launches, 1, __ATOMIC_RELAXED);
                return;
            }
        }
    }
    ig_launch_s<T, PREQ, WIDE, K2, 0>(p, grid, st);
}

template <int T, bool PREQ, bool WIDE>
static void ig_launch_t(const ig_params *p, dim3 grid, cudaStream_t st) {
    constexpr bool K4 = T == MM_Q4_K || T == MM_Q5_K;
    if (K4 && cuda_switch_on(&g_ig_k2, "CLOVER_CUDA_IG_K2", 1))
        ig_launch_k<T, PREQ, WIDE, K4>(p, grid, st);
    else
        ig_launch_k<T, PREQ, WIDE, false>(p, grid, st);
}

static void ig_launch_q8(const ig_params *p, dim3 grid, cudaStream_t st) {
    ig_attr((const void *)igemm_q8_kernel<0>);
    ig_params q = *p;
    q.pf = pdl_rows_on(st); /* the weights' L2 prefetch only where the kernel may start early */
    q.aligned_ok = cuda_switch_on(&g_ig_aligned, "CLOVER_CUDA_IG_ALIGNED", 1);
    const int mode = ig_x2_mode();
    const size_t blocks = (size_t)grid.x * grid.y * grid.z;
    /* AUTO: a dense product's 32-row tiles, 3 stages, where the grid is one wave (at 8 and 16 rows X2 lost 4-6%) */
    if (mode == IG_X2_AUTO && p->perm == NULL && p->br == 32 && ig_smem_slots(p, 6) <= IG_SMEM_MAX) {
        ig_attr((const void *)igemm_q8_kernel<3>);
        const int b3 = ig_blocks_sm((const void *)igemm_q8_kernel<3>, ig_smem_slots(p, 6));
        if (b3 > 0 && blocks <= (size_t)b3 * (size_t)cuda_sm_count()) {
            pdl_launch_rows(igemm_q8_kernel<3>, grid, dim3(IG_THREADS), ig_smem_slots(p, 6), st, q);
            __atomic_fetch_add(&g_ig_x2_launches[1], 1, __ATOMIC_RELAXED);
            return;
        }
    }
    if (mode == IG_X2_ALL) {
        ig_attr((const void *)igemm_q8_kernel<2>);
        ig_attr((const void *)igemm_q8_kernel<3>);
        const int s2 = ig_x2_stages(p, (const void *)igemm_q8_kernel<0>, (const void *)igemm_q8_kernel<3>, blocks);
        if (s2 == 3)
            pdl_launch_rows(igemm_q8_kernel<3>, grid, dim3(IG_THREADS), ig_smem_slots(p, 6), st, q);
        else
            pdl_launch_rows(igemm_q8_kernel<2>, grid, dim3(IG_THREADS), ig_smem_slots(p, 4), st, q);
        __atomic_fetch_add(&g_ig_x2_launches[s2 - 2], 1, __ATOMIC_RELAXED);
        return;
    }
    pdl_launch_rows(igemm_q8_kernel<0>, grid, dim3(IG_THREADS), ig_smem(p), st, q);
}

/* ig_launch_seg's switch: on unless CLOVER_CUDA_IG_SEG=0 (on since its H200 run, bench/device-runs/2026-12-23-seg24:
 * bit for bit, memcheck clean; a 32-row block commit 14.37-14.46 -> 13.61-13.66 ms, a 32-row preview 8.44 -> 8.26-8.28
 * ms); cuda_ig_seg_set: 1/0 on/off, negative: the environment again. */
static int g_ig_seg = -1;
static unsigned long long g_ig_seg_launches;
extern "C" void cuda_ig_seg_set(int on) { cuda_switch_set(&g_ig_seg, on); }
extern "C" unsigned long long cuda_ig_seg_launches(void) {
    return __atomic_load_n(&g_ig_seg_launches, __ATOMIC_RELAXED);
}

int ig_launch_seg(uint32_t type, ig_params *p, const cuda_matmul_seg *seg, size_t n, unsigned grid_x,
                  cudaStream_t st) {
    if (!cuda_switch_on(&g_ig_seg, "CLOVER_CUDA_IG_SEG", 1) || type != MM_Q8_0 || !p->xq || p->perm || p->wide ||
        !ig_q8_enabled() || n < 2 || n > IG_SEG_MAX)
        return 0;
    unsigned t = 0;
    for (size_t i = 0; i < n; i++) {
        p->seg_t0[i] = (int)t;
        p->seg_w[i] = (const uint8_t *)seg[i].w;
        p->seg_n_out[i] = (int)seg[i].n_out;
        p->seg_y[i] = seg[i].y;
        t += ig_out_tiles(p, seg[i].n_out);
    }
    if (t > 65535) return 0;
    p->seg_t0[n] = (int)t;
    p->n_seg = (int)n;
    p->w = p->w_lo = p->seg_w[0], p->w_end = p->w + (size_t)p->seg_n_out[0] * p->row_bytes; /* never read: set */
    p->n_out = p->seg_n_out[0], p->y = p->seg_y[0];
    ig_launch_q8(p, dim3(grid_x, t), st);
    p->n_seg = 0;
    __atomic_fetch_add(&g_ig_seg_launches, 1, __ATOMIC_RELAXED);
    return 1;
}

/* TALL's mode: CLOVER_CUDA_MOE_TALL (read once; cuda_moe_tall_set: 0, 1 or 2, negative: the environment again):
 * 1 the narrowed passes, 2 every grouped K-quant product the WIDE tiles would take (a commit's, a decode batch's:
 * ~1-2 slots an expert, so the 1-n-tile body: a device A/B), else 0, off: the default. Measured slower (H200,
 * bench/device-runs/2027-01-07-tall29): a coreset preview 5.30 -> 5.43 ms (the pair 17.3 -> 22.0 us a layer: 128
 * live blocks, one an SM, each warp 4 chunks of 4 n-tiles; the down gained, 11.6 -> 9.8), mode 2 a commit +1.3 ms.
 * 3: the narrowed products of n_in <= 2 chunks only (the down: a warp one chunk, so the chain that lost the pair is
 * not there), the pair on the WIDE tiles. */
static int g_tall = INT_MIN;
static unsigned long long g_tall_launches;
extern "C" void cuda_moe_tall_set(int mode) {
    __atomic_store_n(&g_tall, mode < 0 ? INT_MIN : mode, __ATOMIC_RELAXED);
}
extern "C" unsigned long long cuda_moe_tall_launches(void) {
    return __atomic_load_n(&g_tall_launches, __ATOMIC_RELAXED);
}
int ig_tall_takes(uint32_t type, int narrow, size_t n_in) {
    const int mode = cuda_env_int(&g_tall, "CLOVER_CUDA_MOE_TALL", 0);
    return (type == MM_Q4_K || type == MM_Q5_K) &&
           (mode == 2 || (mode == 1 && narrow) || (mode == 3 && narrow && n_in <= 2 * IG_CHUNK));
}

/* igemm_tall_kernel on the grouping pass's tiles (grid.y: the tile loop's cap, as the WIDE launches) */
template <int T>
static void ig_launch_tall(const ig_params *p, dim3 grid, cudaStream_t st) {
    if constexpr (T == MM_Q4_K || T == MM_Q5_K) { /* (ig_tall_takes plans no other type) */
        const void *f = (const void *)igemm_tall_kernel<T>;
        ig_attr(f);
        ig_params q = *p;
        q.aligned_ok = cuda_switch_on(&g_ig_aligned, "CLOVER_CUDA_IG_ALIGNED", 1);
        const size_t smem = ig_smem(p);
        grid.y = ig_tile_rows(f, smem, grid);
        pdl_launch_rows(igemm_tall_kernel<T>, grid, dim3(IG_THREADS), smem, st, q);
        __atomic_fetch_add(&g_tall_launches, 1, __ATOMIC_RELAXED);
    }
}

template <int T>
static void ig_launch_p(const ig_params *p, dim3 grid, cudaStream_t st) {
    if (T == MM_Q8_0 && p->xq && !p->wide && ig_q8_enabled())
        ig_launch_q8(p, grid, st);
    else if (p->xq && p->tall && p->perm)
        ig_launch_tall<T>(p, grid, st);
    else if (p->xq && p->wide)
        ig_launch_t<T, true, true>(p, grid, st);
    else if (p->xq)
        ig_launch_t<T, true, false>(p, grid, st);
    else
        ig_launch_t<T, false, false>(p, grid, st);
}

void ig_launch(uint32_t type, const ig_params *p, unsigned grid_x, unsigned grid_y, cudaStream_t st) {
    const dim3 grid(grid_x, grid_y, p->w_up ? 2 : 1);
    switch (type) {
    case MM_Q8_0: ig_launch_p<MM_Q8_0>(p, grid, st); break;
    case MM_Q4_K: ig_launch_p<MM_Q4_K>(p, grid, st); break;
    case MM_Q5_K: ig_launch_p<MM_Q5_K>(p, grid, st); break;
    case MM_Q6_K: ig_launch_p<MM_Q6_K>(p, grid, st); break;
    default: break;
    }
}

/* The pair in one launch (p->w_up): on unless CLOVER_CUDA_MOE_PAIR1=0 (cuda_moe_pair1_set: 1/0, negative: the
 * environment again); only igemm_kernel takes it (not igemm_q8_kernel's Q8_0 tiles of <= 32 rows). */
static int g_pair1 = -1;
extern "C" void cuda_moe_pair1_set(int on) { cuda_switch_set(&g_pair1, on); }
int ig_pair_takes(uint32_t type, const ig_params *p) {
    return cuda_switch_on(&g_pair1, "CLOVER_CUDA_MOE_PAIR1", 1) && p->perm && p->xq &&
           !(type == MM_Q8_0 && !p->wide && ig_q8_enabled());
}

unsigned ig_out_tiles(const ig_params *p, size_t n_out) { return (unsigned)((n_out + p->bo - 1) / p->bo); }

/* PERSIST (igp_kernel): on when CLOVER_CUDA_MOE_PERSIST=1 (off by default: unverified on a device when written,
 * 2026-12-21); CLOVER_CUDA_MOE_PERSIST_TS=8/16/32 forces the slots a tile (else igp_tile picks by shape). */
static int g_igp = -1, g_igp_ts = INT_MIN;
static unsigned long long g_igp_launches;
extern "C" void cuda_moe_persist_set(int on) { cuda_switch_set(&g_igp, on); }
extern "C" void cuda_moe_persist_tile_set(int ts) {
    __atomic_store_n(&g_igp_ts, ts < 0 ? INT_MIN : ts, __ATOMIC_RELAXED);
}
extern "C" unsigned long long cuda_moe_persist_launches(void) {
    return __atomic_load_n(&g_igp_launches, __ATOMIC_RELAXED);
}

/* Shared memory of igp_kernel: the ring, then maxk items (3 words + a row of xq and of y a slot). */
static size_t igp_smem(const ig_params *p, int ts, size_t maxk) {
    return (size_t)IG_STAGES * ((size_t)8 * IG_BO * p->sbp + (size_t)ts * IG_ACS) + maxk * (3 + 2 * (size_t)ts) * 4;
}
static size_t igp_max_tiles(size_t n_slots, size_t n_expert, int ts) {
    return (n_slots + ts - 1) / ts + (n_expert < n_slots ? n_expert : n_slots);
}

int igp_tile(uint32_t type, const ig_params *p, size_t n_slots, size_t n_expert, size_t n_out) {
    if (!cuda_switch_on(&g_igp, "CLOVER_CUDA_MOE_PERSIST", 0) || !p->wide || (type != MM_Q4_K && type != MM_Q5_K))
        return 0;
    const int f = cuda_env_int(&g_igp_ts, "CLOVER_CUDA_MOE_PERSIST_TS", 0);
    const size_t ot = (n_out + 8 * IG_BO - 1) / (8 * IG_BO), sms = (size_t)cuda_sm_count();
    int ts = 8; /* the largest tile whose items, were every slot on few experts (a preview), still fill the SMs */
    if (f == 8 || f == 16 || f == 32)
        ts = f;
    else
        for (int t = 32; t > 8; t /= 2)
            if (ot * ((n_slots + t - 1) / t) >= sms) {
                ts = t;
                break;
            }
    /* a grid of at least one block an SM holds every item in maxk per block: decline what shared memory can't */
    const size_t items = ot * igp_max_tiles(n_slots, n_expert, ts), maxk = (items + sms - 1) / sms;
    return igp_smem(p, ts, maxk) <= IG_SMEM_MAX ? ts : 0;
}

template <int T, int NT>
static int igp_launch_t(const ig_params *p, unsigned max_tiles, cudaStream_t st) {
    static int attr_set = 0;
    static size_t occ_smem = 0; /* the last occupancy asked (host calls, kept off the per-launch path) */
    static int occ_bps = 0;
    if (!attr_set) {
        cudaFuncSetAttribute(igp_kernel<T, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, IG_SMEM_MAX);
        attr_set = 1;
    }
    const int ts = 8 * NT;
    const size_t items = (size_t)(p->n_out + 8 * IG_BO - 1) / (8 * IG_BO) * max_tiles, sms = (size_t)cuda_sm_count();
    /* blocks an SM at the ring's bytes and a first guess of the items', the grid (<= the items), then the items'
     * bytes for that grid; a fixed grid for a fixed shape (graph capture), whatever the tiles turn out to be */
    size_t maxk = (items + sms - 1) / sms, smem = igp_smem(p, ts, maxk), grid = sms;
    if (smem > IG_SMEM_MAX) return 0;
    if (occ_smem != smem) {
        int bps = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, igp_kernel<T, NT>, IGP_THREADS, smem) != cudaSuccess)
            bps = 1;
        occ_bps = bps < 1 ? 1 : bps;
        occ_smem = smem;
    }
    grid = sms * (size_t)occ_bps;
    if (grid > items) grid = items;
    maxk = (items + grid - 1) / grid;
    smem = igp_smem(p, ts, maxk); /* <= the first guess: grid >= sms or grid == items (maxk 1) */
    ig_params q = *p;
    q.tiles_cap = (int)max_tiles;
    pdl_launch_rows(igp_kernel<T, NT>, dim3((unsigned)grid), dim3(IGP_THREADS), smem, st, q, (int)maxk);
    __atomic_fetch_add(&g_igp_launches, 1, __ATOMIC_RELAXED);
    return 1;
}

int igp_launch(uint32_t type, const ig_params *p, int ts, unsigned max_tiles, cudaStream_t st) {
    if (!p->perm || !p->xq || !p->wide) return 0;
    if (type == MM_Q4_K)
        return ts == 8 ? igp_launch_t<MM_Q4_K, 1>(p, max_tiles, st)
               : ts == 16 ? igp_launch_t<MM_Q4_K, 2>(p, max_tiles, st)
               : ts == 32 ? igp_launch_t<MM_Q4_K, 4>(p, max_tiles, st)
                          : 0;
    if (type == MM_Q5_K)
        return ts == 8 ? igp_launch_t<MM_Q5_K, 1>(p, max_tiles, st)
               : ts == 16 ? igp_launch_t<MM_Q5_K, 2>(p, max_tiles, st)
               : ts == 32 ? igp_launch_t<MM_Q5_K, 4>(p, max_tiles, st)
                          : 0;
    return 0;
}
