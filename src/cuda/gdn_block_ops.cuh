/*
 * gdn_block_ops.cuh: the per-element steps of the GDN block operator that
 * both of its device forms run (gdn_block.cu, the four-launch form kept
 * behind CLOVER_CUDA_GDN_BLOCK=0, and gdn_block_fused.cu): one definition,
 * so both compile the same expressions and their outputs are the same bits.
 */
#ifndef CLOVER_CUDA_GDN_BLOCK_OPS_CUH
#define CLOVER_CUDA_GDN_BLOCK_OPS_CUH

__device__ static inline float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ static inline float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* SiLU of the causal conv of channel c at block row i: left taps over [ring; x] (ring: the K-1 committed
 * rows), then the right taps over the block's next rows (K-1 a channel, tap 0 multiplies row i + 1). */
__device__ static inline float block_conv_at(const float *x, const float *ring, const float *w, const float *wr,
                                             int cd, int K, int b, int i, int c) {
    const int keep = K - 1;
    float acc = 0.0f;
    for (int t = 0; t < K; t++) {
        int e = i + t; /* row of E = [ring; x] */
        float in = e < keep ? ring[(size_t)e * cd + c] : x[(size_t)(e - keep) * cd + c];
        acc += w[(size_t)c * K + t] * in;
    }
    for (int t = 1; t < K && i + t < b; t++) acc += wr[(size_t)c * keep + t - 1] * x[(size_t)(i + t) * cd + c];
    return silu_f(acc);
}

#endif
