/*
 * gemm_amx.h: the AMX level's products of three or more activation rows
 * against Q8_0, Q4_K and Q5_K weights (gemm_amx.c) and the layout matmul.c
 * stages their 8-bit rows in (gemm_amx_stage.c).
 *
 * The layout: rows in groups of GEMM_AMX_ROWS = 16, the last group padded
 * with zero rows (codes 0, scales 0, sums 0). The codes come in blocks of
 * 32 (Q8_0's blocks; a K-quant super-block's 8 sub-blocks, b = 8 * super-
 * block + sub-block): for group g and block b, at xq + (g * nb + b) * 512,
 * the group's 16 x 32 codes as one AMX B tile (8 rows of 64 bytes, the VNNI
 * order): byte 64 k + 4 r + j = code 4 k + j of row 16 g + r. After all
 * codes (ng * nb * 512 bytes, ng groups, nb blocks of 32 a row):
 *  - Q8_0: the scales, float, row 16 g + r's of block b at (g * nb + b) *
 *    16 + r: one 64-byte vector per (group, block);
 *  - K-quants (nbk = nb / 8 super-blocks): the scales, one per super-block,
 *    at (g * nbk + B) * 16 + r; then the sub-block code sums in pairs, int32
 *    at ((g * nbk + B) * 4 + p) * 16 + r holding sum(2p) in its low 16 bits
 *    and sum(2p + 1) in its high 16 bits (|sum| <= 32 * 127 fits int16),
 *    the operand of vpmaddwd against a weight row's mins.
 * The same bytes as quant_act_quantize's blocks, only moved (the sums are
 * its bsums, added in pairs).
 */
#ifndef CLOVER_QUANT_GEMM_AMX_H
#define CLOVER_QUANT_GEMM_AMX_H

#include <stddef.h>
#include <stdint.h>

#include "quant/quant_internal.h"

enum { GEMM_AMX_ROWS = 16, GEMM_AMX_TILE_BYTES = 512, GEMM_AMX_SUB = QUANT_QK_K / QUANT_QK8_0 };

static inline size_t gemm_amx_groups(size_t n_rows) { return (n_rows + GEMM_AMX_ROWS - 1) / GEMM_AMX_ROWS; }

/* The weight types the AMX level's tile kernel takes. */
static inline int gemm_amx_type(uint32_t type) {
    return type == QUANT_Q8_0 || type == QUANT_Q4_K || type == QUANT_Q5_K;
}

/* Bytes of the staged rows: n_in a multiple of the type's block. */
static inline size_t gemm_amx_stage_bytes(uint32_t type, size_t n_rows, size_t n_in) {
    const size_t ng = gemm_amx_groups(n_rows), nb = n_in / QUANT_QK8_0;
    const size_t per = type == QUANT_Q8_0 ? GEMM_AMX_ROWS * sizeof(float) * nb
                                          : (nb / GEMM_AMX_SUB) * GEMM_AMX_ROWS * (sizeof(float) + 4 * sizeof(int32_t));
    return ng * (nb * GEMM_AMX_TILE_BYTES + per);
}

/* The scales of the staged rows at xq (nb blocks of 32 a row). */
static inline const float *gemm_amx_scales(const uint8_t *xq, size_t n_rows, size_t nb) {
    return (const float *)(const void *)(xq + gemm_amx_groups(n_rows) * nb * GEMM_AMX_TILE_BYTES);
}
/* K-quants: the sub-block sums in pairs. */
static inline const int32_t *gemm_amx_sums(const uint8_t *xq, size_t n_rows, size_t nb) {
    return (const int32_t *)(const void *)(gemm_amx_scales(xq, n_rows, nb) +
                                           gemm_amx_groups(n_rows) * (nb / GEMM_AMX_SUB) * GEMM_AMX_ROWS);
}

/* Quantises n_rows rows of x (quant_act_quantize for type) into the layout
 * at dst (gemm_amx_stage_bytes, 4-byte aligned), the padding rows zeroed. */
void gemm_amx_stage(uint32_t type, const float *x, size_t n_rows, size_t n_in, uint8_t *dst);
/* The part of it for 16-row group g and the type's quantiser blocks
 * [b0, b1) (Q8_0's blocks of 32, the K-quants' super-blocks of 256): the
 * bytes of no other group or block (act_stage.c's tasks). */
void gemm_amx_stage_part(uint32_t type, const float *x, size_t n_rows, size_t n_in, uint8_t *dst, size_t g, size_t b0,
                         size_t b1);

#endif
