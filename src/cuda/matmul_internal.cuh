/*
 * matmul_internal.cuh: what the matmul_*.cu files share: the block layouts
 * as the device reads them (llama.cpp's, see src/quant/quant_internal.h),
 * the exact dequantiser of a 16-value piece of a row (the GEMM's weight
 * loads), the 8-bit activation quantiser (matmul_act.cu) and the argument
 * checks. CUDA C++, included only by src/cuda/matmul_*.cu.
 */
#ifndef CLOVER_CUDA_MATMUL_INTERNAL_CUH
#define CLOVER_CUDA_MATMUL_INTERNAL_CUH

#include <cuda_fp16.h>
#include <float.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda_matmul.h"

/* ggml type codes (quant.h; repeated here because quant.h is C and these must be constants in templates). */
enum {
    MM_F32 = 0,
    MM_F16 = 1,
    MM_Q8_0 = 8,
    MM_Q4_K = 12,
    MM_Q5_K = 13,
    MM_Q6_K = 14,
    MM_BF16 = 30,
};

/* Bytes per block and values per block of the supported types. */
enum {
    MM_Q8_0_BYTES = 34,
    MM_Q4_K_BYTES = 144,
    MM_Q5_K_BYTES = 176,
    MM_Q6_K_BYTES = 210,
    MM_ACT32_BYTES = 36,  /* act_q8_32: f32 d, 32 int8 */
    MM_ACTK_BYTES = 292,  /* act_q8_k: f32 d, 256 int8, 16 int16 sums */
};

static inline size_t mm_block_elems(uint32_t t) {
    return t == MM_Q8_0 ? 32 : (t == MM_Q4_K || t == MM_Q5_K || t == MM_Q6_K) ? 256 : 1;
}
static inline size_t mm_block_bytes(uint32_t t) {
    switch (t) {
    case MM_F32: return 4;
    case MM_F16:
    case MM_BF16: return 2;
    case MM_Q8_0: return MM_Q8_0_BYTES;
    case MM_Q4_K: return MM_Q4_K_BYTES;
    case MM_Q5_K: return MM_Q5_K_BYTES;
    case MM_Q6_K: return MM_Q6_K_BYTES;
    default: return 0;
    }
}
static inline int mm_type_ok(uint32_t t) { return mm_block_bytes(t) != 0; }
static inline int mm_is_int(uint32_t t) { return t == MM_Q8_0 || t == MM_Q4_K || t == MM_Q5_K || t == MM_Q6_K; }
static inline size_t mm_row_bytes(uint32_t t, size_t n_in) { return n_in / mm_block_elems(t) * mm_block_bytes(t); }
/* Bytes of one 8-bit activation row (0 for the float types, which keep f32). */
static inline size_t mm_act_row_bytes(uint32_t t, size_t n_in) {
    if (t == MM_Q8_0) return n_in / 32 * MM_ACT32_BYTES;
    if (mm_is_int(t)) return n_in / 256 * MM_ACTK_BYTES;
    return 0;
}
/* Alignment the kernels need of w and the expert stride: Q4_K/Q5_K blocks are
 * read with 16-byte loads, F32 with words, the others with 2-byte loads. */
static inline size_t mm_align(uint32_t t) { return (t == MM_Q4_K || t == MM_Q5_K) ? 16 : t == MM_F32 ? 4 : 2; }
static inline size_t mm_align256(size_t n) { return (n + 255) / 256 * 256; }

#define MM_FAIL(...)                                          \
    do {                                                      \
        if (why && why_len) snprintf(why, why_len, __VA_ARGS__); \
        return -1;                                            \
    } while (0)

/* Checks type and n_in (a whole number of blocks, > 0); 0 or -1 with why. */
int mm_check_shape(const char *op, uint32_t type, size_t n_out, size_t n_in, char *why, size_t why_len);
/* After the launches: the launch status as 0, or -1 with why. */
int mm_launch_status(const char *op, char *why, size_t why_len);

/* Quantises n_x rows of n_in f32 (row stride n_in) into xq (rows of
 * mm_act_row_bytes(type, n_in)), byte for byte as quant_act_quantize_scalar. */
void mm_act_quantize(uint32_t type, const float *x, size_t n_x, size_t n_in, uint8_t *xq, cudaStream_t stream);
/* Float weights, dense, any row count: a warp per (row, output), mmv_row's arithmetic for one row (the bits of
 * mmv_kernel's vec path); mmv_thin_ok: the 16-byte path applies (float type, n_in % 8 == 0, w and x aligned). */
bool mmv_thin_ok(uint32_t type, const void *w, size_t n_in, const float *x);
void mmv_thin_launch(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows, float *y,
                     cudaStream_t st);

/* ---- device helpers ---- */

/* Quantises this lane's `N` values (N = 1 for blocks of 32, 8 for 256); returns the block's d. */
template <int N>
__device__ __forceinline__ float mm_act_block(const float *xv, int8_t *q) {
    float amax = 0.0f;
    int finite = 1;
#pragma unroll
    for (int i = 0; i < N; i++) {
        const float a = fabsf(xv[i]);
        if (!(a <= FLT_MAX))
            finite = 0;
        else if (a > amax)
            amax = a;
    }
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    finite = __all_sync(0xffffffffu, finite);
    if (!finite || amax == 0.0f) {
#pragma unroll
        for (int i = 0; i < N; i++) q[i] = 0;
        return finite ? 0.0f : __int_as_float(0x7fc00000);
    }
    const float iscale = __fdiv_rn(127.0f, amax);
#pragma unroll
    for (int i = 0; i < N; i++) q[i] = (int8_t)rintf(__fmul_rn(xv[i], iscale));
    return __fdiv_rn(amax, 127.0f);
}

/* cpu_silu(g) * u, the expression of ops_small.cu's k_swiglu (so a product fused with it has the bits of the
 * products followed by cuda_swiglu): the decode GLU forms (mmv_swiglu) and the quantiser of a down product's rows
 * (ig_quantize with u) use it. */
__device__ __forceinline__ float mm_swiglu(float g, float u) { return (g / (1.0f + expf(-g))) * u; }

/* One warp writes the act_q8_32 block of the 32 values (xv: lane l's value l) into dst. */
__device__ __forceinline__ void mm_act_store_32(float xv, uint8_t *dst, int lane) {
    int8_t q;
    const float d = mm_act_block<1>(&xv, &q);
    if (lane == 0) *(float *)dst = d;
    ((int8_t *)(dst + 4))[lane] = q;
}

/* One warp writes the act_q8_32 block of the 32 values at src into dst. */
__device__ __forceinline__ void mm_act_block_32(const float *src, uint8_t *dst, int lane) {
    mm_act_store_32(src[lane], dst, lane);
}

/* One warp writes the 8 act_q8_32 blocks of the 256 values at src (8
 * blocks of 36 bytes from dst): lane l holds values 8l..8l+7, so block
 * l/4's max and finiteness come from a 4-lane reduction. Same codes as
 * mm_act_block_32 (max is exact in any order). */
__device__ __forceinline__ void mm_act_blocks_32x8(const float *src, uint8_t *dst, int lane) {
    float xv[8];
#pragma unroll
    for (int i = 0; i < 8; i++) xv[i] = src[8 * lane + i];
    float amax = 0.0f;
    int finite = 1;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const float a = fabsf(xv[i]);
        if (!(a <= FLT_MAX))
            finite = 0;
        else if (a > amax)
            amax = a;
    }
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    finite &= __shfl_xor_sync(0xffffffffu, finite, 1);
    finite &= __shfl_xor_sync(0xffffffffu, finite, 2);
    uint8_t *blk = dst + (lane >> 2) * MM_ACT32_BYTES;
    int8_t *qs = (int8_t *)(blk + 4) + 8 * (lane & 3);
    float d;
    if (!finite || amax == 0.0f) {
#pragma unroll
        for (int i = 0; i < 8; i++) qs[i] = 0;
        d = finite ? 0.0f : __int_as_float(0x7fc00000);
    } else {
        const float iscale = __fdiv_rn(127.0f, amax);
#pragma unroll
        for (int i = 0; i < 8; i++) qs[i] = (int8_t)rintf(__fmul_rn(xv[i], iscale));
        d = __fdiv_rn(amax, 127.0f);
    }
    if ((lane & 3) == 0) *(float *)blk = d;
}

/* Eight lanes (lanes 8j..8j+7 of a warp, each holding 4 consecutive values, sub = lane & 7 the place of its 4)
 * write the act_q8_32 block of their 32 values at blk: the codes of mm_act_block_32 (the max and the finiteness
 * are exact in any order; the same iscale, rint and d). Every lane of the warp calls it (full-mask shuffles). */
__device__ __forceinline__ void mm_act_store_32x4(const float (&xv)[4], uint8_t *blk, int sub, bool write) {
    float amax = 0.0f;
    int finite = 1;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float a = fabsf(xv[i]);
        if (!(a <= FLT_MAX))
            finite = 0;
        else if (a > amax)
            amax = a;
    }
#pragma unroll
    for (int o = 1; o < 8; o <<= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        finite &= __shfl_xor_sync(0xffffffffu, finite, o);
    }
    if (!write) return;
    char4 q = make_char4(0, 0, 0, 0);
    float d = finite ? 0.0f : __int_as_float(0x7fc00000);
    if (finite && amax != 0.0f) {
        const float iscale = __fdiv_rn(127.0f, amax);
        q = make_char4((signed char)rintf(__fmul_rn(xv[0], iscale)), (signed char)rintf(__fmul_rn(xv[1], iscale)),
                       (signed char)rintf(__fmul_rn(xv[2], iscale)), (signed char)rintf(__fmul_rn(xv[3], iscale)));
        d = __fdiv_rn(amax, 127.0f);
    }
    if (sub == 0) *(float *)blk = d;
    *(char4 *)(blk + 4 + 4 * sub) = q; /* 4-byte aligned: blk is (a multiple of 36 bytes) from a 16-byte piece */
}

/* One warp writes the act_q8_k block of 256 values into dst: lane l holds values 8l..8l+7 (xv); the sum of
 * each 16 (bsums[s]) is lanes 2s, 2s+1. */
__device__ __forceinline__ void mm_act_store_k(const float (&xv)[8], uint8_t *dst, int lane) {
    int8_t q[8];
    const float d = mm_act_block<8>(xv, q);
    if (lane == 0) *(float *)dst = d;
    int sum = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        ((int8_t *)(dst + 4))[8 * lane + i] = q[i];
        sum += q[i];
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    if ((lane & 1) == 0) ((int16_t *)(dst + 4 + 256))[lane / 2] = (int16_t)sum;
}

/* One warp writes the act_q8_k block of the 256 values at src into dst. */
__device__ __forceinline__ void mm_act_block_k(const float *src, uint8_t *dst, int lane) {
    float xv[8];
#pragma unroll
    for (int i = 0; i < 8; i++) xv[i] = src[8 * lane + i];
    mm_act_store_k(xv, dst, lane);
}


__device__ __forceinline__ float mm_f16(const uint8_t *p) {
    const unsigned short h = (unsigned short)(p[0] | (p[1] << 8));
    return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ float mm_bf16_bits(unsigned h) { return __uint_as_float(h << 16); }

/* quant_k4_scale_min: the 6-bit scale and min of sub-block j of a Q4_K/Q5_K block. */
__device__ __forceinline__ void mm_k4_scale_min(int j, const uint8_t *s, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* mm_k4_scale_min from the 12 scale bytes held as three words (no byte loads). */
__device__ __forceinline__ void mm_k4_scale_min_words(int j, unsigned s0, unsigned s1, unsigned s2, int *sc, int *m) {
    if (j < 4) {
        *sc = (s0 >> (8 * j)) & 63;
        *m = (s1 >> (8 * j)) & 63;
    } else {
        const int i = j - 4;
        const unsigned b = (s2 >> (8 * i)) & 0xFF;
        *sc = (int)((b & 0x0F) | (((s0 >> (8 * i + 6)) & 3) << 4));
        *m = (int)((b >> 4) | (((s1 >> (8 * i + 6)) & 3) << 4));
    }
}

/* Sub-block j's mma A fragment of a Q4_K / Q5_K super-block for two weight rows (r0, r1 = r0 + 8): q0a / q1a
 * the rows' code words at 32 (j / 2) + 4 tig, q0b / q1b at + 16 (sub-blocks 2c and 2c + 1 share a 32-byte run,
 * low and high nibbles), h0a.. the Q5_K fifth-bit words (unused for Q4_K). One copy for every integer kernel. */
template <int T>
__device__ __forceinline__ void mm_k4_frag(int j, int q0a, int q1a, int q0b, int q1b, int h0a, int h0b, int h1a,
                                           int h1b, int &a0, int &a1, int &a2, int &a3) {
    const int sh = 4 * (j & 1);
    a0 = (q0a >> sh) & 0x0F0F0F0F;
    a1 = (q1a >> sh) & 0x0F0F0F0F;
    a2 = (q0b >> sh) & 0x0F0F0F0F;
    a3 = (q1b >> sh) & 0x0F0F0F0F;
    if (T == MM_Q5_K) {
        a0 |= ((h0a >> j) & 0x01010101) << 4;
        a1 |= ((h1a >> j) & 0x01010101) << 4;
        a2 |= ((h0b >> j) & 0x01010101) << 4;
        a3 |= ((h1b >> j) & 0x01010101) << 4;
    }
}

__device__ __forceinline__ unsigned mm_ld16(const uint8_t *p) { return *(const unsigned short *)p; }
/* 4 bytes at a 2-byte aligned address. */
__device__ __forceinline__ unsigned mm_ld32a2(const uint8_t *p) { return mm_ld16(p) | (mm_ld16(p + 2) << 16); }
__device__ __forceinline__ int mm_byte(const unsigned *u, int i) { return (int)((u[i >> 2] >> (8 * (i & 3))) & 0xFF); }

/* The GEMM's weight loads in two halves, so that the loads of the next
 * k-step can be in flight while the tensor cores work: mm_load16 fetches
 * the raw bytes behind values 16*p .. 16*p+15 of a row (float types: zero
 * past n_in), mm_decode16 turns them into the values, rounded exactly as
 * dequant_scalar.c: scale products in f32 first, then value = ds*q - dm, no
 * fused multiply-add (the __f*_rn intrinsics are never contracted). */
typedef struct mm_raw16 {
    unsigned u[16];
} mm_raw16;

template <int T>
__device__ __forceinline__ void mm_load16(const uint8_t *row, int p, int n_in, mm_raw16 *r) {
    if (T == MM_F32 || T == MM_F16 || T == MM_BF16) {
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int e = 16 * p + i;
            r->u[i] = e < n_in ? (T == MM_F32 ? ((const unsigned *)row)[e] : mm_ld16(row + 2 * e)) : 0u;
        }
    } else if (T == MM_Q8_0) {
        const uint8_t *b = row + (p >> 1) * MM_Q8_0_BYTES;
        r->u[0] = mm_ld16(b);
#pragma unroll
        for (int i = 0; i < 4; i++) r->u[1 + i] = mm_ld32a2(b + 2 + 16 * (p & 1) + 4 * i);
    } else if (T == MM_Q4_K || T == MM_Q5_K) {
        const int bytes = T == MM_Q4_K ? MM_Q4_K_BYTES : MM_Q5_K_BYTES;
        const uint8_t *b = row + (p >> 4) * bytes;
        const int v0 = 16 * (p & 15), c = v0 >> 6, l0 = v0 & 31;
        const uint4 hd = *(const uint4 *)b; /* d, dmin, 12 scale bytes */
        r->u[0] = hd.x, r->u[1] = hd.y, r->u[2] = hd.z, r->u[3] = hd.w;
        const uint4 q = *(const uint4 *)(b + (T == MM_Q4_K ? 16 : 48) + 32 * c + l0);
        r->u[4] = q.x, r->u[5] = q.y, r->u[6] = q.z, r->u[7] = q.w;
        if (T == MM_Q5_K) {
            const uint4 h = *(const uint4 *)(b + 16 + l0);
            r->u[8] = h.x, r->u[9] = h.y, r->u[10] = h.z, r->u[11] = h.w;
        }
    } else { /* Q6_K: 210-byte blocks, 2-byte aligned */
        const uint8_t *b = row + (p >> 4) * MM_Q6_K_BYTES;
        const int v0 = 16 * (p & 15), h = v0 >> 7, k = (v0 >> 5) & 3, l0 = v0 & 31;
        const uint8_t *ql = b + 64 * h + (k & 1 ? 32 : 0) + l0, *qh = b + 128 + 32 * h + l0;
#pragma unroll
        for (int i = 0; i < 4; i++) r->u[i] = mm_ld32a2(ql + 4 * i), r->u[4 + i] = mm_ld32a2(qh + 4 * i);
        r->u[8] = (unsigned)(int)((const int8_t *)(b + 192))[8 * h + 2 * k + (l0 >> 4)];
        r->u[9] = mm_ld16(b + 208);
    }
}

template <int T>
__device__ __forceinline__ void mm_decode16(const mm_raw16 *r, int p, float *v) {
    if (T == MM_F32) {
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = __uint_as_float(r->u[i]);
    } else if (T == MM_F16) {
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = __half2float(__ushort_as_half((unsigned short)r->u[i]));
    } else if (T == MM_BF16) {
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = mm_bf16_bits(r->u[i]);
    } else if (T == MM_Q8_0) {
        const float d = __half2float(__ushort_as_half((unsigned short)r->u[0]));
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = __fmul_rn((float)(int8_t)mm_byte(r->u + 1, i), d);
    } else if (T == MM_Q4_K || T == MM_Q5_K) {
        const int v0 = 16 * (p & 15), c = v0 >> 6, hi = (v0 >> 5) & 1;
        int sc, m;
        mm_k4_scale_min_words(2 * c + hi, r->u[1], r->u[2], r->u[3], &sc, &m);
        const float d = __half2float(__ushort_as_half((unsigned short)(r->u[0] & 0xFFFF)));
        const float dmin = __half2float(__ushort_as_half((unsigned short)(r->u[0] >> 16)));
        const float d1 = __fmul_rn(d, (float)sc), m1 = __fmul_rn(dmin, (float)m);
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int qb = mm_byte(r->u + 4, i);
            int q = hi ? qb >> 4 : qb & 0x0F;
            if (T == MM_Q5_K && ((mm_byte(r->u + 8, i) >> (2 * c + hi)) & 1)) q += 16;
            v[i] = __fsub_rn(__fmul_rn(d1, (float)q), m1);
        }
    } else { /* Q6_K */
        const int k = ((16 * (p & 15)) >> 5) & 3;
        const float ds = __fmul_rn(__half2float(__ushort_as_half((unsigned short)r->u[9])), (float)(int)r->u[8]);
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int qlb = mm_byte(r->u, i);
            const int lo = (k & 2 ? qlb >> 4 : qlb) & 0x0F;
            const int q = (lo | (((mm_byte(r->u + 4, i) >> (2 * k)) & 3) << 4)) - 32;
            v[i] = __fmul_rn(ds, (float)q);
        }
    }
}

#endif
