/*
 * attention_avx2.c: tiled one-pass attention. For one KV head and a block of
 * up to CPU_ATTN_ROW_BLOCK query rows, the cache is walked in tiles of
 * CPU_ATTN_KEY_TILE keys; each tile (K and V, 2 * 64 * hd floats) serves
 * every query head of the group and every row of the block while it is in
 * cache, with the usual online-softmax rescaling (running max m, running sum
 * l, accumulator rescaled by e^(m_old - m_new) when the max grows).
 */
#include <math.h>

#include "cpu/act.h"
#include "cpu/attention.h"
#include "cpu/simd_avx2.h"

/* st[0..nt) = e^(st - m), returning their sum */
static float attn_exp_tile(float *st, size_t nt, float m) {
    __m256 vm = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
    size_t j = 0;
    for (; j + 8 <= nt; j += 8) {
        __m256 e = v8_exp(_mm256_sub_ps(_mm256_loadu_ps(st + j), vm));
        _mm256_storeu_ps(st + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = v8_hsum(acc);
    for (; j < nt; j++) {
        st[j] = expf(st[j] - m);
        sum += st[j];
    }
    return sum;
}

void cpu_attn_forward_keys_avx2(float *out, const float *q, const float *gate, const float *k_cache,
                                const float *v_cache, const cpu_attn_dims *d, int64_t pos, size_t n, bool causal,
                                size_t n_keys, size_t h_begin, size_t h_end, float *scratch) {
    const size_t nh = d->n_head, nkv = d->n_head_kv, hd = d->head_dim, group = nh / nkv;
    const size_t RB = CPU_ATTN_ROW_BLOCK, T = CPU_ATTN_KEY_TILE;
    const float scale = (float)pow((double)hd, -0.5);
    float *acc = scratch;            /* [RB][group][hd] */
    float *mrun = acc + RB * group * hd; /* [RB][group] */
    float *lrun = mrun + RB * group;     /* [RB][group] */
    float *st = lrun + RB * group;       /* [T] */
    if (h_begin >= h_end) return;

    for (size_t kvh = h_begin / group; kvh <= (h_end - 1) / group; kvh++) {
        size_t ha = kvh * group > h_begin ? kvh * group : h_begin;
        size_t hb = (kvh + 1) * group < h_end ? (kvh + 1) * group : h_end;
        for (size_t r0 = 0; r0 < n; r0 += RB) {
            size_t rb = n - r0 < RB ? n - r0 : RB;
            for (size_t i = 0; i < rb * group; i++) {
                mrun[i] = -INFINITY;
                lrun[i] = 0.0f;
            }
            for (size_t i = 0; i < rb * group * hd; i++) acc[i] = 0.0f;
            size_t j_end = causal ? (size_t)pos + r0 + rb : n_keys;
            for (size_t j0 = 0; j0 < j_end; j0 += T) {
                size_t j1 = j0 + T < j_end ? j0 + T : j_end;
                for (size_t rr = 0; rr < rb; rr++) {
                    size_t vis = causal ? (size_t)pos + r0 + rr + 1 : n_keys;
                    if (vis <= j0) continue;
                    size_t jt = j1 < vis ? j1 : vis, nt = jt - j0;
                    for (size_t h = ha; h < hb; h++) {
                        size_t slot = rr * group + (h - kvh * group);
                        const float *qv = q + ((r0 + rr) * nh + h) * hd;
                        float tmax = -INFINITY;
                        for (size_t j = j0; j < jt; j++) {
                            float s = v8_dot(qv, k_cache + (j * nkv + kvh) * hd, hd) * scale;
                            st[j - j0] = s;
                            if (s > tmax) tmax = s;
                        }
                        float *a = acc + slot * hd;
                        float m_old = mrun[slot];
                        float m_new = tmax > m_old ? tmax : m_old;
                        if (m_new > m_old && m_old != -INFINITY) {
                            float corr = expf(m_old - m_new);
                            lrun[slot] *= corr;
                            v8_scale(a, corr, hd);
                        }
                        mrun[slot] = m_new;
                        lrun[slot] += attn_exp_tile(st, nt, m_new);
                        for (size_t j = j0; j < jt; j++) v8_axpy(a, st[j - j0], v_cache + (j * nkv + kvh) * hd, hd);
                    }
                }
            }
            for (size_t rr = 0; rr < rb; rr++) {
                for (size_t h = ha; h < hb; h++) {
                    size_t slot = rr * group + (h - kvh * group);
                    const float *a = acc + slot * hd;
                    const float *gv = gate + ((r0 + rr) * nh + h) * hd;
                    float *o = out + ((r0 + rr) * nh + h) * hd;
                    __m256 inv = _mm256_set1_ps(1.0f / lrun[slot]);
                    size_t i = 0;
                    for (; i + 8 <= hd; i += 8)
                        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(a + i), inv),
                                                              v8_sigmoid(_mm256_loadu_ps(gv + i))));
                    for (; i < hd; i++) o[i] = (a[i] * (1.0f / lrun[slot])) * cpu_sigmoid(gv[i]);
                }
            }
        }
    }
}

void cpu_attn_forward_avx2(float *out, const float *q, const float *gate, const float *k_cache,
                           const float *v_cache, const cpu_attn_dims *d, int64_t pos, size_t n, bool causal,
                           size_t h_begin, size_t h_end, float *scratch) {
    cpu_attn_forward_keys_avx2(out, q, gate, k_cache, v_cache, d, pos, n, causal, (size_t)pos + n, h_begin, h_end,
                               scratch);
}
