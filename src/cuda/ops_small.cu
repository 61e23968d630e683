/*
 * ops_small.cu: the element-wise and per-row kernels of cuda_ops.h (all but
 * the pick, which has its own file). Each mirrors its CPU scalar oracle's
 * arithmetic operation by operation; only sums are reassociated (a tree in
 * a block instead of a left-to-right loop), which is what the op tests'
 * bounds cover. Accurate expf/sqrtf/division: the CUDA files are never
 * compiled with fast math, so these are IEEE (division, sqrt) or within
 * 2 ulp (expf) of the CPU's results.
 */
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "cuda_ops.h"
#include "cuda_pdl.cuh"
#include "cuda_switch.h"
#include "matmul_igemm.cuh"
#include "matmul_internal.cuh"
#include "moe_route.cuh"

static thread_local char g_err[256];

extern "C" const char *cuda_ops_last_error(void) { return g_err; }

static inline cudaStream_t as_stream(void *s) { return (cudaStream_t)s; }

/* ggml type codes (quant.h), repeated here because quant.h is C. */
enum { T_F32 = 0, T_F16 = 1, T_Q8_0 = 8, T_BF16 = 30 };

extern "C" int cuda_embed_type_ok(uint32_t type) {
    return type == T_F32 || type == T_F16 || type == T_Q8_0 || type == T_BF16;
}

__device__ static inline float half_bits(uint16_t h) { return __half2float(__ushort_as_half(h)); }

__global__ void k_embed(float *out, const uint8_t *table, uint32_t type, const int32_t *ids, size_t H,
                        size_t row_bytes) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const size_t r = blockIdx.y;
    const uint8_t *row = table + (size_t)ids[r] * row_bytes;
    float *o = out + r * H;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < H; i += (size_t)gridDim.x * blockDim.x) {
        float v;
        if (type == T_F32) {
            v = ((const float *)row)[i];
        } else if (type == T_F16) {
            v = half_bits(((const uint16_t *)row)[i]);
        } else if (type == T_BF16) {
            v = __uint_as_float((uint32_t)((const uint16_t *)row)[i] << 16);
        } else { /* Q8_0: blocks of 34 bytes, an f16 scale then 32 int8; x = d * q */
            const uint8_t *b = row + (i / 32) * 34;
            uint16_t d = (uint16_t)(b[0] | (b[1] << 8));
            v = half_bits(d) * (float)(int8_t)b[2 + i % 32];
        }
        o[i] = v;
    }
}

extern "C" int cuda_embed_rows(float *out, const void *table, uint32_t type, const int32_t *ids, size_t n,
                               size_t n_embd, void *stream) {
    if (n == 0) return 0;
    size_t rb = type == T_F32 ? 4 * n_embd : type == T_Q8_0 ? n_embd / 32 * 34 : 2 * n_embd;
    dim3 grid((unsigned)((n_embd + 255) / 256), (unsigned)n);
    pdl_launch(k_embed, grid, 256, 0, as_stream(stream), out, (const uint8_t *)table, type, ids, n_embd, rb);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_embed_rows");
}

/* A float32 sum over the block (blockDim.x a multiple of 32, <= 1024). */
__device__ static float block_sum(float v, float *sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int w = threadIdx.x / 32, nw = blockDim.x / 32;
    __syncthreads(); /* sh may still be read by a previous call */
    if ((threadIdx.x & 31) == 0) sh[w] = v;
    __syncthreads();
    float t = threadIdx.x < (unsigned)nw ? sh[threadIdx.x] : 0.0f;
    if (w == 0)
        for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    if (threadIdx.x == 0) sh[0] = t;
    __syncthreads();
    return sh[0];
}

enum { NORM_THREADS = 256 }; /* k_norm_vec's block */

/* The routed experts' weighted sum of a row (k_combine and the fused norm's CMB form share it): the slots' order
 * is a stable sort of the k ids (equal ids keep slot order): thread t < k loads slot t once and places it at its rank,
 * so no thread walks a chain of dependent global loads. Ends with a block barrier. */
__device__ __forceinline__ void cmb_order(const int32_t *idx, const float *wts, size_t k, size_t r, int32_t *id_s,
                                          int32_t *order, float *w_s) {
    if (threadIdx.x < k) id_s[threadIdx.x] = idx[r * k + threadIdx.x];
    __syncthreads();
    if (threadIdx.x < k) {
        const size_t t = threadIdx.x;
        size_t rank = 0;
        for (size_t q = 0; q < k; q++) rank += id_s[q] < id_s[t] || (id_s[q] == id_s[t] && q < t);
        order[rank] = (int32_t)t;
        w_s[rank] = wts[r * k + t];
    }
    __syncthreads();
}

/* One term of the expert sum, o + e * w, the product and the sum each rounded (the CPU's, no FMA contraction): the
 * one expression k_combine and the CMB form both use, so their bits agree by construction. */
__device__ __forceinline__ float cmb_add(float o, float e, float w) { return __fadd_rn(o, __fmul_rn(e, w)); }
/* The shared expert's gate, sigmoid(gate logit) as cpu_sigmoid. */
__device__ __forceinline__ float cmb_gate(float gl) { return 1.0f / (1.0f + expf(-gl)); }

/* The fused norm's expert sum (k_norm_vec's CMB form): cuda_moe_combine_add_rms_norm's arguments. */
typedef struct {
    const float *ye;     /* [rows * k][n] the slots' expert outputs */
    const int32_t *idx;  /* [rows][k] */
    const float *wts;    /* [rows][k] */
    const float *sh;     /* [rows][n] the shared expert's output, or NULL */
    const float *gl;     /* [rows] its gate logit */
    int k;
} norm_cmb;

/* Float4s i0, i0 + NORM_THREADS, .. (U of them; live: below n / 4) of row r's expert sum: k_combine's expression a
 * column (each product and sum rounded, slots in `order`, then + gate * sh). Every slot's loads of a batch of 8
 * slots for all U float4s are issued before their adds: one memory round trip a batch (the 35B-A3B's k 8, U 2: 16
 * float4 in flight a thread), where a float4 at a time waited U times. */
template <int U>
__device__ __forceinline__ void cmb_sum4(const norm_cmb &c, size_t r, size_t n, size_t i0, const int32_t *order,
                                         const float *w_s, float gate, float4 *out) {
    const size_t n4 = n / 4;
    float o[U][4];
#pragma unroll
    for (int u = 0; u < U; u++) o[u][0] = o[u][1] = o[u][2] = o[u][3] = 0.0f;
    for (int j0 = 0; j0 < c.k; j0 += 8) {
        float4 e[8][U];
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int u = 0; u < U; u++) {
                const size_t i = i0 + (size_t)u * NORM_THREADS;
                if (j0 + j < c.k && i < n4)
                    e[j][u] = ((const float4 *)(c.ye + (r * (size_t)c.k + (size_t)order[j0 + j]) * n))[i];
            }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (j0 + j >= c.k) break;
            const float wj = w_s[j0 + j];
#pragma unroll
            for (int u = 0; u < U; u++) {
                o[u][0] = cmb_add(o[u][0], e[j][u].x, wj), o[u][1] = cmb_add(o[u][1], e[j][u].y, wj);
                o[u][2] = cmb_add(o[u][2], e[j][u].z, wj), o[u][3] = cmb_add(o[u][3], e[j][u].w, wj);
            }
        }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
        const size_t i = i0 + (size_t)u * NORM_THREADS;
        if (c.sh && i < n4) { /* k_shexp_add's expression */
            const float4 b = ((const float4 *)(c.sh + r * n))[i];
            o[u][0] = cmb_add(o[u][0], gate, b.x), o[u][1] = cmb_add(o[u][1], gate, b.y);
            o[u][2] = cmb_add(o[u][2], gate, b.z), o[u][3] = cmb_add(o[u][3], gate, b.w);
        }
        out[u] = make_float4(o[u][0], o[u][1], o[u][2], o[u][3]);
    }
}

/* The norms of a row of n <= 4 * NORM_THREADS * VPT floats, n % 4 == 0 and
 * 16-byte aligned rows (the model's hidden sizes): each thread loads its VPT
 * float4 of the row (and of w) at once into registers, before any store, so
 * the loads overlap and the row is read once; then one block sum. The same
 * arithmetic per element as k_rms_norm / k_add_rms_norm (v = h + y rounded
 * once, (v * inv) * w); only the order of the sum of squares differs, the
 * reassociation the tests' bound covers. ADD: h += y and out = norm(h);
 * otherwise out = norm(h) and h is only read (out may equal h: every element
 * is read by the thread that writes it, before it writes). CMB (with ADD): y is
 * the routed experts' sum of the row (and the gated shared expert), made here from c (cmb_sum4: k_combine's
 * operations) instead of read: the same bits as k_combine then this kernel, one launch and no y in memory. */
template <int VPT, bool ADD, bool Q8 = false, bool CMB = false>
__global__ void __launch_bounds__(NORM_THREADS)
    k_norm_vec(float *out, float *h, const float *y, const float *w, size_t n, float eps, uint8_t *xq, norm_cmb c) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    __shared__ float sh[32];
    __shared__ int32_t id_s[CMB ? CUDA_ROUTE_MAX_K : 1], order[CMB ? CUDA_ROUTE_MAX_K : 1];
    __shared__ float w_s[CMB ? CUDA_ROUTE_MAX_K : 1];
    float gate = 0.0f;
    if (CMB) {
        cmb_order(c.idx, c.wts, (size_t)c.k, blockIdx.x, id_s, order, w_s);
        if (c.sh) gate = cmb_gate(c.gl[blockIdx.x]);
    }
    const size_t n4 = n / 4;
    float4 *hr = (float4 *)(h + blockIdx.x * n);
    const float4 *yr = (const float4 *)(y + (ADD && !CMB ? blockIdx.x * n : 0));
    float4 *orow = (float4 *)(out + blockIdx.x * n);
    const float4 *w4 = (const float4 *)w;
    float4 v[VPT], wv[VPT];
    /* CMB: the row's sums at this thread's float4s, two at a time (registers: 8 slots x 2 float4 in flight) */
    float4 cs[CMB ? VPT : 1];
    if constexpr (CMB) {
        constexpr int U = VPT < 2 ? VPT : 2;
#pragma unroll
        for (int u0 = 0; u0 < VPT; u0 += U)
            cmb_sum4<U>(c, blockIdx.x, n, threadIdx.x + (size_t)u0 * NORM_THREADS, order, w_s, gate, cs + u0);
    }
#pragma unroll
    for (int u = 0; u < VPT; u++) {
        const size_t i = threadIdx.x + (size_t)u * NORM_THREADS;
        float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        v[u] = z;
        wv[u] = z;
        if (i < n4) {
            v[u] = hr[i];
            wv[u] = w4[i];
            if (ADD) {
                const float4 b = CMB ? cs[CMB ? u : 0] : yr[i];
                v[u].x = v[u].x + b.x, v[u].y = v[u].y + b.y, v[u].z = v[u].z + b.z, v[u].w = v[u].w + b.w;
            }
        }
    }
    float ss = 0.0f;
#pragma unroll
    for (int u = 0; u < VPT; u++) {
        const size_t i = threadIdx.x + (size_t)u * NORM_THREADS;
        if (ADD && i < n4) hr[i] = v[u];
        ss += v[u].x * v[u].x;
        ss += v[u].y * v[u].y;
        ss += v[u].z * v[u].z;
        ss += v[u].w * v[u].w;
    }
    ss = block_sum(ss, sh);
    const float inv = 1.0f / sqrtf(ss / (float)n + eps);
#pragma unroll
    for (int u = 0; u < VPT; u++) {
        const size_t i = threadIdx.x + (size_t)u * NORM_THREADS;
        if (i < n4) {
            float4 o;
            o.x = (v[u].x * inv) * wv[u].x;
            o.y = (v[u].y * inv) * wv[u].y;
            o.z = (v[u].z * inv) * wv[u].z;
            o.w = (v[u].w * inv) * wv[u].w;
            orow[i] = o;
            v[u] = o;
        }
    }
    if (Q8) { /* the normed row's act_q8_32 blocks in ig_quantize's chunk-major layout (xq, gridDim.x rows): float4
               * i holds values 4i..4i+3 of block i / 8, so lanes 8j..8j+7 of a warp hold one block (n % 32 == 0) */
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int u = 0; u < VPT; u++) {
            const size_t i = threadIdx.x + (size_t)u * NORM_THREADS, b = i / 8;
            const float xv[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
            uint8_t *blk = xq + ((b / 8) * gridDim.x + blockIdx.x) * IG_ACS + (b % 8) * MM_ACT32_BYTES;
            mm_act_store_32x4(xv, blk, lane & 7, i < n4);
        }
    }
}

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* The fused form's launch (cuda_add_rms_norm_q8): k_norm_vec's row shapes, n a multiple of 32 (whole Q8_0 blocks) */
static bool norm_vec_q8_launch(float *out, float *h, const float *y, const float *w, size_t rows, size_t n,
                               float eps, uint8_t *xq, cudaStream_t st) {
    if (n == 0 || n % 32 != 0 || n > 4 * NORM_THREADS * 4 || !xq || !aligned16(out) || !aligned16(h) ||
        !aligned16(w) || !aligned16(y) || !aligned16(xq))
        return false;
    const size_t n4 = n / 4;
    if (n4 <= NORM_THREADS)
        pdl_launch(k_norm_vec<1, true, true>, (unsigned)rows, NORM_THREADS, 0, st, out, h, y, w, n, eps, xq, norm_cmb{});
    else if (n4 <= 2 * NORM_THREADS)
        pdl_launch(k_norm_vec<2, true, true>, (unsigned)rows, NORM_THREADS, 0, st, out, h, y, w, n, eps, xq, norm_cmb{});
    else
        pdl_launch(k_norm_vec<4, true, true>, (unsigned)rows, NORM_THREADS, 0, st, out, h, y, w, n, eps, xq, norm_cmb{});
    return true;
}

/* Launches k_norm_vec when the row fits it; false: the caller takes the general kernel. */
template <bool ADD>
static bool norm_vec_launch(float *out, float *h, const float *y, const float *w, size_t rows, size_t n, float eps,
                            cudaStream_t st) {
    if (n == 0 || n % 4 != 0 || n > 4 * NORM_THREADS * 4 || !aligned16(out) || !aligned16(h) || !aligned16(w) ||
        (ADD && !aligned16(y)))
        return false;
    const size_t n4 = n / 4;
    if (n4 <= NORM_THREADS)
        pdl_launch(k_norm_vec<1, ADD>, (unsigned)rows, NORM_THREADS, 0, st, out, h, y, w, n, eps, (uint8_t *)NULL, norm_cmb{});
    else if (n4 <= 2 * NORM_THREADS)
        pdl_launch(k_norm_vec<2, ADD>, (unsigned)rows, NORM_THREADS, 0, st, out, h, y, w, n, eps, (uint8_t *)NULL, norm_cmb{});
    else
        pdl_launch(k_norm_vec<4, ADD>, (unsigned)rows, NORM_THREADS, 0, st, out, h, y, w, n, eps, (uint8_t *)NULL, norm_cmb{});
    return true;
}

__global__ void k_rms_norm(float *y, const float *x, const float *w, size_t n, float eps) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    __shared__ float sh[32];
    const float *xr = x + blockIdx.x * n;
    float *yr = y + blockIdx.x * n;
    float ss = 0.0f;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = block_sum(ss, sh);
    const float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = (xr[i] * inv) * w[i];
}

extern "C" int cuda_rms_norm(float *y, const float *x, const float *w, size_t rows, size_t n, float eps,
                             void *stream) {
    if (rows == 0) return 0;
    if (!norm_vec_launch<false>(y, (float *)x, NULL, w, rows, n, eps, as_stream(stream)))
        pdl_launch(k_rms_norm, (unsigned)rows, 256, 0, as_stream(stream), y, x, w, n, eps);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_rms_norm");
}

__global__ void k_add_rms_norm(float *x, float *h, const float *y, const float *w, size_t n, float eps) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    __shared__ float sh[32];
    float *hr = h + blockIdx.x * n;
    const float *yr = y + blockIdx.x * n;
    float *xr = x + blockIdx.x * n;
    float ss = 0.0f;
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = hr[i] + yr[i];
        hr[i] = v;
        ss += v * v;
    }
    ss = block_sum(ss, sh);
    const float inv = 1.0f / sqrtf(ss / (float)n + eps);
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) xr[i] = (hr[i] * inv) * w[i];
}

extern "C" int cuda_add_rms_norm(float *x, float *h, const float *y, const float *w, size_t rows, size_t n, float eps,
                                 void *stream) {
    if (rows == 0) return 0;
    if (!norm_vec_launch<true>(x, h, y, w, rows, n, eps, as_stream(stream)))
        pdl_launch(k_add_rms_norm, (unsigned)rows, 256, 0, as_stream(stream), x, h, y, w, n, eps);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_add_rms_norm");
}

/* On unless CLOVER_CUDA_NORM_Q8=0 (read once; cuda_norm_q8_set: 1/0, negative: the environment again). */
static int g_norm_q8 = -1;
extern "C" void cuda_norm_q8_set(int on) { cuda_switch_set(&g_norm_q8, on); }

extern "C" int cuda_add_rms_norm_q8(float *x, float *h, const float *y, const float *w, size_t rows, size_t n,
                                    float eps, void *xq, void *stream) {
    if (rows == 0 || rows > 65535 || !cuda_switch_on(&g_norm_q8, "CLOVER_CUDA_NORM_Q8", 1) ||
        !norm_vec_q8_launch(x, h, y, w, rows, n, eps, (uint8_t *)xq, as_stream(stream)))
        return 1;
    return CUDA_LAUNCH_STATUS(g_err, "cuda_add_rms_norm_q8") ? -1 : 0;
}

/* k_norm_vec's CMB form at the row's VPT, with or without the 8-bit rows */
template <bool Q8>
static void norm_cmb_launch(float *x, float *h, const float *w, size_t rows, size_t n, float eps, uint8_t *xq,
                            const norm_cmb &c, cudaStream_t st) {
    const size_t n4 = n / 4;
    if (n4 <= NORM_THREADS)
        pdl_launch(k_norm_vec<1, true, Q8, true>, (unsigned)rows, NORM_THREADS, 0, st, x, h, (const float *)NULL, w, n,
                   eps, xq, c);
    else if (n4 <= 2 * NORM_THREADS)
        pdl_launch(k_norm_vec<2, true, Q8, true>, (unsigned)rows, NORM_THREADS, 0, st, x, h, (const float *)NULL, w, n,
                   eps, xq, c);
    else
        pdl_launch(k_norm_vec<4, true, Q8, true>, (unsigned)rows, NORM_THREADS, 0, st, x, h, (const float *)NULL, w, n,
                   eps, xq, c);
}

/* On unless CLOVER_CUDA_COMBINE_NORM=0 (read once; cuda_combine_norm_set: 1/0, negative: the environment again). */
static int g_cmb_norm = -1;
extern "C" void cuda_combine_norm_set(int on) { cuda_switch_set(&g_cmb_norm, on); }

extern "C" int cuda_moe_combine_add_rms_norm(float *x, float *h, const float *ye, const int32_t *idx,
                                             const float *wts, size_t k, const float *sh, const float *gate_logit,
                                             const float *w, size_t rows, size_t n, float eps, void *xq,
                                             void *stream) {
    if (!cuda_switch_on(&g_cmb_norm, "CLOVER_CUDA_COMBINE_NORM", 1) || k < 1 || k > CUDA_ROUTE_MAX_K || n == 0 ||
        n % 4 != 0 || n > 4 * NORM_THREADS * 4 || rows > 2147483647u || !x || !h || !ye || !idx || !wts || !w ||
        !aligned16(x) || !aligned16(h) || !aligned16(ye) || !aligned16(w) || (sh && (!gate_logit || !aligned16(sh))))
        return 1;
    if (rows == 0) return xq ? 2 : 0;
    /* the 8-bit rows where cuda_add_rms_norm_q8 would write them */
    const bool q8 = xq && n % 32 == 0 && rows <= 65535 && aligned16(xq) &&
                    cuda_switch_on(&g_norm_q8, "CLOVER_CUDA_NORM_Q8", 1);
    const norm_cmb c = {ye, idx, wts, sh, gate_logit, (int)k};
    if (q8)
        norm_cmb_launch<true>(x, h, w, rows, n, eps, (uint8_t *)xq, c, as_stream(stream));
    else
        norm_cmb_launch<false>(x, h, w, rows, n, eps, (uint8_t *)NULL, c, as_stream(stream));
    if (CUDA_LAUNCH_STATUS(g_err, "cuda_moe_combine_add_rms_norm")) return -1;
    return q8 || !xq ? 0 : 2;
}

__global__ void k_add(float *h, const float *y, size_t count) {
    pdl_wait(); /* cuda_pdl.cuh */
    pdl_trigger();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        h[i] = h[i] + y[i];
}

static unsigned grid_for(size_t count) {
    size_t g = (count + 255) / 256;
    return (unsigned)(g > 4096 ? 4096 : g ? g : 1);
}

extern "C" int cuda_add(float *h, const float *y, size_t count, void *stream) {
    if (count == 0) return 0;
    pdl_launch_rows(k_add, dim3(grid_for(count)), dim3(256), 0, as_stream(stream), h, y, count);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_add");
}

__global__ void k_swiglu(float *h, const float *g, const float *u, size_t count) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        float a = g[i];
        h[i] = (a / (1.0f + expf(-a))) * u[i]; /* cpu_silu(g) * u */
    }
}

extern "C" int cuda_swiglu(float *h, const float *g, const float *u, size_t count, void *stream) {
    if (count == 0) return 0;
    pdl_launch(k_swiglu, grid_for(count), 256, 0, as_stream(stream), h, g, u, count);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_swiglu");
}

/* One warp per row (ROUTE_ROWS rows per block), the row's logits in
 * registers: moe_route_warp (moe_route.cuh) is the routing itself, shared
 * with the fused router product (moe_router.cu) so that the two write the
 * same bits. */
enum { ROUTE_ROWS = 4 };

template <int NPER, bool FAST>
__global__ void __launch_bounds__(ROUTE_ROWS * 32)
    k_route(int32_t *idx, float *wts, const float *logits, const uint8_t *allowed, size_t n, size_t E, size_t k) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const size_t r = (size_t)blockIdx.x * ROUTE_ROWS + threadIdx.x / 32;
    if (r >= n) return; /* a whole warp: the shuffles see full warps */
    moe_route_warp<NPER, FAST>(idx + r * k, wts + r * k, logits + r * E, allowed, E, k);
}

/* The routing's fast form (moe_route.cuh's FAST: the same ids and weight bits in fewer dependent steps): on unless
 * CLOVER_CUDA_ROUTE_FAST=0 (read once; on since its H100 run, bench/device-runs/2026-12-22-on24: decode 298 / 293 ->
 * 307 / 309 tok/s); cuda_route_fast_set overrides it (tests, benches; -1: the variable again). */
static int g_route_fast = -1;
extern "C" int cuda_route_fast(void) {
    int v = __atomic_load_n(&g_route_fast, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("CLOVER_CUDA_ROUTE_FAST");
        v = !(e && strcmp(e, "0") == 0);
        __atomic_store_n(&g_route_fast, v, __ATOMIC_RELAXED);
    }
    return v;
}
extern "C" void cuda_route_fast_set(int on) {
    __atomic_store_n(&g_route_fast, on < 0 ? -1 : on ? 1 : 0, __ATOMIC_RELAXED);
}

template <int NPER>
static void route_launch_n(unsigned grid, unsigned threads, cudaStream_t st, int32_t *idx, float *wts,
                           const float *logits, const uint8_t *allowed, size_t n, size_t E, size_t k) {
    if (cuda_route_fast())
        pdl_launch(k_route<NPER, true>, grid, threads, 0, st, idx, wts, logits, allowed, n, E, k);
    else
        pdl_launch(k_route<NPER, false>, grid, threads, 0, st, idx, wts, logits, allowed, n, E, k);
}

/* The smallest NPER of k_route holding E experts (E <= CUDA_ROUTE_MAX_EXPERT = 32 * 32). */
static int route_launch(int32_t *idx, float *wts, const float *logits, const uint8_t *allowed, size_t n, size_t E,
                        size_t k, cudaStream_t st) {
    const unsigned grid = (unsigned)((n + ROUTE_ROWS - 1) / ROUTE_ROWS);
    const unsigned threads = ROUTE_ROWS * 32;
    const size_t per = (E + 31) / 32;
    if (per <= 1)
        route_launch_n<1>(grid, threads, st, idx, wts, logits, allowed, n, E, k);
    else if (per <= 2)
        route_launch_n<2>(grid, threads, st, idx, wts, logits, allowed, n, E, k);
    else if (per <= 4)
        route_launch_n<4>(grid, threads, st, idx, wts, logits, allowed, n, E, k);
    else if (per <= 8)
        route_launch_n<8>(grid, threads, st, idx, wts, logits, allowed, n, E, k);
    else if (per <= 16)
        route_launch_n<16>(grid, threads, st, idx, wts, logits, allowed, n, E, k);
    else
        route_launch_n<32>(grid, threads, st, idx, wts, logits, allowed, n, E, k);
    return 0;
}

extern "C" int cuda_moe_route(int32_t *idx, float *wts, const float *logits, size_t n, size_t n_expert, size_t k,
                              void *stream) {
    if (n == 0) return 0;
    if (n_expert > CUDA_ROUTE_MAX_EXPERT || k > CUDA_ROUTE_MAX_K) {
        snprintf(g_err, sizeof g_err, "cuda_moe_route: %zu experts, k %zu", n_expert, k);
        return -1;
    }
    route_launch(idx, wts, logits, (const uint8_t *)NULL, n, n_expert, k, as_stream(stream));
    return CUDA_LAUNCH_STATUS(g_err, "cuda_moe_route");
}

extern "C" int cuda_moe_route_allowed(int32_t *idx, float *wts, const float *logits, const uint8_t *allowed, size_t n,
                                      size_t n_expert, size_t k, void *stream) {
    if (n == 0) return 0;
    if (n_expert > CUDA_ROUTE_MAX_EXPERT || k > CUDA_ROUTE_MAX_K || k > n_expert) {
        snprintf(g_err, sizeof g_err, "cuda_moe_route_allowed: %zu experts, k %zu", n_expert, k);
        return -1;
    }
    route_launch(idx, wts, logits, allowed, n, n_expert, k, as_stream(stream));
    return CUDA_LAUNCH_STATUS(g_err, "cuda_moe_route_allowed");
}

__global__ void k_shexp_add(float *out, const float *sh, const float *gl, size_t H) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const size_t r = blockIdx.y;
    const float gate = 1.0f / (1.0f + expf(-gl[r])); /* cpu_sigmoid */
    for (size_t c = blockIdx.x * blockDim.x + threadIdx.x; c < H; c += (size_t)gridDim.x * blockDim.x)
        out[r * H + c] = __fadd_rn(out[r * H + c], __fmul_rn(gate, sh[r * H + c])); /* no FMA: the CPU rounds twice */
}

extern "C" int cuda_shexp_add(float *out, const float *sh, const float *gate_logit, size_t n, size_t H,
                              void *stream) {
    if (n == 0) return 0;
    dim3 grid((unsigned)((H + 255) / 256), (unsigned)n);
    pdl_launch(k_shexp_add, grid, 256, 0, as_stream(stream), out, sh, gate_logit, H);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_shexp_add");
}

/* A float64 block reduction (sum or max) for 256 threads. */
template <bool MAX>
__device__ static double block_reduce_d(double v, double *sh) {
    for (int o = 16; o > 0; o >>= 1) {
        double t = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? (t > v ? t : v) : v + t;
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        double a = sh[0];
        for (unsigned w = 1; w < blockDim.x / 32; w++) a = MAX ? (sh[w] > a ? sh[w] : a) : a + sh[w];
        sh[0] = a;
    }
    __syncthreads();
    return sh[0];
}

__global__ void k_nll(float *nll, const float *logits, const int32_t *targets, size_t V) {
    __shared__ double sh[32];
    const float *row = logits + blockIdx.x * V;
    double mx = -INFINITY;
    for (size_t i = threadIdx.x; i < V; i += blockDim.x)
        if ((double)row[i] > mx) mx = (double)row[i];
    mx = block_reduce_d<true>(mx, sh);
    double s = 0.0;
    for (size_t i = threadIdx.x; i < V; i += blockDim.x) s += exp((double)row[i] - mx);
    s = block_reduce_d<false>(s, sh);
    if (threadIdx.x == 0) nll[blockIdx.x] = (float)(mx + log(s) - (double)row[targets[blockIdx.x]]);
}

extern "C" int cuda_nll(float *nll, const float *logits, const int32_t *targets, size_t n, size_t V, void *stream) {
    if (n == 0) return 0;
    k_nll<<<(unsigned)n, 256, 0, as_stream(stream)>>>(nll, logits, targets, V);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_nll");
}

/* Per row: its k slots in ascending expert id (HF's index_add_ order, as
 * the CPU's bucketed accumulation), out = 0 then out += y * w, each product
 * and sum rounded separately like the CPU's (no FMA contraction), in
 * cmb_order's order. */
__global__ void k_combine(float *out, const float *ye, const int32_t *idx, const float *wts, size_t k, size_t H,
                          const float *sh, const float *gl) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const size_t r = blockIdx.y;
    __shared__ int32_t id_s[CUDA_ROUTE_MAX_K];
    __shared__ int32_t order[CUDA_ROUTE_MAX_K];
    __shared__ float w_s[CUDA_ROUTE_MAX_K];
    cmb_order(idx, wts, k, r, id_s, order, w_s);
    const float gate = sh ? cmb_gate(gl[r]) : 0.0f;
    for (size_t c = blockIdx.x * blockDim.x + threadIdx.x; c < H; c += (size_t)gridDim.x * blockDim.x) {
        float o = 0.0f;
        for (size_t j = 0; j < k; j++) {
            const size_t slot = r * k + (size_t)order[j];
            o = cmb_add(o, ye[slot * H + c], w_s[j]);
        }
        if (sh) o = cmb_add(o, gate, sh[r * H + c]); /* k_shexp_add's expression */
        out[r * H + c] = o;
    }
}

extern "C" int cuda_moe_combine(float *out, const float *ye, const int32_t *idx, const float *wts, size_t n, size_t k,
                                size_t H, void *stream) {
    if (n == 0) return 0;
    dim3 grid((unsigned)((H + 255) / 256), (unsigned)n);
    pdl_launch(k_combine, grid, 256, 0, as_stream(stream), out, ye, idx, wts, k, H, (const float *)NULL,
               (const float *)NULL);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_moe_combine");
}

extern "C" int cuda_moe_combine_shexp(float *out, const float *ye, const int32_t *idx, const float *wts, size_t n,
                                      size_t k, size_t H, const float *sh, const float *gate_logit, void *stream) {
    if (n == 0) return 0;
    dim3 grid((unsigned)((H + 255) / 256), (unsigned)n);
    pdl_launch(k_combine, grid, 256, 0, as_stream(stream), out, ye, idx, wts, k, H, sh, gate_logit);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_moe_combine_shexp");
}
