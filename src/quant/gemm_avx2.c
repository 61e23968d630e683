/*
 * gemm_avx2.c: the integer multi-row kernel (three or more activation rows
 * against Q8_0 / Q4_K / Q5_K / Q6_K weights): prompt chunks, previews, block
 * commits. The activation rows arrive already in 8 bits (quant_act_*, the
 * blocks decode uses); the weights are decoded once per tile into the byte
 * vectors vpmaddubsw takes (codes split from their nibbles and high bits,
 * the sub-block scales broadcast into the int16 vectors vpmaddwd takes) and
 * that tile is then dotted with every activation row.
 *
 * Why it is bit-identical to decode: for each (weight row, activation row)
 * the kernel performs act_avx2.c's integer dot (same instructions, so the
 * same 8 int32 lanes per block) and the same float operations in the same
 * order (the per-block scale product, the per-lane FMA into the same
 * accumulator, the same horizontal sums at the end). Only the weight
 * decoding moved out of the loop. So a row's result equals the 1-row
 * mat-vec's bit for bit, whatever else is in the pass and wherever the row
 * falls in a tile: batch invariance by construction (test_gemm checks it).
 *
 * Tiles: TILE_O = 4 weight rows x KB blocks (2048 values of K-quants, 2048
 * of Q8_0: ~18 KiB decoded, L1) are decoded, then the activation rows run
 * against them one by one with the 4 rows' accumulators in registers (Q8_0:
 * three activation rows against two weight rows at a time, its own comment).
 * Activation rows are taken X_BLOCK = 64 at a time, so for n_in beyond one
 * tile the accumulators of the block wait in a small array (16 KiB) while
 * the next columns are decoded; the float sum over blocks stays in k order.
 */
#include <immintrin.h>
#include <stddef.h>

#include "quant/matmul_internal.h"
#include "quant/quant_avx2_inline.h"
#include "quant/quant_internal.h"

enum {
    TILE_O = 4,         /* weight rows per tile */
    KB_K = 8,           /* K-quant blocks (of 256) per tile */
    KB_8 = 64,          /* Q8_0 blocks (of 32) per tile: even, so block parity is global */
    X_BLOCK = 64,       /* activation rows per pass over a tile */
};

/* Accumulators of one (activation row, weight row) pair kept between column
 * tiles: Q8_0's two (even and odd blocks), the K-quants' sum and min sum. */
typedef struct pair_acc {
    __m256 a, b;
} pair_acc;

/* ---- Q4_K / Q5_K ---- */

typedef struct k4_tile { /* one decoded block of one weight row */
    __m256i codes[8];    /* chunk c: [2c] low-nibble sub-block, [2c+1] high */
    __m256i sc[8];       /* sub-block j's scale in every int16 lane pair (k4_chunk's shuffle) */
    __m128i mins;        /* the 8 mins as int16 */
    float d, dmin;
    float pad[2];
} k4_tile;

static void k4_decode(const uint8_t *blk, size_t qs_off, ptrdiff_t qh_off, k4_tile *t) {
    t->d = load_f16(blk);
    t->dmin = load_f16(blk + 2);
    const __m256i sm = k4_scales_mins(blk + 4);
    t->mins = _mm256_extracti128_si256(sm, 1);
    const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
    for (int j = 0; j < 8; j++) t->sc[j] = _mm256_shuffle_epi8(scales, pick16(j));
    const __m256i h = qh_off >= 0 ? load_256(blk + qh_off) : _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        k4_codes(blk + qs_off, h, c, qh_off >= 0, &t->codes[2 * c], &t->codes[2 * c + 1]);
    }
}

/* Integer sum of one decoded block against one activation block: the lanes
 * of act_avx2.c's k4_row (chunk by chunk, low then high). */
static inline __m256i k4_isum(const k4_tile *t, const int8_t *xq) {
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const __m256i plo = _mm256_maddubs_epi16(t->codes[2 * c], load_256(xq + 64 * c));
        const __m256i phi = _mm256_maddubs_epi16(t->codes[2 * c + 1], load_256(xq + 64 * c + 32));
        const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(plo, t->sc[2 * c]), _mm256_madd_epi16(phi, t->sc[2 * c + 1]));
        sum = c == 0 ? s : _mm256_add_epi32(sum, s);
    }
    return sum;
}

static void k4_tile_rows(const matmul_job *j, size_t o, size_t nr, size_t kb0, size_t nkb, size_t xb, size_t xe,
                         k4_tile *tile, pair_acc *acc, int last, size_t qs_off, ptrdiff_t qh_off, size_t bsz) {
    for (size_t i = 0; i < TILE_O; i++) {
        const uint8_t *row = j->w + (o + (i < nr ? i : 0)) * j->row_bytes + kb0 * bsz;
        for (size_t b = 0; b < nkb; b++) k4_decode(row + b * bsz, qs_off, qh_off, &tile[i * KB_K + b]);
    }
    for (size_t r = xb; r < xe; r++) {
        const act_q8_k *x = (const act_q8_k *)(const void *)(j->xq + r * j->xq_bytes) + kb0;
        pair_acc *pa = acc + (r - xb) * TILE_O;
        __m256 a[TILE_O];
        __m128 m[TILE_O];
        for (size_t i = 0; i < TILE_O; i++) {
            a[i] = kb0 ? pa[i].a : _mm256_setzero_ps();
            m[i] = kb0 ? _mm256_castps256_ps128(pa[i].b) : _mm_setzero_ps();
        }
        for (size_t b = 0; b < nkb; b++, x++) {
            const float dx = x->d;
            const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums),
                                              _mm_loadu_si128((const __m128i *)(x->bsums + 8)));
            for (size_t i = 0; i < TILE_O; i++) {
                const k4_tile *t = &tile[i * KB_K + b];
                const float d = dx * t->d, dmin = dx * t->dmin;
                m[i] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm_madd_epi16(t->mins, bs)), m[i]);
                a[i] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(k4_isum(t, x->qs)), a[i]);
            }
        }
        if (!last) {
            for (size_t i = 0; i < TILE_O; i++) pa[i].a = a[i], pa[i].b = _mm256_castps128_ps256(m[i]);
            continue;
        }
        float *yr = j->y + r * j->n_out + o;
        for (size_t i = 0; i < nr; i++) {
            __m128 m4s = _mm_add_ps(m[i], _mm_movehl_ps(m[i], m[i]));
            m4s = _mm_add_ss(m4s, _mm_movehdup_ps(m4s));
            yr[i] = hsum_ps(a[i]) - _mm_cvtss_f32(m4s);
        }
    }
}

/* ---- Q6_K ---- */

typedef struct q6_tile {
    __m256i codes[8]; /* half h, group k at [4h + k]: codes 0..63 */
    __m256i sc[8];    /* the scales of group [4h + k] as act_avx2.c shuffles them */
    __m256i sc16;     /* the 16 scales as int16 (the bias) */
    float d;
    float pad[7];
} q6_tile;

static void q6_decode(const block_q6_k *b, q6_tile *t) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const __m256i pick[4] = {_mm256_setr_m128i(_mm256_castsi256_si128(pick16(0)), _mm256_castsi256_si128(pick16(1))),
                             _mm256_setr_m128i(_mm256_castsi256_si128(pick16(2)), _mm256_castsi256_si128(pick16(3))),
                             _mm256_setr_m128i(_mm256_castsi256_si128(pick16(4)), _mm256_castsi256_si128(pick16(5))),
                             _mm256_setr_m128i(_mm256_castsi256_si128(pick16(6)), _mm256_castsi256_si128(pick16(7)))};
    t->d = load_f16(b->d);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    t->sc16 = sc16;
    for (int h = 0; h < 2; h++) {
        const __m256i sch =
            _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
        const __m256i a = load_256(b->ql + 64 * h), c = load_256(b->ql + 64 * h + 32), hb = load_256(b->qh + 32 * h);
        t->codes[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2));
        t->codes[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2));
        t->codes[4 * h + 2] =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(hb, m2));
        t->codes[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
                                              _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2));
        for (int k = 0; k < 4; k++) t->sc[4 * h + k] = _mm256_shuffle_epi8(sch, pick[k]);
    }
}

static inline __m256i q6_isum(const q6_tile *t, const act_q8_k *x) {
    __m256i sum = _mm256_slli_epi32(_mm256_madd_epi16(t->sc16, load_256(x->bsums)), 5);
    sum = _mm256_sub_epi32(_mm256_setzero_si256(), sum);
    for (int g = 0; g < 8; g++) {
        const __m256i p = _mm256_maddubs_epi16(t->codes[g], load_256(x->qs + 32 * g));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, t->sc[g]));
    }
    return sum;
}

static void q6_tile_rows(const matmul_job *j, size_t o, size_t nr, size_t kb0, size_t nkb, size_t xb, size_t xe,
                         q6_tile *tile, pair_acc *acc, int last) {
    for (size_t i = 0; i < TILE_O; i++) {
        const block_q6_k *row = (const block_q6_k *)(const void *)(j->w + (o + (i < nr ? i : 0)) * j->row_bytes) + kb0;
        for (size_t b = 0; b < nkb; b++) q6_decode(row + b, &tile[i * KB_K + b]);
    }
    for (size_t r = xb; r < xe; r++) {
        const act_q8_k *x = (const act_q8_k *)(const void *)(j->xq + r * j->xq_bytes) + kb0;
        pair_acc *pa = acc + (r - xb) * TILE_O;
        __m256 a[TILE_O];
        for (size_t i = 0; i < TILE_O; i++) a[i] = kb0 ? pa[i].a : _mm256_setzero_ps();
        for (size_t b = 0; b < nkb; b++, x++) {
            const float dx = x->d;
            for (size_t i = 0; i < TILE_O; i++) {
                const q6_tile *t = &tile[i * KB_K + b];
                a[i] = _mm256_fmadd_ps(_mm256_set1_ps(t->d * dx), _mm256_cvtepi32_ps(q6_isum(t, x)), a[i]);
            }
        }
        if (!last) {
            for (size_t i = 0; i < TILE_O; i++) pa[i].a = a[i];
            continue;
        }
        float *yr = j->y + r * j->n_out + o;
        for (size_t i = 0; i < nr; i++) yr[i] = hsum_ps(a[i]);
    }
}

/* ---- Q8_0 ---- */

/* The activation rows of a Q8_0 product arrive planar (matmul.c,
 * gemm_q8_stage): every row's codes as aligned 32-byte blocks, then every
 * row's scales as floats. So a code load never splits a cache line, and
 * eight consecutive blocks' scales are one vector load.
 *
 * Per (weight row, activation row, block) decode performs vpsignb,
 * vpmaddubsw, vpmaddwd, a convert, the scalar product d_w * d_x and an FMA.
 * Here the products d_w * d_x of a tile (the same IEEE products, eight per
 * vmulps) are formed once per activation row into `prod`, and an FMA takes
 * its product with a broadcast load: five vector operations a pair, and the
 * tile's vectors of two weight rows are loaded once for three activation
 * rows (6 accumulators in registers). Decode's two accumulators (even and
 * odd blocks) are two independent chains, so each is run to the end of the
 * tile on its own, in block order: the same operations in the same order. */
enum { Q8_XR = 3, Q8_WR = 2 };

typedef struct q8_tile {
    __m256i absw[TILE_O * KB_8]; /* |w| (vpsignb(w, w)), [row * KB_8 + block] */
    __m256i w[TILE_O * KB_8];    /* w, for the sign of x */
    float d[TILE_O * KB_8];      /* the blocks' scales */
    float prod[Q8_XR * TILE_O * KB_8]; /* d_w * d_x: [x row][weight row][block] */
} q8_tile;

/* Codes and scales of planar row r, block 0 (gemm_q8_stage's layout). */
static inline const int8_t *q8_codes(const matmul_job *j, size_t r) {
    return (const int8_t *)j->xq + r * (j->n_in / QUANT_QK8_0) * QUANT_QK8_0;
}
static inline const float *q8_scales(const matmul_job *j, size_t r) {
    const size_t nb = j->n_in / QUANT_QK8_0;
    return (const float *)(const void *)(j->xq + j->n_rows * nb * QUANT_QK8_0) + r * nb;
}

/* One parity chain of weight rows i0, i0 + 1 against the nx (<= 3) rows of
 * xs: blocks p, p + 2, ... < nkb, accumulated into acc[x][w]. */
static inline __attribute__((always_inline)) void q8_chain(const q8_tile *tile, size_t i0, const int8_t *const xs[Q8_XR], size_t nx, size_t p,
                            size_t nkb, __m256 acc[Q8_XR][Q8_WR]) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 a00 = acc[0][0], a01 = acc[0][1], a10 = acc[1][0], a11 = acc[1][1], a20 = acc[2][0], a21 = acc[2][1];
    const __m256i *aw0 = tile->absw + i0 * KB_8, *aw1 = aw0 + KB_8, *w0 = tile->w + i0 * KB_8, *w1 = w0 + KB_8;
    const float *pr0 = tile->prod + i0 * KB_8, *pr1 = pr0 + KB_8;
#define Q8_PAIR(accv, aw, wv, qx, pr)                                                              \
    accv = _mm256_fmadd_ps(                                                                        \
        _mm256_broadcast_ss(pr),                                                                   \
        _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(qx, wv)), ones)), accv)
    for (size_t b = p; b < nkb; b += 2) {
        const __m256i u0 = aw0[b], v0 = w0[b], u1 = aw1[b], v1 = w1[b];
        const __m256i x0 = _mm256_load_si256((const __m256i *)(const void *)(xs[0] + 32 * b));
        Q8_PAIR(a00, u0, v0, x0, pr0 + b);
        Q8_PAIR(a01, u1, v1, x0, pr1 + b);
        if (nx > 1) {
            const __m256i x1 = _mm256_load_si256((const __m256i *)(const void *)(xs[1] + 32 * b));
            Q8_PAIR(a10, u0, v0, x1, pr0 + TILE_O * KB_8 + b);
            Q8_PAIR(a11, u1, v1, x1, pr1 + TILE_O * KB_8 + b);
        }
        if (nx > 2) {
            const __m256i x2 = _mm256_load_si256((const __m256i *)(const void *)(xs[2] + 32 * b));
            Q8_PAIR(a20, u0, v0, x2, pr0 + 2 * TILE_O * KB_8 + b);
            Q8_PAIR(a21, u1, v1, x2, pr1 + 2 * TILE_O * KB_8 + b);
        }
    }
#undef Q8_PAIR
    acc[0][0] = a00, acc[0][1] = a01, acc[1][0] = a10, acc[1][1] = a11, acc[2][0] = a20, acc[2][1] = a21;
}

static void q8_tile_rows(const matmul_job *j, size_t o, size_t nr, size_t kb0, size_t nkb, size_t xb, size_t xe,
                         q8_tile *tile, pair_acc *acc, int last) {
    for (size_t i = 0; i < TILE_O; i++) {
        const block_q8_0 *row = (const block_q8_0 *)(const void *)(j->w + (o + (i < nr ? i : 0)) * j->row_bytes) + kb0;
        for (size_t b = 0; b < nkb; b++) {
            const __m256i qw = load_256(row[b].qs);
            tile->w[i * KB_8 + b] = qw;
            tile->absw[i * KB_8 + b] = _mm256_sign_epi8(qw, qw);
            tile->d[i * KB_8 + b] = load_f16(row[b].d);
        }
    }
    for (size_t r0 = xb; r0 < xe; r0 += Q8_XR) {
        const size_t nx = xe - r0 < Q8_XR ? xe - r0 : Q8_XR;
        const int8_t *xs[Q8_XR];
        for (size_t x = 0; x < Q8_XR; x++) xs[x] = q8_codes(j, r0 + (x < nx ? x : 0)) + 32 * kb0;
        for (size_t x = 0; x < nx; x++) { /* prod[x][i][b] = d_w[i][b] * d_x[b] */
            const float *dx = q8_scales(j, r0 + x) + kb0;
            float *pr = tile->prod + x * TILE_O * KB_8;
            size_t b = 0;
            for (; b + 8 <= nkb; b += 8) {
                const __m256 vx = _mm256_loadu_ps(dx + b);
                for (size_t i = 0; i < TILE_O; i++)
                    _mm256_storeu_ps(pr + i * KB_8 + b, _mm256_mul_ps(_mm256_loadu_ps(tile->d + i * KB_8 + b), vx));
            }
            for (; b < nkb; b++)
                for (size_t i = 0; i < TILE_O; i++) pr[i * KB_8 + b] = tile->d[i * KB_8 + b] * dx[b];
        }
        for (size_t i0 = 0; i0 < TILE_O; i0 += Q8_WR) {
            for (size_t p = 0; p < 2; p++) { /* the even blocks' chain (decode's acc0), then the odd (acc1) */
                __m256 a[Q8_XR][Q8_WR];
                for (size_t x = 0; x < Q8_XR; x++)
                    for (size_t w = 0; w < Q8_WR; w++) {
                        const pair_acc *pa = &acc[(r0 + (x < nx ? x : 0) - xb) * TILE_O + i0 + w];
                        a[x][w] = kb0 ? (p ? pa->b : pa->a) : _mm256_setzero_ps();
                    }
                switch (nx) { /* a constant nx: the branches leave the loop */
                case 1: q8_chain(tile, i0, xs, 1, p, nkb, a); break;
                case 2: q8_chain(tile, i0, xs, 2, p, nkb, a); break;
                default: q8_chain(tile, i0, xs, Q8_XR, p, nkb, a); break;
                }
                for (size_t x = 0; x < nx; x++)
                    for (size_t w = 0; w < Q8_WR; w++) {
                        pair_acc *pa = &acc[(r0 + x - xb) * TILE_O + i0 + w];
                        if (p) pa->b = a[x][w];
                        else pa->a = a[x][w];
                    }
            }
        }
        if (!last) continue;
        for (size_t x = 0; x < nx; x++) {
            float *yr = j->y + (r0 + x) * j->n_out + o;
            const pair_acc *pa = &acc[(r0 + x - xb) * TILE_O];
            for (size_t i = 0; i < nr; i++) yr[i] = hsum_ps(_mm256_add_ps(pa[i].a, pa[i].b));
        }
    }
}

/* ---- the driver ---- */

void matmul_rows_gemm_avx2(const matmul_job *j, size_t o0, size_t o1) {
    _Alignas(64) pair_acc acc[X_BLOCK * TILE_O];
    _Alignas(64) union {
        k4_tile k4[TILE_O * KB_K];
        q6_tile q6[TILE_O * KB_K];
        q8_tile q8;
    } tile;
    const int q8 = j->type == QUANT_Q8_0;
    const size_t be = q8 ? QUANT_QK8_0 : QUANT_QK_K, kb = q8 ? KB_8 : KB_K;
    const size_t nb = j->n_in / be;
    for (size_t o = o0; o < o1; o += TILE_O) {
        const size_t nr = o1 - o < TILE_O ? o1 - o : TILE_O;
        for (size_t xb = 0; xb < j->n_rows; xb += X_BLOCK) {
            const size_t xe = j->n_rows - xb < X_BLOCK ? j->n_rows : xb + X_BLOCK;
            for (size_t kb0 = 0; kb0 < nb; kb0 += kb) {
                const size_t nkb = nb - kb0 < kb ? nb - kb0 : kb;
                const int last = kb0 + nkb == nb;
                switch (j->type) {
                case QUANT_Q8_0: q8_tile_rows(j, o, nr, kb0, nkb, xb, xe, &tile.q8, acc, last); break;
                case QUANT_Q4_K:
                    k4_tile_rows(j, o, nr, kb0, nkb, xb, xe, tile.k4, acc, last, offsetof(block_q4_k, qs), -1,
                                 sizeof(block_q4_k));
                    break;
                case QUANT_Q5_K:
                    k4_tile_rows(j, o, nr, kb0, nkb, xb, xe, tile.k4, acc, last, offsetof(block_q5_k, qs),
                                 (ptrdiff_t)offsetof(block_q5_k, qh), sizeof(block_q5_k));
                    break;
                case QUANT_Q6_K: q6_tile_rows(j, o, nr, kb0, nkb, xb, xe, tile.q6, acc, last); break;
                default: break;
                }
            }
        }
    }
}
