/*
 * matmul_act.cu: the 8-bit activation rows of the decode products, written
 * byte for byte as src/quant/act_scalar.c writes them (act_q8_32 for Q8_0
 * weights, act_q8_k for the K-quants), so the GPU's integer dots see the
 * same codes as the CPU's. One warp per block: max|x| by a warp reduction
 * (max is exact in any order), then d = max/127 and
 * q = rint(x * (127/max)) with IEEE division and no contraction, exactly the
 * scalar code's two roundings. A block with a NaN or an infinity gets d = NaN
 * and codes 0; an all-zero block d = 0.
 */
#include <float.h>
#include <math.h>

#include "matmul_internal.cuh"

/* Quantises this lane's `N` values (N = 1 for blocks of 32, 8 for 256); returns the block's d. */
template <int N>
__device__ __forceinline__ float act_block(const float *xv, int8_t *q) {
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

/* Blocks of 32 (act_q8_32): warp w of the grid quantises block w. */
__global__ void act_q8_32_kernel(const float *x, size_t n_x, size_t n_in, uint8_t *xq) {
    const size_t nb = n_in / 32, gw = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (gw >= n_x * nb) return;
    const size_t r = gw / nb, b = gw % nb;
    const float xv = x[r * n_in + b * 32 + lane];
    int8_t q;
    const float d = act_block<1>(&xv, &q);
    uint8_t *dst = xq + r * (nb * MM_ACT32_BYTES) + b * MM_ACT32_BYTES;
    if (lane == 0) *(float *)dst = d;
    ((int8_t *)(dst + 4))[lane] = q;
}

/* Blocks of 256 (act_q8_k): lane l holds values 8l..8l+7; the sum of each
 * 16 (bsums[s]) is lanes 2s and 2s+1 together. */
__global__ void act_q8_k_kernel(const float *x, size_t n_x, size_t n_in, uint8_t *xq) {
    const size_t nb = n_in / 256, gw = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (gw >= n_x * nb) return;
    const size_t r = gw / nb, b = gw % nb;
    const float *src = x + r * n_in + b * 256 + 8 * lane;
    float xv[8];
#pragma unroll
    for (int i = 0; i < 8; i++) xv[i] = src[i];
    int8_t q[8];
    const float d = act_block<8>(xv, q);
    uint8_t *dst = xq + r * (nb * MM_ACTK_BYTES) + b * MM_ACTK_BYTES;
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

void mm_act_quantize(uint32_t type, const float *x, size_t n_x, size_t n_in, uint8_t *xq, cudaStream_t stream) {
    const size_t blocks = n_x * (n_in / (type == MM_Q8_0 ? 32 : 256));
    const unsigned grid = (unsigned)((blocks + 7) / 8); /* 8 warps per thread block */
    if (blocks == 0) return;
    if (type == MM_Q8_0)
        act_q8_32_kernel<<<grid, 256, 0, stream>>>(x, n_x, n_in, xq);
    else
        act_q8_k_kernel<<<grid, 256, 0, stream>>>(x, n_x, n_in, xq);
}
