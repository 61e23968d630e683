/*
 * attention_pool.c: cpu_attn_forward over a thread pool. The unit of work
 * keeps a KV head's query heads together where it can (they share every K/V
 * tile) and splits them, and the rows, only as far as needed for about four
 * tasks per thread, so a decode step (one row) still spreads over the heads
 * and a long prompt over its rows. Rows are split first, in whole row blocks
 * of the tiled path: it walks the keys once per block anyway, so that costs
 * no K/V reads, where a head split reads each tile once more per task. A
 * non-causal pass (a preview block) splits its rows too, each run given the
 * whole pass's key extent (cpu_attn_forward_keys): split over heads alone, a
 * 32-row block of 16 query heads on 2 KV heads (the 35B-A3B) made at most 16
 * tasks of 32 rows for the 64 a 16-thread pool asks, now 32 of 16 rows.
 * Below 16 rows a task still keeps 4 query heads (the AVX-512 P.V block takes 4 heads of a row) and splits its
 * rows to 8 (the score block's queries) first: split to one head a task, that block became 32 tasks x 1 head x 16
 * rows whose P.V blocks ran a quarter full and whose K tiles were transposed once per head, ~2.2x the one-thread
 * work in all (dev VM, 2 cores: 16 threads' split 4.4-4.9 ms of work against 2.1-2.4 now, the 35B's dims over 544
 * keys; now 16 tasks x 4 heads x 8 rows). Heads go below 4 only while the tasks are fewer than the threads (a
 * decode row).
 *
 * cpu_attn_prepare_pool: the q / k norms, RoPE and the cache writes of a pass (cpu_attn_prepare) in runs of rows on
 * the pool. Each row's work reads and writes only its own row (its RoPE angles from pos + r alone), so any split
 * gives the bits of one call. On the calling thread it cost a 32-row preview block ~130-170 us a layer on the dev
 * VM, ~1.5 ms of the amx preview's ~93 ms at 16 threads while 15 workers waited.
 */
#include "cpu/attention.h"

/* A task keeps at least this many query heads of its KV head (the AVX-512 P.V block's width) and rows down to
 * ATTN_MIN_ROWS (the score block's queries) before it splits heads further, and then only while there are fewer
 * tasks than threads (a decode row). */
enum { ATTN_KEEP_HEADS = 4, ATTN_MIN_ROWS = 8 };

typedef struct attn_job {
    float *out;
    const float *q, *gate, *k_cache, *v_cache;
    const cpu_attn_dims *d;
    int64_t pos;
    size_t n;
    bool causal;
    size_t row_chunk, n_row_chunks;   /* rows per task, and tasks per head run */
    size_t head_chunk, n_head_chunks; /* heads per task within a group, and runs per group */
    float *scratch;
    size_t scratch_stride;
} attn_job;

static void attn_task(void *ctx, size_t task, size_t thread) {
    const attn_job *j = ctx;
    const size_t group = j->d->n_head / j->d->n_head_kv, rs = j->d->n_head * j->d->head_dim;
    size_t kvh = task / (j->n_row_chunks * j->n_head_chunks);
    size_t rest = task % (j->n_row_chunks * j->n_head_chunks);
    size_t rc = rest / j->n_head_chunks, hc = rest % j->n_head_chunks;
    size_t r0 = rc * j->row_chunk, rows = j->n - r0 < j->row_chunk ? j->n - r0 : j->row_chunk;
    size_t h0 = kvh * group + hc * j->head_chunk;
    size_t h1 = h0 + j->head_chunk < (kvh + 1) * group ? h0 + j->head_chunk : (kvh + 1) * group;
    /* rows r0.. of a pass are those rows alone at pos + r0; non-causal, they still see all pos + n keys */
    cpu_attn_forward_keys(j->out + r0 * rs, j->q + r0 * rs, j->gate + r0 * rs, j->k_cache, j->v_cache, j->d,
                          j->pos + (int64_t)r0, rows, j->causal, (size_t)j->pos + j->n, h0, h1,
                          j->scratch + thread * j->scratch_stride);
}

void cpu_attn_forward_pool(threadpool *pool, float *out, const float *q, const float *gate, const float *k_cache,
                           const float *v_cache, const cpu_attn_dims *d, int64_t pos, size_t n, bool causal,
                           size_t n_ctx, float *scratch) {
    if (n == 0) return;
    const size_t threads = threadpool_size(pool), group = d->n_head / d->n_head_kv, want = 4 * threads;
    size_t row_chunk = n, head_chunk = group;
    for (;;) {
        size_t tasks = d->n_head_kv * ((n + row_chunk - 1) / row_chunk) * ((group + head_chunk - 1) / head_chunk);
        if (tasks >= want) break;
        if (row_chunk > CPU_ATTN_ROW_BLOCK)
            row_chunk = ((row_chunk + 1) / 2 + CPU_ATTN_ROW_BLOCK - 1) / CPU_ATTN_ROW_BLOCK * CPU_ATTN_ROW_BLOCK;
        else if (head_chunk > ATTN_KEEP_HEADS)
            head_chunk = (head_chunk + 1) / 2;
        else if (row_chunk > ATTN_MIN_ROWS)
            row_chunk = (row_chunk + 1) / 2;
        else if (head_chunk > 1 && tasks < threads)
            head_chunk = (head_chunk + 1) / 2;
        else
            break;
    }
    attn_job job = {
        .out = out, .q = q, .gate = gate, .k_cache = k_cache, .v_cache = v_cache, .d = d, .pos = pos, .n = n,
        .causal = causal, .row_chunk = row_chunk, .n_row_chunks = (n + row_chunk - 1) / row_chunk,
        .head_chunk = head_chunk, .n_head_chunks = (group + head_chunk - 1) / head_chunk, .scratch = scratch,
        .scratch_stride = cpu_attn_scratch_floats(d, n_ctx),
    };
    threadpool_run(pool, d->n_head_kv * job.n_row_chunks * job.n_head_chunks, attn_task, &job);
}

/* Rows below this run on the calling thread: a decode row's prepare (~5 us) costs less than waking the pool. */
enum { PREPARE_MIN_ROWS = 4 };

typedef struct prep_job {
    float *q, *gate, *k_cache, *v_cache, *cs;
    const float *qg, *k, *v, *q_norm, *k_norm, *inv_freq;
    const cpu_attn_dims *d;
    int64_t pos;
    size_t n, per;
} prep_job;

static void prep_task(void *ctx, size_t task, size_t thread) {
    const prep_job *j = ctx;
    const size_t nh = j->d->n_head, nkv = j->d->n_head_kv, hd = j->d->head_dim;
    const size_t r0 = task * j->per, rows = j->n - r0 < j->per ? j->n - r0 : j->per;
    cpu_attn_prepare(j->q + r0 * nh * hd, j->gate + r0 * nh * hd, j->k_cache, j->v_cache, j->qg + r0 * nh * 2 * hd,
                     j->k + r0 * nkv * hd, j->v + r0 * nkv * hd, j->q_norm, j->k_norm, j->inv_freq, j->d,
                     j->pos + (int64_t)r0, rows, j->cs + thread * j->d->rot);
}

void cpu_attn_prepare_pool(threadpool *pool, float *q, float *gate, float *k_cache, float *v_cache, const float *qg,
                           const float *k, const float *v, const float *q_norm, const float *k_norm,
                           const float *inv_freq, const cpu_attn_dims *d, int64_t pos, size_t n, float *cs) {
    const size_t threads = threadpool_size(pool);
    if (n < PREPARE_MIN_ROWS || threads < 2) {
        cpu_attn_prepare(q, gate, k_cache, v_cache, qg, k, v, q_norm, k_norm, inv_freq, d, pos, n, cs);
        return;
    }
    const size_t per = (n + threads - 1) / threads;
    prep_job job = {.q = q, .gate = gate, .k_cache = k_cache, .v_cache = v_cache, .cs = cs, .qg = qg, .k = k,
                    .v = v, .q_norm = q_norm, .k_norm = k_norm, .inv_freq = inv_freq, .d = d, .pos = pos, .n = n,
                    .per = per};
    threadpool_run(pool, (n + per - 1) / per, prep_task, &job);
}
