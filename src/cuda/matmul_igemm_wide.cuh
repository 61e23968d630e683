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

/* Grouped experts (p->perm, tiles of igw_moe_tile() slots from the grouping pass, xq quantised) on the same kernel:
 * igw_moe_takes says whether the switch (on unless CLOVER_CUDA_IGW_MOE=0; cuda_igw_moe_set) is on and the
 * product fits it (Q4_K / Q5_K, not the wide few-slot tiles, 16-byte rows and experts); igw_moe_tile gives the
 * tile (32, or IGW_MOE_TILE with CLOVER_CUDA_IGW_T32=0 / cuda_igw_t32_set(0)); igw_moe_launch launches it over
 * n_tiles tiles of `tile` slots (the grouping pass's) and returns 1, or 0 having launched nothing. Same bits as
 * ig_launch. */
enum { IGW_MOE_TILE = 64 };
int igw_moe_takes(uint32_t type, const ig_params *p);
int igw_moe_tile(void);
int igw_moe_launch(uint32_t type, const ig_params *p, int tile, unsigned n_tiles, cudaStream_t st);

#endif
