/*
 * gdn_conv.cu: step 1 of cuda_gdn.h, the depthwise causal conv + SiLU and
 * the ring step. Output rows are independent functions of [ring; rows], so
 * the grid is channels x row tiles x sequences. Only the first tile of a
 * sequence reads the ring (rows t < K-1 <= 7 < CONV_ROWS), and each thread
 * owns one channel, so that tile's thread also advances its channel of the
 * ring after its reads: no second launch, no race.
 * Rounding as src/cpu/gdn.c: sequential sum over the K taps, x / (1 + e^-x).
 */
#include <cuda_runtime.h>
#include <math.h>

#include "cuda_pdl.cuh"
#include "cuda_gdn.h"

enum { CONV_THREADS = 128, CONV_ROWS = 32 };

__global__ void gdn_conv_kernel(float *qkv, const float *mixed, const float *conv_w, const cuda_gdn_seq *seqs,
                                int cd, int K) {
    pdl_wait(); /* inputs are the previous kernel's outputs (cuda_pdl.cuh) */
    pdl_trigger();
    const cuda_gdn_seq sq = seqs[blockIdx.z];
    const int c = blockIdx.x * CONV_THREADS + threadIdx.x;
    const int t0 = blockIdx.y * CONV_ROWS;
    if (c >= cd || t0 >= sq.n) return;
    const int keep = K - 1, t1 = min(sq.n, t0 + CONV_ROWS);
    float w[CUDA_GDN_MAX_CONV_K];
#pragma unroll
    for (int j = 0; j < CUDA_GDN_MAX_CONV_K; j++) w[j] = j < K ? conv_w[(size_t)c * K + j] : 0.0f;
    const float *x = mixed + (size_t)sq.row0 * cd + c; /* row e of x at x[e * cd] */
    /* the tile's inputs E[t0 .. t1 - 1 + keep] into registers first, every load issued before the first output is
     * stored (a store may alias a later load for all the compiler knows, so loads mixed with the stores waited on
     * each other: ~19 us a 32-row commit's layer on the H100, 2026-12-25-k2core24's trace); each input is also
     * read once instead of K times. The sums are the same expressions in the same order: the same bits. */
    const int nt = t1 - t0;
    float in[CONV_ROWS + CUDA_GDN_MAX_CONV_K - 1];
#pragma unroll
    for (int i = 0; i < CONV_ROWS + CUDA_GDN_MAX_CONV_K - 1; i++) {
        const int e = t0 + i; /* row of E = [ring; x] */
        in[i] = i >= nt + keep ? 0.0f : e < keep ? sq.ring[(size_t)e * cd + c] : x[(size_t)(e - keep) * cd];
    }
#pragma unroll
    for (int i = 0; i < CONV_ROWS; i++) {
        if (i >= nt) break;
        float acc = 0.0f;
#pragma unroll
        for (int j = 0; j < CUDA_GDN_MAX_CONV_K; j++)
            if (j < K) acc += w[j] * in[i + j];
        qkv[((size_t)sq.row0 + t0 + i) * cd + c] = acc / (1.0f + expf(-acc));
    }
    if (t0 != 0 || keep == 0) return;
    /* the ring becomes E[n .. n + keep - 1]: read them all, then write */
    float nr[CUDA_GDN_MAX_CONV_K];
    for (int i = 0; i < keep; i++) {
        int e = sq.n + i;
        nr[i] = e < keep ? sq.ring[(size_t)e * cd + c] : x[(size_t)(e - keep) * cd];
    }
    for (int i = 0; i < keep; i++) sq.ring[(size_t)i * cd + c] = nr[i];
}

extern "C" int cuda_gdn_conv(float *qkv, const float *mixed, const float *conv_w, const cuda_gdn_seq *seqs,
                             int n_seq, int max_rows, const cuda_gdn_dims *d, void *stream) {
    if (cuda_gdn_dims_check(d, NULL, 0) != 0 || n_seq < 0 || max_rows < 0 || n_seq > 65535) return CUDA_GDN_EINVAL;
    if (n_seq == 0 || max_rows == 0) return 0;
    const int cd = cuda_gdn_conv_dim(d);
    dim3 grid((unsigned)((cd + CONV_THREADS - 1) / CONV_THREADS), (unsigned)((max_rows + CONV_ROWS - 1) / CONV_ROWS),
              (unsigned)n_seq);
    pdl_launch(gdn_conv_kernel, grid, CONV_THREADS, 0, (cudaStream_t)stream, qkv, mixed, conv_w, seqs, cd, d->conv_k);
    return (int)cudaGetLastError();
}
