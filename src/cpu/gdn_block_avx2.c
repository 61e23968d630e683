/*
 * gdn_block_avx2.c: the AVX2 kernels of the GDN block operator. The conv runs
 * over 8 channels at a time with the taps transposed tap-major (so a tap is one
 * contiguous load) and keeps the oracle's order of adds (multiply, then add:
 * no fused rounding), so it differs from the oracle only through silu's exp.
 * A value head's scores are dk-long dot products and its mix axpys over dv:
 * every inner loop walks contiguous memory. Its read-out S^T q (dk x dv FMAs a
 * row, ~2/3 of the head's work) runs GDN_HEAD_ROWS rows at a time with their
 * accumulators in registers, so each row of S (64 KiB a head at 128 x 128, past
 * L1) is loaded once for the group instead of once a row and u is not re-read
 * and re-written per t; each element's FMAs are v8_axpy's, in the same order.
 */
#include <math.h>

#include "cpu/act.h"
#include "cpu/gdn_block.h"
#include "cpu/simd_avx2.h"

void gdn_block_conv_avx2_range(float *y, const float *x, const float *ring, const float *wt, size_t cd, size_t c0,
                               size_t c1, size_t K, size_t b) {
    const size_t keep = K - 1;
    for (size_t i = 0; i < b; i++) {
        size_t c = c0;
        for (; c + 8 <= c1; c += 8) {
            __m256 acc = _mm256_setzero_ps();
            for (size_t t = 0; t < K; t++) {
                size_t e = i + t;
                const float *row = e < keep ? ring + e * cd : x + (e - keep) * cd;
                acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(wt + t * cd + c), _mm256_loadu_ps(row + c)));
            }
            for (size_t t = 1; t < K && i + t < b; t++)
                acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(wt + (keep + t) * cd + c),
                                                       _mm256_loadu_ps(x + (i + t) * cd + c)));
            _mm256_storeu_ps(y + i * cd + c, v8_silu(acc));
        }
        for (; c < c1; c++) {
            float acc = 0.0f;
            for (size_t t = 0; t < K; t++) {
                size_t e = i + t;
                float in = e < keep ? ring[e * cd + c] : x[(e - keep) * cd + c];
                acc += wt[t * cd + c] * in;
            }
            for (size_t t = 1; t < K && i + t < b; t++) acc += wt[(keep + t) * cd + c] * x[(i + t) * cd + c];
            y[i * cd + c] = cpu_silu(acc);
        }
    }
}

void gdn_block_conv_avx2(float *y, const float *x, const float *ring, const float *wt, size_t cd, size_t K,
                         size_t b) {
    gdn_block_conv_avx2_range(y, x, ring, wt, cd, 0, cd, K, b);
}

/* gdn_block.h: u_r = S^T qs_r for the R rows of a group (R <= GDN_HEAD_ROWS = 4): 16 columns at a time, each row's two
 * accumulators in registers over the whole t loop (t ascending, one FMA each: v8_axpy's order, the same bits),
 * so one load of S[t][c..c+15] serves the group's rows and u is written once. The four-row loop is written out
 * (an array of accumulators indexed by a loop the compiler does not unroll lives on the stack). */
void gdn_block_readout_avx2(float *u, const float *qs, const float *S, size_t R, size_t dk, size_t dv) {
    _Static_assert(GDN_HEAD_ROWS == 4, "the read-out writes out four rows");
    size_t c = 0;
    for (; c + 16 <= dv; c += 16) {
        if (R == 4) {
            const float *q0 = qs, *q1 = qs + dk, *q2 = qs + 2 * dk, *q3 = qs + 3 * dk;
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00,
                   a31 = a00;
            for (size_t t = 0; t < dk; t++) {
                const __m256 s0 = _mm256_loadu_ps(S + t * dv + c), s1 = _mm256_loadu_ps(S + t * dv + c + 8);
                __m256 q = _mm256_broadcast_ss(q0 + t);
                a00 = _mm256_fmadd_ps(q, s0, a00), a01 = _mm256_fmadd_ps(q, s1, a01);
                q = _mm256_broadcast_ss(q1 + t);
                a10 = _mm256_fmadd_ps(q, s0, a10), a11 = _mm256_fmadd_ps(q, s1, a11);
                q = _mm256_broadcast_ss(q2 + t);
                a20 = _mm256_fmadd_ps(q, s0, a20), a21 = _mm256_fmadd_ps(q, s1, a21);
                q = _mm256_broadcast_ss(q3 + t);
                a30 = _mm256_fmadd_ps(q, s0, a30), a31 = _mm256_fmadd_ps(q, s1, a31);
            }
            _mm256_storeu_ps(u + c, a00), _mm256_storeu_ps(u + c + 8, a01);
            _mm256_storeu_ps(u + dv + c, a10), _mm256_storeu_ps(u + dv + c + 8, a11);
            _mm256_storeu_ps(u + 2 * dv + c, a20), _mm256_storeu_ps(u + 2 * dv + c + 8, a21);
            _mm256_storeu_ps(u + 3 * dv + c, a30), _mm256_storeu_ps(u + 3 * dv + c + 8, a31);
            continue;
        }
        for (size_t r = 0; r < R; r++) { /* the last group's 1-3 rows: one at a time */
            __m256 a0 = _mm256_setzero_ps(), a1 = a0;
            for (size_t t = 0; t < dk; t++) {
                const __m256 q = _mm256_broadcast_ss(qs + r * dk + t);
                a0 = _mm256_fmadd_ps(q, _mm256_loadu_ps(S + t * dv + c), a0);
                a1 = _mm256_fmadd_ps(q, _mm256_loadu_ps(S + t * dv + c + 8), a1);
            }
            _mm256_storeu_ps(u + r * dv + c, a0), _mm256_storeu_ps(u + r * dv + c + 8, a1);
        }
    }
    if (c < dv) /* a tail of dv (not a multiple of 16): v8_axpy as before, on the rest of each row */
        for (size_t r = 0; r < R; r++) {
            for (size_t e = c; e < dv; e++) u[r * dv + e] = 0.0f;
            for (size_t t = 0; t < dk; t++) v8_axpy(u + r * dv + c, qs[r * dk + t], S + t * dv + c, dv - c);
        }
}

/* gdn_block.h: o = sum_j (p[j] inv) v_j + (p[b] inv) u over the b rows' v (row stride cd) and the read-out: 64
 * columns at a time in registers, j ascending, one FMA each from +0 (v8_axpy's order on a zeroed o, the same
 * bits); a tail of dv (not a multiple of 64) as before. */
void gdn_block_mix_avx2(float *o, const float *p, float inv, const float *v, size_t cd, const float *u, size_t b,
                        size_t dv) {
    size_t c = 0;
    for (; c + 64 <= dv; c += 64) {
        __m256 a[8];
        for (int k = 0; k < 8; k++) a[k] = _mm256_setzero_ps();
        for (size_t j = 0; j <= b; j++) {
            const float *x = j < b ? v + j * cd + c : u + c;
            const __m256 w = _mm256_set1_ps(p[j] * inv);
            for (int k = 0; k < 8; k++) a[k] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + 8 * k), a[k]);
        }
        for (int k = 0; k < 8; k++) _mm256_storeu_ps(o + c + 8 * k, a[k]);
    }
    if (c < dv) {
        for (size_t e = c; e < dv; e++) o[e] = 0.0f;
        for (size_t j = 0; j < b; j++) v8_axpy(o + c, p[j] * inv, v + j * cd + c, dv - c);
        v8_axpy(o + c, p[b] * inv, u + c, dv - c);
    }
}

void gdn_block_head_avx2(float *o, const float *qkv, const float *g, const float *state, const gdn_block_weights *w,
                         const cpu_gdn_dims *d, size_t b, float ln_ratio, size_t h, float *tmp) {
    const size_t nk = d->n_k_heads, nv = d->n_v_heads, dk = d->k_dim, dv = d->v_dim, cd = cpu_gdn_conv_dim(d);
    const size_t kh = cpu_gdn_key_head(d, h);
    const float scale = (float)pow((double)dk, -0.5), ls = w->logit_scale[h];
    const float *S = state + h * dk * dv; /* [dk][dv] */
    /* a group's rows: probabilities [R][b + 1], scaled q [R][dk], read-outs [R][dv] */
    float *pg = tmp, *qs = tmp + GDN_HEAD_ROWS * (b + 1), *u = qs + GDN_HEAD_ROWS * dk, inv[GDN_HEAD_ROWS];
    for (size_t i0 = 0; i0 < b; i0 += GDN_HEAD_ROWS) {
        const size_t R = b - i0 < GDN_HEAD_ROWS ? b - i0 : GDN_HEAD_ROWS;
        for (size_t r = 0; r < R; r++) {
            const size_t i = i0 + r;
            const float *qi = qkv + i * cd + kh * dk;
            float *p = pg + r * (b + 1);
            float mx = -INFINITY;
            for (size_t j = 0; j < b; j++) {
                p[j] = ls * v8_dot(qi, qkv + j * cd + nk * dk + kh * dk, dk);
                mx = p[j] > mx ? p[j] : mx;
            }
            p[b] = (w->history_bias[h] + w->history_c[h] * g[i * nv + h]) + ln_ratio;
            mx = p[b] > mx ? p[b] : mx;
            float sum = 0.0f;
            for (size_t j = 0; j <= b; j++) {
                p[j] = expf(p[j] - mx);
                sum += p[j];
            }
            inv[r] = 1.0f / sum;
            for (size_t t = 0; t < dk; t++) qs[r * dk + t] = qi[t] * scale;
        }
        gdn_block_readout_avx2(u, qs, S, R, dk, dv);
        for (size_t r = 0; r < R; r++) {
            const size_t i = i0 + r;
            gdn_block_mix_avx2(o + (i * nv + h) * dv, pg + r * (b + 1), inv[r], qkv + 2 * nk * dk + h * dv, cd,
                               u + r * dv, b, dv);
        }
    }
}
