/*
 * synth_stream.c: generates, quantises and writes the tensor data of a
 * synthetic model. Quantising is the slow part (Q4_K's scale search costs
 * about a third of a microsecond per value on one core; the 35B geometry
 * has 32 billion Q4_K values), so a tensor's rows are cut into chunks of a
 * fixed size that depends only on the row length, each chunk draws from
 * its own random stream (seed, name, chunk index), and a group of chunks is
 * generated in parallel on the thread pool, then written in order. The
 * bytes therefore do not depend on the number of threads. Tensors marked
 * direct (the big preset's Q4_K experts) draw their blocks straight from
 * the chunk's stream instead (synth_values_fill_q4_k).
 */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/threadpool.h"
#include "model/synth.h"
#include "quant/quant.h"

#define CHUNK_ELEMS (1u << 16) /* values per chunk (at least one row) */
#define CHUNKS_PER_THREAD 4    /* chunks per thread in a group */

typedef struct stream_job {
    const synth_tensor *t;
    uint64_t seed;
    size_t ne0, chunk_rows, row_bytes;
    uint64_t rows;
    uint64_t first_chunk; /* of the current group */
    float **scratch;      /* [threads][chunk_rows * ne0] */
    uint8_t *out;         /* [group][chunk_rows * row_bytes] */
} stream_job;

static size_t chunk_rows_of(size_t ne0) { return CHUNK_ELEMS / ne0 ? CHUNK_ELEMS / ne0 : 1; }

static void chunk_task(void *ctx, size_t task, size_t thread) {
    const stream_job *j = ctx;
    uint64_t chunk = j->first_chunk + task, r0 = chunk * j->chunk_rows;
    size_t k = j->rows - r0 < j->chunk_rows ? (size_t)(j->rows - r0) : j->chunk_rows;
    rng_state r;
    synth_values_seed(&r, j->seed, j->t->name, chunk);
    uint8_t *out = j->out + task * j->chunk_rows * j->row_bytes;
    if (j->t->direct) {
        synth_values_fill_q4_k(j->t, &r, out, k * j->ne0);
        return;
    }
    synth_values_fill(j->t, &r, j->scratch[thread], k * j->ne0);
    if (j->t->skew > 0.0f) synth_values_skew_rows(j->t, j->seed, r0, k, j->scratch[thread]);
    quant_quantize_row(j->t->type, j->scratch[thread], out, k * j->ne0);
}

int synth_stream_tensors(gguf_writer *w, const synth_tensor *plan, size_t n, uint64_t seed, size_t n_threads,
                         clover_error *err) {
    threadpool *pool = NULL;
    int rc = threadpool_create(&pool, n_threads, err);
    if (rc) return rc;
    size_t threads = threadpool_size(pool), group = threads * CHUNKS_PER_THREAD;
    size_t max_elems = 0, max_chunk_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        size_t ne0 = (size_t)plan[i].ne[0], rows = chunk_rows_of(ne0);
        size_t bytes = rows * quant_row_bytes(plan[i].type, ne0);
        if (rows * ne0 > max_elems) max_elems = rows * ne0;
        if (bytes > max_chunk_bytes) max_chunk_bytes = bytes;
    }
    stream_job j = {.seed = seed};
    j.scratch = mem_calloc(threads, sizeof *j.scratch);
    j.out = mem_alloc(group * max_chunk_bytes);
    bool ok = j.scratch && j.out;
    for (size_t i = 0; ok && i < threads; i++)
        ok = (j.scratch[i] = mem_alloc(max_elems * sizeof(float))) != NULL;
    if (!ok) rc = error_set(err, CLOVER_E_NOMEM, "synth: out of memory for %zu threads' row buffers", threads);

    for (size_t i = 0; i < n && !rc; i++) {
        j.t = &plan[i];
        j.ne0 = (size_t)plan[i].ne[0];
        j.chunk_rows = chunk_rows_of(j.ne0);
        j.row_bytes = quant_row_bytes(plan[i].type, j.ne0);
        j.rows = synth_tensor_rows(&plan[i]);
        uint64_t n_chunks = (j.rows + j.chunk_rows - 1) / j.chunk_rows;
        for (j.first_chunk = 0; j.first_chunk < n_chunks && !rc; j.first_chunk += group) {
            size_t tasks = n_chunks - j.first_chunk < group ? (size_t)(n_chunks - j.first_chunk) : group;
            threadpool_run(tasks > 1 ? pool : NULL, tasks, chunk_task, &j);
            uint64_t r0 = j.first_chunk * j.chunk_rows, r1 = r0 + (uint64_t)tasks * j.chunk_rows;
            if (r1 > j.rows) r1 = j.rows;
            rc = gguf_writer_write(w, j.out, (size_t)(r1 - r0) * j.row_bytes, err);
        }
    }
    for (size_t i = 0; j.scratch && i < threads; i++)
        mem_free(j.scratch[i]);
    mem_free(j.scratch);
    mem_free(j.out);
    threadpool_free(pool);
    return rc;
}
