/*
 * matmul_group.c: grouped products (matmul_group.h). Each item is cut into
 * runs of consecutive rows with the same path; a run matmul would compute
 * with that path goes to matmul_batch, the others (per-row paths over 3+
 * rows: several one-row sequences of a decode batch) to the multi-row
 * per-row kernel below, all of whose tasks share one run of the pool.
 *
 * One exception to "matmul when it gives the same path": a run of 3 to
 * GEMM_SMALL_MAX_ROWS rows against Q8_0 on the 8-bit path (a decode batch of
 * one-row sequences: every dense projection and the head) takes
 * gemm_small.h's kernel instead of gemm_avx2.c's tile kernel. Both give
 * every output the one-row dot's bits, so the choice cannot change a
 * result; the small kernel keeps a weight block in registers for 4 rows
 * instead of reloading a decoded tile per row (bench_gemm_small: 1.04-1.3x
 * the tile kernel at 8 rows in cache; a decode batch of 8 on the 35B
 * geometry: 15-22% less CPU per token, bench/RESULTS.md). Runs of the
 * per-row kernels that read the same x share one 8-bit copy of it, as
 * matmul_batch's items do (the GDN and attention input projections: 4 and
 * 3 products of one x). On the AVX-512 VNNI level (simd_level.h) the
 * small kernel is not used: gemm_avx512.c's tile kernel, reached through
 * matmul, is faster at 3..8 rows than either AVX2 kernel (bench_gemm_levels)
 * and gives the same bits.
 */
#include "quant/matmul_group.h"

#include <string.h>

#include "base/alloc.h"
#include "quant/gemm_small.h"
#include "quant/matmul_internal.h"
#include "quant/quant.h"
#include "quant/simd_level.h"

enum { EACH_TASKS_PER_THREAD = 8, EACH_TILE = 4, EACH_INLINE_MACS = 1 << 17 };

/* A run of rows through the per-row kernel of its path. */
typedef struct each_job {
    uint32_t type;
    const uint8_t *w;
    size_t row_bytes, n_out, n_in, n_rows;
    const float *x;
    float *y;
    const uint8_t *xq; /* INT8: the rows in 8 bits */
    size_t xq_bytes;
    quant_act_dot_fn act_dot;
    quant_act_dot4_fn act_dot4; /* its 4-row form, or NULL */
    int small; /* Q8_0 on the 8-bit path, 3..GEMM_SMALL_MAX_ROWS rows: gemm_small.h's kernel */
    size_t per, first_task;
} each_job;

typedef struct each_set {
    each_job *jobs;
    size_t n;
} each_set;

static void each_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    const each_set *s = ctx;
    size_t i = 0;
    while (i + 1 < s->n && task >= s->jobs[i + 1].first_task) i++;
    const each_job *j = &s->jobs[i];
    const size_t o0 = (task - j->first_task) * j->per, o1 = o0 + j->per < j->n_out ? o0 + j->per : j->n_out;
    if (j->small) {
        gemm_small_q8_0_avx2(j->w, j->row_bytes, o0, o1, j->n_in, j->xq, j->xq_bytes, j->n_rows, j->y, j->n_out);
        return;
    }
    if (j->xq) {
        matmul_act_outputs(j->act_dot, j->act_dot4, j->w, j->row_bytes, j->xq, j->xq_bytes, j->n_in, j->n_rows, j->y,
                           j->n_out, o0, o1);
        return;
    }
    for (size_t o = o0; o < o1; o++) { /* the weight row stays in L1 across the rows */
        const uint8_t *row = j->w + o * j->row_bytes;
        for (size_t r = 0; r < j->n_rows; r++)
            j->y[r * j->n_out + o] = quant_dot(j->type, row, j->x + r * j->n_in, j->n_in);
    }
}

/* The path of row r of an item. */
static int row_path(const mm_group_item *it, size_t r) {
    return matmul_path(it->m.type, it->m.n_in, it->own ? it->own[r] : it->m.n_rows);
}

void matmul_grouped_batch(threadpool *pool, const mm_group_item *items, size_t n_items) {
    matmul_grouped_batch_after(pool, NULL, items, n_items);
}

static void grouped_after(threadpool *pool, const threadpool_phase *pre, const mm_group_item *items, size_t n_items) {
    size_t n_runs = 0;
    for (size_t i = 0; i < n_items; i++)
        for (size_t r = 0; r < items[i].m.n_rows; r++)
            n_runs += r == 0 || row_path(&items[i], r) != row_path(&items[i], r - 1);
    if (n_runs == 0) {
        threadpool_run_phase(pool, pre);
        return;
    }
    matmul_item *direct = mem_alloc(n_runs * sizeof *direct);
    each_job *each = mem_alloc(n_runs * sizeof *each);
    size_t nd = 0, ne = 0, xq_total = 0;
    if (!direct || !each) { /* no memory for the plan: every run as its own product, still exact */
        mem_free(direct), mem_free(each);
        direct = NULL, each = NULL;
        threadpool_run_phase(pool, pre); /* those products read the rows at once */
        pre = NULL;
    }
    for (size_t i = 0; i < n_items; i++) {
        const matmul_item *m = &items[i].m;
        for (size_t a = 0; a < m->n_rows;) {
            const int path = row_path(&items[i], a);
            size_t b = a + 1;
            while (b < m->n_rows && row_path(&items[i], b) == path) b++;
            const matmul_item run = {m->type, m->w, m->n_out, m->n_in, m->x + a * m->n_in, b - a, m->y + a * m->n_out};
            const int small = path == MATMUL_PATH_INT8 && m->type == QUANT_Q8_0 && b - a >= GEMM_SMALL_MIN_ROWS &&
                              b - a <= GEMM_SMALL_MAX_ROWS && quant_simd_active() && !quant_avx512_active();
            if (matmul_path(m->type, m->n_in, b - a) == path && !small) {
                if (direct) direct[nd++] = run;
                else matmul(pool, run.type, run.w, run.n_out, run.n_in, run.x, run.n_rows, run.y);
            } else if (each) {
                const size_t xqb = path == MATMUL_PATH_INT8 ? quant_act_row_bytes(m->type, m->n_in) : 0;
                each[ne++] = (each_job){.type = m->type, .w = m->w, .row_bytes = quant_row_bytes(m->type, m->n_in),
                                        .n_out = m->n_out, .n_in = m->n_in, .n_rows = b - a, .x = run.x, .y = run.y,
                                        .xq_bytes = xqb, .small = small};
                xq_total += (xqb * (b - a) + 63) / 64 * 64;
            } else { /* no plan memory: one row at a time is each row's own path */
                for (size_t r = a; r < b; r++)
                    matmul(pool, m->type, m->w, m->n_out, m->n_in, m->x + r * m->n_in, 1, m->y + r * m->n_out);
            }
            a = b;
        }
    }
    /* pre rides in the first batch's run only when that batch is everything (the per-row runs below quantise
     * their rows on this thread) */
    if (ne || nd == 0 || nd > MATMUL_BATCH_MAX) {
        threadpool_run_phase(pool, pre);
        pre = NULL;
    }
    for (size_t d = 0; d < nd; d += MATMUL_BATCH_MAX)
        matmul_batch_after(pool, d ? NULL : pre, direct + d, nd - d < MATMUL_BATCH_MAX ? nd - d : MATMUL_BATCH_MAX);
    if (ne) {
        uint8_t *xq = xq_total ? mem_alloc(xq_total) : NULL;
        const size_t threads = threadpool_size(pool);
        size_t tasks = 0, off = 0;
        double macs = 0;
        for (size_t e = 0; e < ne; e++) {
            each_job *j = &each[e];
            if (j->xq_bytes && !xq) { /* no memory for the 8-bit rows: each row alone (matmul quantises on its stack) */
                for (size_t r = 0; r < j->n_rows; r++)
                    matmul(pool, j->type, j->w, j->n_out, j->n_in, j->x + r * j->n_in, 1, j->y + r * j->n_out);
                j->n_out = 0;
            }
            const each_job *same = NULL; /* an earlier run with these very rows in this format */
            for (size_t k = 0; k < e && !same && j->xq_bytes && xq; k++)
                if (each[k].xq && each[k].x == j->x && each[k].n_in == j->n_in && each[k].n_rows == j->n_rows &&
                    (each[k].type == QUANT_Q8_0) == (j->type == QUANT_Q8_0))
                    same = &each[k];
            if (same) {
                j->xq = same->xq;
                j->act_dot = quant_act_dot_kernel(j->type);
                j->act_dot4 = quant_act_dot4_kernel(j->type);
            } else if (j->xq_bytes && xq) {
                uint8_t *dst = xq + off;
                for (size_t r = 0; r < j->n_rows; r++)
                    quant_act_quantize(j->type, j->x + r * j->n_in, dst + r * j->xq_bytes, j->n_in);
                off += (j->xq_bytes * j->n_rows + 63) / 64 * 64;
                j->xq = dst;
                j->act_dot = quant_act_dot_kernel(j->type);
                j->act_dot4 = quant_act_dot4_kernel(j->type);
            }
            size_t per = threads > 1 ? (j->n_out + threads * EACH_TASKS_PER_THREAD - 1) / (threads * EACH_TASKS_PER_THREAD)
                                     : j->n_out;
            per = (per + EACH_TILE - 1) / EACH_TILE * EACH_TILE;
            if (per == 0) per = EACH_TILE;
            j->per = per;
            j->first_task = tasks;
            tasks += (j->n_out + per - 1) / per;
            macs += (double)j->n_out * (double)j->n_in * (double)j->n_rows;
        }
        each_set set = {each, ne};
        if (tasks) threadpool_run(macs < EACH_INLINE_MACS ? NULL : pool, tasks, each_task, &set);
        mem_free(xq);
    }
    mem_free(direct);
    mem_free(each);
}

void matmul_grouped_batch_after(threadpool *pool, const threadpool_phase *pre, const mm_group_item *items,
                                size_t n_items) {
    const double t0 = matmul_time_enter();
    grouped_after(pool, pre, items, n_items);
    matmul_time_leave(t0);
}

void matmul_grouped(threadpool *pool, uint32_t type, const void *w, size_t n_out, size_t n_in, const float *x,
                    size_t n_rows, float *y, const uint32_t *own) {
    const mm_group_item it = {{type, w, n_out, n_in, x, n_rows, y}, own};
    matmul_grouped_batch(pool, &it, 1);
}
