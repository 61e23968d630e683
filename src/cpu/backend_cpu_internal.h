/*
 * backend_cpu_internal.h: the CPU backend's per-model object, its sessions
 * and the steps its passes are made of, shared by the backend_cpu*.c files
 * (private to them). The backend owns the weight views, the thread pool and
 * the scratch of a pass; a session owns only its state (KV caches, GDN rings
 * and states), so sessions are cheap and every pass of every session reuses
 * one set of buffers.
 *
 * A pass is a run of rows (commit chunks or preview blocks of one or more
 * sequences, at most max_rows in all) through the trunk: embeddings, then per layer the input norm, the
 * mixer (attention or GDN), the residual add, the post norm, the MoE and the
 * residual add, then the final norm and the head. Every buffer a pass touches
 * is sized at backend creation for max_rows rows (scratch) except the KV
 * caches, which grow on demand (doubling, up to max_context) together with
 * the attention scratch that depends on their length; a pass reserves what
 * it needs before it changes anything, so a failed reservation leaves the
 * session as it was.
 *
 * Modes: CPU_PASS_COMMIT is the causal trunk and advances every state;
 * CPU_PASS_PREVIEW (SPEC.md 2) reads the committed state only: attention sees
 * the committed keys plus the whole block (the block's K/V are written past
 * the committed end of the cache, which the committed length does not cover),
 * GDN layers run the block operator, the MoE may be restricted to the
 * block's coreset.
 */
#ifndef CLOVER_CPU_BACKEND_CPU_INTERNAL_H
#define CLOVER_CPU_BACKEND_CPU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/pick.h"
#include "base/threadpool.h"
#include "cpu/attention.h"
#include "cpu/gdn.h"
#include "cpu/gdn_block.h"
#include "cpu/moe.h"
#include "cpu/moe_hook.h"
#include "model/model.h"

typedef enum cpu_pass_mode { CPU_PASS_COMMIT = 0, CPU_PASS_PREVIEW = 1 } cpu_pass_mode;

/* One layer's weight views as the operators take them (the backend's). */
typedef struct cpu_layer_w {
    model_layer_kind kind;
    cpu_gdn_weights gdn_w;
    gdn_block_weights block_w;
    cpu_moe_weights moe_w;
} cpu_layer_w;

/* One layer's state (the session's). */
typedef struct cpu_layer {
    model_layer_kind kind;
    /* attention */
    float *k_cache; /* [kv_cap][n_head_kv][head_dim], keys after k_norm and RoPE */
    float *v_cache; /* [kv_cap][n_head_kv][head_dim] */
    size_t kv_cap;  /* rows allocated */
    /* GDN */
    float *ring;  /* [K-1][conv_dim], the last K-1 pre-conv rows, oldest first */
    float *state; /* [nv][dk][dv], value heads in the file's (tiled) order */
} cpu_layer;

/* Per-pass scratch, sized for max_rows rows (R). */
typedef struct cpu_scratch {
    float *h;   /* [R][n_embd] the residual stream */
    float *x;   /* [R][n_embd] a normed input (mixer, MoE, head) */
    float *y;   /* [R][n_embd] a block's output before the residual add */
    /* attention */
    float *qg;   /* [R][n_head][2*hd] q_proj output */
    float *k;    /* [R][n_head_kv][hd] */
    float *v;    /* [R][n_head_kv][hd] */
    float *q;    /* [R][n_head][hd] normed, rotated */
    float *gate; /* [R][n_head][hd] */
    float *att;  /* [R][n_head][hd] gated attention output */
    float *cs;   /* [threads][rot] cos | sin */
    /* GDN */
    float *mixed; /* [R][conv_dim] in_proj_qkv output */
    float *z;     /* [R][nv*dv] */
    float *gb;    /* [R][nv] ssm_beta output */
    float *ga;    /* [R][nv] ssm_alpha output */
    float *gout;  /* [R][nv*dv] gated-norm output */
    float *gdn;   /* cpu_gdn_mix / gdn_block scratch */
    /* MoE */
    void *moe;         /* cpu_moe_scratch_bytes */
    float *router;     /* [R][n_expert] router logits of a preview block */
    double *totals;    /* [n_expert] */
    int32_t *order;    /* [n_expert] */
    int32_t *core_idx; /* [R][n_expert_used] each preview row's top-k experts (cpu_moe_coreset_row) */
    double *core_ms;   /* [R][2] each preview row's softmax max and sum */
    uint32_t *core_m;  /* [R] each preview row's pick count */
    uint8_t *allowed;  /* [n_expert] the coreset of the current layer */
    /* a shared pass over several sequences (backend_cpu_pass.c) */
    uint32_t *group;   /* [R] each row's sequence */
    uint32_t *own;     /* [R] the rows of each row's sequence in the product at hand */
    size_t *head_rows; /* [R] rows of sc.h that go through the head */
    uint8_t *allowed_seq;         /* [R][n_expert] each sequence's coreset */
    const uint8_t **allowed_of;   /* [R] per sequence: its coreset or NULL */
    /* head and pick */
    float *logits;     /* [logit_rows][n_vocab]: one window of head rows (cpu_head_logits_shared) */
    uint32_t *counts;  /* [n_vocab] penalty counts of the sequence being picked (zero between picks) */
} cpu_scratch;

/* Rows of logits the scratch holds. A pass's head rows beyond it run in
 * windows (cpu_head_logits_shared), so max_rows (the prompt chunk) does not
 * size a [max_rows][n_vocab] buffer: 512-row chunks would need 508 MB of
 * logits for a 248k vocabulary, of which a prompt chunk uses one row. 64 is
 * also the tile kernel's activation block (gemm_avx2.c X_BLOCK), so a window
 * reads the head no more often than one 64-row product does. */
enum { CPU_LOGIT_ROWS = 64 };

/* The per-model backend: weight views, the pool and every pass's scratch,
 * shared by the sessions on it (one call at a time). */
struct backend {
    const clover_model *model;
    const model_hparams *hp;
    threadpool *pool;
    size_t n_threads;
    size_t max_rows, max_context;
    size_t logit_rows; /* rows of sc.logits: min(max_rows, head_window or CPU_LOGIT_ROWS) */
    uint32_t layer_lo, layer_hi; /* the layers this backend runs (backend_config's range) */
    bool can_preview; /* every GDN layer has its Clover tensors */
    bool has_attn;    /* the model has attention layers (KV caches, attention scratch) */

    cpu_layer_w *layers; /* [n_layer] */
    cpu_attn_dims attn_dims;
    cpu_gdn_dims gdn_dims;
    float *inv_freq; /* [n_rot/2] */

    void *arena; /* every fixed-size buffer of sc */
    cpu_scratch sc;
    float *attn_scratch; /* n_threads * cpu_attn_scratch_floats(attn_dims, attn_ctx) */
    size_t attn_ctx;
    host_pick_ctx pick;  /* the pick on the pool, over sc.logits (backend/pick.h) */
    cpu_moe_hook moe_hook; /* another MoE for every layer (moe_hook.h: CLOVER_SIM_RANKS); ctx NULL: none */
};

struct backend_session {
    backend *be;
    const model_hparams *hp;
    size_t n_past; /* committed length */
    uint64_t epoch; /* bumped by reset, import, restore: a checkpoint of another epoch is stale */
    cpu_layer *layers; /* [n_layer] */
    void *arena;       /* rings, states, preview diagnostics */
    /* the last preview, for preview_debug */
    bool has_preview;
    size_t preview_b;
    float *dbg_hidden;  /* [n_layer+1][b][n_embd] of the last preview; room for dbg_rows rows (grown by a preview) */
    size_t dbg_rows;
    uint8_t *dbg_kept;  /* [n_layer][n_expert] */
};

struct backend_checkpoint {
    backend_session *s;
    bool valid;
    size_t n_past;
    uint64_t epoch;
    float *gdn; /* every GDN layer's ring then state, in layer order */
};

/* backend_cpu.c / backend_cpu_session.c: the ops of the backend's and the session's life. */
int backend_cpu_probe(const clover_model *model, const backend_config *cfg, clover_error *err);
int backend_cpu_create(const clover_model *model, const backend_config *cfg, backend **out, clover_error *err);
void backend_cpu_destroy(backend *be);
int backend_cpu_session_create(backend *be, backend_session **out, clover_error *err);
void backend_cpu_session_free(backend_session *s);
size_t backend_cpu_session_length(const backend_session *s);
void backend_cpu_reset(backend_session *s);
/* Bytes of one GDN layer's ring and state (floats). */
size_t cpu_gdn_state_floats(const backend *be);

/* backend_cpu_session.c: KV rows for positions < need in every attention
 * layer of s, and the backend's attention scratch for them (grows;
 * max_context checked by the caller). 0 or CLOVER_E_NOMEM, and then the
 * committed state is unchanged. */
int cpu_session_reserve(backend_session *s, size_t need, clover_error *err);
/* Room in dbg_hidden for a preview of b rows (grown before the pass, so a failure changes nothing). */
int cpu_session_preview_room(backend_session *s, size_t b, clover_error *err);

/* backend_cpu_head.c */
/* -log softmax(logits)[target], float64 log-sum-exp of the float32 logits. */
float cpu_head_nll(const float *logits, size_t n_vocab, int32_t target);

/* backend_cpu_pass.c: one pass over the rows of several sequences (all
 * commits or all previews), with one read of each weight: the dense
 * projections, the MoE (router, routed and shared experts) run over every
 * row at once, each row with the kernel of its own sequence's row count
 * (matmul_group.h), the mixers per sequence on its state; so every row's
 * result is bit for bit that of cpu_pass_run over its sequence alone. The
 * rows of all sequences fit the scratch (sum of n <= max_rows); off is
 * filled with each sequence's first row in sc.h. */
typedef struct cpu_shared_seq {
    backend_session *s;
    const int32_t *ids;
    size_t n, pos;
    float ln_ratio;      /* preview */
    bool coreset;
    float top_p;
    float *hidden;       /* [n_layer+1][hidden_rows][n_embd] or NULL: the residual stream at rows row0.. */
    size_t hidden_rows, row0;
    uint8_t *kept;
    const float *in_h;   /* [n][n_embd] the rows entering layer_lo (layer_lo > 0) */
    float *out_h;        /* [n][n_embd] the rows leaving layer_hi - 1 (layer_hi < n_layer) */
    size_t off;          /* out */
} cpu_shared_seq;
void cpu_pass_run_shared(backend *be, cpu_shared_seq *q, size_t n_seqs, cpu_pass_mode mode, backend_pass_stats *st);
/* The final norm and the head over a pass's nh head rows (sc.head_rows of
 * sc.h; sc.own[i] the head-row count of row i's sequence, its kernel as
 * alone), window by window of logit_rows, one read of the head a window.
 * Sequence k owns head rows [at[k], at[k] + m[k]); for each window [g0, g1)
 * each(ctx, k, a, b, g0) gets the part [a, b) of k's rows inside it, whose
 * logits are rows a - g0.. of sc.logits. A row keeps its sequence's count
 * whatever window it falls in, so windows change no bit of its logits. */
typedef void (*cpu_head_part_fn)(void *ctx, size_t k, size_t a, size_t b, size_t g0);
void cpu_head_windows(backend *be, size_t nh, const size_t *at, const size_t *m, size_t n_seqs, cpu_head_part_fn each,
                      void *ctx, backend_pass_stats *stats);

/* backend_cpu_state.c: the state in backend.h's layout. */
size_t backend_cpu_state_bytes(const backend_session *s);
int backend_cpu_state_export(const backend_session *s, void *buf, size_t len, clover_error *err);
int backend_cpu_state_import(backend_session *s, const void *buf, size_t len, clover_error *err);

/* backend_cpu_checkpoint.c */
int backend_cpu_checkpoint_create(backend_session *s, backend_checkpoint **out, clover_error *err);
void backend_cpu_checkpoint_free(backend_checkpoint *c);
int backend_cpu_checkpoint_save(backend_session *s, backend_checkpoint *c, clover_error *err);
int backend_cpu_checkpoint_restore(backend_session *s, const backend_checkpoint *c, clover_error *err);
int backend_cpu_truncate(backend_session *s, size_t n, clover_error *err);

/* backend_cpu_commit.c, backend_cpu_preview.c: the batched passes. */
int backend_cpu_commit(backend *be, backend_commit_seq *seqs, size_t n_seqs, backend_pass_stats *stats);
int backend_cpu_preview(backend *be, backend_preview_seq *seqs, size_t n_seqs, backend_pass_stats *stats);
int backend_cpu_resolve(backend *be, backend_resolve_seq *seqs, size_t n_seqs, const volatile int *cancel,
                        backend_pass_stats *stats);
int backend_cpu_preview_debug(backend_session *s, float *hidden, uint8_t *kept, clover_error *err);

/* Shared argument checks (backend_cpu_commit.c). */
/* Adds to stats what the pool did since `before` (threadpool_get_counts), if stats. */
static inline void cpu_pool_stats_add(const backend *be, const threadpool_counts *before, backend_pass_stats *stats) {
    if (!stats) return;
    threadpool_counts now;
    threadpool_get_counts(be->pool, &now);
    stats->pool_runs += now.runs - before->runs;
    stats->pool_woke += now.woke - before->woke;
    stats->pool_caller_sleeps += now.caller_sleeps - before->caller_sleeps;
}

int cpu_check_ids(const char *what, const int32_t *ids, size_t n, uint32_t n_vocab, clover_error *err);
int cpu_check_room(const backend_session *s, const char *what, size_t n, clover_error *err);

#endif
