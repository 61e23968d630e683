/*
 * backend.h: the contract every backend implements (CPU now, CUDA later).
 *
 * Whole passes, not single operators, so a device backend can fuse, capture
 * graphs and keep everything resident; the engine (src/engine/) never touches
 * a tensor. A backend_session is one sequence's state on that backend: the
 * KV rows of every attention layer, the conv ring and state S of every GDN
 * layer, and the committed length. The engine owns the committed token ids
 * (for prefix reuse) and everything about generation.
 *
 *  commit   causal rows at the session's end; every state advances. With
 *           out->targets/nll it is SPEC 5's scoring pass (row r's logits
 *           score targets[r]), with out->last_logits the logits of the last
 *           row (autoregressive decoding), with out->all_logits every row's.
 *  preview  a read-only denoising pass over a block of b rows at the
 *           session's end (SPEC.md 2): nothing in the session changes.
 *           Logits are [b][n_vocab]; row r predicts the token AT row r.
 *  reset    back to an empty sequence (keeps the allocations).
 *  state_export / state_import  the session's whole state as host bytes in
 *           the backend-independent layout below: tests, the device-vs-CPU
 *           check, and falling back to the CPU mid-request.
 *
 * State layout (little-endian f32, in this order): u64 committed length n;
 * per layer in order: attention: K rows [n][n_head_kv][head_dim] then
 * V rows [n][n_head_kv][head_dim]; GDN: conv ring [K-1][conv_dim] (oldest
 * first) then S [n_v_heads][dk][dv] (value heads in the file's order).
 *
 * Scratch is sized at session creation for max_rows rows per pass; a commit
 * of more rows is split into chunks of max_rows by the backend itself.
 */
#ifndef CLOVER_BACKEND_H
#define CLOVER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clover.h"

typedef struct backend_session backend_session;

typedef struct backend_config {
    size_t n_threads;    /* 0: every online CPU */
    size_t max_rows;     /* rows per pass (commit chunk and largest preview block); 0: 64 */
    size_t max_context;  /* 0: the model's training context; the KV cache grows on demand up to this */
} backend_config;

/* Per-pass timing by operator family, seconds (accumulated by the backend). */
typedef struct backend_pass_stats {
    double gdn_s, attn_s, moe_s, head_s;
    /* Preview only: experts kept by the coreset, summed over the MoE layers,
     * and the number of MoE layers counted (mean = kept / layers). */
    uint64_t coreset_kept, coreset_layers;
} backend_pass_stats;

typedef struct backend_commit_out {
    float *last_logits;      /* [n_vocab] or NULL */
    float *all_logits;       /* [n][n_vocab] or NULL */
    const int32_t *targets;  /* [n] or NULL: with nll, score row r against targets[r] */
    float *nll;              /* [n] -log softmax(logits_r)[targets[r]], or NULL */
    float *hidden;           /* [n_layer+1][n][n_embd] residual stream (row 0: embeddings,
                                row l+1: after layer l), or NULL: locates a mismatch */
} backend_commit_out;

typedef struct backend_preview_opts {
    uint32_t record_block_size; /* B of the record: the history slot's ln(b/B) */
    bool coreset;               /* restrict the MoE to the block's expert coreset */
    float coreset_top_p;
} backend_preview_opts;

typedef struct backend_ops {
    const char *name;
    int (*session_create)(const clover_model *model, const backend_config *cfg, backend_session **out,
                          clover_error *err);
    void (*session_free)(backend_session *s);
    size_t (*session_length)(const backend_session *s);
    int (*commit)(backend_session *s, const int32_t *ids, size_t n, const backend_commit_out *out,
                  backend_pass_stats *stats, clover_error *err);
    int (*preview)(backend_session *s, const int32_t *block, size_t b, const backend_preview_opts *opts,
                   float *logits, backend_pass_stats *stats, clover_error *err);
    /* Optional diagnostics of the last preview (NULL when unsupported):
     * hidden [n_layer+1][b][n_embd] like commit's, kept [n_moe_layers][n_expert]
     * coreset flags. Either pointer may be NULL. */
    int (*preview_debug)(backend_session *s, float *hidden, uint8_t *kept, clover_error *err);
    void (*reset)(backend_session *s);
    size_t (*state_bytes)(const backend_session *s);
    int (*state_export)(const backend_session *s, void *buf, size_t len, clover_error *err);
    int (*state_import)(backend_session *s, const void *buf, size_t len, clover_error *err);
} backend_ops;

/* The CPU backend (src/cpu/backend_cpu.c). */
extern const backend_ops backend_cpu;

#endif
