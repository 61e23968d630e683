/*
 * gdn_recurrent_split.cu: the decode form of the GDN recurrence (as
 * gdn_recurrent.cu) with each value head's state split by columns over a
 * thread-block cluster of dv / 32 blocks, 32 columns a block.
 *
 * Why: gdn_recurrent.cu runs one block per (value head, sequence), so the
 * 35B-A3B model's decode step keeps 32 of 132 SMs busy, each reading and
 * writing a 64 KB state through one SM: 15.1 us a layer on the H200
 * (bench_cuda_decode, 2026-12-07), x30 layers. Every column of S is
 * independent in the recurrence (kv_mem_j, delta_j, S[:, j], o_j); only the
 * gated norm's sum of squares spans the head, and it is exchanged through
 * the cluster's distributed shared memory.
 *
 * Bits: equal to gdn_recurrent.cu's by construction. Column j's sums over dk
 * use the same P = 512 / dv partitions (rows p, p + P, ...) added in the same
 * order; the element-wise steps are the same expressions; block c's 32
 * columns are gdn_recurrent.cu's warp c, so its warp sum of squares is the
 * same tree, and the head's total adds the dv / 32 warp sums in rank order
 * (gdn_recurrent.cu then adds the other warps' zeros, which change nothing:
 * the sum is >= 0). test_cuda_gdn checks it bit for bit against the one-block
 * form. Applies when dv is 32, 64, 128 or 256; otherwise gdn_recurrent.cu.
 *
 * Switch: CLOVER_CUDA_GDN_SPLIT=1 (or cuda_gdn_split_set(1)) turns it on; off
 * by default until its device run (bench/device-runs/2026-12-07-mmvs).
 */
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_pdl.cuh"
#include "cuda_gdn.h"
#include "gdn_internal.h"

namespace cg = cooperative_groups;

enum { SPLIT_COLS = 32, SPLIT_REC_THREADS = 512 /* gdn_recurrent.cu's REC_THREADS: P = 512 / dv */ };

static __device__ __forceinline__ float split_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* col[jj] = sum_i S[i][jj] * x[i] for the block's 32 columns, over P partitions (gdn_recurrent.cu's col_dot) */
static __device__ void split_col_dot(float *col, const float *S, const float *x, float *red, int dk, int P) {
    const int t = threadIdx.x, jj = t % SPLIT_COLS, p = t / SPLIT_COLS;
    float acc = 0.0f;
    for (int i = p; i < dk; i += P) acc += S[i * SPLIT_COLS + jj] * x[i];
    red[p * SPLIT_COLS + jj] = acc;
    __syncthreads();
    if (t < SPLIT_COLS) {
        float a = 0.0f;
        for (int q = 0; q < P; q++) a += red[q * SPLIT_COLS + t];
        col[t] = a;
    }
    __syncthreads();
}

__global__ void gdn_rec_split_kernel(float *y, const float *qkv, const float *z, const float *b, const float *a,
                                     cuda_gdn_weights w, const cuda_gdn_seq *seqs, cuda_gdn_dims d) {
    cg::cluster_group cl = cg::this_cluster();
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const cuda_gdn_seq sq = seqs[blockIdx.y];
    if (sq.n <= 0) return; /* cluster-uniform: every block of the cluster has the same sequence */
    const int CS = d.v_dim / SPLIT_COLS, c = (int)cl.block_rank(), h = blockIdx.x / CS;
    const int nk = d.n_k_heads, nv = d.n_v_heads, dk = d.k_dim, dv = d.v_dim, j0 = c * SPLIT_COLS;
    const int cd = 2 * nk * dk + nv * dv;
    const int kh = d.tiled ? h % nk : h / (nv / nk);
    const int P = SPLIT_REC_THREADS / dv, nt = P * SPLIT_COLS, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    extern __shared__ float smem[];
    float *S = smem;                 /* [dk][32]: columns j0 .. j0 + 31 */
    float *q = S + dk * SPLIT_COLS;  /* [dk] */
    float *k = q + dk;               /* [dk] */
    float *v = k + dk;               /* [32] */
    float *col = v + SPLIT_COLS;     /* [32]: kv_mem then delta, then o */
    float *zz = col + SPLIT_COLS;    /* [32] */
    float *red = zz + SPLIT_COLS;    /* [P][32] */
    float *sc = red + P * SPLIT_COLS; /* inv_q, inv_k, beta, decay, inv_o */
    float *wsq = sc + 8;             /* this block's sum of squares, read by the cluster */

    float *Sg = sq.state + (size_t)h * dk * dv + j0;
    for (int e = tid; e < dk * (SPLIT_COLS / 4); e += nt) { /* 16-byte pieces: dv and j0 are multiples of 32 */
        const int i = e / (SPLIT_COLS / 4), f = e % (SPLIT_COLS / 4);
        ((float4 *)(S + i * SPLIT_COLS))[f] = __ldg((const float4 *)(Sg + (size_t)i * dv) + f);
    }
    const float scale = (float)pow((double)dk, -0.5);

    for (int t = 0; t < sq.n; t++) {
        const size_t row = (size_t)sq.row0 + t;
        const float *xr = qkv + row * cd;
        for (int i = tid; i < dk; i += nt) {
            q[i] = xr[kh * dk + i];
            k[i] = xr[nk * dk + kh * dk + i];
        }
        if (tid < SPLIT_COLS) {
            v[tid] = xr[2 * nk * dk + h * dv + j0 + tid];
            zz[tid] = z[row * nv * dv + (size_t)h * dv + j0 + tid];
        }
        __syncthreads();
        if (warp < 2) { /* warp 0: |q|^2 and the gates, warp 1: |k|^2 (P >= 2: two warps at least) */
            const float *x = warp == 0 ? q : k;
            float ss = 0.0f;
            for (int i = lane; i < dk; i += 32) ss += x[i] * x[i];
            ss = split_warp_sum(ss);
            if (lane == 0) sc[warp] = 1.0f / sqrtf(ss + 1e-6f);
            if (warp == 0 && lane == 0) {
                const float bb = b[row * nv + h], aa = a[row * nv + h] + w.dt_bias[h];
                const float sp = aa > 20.0f ? aa : log1pf(expf(aa));
                sc[2] = 1.0f / (1.0f + expf(-bb));
                sc[3] = expf(w.ssm_a[h] * sp);
            }
        }
        __syncthreads();
        const float inv_q = sc[0], inv_k = sc[1], beta = sc[2], decay = sc[3];
        for (int i = tid; i < dk; i += nt) {
            q[i] = (q[i] * inv_q) * scale;
            k[i] = k[i] * inv_k;
        }
        for (int e = tid; e < dk * SPLIT_COLS; e += nt) S[e] *= decay;
        __syncthreads();
        split_col_dot(col, S, k, red, dk, P);
        if (tid < SPLIT_COLS) col[tid] = (v[tid] - col[tid]) * beta;
        __syncthreads();
        for (int e = tid; e < dk * SPLIT_COLS; e += nt) S[e] += k[e / SPLIT_COLS] * col[e % SPLIT_COLS];
        __syncthreads();
        split_col_dot(col, S, q, red, dk, P);
        /* the gated RMS norm over the head's dv outputs: this block's 32, then the cluster's in rank order */
        if (warp == 0) {
            float ss = 0.0f;
            ss += col[lane] * col[lane];
            ss = split_warp_sum(ss);
            if (lane == 0) *wsq = ss;
        }
        cl.sync(); /* every block's sum of squares is written */
        if (tid == 0) {
            float tot = 0.0f;
            for (int r = 0; r < CS; r++) tot += *cl.map_shared_rank(wsq, r);
            sc[4] = 1.0f / sqrtf(tot / (float)dv + d.eps);
        }
        __syncthreads();
        const float inv_o = sc[4];
        if (tid < SPLIT_COLS) {
            const int j = j0 + tid;
            const float zj = zz[tid];
            y[row * nv * dv + (size_t)h * dv + j] = (w.norm_w[j] * (col[tid] * inv_o)) * (zj / (1.0f + expf(-zj)));
        }
        cl.sync(); /* the peers have read wsq before the next row rewrites it (and before any block exits) */
    }
    for (int e = tid; e < dk * (SPLIT_COLS / 4); e += nt) {
        const int i = e / (SPLIT_COLS / 4), f = e % (SPLIT_COLS / 4);
        ((float4 *)(Sg + (size_t)i * dv))[f] = ((const float4 *)(S + i * SPLIT_COLS))[f];
    }
}

/* 0 off (the default unless CLOVER_CUDA_GDN_SPLIT=1), 1 on. */
static int g_split = -1;
static int split_enabled(void) {
    int v = __atomic_load_n(&g_split, __ATOMIC_RELAXED);
    if (v < 0) {
        const char *e = getenv("CLOVER_CUDA_GDN_SPLIT");
        v = e && strcmp(e, "1") == 0;
        __atomic_store_n(&g_split, v, __ATOMIC_RELAXED);
    }
    return v;
}
extern "C" void cuda_gdn_split_set(int on) { __atomic_store_n(&g_split, on ? 1 : 0, __ATOMIC_RELAXED); }

/* 1 when the split form ran (launched), 0 when it does not apply or its launch was refused (the caller then runs
 * gdn_recurrent.cu's kernel). */
int gdn_recurrent_split(float *y, const float *qkv, const float *z, const float *b, const float *a,
                        const cuda_gdn_weights *w, const cuda_gdn_seq *seqs, int n_seq, const cuda_gdn_dims *d,
                        void *stream) {
    const int dv = d->v_dim, dk = d->k_dim;
    if (!split_enabled() || (dv != 32 && dv != 64 && dv != 128 && dv != 256)) return 0;
    const int CS = dv / SPLIT_COLS, P = SPLIT_REC_THREADS / dv;
    const size_t smem = sizeof(float) * ((size_t)dk * SPLIT_COLS + 2 * (size_t)dk + 3 * SPLIT_COLS +
                                         (size_t)P * SPLIT_COLS + 8 + 4);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(d->n_v_heads * CS), (unsigned)n_seq);
    cfg.blockDim = dim3((unsigned)(P * SPLIT_COLS));
    cfg.dynamicSmemBytes = smem;
    cfg.stream = (cudaStream_t)stream;
    cudaLaunchAttribute at[2];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = (unsigned)CS;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = stream != NULL && cuda_pdl_enabled() ? 2 : 1;
    cuda_gdn_weights wv = *w;
    cuda_gdn_dims dd = *d;
    if (cudaLaunchKernelEx(&cfg, gdn_rec_split_kernel, y, qkv, z, b, a, wv, seqs, dd) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: the one-block form runs instead */
        return 0;
    }
    return 1;
}
