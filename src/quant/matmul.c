/*
 * matmul.c: splits a matrix product over output rows into pool tasks and
 * picks the kernel. With AVX2 and Q8_0 or K-quant weights every product
 * takes the integer path: the activation rows are quantised to 8 bits once,
 * here (quant_act_*; for three or more rows as a run of pool tasks before
 * the product's, act_stage.h), and the tasks dot their weight rows with them; one or
 * two rows through the per-row integer dot (the copy on the caller's stack;
 * rows too long for it stay on the f32 dot), three or more through the tile
 * kernel of gemm_avx2.c (the copy on the heap; Q8_0's planar, as that
 * kernel reads it), which gives every output bit for bit what the one-row
 * dot gives, so a row's result never depends on how many rows share the pass
 * (at the AMX level, simd_level.h, Q8_0's, Q4_K's and Q5_K's three or more
 * rows go to gemm_amx.c instead, staged in its tile layout, and equal that
 * level's one-row dots, act_bsum_avx2.c, the same way; Q4_K weights in
 * stable memory through their repacked panels, gemm_amx_pack.h; one or two
 * rows there take act_bsum_avx512.c's dots, the same bits, 4 weight rows a
 * call: quant_act_dot4_fn). Float weights (and every type on a CPU
 * without AVX2) keep f32 activations: the fused dot for one or two rows, the
 * tiled f32 kernel of matmul_avx2.c for more.
 *
 * A product too small to pay for waking the pool's threads (a few
 * microseconds of work, against tens of microseconds or a scheduler
 * quantum for a wake-up on a busy machine) runs on the calling thread.
 *
 * Tasks are runs of whole 4-row tiles, about 8 per thread so that the
 * dynamic hand-out of the pool evens out threads that run slower (another
 * process on the core, a cold cache). A run of rows is contiguous in W, so
 * each task streams its weights sequentially. For three or more rows (the
 * multi-row kernels) a task is at least MIN_TASK_MACS of work where 4
 * tasks a thread remain in the run, and whole 16-row runs at the AMX level,
 * for K-quants at least 4 of them where 4 tasks a thread remain (amx_task_tiles)
 * (issue 30, many threads): at 16 threads a
 * product of 512 outputs (a routed expert's gate / up) was cut into 128
 * tasks of 4 rows, so the AMX kernel ran 16-row tiles configured for 4 (a
 * quarter of each tdpbssd used, the float step done for all 16 rows), four
 * tasks wrote each 64-byte line of every output row (false sharing), and a
 * batch of 8 experts at 16 rows each was 2048 tasks of ~2 us on one atomic
 * counter. Each output is computed the same whatever the split, so the
 * bits do not change.
 * CLOVER_OLD_SPLIT=1 (read per product) keeps the old split, and the
 * staging in its own run of the pool (act_stage.h), for A/B timing.
 */
#include "quant/matmul.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/timer.h"

#include "quant/act_stage.h"
#include "quant/gemm_amx.h"
#include "quant/gemm_amx_pack.h"
#include "quant/matmul_internal.h"
#include "quant/quant.h"
#include "quant/quant_internal.h"
#include "quant/simd_level.h"

/* From 3 activation rows on, the tiled kernel wins; for 1 or 2 the fused dot
 * does (with 2, the second row finds the weight row still in L1). */
enum {
    TASKS_PER_THREAD = 8,
    STAGE_TASKS_PER_THREAD = 4, /* staging tasks (act_stage.h): even work, fewer are enough */
    TILE_ROWS = 4,
    TILED_MIN_ROWS = 3,
    ACT_MAX_ROWS = 2,            /* rows that take the per-row integer dot */
    ACT_STACK_BYTES = 40 * 1024, /* their buffer: 2 rows of 16384 K-quant activations */
    INLINE_MAX_MACS = 1 << 17,   /* products below this many multiply-adds skip the pool */
    /* Three or more rows: tasks of at least MIN_TASK_MACS multiply-adds (~7
     * us at the VNNI kernel's ~70 GMAC/s a core: the atomic hand-out and a
     * task's setup stay a small part), whole runs of OUT_ALIGN outputs (the
     * AMX kernel's 16-row tile, one 64-byte line of each output row) at the
     * AMX level and wherever there are tasks enough (rows_per_task). */
    OUT_ALIGN = 16,
    MIN_TASK_MACS = 1 << 19,
};

/* Whether CLOVER_OLD_SPLIT=1 asks for the split of before issue 30's
 * change (runs of 4-row tiles for any row count) and the staging in a run
 * of the pool of its own: the A/B switch of the device runs (same bits). */
static int old_split(void) {
    const char *e = getenv("CLOVER_OLD_SPLIT");
    return e && *e && strcmp(e, "0") != 0;
}

static size_t round_up(size_t n, size_t align) { return (n + align - 1) / align * align; }

/* At the AMX level, the fewest 16-row tiles a task of three or more rows against K-quant weights takes where 4
 * tasks a thread remain in the run (rows_per_task): the kernel asks for a tile's weight lines while it computes
 * the tile before it in the task (gemm_amx.c's amx_pf), so a task's first tile is the only one that waits on
 * memory. A preview's MoE run at 16 threads had tasks of one tile (a routed expert's 512 gate or up outputs, 1 M
 * multiply-adds at 32 rows), every one of them a first. Q8_0 keeps the split of before: its dense products were
 * not measured with it. CLOVER_AMX_TASK_TILES=N (read per product) sets N, 1 the split of before. */
static size_t amx_task_tiles(void) {
    const char *e = getenv("CLOVER_AMX_TASK_TILES");
    const long v = e && *e ? strtol(e, NULL, 10) : 4;
    return v >= 1 && v <= 64 ? (size_t)v : 4;
}

/* Output rows per task for a product of n_rows rows split for `threads`
 * threads (the file's comment), in a run of the pool shared by `share`
 * products (matmul_batch's items). The minimum of work gives way where it
 * would leave fewer than 4 tasks a thread in the run (so that a thread that
 * starts late, or runs slower, still evens out: a lone product of a few
 * rows). amx: the product takes the AMX kernel, whose tiles are 16 weight
 * rows: whole runs of 16 always. The other kernels' tiles are 4 rows: runs
 * of 16 where that still leaves 4 tasks a thread, else of 4. */
static size_t rows_per_task(size_t threads, size_t n_out, size_t n_in, size_t n_rows, size_t share, int amx,
                            size_t amx_tiles, int old) {
    if (threads <= 1) return round_up(n_out, TILE_ROWS);
    size_t per = (n_out + threads * TASKS_PER_THREAD - 1) / (threads * TASKS_PER_THREAD);
    if (n_rows <= ACT_MAX_ROWS || old) return round_up(per, TILE_ROWS);
    const size_t row_macs = n_rows * n_in; /* one output row's multiply-adds */
    size_t min_per = row_macs ? (MIN_TASK_MACS + row_macs - 1) / row_macs : 1;
    const size_t amx_min = amx_tiles * OUT_ALIGN; /* tiles whose weights the one before prefetches */
    if (min_per < amx_min) min_per = amx_min;
    const size_t balance = n_out * (share ? share : 1) / (4 * threads); /* the largest run that keeps 4 a thread */
    if (min_per > balance) min_per = balance > 0 ? balance : 1;
    if (per < min_per) per = min_per;
    const size_t per16 = round_up(per, OUT_ALIGN);
    return amx || (n_out + per16 - 1) / per16 >= 4 * threads ? per16 : round_up(per, TILE_ROWS);
}

/* Bytes of one row of x's 8-bit copy when matmul takes the integer path for
 * this product (AVX2, Q8_0 or K-quant weights; one or two rows only when they
 * fit the stack buffer); 0 when it keeps f32 activations. */
static size_t act_path_bytes(uint32_t type, size_t n_in, size_t n_rows) {
    const size_t xq_bytes = quant_act_row_bytes(type, n_in);
    if (xq_bytes == 0 || !quant_simd_active()) return 0;
    if (n_rows <= ACT_MAX_ROWS && xq_bytes * n_rows > ACT_STACK_BYTES) return 0;
    return xq_bytes;
}

/* Whether a product on the 8-bit path takes the AMX level's kernel (Q8_0,
 * Q4_K, Q5_K, three or more rows: gemm_amx.c), its rows staged in
 * gemm_amx.h's layout. */
static int amx_path(uint32_t type, size_t n_rows) {
    return gemm_amx_type(type) && n_rows > ACT_MAX_ROWS && quant_amx_active();
}

/* Bytes of the 8-bit copy of a product of three or more rows on the 8-bit
 * path (xq_bytes a row), rounded to whole cache lines. */
static size_t act_multi_bytes(uint32_t type, size_t n_in, size_t n_rows, size_t xq_bytes) {
    const size_t bytes = amx_path(type, n_rows) ? gemm_amx_stage_bytes(type, n_rows, n_in) : xq_bytes * n_rows;
    return (bytes + 63) / 64 * 64;
}

/* Heap bytes a product's 8-bit copy takes (three or more rows), rounded to
 * whole cache lines; 0 when it needs none. */
static size_t act_heap_bytes(uint32_t type, size_t n_in, size_t n_rows) {
    if (n_rows <= ACT_MAX_ROWS) return 0;
    const size_t xq_bytes = act_path_bytes(type, n_in, n_rows);
    return xq_bytes ? act_multi_bytes(type, n_in, n_rows, xq_bytes) : 0;
}

static void matmul_rows_dot(const matmul_job *j, size_t o0, size_t o1) {
    for (size_t o = o0; o < o1; o++) {
        const uint8_t *row = j->w + o * j->row_bytes;
        for (size_t r = 0; r < j->n_rows; r++)
            j->y[r * j->n_out + o] = quant_dot(j->type, row, j->x + r * j->n_in, j->n_in);
    }
}

static void matmul_rows_act(const matmul_job *j, size_t o0, size_t o1) {
    matmul_act_outputs(j->act_dot, j->act_dot4, j->w, j->row_bytes, j->xq, j->xq_bytes, j->n_in, j->n_rows, j->y,
                       j->n_out, o0, o1);
}

static void matmul_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    const matmul_job *j = ctx;
    const size_t o0 = task * j->rows_per_task;
    const size_t o1 = o0 + j->rows_per_task < j->n_out ? o0 + j->rows_per_task : j->n_out;
    if (j->xq && j->n_rows > ACT_MAX_ROWS && j->amx)
        matmul_rows_gemm_amx(j, o0, o1);
    else if (j->xq && j->n_rows > ACT_MAX_ROWS && j->avx512)
        matmul_rows_gemm_avx512(j, o0, o1);
    else if (j->xq && j->n_rows > ACT_MAX_ROWS)
        matmul_rows_gemm_avx2(j, o0, o1);
    else if (j->xq)
        matmul_rows_act(j, o0, o1);
    else if (j->n_rows >= TILED_MIN_ROWS && quant_simd_active())
        matmul_rows_tiled_avx2(j, o0, o1);
    else
        matmul_rows_dot(j, o0, o1);
}

/* Fills job for one product split for `threads` threads; returns its task
 * count (0: nothing to run, y already written for the degenerate cases).
 * When the product takes the integer path, x is quantised into xq (after
 * the *xq_used bytes taken so far; the caller makes sure it fits; xq NULL:
 * no room was found, the product keeps f32 activations), unless
 * `shared` (a job with the same x, n_in, n_rows and activation format)
 * already holds it. Three or more rows with `stage` set: the quantising is
 * only planned there (act_stage.h; stage->units 0 when there is none), for
 * the caller to run on the pool before the product's tasks; one or two
 * rows (or stage NULL): done here. share: the products in the run of the
 * pool (rows_per_task); old: CLOVER_OLD_SPLIT's split. */
static size_t matmul_prepare(matmul_job *job, size_t threads, uint32_t type, const void *w, size_t n_out, size_t n_in,
                             const float *x, size_t n_rows, float *y, uint8_t *xq, size_t xq_cap, size_t *xq_used,
                             const matmul_job *shared, act_stage *stage, size_t share, int old) {
    if (stage) stage->units = 0;
    if (n_out == 0 || n_rows == 0) return 0;
    if (!quant_type_supported(type) || n_in % quant_block_elems(type) != 0) {
        assert(!"matmul: unsupported type or n_in not a multiple of the block");
        for (size_t i = 0; i < n_rows * n_out; i++) y[i] = NAN; /* visible, and no memory touched out of bounds */
        return 0;
    }
    if (n_in == 0) { /* empty dot products */
        for (size_t i = 0; i < n_rows * n_out; i++) y[i] = 0.0f;
        return 0;
    }
    const int amx = amx_path(type, n_rows);
    const size_t per = rows_per_task(threads, n_out, n_in, n_rows, share, amx,
                                     amx && type != QUANT_Q8_0 ? amx_task_tiles() : 0, old);
    *job = (matmul_job){
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
    const size_t xq_bytes = act_path_bytes(type, n_in, n_rows);
    if (xq_bytes && (xq || shared)) {
        if (shared) {
            job->xq = shared->xq;
        } else {
            const size_t bytes = act_multi_bytes(type, n_in, n_rows, xq_bytes);
            assert(bytes <= xq_cap - *xq_used);
            uint8_t *dst = xq + *xq_used;
            int layout = ACT_STAGE_ROWS;
            if (amx_path(type, n_rows))
                layout = ACT_STAGE_AMX;
            else if (type == QUANT_Q8_0 && n_rows > ACT_MAX_ROWS)
                layout = quant_avx512_active() ? ACT_STAGE_PLANAR_U8 : ACT_STAGE_PLANAR; /* job->avx512's kernel */
            else if (n_rows > ACT_MAX_ROWS && quant_avx512_active())
                layout = ACT_STAGE_ROWS_KPERM; /* K-quants for gemm_avx512.c */
            act_stage local;
            act_stage *st = stage && n_rows > ACT_MAX_ROWS ? stage : &local;
            act_stage_plan(st, type, layout, x, n_rows, n_in, dst, st == &local ? 1 : threads * STAGE_TASKS_PER_THREAD);
            if (st == &local) /* the calling thread, now */
                for (size_t t = 0; t < act_stage_tasks(st); t++) act_stage_task(st, t);
            *xq_used += bytes;
            job->xq = dst;
        }
        job->xq_bytes = xq_bytes;
        job->act_dot = quant_act_dot_kernel(type);
        job->act_dot4 = quant_act_dot4_kernel(type);
        job->avx512 = quant_avx512_active();
        job->amx = amx_path(type, n_rows);
        if (job->amx && type == QUANT_Q4_K) /* the repacked panels, where the weight has (or may make) them */
            job->q4k = gemm_amx_q4k_find(w, n_out, n_in);
        job->q4k_pipe = job->amx && type != QUANT_Q8_0 && gemm_amx_q4k_pipe_on(); /* the panels' kernel, either path */
    }
    return (n_out + per - 1) / per;
}

static _Thread_local double mm_seconds; /* matmul_thread_seconds */
static _Thread_local int mm_depth;       /* entry points the thread is inside */

double matmul_thread_seconds(void) { return mm_seconds; }

double matmul_time_enter(void) { return mm_depth++ ? 0.0 : timer_now(); }

void matmul_time_leave(double t0) {
    if (--mm_depth == 0) mm_seconds += timer_now() - t0;
}

static void matmul_run(threadpool *pool, uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x,
                       size_t n_rows, float *y) {
    _Alignas(64) uint8_t stack[ACT_STACK_BYTES];
    const size_t heap_bytes = act_heap_bytes(type, n_in, n_rows);
    /* An allocation failure leaves the product on f32 activations: slower
     * and differently rounded, but never wrong by more than quant.h's bound. */
    uint8_t *heap = heap_bytes ? mem_alloc(heap_bytes) : NULL;
    uint8_t *xq = heap_bytes ? heap : stack;
    size_t used = 0;
    matmul_job job;
    act_stage stage;
    const int old = n_rows > ACT_MAX_ROWS && old_split();
    const size_t tasks = matmul_prepare(&job, threadpool_size(pool), type, w, n_out, n_in, x, n_rows, y, xq,
                                        heap_bytes ? heap_bytes : sizeof stack, &used, NULL, &stage, 1, old);
    if (tasks) {
        if ((double)n_out * (double)n_in * (double)n_rows < INLINE_MAX_MACS) pool = NULL;
        act_stage_run_then(pool, &stage, stage.units ? 1 : 0, old, tasks, matmul_task, &job);
    }
    mem_free(heap);
}

void matmul(threadpool *pool, uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows,
            float *y) {
    const double t0 = matmul_time_enter();
    matmul_run(pool, type, w, n_out, n_in, x, n_rows, y);
    matmul_time_leave(t0);
}

/* ---- several products in one run ---- */

typedef struct batch_job {
    matmul_job jobs[MATMUL_BATCH_MAX];
    act_stage stages[MATMUL_BATCH_MAX]; /* the heap copies still to quantise, before the jobs run */
    size_t n_stages;
    size_t first[MATMUL_BATCH_MAX + 1]; /* task index of each job's first task; first[n] = all */
    size_t n;
} batch_job;

static void batch_task(void *ctx, size_t task, size_t thread) {
    const batch_job *b = ctx;
    size_t i = 0;
    while (task >= b->first[i + 1]) i++; /* a handful of jobs: a linear search */
    matmul_task((void *)&b->jobs[i], task - b->first[i], thread);
}

/* Same activation format for n_rows rows: Q8_0's blocks of 32, or the
 * K-quants' of 256, and at the AMX level the same staging (gemm_amx.h's
 * tile layout for Q8_0 / Q4_K / Q5_K, row-major blocks for Q6_K). */
static int act_same_format(uint32_t a, uint32_t b, size_t n_rows) {
    return (a == QUANT_Q8_0) == (b == QUANT_Q8_0) && amx_path(a, n_rows) == amx_path(b, n_rows);
}

/* pre: run first (NULL: none; act_stage_run_after); the pool's run for a product too small for it is still pre's. */
static void batch_flush(threadpool *pool, const threadpool_phase *pre, batch_job *b, double macs, int old) {
    if (b->n == 0 || macs < INLINE_MAX_MACS) { /* pre alone (on the pool); the products, if any, inline */
        threadpool_run_phase(pool, pre);
        if (b->n == 0) return;
        pool = NULL, pre = NULL;
    }
    act_stage_run_after(pool, pre, b->stages, b->n_stages, old, b->first[b->n], batch_task, b);
    b->n_stages = 0;
    b->n = 0;
}

void matmul_batch(threadpool *pool, const matmul_item *items, size_t n_items) {
    matmul_batch_after(pool, NULL, items, n_items);
}

static void batch_after(threadpool *pool, const threadpool_phase *pre, const matmul_item *items, size_t n_items) {
    assert(n_items <= MATMUL_BATCH_MAX);
    if (n_items > MATMUL_BATCH_MAX) n_items = MATMUL_BATCH_MAX;
    /* one or two rows are quantised here, on the calling thread, before any run: pre's rows must be there */
    for (size_t i = 0; i < n_items && pre; i++)
        if (items[i].n_rows <= ACT_MAX_ROWS) {
            threadpool_run_phase(pool, pre);
            pre = NULL;
        }
    _Alignas(64) uint8_t stack[2 * ACT_STACK_BYTES];
    size_t used = 0, heap_used = 0, heap_bytes = 0;
    for (size_t i = 0; i < n_items; i++) heap_bytes += act_heap_bytes(items[i].type, items[i].n_in, items[i].n_rows);
    uint8_t *heap = heap_bytes ? mem_alloc(heap_bytes) : NULL; /* NULL: those items keep f32 (matmul's comment) */
    batch_job b;
    b.n = 0;
    b.n_stages = 0;
    b.first[0] = 0;
    double macs = 0;
    const size_t threads = threadpool_size(pool);
    int multi = 0; /* any item of three or more rows: only then is the switch read */
    for (size_t i = 0; i < n_items; i++) multi |= items[i].n_rows > ACT_MAX_ROWS;
    const int old = multi && old_split();
    for (size_t i = 0; i < n_items; i++) {
        const matmul_item *it = &items[i];
        const matmul_job *shared = NULL;
        for (size_t k = 0; k < b.n && !shared; k++) {
            const matmul_job *o = &b.jobs[k];
            if (o->xq && o->x == it->x && o->n_in == it->n_in && o->n_rows == it->n_rows &&
                act_same_format(o->type, it->type, it->n_rows))
                shared = o;
        }
        size_t tasks;
        if (it->n_rows > ACT_MAX_ROWS) { /* the heap copy holds every item: never a flush */
            tasks = matmul_prepare(&b.jobs[b.n], threads, it->type, it->w, it->n_out, it->n_in, it->x, it->n_rows,
                                   it->y, heap, heap_bytes, &heap_used, shared, &b.stages[b.n_stages], n_items, old);
            if (b.stages[b.n_stages].units) b.n_stages++; /* tasks 0 with a plan cannot happen: n_out, n_rows > 0 */
        } else {
            const size_t need = act_path_bytes(it->type, it->n_in, it->n_rows) * it->n_rows;
            if (!shared && need > sizeof stack - used) { /* the 8-bit copies are full: run what is ready */
                batch_flush(pool, NULL, &b, macs, old); /* pre is NULL here: ran above (one- or two-row items) */
                used = 0, macs = 0;
            }
            tasks = matmul_prepare(&b.jobs[b.n], threads, it->type, it->w, it->n_out, it->n_in, it->x, it->n_rows,
                                   it->y, stack, sizeof stack, &used, shared, NULL, n_items, old);
        }
        if (tasks == 0) continue;
        macs += (double)it->n_out * (double)it->n_in * (double)it->n_rows;
        b.first[b.n + 1] = b.first[b.n] + tasks;
        b.n++;
    }
    batch_flush(pool, pre, &b, macs, old);
    mem_free(heap);
}

void matmul_batch_after(threadpool *pool, const threadpool_phase *pre, const matmul_item *items, size_t n_items) {
    const double t0 = matmul_time_enter();
    batch_after(pool, pre, items, n_items);
    matmul_time_leave(t0);
}

void matmul_scalar(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows, float *y) {
    const uint8_t *wb = w;
    const size_t row_bytes = quant_row_bytes(type, n_in);
    for (size_t r = 0; r < n_rows; r++)
        for (size_t o = 0; o < n_out; o++)
            y[r * n_out + o] = quant_dot_scalar(type, wb + o * row_bytes, x + r * n_in, n_in);
}

void matmul_oracle(uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x, size_t n_rows, float *y) {
    const size_t xq_bytes = act_path_bytes(type, n_in, n_rows);
    uint8_t *xq = xq_bytes ? mem_alloc(xq_bytes) : NULL;
    if (!xq) { /* f32 activations (or, as in matmul, no memory for the copy) */
        matmul_scalar(type, w, n_out, n_in, x, n_rows, y);
        return;
    }
    const uint8_t *wb = w;
    const size_t row_bytes = quant_row_bytes(type, n_in);
    for (size_t r = 0; r < n_rows; r++) {
        quant_act_quantize_scalar(type, x + r * n_in, xq, n_in);
        for (size_t o = 0; o < n_out; o++) y[r * n_out + o] = quant_act_dot_scalar(type, wb + o * row_bytes, xq, n_in);
    }
    mem_free(xq);
}

int matmul_path(uint32_t type, size_t n_in, size_t n_rows) {
    if (act_path_bytes(type, n_in, n_rows)) return MATMUL_PATH_INT8;
    return n_rows >= TILED_MIN_ROWS && quant_simd_active() ? MATMUL_PATH_TILED : MATMUL_PATH_DOT;
}
