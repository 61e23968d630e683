/*
 * matmul.h: y = x W^T for a quantised weight matrix W and f32 activations,
 * the operation behind every projection of the model.
 *
 * The output rows of W are split into tasks across the thread pool. With
 * AVX2 and Q8_0 or K-quant weights the activation rows are first quantised
 * to 8 bits (quant_act_*, which adds the activation rounding quant.h
 * bounds) and dotted with integer multiply-adds: one or two rows (decode)
 * weight row by weight row through quant_act_dot's kernel, three or more
 * (prompt chunks, previews, block commits) through an integer tile kernel
 * (gemm_avx2.c) that decodes a tile of 4 weight rows once for up to 64
 * activation rows and gives each output exactly the one-row dot's bits: a
 * row's result does not depend on the other rows of the product. Float
 * weights keep f32 activations: the fused quant_dot for one or two rows, a
 * tiled f32 kernel for more (4 x 512 tiles dequantised on the stack). The
 * 8-bit copy of one or two rows lives on the caller's stack (40 KiB; longer
 * rows stay f32), of more rows on the heap (one allocation per call).
 * Products of fewer than 2^17 multiply-adds run on the calling thread:
 * waking the pool costs more than they do.
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

/* Several independent products in one run of the pool: one wake-up of the
 * threads (and one wait for the slowest) instead of one per product, which
 * matters when each product is a few tens of microseconds (a decode step's
 * experts). Each item computes exactly what matmul would (the same kernels,
 * the same integer path for one or two rows), so results are identical;
 * items with the same x, n_in, n_rows and activation format share one
 * quantised copy of x. Up to MATMUL_BATCH_MAX items per call. */
enum { MATMUL_BATCH_MAX = 48 }; /* 16 experts' gate and up, the shared expert's three (moe.c) */
typedef struct matmul_item {
    uint32_t type;
    const void *w; /* [n_out] rows of n_in */
    size_t n_out, n_in;
    const float *x; /* [n_rows][n_in] */
    size_t n_rows;
    float *y; /* [n_rows][n_out] */
} matmul_item;
void matmul_batch(threadpool *pool, const matmul_item *items, size_t n_items);
/* matmul_batch after pre's tasks (NULL: none), which write the rows some
 * items read: in the same run of the pool where every item has three or
 * more rows and their staging goes to the pool (act_stage_run_after), else
 * pre's own run first. The same results as pre's run, then matmul_batch. */
void matmul_batch_after(threadpool *pool, const threadpool_phase *pre, const matmul_item *items, size_t n_items);

/* The oracle: one thread, every output from quant_dot_scalar. */
void matmul_scalar(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows, float *y);
/* The oracle of what matmul computes: the scalar integer path
 * (quant_act_quantize_scalar, quant_act_dot_scalar) for exactly the
 * products matmul sends through it (AVX2 active, Q8_0 or K-quant weights;
 * one or two rows only up to 16384 values), matmul_scalar for the others. So a
 * fast operator built on matmul and its scalar twin built on this differ
 * only by float summation order. */
void matmul_oracle(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows, float *y);

/* The kernel matmul gives each row of a product of n_rows rows: a row's
 * result depends only on this path (and its own values), never on the other
 * rows, so products whose rows have the same path can be merged or split
 * freely (matmul_group.h). MATMUL_PATH_DOT: the fused f32 dot per row;
 * INT8: the 8-bit rows' integer dot; TILED: the tiled f32 kernel. */
enum { MATMUL_PATH_DOT = 0, MATMUL_PATH_INT8 = 1, MATMUL_PATH_TILED = 2 };
int matmul_path(uint32_t type, size_t n_in, size_t n_rows);

/* Seconds the calling thread has spent inside matmul, matmul_batch* and
 * matmul_grouped* calls since it started (the outermost call only, wall
 * clock, including a pre phase that rides in a product's run of the pool):
 * a pass's product time is the difference around it, and the rest of the
 * pass (mixers, routing, norms, the pool's waits outside products) is what
 * a faster product kernel cannot remove. Two clock reads a call. */
double matmul_thread_seconds(void);

#endif
