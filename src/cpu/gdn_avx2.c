/*
 * gdn_avx2.c: the GDN conv, q/k norm and recurrence with AVX2+FMA.
 * The recurrence works on blocks of 32 (then 8) state columns: a column block
 * of S is independent of the others through one token (decay, read, delta,
 * write and output all act column by column), so each block is decayed and
 * read in one pass down the dk rows and written and read out in a second
 * pass over the same 16 KiB. Subnormals are flushed for the call (a head
 * that decays for long without writes would otherwise slow to a crawl).
 * The conv walks tiles of 16 rows so the rows a channel block reads stay in
 * cache, with the 8 channels' taps gathered once per tile.
 */
#include <math.h>

#include "cpu/act.h"
#include "cpu/gdn.h"
#include "cpu/simd_avx2.h"

void cpu_gdn_conv_avx2(float *y, const float *x, float *ring, const float *w, size_t conv_dim, size_t K, size_t n) {
    if (K > CPU_GDN_CONV_MAX_K_AVX2) {
        cpu_gdn_conv_scalar(y, x, ring, w, conv_dim, K, n);
        return;
    }
    const size_t keep = K - 1, cd = conv_dim, T = 16;
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)K));
    for (size_t t0 = 0; t0 < n; t0 += T) {
        size_t t1 = t0 + T < n ? t0 + T : n;
        size_t c = 0;
        for (; c + 8 <= cd; c += 8) {
            __m256 wv[CPU_GDN_CONV_MAX_K_AVX2];
            for (size_t j = 0; j < K; j++) wv[j] = _mm256_i32gather_ps(w + c * K + j, idx, 4);
            for (size_t t = t0; t < t1; t++) {
                __m256 acc = _mm256_setzero_ps();
                for (size_t j = 0; j < K; j++) {
                    size_t e = t + j;
                    const float *src = e < keep ? ring + e * cd + c : x + (e - keep) * cd + c;
                    acc = _mm256_fmadd_ps(wv[j], _mm256_loadu_ps(src), acc);
                }
                _mm256_storeu_ps(y + t * cd + c, v8_silu(acc));
            }
        }
        for (; c < cd; c++) {
            for (size_t t = t0; t < t1; t++) {
                float acc = 0.0f;
                for (size_t j = 0; j < K; j++) {
                    size_t e = t + j;
                    acc += w[c * K + j] * (e < keep ? ring[e * cd + c] : x[(e - keep) * cd + c]);
                }
                y[t * cd + c] = cpu_silu(acc);
            }
        }
    }
    cpu_gdn_ring_advance(ring, x, cd, K, n);
}

void cpu_gdn_qk_norm_avx2(float *qkv, const cpu_gdn_dims *d, size_t n) {
    size_t nk = d->n_k_heads, dk = d->k_dim, cd = cpu_gdn_conv_dim(d);
    float scale = (float)pow((double)dk, -0.5);
    for (size_t t = 0; t < n; t++) {
        for (size_t part = 0; part < 2; part++) {
            for (size_t kh = 0; kh < nk; kh++) {
                float *v = qkv + t * cd + part * nk * dk + kh * dk;
                float inv = 1.0f / sqrtf(v8_dot(v, v, dk) + CPU_GDN_L2_EPS);
                v8_scale(v, inv, dk);
                if (part == 0) v8_scale(v, scale, dk);
            }
        }
    }
}

/* One token of one head on columns [j, j + 8*NB) of S, NB vectors at a time. */
#define GDN_COLUMN_BLOCK(NB)                                                                       \
    do {                                                                                           \
        __m256 kvm[NB], acc[NB], delta[NB];                                                        \
        for (int b = 0; b < NB; b++) kvm[b] = acc[b] = _mm256_setzero_ps();                        \
        for (size_t i = 0; i < dk; i++) {                                                          \
            __m256 ki = _mm256_set1_ps(k[i]);                                                      \
            float *row = S + i * dv + j;                                                           \
            for (int b = 0; b < NB; b++) {                                                         \
                __m256 s = _mm256_mul_ps(_mm256_loadu_ps(row + 8 * b), vdec);                      \
                _mm256_storeu_ps(row + 8 * b, s);                                                  \
                kvm[b] = _mm256_fmadd_ps(s, ki, kvm[b]);                                           \
            }                                                                                      \
        }                                                                                          \
        for (int b = 0; b < NB; b++)                                                               \
            delta[b] = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + j + 8 * b), kvm[b]), vbeta); \
        for (size_t i = 0; i < dk; i++) {                                                          \
            __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);                           \
            float *row = S + i * dv + j;                                                           \
            for (int b = 0; b < NB; b++) {                                                         \
                __m256 s = _mm256_fmadd_ps(ki, delta[b], _mm256_loadu_ps(row + 8 * b));            \
                _mm256_storeu_ps(row + 8 * b, s);                                                  \
                acc[b] = _mm256_fmadd_ps(s, qi, acc[b]);                                           \
            }                                                                                      \
        }                                                                                          \
        for (int b = 0; b < NB; b++) _mm256_storeu_ps(ot + j + 8 * b, acc[b]);                     \
    } while (0)

void cpu_gdn_recurrent_avx2(float *o, float *state, const float *qkv, const float *g, const float *beta,
                            const cpu_gdn_dims *d, size_t n, size_t h_begin, size_t h_end) {
    const size_t nk = d->n_k_heads, nv = d->n_v_heads, dk = d->k_dim, dv = d->v_dim, cd = cpu_gdn_conv_dim(d);
    unsigned csr = v8_ftz_begin(); /* a state decayed for long without writes goes subnormal */
    for (size_t h = h_begin; h < h_end; h++) {
        size_t kh = cpu_gdn_key_head(d, h);
        float *S = state + h * dk * dv; /* [dk][dv] */
        for (size_t t = 0; t < n; t++) {
            const float *q = qkv + t * cd + kh * dk;
            const float *k = qkv + t * cd + nk * dk + kh * dk;
            const float *v = qkv + t * cd + 2 * nk * dk + h * dv;
            float *ot = o + (t * nv + h) * dv;
            float decay = expf(g[t * nv + h]), bt = beta[t * nv + h];
            __m256 vdec = _mm256_set1_ps(decay), vbeta = _mm256_set1_ps(bt);
            size_t j = 0;
            for (; j + 32 <= dv; j += 32) GDN_COLUMN_BLOCK(4);
            for (; j + 8 <= dv; j += 8) GDN_COLUMN_BLOCK(1);
            for (; j < dv; j++) { /* tail columns, one at a time as the oracle does them */
                float kv_mem = 0.0f;
                for (size_t i = 0; i < dk; i++) {
                    S[i * dv + j] *= decay;
                    kv_mem += S[i * dv + j] * k[i];
                }
                float dl = (v[j] - kv_mem) * bt, acc = 0.0f;
                for (size_t i = 0; i < dk; i++) {
                    S[i * dv + j] += k[i] * dl;
                    acc += S[i * dv + j] * q[i];
                }
                ot[j] = acc;
            }
        }
    }
    v8_ftz_end(csr);
}
