/*
 * matmul_igemm.cuh: the integer chunk GEMM of matmul_igemm.cu as
 * matmul_gemm.cu launches it (dense and grouped-expert). CUDA C++, included
 * only by src/cuda/matmul_*.cu.
 */
#ifndef CLOVER_CUDA_MATMUL_IGEMM_CUH
#define CLOVER_CUDA_MATMUL_IGEMM_CUH

#include <cuda_runtime.h>

#include "cuda_matmul.h"
#include "matmul_internal.cuh"
#include <stddef.h>
#include <stdint.h>

enum { IG_SEG_MAX = 4 }; /* products of one segmented launch (cuda_matmul.h's CUDA_MATMUL_MAX_SEG) */

typedef struct ig_params {
    const uint8_t *w, *w_lo, *w_end; /* the weights; the tensor's bytes are [w_lo, w_end) */
    size_t row_bytes, expert_stride;
    int aligned_ok; /* igemm_kernel: ig_pieces may take its aligned copies (CLOVER_CUDA_IG_ALIGNED; set at launch) */
    int n_out, n_in;
    const float *x;
    float *y;
    int n_rows;            /* dense: rows of x and y */
    const int32_t *perm;   /* MoE: slots grouped by expert; NULL for dense */
    const int32_t *tiles;  /* MoE: [n][3] expert, first index into perm, count (<= br) */
    const int32_t *ntiles; /* MoE: number of tiles */
    int k, x_per_slot;
    int br;         /* rows per tile: 32, 16 or 8 */
    int act_stride; /* shared-memory bytes per 8-bit row */
    int sbp;        /* shared-memory bytes per weight row of a chunk */
    const uint8_t *xq; /* the rows already in 8 bits, chunk-major (ig_quantize); NULL: quantised in the block */
    int xq_rows;       /* rows of xq */
    int wide;          /* set before ig_plan: MoE tiles of <= 8 rows, 128 outputs a block (needs xq) */
    int tall;          /* set before ig_plan (not with wide): MoE K-quant tiles of <= 32 slots, 64 outputs a block,
                        * each weight fragment decoded once for all the tile's slots (igemm_tall_kernel; needs xq) */
    int preview;       /* MoE: the product belongs to a preview (cuda_moe_args.preview; W3's AUTO leaves it) */
    int bo;            /* outputs per block (ig_plan) */
    int tiles_cap;     /* PERSIST: the tile table's capacity (igp_launch sets it) */
    int pf;            /* igemm_q8_kernel launched with PDL: prefetch the block's weights into L2 before waiting */
    /* MoE on igemm_kernel: a pair's second product (the experts' up beside their gate) in the same launch, on
     * grid.z == 1: weights w_up (the same shape, stride and alignment as w), outputs y_up; NULL: one product */
    const uint8_t *w_up;
    float *y_up;
    /* dense Q8_0 on igemm_q8_kernel only (ig_launch_seg): n_seg > 0 products of the same 8-bit rows in one grid,
     * product s on grid.y blocks [seg_t0[s], seg_t0[s + 1]); w, w_lo, w_end, n_out, y are then product s's */
    int n_seg;
    int seg_t0[IG_SEG_MAX + 1];
    const uint8_t *seg_w[IG_SEG_MAX];
    float *seg_y[IG_SEG_MAX];
    int seg_n_out[IG_SEG_MAX];
} ig_params;

/* The integer mma of the K-quant kernels (matmul_igemm.cu, matmul_igemm_wide.cu): D += A (s8) x B (s8), and the
 * mins' sums by two IMMA a row tile (ig_k_mins_mma). */
__device__ __forceinline__ void mma_s8_k32(int *c, int a0, int a1, int a2, int a3, int b0, int b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* The same with the B operand unsigned (u8): the low bytes of int16 pair sums in ig_k_mins_mma. */
__device__ __forceinline__ void mma_s8u8_k32(int *c, int a0, int a1, int b0) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(0), "r"(0), "r"(b0), "r"(0));
}

/* A super-block's mins term of one row tile: sum_m = sum_j m_j (s_2j + s_2j+1) for weight rows r0 (g) and r1
 * (g + 8) against the tile's C columns (2 tig, 2 tig + 1), as ig_k_superblock2's dp2a chain makes it (the same
 * integers: exact in any order), in two IMMA instead of 32 dp2a and 8 loads a tile: k 0..15 of the A rows are the
 * mins doubled (m0 m0 m1 m1 .. m7 m7: ma0 / ma1, lane tig holding k 4 tig .. +3), of the B column (the tile's row
 * g) the 16 int16 pair sums s_k (its chunk's bytes 260..291), split into low bytes (u8) and high bytes (s8):
 * s = 256 hi + lo, so sum_m = C_lo + 256 C_hi. |s| <= 16 x 127: hi fits s8; the sums fit int32. */
__device__ __forceinline__ void ig_k_mins_mma(int ma0, int ma1, const uint8_t *xb, int tig, int (&smn)[4]) {
    const unsigned *ps = (const unsigned *)(xb + 4 + 256 + 8 * tig);
    const unsigned w0 = ps[0], w1 = ps[1];
    int lo[4] = {0, 0, 0, 0}, hi[4] = {0, 0, 0, 0};
    mma_s8u8_k32(lo, ma0, ma1, (int)__byte_perm(w0, w1, 0x6420u));
    mma_s8_k32(hi, ma0, ma1, 0, 0, (int)__byte_perm(w0, w1, 0x7531u), 0);
#pragma unroll
    for (int q = 0; q < 4; q++) smn[q] += lo[q] + 256 * hi[q];
}

/* A Q4_K / Q5_K super-block's eight 6-bit scales and mins from its scale words s0, s1, s2 (bytes 4..15), four a word
 * (byte j & 3 of word j >> 2 is sub-block j's), as mm_k4_scale_min_words cuts them: j < 4 the low 6 bits of s0 / s1;
 * j >= 4 s2's nibbles and the top 2 bits of s0 / s1. */
__device__ __forceinline__ void ig_k_scale_min4(unsigned s0, unsigned s1, unsigned s2, unsigned (&sc)[2],
                                                unsigned (&mn)[2]) {
    sc[0] = s0 & 0x3F3F3F3Fu, sc[1] = (s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u);
    mn[0] = s1 & 0x3F3F3F3Fu, mn[1] = ((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u);
}

/* Lane tig's A register of ig_k_mins_mma for a row whose 8 mins are the bytes of mn[0] (m0..m3), mn[1] (m4..m7):
 * m_2tig, m_2tig, m_2tig+1, m_2tig+1. */
__device__ __forceinline__ int ig_k_mins_a(const unsigned (&mn)[2], int tig) {
    return (int)__byte_perm(tig & 2 ? mn[1] : mn[0], 0u, tig & 1 ? 0x3322u : 0x1100u);
}

/* Bytes of an 8-bit chunk of a row in the chunk-major layout (288 or 292 used, 16-byte aligned). */
enum { IG_ACS = 304 };

/* Fills br/act_stride/sbp for (type, n_in) and rows of up to max_rows per
 * tile (preq: the rows come quantised, ig_quantize); 1 when the integer GEMM takes it, 0 when not (float types, or a row
 * too long for shared memory: the caller keeps the TF32 GEMM). */
int ig_plan(uint32_t type, size_t n_in, int max_rows, int preq, ig_params *p);
/* Warp gw's block of the chunk-major 8-bit rows (ig_quantize_kernel's body; moe_group_quant_kernel's too): Q8_0 a
 * 32-value block, the K-quants a 256-value one; with u the values silu(x) * u (mm_swiglu). */
__device__ __forceinline__ void ig_quant_warp(uint32_t type, const float *x, const float *u, int n_rows, int n_in,
                                              uint8_t *xq, size_t gw, int lane) {
    const int q8 = type == MM_Q8_0, qb = q8 ? 32 : 256, nb = n_in / qb;
    if (gw >= (size_t)n_rows * nb) return;
    const int r = (int)(gw / nb), b = (int)(gw % nb), c = b * qb / 256; /* 256: a chunk's values */
    uint8_t *dst = xq + ((size_t)c * n_rows + r) * IG_ACS;
    const size_t o = (size_t)r * n_in + (size_t)b * qb;
    if (q8) {
        dst += (b % 8) * MM_ACT32_BYTES;
        if (u) /* silu(x) * u: a down product's rows, without the SwiGLU launch and its float copy */
            mm_act_store_32(mm_swiglu(x[o + lane], u[o + lane]), dst, lane);
        else
            mm_act_block_32(x + o, dst, lane);
    } else if (u) {
        float xv[8];
#pragma unroll
        for (int i = 0; i < 8; i++) xv[i] = mm_swiglu(x[o + 8 * lane + i], u[o + 8 * lane + i]);
        mm_act_store_k(xv, dst, lane);
    } else {
        mm_act_block_k(x + o, dst, lane);
    }
}

/* The chunk-major 8-bit rows: bytes for n_rows rows, and the kernel that writes them; with u (not NULL, the
 * layout of x) the rows rounded are silu(x) * u, each value mm_swiglu's (the bits of cuda_swiglu, then the plain
 * quantiser on its output). */
size_t ig_xq_bytes(size_t n_in, size_t n_rows);
void ig_quantize(uint32_t type, const float *x, size_t n_rows, size_t n_in, uint8_t *xq, cudaStream_t st,
                 const float *u = NULL);
/* Dense: grid (row tiles, ig_out_tiles); MoE: grid (ig_out_tiles, max tiles), x 2 along z with p->w_up set (the
 * pair: each block computes what it computes alone, for its z's product, so the bits of two launches). */
void ig_launch(uint32_t type, const ig_params *p, unsigned grid_x, unsigned grid_y, cudaStream_t st);
unsigned ig_out_tiles(const ig_params *p, size_t n_out);
/* 1 when ig_launch takes p (grouped, rows pre-quantised) with p->w_up: the pair in one launch. */
int ig_pair_takes(uint32_t type, const ig_params *p);
/* Dense Q8_0 products of the same pre-quantised rows (p: the rows, n_in, xq set as for ig_launch; seg[i]: product
 * i) in ONE launch of igemm_q8_kernel, product after product along grid.y: the bits of one ig_launch each (the
 * same blocks, each computing what it computed alone). 1 when launched; 0, nothing launched, when the switch
 * (CLOVER_CUDA_IG_SEG, cuda_ig_seg_set) is off or the products would not all take that kernel. */
int ig_launch_seg(uint32_t type, ig_params *p, const cuda_matmul_seg *seg, size_t n, unsigned grid_x,
                  cudaStream_t st);
/* PERSIST (grouped Q4_K / Q5_K experts, WIDE plans, CLOVER_CUDA_MOE_PERSIST=1): the slots a tile the grouping
 * pass must build for it (8, 16 or 32), or 0 when the form is off or does not take the product; then the launch
 * on that table of max_tiles tiles (a fixed grid of ~1-2 blocks an SM; 1 when launched, 0 when refused). */
int igp_tile(uint32_t type, const ig_params *p, size_t n_slots, size_t n_expert, size_t n_out);
int igp_launch(uint32_t type, const ig_params *p, int ts, unsigned max_tiles, cudaStream_t st);
/* TALL (grouped Q4_K / Q5_K experts of a narrowed pass: cuda_moe_args.narrow, a preview routed inside its coreset,
 * where each kept expert takes ~all the rows): 1 when the switch (CLOVER_CUDA_MOE_TALL: 1 narrowed passes, 2 every
 * pass, 3 narrowed products of n_in <= 512, else off; cuda_moe_tall_set) takes it and the product of this type would otherwise take the WIDE tiles;
 * the caller then sets p->tall (not p->wide) before ig_plan and ig_launch takes igemm_tall_kernel. */
int ig_tall_takes(uint32_t type, int narrow, size_t n_in);

#endif
