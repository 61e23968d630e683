/*
 * gemm_amx.h: the AMX level's Q8_0 product of three or more activation rows
 * (gemm_amx.c) and the layout matmul.c stages its 8-bit rows in
 * (gemm_amx_stage.c).
 *
 * The layout: rows in groups of GEMM_AMX_ROWS = 16, the last group padded
 * with zero rows (codes 0, scale 0). For group g and block b (32 values),
 * at xq + (g * nb + b) * 512, the group's 16 x 32 codes as one AMX B tile
 * (8 rows of 64 bytes, the VNNI order): byte 64 k + 4 r + j = code 4 k + j
 * of row 16 g + r. After all codes (ng * nb * 512 bytes, ng groups), the
 * scales as floats, scale of row 16 g + r in block b at
 * (g * nb + b) * 16 + r: one 64-byte vector per (group, block).
 * The same bytes as quant_act_quantize's blocks, only moved.
 */
#ifndef CLOVER_QUANT_GEMM_AMX_H
#define CLOVER_QUANT_GEMM_AMX_H

#include <stddef.h>
#include <stdint.h>

#include "quant/quant_internal.h"

enum { GEMM_AMX_ROWS = 16, GEMM_AMX_TILE_BYTES = 512 };

static inline size_t gemm_amx_groups(size_t n_rows) { return (n_rows + GEMM_AMX_ROWS - 1) / GEMM_AMX_ROWS; }

/* Bytes of the staged rows: n_in a multiple of 32. */
static inline size_t gemm_amx_stage_bytes(size_t n_rows, size_t n_in) {
    return gemm_amx_groups(n_rows) * (n_in / QUANT_QK8_0) * (GEMM_AMX_TILE_BYTES + GEMM_AMX_ROWS * sizeof(float));
}

/* The scales of the staged rows at xq. */
static inline const float *gemm_amx_scales(const uint8_t *xq, size_t n_rows, size_t nb) {
    return (const float *)(const void *)(xq + gemm_amx_groups(n_rows) * nb * GEMM_AMX_TILE_BYTES);
}

/* Block b of row r (nb blocks a row, n_rows rows) into the layout at dst. */
void gemm_amx_place(uint8_t *dst, size_t n_rows, size_t nb, size_t r, size_t b, const act_q8_32 *blk);
/* Quantises n_rows rows of x (quant_act_quantize) into the layout at dst
 * (gemm_amx_stage_bytes, 4-byte aligned), the padding rows zeroed. */
void gemm_amx_stage(const float *x, size_t n_rows, size_t n_in, uint8_t *dst);

#endif
