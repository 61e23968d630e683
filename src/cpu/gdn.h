/*
 * gdn.h: the Gated DeltaNet mixer between its projections (TRUNK.md section 4),
 * for the commit (causal) pass. The caller runs in_proj_qkv / in_proj_z /
 * in_proj_b / in_proj_a and out_proj; these take the projected f32 rows.
 *
 * Value-head order. A GGUF from llama.cpp's converter stores the value heads
 * TILED (v, z, b, a, ssm_a, dt_bias, the conv's v channels, out_proj's input
 * columns): value head j reads key head j % n_k_heads. Hugging Face's order is
 * GROUPED: value head h reads key head h / (n_v_heads / n_k_heads). The two are
 * the same model with the value heads permuted, so the operators take the
 * order as a field of the dimensions, and every backend passes
 * CPU_GDN_TILED for a GGUF model (the grouped order exists for HF-order data
 * and for the tests that check the two agree after the permutation).
 *
 * The pieces, in the order the layer runs them:
 *  1. cpu_gdn_conv: depthwise causal conv (cross-correlation: W[c][K-1]
 *     multiplies the current row) over [ring; rows], then SiLU. The ring holds
 *     the last K-1 pre-conv rows, oldest first (zeros for a fresh sequence),
 *     and is advanced to the last K-1 rows of [ring; rows].
 *  2. cpu_gdn_qk_norm: q and k L2-normalised per key head (eps 1e-6 added to
 *     the SUM of squares), q then scaled by dk^-0.5; in place in the conv rows.
 *  3. cpu_gdn_gates: beta = sigmoid(b), g = ssm_a * softplus(a + dt_bias)
 *     (ssm_a stored as -exp(A_log); torch's softplus threshold 20).
 *  4. cpu_gdn_recurrent (token by token, HF's exact order: decay, read,
 *     delta, write, output after the write) or cpu_gdn_chunked (chunks of 64,
 *     TRUNK.md 4.7; the same function of the inputs, regrouped into small
 *     matrix products); both advance the state S [n_v_heads][dk][dv].
 *  5. cpu_rms_norm_gated (norm.h) with z, per value head.
 * cpu_gdn_mix runs all five.
 *
 * The conv rows double as q | k | v: row t of the conv output holds q at
 * [kh*dk], k at [n_k_heads*dk + kh*dk] and v at [2*n_k_heads*dk + h*dv].
 */
#ifndef CLOVER_CPU_GDN_H
#define CLOVER_CPU_GDN_H

#include <stddef.h>

#include "base/threadpool.h"
#include "clover.h"

typedef enum cpu_gdn_head_order {
    CPU_GDN_TILED = 0,   /* the GGUF (llama.cpp) order: value head j reads key head j % n_k_heads */
    CPU_GDN_GROUPED = 1, /* the Hugging Face order: value head h reads key head h / (n_v / n_k) */
} cpu_gdn_head_order;

typedef struct cpu_gdn_dims {
    size_t n_k_heads, n_v_heads; /* n_v_heads is a multiple of n_k_heads */
    size_t k_dim, v_dim;         /* dk, dv */
    size_t conv_k;               /* conv kernel K >= 1 */
    float eps;                   /* of the gated output norm (rms_norm_eps) */
    cpu_gdn_head_order order;
} cpu_gdn_dims;

/* The L2 norm's eps, hard-coded in HF's kernel. */
#define CPU_GDN_L2_EPS 1e-6f
/* Rows per chunk of the chunked form. */
enum { CPU_GDN_CHUNK = 64 };
/* Which form of step 4 cpu_gdn_mix runs. They agree to float32 rounding.
 * HF runs the chunked form for every multi-row call and the recurrence for
 * a single-row decode; doing the same keeps a commit closest to the
 * reference (on the torch module test: 1.4e-6 against 4.9e-6 for the
 * recurrence over 100 + 70 rows). On a CPU the chunked form costs 20-40%
 * more (bench_ops, 16-core Xeon, 512 rows x 32 heads of 128, the whole
 * mixer: 205 against 164 ms on one thread, 42 against 36 ms on eight),
 * small next to the layer's projections. */
typedef enum cpu_gdn_form { CPU_GDN_RECURRENT = 0, CPU_GDN_CHUNKED = 1 } cpu_gdn_form;
/* Kernel sizes up to this take the AVX2 conv (others the scalar one). */
enum { CPU_GDN_CONV_MAX_K_AVX2 = 8 };

/* Checks the dimensions once (at model binding): everything >= 1, n_v_heads
 * a multiple of n_k_heads, a known order. 0 or CLOVER_E_FORMAT naming the field. */
int cpu_gdn_dims_check(const cpu_gdn_dims *d, clover_error *err);

static inline size_t cpu_gdn_conv_dim(const cpu_gdn_dims *d) {
    return 2 * d->n_k_heads * d->k_dim + d->n_v_heads * d->v_dim;
}

/* The key head that value head v_head reads, in the dims' order. */
static inline size_t cpu_gdn_key_head(const cpu_gdn_dims *d, size_t v_head) {
    return d->order == CPU_GDN_TILED ? v_head % d->n_k_heads : v_head / (d->n_v_heads / d->n_k_heads);
}

/* 1. y must not overlap x or ring. */
void cpu_gdn_conv(float *y,        // [n][conv_dim], silu(conv)
                  const float *x,  // [n][conv_dim], in_proj_qkv output
                  float *ring,     // [K-1][conv_dim], oldest first; advanced
                  const float *w,  // [conv_dim][K], GGUF ssm_conv1d (ggml {K, conv_dim})
                  size_t conv_dim, size_t K, size_t n);
void cpu_gdn_conv_scalar(float *y, const float *x, float *ring, const float *w, size_t conv_dim, size_t K, size_t n);
void cpu_gdn_conv_avx2(float *y, const float *x, float *ring, const float *w, size_t conv_dim, size_t K, size_t n);

/* The ring step alone (part of cpu_gdn_conv): ring becomes the last K-1 rows of [ring; x]. */
void cpu_gdn_ring_advance(float *ring, const float *x, size_t conv_dim, size_t K, size_t n);

/* 2. */
void cpu_gdn_qk_norm(float *qkv,  // [n][conv_dim], in place
                     const cpu_gdn_dims *d, size_t n);
void cpu_gdn_qk_norm_scalar(float *qkv, const cpu_gdn_dims *d, size_t n);
void cpu_gdn_qk_norm_avx2(float *qkv, const cpu_gdn_dims *d, size_t n);

/* 3. */
void cpu_gdn_gates(float *beta,           // [n][n_v_heads]
                   float *g,              // [n][n_v_heads]
                   const float *b,        // [n][n_v_heads], in_proj_b output (GGUF ssm_beta)
                   const float *a,        // [n][n_v_heads], in_proj_a output (GGUF ssm_alpha)
                   const float *ssm_a,    // [n_v_heads], -exp(A_log)
                   const float *dt_bias,  // [n_v_heads]
                   size_t n_v_heads, size_t n);

/* 4. Value heads [h_begin, h_end) of n rows; disjoint head ranges may run
 * concurrently (they touch disjoint state, output and scratch). */
void cpu_gdn_recurrent(float *o,            // [n][n_v_heads][dv]
                       float *state,        // [n_v_heads][dk][dv], advanced
                       const float *qkv,    // [n][conv_dim], after cpu_gdn_qk_norm
                       const float *g,      // [n][n_v_heads]
                       const float *beta,   // [n][n_v_heads]
                       const cpu_gdn_dims *d, size_t n, size_t h_begin, size_t h_end);
void cpu_gdn_recurrent_scalar(float *o, float *state, const float *qkv, const float *g, const float *beta,
                              const cpu_gdn_dims *d, size_t n, size_t h_begin, size_t h_end);
void cpu_gdn_recurrent_avx2(float *o, float *state, const float *qkv, const float *g, const float *beta,
                            const cpu_gdn_dims *d, size_t n, size_t h_begin, size_t h_end);

/* Floats of scratch one cpu_gdn_chunked call needs: 2C + C*C + C*dv + 3*C*dk (C = 64). */
size_t cpu_gdn_chunked_scratch_floats(const cpu_gdn_dims *d);
void cpu_gdn_chunked(float *o, float *state, const float *qkv, const float *g, const float *beta,
                     const cpu_gdn_dims *d, size_t n, size_t h_begin, size_t h_end, float *scratch);
void cpu_gdn_chunked_scalar(float *o, float *state, const float *qkv, const float *g, const float *beta,
                            const cpu_gdn_dims *d, size_t n, size_t h_begin, size_t h_end, float *scratch);
void cpu_gdn_chunked_avx2(float *o, float *state, const float *qkv, const float *g, const float *beta,
                          const cpu_gdn_dims *d, size_t n, size_t h_begin, size_t h_end, float *scratch);

/* The layer's own small weights, in the file's layout and order. */
typedef struct cpu_gdn_weights {
    const float *conv_w;  /* [conv_dim][K] */
    const float *ssm_a;   /* [n_v_heads], -exp(A_log) */
    const float *dt_bias; /* [n_v_heads] */
    const float *norm_w;  /* [dv], ssm_norm (plain weight) */
} cpu_gdn_weights;

/* Floats of scratch cpu_gdn_mix needs for up to n rows on a pool of n_threads. */
size_t cpu_gdn_mix_scratch_floats(const cpu_gdn_dims *d, size_t n, size_t n_threads);

/* Steps 1-5 for n rows: out is the input of out_proj. Advances ring and state.
 * The state update (step 4, in the given form) runs one value head per pool
 * task; the rest is cheap next to the projections and runs on the calling
 * thread. pool may be NULL. */
void cpu_gdn_mix(float *out,          // [n][n_v_heads*dv]
                 const float *mixed,  // [n][conv_dim], in_proj_qkv output (GGUF attn_qkv)
                 const float *z,      // [n][n_v_heads*dv], in_proj_z output (GGUF attn_gate)
                 const float *b,      // [n][n_v_heads], ssm_beta output
                 const float *a,      // [n][n_v_heads], ssm_alpha output
                 const cpu_gdn_weights *w, float *ring, float *state, const cpu_gdn_dims *d, size_t n,
                 cpu_gdn_form form, threadpool *pool, float *scratch);

#endif
