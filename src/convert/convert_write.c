/*
 * convert_write.c: streaming the tensors out.
 *
 * Rows are produced in chunks of about CHUNK_BYTES of output: the chunk's
 * rows are split into tasks on the thread pool (each thread has its own two
 * f32 row buffers, allocated once), every task reads its rows from the
 * mapped safetensors, transforms and quantises them into their place in the
 * chunk buffer, and the chunk is appended to the GGUF in order. Memory is
 * the chunk plus two rows per thread. Once a tensor is written its source
 * pages are handed back to the kernel.
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/threadpool.h"
#include "convert/convert_internal.h"
#include "quant/quant.h"

enum { CHUNK_BYTES = 8 << 20, TASKS_PER_THREAD = 4 };

typedef struct write_ctx {
    const conv_tensor *t;
    uint64_t first_row;  /* of this chunk */
    uint64_t n_rows;     /* in this chunk */
    uint64_t rows_per_task;
    size_t row_bytes;
    uint8_t *chunk;
    float **row;         /* [threads][ne0_max] */
    float **tmp;
} write_ctx;

static void write_task(void *arg, size_t task, size_t thread) {
    write_ctx *c = arg;
    const conv_tensor *t = c->t;
    uint64_t lo = task * c->rows_per_task, hi = lo + c->rows_per_task;
    if (hi > c->n_rows) hi = c->n_rows;
    float *row = c->row[thread], *tmp = c->tmp[thread];
    for (uint64_t i = lo; i < hi; i++) {
        conv_tensor_read_row(t, c->first_row + i, row, tmp);
        uint8_t *dst = c->chunk + i * c->row_bytes;
        if (t->type == QUANT_F32) memcpy(dst, row, (size_t)t->ne[0] * sizeof(float));
        else quant_quantize_row(t->type, row, dst, (size_t)t->ne[0]);
    }
}

static void release_sources(const conv_tensor *t) {
    for (uint32_t i = 0; i < t->n_src; i++) st_file_release(t->src[i]->file, t->src[i]->t);
}

int convert_write_tensors(gguf_writer *w, const conv_plan *plan, const convert_options *opt, uint64_t total_bytes,
                          clover_error *err) {
    uint64_t ne0_max = 1, row_bytes_max = 1;
    for (size_t i = 0; i < plan->n; i++) {
        const conv_tensor *t = &plan->t[i];
        if (t->ne[0] > ne0_max) ne0_max = t->ne[0];
        size_t rb = quant_row_bytes(t->type, (size_t)t->ne[0]);
        if (rb > row_bytes_max) row_bytes_max = rb;
    }
    threadpool *pool = NULL;
    int rc = threadpool_create(&pool, opt->n_threads, err);
    if (rc) return rc;
    size_t nt = threadpool_size(pool);
    size_t chunk_cap = row_bytes_max > CHUNK_BYTES ? (size_t)row_bytes_max : CHUNK_BYTES;
    write_ctx c = {0};
    c.chunk = mem_alloc(chunk_cap);
    c.row = mem_calloc(nt, sizeof *c.row);
    c.tmp = mem_calloc(nt, sizeof *c.tmp);
    bool ok = c.chunk && c.row && c.tmp;
    for (size_t i = 0; ok && i < nt; i++) {
        c.row[i] = mem_calloc((size_t)ne0_max, sizeof(float));
        c.tmp[i] = mem_calloc((size_t)ne0_max, sizeof(float));
        ok = c.row[i] && c.tmp[i];
    }
    if (!ok) {
        rc = error_set(err, CLOVER_E_NOMEM, "out of memory for the conversion buffers (%zu threads, rows of %llu)",
                       nt, (unsigned long long)ne0_max);
        goto done;
    }

    uint64_t done_bytes = 0;
    if (opt->progress && plan->n) opt->progress(opt->progress_user, plan->t[0].name, 0, plan->n, 0, total_bytes);
    for (size_t ti = 0; ti < plan->n && !rc; ti++) {
        const conv_tensor *t = &plan->t[ti];
        c.t = t;
        c.row_bytes = quant_row_bytes(t->type, (size_t)t->ne[0]);
        uint64_t rows = conv_tensor_rows(t);
        uint64_t per_chunk = chunk_cap / c.row_bytes;
        for (uint64_t r = 0; r < rows && !rc; r += per_chunk) {
            c.first_row = r;
            c.n_rows = rows - r < per_chunk ? rows - r : per_chunk;
            size_t want_tasks = nt * TASKS_PER_THREAD;
            c.rows_per_task = (c.n_rows + want_tasks - 1) / want_tasks;
            size_t n_tasks = (size_t)((c.n_rows + c.rows_per_task - 1) / c.rows_per_task);
            threadpool_run(pool, n_tasks, write_task, &c);
            size_t bytes = (size_t)(c.n_rows * c.row_bytes);
            rc = gguf_writer_write(w, c.chunk, bytes, err);
            done_bytes += bytes;
            if (!rc && opt->progress) opt->progress(opt->progress_user, t->name, ti, plan->n, done_bytes, total_bytes);
        }
        release_sources(t);
    }
done:
    for (size_t i = 0; c.row && i < nt; i++) mem_free(c.row[i]);
    for (size_t i = 0; c.tmp && i < nt; i++) mem_free(c.tmp[i]);
    mem_free(c.row);
    mem_free(c.tmp);
    mem_free(c.chunk);
    threadpool_free(pool);
    return rc;
}

int convert_verify_loads(const char *tmp_path, void *user, clover_error *err) {
    (void)user;
    clover_model *m = NULL;
    clover_error lerr = {0};
    if (clover_model_load(&m, tmp_path, &lerr) != CLOVER_OK)
        return error_set(err, CLOVER_E_UNSUPPORTED, "the file written does not load (not kept): %s", lerr.message);
    clover_model_free(m);
    return CLOVER_OK;
}
