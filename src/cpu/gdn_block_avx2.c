/*
 * gdn_block_avx2.c: the AVX2 kernels of the GDN block operator. The conv runs
 * over 8 channels at a time with the taps transposed tap-major (so a tap is one
 * contiguous load) and keeps the oracle's order of adds (multiply, then add:
 * no fused rounding), so it differs from the oracle only through silu's exp.
 * A value head's scores are dk-long dot products, and its read-out and mix
 * are axpys over dv: every inner loop walks contiguous memory.
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

void gdn_block_head_avx2(float *o, const float *qkv, const float *g, const float *state, const gdn_block_weights *w,
                         const cpu_gdn_dims *d, size_t b, float ln_ratio, size_t h, float *tmp) {
    const size_t nk = d->n_k_heads, nv = d->n_v_heads, dk = d->k_dim, dv = d->v_dim, cd = cpu_gdn_conv_dim(d);
    const size_t kh = cpu_gdn_key_head(d, h);
    const float scale = (float)pow((double)dk, -0.5), ls = w->logit_scale[h];
    const float *S = state + h * dk * dv; /* [dk][dv] */
    float *p = tmp, *qs = tmp + b + 1, *u = qs + dk;
    for (size_t i = 0; i < b; i++) {
        const float *qi = qkv + i * cd + kh * dk;
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
        float inv = 1.0f / sum;
        for (size_t t = 0; t < dk; t++) qs[t] = qi[t] * scale;
        for (size_t c = 0; c < dv; c++) u[c] = 0.0f;
        for (size_t t = 0; t < dk; t++) v8_axpy(u, qs[t], S + t * dv, dv);
        float *oi = o + (i * nv + h) * dv;
        for (size_t c = 0; c < dv; c++) oi[c] = 0.0f;
        for (size_t j = 0; j < b; j++) v8_axpy(oi, p[j] * inv, qkv + j * cd + 2 * nk * dk + h * dv, dv);
        v8_axpy(oi, p[b] * inv, u, dv);
    }
}
