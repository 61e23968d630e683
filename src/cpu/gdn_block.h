/*
 * gdn_block.h: the GDN block operator of a preview (SPEC.md 2.1), between a
 * GDN layer's projections and its out_proj. It replaces the causal
 * recurrence when a block of b rows is denoised: every block row attends to
 * every other block row through a softmax with one extra "history" slot whose
 * value is the causal read-out of the committed state S. The committed conv
 * ring and S are only read (a preview changes nothing).
 *
 * Steps, per value head h (key head cpu_gdn_key_head(d, h), the dims' order):
 *  conv   Y[i,c] = silu(sum_t W[c,t] E[i+t,c] + sum_{t>=1} Wr[c,t-1] X[i+t,c]),
 *         E = [ring; X], X[j] = 0 for j >= b (left taps: the causal conv);
 *  split  q | k | v as the causal path; q, k L2-normalised per key head;
 *  gate   g[i,h] = ssm_a[h] * softplus(A[i,h] + dt_bias[h]);
 *  score  s[i,j] = logit_scale[h] (q_i . k_j) with the UNSCALED normalised q,
 *         history slot history_bias[h] + history_c[h] g[i,h] + ln(b / B);
 *  mix    p = softmax over the b + 1 slots (float32, max-subtracted),
 *         u_i = S_h^T (q_i dk^-1/2) (the causal read-out, q scaled as the causal
 *         path scales it), o[i,h] = sum_j p[i,j] v_j + p[i,*] u_i;
 *  norm   gated RMSNorm with z, as the causal path.
 * (The reference, tools/reference/clover_ref/gdn_block.py, and its DECISIONS
 * 4 fix the same choices.) Sums run in the order of that reference.
 *
 * The oracle (gdn_block_scalar) is plain loops on one thread. The fast form
 * (gdn_block) runs the conv over channel vectors, then one value head per
 * pool task with AVX2 dot products and axpys: per head the work is b*b*dk for
 * the scores and b*dk*dv for the read-out, independent across heads. The
 * AVX-512 level (gdn_block_avx512.c, issue 30) does the same work as
 * register-blocked products, one pool task per key head.
 */
#ifndef CLOVER_CPU_GDN_BLOCK_H
#define CLOVER_CPU_GDN_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "cpu/gdn.h"
#include "model/gdn_ratio.h"

/* A GDN layer's small weights the block operator reads, in the file's order. */
typedef struct gdn_block_weights {
    const float *conv_w;       /* [conv_dim][K], ssm_conv1d (tap K-1 multiplies the current row) */
    const float *conv_right;   /* [conv_dim][K-1], ssm_conv1d_right (tap 0 multiplies the next row) */
    const float *ssm_a;        /* [nv], -exp(A_log) */
    const float *dt_bias;      /* [nv] */
    const float *norm_w;       /* [dv], the gated norm's plain weight */
    const float *logit_scale;  /* [nv] */
    const float *history_bias; /* [nv] */
    const float *history_c;    /* [nv] */
} gdn_block_weights;

/* ln(b / B): gdn_block_ln_ratio of model/gdn_ratio.h. */

/* Floats of scratch for a block of up to b rows on n_threads threads (either form). */
size_t gdn_block_scratch_floats(const cpu_gdn_dims *d, size_t b, size_t n_threads);

/* out = the gated-norm output for the b block rows (the input of out_proj).
 * b >= 1, ln_ratio = gdn_block_ln_ratio(b, B). ring and state are read only;
 * out must not overlap the inputs. */
void gdn_block_scalar(float *out,          // [b][nv*dv]
                      const float *mixed,  // [b][conv_dim], in_proj_qkv output (attn_qkv)
                      const float *z,      // [b][nv*dv], in_proj_z output (attn_gate)
                      const float *a,      // [b][nv], in_proj_a output (ssm_alpha)
                      const float *ring,   // [K-1][conv_dim], committed, oldest first
                      const float *state,  // [nv][dk][dv], committed
                      const gdn_block_weights *w, const cpu_gdn_dims *d, size_t b, float ln_ratio, float *scratch);

/* The same, fast: gdn_block_avx512 where quant_avx512_active() (quant/simd_level.h; `--simd avx2`, i.e.
 * CLOVER_NO_AVX512=1, turns it off), else gdn_block_avx2. Value heads spread over pool (may be NULL). */
void gdn_block(float *out, const float *mixed, const float *z, const float *a, const float *ring, const float *state,
               const gdn_block_weights *w, const cpu_gdn_dims *d, size_t b, float ln_ratio, threadpool *pool,
               float *scratch);
/* The AVX2 level (the scalar kernels where !cpu_simd_active()), its bits those of before the AVX-512 level. */
void gdn_block_avx2(float *out, const float *mixed, const float *z, const float *a, const float *ring,
                    const float *state, const gdn_block_weights *w, const cpu_gdn_dims *d, size_t b, float ln_ratio,
                    threadpool *pool, float *scratch);
/* The AVX-512 level (gdn_block_avx512.c): callable where quant_avx512_supported(). Its bits do not depend on the
 * pool's size or on cpu_grouped(); they differ from the AVX2 level's by float rounding. */
void gdn_block_avx512(float *out, const float *mixed, const float *z, const float *a, const float *ring,
                      const float *state, const gdn_block_weights *w, const cpu_gdn_dims *d, size_t b,
                      float ln_ratio, threadpool *pool, float *scratch);

/* Rows whose read-outs gdn_block_head_avx2 computes together (their accumulators in registers). */
enum { GDN_HEAD_ROWS = 4 };

/* The per-head AVX2 kernels of gdn_block (gdn_block_avx2.c), exposed for tests. */
void gdn_block_conv_avx2(float *y,           // [b][conv_dim]
                         const float *x,     // [b][conv_dim]
                         const float *ring,  // [K-1][conv_dim]
                         const float *wt,    // [2K-1][conv_dim]: left taps then right taps, tap-major
                         size_t conv_dim, size_t K, size_t b);
/* Channels [c0, c1) only (row stride conv_dim): c0 a multiple of 8 and c1 one
 * or conv_dim give each channel the bits gdn_block_conv_avx2 gives it. */
void gdn_block_conv_avx2_range(float *y, const float *x, const float *ring, const float *wt, size_t conv_dim,
                               size_t c0, size_t c1, size_t K, size_t b);
void gdn_block_head_avx2(float *o,            // [b][nv][dv], head h written
                         const float *qkv,    // [b][conv_dim], q and k normalised (q unscaled)
                         const float *g,      // [b][nv]
                         const float *state,  // [nv][dk][dv]
                         const gdn_block_weights *w, const cpu_gdn_dims *d, size_t b, float ln_ratio, size_t h,
                         float *tmp);         // [GDN_HEAD_ROWS * (b + 1 + dk + dv)]
/* Its two register-blocked parts (exposed for tests: each element is a chain of FMAs in a fixed order from +0).
 * readout: u[r][c] = sum over t ascending of qs[r][t] S[t][c] for R <= GDN_HEAD_ROWS rows (u [R][dv], qs [R][dk],
 * S [dk][dv]); mix: o[c] = sum over j = 0..b - 1 of (p[j] inv) v[j * cd + c], then + (p[b] inv) u[c]. dv a
 * multiple of 8 takes FMAs only (past the last multiple of 8, v8_axpy's separate multiply and add). */
void gdn_block_readout_avx2(float *u, const float *qs, const float *S, size_t R, size_t dk, size_t dv);
void gdn_block_mix_avx2(float *o, const float *p, float inv, const float *v, size_t cd, const float *u, size_t b,
                        size_t dv);

/* The AVX-512 level's kernels (gdn_block_avx512.c), exposed for tests. */
enum { GDN_HEAD_ROWS_AVX512 = 8 }; /* rows a head kernel takes at a time (accumulators in registers) */
enum { GDN_SPAN_AVX512 = 64 };     /* rows a key-head task's dots, weights and read-outs hold at a time */
/* Row stride of a key head's transposed keys kt [dk][stride] (b rounded up to 16). */
static inline size_t gdn_block_kt_stride(size_t b) { return (b + 15) / 16 * 16; }
/* The conv (taps read from the weights' own layout) and silu for channels [c0, c1) of every row; any c0, c1 give
 * each channel the same bits (masked tails, no scalar path). */
void gdn_block_conv_avx512_range(float *y, const float *x, const float *ring, const float *conv_w,
                                 const float *conv_right, size_t cd, size_t c0, size_t c1, size_t K, size_t b);
/* One key head's dk values of each of b rows (row stride cd) L2-normalised in place; tr non-NULL also takes them
 * transposed and times tr_scale, tr[t * tr_stride + i] (columns b.. up to a multiple of 8 repeat row b - 1). */
void gdn_block_l2_avx512(float *v, size_t cd, size_t dk, size_t b, float *tr, size_t tr_stride, float tr_scale);
/* A key head's raw dots D[i][j] = q_i . k_j for n of its rows (t ascending from +0; q the first row's, rows of
 * stride cd; kt its b keys transposed [dk][gdn_block_kt_stride(b)]; D rows of that stride, n rounded up to 8 of
 * them, those past n repeating row n - 1). */
void gdn_block_dots_avx512(float *D, const float *q, size_t cd, const float *kt, size_t dk, size_t b, size_t n);
/* Per-thread floats of a key-head task: kt, qt, D and gdn_block_head_avx512's tmp. */
size_t gdn_block_head_avx512_tmp_floats(const cpu_gdn_dims *d, size_t b);
/* Value head h's rows s0 .. s0 + n - 1 (n <= GDN_SPAN_AVX512) of o [b][nv][dv], the gated norm applied: gates,
 * slots ls D (the span's dots) + the history slot, softmax, read-out of S with qt (its key head's q transposed and
 * scaled by dk^-1/2, [dk][b rounded up to 8]), mix. */
void gdn_block_head_avx512(float *o, const float *qkv, const float *D, const float *qt, const float *a,
                           const float *z, const float *state, const gdn_block_weights *w, const cpu_gdn_dims *d,
                           size_t b, size_t s0, size_t n, float ln_ratio, size_t h, float *tmp);

#endif
