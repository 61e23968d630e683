/*
 * backend.h: contract v2, which every backend implements (CPU now, CUDA
 * next). Plain arrays in and out, so a device backend can keep everything
 * resident, fuse, capture graphs, and send back a few bytes per row.
 *
 * Objects
 *   backend          one model on one device: its weights prepared once
 *                    (uploaded, repacked), the thread pool or streams, and
 *                    the per-pass scratch, shared by every session on it.
 *                    probe() says beforehand whether a backend can take a
 *                    model, and if not why (the engine then falls back).
 *   backend_session  one sequence's state on that backend: the KV rows of
 *                    every attention layer, the conv ring and state S of
 *                    every GDN layer, and the committed length. Sessions
 *                    hold no scratch and no threads; they cost their state.
 *   backend_checkpoint  a copy of one session's state at a committed length,
 *                    kept on the device (GDN rings and states only: the KV
 *                    rows below the length are never rewritten by a later
 *                    commit, so restoring truncates them instead of copying).
 *
 * A backend is used by one thread at a time; concurrency comes from
 * batching: one call passes N sequences. Sessions are independent: a
 * session appears at most once in a call.
 *
 * Passes (whole passes, never single operators)
 *  commit   each sequence's rows are causal rows at its session's end; every
 *           state advances. Optional outputs per sequence: the last row's
 *           logits (autoregressive decoding), every row's logits, SPEC 5's
 *           NLL of targets, the residual stream (diagnostics), and the
 *           causal pick of rows: per row the next token (greedy, or sampled
 *           with the request's draws) with its confidence and log-probability,
 *           for autoregressive decoding without logits leaving the device and
 *           for verifying a drafted block. Rows of one sequence are split into
 *           passes of at most max_rows at multiples of max_rows from the
 *           sequence's first row, the same split as alone.
 *  preview  a read-only denoising pass over each sequence's block of b rows
 *           at its session's end (SPEC.md 2): nothing in the session changes.
 *           Row r predicts the token AT row r. The backend picks (below) for
 *           the rows still masked; full logits only when asked.
 *  resolve  (optional; NULL: the engine loops over preview) resolves a whole
 *           block with several passes inside the backend: LowConfidence
 *           (SPEC.md 3: every pending row above the threshold is fixed, else
 *           the most confident one, ties to the lowest row), the draws taken
 *           from the request's SplitMix64 stream in ascending row order per
 *           pass, the cancel flag checked before each pass; it returns a
 *           record of every pass (each row's guess and confidence, the pass
 *           that fixed it) for the live view and the statistics. Nothing is
 *           committed: the engine commits the block.
 *
 * Pick on the backend (SPEC.md 3.1, 3.2), per picked row of logits l:
 *   1. the forbidden ids (the mask id, the request's suppressed ids) -> -inf;
 *   2. penalties (preview only; NULL: none), float32 in the seed's order:
 *      for every counted id t: l -= count * frequency; l -= presence;
 *      repetition != 1: l = l < 0 ? l * rep : l / rep; then the length ramp
 *      added to every stop id, the </think> ramp to think_end_id while
 *      </think> is open (think_end_id >= 0, not counted, and not among the
 *      block's fixed rows), both ramps at the row's 1-based response
 *      position response_len + r + 1 (backend/penalties.c is the oracle);
 *   3. greedy below T = 1e-6 (the first maximum), else temperature, top-k,
 *      top-p and the row's draw u (backend/sampler.c is the oracle, bit for
 *      bit); the confidence is the T = 1 softmax probability of the picked
 *      id over the row after steps 1-2; logprob = its log-softmax over that
 *      row (float64, rounded once to float32); the top-N are the N most
 *      probable ids of that same distribution, probability descending,
 *      ties to the lower id (fewer finite ids: id -1, logprob -inf).
 *      backend/pick.c is the host implementation and the device's oracle.
 *   A row with no finite logit left fails its sequence (CLOVER_E_INVALID).
 *
 * Failures are per sequence: every sequence gets rc and err. A failing
 * sequence (a bad id, KV growth out of memory, a full context, a pick with
 * nothing left) leaves its session exactly as before the call, and the
 * others' results and states are exactly as if it had not been in the call.
 * The call returns CLOVER_OK when every sequence succeeded, else the rc of
 * the first one that failed.
 *
 * Batch invariance: a row's results (logits, picks, states) are bit-for-bit
 * the same whatever else is in the call (tests/unit/test_batch.c). CPU:
 * the rows of the sequences of a call share passes (as many as fit
 * max_rows; each sequence split into chunks as alone), and in a pass the
 * dense projections, the router, the shared expert, every routed expert
 * and the head read their weights once for the rows of all sequences
 * (backend_cpu_pass.c). With AVX2 against Q8_0 / K-quant weights a
 * row's result does not depend on the row count of its product (the 8-bit
 * integer path at any count, the multi-row kernel bit-identical to the
 * one-row dot: test_gemm); against float weights (and without AVX2) it
 * does (1-2 rows: the fused dot; 3+: the tiled f32 kernel), so each row
 * takes the kernel of its own
 * sequence's row count in that product (for an expert: its sequence's rows
 * routed there; for the head: its sequence's head rows), never the
 * pass's (quant/matmul_group.h); attention and the GDN mixer run per
 * sequence (their state is), the MoE routing is per row, the coreset per
 * block. The head runs only for the rows whose logits are used: a
 * preview's rows still masked (every row when raw logits are asked for),
 * a commit's picked rows, last row, or every row for NLL / all_logits.
 * A device backend states its own guarantee here. CUDA: a call's decode
 * rows share one pass and its previews' blocks share passes
 * (cuda/backend_cuda_stack*.c), each product on the kernel the row's
 * sequence takes alone (the integer path: the same bits at any row count);
 * attention, GDN and the coreset per sequence; the picks of every row of
 * a pass in one grouped launch, each row by its own descriptor with the
 * bits of its sequence's own pick (CLOVER_CUDA_PICK_EACH: per sequence);
 * decode rows' logits stay on the device (last_logits)
 * (tests/unit/test_cuda_batch.c, on a device).
 *
 * State layout (export/import; little-endian f32, in this order): u64
 * committed length n; per layer in order: attention: K rows
 * [n][n_head_kv][head_dim] then V rows [n][n_head_kv][head_dim]; GDN: conv
 * ring [K-1][conv_dim] (oldest first) then S [n_v_heads][dk][dv] (value
 * heads in the file's order). Any backend imports any backend's export.
 *
 * Truncation: truncate(s, n) drops committed rows past n. Attention layers
 * just forget KV rows; GDN states cannot be rewound, so on a model with GDN
 * layers truncate is only valid to the length of a checkpoint being
 * restored (checkpoint_restore does it); otherwise CLOVER_E_UNSUPPORTED.
 * To undo a partly accepted drafted block: checkpoint before committing the
 * block, restore, commit the accepted prefix.
 */
#ifndef CLOVER_BACKEND_H
#define CLOVER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/expert_host.h"
#include "clover.h"

typedef struct backend backend;
typedef struct backend_session backend_session;
typedef struct backend_checkpoint backend_checkpoint;
typedef struct backend_state_copy backend_state_copy;

/* Top log-probabilities per row at most. */
#define BACKEND_MAX_TOP 20

typedef struct backend_config {
    size_t n_threads;   /* CPU threads; 0: every online CPU */
    size_t max_rows;    /* rows of one pass (a commit chunk, the largest block); scratch is sized for it; 0: 64 */
    size_t max_context; /* per session; 0: the model's training context (KV grows on demand up to it) */
    bool plain;         /* CPU: a reference (clover check): its opener installs no diagnostic MoE (CLOVER_SIM_RANKS) */
    size_t head_window; /* CPU: head rows per window of logits scratch; 0: 64 (tests vary it: a window changes no bit) */
    /* The layers this backend runs, [layer_begin, layer_end) (layer_end 0:
     * to the last): a part of a split pass (offload/split.h). A backend
     * starting past layer 0 takes each row's residual stream entering
     * layer_begin (in_hidden) instead of embedding the ids; one ending
     * before the last layer hands on the residual after layer_end - 1
     * (out_hidden) and runs no head (no logits, NLL or picks). Its state,
     * exported and imported, holds only its layers (u64 n, then those
     * layers in order). A backend that cannot run a range says so at probe. */
    uint32_t layer_begin, layer_end;
    /* CUDA: the device bytes the model's weights, the routed experts' pool and the sessions may take
     * (--gpu-mem); 0: no cap, every weight resident. The routed experts then page through a pool of slots
     * (src/cuda/backend_cuda_experts.c). */
    uint64_t gpu_mem;
    /* CUDA with gpu_mem: makes the hook through which the host CPU computes the experts a layer misses
     * (backend/expert_host.h; used under CLOVER_GPU_MEM_CPU=auto|all); NULL: the misses are always copied. Set
     * by the layer that opens the backend (the engine: offload/expert_host_cpu.c), as cuda/ cannot call cpu/. */
    expert_host_open_fn expert_host_open;
} backend_config;

/* Per-call timing by operator family, seconds (accumulated by the backend
 * over the whole call, every sequence). */
typedef struct backend_pass_stats {
    double gdn_s, attn_s, moe_s, head_s, pick_s;
    /* Of those, the calling thread's seconds inside the matrix products
     * (matmul_thread_seconds; the CPU backend, 0 elsewhere): what is left is
     * the mixers' own work, routing, norms and the pool's waits between runs. */
    double gdn_mm_s, attn_mm_s, moe_mm_s, head_mm_s;
    /* Model passes the call ran (added to): one for a stacked pass however
     * many sequences it carries, one per chunk of a sequence run alone; so
     * sequences per pass shows how much a call's work was stacked (the
     * server's /metrics). */
    uint64_t passes;
    /* Preview only: experts kept by the coreset, summed over the MoE layers,
     * and the number of MoE layers counted (mean = kept / layers). */
    uint64_t coreset_kept, coreset_layers;
    /* --gpu-mem's expert cache (CUDA): uses found on the device, uses copied there, bytes and device seconds */
    uint64_t expert_hits, expert_misses, expert_copy_bytes;
    double expert_copy_s;
    uint64_t expert_host; /* uses the CPU computed instead (CLOVER_GPU_MEM_CPU), and its seconds in them */
    double expert_host_s;
    /* The CPU backend's thread pool during the call (threadpool_counts):
     * runs handed to the workers, runs that had to wake sleeping workers,
     * waits in which the caller slept. */
    uint64_t pool_runs, pool_woke, pool_caller_sleeps;
} backend_pass_stats;

/* How one request picks (SPEC.md 3.1 and 3.2); all arrays are the caller's
 * and only read during the call. */
typedef struct backend_penalties {
    clover_penalties p;         /* the request's values */
    int32_t think_end_id;       /* -1: none */
    const int32_t *count_ids;   /* [n_counts] committed response tokens, distinct ids */
    const uint32_t *counts;     /* [n_counts] their counts (> 0) */
    size_t n_counts;
    size_t response_len;        /* committed response tokens: row r sits at response_len + r + 1 */
    const int32_t *stop_ids;    /* [n_stop_ids] the length ramp's ids (< n_vocab) */
    size_t n_stop_ids;
} backend_penalties;

typedef struct backend_pick {
    float temperature;              /* < 1e-6: greedy */
    int32_t top_k;                  /* <= 0: off */
    float top_p;                    /* outside (0, 1): off */
    const int32_t *forbid;          /* [n_forbid] ids set to -inf (the mask id, suppressed ids) */
    size_t n_forbid;
    const backend_penalties *pen;   /* NULL: none (autoregressive; commit ignores it) */
    size_t n_top;                   /* top log-probabilities per picked row, 0..BACKEND_MAX_TOP */
} backend_pick;

/* Per-row pick results; rows not picked are left untouched. Any pointer
 * but id/conf may be NULL. */
typedef struct backend_pick_out {
    int32_t *id;         /* [rows] */
    float *conf;         /* [rows] T = 1 probability of id */
    float *logprob;      /* [rows] log(conf) */
    int32_t *top_id;     /* [rows][n_top] */
    float *top_logprob;  /* [rows][n_top] */
} backend_pick_out;

typedef struct backend_commit_seq {
    backend_session *s;
    const int32_t *ids;      /* [n] */
    size_t n;
    /* outputs, each NULL when not wanted */
    float *last_logits;      /* [n_vocab] */
    float *all_logits;       /* [n][n_vocab] */
    const int32_t *targets;  /* [n]: with nll, score row r against targets[r] */
    float *nll;              /* [n] -log softmax(logits_r)[targets[r]] */
    float *hidden;           /* [n_layer+1][n][n_embd] residual stream (row 0: embeddings,
                                row l+1: after layer l): locates a mismatch */
    const float *in_hidden;  /* [n][n_embd] a layer range starting past 0: the rows entering it */
    float *out_hidden;       /* [n][n_embd] a layer range ending before the last: the rows leaving it */
    /* causal picks of rows [n - n_pick, n): out row i is row n - n_pick + i;
     * pick->pen is ignored (no penalties on the causal path) */
    const backend_pick *pick; /* NULL: none */
    size_t n_pick;
    const float *u;          /* [n_pick] draws (rng_uniform) when sampling; NULL when greedy */
    backend_pick_out pick_out;
    /* outcome */
    int rc;
    clover_error err;
} backend_commit_seq;

typedef struct backend_preview_opts {
    uint32_t record_block_size; /* B of the record: the history slot's ln(b/B) */
    bool coreset;               /* restrict the MoE to the block's expert coreset */
    float coreset_top_p;
} backend_preview_opts;

typedef struct backend_preview_seq {
    backend_session *s;
    const int32_t *block;     /* [b] the mask id on rows still masked */
    size_t b;
    backend_preview_opts opts;
    const uint8_t *pending;   /* [b] 1: pick this row; NULL: pick none */
    const backend_pick *pick; /* required when pending is set */
    const float *u;           /* [b] the draws of pending rows when sampling (rows in ascending order
                                 took them); NULL when greedy */
    backend_pick_out pick_out; /* [b] rows */
    float *logits;            /* [b][n_vocab] the raw logits (before forbidding and penalties), or NULL */
    const float *in_hidden;   /* [b][n_embd] as commit's (a layer range) */
    float *out_hidden;        /* [b][n_embd] */
    int rc;
    clover_error err;
} backend_preview_seq;

/* One block resolved inside the backend. The record has one entry per pass
 * and row, pass-major ([B][b], only the first `passes` are written). */
typedef struct backend_resolve_seq {
    backend_session *s;
    int32_t *block;           /* [b] in: the mask id on every row; out: the resolved block */
    float *conf;              /* [b] out: the confidence each row was fixed with */
    size_t b;
    backend_preview_opts opts;
    const backend_pick *pick;
    float threshold;          /* [0, 1] */
    uint64_t *rng;            /* the request's SplitMix64 state, advanced by the draws */
    int32_t *rec_guess;       /* [b][b] per pass: each row's pick (fixed rows: their id) */
    float *rec_conf;          /* [b][b] its confidence */
    uint8_t *fixed_at;        /* [b] out: the 1-based pass that fixed each row (0: not fixed) */
    size_t passes;            /* out */
    const volatile int *cancel; /* this sequence's own flag (may be NULL), checked with the call's */
    bool cancelled;           /* out: a flag stopped it before a pass (the block is partial) */
    int rc;
    clover_error err;
} backend_resolve_seq;

typedef struct backend_ops {
    const char *name;
    /* Rows per pass a session takes when its parameters give none (0: 64).
     * The CPU's is 512: a prompt chunk that long reads each routed expert
     * once for ~16 rows instead of ~2, the integer GEMM instead of the
     * per-row dot (a 512-token prompt on the 35B-A3B synthetic file, dev VM:
     * 16.2 tok/s against 13.3 at 64, bench/RESULTS.md), and its logits
     * scratch stays 64 rows. Device backends keep 64. */
    size_t default_rows;
    /* Whether create() would take this model with cfg; CLOVER_OK or the
     * reason (CLOVER_E_UNSUPPORTED: a tensor type, a geometry, no device). */
    int (*probe)(const clover_model *model, const backend_config *cfg, clover_error *err);
    int (*create)(const clover_model *model, const backend_config *cfg, backend **out, clover_error *err);
    void (*destroy)(backend *be); /* after every session on it is freed */
    /* The rows of one pass (cfg's max_rows after defaults). */
    size_t (*max_rows)(const backend *be);

    int (*session_create)(backend *be, backend_session **out, clover_error *err);
    void (*session_free)(backend_session *s);
    size_t (*session_length)(const backend_session *s);
    void (*reset)(backend_session *s); /* back to an empty sequence (keeps the allocations) */

    int (*commit)(backend *be, backend_commit_seq *seqs, size_t n_seqs, backend_pass_stats *stats);
    int (*preview)(backend *be, backend_preview_seq *seqs, size_t n_seqs, backend_pass_stats *stats);
    /* Optional (NULL: the engine resolves with preview). cancel may be NULL. */
    int (*resolve)(backend *be, backend_resolve_seq *seqs, size_t n_seqs, const volatile int *cancel,
                   backend_pass_stats *stats);
    /* Optional diagnostics of the session's last preview (NULL when
     * unsupported): hidden [n_layer+1][b][n_embd] like commit's, kept
     * [n_layer][n_expert] coreset flags. Either pointer may be NULL. */
    int (*preview_debug)(backend_session *s, float *hidden, uint8_t *kept, clover_error *err);
    /* Optional (NULL: none): the last committed row's logits [n_vocab] when
     * the backend kept them (a device keeps a one-row commit's row on the
     * device, so a decode step need not bring its logits back, yet a later
     * prompt equal to the committed ids can still decode from them): valid
     * until the session's next pass, reset, import or restore; otherwise
     * CLOVER_E_INVALID (the caller recommits). out NULL: CLOVER_OK when the
     * backend keeps them at all for this session (CLOVER_E_UNSUPPORTED not). */
    int (*last_logits)(backend_session *s, float *out, clover_error *err);

    size_t (*state_bytes)(const backend_session *s);
    int (*state_export)(const backend_session *s, void *buf, size_t len, clover_error *err);
    int (*state_import)(backend_session *s, const void *buf, size_t len, clover_error *err);
    /* Optional (NULL, or an error: the caller exports instead): the state as
     * state_export / state_import would move it, kept by the backend where
     * the session's state lives (a device's memory: no host transfer and no
     * wait between passes; the engine's prompt snapshot). save makes *copy
     * when it is NULL and reuses it (grown as needed) otherwise; a failed
     * save leaves *copy freeable and the session unchanged; load is
     * state_import of that state (a copy outlives later commits, resets and
     * imports of the session it was taken from, and loads into it only). */
    int (*state_save)(const backend_session *s, backend_state_copy **copy, clover_error *err);
    int (*state_load)(backend_session *s, const backend_state_copy *copy, clover_error *err);
    void (*state_copy_free)(backend_state_copy *copy);

    /* A checkpoint belongs to one session; save overwrites it. Restore is
     * valid while the session has only been committed to since the save
     * (no reset, import, or restore of an older checkpoint in between);
     * otherwise CLOVER_E_INVALID and the session is unchanged. */
    int (*checkpoint_create)(backend_session *s, backend_checkpoint **out, clover_error *err);
    void (*checkpoint_free)(backend_checkpoint *c);
    int (*checkpoint_save)(backend_session *s, backend_checkpoint *c, clover_error *err);
    int (*checkpoint_restore)(backend_session *s, const backend_checkpoint *c, clover_error *err);
    int (*truncate)(backend_session *s, size_t n, clover_error *err);

    /* Optional (NULL: none): a few lines about the devices for `clover info
     * --device` and what model needs there (clover_device_report's text). */
    size_t (*report)(const clover_model *model, size_t max_context, char *buf, size_t n);
} backend_ops;

/* Single-sequence conveniences over the batched calls (backend.c): the
 * sequence's rc and message come back as the call's. */
int backend_commit1(const backend_ops *ops, backend *be, backend_commit_seq *seq, backend_pass_stats *stats,
                    clover_error *err);
int backend_preview1(const backend_ops *ops, backend *be, backend_preview_seq *seq, backend_pass_stats *stats,
                     clover_error *err);

/* resolve over ops->preview (backend/resolve.c): the passes of all the
 * call's blocks in batched previews; what the host backends offer. */
int backend_resolve_by_preview(const backend_ops *ops, backend *be, backend_resolve_seq *seqs, size_t n_seqs,
                               const volatile int *cancel, backend_pass_stats *stats);

/* The CPU backend (src/cpu/backend_cpu.c). */
extern const backend_ops backend_cpu;
#ifdef CLOVER_HAVE_CUDA
/* The CUDA backend (src/cuda/backend_cuda.c), in builds that have it. Pick
 * one through backend/registry.h, which resolves --device. */
extern const backend_ops backend_cuda;
#endif

#endif
