/*
 * matmul.c: splits a matrix product over output rows into pool tasks and
 * picks the kernel: the fused dot per output for one or two activation rows
 * (or on a CPU without AVX2), the tiled kernel of matmul_avx2.c for more.
 *
 * Tasks are runs of whole 4-row tiles, about 8 per thread so that the
 * dynamic hand-out of the pool evens out threads that run slower (another
 * process on the core, a cold cache). A run of rows is contiguous in W, so
 * each task streams its weights sequentially.
 */
#include "quant/matmul.h"

#include <assert.h>
#include <math.h>

#include "quant/matmul_internal.h"
#include "quant/quant.h"

/* From 3 activation rows on, the tiled kernel wins; for 1 or 2 the fused dot
 * does (with 2, the second row finds the weight row still in L1). */
enum { TASKS_PER_THREAD = 8, TILE_ROWS = 4, TILED_MIN_ROWS = 3 };

static void matmul_rows_dot(const matmul_job *j, size_t o0, size_t o1) {
    for (size_t o = o0; o < o1; o++) {
        const uint8_t *row = j->w + o * j->row_bytes;
        for (size_t r = 0; r < j->n_rows; r++)
            j->y[r * j->n_out + o] = quant_dot(j->type, row, j->x + r * j->n_in, j->n_in);
    }
}

static void matmul_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    const matmul_job *j = ctx;
    const size_t o0 = task * j->rows_per_task;
    const size_t o1 = o0 + j->rows_per_task < j->n_out ? o0 + j->rows_per_task : j->n_out;
    if (j->n_rows >= TILED_MIN_ROWS && quant_simd_active())
        matmul_rows_tiled_avx2(j, o0, o1);
    else
        matmul_rows_dot(j, o0, o1);
}

void matmul(threadpool *pool, uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows,
            float *y) {
    if (n_out == 0 || n_rows == 0) return;
    if (!quant_type_supported(type) || n_in % quant_block_elems(type) != 0) {
        assert(!"matmul: unsupported type or n_in not a multiple of the block");
        for (size_t i = 0; i < n_rows * n_out; i++) y[i] = NAN; /* visible, and no memory touched out of bounds */
        return;
    }
    if (n_in == 0) { /* empty dot products */
        for (size_t i = 0; i < n_rows * n_out; i++) y[i] = 0.0f;
        return;
    }
    const size_t threads = threadpool_size(pool);
    size_t per = threads > 1 ? (n_out + threads * TASKS_PER_THREAD - 1) / (threads * TASKS_PER_THREAD) : n_out;
    per = (per + TILE_ROWS - 1) / TILE_ROWS * TILE_ROWS;
    matmul_job job = {
        .type = type,
        .w = w,
        .row_bytes = quant_row_bytes(type, n_in),
        .n_out = n_out,
        .n_in = n_in,
        .x = x,
        .n_rows = n_rows,
        .y = y,
        .rows_per_task = per,
    };
    threadpool_run(pool, (n_out + per - 1) / per, matmul_task, &job);
}

void matmul_scalar(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows, float *y) {
    const uint8_t *wb = w;
    const size_t row_bytes = quant_row_bytes(type, n_in);
    for (size_t r = 0; r < n_rows; r++)
        for (size_t o = 0; o < n_out; o++)
            y[r * n_out + o] = quant_dot_scalar(type, wb + o * row_bytes, x + r * n_in, n_in);
}
