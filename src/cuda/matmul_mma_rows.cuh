/*
 * matmul_mma_rows.cuh: the few-row (1..32) dense Q8_0 product of matmul_mma_rows.cu (weights as the mma A
 * operand, rows as B) as matmul_gemm.cu dispatches it. CUDA C++, included only by src/cuda/matmul_*.cu.
 * Off unless CLOVER_CUDA_MMA_ROWS=N (or cuda_mma_rows_set(N)): UNVERIFIED on a device when written
 * (2026-12-04).
 */
#ifndef CLOVER_CUDA_MATMUL_MMA_ROWS_CUH
#define CLOVER_CUDA_MATMUL_MMA_ROWS_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "matmul_igemm.cuh"

/* 1 when the form takes a dense product of this type and row count (the switch's cap, Q8_0, 1 <= n_rows <= cap). */
int mr_take(uint32_t type, size_t n_rows);
/* q as matmul_gemm.cu fills it for ig_launch, with the 8-bit rows in q->xq (chunk-major, ig_quantize). */
void mr_launch(const ig_params *q, cudaStream_t st);

#endif
