/*
 * matmul.h: y = x W^T for a quantised weight matrix W and f32 activations,
 * the operation behind every projection of the model.
 *
 * The output rows of W are split into tasks across the thread pool. One or
 * two activation rows (decode) go through the fused dequantise-and-dot of
 * quant_dot, weight row by weight row (a second activation row finds the row
 * still in L1). Three or more (prompt processing, block-diffusion previews)
 * use a tiled kernel: a task dequantises a tile of 4 weight rows x 512
 * columns once into a buffer on its own stack (8 KiB, cache resident) and
 * multiplies it with up to 64 activation rows, so the weights are read and
 * decoded once per 64 rows instead of once per row. The tile lives on the
 * stack, so matmul needs no scratch from the caller and allocates nothing.
 */
#ifndef CLOVER_QUANT_MATMUL_H
#define CLOVER_QUANT_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"

/* y[r*n_out + o] = dot(W row o, x row r) for r < n_rows, o < n_out.
 * w: [n_out] rows of n_in elements of `type`, row stride quant_row_bytes(type, n_in);
 * x: [n_rows][n_in] f32; y: [n_rows][n_out] f32 (must not overlap x or w).
 * type must be supported and n_in a multiple of its block (checked by the
 * caller when the model is bound; a debug build asserts). pool may be NULL. */
void matmul(threadpool *pool, uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows,
            float *y);

/* The oracle: one thread, every output from quant_dot_scalar. */
void matmul_scalar(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows, float *y);

#endif
