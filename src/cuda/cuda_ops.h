/*
 * cuda_ops.h: the small kernels of the CUDA backend's passes, the pieces
 * between the weight products (cuda_matmul.h) and the mixers
 * (cuda_attention.h, cuda_gdn.h): embedding lookup, RMS norm, residual add,
 * SwiGLU, router softmax + top-k, the gated shared-expert add, the head's
 * NLL and the pick. Each is the CPU's scalar oracle (src/cpu/, src/engine/
 * sampler.c) computed the same way, so the two backends agree to float
 * reassociation; tests/unit/test_cuda_ops.c checks every one against it.
 *
 * Rules shared by the CUDA headers:
 *  - every pointer is DEVICE memory unless the name says host_;
 *  - `stream` is a cudaStream_t passed as void * (NULL: the legacy stream),
 *    so this header stays C; kernels are only enqueued: no allocation, no
 *    synchronisation and no host read inside, so a whole decode step can be
 *    captured as one CUDA graph;
 *  - the return value is 0, or -1 when the launch itself failed (the
 *    runtime's message in cuda_ops_last_error()); an argument outside the
 *    documented range is the caller's bug and is checked by the caller
 *    (the backend checks shapes once at model bind time).
 */
#ifndef CLOVER_CUDA_OPS_H
#define CLOVER_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The runtime's message for the last failing call of this file (thread-local). */
const char *cuda_ops_last_error(void);

/* True for the token_embd types cuda_embed_rows dequantises: F32, F16, BF16, Q8_0. */
int cuda_embed_type_ok(uint32_t type);

/* out[r] = dequant(table row ids[r]); the table is the file's bytes, rows of
 * n_embd elements of `type` (quant_row_bytes apart). ids in range (checked
 * by the caller on the host before the pass). */
int cuda_embed_rows(float *out,          // [n][n_embd]
                    const void *table,   // [n_vocab] rows, file bytes
                    uint32_t type, const int32_t *ids,  // [n]
                    size_t n, size_t n_embd, void *stream);

/* y[r] = (x[r] * 1/sqrt(sum(x[r]^2)/n + eps)) * w, as cpu_rms_norm_scalar
 * (the sum in float32, tree-ordered: the reassociation the bound covers).
 * y may equal x. */
int cuda_rms_norm(float *y, const float *x,  // [rows][n]
                  const float *w,            // [n]
                  size_t rows, size_t n, float eps, void *stream);

/* h[r] += y[r], then x[r] = rms_norm(h[r]) * w: the residual add and the
 * next norm in one pass over the row (cuda_add then cuda_rms_norm, the same
 * arithmetic). */
int cuda_add_rms_norm(float *x, float *h, const float *y,  // [rows][n] each
                      const float *w, size_t rows, size_t n, float eps, void *stream);

/* cuda_add_rms_norm that also writes x's rows rounded to 8 bits in Q8_0 blocks into xq, byte for byte what the
 * integer chunk products' quantiser writes for them (ig_quantize's chunk-major layout for `rows` rows, n_in = n), so
 * a product of x that is told its rows are ready (cuda_matmul_chunk_ws_multi_xq) skips that launch. 0: launched;
 * 1: not taken, nothing launched (the row shape the fused kernel does not take, n % 32 != 0, or
 * CLOVER_CUDA_NORM_Q8=0 / cuda_norm_q8_set(0)): the caller runs cuda_add_rms_norm; -1: a launch error. */
int cuda_add_rms_norm_q8(float *x, float *h, const float *y, const float *w, size_t rows, size_t n, float eps,
                         void *xq, void *stream);
void cuda_norm_q8_set(int on);

/* h[i] += y[i]. */
int cuda_add(float *h, const float *y, size_t count, void *stream);

/* h[i] = silu(g[i]) * u[i] (h may equal g or u). */
int cuda_swiglu(float *h, const float *g, const float *u, size_t count, void *stream);

/* Per row: softmax of the router logits in float32 (max, e^(x-max), sum,
 * times 1/sum), top-k by probability (ties: lower id first), weights
 * renormalised over the chosen: cpu_moe_route with allowed = NULL (a row
 * with a NaN or inf logit, or only -inf: every probability is NaN, and the
 * picks are ids 0..k-1 with NaN weights, as the CPU's).
 * k <= CUDA_ROUTE_MAX_K, n_expert <= CUDA_ROUTE_MAX_EXPERT (else -1, no launch). */
enum { CUDA_ROUTE_MAX_K = 16, CUDA_ROUTE_MAX_EXPERT = 1024 };
int cuda_moe_route(int32_t *idx,         // [n][k] expert ids, descending probability
                   float *wts,           // [n][k]
                   const float *logits,  // [n][n_expert]
                   size_t n, size_t n_expert, size_t k, void *stream);

/* cuda_moe_route restricted to allowed experts (cpu_moe_route with
 * `allowed`; the same kernel): float32 softmax over all experts, top-k among the allowed,
 * weights renormalised over the chosen. A row with m < k allowed experts
 * gets its m, then k - m distinct experts outside the set with weight 0
 * (the grouped products need k distinct ids; 0 * y adds nothing to the
 * ascending-id sum). n_expert <= CUDA_ROUTE_MAX_EXPERT, k <= CUDA_ROUTE_MAX_K. */
int cuda_moe_route_allowed(int32_t *idx, float *wts, const float *logits, const uint8_t *allowed, size_t n,
                           size_t n_expert, size_t k, void *stream);

/* Whether the routing (cuda_moe_route, cuda_moe_route_allowed and the fused router, cuda_moe_router.h) runs its
 * fast form: the same ids and weights, bit for bit, in fewer dependent steps (moe_route.cuh). On unless
 * CLOVER_CUDA_ROUTE_FAST=0, read once; cuda_route_fast_set overrides it (tests, benches; -1: read the variable
 * again). Needs no device. */
int cuda_route_fast(void);
void cuda_route_fast_set(int on);

/* out[r] = sum over the row's k slots, in ascending expert id (the CPU's
 * order; equal ids in slot order), of wts[r][j] * ye[r*k + j]: the routed
 * experts' weighted sum. k <= CUDA_ROUTE_MAX_K. */
int cuda_moe_combine(float *out,           // [n][H]
                     const float *ye,      // [n*k][H] per-slot expert outputs
                     const int32_t *idx,   // [n][k]
                     const float *wts,     // [n][k]
                     size_t n, size_t k, size_t H, void *stream);

/* cuda_moe_combine then cuda_shexp_add in one launch, the same bits. */
int cuda_moe_combine_shexp(float *out, const float *ye, const int32_t *idx, const float *wts, size_t n, size_t k,
                           size_t H, const float *sh, const float *gate_logit, void *stream);

/* cuda_moe_combine (cuda_moe_combine_shexp where sh is non-NULL) and cuda_add_rms_norm in one launch: h[r] +=
 * the row's expert sum, x[r] = norm(h[r]) * w, the sum never stored; where xq is non-NULL also the normed rows'
 * Q8_0 8-bit copy, as cuda_add_rms_norm_q8 writes it. The same bits as the two (three) launches. Returns 0 (done;
 * the 8-bit rows too if asked), 2 (done without the 8-bit rows: n not whole Q8_0 blocks, rows > 65535 or
 * CLOVER_CUDA_NORM_Q8=0), 1 (nothing launched: k, the row shape or alignment, or CLOVER_CUDA_COMBINE_NORM=0 /
 * cuda_combine_norm_set(0): the caller runs the combine and the norm), -1 (a launch error). */
int cuda_moe_combine_add_rms_norm(float *x, float *h, const float *ye, const int32_t *idx, const float *wts, size_t k,
                                  const float *sh, const float *gate_logit, const float *w, size_t rows, size_t n,
                                  float eps, void *xq, void *stream);
void cuda_combine_norm_set(int on);

/* out[r] += sigmoid(gate_logit[r]) * sh[r] (the gated shared expert; the
 * gate logit is the [1][H] ffn_gate_inp_shexp product, computed by matmul). */
int cuda_shexp_add(float *out,               // [n][H]
                   const float *sh,          // [n][H]
                   const float *gate_logit,  // [n]
                   size_t n, size_t H, void *stream);

/* nll[r] = -log softmax(logits[r])[targets[r]]: float64 log-sum-exp of the
 * float32 logits, as cpu_head_nll. */
int cuda_nll(float *nll,                                    // [n]
             const float *logits, const int32_t *targets,   // [n][V], [n]
             size_t n, size_t V, void *stream);

/* The pick of SPEC.md 3.2 on the device, the same as sampler_pick: greedy
 * (T < 1e-6) takes the first maximum; otherwise candidates are the finite
 * logits valued float32(l/T), top-k keeps values >= the k-th (ties stay),
 * probabilities exp(float32(v - max)) / sum in float64, sorted by value
 * descending then id ascending, the top-p prefix until the mass before a
 * candidate exceeds p, and the walk `if u < p_i pick; u -= p_i` with the
 * row's draw u (sampler_draw on the host: the draws are the CPU's). conf is
 * the T = 1 probability of the pick. id -1 (and conf NaN) when the row has
 * no finite logit. The sampled form sorts the head of candidates with
 * probability >= 1e-12 of the total, as the CPU does, up to
 * CUDA_PICK_MAX_HEAD of them; a wider head (a near-flat row) gives id -2 and
 * the caller picks that row on the host (counted, never silent). */
enum { CUDA_PICK_MAX_HEAD = 4096 };
typedef struct cuda_pick_params {
    float temperature;
    int32_t top_k;
    float top_p;
} cuda_pick_params;
int cuda_pick(int32_t *id, float *conf,             // [n], [n]
              const float *logits,                  // [n][V]
              const double *u,                      // [n] draws (ignored when greedy), device memory
              size_t n, size_t V, const cuda_pick_params *p, void *stream);
/* cuda_pick with each row's own parameters (p: device [n]; greedy where
 * p[i].temperature < 1e-6), the same code per row: one launch for the rows of
 * many requests (u: [n] draws, read only for sampled rows). */
int cuda_pick_each(int32_t *id, float *conf, const float *logits, const double *u, const cuda_pick_params *p,
                   size_t n, size_t V, void *stream);
/* Greedy rows of cuda_pick / cuda_pick_each through a cluster of 8 blocks a row (ops_pick.cu's header; the same
 * bits): 1 on, 0 off, -1 back to CLOVER_CUDA_PICK_SPLIT (=0 off; on when unset). Tests and benches. */
void cuda_pick_split_set(int on);

#ifdef __cplusplus
}
#endif

#endif
