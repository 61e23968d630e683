/*
 * matmul_group.h: products whose rows come from several independent groups
 * (the sequences of one batched pass) with one read of the weights, each
 * row computed exactly as matmul computes it in a product of its own
 * group's rows alone.
 *
 * matmul picks a row's kernel by the row count of the product (matmul_path:
 * 1-2 rows the per-row dot or 8-bit integer dot, 3+ the tiled kernel), and a
 * row's result depends only on that kernel. So each row gets the path of
 * its group's row count; rows of one path in a run are one product (they
 * read the weights once together): through matmul itself when matmul would
 * give that run the same path, else through the multi-row form of the
 * per-row kernels here, which reads each weight row once for every row of
 * the run (it stays in L1 between them) and calls the very dot the one-row
 * product calls, so every output is bit for bit the one-row product's.
 */
#ifndef CLOVER_QUANT_MATMUL_GROUP_H
#define CLOVER_QUANT_MATMUL_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "quant/matmul.h"

typedef struct mm_group_item {
    matmul_item m;
    const uint32_t *own; /* [m.n_rows] the row count of each row's group in this product; NULL: one group */
} mm_group_item;

/* Every item's y, as described above; any number of items; the per-row
 * runs of all items go through one run of the pool. */
void matmul_grouped_batch(threadpool *pool, const mm_group_item *items, size_t n_items);
/* matmul_grouped_batch after pre's tasks (NULL: none), which write rows the
 * items read: in the same run of the pool where the items take one
 * matmul_batch (matmul_batch_after), else pre's own run first. */
void matmul_grouped_batch_after(threadpool *pool, const threadpool_phase *pre, const mm_group_item *items,
                                size_t n_items);

/* One product (matmul_grouped_batch of one item). */
void matmul_grouped(threadpool *pool, uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x,
                    size_t n_rows, float *y, const uint32_t *own);

#endif
