/*
 * backend_cuda_internal.h: the CUDA backend's two objects, shared by the
 * backend_cuda*.c files (private to them).
 *
 *  cuda_model   one per (model, device): the file's whole tensor data
 *               section copied to the device once, in the file's types, and
 *               shared by every session of the model (reference-counted; the
 *               last session gives it back). A weight's device address is
 *               its offset in the data section from the device base, so tied
 *               tensors (output = token_embd) are one copy.
 *  backend_session  one sequence: its KV caches and GDN rings/states (sized
 *               for max_context when it is created: that is the admission
 *               rule, see backend_cuda_session.c), the per-pass scratch for
 *               max_rows rows, the device descriptors the attention and GDN
 *               kernels read (cuda_attention.h, cuda_gdn.h), a stream, and
 *               the captured graph of a one-row decode step.
 *  the stacked executor  a backend_session with `stack` set, one per backend
 *               (backend_cuda.c): no KV and no GDN state of its own, scratch
 *               for 512 rows and descriptor slots for 64 sequences a layer;
 *               it runs a call's decode rows (backend_cuda_stack.c) and its
 *               previews' blocks (backend_cuda_stack_preview.c) as stacked
 *               passes over the member sessions' caches and states.
 *
 * A pass only enqueues work on the session's stream: no allocation, no sync
 * and no host read until its results are copied back at the end; the values
 * that change between passes (ids, positions, rows) go through pinned host
 * buffers copied by the pass itself, so the decode step replays as one CUDA
 * graph (backend_cuda_pass.c).
 */
#ifndef CLOVER_CUDA_BACKEND_CUDA_INTERNAL_H
#define CLOVER_CUDA_BACKEND_CUDA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/pick.h"
#include "cuda/cuda_attention.h"
#include "cuda/cuda_gdn.h"
#include "cuda/cuda_pick_rows.h"
#include "model/model.h"

/* A range of the data section copied to the device under --gpu-mem: offsets [lo, hi) from host_base, at
 * dev_base + dev. */
typedef struct cuda_span {
    size_t lo, hi, dev;
} cuda_span;

typedef struct cuda_experts cuda_experts;

typedef struct cuda_model {
    const clover_model *model;
    int device;
    int refs;
    const char *host_base; /* the start of the copied bytes in the mapping (the data section, or a window of it) */
    char *dev_base;        /* its device copy */
    size_t bytes;
    uint32_t n_run;        /* the layers [0, n_run) whose weights it holds: n_layer for the whole model; fewer
                            * for the front of a split (CLOVER_CUDA_LAYER_RANGE): then only the window of the
                            * section from the first to the last byte of token_embd and those layers' tensors */
    /* --gpu-mem (issue 31): 0, or the device bytes this model's weights, its expert pool and its sessions may
     * take; then only the dense tensors are copied (spans, back to back: bytes is their sum) and the routed
     * experts go through the pool (backend_cuda_experts.c), made with the first session */
    uint64_t gpu_mem;
    cuda_span *spans; /* [n_spans], ascending lo; none without --gpu-mem (a weight is then at base + offset) */
    size_t n_spans;
    cuda_experts *ex;
    uint64_t session_bytes; /* --gpu-mem: device bytes the live sessions hold (KV, state, scratch) */
    struct cuda_model *next;
} cuda_model;

/* backend_cuda_model.c: the model's device copy, uploaded on first use (a
 * progress bar on a terminal for 64 MiB or more), or an error saying why it
 * does not fit. Every weight the passes use is checked here first. */
int cuda_model_acquire(const clover_model *m, uint32_t n_run, uint64_t gpu_mem, cuda_model **out, clover_error *err);
void cuda_model_release(cuda_model *cm);
/* The device address of a bound weight (NULL for an absent optional one). */
const void *cuda_model_weight(const cuda_model *cm, const model_weight *w);
/* Bytes of the model's weights on the device (the data section). */
size_t cuda_model_bytes(const clover_model *m);
/* Bytes of every tensor but the routed experts (what --gpu-mem copies to the device), 256-aligned ranges. */
size_t cuda_model_dense_bytes(const clover_model *m);
/* Bytes a device copy for layers [0, n_run) holds (the window; the section when n_run is n_layer). */
size_t cuda_model_range_bytes(const clover_model *m, uint32_t n_run);
/* The layer range a configuration asks of this backend: layer_end (n_layer when 0), or 0 when the range is
 * one it cannot run, with the reason in err (a range needs CLOVER_CUDA_LAYER_RANGE=1 and must start at 0). */
uint32_t cuda_config_layers(const clover_model *m, const backend_config *cfg, clover_error *err);
/* Per-token KV bytes and the fixed GDN state bytes of one session. */
size_t cuda_session_kv_bytes_per_token(const model_hparams *hp, const clover_model *m);
size_t cuda_session_fixed_state_bytes(const model_hparams *hp, const clover_model *m);

/* One layer's state and its descriptor slot. */
typedef struct cuda_layer {
    model_layer_kind kind;
    float *k_cache, *v_cache; /* [max_context][nkv][hd] */
    float *ring;              /* [K-1][conv_dim] */
    float *state;             /* [nv][dk][dv] */
    cuda_gdn_weights gw;      /* device pointers */
    int slot;                 /* index into the attention or GDN descriptor arrays */
} cuda_layer;

/* Device scratch for R = max_rows rows. */
typedef struct cuda_scratch {
    int32_t *ids;     /* [R] */
    int32_t *targets; /* [R] */
    float *h, *x, *y; /* [R][H] */
    float *qg;        /* [R][nh][2hd] */
    float *k, *v;     /* [R][nkv][hd] */
    float *att;       /* [R][nh][hd] */
    float *mixed;     /* [R][conv_dim] */
    float *z, *gout;  /* [R][nv*dv] */
    float *ga, *gb;   /* [R][nv] */
    float *rlog;      /* [R][E] router logits */
    int32_t *ridx;    /* [R][k] */
    int32_t *rslot;   /* [R][k] --gpu-mem: the pool slot of each ridx (only then carved) */
    float *rw;        /* [R][k] */
    float *ge, *ue;   /* [R*k][F] */
    float *ye;        /* [R*k][H] */
    float *gs, *us;   /* [R][Fs] */
    float *ys;        /* [R][H] */
    float *sg;        /* [R] */
    float *logits;    /* [R][V] */
    float *nll;       /* [R] */
    float *inv_freq;  /* [rot/2] */
    /* preview and the device pick */
    float *xh;           /* [R][H] the head's gathered rows */
    float *blk_work;     /* [R][conv_dim] the GDN block operator's conv output */
    void *cs_work;       /* cuda_moe_coreset scratch */
    uint8_t *kept;       /* [n_layer][E] the last preview's coreset flags */
    uint32_t *kept_count; /* [1] kept experts summed over the layers */
    uint32_t *route_ctr;  /* [1] the fused router's block counter (cuda_moe_router.h): 0 between launches */
    uint8_t *used;       /* [n_layer][E] experts routed to, marked when count_experts (benchmarks' floors) */
    float *plog;         /* [R][V] picked rows, forbidden and penalised */
    int32_t *pk_rows;    /* [2R] head rows, then the picked rows' index into logits */
    double *pk_u;        /* [R] draws */
    int32_t *pk_id;      /* [R] */
    float *pk_conf;      /* [R] */
    float *pk_ramp;      /* [2][R] length and </think> ramps per picked row */
    int32_t *pk_forbid;  /* [V] */
    int32_t *pk_cids;    /* [V] counted ids */
    uint32_t *pk_counts; /* [V] */
    int32_t *pk_stop;    /* [V] stop ids */
    struct cuda_pick_row *pk_desc;    /* [R] grouped picks: each picked row's descriptor (cuda_pick_rows.h) */
    struct cuda_pick_params *pk_par;  /* [R] and its pick parameters */
    void *mm_work;    /* cuda_matmul_decode scratch */
    void *mm_work2;   /* the same for the shared expert's products on the side stream (backend_session.side) */
    void *moe_work;   /* cuda_moe_* scratch */
    void *attn_work;  /* cuda_attn_forward workspace */
    void *gdn_work;   /* cuda_gdn_mix workspace */
    size_t mm_work_bytes, moe_work_bytes;
} cuda_scratch;

/* A captured preview trunk (backend_cuda_preview.c): one per block shape. */
typedef struct cuda_preview_graph {
    void *exec;
    size_t b;
    bool coreset;
    float ln_ratio, top_p;
    uint64_t used; /* the clock at its last replay (the least recent is replaced) */
} cuda_preview_graph;
enum { CUDA_PREVIEW_GRAPHS = 4 };

/* --gpu-mem: what a layer's grouped expert products read: part p (gate, up, down) of slot i at
 * base + off[p] + i * stride. */
typedef struct cuda_expert_view {
    const char *base;
    size_t stride, n_slots;
    size_t off[3];
} cuda_expert_view;

struct backend_session {
    const clover_model *model;
    const model_hparams *hp;
    cuda_model *cm;
    void *stream;
    void *side;                 /* the shared expert's stream beside the routed experts (NULL: on stream) */
    void *side_ev[2];           /* fork (stream -> side) and join (side -> stream) of a MoE layer */
    bool side_open;             /* a MoE layer forked the side stream and has not joined it yet */
    bool exact_rows;            /* float products past 8 rows in one cuda_matmul_exact_multi launch (CLOVER_CUDA_EXACT_ROWS=0: no) */
    int router_fused;           /* the router product and routing in one launch (moe_router.cu): 0 no
                                 * (CLOVER_CUDA_ROUTER_FUSED=0), 1 yes (the default), 2 yes without staging its
                                 * weights in shared memory (=2, A/B) */
    size_t router_rows;         /* and past 8 rows up to this many (CLOVER_CUDA_ROUTER_ROWS=N, 9..64; 0: never, the
                                 * default until measured: moe_router.cu's k_router_rows) */
    size_t max_rows, max_context, n_past;
    uint32_t n_run;     /* the layers it runs, [0, n_run): n_layer, or fewer as the front of a split (then it
                         * holds state for those only, runs no head and hands on the residual, out_hidden) */
    cuda_layer *layers; /* [n_layer], only [0, n_run) set */
    size_t n_attn, n_gdn;
    cuda_attn_dims ad;
    cuda_gdn_dims gd;
    /* descriptors: device arrays and their pinned host mirrors, one per layer of the kind */
    cuda_attn_seq *d_aseq, *h_aseq;
    cuda_gdn_seq *d_gseq, *h_gseq;
    int32_t *h_ids, *h_targets; /* pinned [R] */
    int32_t *h_rx;              /* --gpu-mem: pinned [2][R*k]: the routing ids read back, then their slots */
    uint64_t pool_bytes_held;   /* --gpu-mem: this session's share of cm->session_bytes */
    cuda_expert_view xv;        /* --gpu-mem: where this layer's expert products read (backend_cuda_experts.c) */
    const model_moe_weights *xv_moe; /* the layer xv serves while its products are enqueued; NULL: none */
    float *h_logits;            /* pinned [R][V] */
    float *h_nll;               /* pinned [R] */
    void *h_pick;               /* pinned, carved into the h_pk_* mirrors of sc.pk_* below */
    int32_t *h_pk_rows, *h_pk_id, *h_pk_forbid, *h_pk_cids, *h_pk_stop;
    double *h_pk_u;
    float *h_pk_conf, *h_pk_ramp;
    uint32_t *h_pk_counts, *h_kept_count;
    struct cuda_pick_row *h_pk_desc;
    struct cuda_pick_params *h_pk_par;
    bool pinned_shared;         /* h_ids .. h_pick are the backend's shared set (cuda_pinned), not the session's */
    bool has_preview;           /* a preview ran: preview_debug has its kept flags */
    bool preview_coreset;
    cuda_preview_graph pgraph[CUDA_PREVIEW_GRAPHS];
    uint64_t pgraph_clock;
    bool pgraph_off;            /* capture refused or disabled: previews run eagerly */
    bool count_experts;         /* CLOVER_CUDA_COUNT_EXPERTS: every pass marks sc.used (a diagnostic) */       /* ... and it used the coreset (else every expert counts as kept) */
    size_t preview_b;
    float *dbg_hidden;          /* host [n_layer+1][R][H] when a preview asked for it (preview_debug) */
    void *arena;                /* every device buffer of the session but the KV caches */
    void *kv;                   /* all KV caches */
    cuda_scratch sc;
    bool fp32;                  /* every weight matrix is F32/F16/BF16: FP32 products in chunks too */
    void *decode_graph;         /* the one-row decode step (last logits), captured on first use */
    bool graph_failed;          /* capture unavailable: decode runs eagerly */
    struct backend *be;         /* the backend it was made on */
    uint64_t epoch;             /* bumped by reset, import and restore: tells stale checkpoints */
    /* The stacked executor (backend_cuda_stack.c) is a session without KV whose descriptor arrays hold
     * seq_stride slots per layer (layer slot l, sequence i at l * seq_stride + i), filled from the member
     * sessions before each pass; 1 for an ordinary session. */
    size_t seq_stride;
    bool stack;
    size_t cls_rows;            /* the rows that choose a product's kernel (a sequence's, not the pass's) */
    const float *xq_of;         /* the rows whose Q8_0 8-bit copy is in sc.mm_work (cuda_add_rms_norm_q8), or NULL */
    bool moe_sum_pending;       /* the layer's expert sum left to the residual add + norm after it (one launch) */
    size_t pass_rows;           /* the rows of the pass being enqueued */
    bool stack_decode_only;     /* CLOVER_CUDA_STACK_DECODE_ONLY: stacked rows in decode groups of 8 only (A/B) */
    size_t decode_rows;         /* dense integer products past this many rows take the chunk form (1..8) */
    size_t moe_decode_rows;     /* the same for the grouped expert products */
    bool moe_narrow;            /* the layer being enqueued routes inside a coreset (many rows an expert) */
    bool moe_preview;           /* ... and belongs to a preview (cuda_moe_args.preview) */
    bool dec32_narrow;          /* CLOVER_CUDA_MOE_DEC32_NARROW=1: the MoE decode form there too (A/B) */
    bool stack_preview_off;     /* CLOVER_CUDA_NO_STACK_PREVIEW: previews and resolves one sequence at a time (A/B) */
    /* The last committed row's logits kept in sc.logits row 0 by a stacked decode step (backend.h's
     * last_logits): valid while kept_valid, the length is kept_at and the epoch kept_epoch. */
    bool kept_valid;
    size_t kept_at;
    uint64_t kept_epoch;
    void *ev[2];                /* stack: events around a pass's picks (their device time into stats->pick_s) */
    bool pick_each;             /* CLOVER_CUDA_PICK_EACH: a stacked pass picks sequence by sequence (the old path) */
    void *sgraph[2][65];        /* stack: the captured decode pass per row count, without / with the logits copy */
    bool sgraph_failed;
};

/* backend_cuda_experts.c: --gpu-mem's expert pool (cuda_expert_view above). */
struct expert_pool_layout;
/* The slot layout of the model's experts (an error when a layer has no stacked experts). */
int cuda_experts_layout(const clover_model *m, struct expert_pool_layout *lay, clover_error *err);
/* The pool of cm (cm->gpu_mem set, its dense part uploaded), sized gpu_mem - the dense bytes - reserve (one
 * session's KV, state and scratch): made with the first session; a one-line error when it cannot hold one
 * layer's experts. */
int cuda_experts_create(cuda_model *cm, uint64_t reserve, const backend_config *cfg, clover_error *err);
/* After a MoE layer's weighted sum is enqueued: the host's share of its misses (CLOVER_GPU_MEM_CPU) computed and
 * added into y; nothing without one. */
int cuda_experts_host_join(backend_session *s, float *y, clover_error *err);
/* CLOVER_GPU_MEM_PREFETCH=1: whether a pass of n rows should guess layer il + 1's routing now (from layer il's
 * MoE input), and the device buffers for it; cuda_experts_prefetch_mark once the guess is enqueued (its ids in
 * b->idx), and layer il's step copies the guessed experts while il computes. */
typedef struct cuda_prefetch_buf {
    float *log, *w;
    int32_t *idx;
} cuda_prefetch_buf;
bool cuda_experts_prefetch_buffers(cuda_experts *x, uint32_t il, uint32_t n_layer, size_t n, cuda_prefetch_buf *b);
void cuda_experts_prefetch_mark(cuda_experts *x, size_t n);
void cuda_experts_free(cuda_experts *x);
uint64_t cuda_experts_pool_bytes(const cuda_experts *x);
struct cuda_gpu_mem_info;
void cuda_experts_info(const cuda_experts *x, struct cuda_gpu_mem_info *out); /* the pool's fields (cuda_backend.h) */
/* Layer il of the pass of n rows routed in sc.ridx: syncs the stream, reads the ids back, copies the misses
 * into their slots (a second stream, which the pass's stream then waits for), writes the slot ids to
 * sc.rslot; out: where the products read. With the pool kept on the device (CLOVER_GPU_MEM_REMAP=device) the
 * same through two kernels on the pass's stream, no sync (expert_remap.cu). */
int cuda_experts_layer(backend_session *s, uint32_t il, size_t n, cuda_expert_view *out, clover_error *err);
/* CLOVER_GPU_MEM_STATS=1 only (else, or x NULL, nothing): around one pass's enqueue; the end waits for stream
 * and prints the pass's split on stderr (backend_cuda_experts.c's header); failed: the pass's error, or NULL. */
void cuda_experts_pass_begin(cuda_experts *x, size_t rows, bool preview);
/* The pool is kept by the device (no host sync in a pass: its passes may be captured as graphs). */
bool cuda_experts_on_device(const cuda_experts *x);
void cuda_experts_pass_end(cuda_experts *x, void *stream, const char *failed);

/* Rows one pick launch takes at most (its plog scratch). */
size_t cuda_session_pick_rows(const backend_session *s);

/* The pinned host buffers a pass's transfers go through (ids, targets, logits, NLL, the pick mirrors). One
 * set per backend, shared by its sessions (a backend's passes run one at a time, each synchronised before the
 * next, and every pass writes what it reads there first); CLOVER_CUDA_OWN_PINNED: a set per session, as
 * before (each session then pins max_rows rows of logits, 64 MB at a 248k vocabulary). */
typedef struct cuda_pinned {
    int32_t *h_ids, *h_targets; /* [rows] */
    float *h_logits;            /* [logit_rows][V] */
    float *h_nll;               /* [rows] */
    void *h_pick;               /* the pick mirrors for rows (pick_layout) */
    size_t rows;
} cuda_pinned;
int cuda_pinned_make(const clover_model *model, size_t max_rows, size_t logit_rows, cuda_pinned *p, char *why);
void cuda_pinned_free(cuda_pinned *p); /* zeroed or made; NULL fine */

/* backend_cuda_session.c; share: the backend's pinned set (NULL: the session's own) */
int backend_cuda_session_create(const clover_model *model, const backend_config *cfg, const cuda_pinned *share,
                                backend_session **out, clover_error *err);
void backend_cuda_session_free(backend_session *s);
size_t backend_cuda_session_length(const backend_session *s);
void backend_cuda_reset(backend_session *s);

/* backend_cuda_commit.c: one sequence's rows through the trunk (no picks),
 * which the batched commit of backend_cuda.c runs per sequence. Every
 * argument is checked before anything is enqueued. */
typedef struct cuda_commit_out {
    float *last_logits;      /* [n_vocab] or NULL */
    float *all_logits;       /* [n][n_vocab] or NULL */
    const int32_t *targets;  /* [n] or NULL: with nll */
    float *nll;              /* [n] or NULL */
    float *hidden;           /* [n_layer+1][n][n_embd] or NULL */
    float *out_hidden;       /* [n][n_embd]: the residual leaving layer n_run - 1 (a ranged session's, required) */
} cuda_commit_out;
int cuda_commit_rows(backend_session *s, const int32_t *ids, size_t n, const cuda_commit_out *out,
                     backend_pass_stats *stats, clover_error *err);

/* The stacked executor: a session of no sequence, with scratch for max_rows rows and descriptor slots for
 * max_seqs sequences per layer (backend_cuda_session.c). */
int backend_cuda_stack_create(const clover_model *model, const backend_config *cfg, size_t max_seqs,
                              size_t max_rows, backend_session **out, clover_error *err);

/* backend_cuda_stack.c: one-row commits of n sequences (decode steps) as ONE pass on the stacked executor x:
 * every product reads its weights once for all n rows, attention and GDN index each row's own session, the
 * picks on the device, one host sync. Each q was checked (session, ids, room, pick) by the caller. A row's
 * bits are those of its sequence alone (the products take the kernel of one row; the kernels compute rows
 * independently). Sets each q->rc. Under CLOVER_CUDA_STACK_CHUNKS=1 also chunks of 2..max_rows rows (prompt
 * chunks, n <= 64 and their rows within x's max_rows), which the caller groups (backend_cuda.c: one-row
 * commits apart, the float products' decode or chunk form the same for all of a pass). */
int cuda_stack_decode(backend_session *x, host_pick_ctx *pc, backend_commit_seq *const *qs, size_t n,
                      backend_pass_stats *stats);

/* Whether the backend's stacked decode pass replays captured graphs (backend_cuda.c; a diagnostic). */
bool cuda_backend_stack_graphs(const struct backend *be);

/* backend_cuda_state.c */
size_t backend_cuda_state_bytes(const backend_session *s);
int backend_cuda_state_export(const backend_session *s, void *buf, size_t len, clover_error *err);
int backend_cuda_state_import(backend_session *s, const void *buf, size_t len, clover_error *err);
/* backend_ops.state_save / state_load / state_copy_free: the state in device memory (backend_cuda_state.c) */
int backend_cuda_state_save(const backend_session *s, backend_state_copy **copy, clover_error *err);
int backend_cuda_state_load(backend_session *s, const backend_state_copy *copy, clover_error *err);
void backend_cuda_state_copy_free(backend_state_copy *copy);

/* backend_cuda_pass.c: enqueues the trunk for n rows (ids already in sc.ids,
 * the descriptors for position pos written to the pinned mirrors and copied
 * by this function) and the head for rows [head_r0, n) into sc.logits (no
 * head when head_r0 == n); hidden, when non-NULL, gets the residual stream
 * after each layer, [n_layer+1][hidden_rows][H] at row row0 (copied back
 * synchronously: diagnostics only). 0 or -1 with the reason in err. */
typedef struct cuda_pass {
    size_t pos, n, head_r0;
    float *hidden;
    size_t hidden_rows, row0;
    backend_pass_stats *stats;
    /* preview (SPEC.md 2): no causal mask, the GDN block operator, the coreset */
    bool preview, coreset;
    float ln_ratio, top_p;
    const int32_t *head_rows; /* preview: device list of the rows the head computes (logits row i = head_rows[i]) */
    size_t n_head_rows;
    /* stacked (s->stack): n_seq sequences of seq_rows rows at most each, their descriptors already in the
     * pinned mirrors (the pass copies them); each product takes the kernel of seq_rows rows, as alone (the
     * caller stacks only sequences whose rows choose the same kernels); a stacked preview also names each
     * sequence's session, rows and block options (the GDN block operator, the coreset and the routing run
     * per sequence, on its rows) */
    size_t n_seq, seq_rows;
    const struct cuda_stack_seq *sseq; /* [n_seq], stacked previews */
} cuda_pass;

typedef struct cuda_stack_seq {
    backend_session *s;
    size_t row0, n;
    bool coreset;
    float ln_ratio, top_p;
} cuda_stack_seq;
int cuda_pass_enqueue(backend_session *s, const cuda_pass *p, clover_error *err);
/* The head for n rows of sc.x listed in rows (device), into sc.logits (a preview's masked rows). */
int cuda_pass_head_rows(backend_session *s, const int32_t *rows, size_t n, clover_error *err);
/* The same into logits rows out0..out0+n-1 (a stacked preview's sequences one after another when the head's
 * kernel depends on its row count), the product's kernel chosen by these n rows. */
int cuda_pass_head_rows_at(backend_session *s, const int32_t *rows, size_t n, size_t out0, clover_error *err);
/* Whether the head's bits are the same at any row count (integer path, or the f32 decode kernel of a float
 * file), so a stacked preview may run one head over every sequence's rows. */
bool cuda_pass_head_row_free(const backend_session *s);

/* backend_cuda_preview.c: one sequence's preview with its device picks,
 * one block resolved (passes back to back), the last preview's diagnostics
 * (backend.h's preview / resolve / preview_debug for one sequence). */
int cuda_preview_seq(backend_session *s, host_pick_ctx *pc, backend_preview_seq *q, backend_pass_stats *stats,
                     clover_error *err);
int cuda_resolve_seq(backend_session *s, host_pick_ctx *pc, backend_resolve_seq *q, const volatile int *cancel,
                     backend_pass_stats *stats, clover_error *err);
int cuda_preview_debug(backend_session *s, float *hidden, uint8_t *kept, clover_error *err);
/* One checked preview pass of one sequence with the device pick of its pending rows (u_rows: [b] draws or NULL),
 * out indexed by block row; raw logits into logits when non-NULL. */
int cuda_preview_pick(backend_session *s, host_pick_ctx *pc, const int32_t *block, size_t b,
                      const backend_preview_opts *opts, const backend_pick *pick, const uint8_t *pending,
                      const float *u_rows, const backend_pick_out *out, float *logits, backend_pass_stats *stats,
                      clover_error *err);
/* A preview's arguments (the model has the block tensors, b fits, ids, room, the pick), and whether </think> is
 * open for a pass over block (the penalties' sparse counts and the block's fixed rows). */
int cuda_preview_check(backend_session *s, host_pick_ctx *pc, const int32_t *block, size_t b,
                       const backend_preview_opts *opts, const backend_pick *pick, clover_error *err);
bool cuda_think_open(const backend_penalties *pen, const int32_t *block, size_t b);

/* backend_cuda_stack_preview.c: the previews and the block resolves of a call's sequences as stacked passes on
 * the executor x (each pass: every sequence's block side by side, one weight read per product, attention,
 * GDN block operator, coreset and routing per sequence, picks on the device, one sync). Sequences the stack
 * cannot take (raw logits, log-probabilities, the residual stream, penalty lists too long) run alone.
 * Each sequence gets its rc; the call's is the first failure's; 1 when no memory was left for the
 * bookkeeping (nothing ran: the caller runs them alone). */
int cuda_stack_previews(struct backend *be, backend_session *x, host_pick_ctx *pc, backend_preview_seq *seqs,
                        size_t n_seqs, backend_pass_stats *stats);
int cuda_stack_resolves(struct backend *be, backend_session *x, host_pick_ctx *pc, backend_resolve_seq *seqs,
                        size_t n_seqs, const volatile int *cancel, backend_pass_stats *stats);

/* Which CUDA device sessions use (0) and whether the model can run there:
 * 0 or CLOVER_E_UNSUPPORTED with the reason (a type or a shape the kernels
 * do not take). */
int cuda_model_check(const clover_model *m, clover_error *err);

#endif
