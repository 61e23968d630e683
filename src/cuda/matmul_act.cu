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
#include "cuda_pdl.cuh"
#include "matmul_internal.cuh"

/* Blocks of 32 (act_q8_32): warp w of the grid quantises block w. */
__global__ void act_q8_32_kernel(const float *x, size_t n_x, size_t n_in, uint8_t *xq) {
    const size_t nb = n_in / 32, gw = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    pdl_wait(); /* x is the previous kernel's output (cuda_pdl.cuh) */
    pdl_trigger();
    if (gw >= n_x * nb) return;
    const size_t r = gw / nb, b = gw % nb;
    mm_act_block_32(x + r * n_in + b * 32, xq + r * (nb * MM_ACT32_BYTES) + b * MM_ACT32_BYTES, lane);
}

/* Blocks of 256 (act_q8_k): lane l holds values 8l..8l+7; the sum of each
 * 16 (bsums[s]) is lanes 2s and 2s+1 together. */
__global__ void act_q8_k_kernel(const float *x, size_t n_x, size_t n_in, uint8_t *xq) {
    const size_t nb = n_in / 256, gw = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    pdl_wait(); /* x is the previous kernel's output (cuda_pdl.cuh) */
    pdl_trigger();
    if (gw >= n_x * nb) return;
    const size_t r = gw / nb, b = gw % nb;
    mm_act_block_k(x + r * n_in + b * 256, xq + r * (nb * MM_ACTK_BYTES) + b * MM_ACTK_BYTES, lane);
}

void mm_act_quantize(uint32_t type, const float *x, size_t n_x, size_t n_in, uint8_t *xq, cudaStream_t stream) {
    const size_t blocks = n_x * (n_in / (type == MM_Q8_0 ? 32 : 256));
    const unsigned grid = (unsigned)((blocks + 7) / 8); /* 8 warps per thread block */
    if (blocks == 0) return;
    if (type == MM_Q8_0)
        pdl_launch(act_q8_32_kernel, grid, 256, 0, stream, x, n_x, n_in, xq);
    else
        pdl_launch(act_q8_k_kernel, grid, 256, 0, stream, x, n_x, n_in, xq);
}
