/*
 * cuda_attention.h: the gated full-attention layer between its projections
 * (TRUNK.md section 3) on the GPU, the device twin of src/cpu/attention.h.
 * The caller runs q_proj / k_proj / v_proj and o_proj (cuda_matmul.h); these
 * do everything in between. All f32, like the CPU backend, so the two agree
 * to float reassociation (bound: tests/unit/test_cuda_attention.c).
 *
 * Batched over sequences (contract v2): one pass carries the rows of several
 * sequences, each with its own KV cache and position. A pass's rows are
 * [n_rows][...] with sequence s owning rows row0..row0+n-1; the per-sequence
 * facts live in DEVICE memory (cuda_attn_seq[n_seq]), so a captured CUDA
 * graph is replayed by rewriting those descriptors (a memcpy node from pinned
 * host memory, or a small kernel), with no graph update and no host read.
 *
 *  1. cuda_attn_prepare, in place on q_proj's output qg ([row][n_head][2*hd]:
 *     query first, gate second in each head): q and k get the zero-centred
 *     RMSNorm per head (stored 1 + w weights), then NeoX RoPE on the first
 *     `rot` dims at the row's absolute position (pos + r; cos/sin of the f32
 *     angle pos * inv_freq[i], evaluated in double and rounded, as the CPU);
 *     the gate half is left as it is. The rows' k (normed, rotated) and v (raw)
 *     are appended to the sequence's cache at rows pos..pos+n-1 (the KV append).
 *  2. cuda_attn_forward: for query head h (KV head h / (n_head / n_head_kv),
 *     repeat_interleave), softmax(q k^T * hd^-0.5) v over the cache, times
 *     sigmoid(gate). Causal: row r sees cache rows 0..pos+r. Not causal (the
 *     preview, SPEC.md 2; issue 14): every row sees 0..pos+n-1.
 *     Chunks (n > 1): each block takes one KV head, a tile of rows x the
 *     group's query heads (<= 32 query vectors, so each K/V row is read once
 *     for all of them) and one split of the keys (flash-decoding), with an
 *     online softmax over key tiles of 32. Decode rows (n == 1; the decode
 *     form, on unless CLOVER_CUDA_ATTN_DECODE=0 or cuda_attn_decode_set(0)):
 *     a block takes one KV head, <= 8 query heads and a split of the keys
 *     spread over its warps, q and o in registers, no barrier per key tile
 *     (attention_forward.cu). Sequences of 2..64 rows (the few form, on
 *     unless CLOVER_CUDA_ATTN_FEW=0 or cuda_attn_few_set(0)): the decode form's
 *     blocks over groups of 8 (row, head) query vectors, several groups a
 *     block (attention_few.cu). A second small kernel merges the splits
 *     (skipped when there is one). A sequence's split plan depends only on
 *     the dims, the form and its own pos + n and n (cuda_attn_plan), and the
 *     rows a block holds never change a query's arithmetic, so a row's
 *     result does not depend on the other sequences of the pass (tested bit
 *     for bit).
 *
 * Cache layout: position-major [n_ctx][n_head_kv][hd] f32, as the CPU's and
 * backend.h's state layout, so state export/import is a straight copy. The
 * caches must be 16-byte aligned (cudaMalloc'd; 16-byte loads when hd % 4 == 0).
 *
 * Stream / graph rules: every launch goes on `stream` (a cudaStream_t passed
 * as void *; NULL = the legacy default stream). Nothing allocates, syncs or
 * reads device memory on the host, so every call may be captured in a graph;
 * call cuda_attn_init once per device before capturing (it raises the
 * kernels' dynamic shared memory limits). Functions return 0 or the
 * cudaError_t of the failed launch (cuda_attn_strerror names it); arguments
 * the host can check are checked first (CUDA_ATTN_EINVAL, no launch).
 */
#ifndef CLOVER_CUDA_ATTENTION_H
#define CLOVER_CUDA_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_attn_dims {
    int n_head;    /* query heads */
    int n_head_kv; /* KV heads; divides n_head */
    int head_dim;  /* hd, 1..CUDA_ATTN_MAX_HEAD_DIM */
    int rot;       /* rotary dims: even, <= hd */
    float eps;     /* of q_norm and k_norm */
} cuda_attn_dims;

/* One sequence of a pass, in DEVICE memory. */
typedef struct cuda_attn_seq {
    float *k_cache; /* [n_ctx][n_head_kv][hd], rows pos..pos+n-1 written by prepare */
    float *v_cache; /* [n_ctx][n_head_kv][hd] */
    int32_t pos;    /* rows already in the cache = absolute position of its first row */
    int32_t row0;   /* its first row in the pass's row arrays */
    int32_t n;      /* its rows in this pass (0 allowed: the sequence sits out) */
    int32_t pad_;
} cuda_attn_seq;

enum {
    CUDA_ATTN_MAX_HEAD_DIM = 256,
    CUDA_ATTN_EINVAL = 100000  /* a host-checked argument is out of range */
};

/* 0, or CUDA_ATTN_EINVAL with a one-line reason in why (naming the field). */
int cuda_attn_dims_check(const cuda_attn_dims *d, char *why, size_t why_len);

/* Raises the dynamic shared memory limits of the kernels: once per device,
 * before any graph capture. 0 or a cudaError_t. */
int cuda_attn_init(void);

/* The split plan of a sequence with n rows in the pass and kv = pos + n keys
 * in view: keys per split (a multiple of 32; of 16 for a decode row in the
 * decode form) and the splits covering kv. */
typedef struct cuda_attn_plan_t {
    int n_splits;
    int split_len;
} cuda_attn_plan_t;
cuda_attn_plan_t cuda_attn_plan(const cuda_attn_dims *d, int n, int kv);

/* The decode form for rows of sequences with n == 1: on unless
 * CLOVER_CUDA_ATTN_DECODE=0 (read once); cuda_attn_decode_set overrides it
 * (tests, A/B). Set it before capturing a graph, not between a capture and
 * its replays: the captured kernels and plans are the form's at capture. */
void cuda_attn_decode_set(int on);
int cuda_attn_decode_on(void);
/* The few form for sequences of 2..max_rows rows (attention_few.cu): on for 2..64 rows unless CLOVER_CUDA_ATTN_FEW
 * is 0 (off) or N in 2..64 (2..N rows), read once; cuda_attn_few_set overrides it (0 off, 1 on for 2..64, N: 2..N,
 * negative: the environment again). Its rows differ from the tile form's in the last bits (summation order). The
 * same rule for graphs as the decode form's. cuda_attn_few_on: the rows it takes now (0: off). */
void cuda_attn_few_set(int max_rows);
int cuda_attn_few_on(void);
/* The split merge of passes of min_rows rows or more with a block of head_dim threads a (row, head) instead of
 * 1024 (attention_forward.cu: many rows, a few splits each: a stacked preview); the same bits. 0: never, negative:
 * the environment again (CLOVER_CUDA_ATTN_COMB_ROWS, default 64). */
void cuda_attn_comb_rows_set(int min_rows);

/* Bytes of device workspace a cuda_attn_forward needs for any pass of up to
 * n_rows rows in all (over every sequence), max_rows rows per sequence and
 * pos + n <= max_kv for every sequence: the split partials,
 * n_rows * n_head * S * (hd + 2) floats with S the most splits any form
 * may take (for the 35B-A3B min(128, ceil(max_kv / 32)) or min(66,
 * ceil(max_kv / 16)), the larger; about 2.1 MB per row at max_kv >= 4096),
 * 0 when max_kv <= 16. The same whether the decode and few forms are on or off.
 * So size it for the rows of a decode pass rather than for the longest
 * prompt chunk where memory is short (a chunk of R rows of one sequence
 * uses only ~2 splits per row, but the partials are strided for the most
 * any row may take). */
size_t cuda_attn_workspace_bytes(const cuda_attn_dims *d, int n_rows, int max_rows, int max_kv);

/* Step 1 for every sequence's rows. max_rows >= every seq's n. */
int cuda_attn_prepare(float *qg,                 // [n_rows][n_head][2*hd]: q normed + rotated in place
                      const float *k,            // [n_rows][n_head_kv][hd], k_proj output
                      const float *v,            // [n_rows][n_head_kv][hd], v_proj output
                      const float *q_norm,       // [hd], stored 1 + w
                      const float *k_norm,       // [hd], stored 1 + w
                      const float *inv_freq,     // [rot/2], as cpu_rope_inv_freq
                      const cuda_attn_seq *seqs, // [n_seq], device
                      int n_seq, int max_rows, const cuda_attn_dims *d, void *stream);

/* Step 2. n_rows = sum of the seqs' n (the extent of out / qg); max_rows >=
 * every seq's n; max_kv >= every seq's pos + n; workspace of
 * cuda_attn_workspace_bytes(d, n_rows, max_rows, max_kv). */
int cuda_attn_forward(float *out,                // [n_rows][n_head][hd], gated
                      const float *qg,           // [n_rows][n_head][2*hd], after cuda_attn_prepare
                      const cuda_attn_seq *seqs, // [n_seq], device
                      int n_seq, int n_rows, int max_rows, int max_kv, int causal, const cuda_attn_dims *d,
                      void *workspace, void *stream);

/* The text of a code these functions returned. */
const char *cuda_attn_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif
