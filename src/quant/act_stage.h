/*
 * act_stage.h: the 8-bit staging of a product's activation rows
 * (matmul.c), cut into tasks that the thread pool runs in parallel.
 *
 * Quantising activations (quant_act_quantize) is a pure function of one
 * row's one block (Q8_0's 32 values, a K-quant's 256), so the staging of a
 * product is cut into (unit, run of blocks) tasks that write disjoint
 * bytes, and any split, run in any order on any threads, writes the bytes
 * the serial staging writes. A unit is one row in the row-major and planar
 * layouts and one 16-row group in gemm_amx.h's tile layout (where the rows
 * of a group share cache lines: a group is one task's, so no two threads
 * write one line there). Runs of blocks are whole 16-block lines of
 * planar scales for Q8_0, so threads splitting one row meet at most at a
 * line's edge.
 *
 * Before this file the staging ran on the calling thread while the pool
 * waited (issue 30): on one Zen 4 core 0.023 ms of a 32-row 2048-wide
 * product, 0.37 ms at 512 rows (AMX layout), some 13-15% of the AMX
 * level's 16-thread time on the H200 host (0.184 and 2.53 ms). CLOVER_SERIAL_STAGE=1 (read per product) runs every
 * staging on the calling thread again, the old order, same bytes.
 */
#ifndef CLOVER_QUANT_ACT_STAGE_H
#define CLOVER_QUANT_ACT_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"

enum {
    ACT_STAGE_ROWS,   /* quant_act_quantize's blocks, row after row (xq_bytes a row) */
    ACT_STAGE_PLANAR, /* Q8_0: every row's codes, then every row's scales (matmul.c, gemm_avx2.c) */
    ACT_STAGE_PLANAR_U8, /* the same with every code + 128 as an unsigned byte (gemm_avx512.c's operand) */
    ACT_STAGE_ROWS_KPERM, /* K-quants: ROWS with each block's codes in gemm_avx512.c's lane order (act_stage.c) */
    ACT_STAGE_AMX,    /* gemm_amx.h's tile layout (Q8_0, Q4_K, Q5_K) */
};

typedef struct act_stage {
    uint32_t type;
    int layout;
    const float *x; /* [n_rows][n_in] */
    size_t n_rows, n_in;
    uint8_t *dst;
    size_t units;    /* rows, or 16-row groups (AMX; the last one padded) */
    size_t blocks;   /* quantiser blocks in a row: n_in / 32 (Q8_0) or n_in / 256 */
    size_t chunk;    /* blocks of a unit one task stages */
    size_t n_chunks; /* tasks per unit */
} act_stage;

/* Plans the staging of x into dst in `layout` for about `tasks_hint` tasks
 * (1: one task, the serial order). n_in a multiple of the type's block. */
void act_stage_plan(act_stage *s, uint32_t type, int layout, const float *x, size_t n_rows, size_t n_in, uint8_t *dst,
                    size_t tasks_hint);
static inline size_t act_stage_tasks(const act_stage *s) { return s->units * s->n_chunks; }
/* Stages task t's bytes (t < act_stage_tasks). */
void act_stage_task(const act_stage *s, size_t t);

/* Runs the tasks of n stagings on the pool (NULL, or too little work to
 * pay for a wake-up, or CLOVER_SERIAL_STAGE=1: on the calling thread, in
 * order); returns when every byte is staged. */
void act_stage_run(threadpool *pool, const act_stage *s, size_t n);

/* Stages n stagings, then runs fn's n_tasks tasks (a product's), as
 * act_stage_run then threadpool_run would, but where the staging goes to
 * the pool both are one run of it: its first tasks are the staging's, and
 * a thread that takes one of fn's tasks first waits (spinning) until every
 * staging task has finished. The pool hands tasks out in index order, so
 * every staging task is already taken, by a running thread, when anyone
 * waits: nothing can deadlock, and run inline (no pool, nested) the order
 * is the serial one. One wake-up of the pool's threads and one wait for
 * the slowest instead of two a product (issue 30: at 16 threads a 32-row
 * preview is ~400 products). `separate` (CLOVER_OLD_SPLIT) or
 * CLOVER_STAGE_SEPARATE=1 keep the two runs. Same bytes, same bits. */
void act_stage_run_then(threadpool *pool, const act_stage *s, size_t n, int separate, size_t n_tasks,
                        threadpool_task_fn fn, void *ctx);
/* The same after the tasks of `pre` (NULL: none), which write the rows the
 * stagings read (the MoE's gather, its SwiGLU): one run of the pool with
 * three phases where the staging is fused, else pre's own run first. */
void act_stage_run_after(threadpool *pool, const threadpool_phase *pre, const act_stage *s, size_t n, int separate,
                         size_t n_tasks, threadpool_task_fn fn, void *ctx);

/* Whether CLOVER_SERIAL_STAGE=1 asks for the calling thread's staging. */
int act_stage_serial(void);

#endif
