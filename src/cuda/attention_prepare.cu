/*
 * attention_prepare.cu: step 1 of cuda_attention.h: q/k RMSNorm, RoPE and
 * the KV append, one block per (row, head, sequence). Query heads are normed
 * and rotated in place inside q_proj's output; KV heads read k_proj / v_proj
 * and write the cache row at the row's absolute position. The rounding
 * follows src/cpu/norm.c and rope.c (1 / sqrtf(ss / n + eps), (x * r) * w;
 * cos / sin of the f32 angle in double), so only the order of the sum of
 * squares differs from the CPU.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

#include "cuda_pdl.cuh"
#include "cuda_attention.h"

enum { PREP_THREADS = 128 };

__global__ void attn_prepare_kernel(float *qg, const float *k, const float *v, const float *q_norm,
                                    const float *k_norm, const float *inv_freq, const cuda_attn_seq *seqs,
                                    cuda_attn_dims d) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const cuda_attn_seq sq = seqs[blockIdx.z];
    const int r = blockIdx.x;
    if (r >= sq.n) return;
    const int row = sq.row0 + r, pos = sq.pos + r, h = blockIdx.y;
    const int nh = d.n_head, nkv = d.n_head_kv, hd = d.head_dim, half = d.rot / 2;

    float *x;        /* the vector normed and rotated in place */
    const float *w;  /* its norm weight */
    if (h < nh) {
        x = qg + ((size_t)row * nh + h) * 2 * hd;
        w = q_norm;
    } else {
        const int kvh = h - nh;
        const size_t src = ((size_t)row * nkv + kvh) * hd, dst = ((size_t)pos * nkv + kvh) * hd;
        x = sq.k_cache + dst;
        w = k_norm;
        for (int i = threadIdx.x; i < hd; i += blockDim.x) {
            x[i] = k[src + i];
            sq.v_cache[dst + i] = v[src + i];
        }
        __syncthreads();
    }

    __shared__ float red[PREP_THREADS / 32];
    __shared__ float inv_s;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) ss += x[i] * x[i];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int i = 0; i < PREP_THREADS / 32; i++) t += red[i];
        inv_s = 1.0f / sqrtf(t / (float)hd + d.eps);
    }
    __syncthreads();
    const float inv = inv_s;
    /* the rotated pairs (i, i + half) belong to one thread; the rest pass through */
    const float p = (float)pos;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        if (i < half) {
            const float x1 = (x[i] * inv) * w[i], x2 = (x[i + half] * inv) * w[i + half];
            const float a = p * inv_freq[i];
            const float c = (float)cos((double)a), s = (float)sin((double)a);
            x[i] = x1 * c + (-x2) * s;
            x[i + half] = x2 * c + x1 * s;
        } else if (i >= 2 * half) {
            x[i] = (x[i] * inv) * w[i];
        }
    }
}

extern "C" int cuda_attn_prepare(float *qg, const float *k, const float *v, const float *q_norm,
                                 const float *k_norm, const float *inv_freq, const cuda_attn_seq *seqs, int n_seq,
                                 int max_rows, const cuda_attn_dims *d, void *stream) {
    if (cuda_attn_dims_check(d, NULL, 0) != 0 || n_seq < 0 || max_rows < 0 || n_seq > 65535)
        return CUDA_ATTN_EINVAL;
    if (n_seq == 0 || max_rows == 0) return 0;
    dim3 grid((unsigned)max_rows, (unsigned)(d->n_head + d->n_head_kv), (unsigned)n_seq);
    pdl_launch(attn_prepare_kernel, grid, PREP_THREADS, 0, (cudaStream_t)stream, qg, k, v, q_norm, k_norm, inv_freq, seqs,
                                                                         *d);
    return (int)cudaGetLastError();
}

extern "C" int cuda_attn_dims_check(const cuda_attn_dims *d, char *why, size_t why_len) {
    const char *msg = NULL;
    char buf[160];
    if (d->n_head < 1 || d->n_head_kv < 1 || d->head_dim < 1) {
        snprintf(buf, sizeof buf, "attention (cuda): n_head %d, n_head_kv %d, head_dim %d: all must be >= 1",
                 d->n_head, d->n_head_kv, d->head_dim);
        msg = buf;
    } else if (d->n_head % d->n_head_kv != 0) {
        snprintf(buf, sizeof buf, "attention (cuda): n_head %d is not a multiple of n_head_kv %d", d->n_head,
                 d->n_head_kv);
        msg = buf;
    } else if (d->head_dim > CUDA_ATTN_MAX_HEAD_DIM) {
        snprintf(buf, sizeof buf, "attention (cuda): head_dim %d is over the kernels' limit %d", d->head_dim,
                 CUDA_ATTN_MAX_HEAD_DIM);
        msg = buf;
    } else if (d->rot < 0 || d->rot % 2 != 0 || d->rot > d->head_dim) {
        snprintf(buf, sizeof buf, "attention (cuda): rotary dims %d must be even and <= head_dim %d", d->rot,
                 d->head_dim);
        msg = buf;
    } else if (!(d->eps >= 0.0f)) {
        snprintf(buf, sizeof buf, "attention (cuda): norm eps %g must be >= 0", (double)d->eps);
        msg = buf;
    }
    if (!msg) return 0;
    if (why && why_len) snprintf(why, why_len, "%s", msg);
    return CUDA_ATTN_EINVAL;
}

extern "C" const char *cuda_attn_strerror(int code) {
    if (code == 0) return "no error";
    if (code == CUDA_ATTN_EINVAL) return "attention (cuda): an argument is out of range";
    return cudaGetErrorString((cudaError_t)code);
}
