/*
 * gdn_recurrent.cu: the decode form of step 2 of cuda_gdn.h, with the q/k
 * L2 norm, the gates and the gated output norm (step 3) fused in. One block
 * per (value head, sequence) holds S [dk][dv] in shared memory for all its
 * rows, so the state is read and written once per pass. Per row, in HF's
 * order (as src/cpu/gdn.c): decay S, kv_mem = S^T k, delta = beta (v - kv_mem),
 * S += k delta^T, o = S^T q. The two column sums over dk split the rows of S
 * over P = threads / dv partitions whose partials are added in a fixed order:
 * deterministic, and equal to the CPU's sequential sum up to reassociation.
 */
#include <cuda_runtime.h>
#include <math.h>

#include "cuda_pdl.cuh"
#include "cuda_gdn.h"

enum { REC_THREADS = 512 };

#include "gdn_internal.h"

size_t gdn_recurrent_smem_bytes(const cuda_gdn_dims *d) {
    size_t dk = (size_t)d->k_dim, dv = (size_t)d->v_dim, P = REC_THREADS / dv;
    return sizeof(float) * (dk * dv + 2 * dk + 3 * dv + P * dv + 64);
}

static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* sum_i S[i][j] * x[i] for every j < dv into col[j] (all threads call it) */
static __device__ void col_dot(float *col, const float *S, const float *x, float *red, int dk, int dv) {
    const int P = REC_THREADS / dv, t = threadIdx.x;
    if (t < P * dv) {
        const int j = t % dv, p = t / dv;
        float acc = 0.0f;
        for (int i = p; i < dk; i += P) acc += S[i * dv + j] * x[i];
        red[p * dv + j] = acc;
    }
    __syncthreads();
    if (t < dv) {
        float acc = 0.0f;
        for (int p = 0; p < P; p++) acc += red[p * dv + t];
        col[t] = acc;
    }
    __syncthreads();
}

__global__ void __launch_bounds__(REC_THREADS)
    gdn_recurrent_kernel(float *y, const float *qkv, const float *z, const float *b, const float *a,
                         cuda_gdn_weights w, const cuda_gdn_seq *seqs, cuda_gdn_dims d) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const cuda_gdn_seq sq = seqs[blockIdx.y];
    if (sq.n <= 0) return;
    const int h = blockIdx.x, nk = d.n_k_heads, nv = d.n_v_heads, dk = d.k_dim, dv = d.v_dim;
    const int cd = 2 * nk * dk + nv * dv;
    const int kh = d.tiled ? h % nk : h / (nv / nk);
    const int P = REC_THREADS / dv, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    extern __shared__ float smem[];
    float *S = smem;          /* [dk][dv] */
    float *q = S + dk * dv;   /* [dk] */
    float *k = q + dk;        /* [dk] */
    float *v = k + dk;        /* [dv] */
    float *col = v + dv;      /* [dv]: kv_mem then delta, then o */
    float *zz = col + dv;     /* [dv] */
    float *red = zz + dv;     /* [P][dv] */
    float *sc = red + P * dv; /* scalars: inv_q, inv_k, beta, decay, inv_o; [32] warp partials */
    float *wred = sc + 32;

    float *Sg = sq.state + (size_t)h * dk * dv;
    const int n4 = (dk * dv) % 4 == 0 ? dk * dv / 4 : 0; /* 16-byte copies where the size allows */
#pragma unroll 4
    for (int e = tid; e < n4; e += REC_THREADS) ((float4 *)S)[e] = __ldg((const float4 *)Sg + e);
    for (int e = 4 * n4 + tid; e < dk * dv; e += REC_THREADS) S[e] = Sg[e];
    const float scale = (float)pow((double)dk, -0.5);

    for (int t = 0; t < sq.n; t++) {
        const size_t row = (size_t)sq.row0 + t;
        const float *xr = qkv + row * cd;
        for (int i = tid; i < dk; i += REC_THREADS) {
            q[i] = xr[kh * dk + i];
            k[i] = xr[nk * dk + kh * dk + i];
        }
        for (int j = tid; j < dv; j += REC_THREADS) {
            v[j] = xr[2 * nk * dk + h * dv + j];
            zz[j] = z[row * nv * dv + (size_t)h * dv + j];
        }
        __syncthreads();
        if (warp < 2) { /* warp 0: |q|^2, warp 1: |k|^2 */
            const float *x = warp == 0 ? q : k;
            float ss = 0.0f;
            for (int i = lane; i < dk; i += 32) ss += x[i] * x[i];
            ss = warp_sum(ss);
            if (lane == 0) sc[warp] = 1.0f / sqrtf(ss + 1e-6f);
        } else if (tid == 64) {
            const float bb = b[row * nv + h], aa = a[row * nv + h] + w.dt_bias[h];
            const float sp = aa > 20.0f ? aa : log1pf(expf(aa));
            sc[2] = 1.0f / (1.0f + expf(-bb));
            sc[3] = expf(w.ssm_a[h] * sp);
        }
        __syncthreads();
        const float inv_q = sc[0], inv_k = sc[1], beta = sc[2], decay = sc[3];
        for (int i = tid; i < dk; i += REC_THREADS) {
            q[i] = (q[i] * inv_q) * scale;
            k[i] = k[i] * inv_k;
        }
        for (int e = tid; e < dk * dv; e += REC_THREADS) S[e] *= decay;
        __syncthreads();
        col_dot(col, S, k, red, dk, dv);
        for (int j = tid; j < dv; j += REC_THREADS) col[j] = (v[j] - col[j]) * beta;
        __syncthreads();
        for (int e = tid; e < dk * dv; e += REC_THREADS) S[e] += k[e / dv] * col[e % dv];
        __syncthreads();
        col_dot(col, S, q, red, dk, dv);
        /* gated RMS norm over the head's dv outputs */
        float ss = 0.0f;
        for (int j = tid; j < dv; j += REC_THREADS) ss += col[j] * col[j];
        ss = warp_sum(ss);
        if (lane == 0) wred[warp] = ss;
        __syncthreads();
        if (tid == 0) {
            float tot = 0.0f;
            for (int i = 0; i < REC_THREADS / 32; i++) tot += wred[i];
            sc[4] = 1.0f / sqrtf(tot / (float)dv + d.eps);
        }
        __syncthreads();
        const float inv_o = sc[4];
        for (int j = tid; j < dv; j += REC_THREADS) {
            float zj = zz[j];
            y[row * nv * dv + (size_t)h * dv + j] = (w.norm_w[j] * (col[j] * inv_o)) * (zj / (1.0f + expf(-zj)));
        }
        __syncthreads(); /* q, k, v, col, sc are rewritten by the next row */
    }
    __syncthreads();
    for (int e = tid; e < n4; e += REC_THREADS) ((float4 *)Sg)[e] = ((const float4 *)S)[e];
    for (int e = 4 * n4 + tid; e < dk * dv; e += REC_THREADS) Sg[e] = S[e];
    (void)P;
}

extern "C" int cuda_gdn_recurrent(float *y, const float *qkv, const float *z, const float *b, const float *a,
                                  const cuda_gdn_weights *w, const cuda_gdn_seq *seqs, int n_seq,
                                  const cuda_gdn_dims *d, void *stream) {
    if (cuda_gdn_dims_check(d, NULL, 0) != 0 || n_seq < 0 || n_seq > 65535) return CUDA_GDN_EINVAL;
    if (n_seq == 0) return 0;
    if (gdn_recurrent_split(y, qkv, z, b, a, w, seqs, n_seq, d, stream)) return (int)cudaGetLastError();
    dim3 grid((unsigned)d->n_v_heads, (unsigned)n_seq);
    pdl_launch(gdn_recurrent_kernel, grid, REC_THREADS, gdn_recurrent_smem_bytes(d), (cudaStream_t)stream, y, qkv, z, b, a,
                                                                                                   *w, seqs, *d);
    return (int)cudaGetLastError();
}

extern "C" int gdn_recurrent_init(size_t max_smem) {
    return (int)cudaFuncSetAttribute(gdn_recurrent_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)max_smem);
}
