/*
 * attention_avx512.c: the AVX-512 level of the tiled one-pass attention. It walks the cache like
 * attention_avx2.c (one KV head, a block of up to CPU_ATTN_ROW_BLOCK rows, key tiles of CPU_ATTN_KEY_TILE keys
 * at fixed multiples from key 0, the online softmax per tile) but blocks the arithmetic in registers: the AVX2
 * kernel does one dot per (query, key) (two loads per FMA and a horizontal sum) and a memory axpy per key and
 * query, ~25 GFLOP/s a thread. Here, per tile:
 *  - K is transposed once into kt[d][key] (T keys a row), so up to 8 queries x 32 keys are 16 zmm accumulators
 *    fed by two K loads and eight q[d] broadcasts per step of d (each query's q packed beside the others);
 *  - P.V takes up to 4 query heads of one row x 64 dims: 16 zmm accumulators kept over the tile's keys, four V
 *    loads per 16 FMAs.
 * Batch invariance (a row's bits do not depend on which rows, heads or slices share the call, nor on causal
 * bookkeeping beyond its own visible keys): every number a query produces is a function of that query and its
 * visible keys alone; blocking only decides which queries share a load:
 *  - score(q, k) = (q[0] k[0] + q[1] k[1] + ... in order of d, one FMA chain from 0) * hd^-0.5, whichever lane
 *    and block computed it (keys past the query's extent are computed or not, and masked out);
 *  - per tile [j0, j0 + T) clipped to the query's extent: the max of its scores, corr = e^(m_old - m_new) (1 when
 *    the max did not grow: x * 1 = x), p = e^(s - m_new), and the tile's sum of p as 16-lane vectors (lane = key
 *    - j0 mod 16, keys past the extent 0) added in key order and then reduced by one fixed tree;
 *  - acc[d] = acc[d] * corr, then += p_j v_j[d] for j in key order, one FMA chain per d.
 * The bits differ from the AVX2 level's (dot order, exp and sums by 16 lanes) within the same bound against the
 * two-pass oracle; the AVX2 level keeps its own kernel.
 */
#include <immintrin.h>
#include <math.h>

#include "cpu/attention.h"
#include "cpu/simd_avx512.h"

#define ATTN_INLINE static inline __attribute__((always_inline))

enum { T = CPU_ATTN_KEY_TILE, QS = 8 /* queries per score block */, QV = 4 /* query heads per P.V block */ };

/* kt[d * T + jj] = K[j0 + jj][d] for jj < nt, 0 for nt <= jj < nt rounded up to 16: 16 x 16 blocks transposed in
 * registers (a dims tail loaded and stored under a mask). */
static void attn_fill_kt(float *kt, const float *kb, size_t kstride, size_t hd, size_t nt) {
    for (size_t jb = 0; jb < nt; jb += 16) {
        for (size_t d0 = 0; d0 < hd; d0 += 16) {
            const __mmask16 dm = v16_lanes(hd - d0);
            __m512 r[16], t[16], u[16];
            for (size_t i = 0; i < 16; i++)
                r[i] = jb + i < nt ? _mm512_maskz_loadu_ps(dm, kb + (jb + i) * kstride + d0) : _mm512_setzero_ps();
            for (int i = 0; i < 16; i += 2) {
                t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
            }
            /* u[4g + c]: rows 4g..4g+3 of columns c, c + 4, c + 8, c + 12 (one per 128-bit lane) */
            for (int g = 0; g < 16; g += 4) {
                __m512d a = _mm512_castps_pd(t[g]), b = _mm512_castps_pd(t[g + 1]);
                __m512d c = _mm512_castps_pd(t[g + 2]), e = _mm512_castps_pd(t[g + 3]);
                u[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
                u[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
                u[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, e));
                u[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, e));
            }
            const size_t nd = hd - d0 < 16 ? hd - d0 : 16;
            for (int c = 0; c < 4; c++) {
                __m512 x0 = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(2, 0, 2, 0));
                __m512 x1 = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 1, 3, 1));
                __m512 y0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(2, 0, 2, 0));
                __m512 y1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(3, 1, 3, 1));
                __m512 col[4] = {_mm512_shuffle_f32x4(x0, y0, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(x1, y1, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(x0, y0, _MM_SHUFFLE(3, 1, 3, 1)),
                                 _mm512_shuffle_f32x4(x1, y1, _MM_SHUFFLE(3, 1, 3, 1))};
                for (size_t m = 0; m < 4; m++) { /* col[m] is column c + 4 m */
                    size_t dd = (size_t)c + 4 * m;
                    if (dd < nd) _mm512_storeu_ps(kt + (d0 + dd) * T + jb, col[m]);
                }
            }
        }
    }
}

/* Scores of Q queries (qt[d * QS + qi], packed) over key vectors [0, nvec) of kt: sp[qi][16 v + l] =
 * (sum over d of q[d] kt[d][16 v + l], in order of d) * scale. */
ATTN_INLINE void attn_scores(const int Q, const float *qt, const float *kt, size_t hd, size_t nvec, float scale,
                             float *const *sp) {
    const __m512 vs = _mm512_set1_ps(scale);
    size_t v = 0;
    for (; v + 2 <= nvec; v += 2) {
        __m512 a0[QS], a1[QS];
#pragma GCC unroll 8
        for (int qi = 0; qi < Q; qi++) a0[qi] = a1[qi] = _mm512_setzero_ps();
        const float *kp = kt + 16 * v, *qp = qt;
        for (size_t d = 0; d < hd; d++, kp += T, qp += QS) {
            __m512 k0 = _mm512_loadu_ps(kp), k1 = _mm512_loadu_ps(kp + 16);
#pragma GCC unroll 8
            for (int qi = 0; qi < Q; qi++) {
                __m512 b = _mm512_set1_ps(qp[qi]);
                a0[qi] = _mm512_fmadd_ps(b, k0, a0[qi]);
                a1[qi] = _mm512_fmadd_ps(b, k1, a1[qi]);
            }
        }
#pragma GCC unroll 8
        for (int qi = 0; qi < Q; qi++) {
            _mm512_storeu_ps(sp[qi] + 16 * v, _mm512_mul_ps(a0[qi], vs));
            _mm512_storeu_ps(sp[qi] + 16 * v + 16, _mm512_mul_ps(a1[qi], vs));
        }
    }
    if (v < nvec) {
        __m512 a0[QS];
#pragma GCC unroll 8
        for (int qi = 0; qi < Q; qi++) a0[qi] = _mm512_setzero_ps();
        const float *kp = kt + 16 * v, *qp = qt;
        for (size_t d = 0; d < hd; d++, kp += T, qp += QS) {
            __m512 k0 = _mm512_loadu_ps(kp);
#pragma GCC unroll 8
            for (int qi = 0; qi < Q; qi++) a0[qi] = _mm512_fmadd_ps(_mm512_set1_ps(qp[qi]), k0, a0[qi]);
        }
#pragma GCC unroll 8
        for (int qi = 0; qi < Q; qi++) _mm512_storeu_ps(sp[qi] + 16 * v, _mm512_mul_ps(a0[qi], vs));
    }
}

static void attn_scores_q(int q, const float *qt, const float *kt, size_t hd, size_t nvec, float scale,
                          float *const *sp) {
    switch (q) {
    case 1: attn_scores(1, qt, kt, hd, nvec, scale, sp); break;
    case 2: attn_scores(2, qt, kt, hd, nvec, scale, sp); break;
    case 3: attn_scores(3, qt, kt, hd, nvec, scale, sp); break;
    case 4: attn_scores(4, qt, kt, hd, nvec, scale, sp); break;
    case 5: attn_scores(5, qt, kt, hd, nvec, scale, sp); break;
    case 6: attn_scores(6, qt, kt, hd, nvec, scale, sp); break;
    case 7: attn_scores(7, qt, kt, hd, nvec, scale, sp); break;
    default: attn_scores(8, qt, kt, hd, nvec, scale, sp); break;
    }
}

/* acc[qi][d0 ..] = acc * corr[qi] + sum over j < nk of p[qi * T + j] * V[j][d0 ..], for Q heads of a row (acc and
 * p of consecutive heads hd and T apart) and NV vectors of dims (mk: their lanes inside hd). */
ATTN_INLINE void attn_pv(const int Q, const int NV, float *acc, size_t hd, size_t d0, const __mmask16 *mk,
                         const float *p, const float *corr, const float *vb, size_t vstride, size_t nk) {
    __m512 a[QV][4];
#pragma GCC unroll 4
    for (int qi = 0; qi < Q; qi++) {
        __m512 c = _mm512_set1_ps(corr[qi]);
#pragma GCC unroll 4
        for (int vi = 0; vi < NV; vi++)
            a[qi][vi] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk[vi], acc + qi * hd + d0 + 16 * vi), c);
    }
    for (size_t j = 0; j < nk; j++) {
        const float *vr = vb + j * vstride + d0;
        __m512 vv[4];
#pragma GCC unroll 4
        for (int vi = 0; vi < NV; vi++) vv[vi] = _mm512_maskz_loadu_ps(mk[vi], vr + 16 * vi);
#pragma GCC unroll 4
        for (int qi = 0; qi < Q; qi++) {
            __m512 pj = _mm512_set1_ps(p[qi * T + j]);
#pragma GCC unroll 4
            for (int vi = 0; vi < NV; vi++) a[qi][vi] = _mm512_fmadd_ps(pj, vv[vi], a[qi][vi]);
        }
    }
#pragma GCC unroll 4
    for (int qi = 0; qi < Q; qi++)
#pragma GCC unroll 4
        for (int vi = 0; vi < NV; vi++) _mm512_mask_storeu_ps(acc + qi * hd + d0 + 16 * vi, mk[vi], a[qi][vi]);
}

#define ATTN_PV_NV(Q)                                                                    \
    switch (nv) {                                                                        \
    case 1: attn_pv(Q, 1, acc, hd, d0, mk, p, corr, vb, vstride, nk); break;             \
    case 2: attn_pv(Q, 2, acc, hd, d0, mk, p, corr, vb, vstride, nk); break;             \
    case 3: attn_pv(Q, 3, acc, hd, d0, mk, p, corr, vb, vstride, nk); break;             \
    default: attn_pv(Q, 4, acc, hd, d0, mk, p, corr, vb, vstride, nk); break;            \
    }

/* attn_pv over all of hd in chunks of 64 dims (the last under masks) */
static void attn_pv_q(int q, float *acc, size_t hd, const float *p, const float *corr, const float *vb,
                      size_t vstride, size_t nk) {
    for (size_t d0 = 0; d0 < hd; d0 += 64) {
        const size_t rem = hd - d0;
        const int nv = rem >= 64 ? 4 : (int)((rem + 15) / 16);
        __mmask16 mk[4];
        for (int vi = 0; vi < 4; vi++) mk[vi] = rem > 16 * (size_t)vi ? v16_lanes(rem - 16 * (size_t)vi) : 0;
        switch (q) {
        case 1: ATTN_PV_NV(1) break;
        case 2: ATTN_PV_NV(2) break;
        case 3: ATTN_PV_NV(3) break;
        default: ATTN_PV_NV(4) break;
        }
    }
}

/* The online-softmax step of one query over its nk (>= 1) keys of the tile: s[0..nk) becomes p (s[nk..] up to
 * the next 16 becomes 0), *m and *l advance, and the accumulator's factor is returned. */
static float attn_softmax_tile(float *s, size_t nk, float *m, float *l) {
    const size_t nvq = (nk + 15) / 16;
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (size_t v = 0; v < nvq; v++) /* max(x, mx) is mx where x is NaN: NaN scores are skipped as in AVX2 */
        mx = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), v16_lanes(nk - 16 * v), s + 16 * v), mx);
    const float tmax = _mm512_reduce_max_ps(mx), m_old = *m;
    const float m_new = tmax > m_old ? tmax : m_old;
    float corr = 1.0f;
    if (m_new > m_old && m_old != -INFINITY) {
        corr = expf(m_old - m_new);
        *l *= corr;
    }
    *m = m_new;
    const __m512 vm = _mm512_set1_ps(m_new);
    __m512 sum = _mm512_setzero_ps();
    for (size_t v = 0; v < nvq; v++) {
        __m512 e = _mm512_maskz_mov_ps(v16_lanes(nk - 16 * v), v16_exp(_mm512_sub_ps(_mm512_loadu_ps(s + 16 * v), vm)));
        _mm512_storeu_ps(s + 16 * v, e);
        sum = _mm512_add_ps(sum, e);
    }
    *l += _mm512_reduce_add_ps(sum);
    return corr;
}

/* 1 / (1 + e^-x) */
ATTN_INLINE __m512 v16_sigmoid(__m512 x) {
    __m512 e = v16_exp(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

void cpu_attn_forward_keys_avx512(float *out, const float *q, const float *gate, const float *k_cache,
                                  const float *v_cache, const cpu_attn_dims *d, int64_t pos, size_t n, bool causal,
                                  size_t n_keys, size_t h_begin, size_t h_end, float *scratch) {
    const size_t nh = d->n_head, nkv = d->n_head_kv, hd = d->head_dim, group = nh / nkv;
    const size_t RB = CPU_ATTN_ROW_BLOCK, kvs = nkv * hd;
    const float scale = (float)pow((double)hd, -0.5);
    float *acc = scratch;                  /* [RB][group][hd] */
    float *mrun = acc + RB * group * hd;   /* [RB][group] */
    float *lrun = mrun + RB * group;       /* [RB][group] */
    float *corr = lrun + RB * group;       /* [RB][group] */
    float *st = corr + RB * group;         /* [RB][group][T]: a tile's scores, then p */
    float *kt = st + RB * group * T;       /* [hd][T]: the tile's K transposed */
    float *qt = kt + hd * T;               /* [hd][QS]: a score block's queries, packed */
    if (h_begin >= h_end) return;

    for (size_t kvh = h_begin / group; kvh <= (h_end - 1) / group; kvh++) {
        const size_t ha = kvh * group > h_begin ? kvh * group : h_begin;
        const size_t hb = (kvh + 1) * group < h_end ? (kvh + 1) * group : h_end, nhq = hb - ha;
        for (size_t r0 = 0; r0 < n; r0 += RB) {
            const size_t rb = n - r0 < RB ? n - r0 : RB;
            for (size_t i = 0; i < rb * group; i++) {
                mrun[i] = -INFINITY;
                lrun[i] = 0.0f;
            }
            for (size_t i = 0; i < rb * group * hd; i++) acc[i] = 0.0f;
            const size_t j_end = causal ? (size_t)pos + r0 + rb : n_keys;
            for (size_t j0 = 0; j0 < j_end; j0 += T) {
                const size_t j1 = j0 + T < j_end ? j0 + T : j_end, nt = j1 - j0;
                /* rows that see a key of this tile: causal extents grow with the row, so they are a suffix */
                const size_t rr0 = causal && j0 > (size_t)pos + r0 ? j0 - ((size_t)pos + r0) : 0;
                if (rr0 >= rb) continue;
                attn_fill_kt(kt, k_cache + (j0 * nkv + kvh) * hd, kvs, hd, nt);
                /* scores, QS queries (row-major over the active rows' heads) at a time */
                const size_t nq = (rb - rr0) * nhq;
                for (size_t i0 = 0; i0 < nq; i0 += QS) {
                    const int nb = (int)(nq - i0 < QS ? nq - i0 : QS);
                    float *sp[QS];
                    for (int b = 0; b < nb; b++) {
                        size_t rr = rr0 + (i0 + (size_t)b) / nhq, h = ha + (i0 + (size_t)b) % nhq;
                        const float *qv = q + ((r0 + rr) * nh + h) * hd;
                        for (size_t e = 0; e < hd; e++) qt[e * QS + (size_t)b] = qv[e];
                        sp[b] = st + (rr * group + (h - kvh * group)) * T;
                    }
                    attn_scores_q(nb, qt, kt, hd, (nt + 15) / 16, scale, sp);
                }
                for (size_t rr = rr0; rr < rb; rr++) {
                    const size_t vis = causal ? (size_t)pos + r0 + rr + 1 : n_keys;
                    const size_t nk = (j1 < vis ? j1 : vis) - j0;
                    const size_t s0 = rr * group + (ha - kvh * group);
                    for (size_t i = s0; i < s0 + nhq; i++)
                        corr[i] = attn_softmax_tile(st + i * T, nk, mrun + i, lrun + i);
                    for (size_t i = 0; i < nhq; i += QV)
                        attn_pv_q((int)(nhq - i < QV ? nhq - i : QV), acc + (s0 + i) * hd, hd, st + (s0 + i) * T,
                                  corr + s0 + i, v_cache + (j0 * nkv + kvh) * hd, kvs, nk);
                }
            }
            for (size_t rr = 0; rr < rb; rr++) {
                for (size_t h = ha; h < hb; h++) {
                    const size_t slot = rr * group + (h - kvh * group);
                    const float *a = acc + slot * hd, *gv = gate + ((r0 + rr) * nh + h) * hd;
                    float *o = out + ((r0 + rr) * nh + h) * hd;
                    const __m512 inv = _mm512_set1_ps(1.0f / lrun[slot]);
                    for (size_t i = 0; i < hd; i += 16) {
                        const __mmask16 mk = v16_lanes(hd - i);
                        __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, a + i), inv);
                        __m512 g = v16_sigmoid(_mm512_maskz_loadu_ps(mk, gv + i));
                        _mm512_mask_storeu_ps(o + i, mk, _mm512_mul_ps(x, g));
                    }
                }
            }
        }
    }
}
