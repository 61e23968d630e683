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

#include "cuda_check.h"
#include "cuda_ops.h"
#include "cuda_pdl.cuh"

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
    pdl_launch(k_add_rms_norm, (unsigned)rows, 256, 0, as_stream(stream), x, h, y, w, n, eps);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_add_rms_norm");
}

__global__ void k_add(float *h, const float *y, size_t count) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        h[i] = h[i] + y[i];
}

static unsigned grid_for(size_t count) {
    size_t g = (count + 255) / 256;
    return (unsigned)(g > 4096 ? 4096 : g ? g : 1);
}

extern "C" int cuda_add(float *h, const float *y, size_t count, void *stream) {
    if (count == 0) return 0;
    k_add<<<grid_for(count), 256, 0, as_stream(stream)>>>(h, y, count);
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

/* One block of 256 threads per row; the row's probabilities in shared memory.
 * allowed (NULL: every expert) restricts the top-k to a preview's coreset
 * (cpu_moe_route with allowed): the softmax stays over all experts, fewer than
 * k allowed leave padding slots of the lowest ids outside the set, weight 0. */
__global__ void k_route(int32_t *idx, float *wts, const float *logits, const uint8_t *allowed, size_t E, size_t k) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    __shared__ float p[CUDA_ROUTE_MAX_EXPERT];
    __shared__ float sh[32];
    __shared__ float mx_s;
    const float *row = logits + blockIdx.x * E;
    float mx = -INFINITY;
    for (size_t e = threadIdx.x; e < E; e += blockDim.x) {
        p[e] = row[e];
        mx = fmaxf(mx, row[e]);
    }
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x / 32] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = sh[0];
        for (unsigned w = 1; w < blockDim.x / 32; w++) m = fmaxf(m, sh[w]);
        mx_s = m;
    }
    __syncthreads();
    float s = 0.0f;
    for (size_t e = threadIdx.x; e < E; e += blockDim.x) {
        p[e] = expf(p[e] - mx_s);
        s += p[e];
    }
    s = block_sum(s, sh);
    const float inv = 1.0f / s;
    for (size_t e = threadIdx.x; e < E; e += blockDim.x) p[e] *= inv;
    __syncthreads();
    /* top-k: k rounds of a first-maximum search by one warp (k, E small) */
    if (threadIdx.x < 32) {
        int32_t chosen[CUDA_ROUTE_MAX_K];
        size_t m = 0;
        for (size_t j = 0; j < k; j++) {
            float best = -1.0f;
            int32_t bi = INT32_MAX;
            for (size_t e = threadIdx.x; e < E; e += 32) {
                bool taken = allowed && !allowed[e];
                for (size_t q = 0; q < j; q++) taken |= chosen[q] == (int32_t)e;
                if (!taken && (p[e] > best || (p[e] == best && (int32_t)e < bi))) {
                    best = p[e];
                    bi = (int32_t)e;
                }
            }
            for (int o = 16; o > 0; o >>= 1) {
                float ob = __shfl_xor_sync(0xffffffffu, best, o);
                int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
                if (ob > best || (ob == best && oi < bi)) {
                    best = ob;
                    bi = oi;
                }
            }
            if (bi == INT32_MAX) break; /* fewer than k allowed */
            chosen[j] = bi;
            m = j + 1;
        }
        if (threadIdx.x == 0) {
            float top = 0.0f;
            for (size_t j = 0; j < m; j++) top += p[chosen[j]]; /* descending order, as the CPU sums */
            for (size_t j = 0; j < m; j++) {
                idx[blockIdx.x * k + j] = chosen[j];
                wts[blockIdx.x * k + j] = p[chosen[j]] / top;
            }
            size_t j = m; /* padding slots (allowed only) */
            for (size_t e = 0; allowed && e < E && j < k; e++)
                if (!allowed[e]) {
                    idx[blockIdx.x * k + j] = (int32_t)e;
                    wts[blockIdx.x * k + j] = 0.0f;
                    j++;
                }
        }
    }
}

extern "C" int cuda_moe_route(int32_t *idx, float *wts, const float *logits, size_t n, size_t n_expert, size_t k,
                              void *stream) {
    if (n == 0) return 0;
    pdl_launch(k_route, (unsigned)n, 256, 0, as_stream(stream), idx, wts, logits, (const uint8_t *)NULL, n_expert, k);
    return CUDA_LAUNCH_STATUS(g_err, "cuda_moe_route");
}

extern "C" int cuda_moe_route_allowed(int32_t *idx, float *wts, const float *logits, const uint8_t *allowed, size_t n,
                                      size_t n_expert, size_t k, void *stream) {
    if (n == 0) return 0;
    if (n_expert > CUDA_ROUTE_MAX_EXPERT || k > CUDA_ROUTE_MAX_K || k > n_expert) {
        snprintf(g_err, sizeof g_err, "cuda_moe_route_allowed: %zu experts, k %zu", n_expert, k);
        return -1;
    }
    pdl_launch(k_route, (unsigned)n, 256, 0, as_stream(stream), idx, wts, logits, allowed, n_expert, k);
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
 * and sum rounded separately like the CPU's (no FMA contraction). */
__global__ void k_combine(float *out, const float *ye, const int32_t *idx, const float *wts, size_t k, size_t H,
                          const float *sh, const float *gl) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const size_t r = blockIdx.y;
    int32_t order[CUDA_ROUTE_MAX_K];
    for (size_t j = 0; j < k; j++) order[j] = (int32_t)j;
    for (size_t j = 1; j < k; j++) { /* insertion sort of k <= 16 slots by expert id */
        int32_t t = order[j];
        size_t q = j;
        while (q > 0 && idx[r * k + order[q - 1]] > idx[r * k + t]) {
            order[q] = order[q - 1];
            q--;
        }
        order[q] = t;
    }
    const float gate = sh ? 1.0f / (1.0f + expf(-gl[r])) : 0.0f; /* cpu_sigmoid */
    for (size_t c = blockIdx.x * blockDim.x + threadIdx.x; c < H; c += (size_t)gridDim.x * blockDim.x) {
        float o = 0.0f;
        for (size_t j = 0; j < k; j++) {
            const size_t slot = r * k + (size_t)order[j];
            o = __fadd_rn(o, __fmul_rn(ye[slot * H + c], wts[slot]));
        }
        if (sh) o = __fadd_rn(o, __fmul_rn(gate, sh[r * H + c])); /* k_shexp_add's expression */
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
