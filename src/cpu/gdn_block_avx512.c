/*
 * gdn_block_avx512.c: the AVX-512 level of the GDN block operator (issue 30:
 * a preview's block operator was ~8.5 ms of its GDN layers at 16 threads).
 * Chosen by gdn_block where quant_avx512_active(); `--simd avx2`
 * (CLOVER_NO_AVX512=1) keeps gdn_block_avx2.c and its bits.
 *
 * Where the AVX2 kernels spent their time (perf, 35B geometry, 32 rows, one
 * thread, ~1.9 ms): the read-out S^T q 28%, the scores (32 x 32 horizontal
 * dot products a head) 21%, the conv with its tap transpose 26%, the mix 14%,
 * the gated norm 6%, expf 3%. Here each part is a small register-blocked
 * product over 16-lane vectors with masks for every tail (no scalar tails:
 * a channel's or column's bits do not depend on where a run or block ends),
 * run by gdn_block_avx512 (gdn_block.c) as one pool task per key head:
 *  - conv: a block of 128 channels, its 2K-1 taps gathered once into a small
 *    transposed copy, rows outside the channels, FMAs in the oracle's order,
 *    silu with rcp14 + a Newton step instead of a division;
 *  - L2 norms; the key head's k and scaled q also go transposed (kt, qt);
 *  - dots q_i . k_j once per key head (its value heads share them) as
 *    q_r[t] x kt[t][:] broadcast FMAs, 8 rows x 32 keys in 16 accumulators,
 *    no horizontal sums; softmax over b + 1 slots in vectors (v16_exp, the
 *    polynomial of v8_exp);
 *  - read-out u = S^T q and mix o = P V + p_hist u, 8 rows x 32 columns in
 *    registers, column blocks outside the row groups so a block of S stays
 *    in L1 and S is read from memory once per head;
 *  - gates and the gated norm of the head's rows in the same task.
 * The last row group repeats the last row (not stored), so every row takes
 * the same code whatever b is; each output is a fixed chain over its head's
 * data, so the bits do not depend on the pool. They differ from the AVX2
 * level's by float rounding (FMAs, tree sums, the exp polynomial).
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "cpu/act.h"
#include "cpu/gdn_block.h"
#include "cpu/simd_avx512.h"

enum { ROWS = GDN_HEAD_ROWS_AVX512 };
_Static_assert(GDN_HEAD_ROWS_AVX512 == 8, "the head kernels write out eight rows");

static inline size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* x / (1 + e^-x), the quotient as x r with r = 1 / (1 + e^-x) from rcp14 and one Newton step (~1 ulp): vdivps
 * was the conv's bottleneck (one per 16 channels of a row, ~10 cycles each). e^-x is clamped (x < -88.7 gives
 * a huge value or +inf, and the denominator is held at FLT_MAX: x r ~ -3e-37 for the -0 of x / inf, where the Newton
 * step would make inf * 0 a NaN); a NaN x stays NaN through the product x r, so the clamped exp needs no masks. */
static inline __m512 v16_silu(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 den = _mm512_min_ps(_mm512_add_ps(one, v16_exp_clamped(_mm512_sub_ps(_mm512_setzero_ps(), x))),
                                     _mm512_set1_ps(3.40282347e38f));
    __m512 r = _mm512_rcp14_ps(den);
    r = _mm512_fmadd_ps(r, _mm512_fnmadd_ps(den, r, one), r); /* r + r (1 - den r) */
    return _mm512_mul_ps(x, r);
}

/* Taps up to this many (K <= 8) are gathered once per block of channels into a small transposed copy; longer
 * kernels gather each tap at each use (the same values, the same FMAs: the same bits). */
enum { TAPS_COPIED = 15, CONV_BLOCK = 128 };

/* The rows run outside the channels of a block (at most CONV_BLOCK): a row's loads and its store of y are
 * whole-block runs. Rows inside (one column of 16 channels down every row, as first written) made each load of x
 * follow a store of y at the same address mod 4 KiB (rows are cd floats apart: 4K aliasing, ~50 cycles a vector;
 * now ~20). */
void gdn_block_conv_avx512_range(float *y, const float *x, const float *ring, const float *conv_w,
                                 const float *conv_right, size_t cd, size_t c0, size_t c1, size_t K, size_t b) {
    const size_t keep = K - 1, n_taps = 2 * K - 1;
    const bool copied = n_taps <= TAPS_COPIED;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    float wt[TAPS_COPIED * CONV_BLOCK]; /* [tap][channel of the block] */
    for (size_t cb = c0; cb < c1; cb += CONV_BLOCK) {
        const size_t ce = c1 - cb < CONV_BLOCK ? c1 : cb + CONV_BLOCK;
        /* tap t of channel c: conv_w[c K + t] (t < K), conv_right[c (K - 1) + t - K] (t >= K) */
#define TAP(t, c, m)                                                                                               \
    ((t) < K ? _mm512_mask_i32gather_ps(                                                                           \
                   _mm512_setzero_ps(), m,                                                                         \
                   _mm512_add_epi32(_mm512_mullo_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32((int)(c))),        \
                                                       _mm512_set1_epi32((int)K)),                                 \
                                    _mm512_set1_epi32((int)(t))),                                                  \
                   conv_w, 4)                                                                                      \
             : _mm512_mask_i32gather_ps(                                                                           \
                   _mm512_setzero_ps(), m,                                                                         \
                   _mm512_add_epi32(_mm512_mullo_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32((int)(c))),        \
                                                       _mm512_set1_epi32((int)keep)),                              \
                                    _mm512_set1_epi32((int)((t) - K))),                                            \
                   conv_right, 4))
        if (copied)
            for (size_t c = cb; c < ce; c += 16)
                for (size_t t = 0; t < n_taps; t++)
                    _mm512_storeu_ps(wt + t * CONV_BLOCK + (c - cb), TAP(t, c, v16_lanes(ce - c)));
        for (size_t i = 0; i < b; i++)
            for (size_t c = cb; c < ce; c += 16) {
                const __mmask16 m = v16_lanes(ce - c);
                const float *wc = wt + (c - cb);
                __m512 acc = _mm512_setzero_ps();
                for (size_t t = 0; t < K; t++) { /* left taps over E = [ring; x] */
                    const size_t e = i + t;
                    const float *row = e < keep ? ring + e * cd : x + (e - keep) * cd;
                    const __m512 tw = copied ? _mm512_loadu_ps(wc + t * CONV_BLOCK) : TAP(t, c, m);
                    acc = _mm512_fmadd_ps(tw, _mm512_maskz_loadu_ps(m, row + c), acc);
                }
                for (size_t t = 1; t < K && i + t < b; t++) { /* right taps over x's next rows (0 past the block) */
                    const __m512 tw = copied ? _mm512_loadu_ps(wc + (keep + t) * CONV_BLOCK) : TAP(keep + t, c, m);
                    acc = _mm512_fmadd_ps(tw, _mm512_maskz_loadu_ps(m, x + (i + t) * cd + c), acc);
                }
                _mm512_mask_storeu_ps(y + i * cd + c, m, v16_silu(acc));
            }
#undef TAP
    }
}

void gdn_block_l2_avx512(float *v, size_t cd, size_t dk, size_t b, float *tr, size_t tr_stride, float tr_scale) {
    for (size_t i = 0; i < b; i++) {
        float *vi = v + i * cd;
        __m512 ss = _mm512_setzero_ps();
        for (size_t t = 0; t < dk; t += 16) {
            const __m512 e = _mm512_maskz_loadu_ps(v16_lanes(dk - t), vi + t);
            ss = _mm512_fmadd_ps(e, e, ss);
        }
        const __m512 inv = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(ss) + CPU_GDN_L2_EPS));
        for (size_t t = 0; t < dk; t += 16) {
            const __mmask16 m = v16_lanes(dk - t);
            _mm512_mask_storeu_ps(vi + t, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, vi + t), inv));
        }
        if (tr)
            for (size_t t = 0; t < dk; t++) tr[t * tr_stride + i] = vi[t] * tr_scale;
    }
    if (tr) /* columns past b (to the stride's multiple of 8) repeat the last row */
        for (size_t t = 0; t < dk; t++)
            for (size_t i = b; i < round_up(b, ROWS); i++) tr[t * tr_stride + i] = tr[t * tr_stride + b - 1];
}

size_t gdn_block_head_avx512_tmp_floats(const cpu_gdn_dims *d, size_t b) {
    /* kt [dk][kts], qt [dk][bp], then for a span of at most GDN_SPAN_AVX512 rows: dots [span][kts], weights
     * [b + 1][span], read-outs [span][round32(dv)], a row's slots [round16(b + 1)] (bp: b rounded up to 8, kts: to
     * 16): linear in b but for the dots and weights, b x 64 */
    const size_t bp = round_up(b, ROWS), kts = gdn_block_kt_stride(b), sp = bp < GDN_SPAN_AVX512 ? bp : GDN_SPAN_AVX512;
    return d->k_dim * (kts + bp) + sp * (kts + round_up(d->v_dim, 32)) + (b + 1) * sp + round_up(b + 1, 16);
}

/* Eight accumulator rows of two vectors each, written out (an array indexed by a loop that is not unrolled would
 * live on the stack). */
#define ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define ZERO(r) __m512 a##r##0 = _mm512_setzero_ps(), a##r##1 = a##r##0;
/* acc_r += bc[r] (k0 | k1): bc a row of 8 broadcast sources */
#define FMA2(r)                                                                                                    \
    {                                                                                                              \
        const __m512 qb = _mm512_set1_ps(bc[r]);                                                                   \
        a##r##0 = _mm512_fmadd_ps(qb, k0, a##r##0), a##r##1 = _mm512_fmadd_ps(qb, k1, a##r##1);                    \
    }

void gdn_block_dots_avx512(float *D, const float *q, size_t cd, const float *kt, size_t dk, size_t b, size_t n) {
    const size_t kts = gdn_block_kt_stride(b);
    for (size_t i0 = 0; i0 < n; i0 += ROWS) {
        const size_t R = n - i0 < ROWS ? n - i0 : ROWS;
        const float *qr[ROWS];
        for (size_t r = 0; r < ROWS; r++) qr[r] = q + (i0 + (r < R ? r : R - 1)) * cd;
        for (size_t jc = 0; jc < b; jc += 32) {
            const __mmask16 m0 = v16_lanes(b - jc), m1 = b - jc > 16 ? v16_lanes(b - jc - 16) : 0;
            ROWS8(ZERO)
            float bc[ROWS];
            for (size_t t = 0; t < dk; t++) {
                const __m512 k0 = _mm512_maskz_loadu_ps(m0, kt + t * kts + jc);
                const __m512 k1 = _mm512_maskz_loadu_ps(m1, kt + t * kts + jc + 16);
                for (size_t r = 0; r < ROWS; r++) bc[r] = qr[r][t];
                ROWS8(FMA2)
            }
#define STORE_D(r)                                                                                                 \
    _mm512_mask_storeu_ps(D + (i0 + r) * kts + jc, m0, a##r##0);                                                   \
    _mm512_mask_storeu_ps(D + (i0 + r) * kts + jc + 16, m1, a##r##1);
            ROWS8(STORE_D)
#undef STORE_D
        }
    }
}

void gdn_block_head_avx512(float *o, const float *qkv, const float *D, const float *qt, const float *a,
                           const float *z, const float *state, const gdn_block_weights *w, const cpu_gdn_dims *d,
                           size_t b, size_t s0, size_t n, float ln_ratio, size_t h, float *tmp) {
    const size_t nk = d->n_k_heads, nv = d->n_v_heads, dk = d->k_dim, dv = d->v_dim, cd = cpu_gdn_conv_dim(d);
    const size_t bp = round_up(b, ROWS), np = round_up(n, ROWS), dvp = round_up(dv, 32), kts = gdn_block_kt_stride(b);
    const float ls = w->logit_scale[h];
    const float *S = state + h * dk * dv, *vh = qkv + 2 * nk * dk + h * dv;
    float *W = tmp, *u = W + (b + 1) * np, *p = u + np * dvp;
    /* every row's slots: ls (q_i . k_j), the history slot, softmax; W[j][i] = p_ij / sum_i (rows past the span's
     * n repeat its last) */
    for (size_t i = 0; i < np; i++) {
        const size_t is = i < n ? i : n - 1;
        const __m512 lsv = _mm512_set1_ps(ls);
        for (size_t j = 0; j < b; j += 16) {
            const __mmask16 m = v16_lanes(b - j);
            _mm512_mask_storeu_ps(p + j, m, _mm512_mul_ps(lsv, _mm512_maskz_loadu_ps(m, D + is * kts + j)));
        }
        const float g = w->ssm_a[h] * cpu_softplus(a[(s0 + is) * nv + h] + w->dt_bias[h]);
        p[b] = (w->history_bias[h] + w->history_c[h] * g) + ln_ratio;
        __m512 mx = _mm512_set1_ps(-INFINITY), sum = _mm512_setzero_ps();
        for (size_t j = 0; j <= b; j += 16)
            mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), v16_lanes(b + 1 - j), p + j));
        const __m512 mxv = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
        for (size_t j = 0; j <= b; j += 16) {
            const __mmask16 m = v16_lanes(b + 1 - j);
            const __m512 e = _mm512_maskz_mov_ps(m, v16_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, p + j), mxv)));
            _mm512_mask_storeu_ps(p + j, m, e);
            sum = _mm512_add_ps(sum, e);
        }
        const float inv = 1.0f / _mm512_reduce_add_ps(sum);
        for (size_t j = 0; j <= b; j++) W[j * np + i] = p[j] * inv;
    }
    /* then read-out and mix by 32 columns: a column block of S (dk x 128 bytes) stays in L1 for every row group,
     * so S (64 KiB a head at 128 x 128) is read from memory once, not once per group */
    for (size_t c = 0; c < dv; c += 32) {
        const __mmask16 m0 = v16_lanes(dv - c), m1 = dv - c > 16 ? v16_lanes(dv - c - 16) : 0;
        for (size_t i0 = 0; i0 < n; i0 += ROWS) {
            const size_t R = n - i0 < ROWS ? n - i0 : ROWS;
            {   /* u[i] = S^T qt[:, s0 + i], t ascending from +0 */
                ROWS8(ZERO)
                for (size_t t = 0; t < dk; t++) {
                    const __m512 k0 = _mm512_maskz_loadu_ps(m0, S + t * dv + c);
                    const __m512 k1 = _mm512_maskz_loadu_ps(m1, S + t * dv + c + 16);
                    const float *bc = qt + t * bp + s0 + i0;
                    ROWS8(FMA2)
                }
#define STORE_U(r)                                                                                                 \
    _mm512_storeu_ps(u + (i0 + r) * dvp + c, a##r##0), _mm512_storeu_ps(u + (i0 + r) * dvp + c + 16, a##r##1);
                ROWS8(STORE_U)
#undef STORE_U
            }
            /* o[i] = sum_j W[j][i] v_j (j ascending from +0), then + W[b][i] u[i]; rows past R are not stored */
            ROWS8(ZERO)
            for (size_t j = 0; j < b; j++) {
                const __m512 k0 = _mm512_maskz_loadu_ps(m0, vh + j * cd + c);
                const __m512 k1 = _mm512_maskz_loadu_ps(m1, vh + j * cd + c + 16);
                const float *bc = W + j * np + i0;
                ROWS8(FMA2)
            }
#define HIST(r)                                                                                                    \
    {                                                                                                              \
        const __m512 wb = _mm512_set1_ps(W[b * np + i0 + r]);                                                      \
        a##r##0 = _mm512_fmadd_ps(wb, _mm512_loadu_ps(u + (i0 + r) * dvp + c), a##r##0);                           \
        a##r##1 = _mm512_fmadd_ps(wb, _mm512_loadu_ps(u + (i0 + r) * dvp + c + 16), a##r##1);                      \
        if (r < R) {                                                                                               \
            float *orow = o + ((s0 + i0 + r) * nv + h) * dv + c;                                                   \
            _mm512_mask_storeu_ps(orow, m0, a##r##0), _mm512_mask_storeu_ps(orow + 16, m1, a##r##1);               \
        }                                                                                                          \
    }
            ROWS8(HIST)
#undef HIST
        }
    }
    /* the gated norm of each row: (w (x / rms)) silu(z) */
    for (size_t i = s0; i < s0 + n; i++) {
        float *orow = o + (i * nv + h) * dv;
        const float *zrow = z + (i * nv + h) * dv;
        __m512 ss = _mm512_setzero_ps();
        for (size_t c = 0; c < dv; c += 16) {
            const __m512 e = _mm512_maskz_loadu_ps(v16_lanes(dv - c), orow + c);
            ss = _mm512_fmadd_ps(e, e, ss);
        }
        const __m512 inv = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(ss) / (float)dv + d->eps));
        for (size_t c = 0; c < dv; c += 16) {
            const __mmask16 m = v16_lanes(dv - c);
            const __m512 t = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w->norm_w + c),
                                           _mm512_mul_ps(_mm512_maskz_loadu_ps(m, orow + c), inv));
            _mm512_mask_storeu_ps(orow + c, m, _mm512_mul_ps(t, v16_silu(_mm512_maskz_loadu_ps(m, zrow + c))));
        }
    }
}
