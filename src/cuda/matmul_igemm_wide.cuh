/*
 * matmul_igemm_wide.cuh: the wide-row integer product of matmul_igemm_wide.cu
 * (64+ rows, Q8_0, dense, rows in scratch) as matmul_gemm.cu's dense chunk
 * product tries it before matmul_igemm.cu's kernels. CUDA C++, included only
 * by src/cuda/matmul_*.cu.
 */
#ifndef CLOVER_CUDA_MATMUL_IGEMM_WIDE_CUH
#define CLOVER_CUDA_MATMUL_IGEMM_WIDE_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "matmul_igemm.cuh"

/* Rows from which the wide kernel takes a product (a 64-row tile; fewer rows leave most of it idle). */
enum { IGW_MIN_ROWS = 64 };

/* Launches the product p (ig_plan'd, xq quantised, dense) with the wide kernel and returns 1 when it is switched
 * on (CLOVER_CUDA_IGEMM_WIDE=1 / cuda_igemm_wide_set) and takes it (Q8_0, n_rows >= IGW_MIN_ROWS); else 0 and
 * launches nothing. Same bits as ig_launch (the canonical order of matmul_igemm.cu). */
int igw_launch(uint32_t type, const ig_params *p, cudaStream_t st);

#endif
