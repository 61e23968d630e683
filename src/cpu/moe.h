/*
 * moe.h: the sparse MoE block (TRUNK.md section 5) and the block-diffusion
 * expert coreset (SPEC.md 2.2).
 *
 * Routing: softmax over all experts in float32, top-k by probability (ties:
 * lower index first), weights renormalised over the chosen. The restricted
 * form (a preview inside the block's coreset) takes the top-k among the
 * allowed experts only, all of them when fewer than k are allowed, and
 * renormalises over the chosen the same way.
 *
 * Experts: SwiGLU, h = silu(x Wg^T) * (x Wu^T), y = h Wd^T, weighted by the
 * routing weight and accumulated in ascending expert id (HF's index_add_
 * order); then + sigmoid(x . w_shexp_gate) * shared_expert(x). The expert
 * weights stay in the file's quantised types; rows routed to one expert are
 * gathered and go through matmul together, so a prompt reads each expert's
 * weights once per layer instead of once per row.
 *
 * GGUF layout: ffn_gate_exps / ffn_up_exps are ggml {H, F, E} (expert e is an
 * [F][H] matrix), ffn_down_exps {F, H, E} (an [H][F] matrix). A fused
 * ffn_gate_up_exps {H, 2F, E} has gate rows first: pass gate = base,
 * up = base + F rows, and both strides = 2F rows.
 */
#ifndef CLOVER_CPU_MOE_H
#define CLOVER_CPU_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "clover.h"
#include "model/model.h"

/* ---- routing ---- */

/* Routes one row: idx / wts get the chosen experts in descending probability
 * (torch.topk order) and their renormalised weights; returns how many were
 * chosen (k, or fewer when fewer than k are allowed; 0 only if none is).
 * allowed is NULL (all experts) or [n_expert] flags. */
size_t cpu_moe_route(int32_t *idx,          // [k]
                     float *wts,            // [k]
                     const float *logits,   // [n_expert], router output
                     size_t n_expert, size_t k,
                     const uint8_t *allowed,  // [n_expert] or NULL
                     float *probs);         // scratch [n_expert]

/* The k best of vals[0..n) (ties: lower index first), restricted to allowed
 * when non-NULL, into idx in descending order; returns how many (<= k). */
size_t cpu_moe_topk(int32_t *idx, const float *vals, size_t n, size_t k, const uint8_t *allowed);

/* ---- the coreset (SPEC.md 2.2, seed 000 `coreset`) ----
 * For the block's router logits: each row's softmax probabilities (float64)
 * of its top-k experts by logit (ties: lower index first) are summed per
 * expert; the totals are normalised (by max(sum, 1e-9)); experts sorted by
 * total descending (ties: lower index first) are kept while the mass before
 * them is below top_p, the first always. */
void cpu_moe_coreset(uint8_t *allowed,       // [n_expert] out: 1 = kept
                     const float *logits,    // [b][n_expert]
                     size_t b, size_t n_expert, size_t k, float top_p,
                     double *totals,         // scratch [n_expert]
                     int32_t *order);        // scratch [n_expert]
/* The coreset's steps, for callers that spread the rows over threads (cpu_moe_coreset is them in order):
 * cpu_moe_coreset_row gives a row's top-k experts by logit (idx, [k]; returns how many: k, or n_expert if fewer)
 * and its float64 softmax max and sum; cpu_moe_coreset_add adds those experts' probabilities to totals. Rows added
 * in row order, then cpu_moe_coreset_from_totals, give cpu_moe_coreset's bits whichever thread made each row. */
size_t cpu_moe_coreset_row(int32_t *idx, double *mx, double *sum, const float *row, size_t n_expert, size_t k);
void cpu_moe_coreset_add(double *totals, const int32_t *idx, size_t m, const float *row, double mx, double sum);
/* The last step alone: the kept experts given each expert's summed top-k probability. */
void cpu_moe_coreset_from_totals(uint8_t *allowed, const double *totals, size_t n_expert, float top_p,
                                 int32_t *order);

/* ---- SwiGLU ---- */
/* h[i] = silu(gate[i]) * up[i]; h may equal gate or up. */
void cpu_swiglu(float *h, const float *gate, const float *up, size_t n);
void cpu_swiglu_scalar(float *h, const float *gate, const float *up, size_t n);
void cpu_swiglu_avx2(float *h, const float *gate, const float *up, size_t n);

/* ---- the block ---- */
typedef struct cpu_moe_weights {
    size_t n_embd;     /* H */
    size_t n_ff;       /* F, per routed expert */
    size_t n_expert;   /* E */
    size_t n_used;     /* k */
    size_t n_ff_shexp; /* shared expert width; 0 = no shared expert */
    uint32_t router_type;
    const void *router; /* ffn_gate_inp [E][H] */
    uint32_t gate_type, up_type, down_type;
    const void *gate_exps, *up_exps, *down_exps; /* expert e at base + e * stride bytes */
    size_t gate_stride, up_stride, down_stride;
    uint32_t sh_gate_type, sh_up_type, sh_down_type, sh_inp_type;
    const void *sh_gate; /* ffn_gate_shexp [Fs][H] */
    const void *sh_up;   /* ffn_up_shexp [Fs][H] */
    const void *sh_down; /* ffn_down_shexp [H][Fs] */
    const void *sh_inp;  /* ffn_gate_inp_shexp [H]: the shared expert's scalar gate */
    uint32_t layer;      /* the layer, for the routing trace (backend/route_trace.h) */
} cpu_moe_weights;

/* Binds layer `layer` of a loaded model (its GGUF tensors, nothing copied): the CPU backend's binding, shared
 * with the host experts of a device backend (offload/expert_host_cpu.c) so the two compute with the same
 * views. Check the result with cpu_moe_weights_check. */
void cpu_moe_weights_bind(cpu_moe_weights *out, const model_layer *ml, const model_hparams *hp, uint32_t layer);

/* Checks the block once (at model binding): 1 <= n_used <= n_expert, every
 * pointer set, every type one clover computes with and each row length a
 * multiple of its type's block, expert strides holding a whole expert.
 * 0 or a negative status with a message naming the tensor. */
int cpu_moe_weights_check(const cpu_moe_weights *w, clover_error *err);

/* Bytes of scratch cpu_moe_forward needs for up to n rows. */
size_t cpu_moe_scratch_bytes(const cpu_moe_weights *w, size_t n);

/* out = MoE(x) for n rows (out must not overlap x). allowed: NULL for the
 * causal trunk, the coreset for a preview. scratch: cpu_moe_scratch_bytes,
 * 64-byte aligned. The projections run through matmul on pool (may be NULL). */
void cpu_moe_forward(float *out,        // [n][H]
                     const float *x,    // [n][H], post_attention_layernorm output
                     size_t n, const cpu_moe_weights *w, const uint8_t *allowed, threadpool *pool,
                     void *scratch);
/* The same over the rows of several sequences at once, with one read of
 * each weight (matmul_group.h): group[r] is row r's sequence (a sequence's
 * rows contiguous), allowed_of[g] its coreset (NULL: every expert). Each
 * row's output is bit for bit cpu_moe_forward's over its sequence's rows
 * alone: every product gives a row the kernel of its own sequence's row
 * count there (the expert products: its sequence's rows routed to that
 * expert). The scratch is cpu_moe_scratch_bytes of all n rows. logits:
 * the router's logits of the n rows ([n][n_expert]) when the caller has
 * computed them with the same grouped product (a preview's coreset needs
 * them first), so the router runs once a layer, not twice; NULL: computed
 * here (and always with CLOVER_CPU_GROUPED=0, the old order). */
void cpu_moe_forward_groups(float *out, const float *x, size_t n, const cpu_moe_weights *w, const uint32_t *group,
                            const uint8_t *const *allowed_of, const float *logits, threadpool *pool, void *scratch);

/* What a caller does with each finished output row, in the same run of the
 * pool as the weighted sum (the pass's residual add and next norm): row(ctx,
 * r) once row r of out is final, on any thread, rows concurrently. */
typedef struct cpu_moe_epilogue {
    void (*row)(void *ctx, size_t r);
    void *ctx;
} cpu_moe_epilogue;

/* cpu_moe_forward_groups, then epi's row for every row; returns whether the
 * rows were summed a row a task with the epilogue in the same run (the
 * pool's work between products, cpu_grouped: one run of the pool a layer
 * fewer; one row, as in a decode step, on the calling thread instead of a
 * run of the pool for ~16k multiply-adds), else 0 and the caller runs the
 * epilogue itself. out's bits are cpu_moe_forward_groups's either way: a row's sum
 * takes its slots in the same order. */
int cpu_moe_forward_groups_then(float *out, const float *x, size_t n, const cpu_moe_weights *w, const uint32_t *group,
                                const uint8_t *const *allowed_of, const float *logits, threadpool *pool, void *scratch,
                                const threadpool_phase *before, const cpu_moe_epilogue *epi);
/* The routed experts alone with the routing given (backend/expert_host.h's compute): out[r] = the sum over
 * row r's pairs j with ids[r*k + j] >= 0 (k = w->n_used), in ascending expert id (a repeated id: in slot
 * order), of wts[r*k + j] * expert_{ids[r*k + j]}(x[r]); a row with no pair gets zeros. No router, no shared
 * expert (w's n_ff_shexp is ignored), no routing trace. moe_run with its routing step replaced, so a row's
 * bits are cpu_moe_forward's for the same routing on a model without a shared expert (the same products,
 * SwiGLU and summation order). ids in [-1, n_expert) (not checked here); scratch: cpu_moe_scratch_bytes(w, n),
 * 64-byte aligned; w->router may be NULL. */
void cpu_moe_experts(float *out,          // [n][H]
                     const float *x,      // [n][H]
                     size_t n, const cpu_moe_weights *w,
                     const int32_t *ids,  // [n][k]
                     const float *wts,    // [n][k]
                     threadpool *pool, void *scratch);

/* The oracle: the same with matmul_oracle (matmul's arithmetic, scalar) and cpu_swiglu_scalar. */
void cpu_moe_forward_scalar(float *out, const float *x, size_t n, const cpu_moe_weights *w,
                            const uint8_t *allowed, void *scratch);

#endif
