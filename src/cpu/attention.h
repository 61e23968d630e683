/*
 * attention.h: the gated full-attention layer between its projections
 * (TRUNK.md section 3). The caller runs q_proj / k_proj / v_proj and o_proj;
 * these do everything in between, in two steps so a backend can thread the
 * expensive one:
 *
 *  - cpu_attn_prepare: q_proj's output is [n_head][2*hd] per row with the
 *    query first and the gate second in each head; q and k get the
 *    zero-centred RMSNorm per head (stored 1 + w weights), then RoPE on the
 *    first `rot` dims at the row's absolute position; the rows' k (normed,
 *    rotated) and v (raw) are written into the cache at rows pos..pos+n-1.
 *  - cpu_attn_forward: for query head h (KV head h / (n_head / n_head_kv),
 *    repeat_interleave), softmax(q k^T * hd^-0.5) v over the cache, then
 *    times sigmoid(gate). Causal: row r (position pos + r) sees cache rows
 *    0..pos+r. Not causal (the preview, SPEC.md 2): every row sees rows
 *    0..pos+n-1. cpu_attn_forward_keys takes that key extent apart from the
 *    rows, so a slice of a non-causal pass can run on its own.
 *
 * The cache layout is position-major, [n_ctx][n_head_kv][hd], so appending a
 * row is one contiguous write. The oracle is two-pass (scores, max, exp,
 * normalise, weighted sum of v, like torch's eager path); the AVX2 path is
 * a tiled one-pass online softmax that reads each K/V tile once per KV head
 * and row block, which is what keeps long prompts from streaming the whole
 * cache once per query head and row.
 */
#ifndef CLOVER_CPU_ATTENTION_H
#define CLOVER_CPU_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "clover.h"

typedef struct cpu_attn_dims {
    size_t n_head;    /* query heads */
    size_t n_head_kv; /* KV heads; divides n_head */
    size_t head_dim;  /* hd */
    size_t rot;       /* rotary dims: even, <= hd */
    float eps;        /* of q_norm and k_norm */
} cpu_attn_dims;

/* Checks the dimensions once (at model binding): heads >= 1, n_head a
 * multiple of n_head_kv, rot even and <= head_dim. 0 or CLOVER_E_FORMAT with
 * a message naming the field. The operators themselves assume checked dims. */
int cpu_attn_dims_check(const cpu_attn_dims *d, clover_error *err);

/* Floats of scratch one cpu_attn_forward call needs (any level) when the
 * cache holds up to n_ctx rows (pos + n <= n_ctx). */
size_t cpu_attn_scratch_floats(const cpu_attn_dims *d, size_t n_ctx);

void cpu_attn_prepare(float *q,             // [n][n_head][hd], out: normed, rotated
                      float *gate,          // [n][n_head][hd], out
                      float *k_cache,       // [n_ctx][n_head_kv][hd], rows pos..pos+n-1 written
                      float *v_cache,       // [n_ctx][n_head_kv][hd], rows pos..pos+n-1 written
                      const float *qg,      // [n][n_head][2*hd], q_proj output
                      const float *k,       // [n][n_head_kv][hd], k_proj output
                      const float *v,       // [n][n_head_kv][hd], v_proj output
                      const float *q_norm,  // [hd], stored 1 + w
                      const float *k_norm,  // [hd], stored 1 + w
                      const float *inv_freq,  // [rot/2], rope_inv_freq
                      const cpu_attn_dims *d, int64_t pos, size_t n,
                      float *cs);           // scratch [rot]

/* cpu_attn_prepare in runs of rows over the pool (attention_pool.c): the same bits as one call; cs is scratch
 * [threadpool_size(pool)][rot]. A pass of fewer than 4 rows runs on the calling thread. */
void cpu_attn_prepare_pool(threadpool *pool, float *q, float *gate, float *k_cache, float *v_cache, const float *qg,
                           const float *k, const float *v, const float *q_norm, const float *k_norm,
                           const float *inv_freq, const cpu_attn_dims *d, int64_t pos, size_t n, float *cs);

/* Query heads [h_begin, h_end) of all n rows; disjoint head ranges may run
 * concurrently (each with its own scratch of cpu_attn_scratch_floats). */
void cpu_attn_forward(float *out,            // [n][n_head][hd], gated
                      const float *q,        // [n][n_head][hd], from cpu_attn_prepare
                      const float *gate,     // [n][n_head][hd]
                      const float *k_cache,  // [pos+n][n_head_kv][hd]
                      const float *v_cache,  // [pos+n][n_head_kv][hd]
                      const cpu_attn_dims *d, int64_t pos, size_t n, bool causal, size_t h_begin, size_t h_end,
                      float *scratch);
void cpu_attn_forward_scalar(float *out, const float *q, const float *gate, const float *k_cache,
                             const float *v_cache, const cpu_attn_dims *d, int64_t pos, size_t n, bool causal,
                             size_t h_begin, size_t h_end, float *scratch);
void cpu_attn_forward_avx2(float *out, const float *q, const float *gate, const float *k_cache,
                           const float *v_cache, const cpu_attn_dims *d, int64_t pos, size_t n, bool causal,
                           size_t h_begin, size_t h_end, float *scratch);

/* cpu_attn_forward of n rows at pos..pos+n-1 where a non-causal row sees keys 0..n_keys-1 (pos + n <= n_keys <=
 * the scratch's n_ctx), a causal one 0..its own position as before (n_keys unused): rows r0.. of a non-causal pass
 * of N rows at P are this at pos P + r0 with n_keys P + N. cpu_attn_forward is n_keys = pos + n. A row's output is
 * the same operations in the same order whichever rows and heads share the call, so any split of a pass gives the
 * same bits (test_cpu_attention_split). */
void cpu_attn_forward_keys(float *out, const float *q, const float *gate, const float *k_cache, const float *v_cache,
                           const cpu_attn_dims *d, int64_t pos, size_t n, bool causal, size_t n_keys, size_t h_begin,
                           size_t h_end, float *scratch);
void cpu_attn_forward_keys_avx2(float *out, const float *q, const float *gate, const float *k_cache,
                                const float *v_cache, const cpu_attn_dims *d, int64_t pos, size_t n, bool causal,
                                size_t n_keys, size_t h_begin, size_t h_end, float *scratch);
/* The AVX-512 level (attention_avx512.c: register-blocked, batch-invariant, its own bits): cpu_attn_forward_keys
 * runs it when quant_avx512_active(); callable only where quant_avx512_supported(). */
void cpu_attn_forward_keys_avx512(float *out, const float *q, const float *gate, const float *k_cache,
                                  const float *v_cache, const cpu_attn_dims *d, int64_t pos, size_t n, bool causal,
                                  size_t n_keys, size_t h_begin, size_t h_end, float *scratch);

/* All query heads and rows of cpu_attn_forward spread over pool (NULL: this
 * thread). Tasks are (KV head, run of rows, run of the group's heads), causal
 * or not (a non-causal run still sees the whole pass's keys, pos + n); the
 * same bits as one call for any pool size. scratch:
 * threadpool_size(pool) * cpu_attn_scratch_floats(d, n_ctx) floats. */
void cpu_attn_forward_pool(threadpool *pool, float *out, const float *q, const float *gate, const float *k_cache,
                           const float *v_cache, const cpu_attn_dims *d, int64_t pos, size_t n, bool causal,
                           size_t n_ctx, float *scratch);

/* Tiles of the AVX2 path: query rows per block and keys per tile. */
enum { CPU_ATTN_ROW_BLOCK = 16, CPU_ATTN_KEY_TILE = 64 };

#endif
