/*
 * gemm_amx_stage.c: the AMX level's staging of 8-bit activation rows
 * (gemm_amx.h's layout): quantised a chunk at a time as matmul.c's planar
 * staging does, then each block's 4-byte groups moved to their B-tile
 * places. Plain C: it runs once per product and row, against the kernel's
 * once per weight tile, so it is not worth an instruction-set file.
 * gemm_amx_stage_part stages one 16-row group's run of blocks, so that
 * act_stage.c can hand the groups and runs to the pool's threads: a group's
 * rows share the B tiles' cache lines, a block's tile and scale vector
 * belong to one (group, block) alone.
 */
#include "quant/gemm_amx.h"

#include <string.h>

#include "quant/quant.h"

/* The 32 codes of block b of row r into their B tile. */
static void place_codes(uint8_t *dst, size_t nb, size_t r, size_t b, const int8_t *qs) {
    uint8_t *t = dst + ((r / GEMM_AMX_ROWS) * nb + b) * GEMM_AMX_TILE_BYTES + 4 * (r % GEMM_AMX_ROWS);
    for (size_t k = 0; k < QUANT_QK8_0 / 4; k++) memcpy(t + 64 * k, qs + 4 * k, 4);
}

static void stage_q8_0(const float *x, size_t n_rows, size_t n_in, uint8_t *dst, size_t g, size_t b0, size_t b1) {
    enum { CHUNK = 64 };
    const size_t nb = n_in / QUANT_QK8_0, ng = gemm_amx_groups(n_rows);
    float *d = (float *)(void *)(dst + ng * nb * GEMM_AMX_TILE_BYTES);
    act_q8_32 chunk[CHUNK];
    for (size_t r = g * GEMM_AMX_ROWS; r < (g + 1) * GEMM_AMX_ROWS; r++)
        for (size_t c0 = b0; c0 < b1; c0 += CHUNK) {
            const size_t n = b1 - c0 < CHUNK ? b1 - c0 : CHUNK;
            if (r < n_rows)
                quant_act_quantize(QUANT_Q8_0, x + r * n_in + c0 * QUANT_QK8_0, chunk, n * QUANT_QK8_0);
            else
                memset(chunk, 0, sizeof chunk); /* a padding row */
            for (size_t k = 0; k < n; k++) {
                place_codes(dst, nb, r, c0 + k, chunk[k].qs);
                d[((r / GEMM_AMX_ROWS) * nb + c0 + k) * GEMM_AMX_ROWS + r % GEMM_AMX_ROWS] = chunk[k].d;
            }
        }
}

static void stage_k(uint32_t type, const float *x, size_t n_rows, size_t n_in, uint8_t *dst, size_t g, size_t b0,
                    size_t b1) {
    enum { CHUNK = 8 };
    const size_t nb = n_in / QUANT_QK8_0, nbk = n_in / QUANT_QK_K, ng = gemm_amx_groups(n_rows);
    float *d = (float *)(void *)(dst + ng * nb * GEMM_AMX_TILE_BYTES);
    int32_t *sums = (int32_t *)(void *)(d + ng * nbk * GEMM_AMX_ROWS);
    act_q8_k chunk[CHUNK];
    for (size_t r = g * GEMM_AMX_ROWS; r < (g + 1) * GEMM_AMX_ROWS; r++) {
        const size_t rr = r % GEMM_AMX_ROWS;
        for (size_t c0 = b0; c0 < b1; c0 += CHUNK) {
            const size_t n = b1 - c0 < CHUNK ? b1 - c0 : CHUNK;
            if (r < n_rows)
                quant_act_quantize(type, x + r * n_in + c0 * QUANT_QK_K, chunk, n * QUANT_QK_K);
            else
                memset(chunk, 0, sizeof chunk);
            for (size_t k = 0; k < n; k++) {
                const size_t B = c0 + k;
                for (size_t s = 0; s < GEMM_AMX_SUB; s++)
                    place_codes(dst, nb, r, GEMM_AMX_SUB * B + s, chunk[k].qs + QUANT_QK8_0 * s);
                d[(g * nbk + B) * GEMM_AMX_ROWS + rr] = chunk[k].d;
                for (size_t p = 0; p < 4; p++) {
                    const int lo = chunk[k].bsums[4 * p] + chunk[k].bsums[4 * p + 1];
                    const int hi = chunk[k].bsums[4 * p + 2] + chunk[k].bsums[4 * p + 3];
                    sums[((g * nbk + B) * 4 + p) * GEMM_AMX_ROWS + rr] =
                        (int32_t)((uint32_t)(uint16_t)(int16_t)lo | (uint32_t)(uint16_t)(int16_t)hi << 16);
                }
            }
        }
    }
}

void gemm_amx_stage_part(uint32_t type, const float *x, size_t n_rows, size_t n_in, uint8_t *dst, size_t g, size_t b0,
                         size_t b1) {
    if (type == QUANT_Q8_0)
        stage_q8_0(x, n_rows, n_in, dst, g, b0, b1);
    else
        stage_k(type, x, n_rows, n_in, dst, g, b0, b1);
}

void gemm_amx_stage(uint32_t type, const float *x, size_t n_rows, size_t n_in, uint8_t *dst) {
    const size_t blocks = n_in / (type == QUANT_Q8_0 ? QUANT_QK8_0 : QUANT_QK_K);
    for (size_t g = 0; g < gemm_amx_groups(n_rows); g++) gemm_amx_stage_part(type, x, n_rows, n_in, dst, g, 0, blocks);
}
