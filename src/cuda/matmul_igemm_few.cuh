/*
 * matmul_igemm_few.cuh: the few-row (1..32 rows) integer chunk products of
 * matmul_igemm_few.cu as matmul_gemm.cu dispatches them. CUDA C++, included
 * only by src/cuda/matmul_*.cu. Off unless CLOVER_CUDA_IGEMM_FEW=1 (or
 * cuda_igemm_few_set(1)): UNVERIFIED on a device when written (2026-12-03).
 */
#ifndef CLOVER_CUDA_MATMUL_IGEMM_FEW_CUH
#define CLOVER_CUDA_MATMUL_IGEMM_FEW_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "matmul_igemm.cuh"

/* Rows (dense) or rows of a MoE call (n_rows, before k) the few-row kernel takes. */
enum { FW_MAX_ROWS = 32 };

/* 1 when the few-row kernel takes a product of this type with n_rows rows (the switch on, an integer type,
 * 1..FW_MAX_ROWS rows); the caller then groups MoE slots in tiles of FW_MAX_ROWS and calls fw_launch. */
int fw_take(uint32_t type, size_t n_rows);
/* q as matmul_gemm.cu fills it for ig_launch with the 8-bit rows in q->xq (PREQ); n_tiles_y: dense the row
 * tiles of FW_MAX_ROWS, MoE the tile table's maximum length (tiles of <= FW_MAX_ROWS slots). w_up (NULL: none):
 * a second product in the same launch (grid.z = 2), q's rows and n_in, weights w_up (expert stride as q's),
 * n_out_up outputs into y_up: the experts' gate and up (cuda_moe_chunk_pair) or two dense products of the same
 * rows (cuda_matmul_chunk_ws_pair) in one launch. */
void fw_launch(uint32_t type, const ig_params *q, unsigned n_tiles_y, const void *w_up, float *y_up, int n_out_up,
               cudaStream_t st);

#endif
