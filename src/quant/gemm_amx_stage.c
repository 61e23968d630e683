/*
 * gemm_amx_stage.c: the AMX level's staging of 8-bit activation rows
 * (gemm_amx.h's layout): quantised a chunk at a time as matmul.c's planar
 * staging does, then each block's 4-byte groups moved to their B-tile
 * places. Plain C: it runs once per product and row, against the kernel's
 * once per weight tile, so it is not worth an instruction-set file.
 */
#include "quant/gemm_amx.h"

#include <string.h>

#include "quant/quant.h"

void gemm_amx_place(uint8_t *dst, size_t n_rows, size_t nb, size_t r, size_t b, const act_q8_32 *blk) {
    const size_t g = r / GEMM_AMX_ROWS, rr = r % GEMM_AMX_ROWS;
    uint8_t *t = dst + (g * nb + b) * GEMM_AMX_TILE_BYTES + 4 * rr;
    for (size_t k = 0; k < QUANT_QK8_0 / 4; k++) memcpy(t + 64 * k, blk->qs + 4 * k, 4);
    float *d = (float *)(void *)(dst + gemm_amx_groups(n_rows) * nb * GEMM_AMX_TILE_BYTES);
    d[(g * nb + b) * GEMM_AMX_ROWS + rr] = blk->d;
}

void gemm_amx_stage(const float *x, size_t n_rows, size_t n_in, uint8_t *dst) {
    enum { CHUNK = 64 };
    const size_t nb = n_in / QUANT_QK8_0;
    act_q8_32 chunk[CHUNK];
    for (size_t r = 0; r < n_rows; r++)
        for (size_t c0 = 0; c0 < nb; c0 += CHUNK) {
            const size_t n = nb - c0 < CHUNK ? nb - c0 : CHUNK;
            quant_act_quantize(QUANT_Q8_0, x + r * n_in + c0 * QUANT_QK8_0, chunk, n * QUANT_QK8_0);
            for (size_t k = 0; k < n; k++) gemm_amx_place(dst, n_rows, nb, r, c0 + k, &chunk[k]);
        }
    act_q8_32 zero;
    memset(&zero, 0, sizeof zero);
    for (size_t r = n_rows; r < gemm_amx_groups(n_rows) * GEMM_AMX_ROWS; r++)
        for (size_t b = 0; b < nb; b++) gemm_amx_place(dst, n_rows, nb, r, b, &zero);
}
