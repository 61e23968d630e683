/*
 * matmul_avx2.c: the multi-row kernel. A task's output rows are taken 4 at a
 * time; their weights are dequantised 512 columns at a time into a tile on
 * the stack (8 KiB, stays in L1), and the tile is multiplied with the
 * activation rows 3 at a time: 4 x 3 = 12 vector accumulators, 4 tile loads
 * and 3 activation loads per 12 FMAs. Activation rows are taken in blocks of
 * 64 (64 x 512 x 4 bytes = 128 KiB, L2 resident), so the weights of a tile are
 * dequantised once per 64 activation rows.
 *
 * Sums over the 512-column chunks are added into y in order, so a result is
 * the same whichever thread computes it.
 */
#include <immintrin.h>
#include <string.h>

#include "quant/matmul_internal.h"
#include "quant/quant_avx2_inline.h"
#include "quant/quant.h"

enum {
    TILE_ROWS = 4,   /* weight rows per tile */
    TILE_COLS = 512, /* columns per tile: whole blocks of every type */
    X_GROUP = 3,     /* activation rows per kernel call */
    X_BLOCK = 64,    /* activation rows per dequantised tile */
};

static inline float load_f32(const float *p) {
    float v;
    memcpy(&v, p, sizeof v); /* f32 weights used in place may be unaligned */
    return v;
}

/* out[i][j] = sum_k w[i][k] * x[j][k] for k < len, i < 4, j < 3: twelve
 * accumulators named one by one so that they live in registers (12 + 3
 * activations + 1 weight = the 16 ymm registers). */
static void tile_kernel_4x3(const float *const w[TILE_ROWS], const float *const x[X_GROUP], size_t len,
                            float out[TILE_ROWS][X_GROUP]) {
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00;
    __m256 a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
    const float *w0 = w[0], *w1 = w[1], *w2 = w[2], *w3 = w[3], *x0 = x[0], *x1 = x[1], *x2 = x[2];
    size_t k = 0;
    for (; k + 8 <= len; k += 8) {
        const __m256 v0 = _mm256_loadu_ps(x0 + k), v1 = _mm256_loadu_ps(x1 + k), v2 = _mm256_loadu_ps(x2 + k);
        __m256 wv = _mm256_loadu_ps(w0 + k);
        a00 = _mm256_fmadd_ps(wv, v0, a00), a01 = _mm256_fmadd_ps(wv, v1, a01), a02 = _mm256_fmadd_ps(wv, v2, a02);
        wv = _mm256_loadu_ps(w1 + k);
        a10 = _mm256_fmadd_ps(wv, v0, a10), a11 = _mm256_fmadd_ps(wv, v1, a11), a12 = _mm256_fmadd_ps(wv, v2, a12);
        wv = _mm256_loadu_ps(w2 + k);
        a20 = _mm256_fmadd_ps(wv, v0, a20), a21 = _mm256_fmadd_ps(wv, v1, a21), a22 = _mm256_fmadd_ps(wv, v2, a22);
        wv = _mm256_loadu_ps(w3 + k);
        a30 = _mm256_fmadd_ps(wv, v0, a30), a31 = _mm256_fmadd_ps(wv, v1, a31), a32 = _mm256_fmadd_ps(wv, v2, a32);
    }
    out[0][0] = hsum_ps(a00), out[0][1] = hsum_ps(a01), out[0][2] = hsum_ps(a02);
    out[1][0] = hsum_ps(a10), out[1][1] = hsum_ps(a11), out[1][2] = hsum_ps(a12);
    out[2][0] = hsum_ps(a20), out[2][1] = hsum_ps(a21), out[2][2] = hsum_ps(a22);
    out[3][0] = hsum_ps(a30), out[3][1] = hsum_ps(a31), out[3][2] = hsum_ps(a32);
    for (; k < len; k++) /* F32/F16/BF16 rows whose length is not a multiple of 8 */
        for (size_t i = 0; i < TILE_ROWS; i++)
            for (size_t j = 0; j < X_GROUP; j++) out[i][j] += load_f32(w[i] + k) * x[j][k];
}

void matmul_rows_tiled_avx2(const matmul_job *j, size_t o0, size_t o1) {
    _Alignas(64) float tile[TILE_ROWS * TILE_COLS]; /* [TILE_ROWS][TILE_COLS] dequantised weights */
    const size_t be = quant_block_elems(j->type), bb = quant_block_bytes(j->type);
    const int direct = j->type == QUANT_F32; /* f32 weights are used in place */

    for (size_t o = o0; o < o1; o += TILE_ROWS) {
        const size_t nr = o1 - o < TILE_ROWS ? o1 - o : TILE_ROWS;
        for (size_t xb = 0; xb < j->n_rows; xb += X_BLOCK) {
            const size_t xe = j->n_rows - xb < X_BLOCK ? j->n_rows : xb + X_BLOCK;
            for (size_t k0 = 0; k0 < j->n_in; k0 += TILE_COLS) {
                const size_t len = j->n_in - k0 < TILE_COLS ? j->n_in - k0 : TILE_COLS;
                const float *wr[TILE_ROWS];
                for (size_t i = 0; i < TILE_ROWS; i++) {
                    if (i >= nr) { /* a partial tile repeats its first row; those outputs are dropped */
                        wr[i] = wr[0];
                        continue;
                    }
                    const uint8_t *row = j->w + (o + i) * j->row_bytes;
                    if (direct) {
                        wr[i] = (const float *)(const void *)row + k0;
                    } else {
                        quant_dequantize_row(j->type, row + k0 / be * bb, tile + i * TILE_COLS, len);
                        wr[i] = tile + i * TILE_COLS;
                    }
                }
                for (size_t r = xb; r < xe; r += X_GROUP) {
                    const size_t g = xe - r < X_GROUP ? xe - r : X_GROUP;
                    const float *xr[X_GROUP]; /* a short group repeats its first row; those outputs are dropped */
                    for (size_t jj = 0; jj < X_GROUP; jj++) xr[jj] = j->x + (r + (jj < g ? jj : 0)) * j->n_in + k0;
                    float out[TILE_ROWS][X_GROUP];
                    tile_kernel_4x3(wr, xr, len, out);
                    for (size_t jj = 0; jj < g; jj++) {
                        float *yr = j->y + (r + jj) * j->n_out + o;
                        for (size_t i = 0; i < nr; i++) yr[i] = k0 == 0 ? out[i][jj] : yr[i] + out[i][jj];
                    }
                }
            }
        }
    }
}
