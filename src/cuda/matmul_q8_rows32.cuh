/*
 * matmul_q8_rows32.cuh: the dense Q8_0 product of 1..32 rows of matmul_q8_rows32.cu as matmul_gemm.cu's dense
 * chunk product tries it before matmul_igemm.cu's igemm_q8_kernel. CUDA C++, included only by src/cuda/matmul_*.cu.
 */
#ifndef CLOVER_CUDA_MATMUL_Q8_ROWS32_CUH
#define CLOVER_CUDA_MATMUL_Q8_ROWS32_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "matmul_igemm.cuh"

/* Rows the form takes (the whole call in one row tile of 4 x 8). */
enum { Q8R_MAX_ROWS = 32 };

/* Launches the dense product q (ig_plan'd, rows quantised into q->xq by ig_quantize) and returns 1 when the switch
 * is on (CLOVER_CUDA_Q8_ROWS32=1 / cuda_q8_rows32_set) and the form takes it (Q8_0, 1..32 rows, n_in % 256 == 0,
 * weights and rows 16-byte aligned); else 0, launching nothing. Same bits as ig_launch (the canonical order). */
int q8r_launch(uint32_t type, const ig_params *q, cudaStream_t st);

#endif
