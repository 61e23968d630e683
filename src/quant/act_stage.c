/*
 * act_stage.c: the 8-bit staging of activation rows as pool tasks
 * (act_stage.h). The planar Q8_0 staging (every row's codes, then every
 * row's scales: gemm_avx2.c's and gemm_avx512.c's layout) moved here from
 * matmul.c, cut to a row's run of blocks; the AMX layout's part is
 * gemm_amx_stage.c's; the row-major one is quant_act_quantize on a run of a
 * row's blocks, which are contiguous there.
 */
#include "quant/act_stage.h"

#include <stdlib.h>
#include <string.h>

#include "quant/gemm_amx.h"
#include "quant/quant.h"
#include "quant/quant_internal.h"

enum {
    /* Below this many values in a run the calling thread stages alone: the
     * staging takes 0.4-0.7 ns a value on one Zen 4 core (planar / AMX
     * layout, 1 thread CPU time), so 32768 values are 13-23 us, against a
     * few us for a pool run whose workers still spin. */
    TASKS_MIN_FLOATS = 32768,
    Q8_RUN_ALIGN = 16,        /* Q8_0 runs: whole 64-byte lines of planar scales */
    AMX_Q8_RUN_MIN = 8,       /* AMX Q8_0 runs: 16 rows x 8 blocks at least */
};

int act_stage_serial(void) {
    const char *e = getenv("CLOVER_SERIAL_STAGE");
    return e && *e && strcmp(e, "0") != 0;
}

void act_stage_plan(act_stage *s, uint32_t type, int layout, const float *x, size_t n_rows, size_t n_in, uint8_t *dst,
                    size_t tasks_hint) {
    const size_t be = type == QUANT_Q8_0 ? QUANT_QK8_0 : QUANT_QK_K;
    *s = (act_stage){.type = type, .layout = layout, .x = x, .n_rows = n_rows, .n_in = n_in, .dst = dst};
    s->units = layout == ACT_STAGE_AMX ? gemm_amx_groups(n_rows) : n_rows;
    s->blocks = n_in / be;
    if (s->units == 0 || s->blocks == 0) {
        s->units = 0, s->chunk = 1, s->n_chunks = 0;
        return;
    }
    /* Units first; a unit is split into runs only when there are fewer
     * units than tasks wanted (few rows, many threads). */
    size_t want = tasks_hint > s->units ? (tasks_hint + s->units - 1) / s->units : 1;
    const size_t align = type != QUANT_Q8_0 ? 1 : layout == ACT_STAGE_AMX ? AMX_Q8_RUN_MIN : Q8_RUN_ALIGN;
    size_t chunk = (s->blocks + want - 1) / want;
    chunk = (chunk + align - 1) / align * align;
    if (chunk > s->blocks) chunk = s->blocks;
    s->chunk = chunk;
    s->n_chunks = (s->blocks + chunk - 1) / chunk;
}

/* Q8_0 planar: row r's blocks [b0, b1); PLANAR_U8: each code + 128 (an
 * XOR of the sign bit), the unsigned operand vpdpbusd takes, so that
 * gemm_avx512.c does not flip every activation block per weight tile
 * (an XOR a block and row on the busy vector ports: ~10% of its Q8_0
 * kernel, bench_gemm_levels on the dev VM's Xeon). */
static void stage_planar(const act_stage *s, size_t r, size_t b0, size_t b1) {
    enum { CHUNK = 64 };
    const size_t nb = s->blocks;
    uint8_t *codes = s->dst;
    float *d = (float *)(void *)(s->dst + s->n_rows * nb * QUANT_QK8_0);
    act_q8_32 chunk[CHUNK];
    for (size_t c0 = b0; c0 < b1; c0 += CHUNK) {
        const size_t n = b1 - c0 < CHUNK ? b1 - c0 : CHUNK;
        quant_act_quantize(QUANT_Q8_0, s->x + r * s->n_in + c0 * QUANT_QK8_0, chunk, n * QUANT_QK8_0);
        for (size_t k = 0; k < n; k++) {
            uint8_t *dst = codes + (r * nb + c0 + k) * QUANT_QK8_0;
            memcpy(dst, chunk[k].qs, QUANT_QK8_0);
            if (s->layout == ACT_STAGE_PLANAR_U8)
                for (size_t i = 0; i < QUANT_QK8_0; i++) dst[i] ^= 0x80;
            d[r * nb + c0 + k] = chunk[k].d;
        }
    }
}

/* ROWS_KPERM: a K-quant activation block's 64 dwords of codes in the order
 * gemm_avx512.c's kq_rows reads them (its K-quant layout comment: per half
 * h, sub-blocks 4h..4h+3, vector A = dwords {0,8,1,9,4,12,5,13} of each 16
 * of the half's 32, vector B the same + 2), so that its vpdpbusd takes
 * the staged vectors as they are, with no vpermt2d per block, row and
 * weight tile (~7-9% of its K-quant kernel, bench_gemm_levels on the dev
 * VM's Xeon). d and bsums stay where they are. */
static void kperm_block(int8_t *qs) {
    static const uint8_t idx[16] = {0, 8, 1, 9, 4, 12, 5, 13, 16, 24, 17, 25, 20, 28, 21, 29};
    uint32_t src[64], dst[64];
    memcpy(src, qs, sizeof src);
    for (size_t h = 0; h < 2; h++)
        for (size_t i = 0; i < 16; i++) {
            dst[32 * h + i] = src[32 * h + idx[i]];
            dst[32 * h + 16 + i] = src[32 * h + idx[i] + 2];
        }
    memcpy(qs, dst, sizeof dst);
}

void act_stage_task(const act_stage *s, size_t t) {
    const size_t u = t / s->n_chunks, c = t % s->n_chunks;
    const size_t b0 = c * s->chunk, b1 = b0 + s->chunk < s->blocks ? b0 + s->chunk : s->blocks;
    switch (s->layout) {
    case ACT_STAGE_AMX: gemm_amx_stage_part(s->type, s->x, s->n_rows, s->n_in, s->dst, u, b0, b1); break;
    case ACT_STAGE_PLANAR:
    case ACT_STAGE_PLANAR_U8: stage_planar(s, u, b0, b1); break;
    default: {
        const size_t be = s->n_in / s->blocks, xq_bytes = quant_act_row_bytes(s->type, s->n_in);
        const size_t bb = xq_bytes / s->blocks; /* bytes of one quantiser block */
        quant_act_quantize(s->type, s->x + u * s->n_in + b0 * be, s->dst + u * xq_bytes + b0 * bb, (b1 - b0) * be);
        if (s->layout == ACT_STAGE_ROWS_KPERM)
            for (size_t b = b0; b < b1; b++) kperm_block(((act_q8_k *)(void *)(s->dst + u * xq_bytes))[b].qs);
    }
    }
}

typedef struct stage_set {
    const act_stage *s;
    size_t n;
    size_t first[8]; /* task index of each staging's first task (n <= 8 per call of stage_set_run) */
} stage_set;

static void stage_set_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    const stage_set *set = ctx;
    size_t i = 0;
    while (i + 1 < set->n && task >= set->first[i + 1]) i++;
    act_stage_task(&set->s[i], task - set->first[i]);
}

/* Whether n stagings go to the pool (else the calling thread stages). */
static int stage_on_pool(const threadpool *pool, const act_stage *s, size_t n) {
    if (!pool || threadpool_size(pool) == 1 || n == 0) return 0;
    double floats = 0;
    for (size_t i = 0; i < n; i++) floats += (double)s[i].n_rows * (double)s[i].n_in;
    return floats >= TASKS_MIN_FLOATS && !act_stage_serial();
}

void act_stage_run(threadpool *pool, const act_stage *s, size_t n) {
    if (n == 0) return;
    if (!stage_on_pool(pool, s, n)) pool = NULL;
    /* In groups of 8 stagings: the set's index fits on the stack. */
    for (size_t i0 = 0; i0 < n; i0 += 8) {
        stage_set set = {.s = s + i0, .n = n - i0 < 8 ? n - i0 : 8};
        size_t total = 0;
        for (size_t i = 0; i < set.n; i++) {
            set.first[i] = total;
            total += act_stage_tasks(&set.s[i]);
        }
        if (total) threadpool_run(pool, total, stage_set_task, &set);
    }
}

/* ---- the staging and a product in one run of the pool ---- */

enum { FUSE_MAX = 48 }; /* matmul_batch's items (MATMUL_BATCH_MAX), each a staging at most */

typedef struct fused_stages {
    const act_stage *s;
    size_t n;
    size_t first[FUSE_MAX + 1]; /* task index of each staging's first task; first[n] = the staging's tasks */
} fused_stages;

static void fused_stage_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    const fused_stages *f = ctx;
    size_t i = 0;
    while (task >= f->first[i + 1]) i++;
    act_stage_task(&f->s[i], task - f->first[i]);
}

static int stage_separate(void) {
    const char *e = getenv("CLOVER_STAGE_SEPARATE");
    return e && *e && strcmp(e, "0") != 0;
}

void act_stage_run_then(threadpool *pool, const act_stage *s, size_t n, int separate, size_t n_tasks,
                        threadpool_task_fn fn, void *ctx) {
    act_stage_run_after(pool, NULL, s, n, separate, n_tasks, fn, ctx);
}

void act_stage_run_after(threadpool *pool, const threadpool_phase *pre, const act_stage *s, size_t n, int separate,
                         size_t n_tasks, threadpool_task_fn fn, void *ctx) {
    if (n == 0 && pre) { /* nothing to stage (float activations): pre, then the product, one run */
        const threadpool_phase ph[2] = {*pre, {n_tasks, fn, ctx}};
        threadpool_run_phases(pool, ph, 2);
        return;
    }
    if (n > FUSE_MAX || separate || !stage_on_pool(pool, s, n) || stage_separate()) {
        threadpool_run_phase(pool, pre);
        act_stage_run(pool, s, n);
        threadpool_run(pool, n_tasks, fn, ctx);
        return;
    }
    /* the product's tasks after every staging task (threadpool_phases.c: one run of the pool) */
    fused_stages f = {.s = s, .n = n};
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        f.first[i] = total;
        total += act_stage_tasks(&s[i]);
    }
    f.first[n] = total;
    threadpool_phase ph[3] = {{0}, {total, fused_stage_task, &f}, {n_tasks, fn, ctx}};
    if (pre) ph[0] = *pre;
    threadpool_run_phases(pool, ph + (pre ? 0 : 1), pre ? 3 : 2);
}
