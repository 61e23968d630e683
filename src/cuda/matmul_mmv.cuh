/*
 * matmul_mmv.cuh: the decode products' shared device pieces (matmul_mmv.cu's
 * one-kernel-per-launch form and matmul_mmv_stream.cu's persistent form): the
 * launch parameters, one block's integer term, the canonical warp reduction,
 * one warp's dot of a weight row, the cp.async row staging, the fused 8-bit
 * rows. Both kernels call exactly these, so a row's bits are the same in both.
 */
#ifndef CLOVER_CUDA_MATMUL_MMV_CUH
#define CLOVER_CUDA_MATMUL_MMV_CUH
#include "cuda_pdl.cuh"
#include "matmul_internal.cuh"

enum { MMV_WARPS = 8, MMV_MAX = CUDA_MATMUL_DECODE_MAX_ROWS, MMV_SMEM_MAX = 48 * 1024 };

typedef struct mmv_params {
    const uint8_t *w;
    size_t row_bytes, expert_stride;
    int n_out, n_in;
    const int32_t *ids; /* NULL: dense, the slots are the rows */
    int n_slots, k, x_per_slot, n_expert;
    const void *x;  /* f32 rows, or 8-bit rows (in work) when not fused */
    size_t x_bytes; /* bytes per row of x as the dot reads it */
    const float *xf; /* fused: the f32 rows, quantised into shared memory per block */
    int vec;         /* float weights: 16-byte loads (aligned rows, n_in % 8 == 0) */
    int group_cap;   /* slots per group: the rows the shared memory holds when fused, else 8 */
    const uint8_t *w2; /* GLU: the up weights (w is the gate), same layout; y = silu(x w^T) * (x w2^T) */
    int fused;         /* the 8-bit rows are made in shared memory (FUSE) */
    int stage;         /* the block's weight rows are copied to shared memory first (cp.async), at x_smem */
    unsigned x_smem;   /* bytes of shared memory before the staged weights (the fused rows, 16-aligned) */
    int lane_q8;       /* Q8_0 with staged weights: mmv_row_q8l (a lane a block) instead of mmv_row (4 lanes a block) */
    float *y;       /* [n_slots][n_out] */
    /* n_seg > 1: the launch does several matrices of this type and n_in on the same rows (dense only), blocks
     * seg_blk0[i] .. seg_blk0[i+1]-1 the i-th; each block then computes exactly what a launch of its own would */
    int rpw; /* output rows per warp (mmv_rpw) */
    int n_seg, n_blocks;
    unsigned buf_bytes; /* matmul_mmv_stream.cu: one of the two weight buffers (a group's rows, then the up rows) */
    int seg_blk0[CUDA_MATMUL_MAX_SEG];
    int seg_n_out[CUDA_MATMUL_MAX_SEG];
    int seg_vec[CUDA_MATMUL_MAX_SEG];
    const uint8_t *seg_w[CUDA_MATMUL_MAX_SEG];
    float *seg_y[CUDA_MATMUL_MAX_SEG];
} mmv_params;

__host__ __device__ constexpr bool mm_int_t(int t) { return t == MM_Q8_0 || t == MM_Q4_K || t == MM_Q5_K || t == MM_Q6_K; }
__device__ __forceinline__ int ld32(const uint8_t *p) { return *(const int *)p; }
/* 4 bytes at a 2-byte aligned address (Q8_0 and Q6_K blocks are 34 and 210 bytes). */
__device__ __forceinline__ int ld32a2(const uint8_t *p) {
    const unsigned short *h = (const unsigned short *)p;
    return (int)(h[0] | ((unsigned)h[1] << 16));
}

/* The term of block `b` for each of the NX activation rows (xr[i] points at
 * row i's 8-bit blocks), in every lane of the block's lane group (4 lanes for
 * Q8_0, 16 for the K-quants): each lane dots its piece, the group adds the
 * exact integer sums, and the term is formed as act_scalar.c forms it:
 * (d_w * x_d) * isum, or x_d * (d * sum_q - dmin * sum_m). Every lane of the
 * warp must call it (shuffles). */
template <int T>
__device__ __forceinline__ void mmv_block(const uint8_t *wrow, int b, int piece, const uint8_t *const *xr, int nx,
                                          float *term) {
    if (T == MM_Q8_0) { /* piece 0..3: values 8*piece..+7 */
        const uint8_t *blk = wrow + (size_t)b * MM_Q8_0_BYTES;
        const float dw = mm_f16(blk);
        const int q0 = ld32a2(blk + 2 + 8 * piece), q1 = ld32a2(blk + 6 + 8 * piece);
#pragma unroll
        for (int i = 0; i < MMV_MAX; i++) {
            if (i >= nx) break;
            const uint8_t *xb = xr[i] + (size_t)b * MM_ACT32_BYTES;
            int s = __dp4a(q0, ld32(xb + 4 + 8 * piece), __dp4a(q1, ld32(xb + 8 + 8 * piece), 0));
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            s += __shfl_xor_sync(0xffffffffu, s, 2);
            term[i] = __fmul_rn(__fmul_rn(dw, *(const float *)xb), (float)s);
        }
    } else if (T == MM_Q4_K || T == MM_Q5_K) { /* piece 0..15: chunk c = piece/4, l = 8u..8u+7, both nibbles */
        const int bytes = T == MM_Q4_K ? MM_Q4_K_BYTES : MM_Q5_K_BYTES;
        const uint8_t *blk = wrow + (size_t)b * bytes;
        const int c = piece >> 2, u = piece & 3;
        const unsigned dd = (unsigned)ld32(blk);
        const float d = __half2float(__ushort_as_half((unsigned short)(dd & 0xFFFF)));
        const float dmin = __half2float(__ushort_as_half((unsigned short)(dd >> 16)));
        const unsigned s0 = (unsigned)ld32(blk + 4), s1 = (unsigned)ld32(blk + 8), s2 = (unsigned)ld32(blk + 12);
        int sc0, m0, sc1, m1;
        mm_k4_scale_min_words(2 * c, s0, s1, s2, &sc0, &m0);
        mm_k4_scale_min_words(2 * c + 1, s0, s1, s2, &sc1, &m1);
        const uint8_t *qs = blk + (T == MM_Q4_K ? 16 : 48) + 32 * c + 8 * u;
        const int v0 = ld32(qs), v1 = ld32(qs + 4);
        int lo0 = v0 & 0x0F0F0F0F, lo1 = v1 & 0x0F0F0F0F;
        int hi0 = (v0 >> 4) & 0x0F0F0F0F, hi1 = (v1 >> 4) & 0x0F0F0F0F;
        if (T == MM_Q5_K) {
            const uint8_t *qh = blk + 16 + 8 * u;
            const int h0 = ld32(qh), h1 = ld32(qh + 4);
            lo0 |= ((h0 >> (2 * c)) & 0x01010101) << 4;
            lo1 |= ((h1 >> (2 * c)) & 0x01010101) << 4;
            hi0 |= ((h0 >> (2 * c + 1)) & 0x01010101) << 4;
            hi1 |= ((h1 >> (2 * c + 1)) & 0x01010101) << 4;
        }
#pragma unroll
        for (int i = 0; i < MMV_MAX; i++) {
            if (i >= nx) break;
            const uint8_t *xb = xr[i] + (size_t)b * MM_ACTK_BYTES;
            const uint8_t *xl = xb + 4 + 64 * c + 8 * u, *xh = xl + 32;
            const int xl0 = ld32(xl), xl1 = ld32(xl + 4), xh0 = ld32(xh), xh1 = ld32(xh + 4);
            const int qx_lo = __dp4a(lo0, xl0, __dp4a(lo1, xl1, 0));
            const int qx_hi = __dp4a(hi0, xh0, __dp4a(hi1, xh1, 0));
            const int xs_lo = __dp4a(0x01010101, xl0, __dp4a(0x01010101, xl1, 0));
            const int xs_hi = __dp4a(0x01010101, xh0, __dp4a(0x01010101, xh1, 0));
            int sum_q = sc0 * qx_lo + sc1 * qx_hi, sum_m = m0 * xs_lo + m1 * xs_hi;
#pragma unroll
            for (int o = 1; o < 16; o <<= 1) {
                sum_q += __shfl_xor_sync(0xffffffffu, sum_q, o);
                sum_m += __shfl_xor_sync(0xffffffffu, sum_m, o);
            }
            term[i] = __fmul_rn(*(const float *)xb, __fsub_rn(__fmul_rn(d, (float)sum_q), __fmul_rn(dmin, (float)sum_m)));
        }
    } else { /* Q6_K, piece 0..15: half h = piece/8, l = 4u..4u+3 (u = piece%8) for all four k */
        const uint8_t *blk = wrow + (size_t)b * MM_Q6_K_BYTES;
        const int h = piece >> 3, u = piece & 7;
        const int A = ld32a2(blk + 64 * h + 4 * u), B = ld32a2(blk + 64 * h + 32 + 4 * u);
        const int H = ld32a2(blk + 128 + 32 * h + 4 * u);
        int q[4];
        q[0] = (A & 0x0F0F0F0F) | ((H & 0x03030303) << 4);
        q[1] = (B & 0x0F0F0F0F) | (((H >> 2) & 0x03030303) << 4);
        q[2] = ((A >> 4) & 0x0F0F0F0F) | (((H >> 4) & 0x03030303) << 4);
        q[3] = ((B >> 4) & 0x0F0F0F0F) | (((H >> 6) & 0x03030303) << 4);
#pragma unroll
        for (int j = 0; j < 4; j++) q[j] = (int)__vsub4((unsigned)q[j], 0x20202020u); /* codes - 32, as int8 */
        const int8_t *sc = (const int8_t *)(blk + 192) + 8 * h + (u >> 2);
        const float dw = mm_f16(blk + 208);
#pragma unroll
        for (int i = 0; i < MMV_MAX; i++) {
            if (i >= nx) break;
            const uint8_t *xb = xr[i] + (size_t)b * MM_ACTK_BYTES;
            const uint8_t *xq = xb + 4 + 128 * h + 4 * u;
            int isum = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) isum += sc[2 * j] * __dp4a(q[j], ld32(xq + 32 * j), 0);
#pragma unroll
            for (int o = 1; o < 16; o <<= 1) isum += __shfl_xor_sync(0xffffffffu, isum, o);
            term[i] = __fmul_rn(__fmul_rn(dw, *(const float *)xb), (float)isum);
        }
    }
}

/* The warp's sum of its lanes' partials. Integer types: the canonical tree of
 * the block-term partials (matmul_igemm.cu): Q8_0's 8 lane groups hold
 * partials p0..p7, and xor 4, 8, 16 give ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7))
 * in every lane (float addition commutes exactly); the K-quants' 2 groups
 * give p0+p1. Float types: any fixed tree. */
template <int T>
__device__ __forceinline__ float mmv_reduce(float v) {
    const bool q = mm_int_t(T);
    /* float types: 16, 8, 4, 2, 1 (plain adds); Q8_0: 4, 8, 16; K-quants: 16 (__fadd_rn) */
    if (!q) v += __shfl_xor_sync(0xffffffffu, v, 16);
    if (!q) v += __shfl_xor_sync(0xffffffffu, v, 8);
    if (!q) v += __shfl_xor_sync(0xffffffffu, v, 4);
    if (!q) v += __shfl_xor_sync(0xffffffffu, v, 2);
    if (!q) v += __shfl_xor_sync(0xffffffffu, v, 1);
    if (T == MM_Q8_0) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 4));
    if (T == MM_Q8_0) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 8));
    if (q) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 16));
    return v;
}

/* The float weights' 16-byte path, shared by mmv_row and the exact many-row form (matmul_exact.cu) so that
 * both do the very same operations: elements e .. e + 7 of a weight row as f32, and their fused multiply-adds
 * into a row's running sum in element order. */
template <int T>
__device__ __forceinline__ void mmv_vec_weights(const uint8_t *wrow, int e, float *wv) {
    if (T == MM_F32) {
        const float4 a = *(const float4 *)(wrow + 4 * e), b = *(const float4 *)(wrow + 4 * e + 16);
        wv[0] = a.x, wv[1] = a.y, wv[2] = a.z, wv[3] = a.w, wv[4] = b.x, wv[5] = b.y, wv[6] = b.z, wv[7] = b.w;
    } else {
        const uint4 a = *(const uint4 *)(wrow + 2 * e);
        const unsigned u[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (T == MM_F16) {
                wv[2 * i] = __half2float(__ushort_as_half((unsigned short)(u[i] & 0xFFFF)));
                wv[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(u[i] >> 16)));
            } else {
                wv[2 * i] = mm_bf16_bits(u[i] & 0xFFFF);
                wv[2 * i + 1] = mm_bf16_bits(u[i] >> 16);
            }
        }
    }
}
__device__ __forceinline__ float mmv_vec_dot8(const float *wv, const float *x, float t) {
    const float4 a = *(const float4 *)x, b = *(const float4 *)(x + 4);
    t = fmaf(wv[0], a.x, t), t = fmaf(wv[1], a.y, t), t = fmaf(wv[2], a.z, t), t = fmaf(wv[3], a.w, t);
    t = fmaf(wv[4], b.x, t), t = fmaf(wv[5], b.y, t), t = fmaf(wv[6], b.z, t), t = fmaf(wv[7], b.w, t);
    return t;
}

/* One warp: the dot of weight row `wrow` with nx rows. */
template <int T>
__device__ __forceinline__ void mmv_row(const uint8_t *wrow, int n_in, const uint8_t *const *xr, int nx, int vec,
                                        float *acc) {
    const int lane = threadIdx.x & 31;
    if (T == MM_Q8_0) { /* 8 blocks per warp step, 4 lanes each: lane group j adds the terms of blocks j, j+8, ... */
        const int nb = n_in / 32;
#pragma unroll 4
        for (int b0 = 0; b0 < nb; b0 += 8) { /* every lane calls mmv_block (shuffles); past the end adds nothing */
            const int b = b0 + (lane >> 2);
            float term[MMV_MAX];
            mmv_block<T>(wrow, b < nb ? b : b0, lane & 3, xr, nx, term);
#pragma unroll
            for (int i = 0; i < MMV_MAX; i++)
                if (i < nx && b < nb) acc[i] = __fadd_rn(acc[i], term[i]);
        }
    } else if (T == MM_Q4_K || T == MM_Q5_K || T == MM_Q6_K) { /* 2 super-blocks per step, 16 lanes each */
        const int nb = n_in / 256;
#pragma unroll 2
        for (int b0 = 0; b0 < nb; b0 += 2) {
            const int b = b0 + (lane >> 4);
            float term[MMV_MAX];
            mmv_block<T>(wrow, b < nb ? b : b0, lane & 15, xr, nx, term);
#pragma unroll
            for (int i = 0; i < MMV_MAX; i++)
                if (i < nx && b < nb) acc[i] = __fadd_rn(acc[i], term[i]);
        }
    } else if (vec) { /* float weights, 16-byte loads: lane takes elements 8(lane + 32j) .. +7 */
#pragma unroll 2
        for (int e = 8 * lane; e < n_in; e += 256) {
            float wv[8];
            mmv_vec_weights<T>(wrow, e, wv);
#pragma unroll
            for (int r = 0; r < MMV_MAX; r++) {
                if (r >= nx) break;
                acc[r] = mmv_vec_dot8(wv, (const float *)xr[r] + e, acc[r]);
            }
        }
    } else { /* float weights, f32 activations: lane takes elements lane, lane+32, ... */
        for (int e = lane; e < n_in; e += 32) {
            float wv;
            if (T == MM_F32)
                wv = ((const float *)wrow)[e];
            else if (T == MM_F16)
                wv = __half2float(((const __half *)wrow)[e]);
            else
                wv = mm_bf16_bits(((const unsigned short *)wrow)[e]);
#pragma unroll
            for (int i = 0; i < MMV_MAX; i++) {
                if (i >= nx) break;
                acc[i] = fmaf(wv, ((const float *)xr[i])[e], acc[i]);
            }
        }
    }
}

/* Q8_0, a lane a block (mmv_row_q8l + mmv_reduce_q8l): the same bits as
 * mmv_row + mmv_reduce<MM_Q8_0> with fewer instructions a weight byte.
 *
 * Why: mmv_row gives a 34-byte block to 4 lanes, so every block pays its
 * scale load, two shuffles of the integer sum, the term's two multiplies and
 * an add in all 4 lanes, and its weight words come as 16-bit halves: ~25
 * warp instructions a 272-byte step, one dependent chain a lane. The H200's
 * ncu of the output head (2026-12-12-dec24 call 4) found that dot issue-bound
 * (SM 69%, DRAM 36%), and the dense one-row products at 25-54% of the copy
 * bandwidth. Here lane L dots block b0 + L whole: 9 aligned 32-bit loads and
 * 8 funnel shifts give its 8 weight words, 8 dp4a its exact integer sum, one
 * term; ~40 instructions a 1,088-byte step, the loads independent.
 *
 * Bits: a block's integer sum is exact whichever lanes add it, and its term
 * is formed by the same expression, (d_w * x_d) * isum. mmv_row's lane group
 * j (j = 0..7) adds the terms of blocks j, j+8, j+16, ... in that order; here
 * the terms of a 32-block step sit in lanes j, j+8, j+16, j+24, so lane j
 * adds them in that order after three shuffles down: the same partials p_j
 * in lanes 0..7. mmv_reduce_q8l's xor 1, 2, 4 then form
 * ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)), mmv_reduce's tree (xor 4, 8, 16 over
 * lane groups), and float addition commutes exactly. test_cuda_matmul's
 * test_mmv_lane checks both forms bit for bit. Lanes 8..31 end with values
 * no one reads. wrow must be 2-byte aligned (Q8_0 rows are); reads stay
 * inside the row. */
__device__ __forceinline__ void mmv_row_q8l(const uint8_t *wrow, int n_in, const uint8_t *const *xr, int nx,
                                            float *acc) {
    const int lane = threadIdx.x & 31, nb = n_in / 32;
#pragma unroll 2
    for (int b0 = 0; b0 < nb; b0 += 32) {
        const int b = b0 + lane, bl = b < nb ? b : b0; /* past the end: a real block, its term never added */
        const uint8_t *blk = wrow + (size_t)bl * MM_Q8_0_BYTES;
        const uintptr_t qa = (uintptr_t)(blk + 2);
        const unsigned *wp = (const unsigned *)(qa & ~(uintptr_t)3);
        const unsigned sh = (unsigned)(qa & 3) * 8; /* 0 or 16 */
        unsigned w[9];
#pragma unroll
        for (int k = 0; k < 8; k++) w[k] = wp[k];
        /* the last 2 bytes of an unaligned block: a 16-bit load, never past the block */
        w[8] = sh ? (unsigned)*(const unsigned short *)(wp + 8) : 0u;
        int q[8];
#pragma unroll
        for (int k = 0; k < 8; k++) q[k] = (int)__funnelshift_r(w[k], w[k + 1], sh);
        const float dw = mm_f16(blk);
        float t[MMV_MAX];
#pragma unroll
        for (int i = 0; i < MMV_MAX; i++) {
            if (i >= nx) break;
            const uint8_t *xb = xr[i] + (size_t)bl * MM_ACT32_BYTES;
            const int *xq = (const int *)(xb + 4);
            int s0 = 0, s1 = 0;
#pragma unroll
            for (int k = 0; k < 8; k += 2) s0 = __dp4a(q[k], xq[k], s0), s1 = __dp4a(q[k + 1], xq[k + 1], s1);
            t[i] = __fmul_rn(__fmul_rn(dw, *(const float *)xb), (float)(s0 + s1));
        }
#pragma unroll
        for (int i = 0; i < MMV_MAX; i++) {
            if (i >= nx) break;
            const float t1 = __shfl_down_sync(0xffffffffu, t[i], 8);
            const float t2 = __shfl_down_sync(0xffffffffu, t[i], 16);
            const float t3 = __shfl_down_sync(0xffffffffu, t[i], 24);
            float a = acc[i];
            if (b < nb) a = __fadd_rn(a, t[i]);
            if (b + 8 < nb) a = __fadd_rn(a, t1);
            if (b + 16 < nb) a = __fadd_rn(a, t2);
            if (b + 24 < nb) a = __fadd_rn(a, t3);
            acc[i] = a;
        }
    }
}
__device__ __forceinline__ float mmv_reduce_q8l(float v) {
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
    return __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 4));
}
/* The kernels' dot and reduction: the lane form when lane_q8 (uniform over the launch) and T is Q8_0. */
template <int T>
__device__ __forceinline__ void mmv_row_any(bool lane_q8, const uint8_t *wrow, int n_in, const uint8_t *const *xr,
                                            int nx, int vec, float *acc) {
    if (T == MM_Q8_0 && lane_q8)
        mmv_row_q8l(wrow, n_in, xr, nx, acc);
    else
        mmv_row<T>(wrow, n_in, xr, nx, vec, acc);
}
template <int T>
__device__ __forceinline__ float mmv_reduce_any(bool lane_q8, float v) {
    return T == MM_Q8_0 && lane_q8 ? mmv_reduce_q8l(v) : mmv_reduce<T>(v);
}

/* Copies n bytes (a multiple of 16, both ends 16-byte aligned) from global
 * to shared memory with cp.async, the block's threads striding 16 bytes: all
 * of a block's weight bytes are in flight at once, with no registers held,
 * while the block waits for its inputs and quantises them (a warp walking its
 * row load by load would pay one memory round trip per step). */
__device__ __forceinline__ void mmv_copy(uint8_t *dst, const uint8_t *src, size_t n) { /* no commit */
    for (size_t off = (size_t)threadIdx.x * 16; off < n; off += (size_t)blockDim.x * 16) {
        const unsigned sa = (unsigned)__cvta_generic_to_shared(dst + off);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(src + off) : "memory");
    }
}
__device__ __forceinline__ void mmv_stage(uint8_t *dst, const uint8_t *src, size_t n) {
    mmv_copy(dst, src, n);
    asm volatile("cp.async.commit_group;" ::: "memory");
}

/* The fused 8-bit rows: slots[0..ns) of the f32 rows p.xf quantised into xsm
 * (row i at i * p.x_bytes), a warp per 256 values (or 32): matmul_act.cu's
 * codes byte for byte. The caller synchronises the block before reading. */
template <int T>
__device__ __forceinline__ void mmv_fuse_rows(const mmv_params &p, const int *slots, int ns, uint8_t *xsm) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int q8 = T == MM_Q8_0, wide = !q8 || p.n_in % 256 == 0, qb = wide ? 256 : 32;
    const int nb = p.n_in / qb, bb = q8 ? (wide ? 8 : 1) * MM_ACT32_BYTES : MM_ACTK_BYTES;
    for (int j = warp; j < ns * nb; j += MMV_WARPS) {
        const int i = j / nb, b = j % nb;
        const int xs = p.x_per_slot ? slots[i] : slots[i] / p.k;
        const float *src = p.xf + (size_t)xs * p.n_in + (size_t)b * qb;
        uint8_t *dst = xsm + (size_t)i * p.x_bytes + (size_t)b * bb;
        if (!q8)
            mm_act_block_k(src, dst, lane);
        else if (wide)
            mm_act_blocks_32x8(src, dst, lane);
        else
            mm_act_block_32(src, dst, lane);
    }
}

/* cpu_silu(g) * u as k_swiglu forms it (matmul_internal.cuh's mm_swiglu): the fused product's bits equal the two
 * products followed by cuda_swiglu. */
__device__ __forceinline__ float mmv_swiglu(float g, float u) { return mm_swiglu(g, u); }

/* Fused kernels are capped so that 4 blocks fit an SM (3 for the forms that
 * would spill at 64 registers): a decode product's 256-512 blocks then run
 * in one wave on 132 SMs. */
#define MMV_MIN_BLOCKS(T, FUSE, GLU) \
    ((FUSE) ? ((GLU) ? ((T) == MM_Q4_K ? 4 : 3) : ((T) == MM_Q5_K || (T) == MM_Q6_K ? 3 : 4)) : 1)

/* matmul_mmv_stream.cu: the persistent, double-buffered form of a dense
 * product; 1 when it launched, 0 when it does not apply (then mmv_kernel). */
int mmv_stream_launch(uint32_t type, mmv_params *p, size_t x_smem, cudaStream_t st);
/* matmul_mmv.cu: whether staged Q8_0 rows take the lane-a-block dot (CLOVER_CUDA_MMV_LANE, cuda_mmv_lane_set). */
int mmv_lane_enabled(void);

/* moe_fast.cu: the cheaper Q4_K / Q5_K expert form (cuda_moe_fast_enabled()); 1 when it launched, 0 when it does
 * not apply (then mmv_kernel). The caller checked the arguments. */
int moef_launch(uint32_t type, const cuda_moe_args *a, const void *w2, cudaStream_t st);
#endif
