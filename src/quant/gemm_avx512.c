/*
 * gemm_avx512.c: the integer multi-row kernel of gemm_avx2.c (three or more
 * 8-bit activation rows against Q8_0 / Q4_K / Q5_K / Q6_K weights) on
 * AVX-512 VNNI: the same tiles, decoded into 512-bit vectors, with
 * vpdpbusd (Q8_0) and vpmaddubsw + vpdpwssd (K-quants) doing the integer
 * work of two 32-byte vectors in one or two instructions.
 *
 * Why it is bit-identical to the AVX2 level and to the one-row decode dot
 * (act_avx2.c): decode forms, per weight block, 8 int32 lanes (lane k sums
 * the products of bytes 4k..4k+3 of each 32-byte vector, times its scale)
 * and then does float work on those 8 lanes. Integer sums are exact (no
 * 16-bit lane of vpmaddubsw can saturate: act_avx2.c's header; the 32-bit
 * sums stay far below 2^31), so any instruction sequence that gives each
 * lane the same set of integer terms gives the same lane values. Here:
 *  - Q8_0: a 512-bit vector holds blocks 2q (low half) and 2q+1 (high):
 *    decode's two accumulators (even and odd blocks) are the two halves of
 *    one accumulator, the per-block scale product d_w * d_x is the same
 *    IEEE product (formed in a vector with each half broadcast), and the
 *    FMA is the same per lane; the end is decode's hsum(acc0 + acc1).
 *    vpdpbusd multiplies unsigned by signed bytes, so x is moved to
 *    unsigned (x + 128, an XOR of the sign bit) and each lane starts from
 *    -128 * (sum of its 4 weight codes), computed once per tile: lane =
 *    sum (x + 128) w - 128 sum w = sum x w, exactly decode's lane.
 *  - K-quants: a 512-bit vector holds two sub-blocks (32 bytes each) that
 *    decode takes in two 256-bit steps; vpmaddubsw then vpdpwssd against
 *    the sub-blocks' int16 scales gives 16 lanes, and adding the high half
 *    to the low gives decode's 8 lanes of the block. The float work (the
 *    d * d_x and dmin * d_x products, the FMAs, the min sums, the final
 *    horizontal sums) is decode's, at 256 and 128 bits, in the same order.
 * test_quant_avx512 checks every type, rows 1..64, odd shapes, bit for bit
 * against the AVX2 kernel and the one-row dot.
 *
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni (this file
 * only); called only when quant_avx512_active().
 */
#include <immintrin.h>
#include <stddef.h>

#include "quant/matmul_internal.h"
#include "quant/quant_avx2_inline.h"
#include "quant/quant_internal.h"

enum {
    TILE_O = 4,  /* weight rows per tile */
    KB_K = 8,    /* K-quant blocks (of 256) per tile */
    KB_8 = 64,   /* Q8_0 blocks (of 32) per tile: even, so block parity is global */
    X_BLOCK = 64, /* activation rows per pass over a tile */
    Q8_XR = 4,   /* Q8_0 activation rows per register block (4 x 4 accumulators) */
};

/* Accumulators of one (activation row, weight row) pair kept between column
 * tiles: Q8_0's one 512-bit (even blocks low, odd high), the K-quants'
 * 256-bit sum and 128-bit min sum. */
typedef union pair_acc {
    __m512 q8;
    struct {
        __m256 a;
        __m128 m;
    } k;
} pair_acc;

/* 64 bytes of two 32-byte halves: lo in bits 0..255, hi above. */
static inline __m512i join_256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

static inline __m512 join_ps(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
}

/* The integer fold: decode's 8 lanes from the 16 of two 256-bit halves. */
static inline __m256i fold_512(__m512i s) {
    return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

/* ---- Q4_K / Q5_K ---- */

typedef struct k4_tile { /* one decoded block of one weight row */
    __m512i codes[4];    /* chunk c: sub-block 2c (low nibbles) then 2c+1 (high) */
    __m512i sc[4];       /* their scales as int16: 16 lanes of sc[2c], 16 of sc[2c+1] */
    __m128i mins;        /* the 8 mins as int16 */
    float d, dmin;
} k4_tile;

static void k4_decode(const uint8_t *blk, size_t qs_off, ptrdiff_t qh_off, k4_tile *t) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), b16 = _mm256_set1_epi8(0x10);
    t->d = load_f16(blk);
    t->dmin = load_f16(blk + 2);
    const __m256i sm = k4_scales_mins(blk + 4);
    t->mins = _mm256_extracti128_si256(sm, 1);
    const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm));
    const __m256i h = qh_off >= 0 ? load_256(blk + qh_off) : _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const __m256i v = load_256(blk + qs_off + 32 * c);
        __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if (qh_off >= 0) {
            const __m256i bit_lo = _mm256_set1_epi8((char)(1 << (2 * c))), bit_hi = _mm256_set1_epi8((char)(2 << (2 * c)));
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit_lo), bit_lo), b16));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit_hi), bit_hi), b16));
        }
        t->codes[c] = join_256(lo, hi);
        t->sc[c] = join_256(_mm256_shuffle_epi8(scales, pick16(2 * c)), _mm256_shuffle_epi8(scales, pick16(2 * c + 1)));
    }
}

/* Decode's 8 lanes of one block: sum over sub-blocks of scale * (codes . x). */
static inline __m256i k4_isum(const k4_tile *t, const __m512i xv[4]) {
    __m512i s = _mm512_madd_epi16(_mm512_maddubs_epi16(t->codes[0], xv[0]), t->sc[0]);
    for (int c = 1; c < 4; c++) s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(t->codes[c], xv[c]), t->sc[c]);
    return fold_512(s);
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
            a[i] = kb0 ? pa[i].k.a : _mm256_setzero_ps();
            m[i] = kb0 ? pa[i].k.m : _mm_setzero_ps();
        }
        for (size_t b = 0; b < nkb; b++, x++) {
            const float dx = x->d;
            const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)x->bsums),
                                              _mm_loadu_si128((const __m128i *)(x->bsums + 8)));
            __m512i xv[4];
            for (int c = 0; c < 4; c++) xv[c] = _mm512_loadu_si512(x->qs + 64 * c);
            for (size_t i = 0; i < TILE_O; i++) {
                const k4_tile *t = &tile[i * KB_K + b];
                const float d = dx * t->d, dmin = dx * t->dmin;
                m[i] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm_madd_epi16(t->mins, bs)), m[i]);
                a[i] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(k4_isum(t, xv)), a[i]);
            }
        }
        if (!last) {
            for (size_t i = 0; i < TILE_O; i++) pa[i].k.a = a[i], pa[i].k.m = m[i];
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
    __m512i codes[4]; /* groups 2p and 2p+1 (gemm_avx2.c's [4h + k] order): codes 0..63 */
    __m512i sc[4];    /* their scales as act_avx2.c shuffles them */
    __m256i sc16n;    /* the 16 scales times -32 as int16: the bias term's madd gives -(madd << 5) */
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
    /* |scale| <= 128, so -32 * scale fits int16; madd's products are then exactly -32 times decode's */
    t->sc16n = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
    __m256i codes[8], sc[8];
    for (int h = 0; h < 2; h++) {
        const __m256i sch =
            _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
        const __m256i a = load_256(b->ql + 64 * h), c = load_256(b->ql + 64 * h + 32), hb = load_256(b->qh + 32 * h);
        codes[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2));
        codes[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2));
        codes[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(hb, m2));
        codes[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2));
        for (int k = 0; k < 4; k++) sc[4 * h + k] = _mm256_shuffle_epi8(sch, pick[k]);
    }
    for (int p = 0; p < 4; p++) {
        t->codes[p] = join_256(codes[2 * p], codes[2 * p + 1]);
        t->sc[p] = join_256(sc[2 * p], sc[2 * p + 1]);
    }
}

/* Decode's 8 lanes of one block: the bias, then the 8 groups (x at 32 g). */
static inline __m256i q6_isum(const q6_tile *t, __m256i bsums, const __m512i xv[4]) {
    __m512i s = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_madd_epi16(t->sc16n, bsums), 0);
    for (int p = 0; p < 4; p++) s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(t->codes[p], xv[p]), t->sc[p]);
    return fold_512(s);
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
        for (size_t i = 0; i < TILE_O; i++) a[i] = kb0 ? pa[i].k.a : _mm256_setzero_ps();
        for (size_t b = 0; b < nkb; b++, x++) {
            const float dx = x->d;
            const __m256i bsums = load_256(x->bsums);
            __m512i xv[4];
            for (int p = 0; p < 4; p++) xv[p] = _mm512_loadu_si512(x->qs + 64 * p);
            for (size_t i = 0; i < TILE_O; i++) {
                const q6_tile *t = &tile[i * KB_K + b];
                a[i] = _mm256_fmadd_ps(_mm256_set1_ps(t->d * dx), _mm256_cvtepi32_ps(q6_isum(t, bsums, xv)), a[i]);
            }
        }
        if (!last) {
            for (size_t i = 0; i < TILE_O; i++) pa[i].k.a = a[i];
            continue;
        }
        float *yr = j->y + r * j->n_out + o;
        for (size_t i = 0; i < nr; i++) yr[i] = hsum_ps(a[i]);
    }
}

/* ---- Q8_0 ---- */

/* The activation rows arrive planar (matmul.c's gemm_q8_stage): every row's
 * codes as 32-byte blocks, then every row's scales as floats. A tile holds,
 * per weight row and block pair q (blocks 2q, 2q+1 of the tile), the codes,
 * the lane corrections -128 * sum of 4 codes, and d_w of each block
 * broadcast over its half. An odd last block has a zero high half, and its
 * pair's FMA leaves the high (odd-block) lanes untouched, as decode does. */
enum { PAIRS = KB_8 / 2 };

typedef struct q8_tile {
    __m512i w[TILE_O * PAIRS];
    __m512i corr[TILE_O * PAIRS];
    __m512 dw[TILE_O * PAIRS];
} q8_tile;

static inline const int8_t *q8_codes(const matmul_job *j, size_t r) {
    return (const int8_t *)j->xq + r * (j->n_in / QUANT_QK8_0) * QUANT_QK8_0;
}
static inline const float *q8_scales(const matmul_job *j, size_t r) {
    const size_t nb = j->n_in / QUANT_QK8_0;
    return (const float *)(const void *)(j->xq + j->n_rows * nb * QUANT_QK8_0) + r * nb;
}

/* Pair q of nx (<= Q8_XR, a constant at each call) activation rows against
 * the tile's 4 weight rows, into acc[x][i]; half: only the low block. */
static inline __attribute__((always_inline)) void q8_pair(const q8_tile *tile, const int8_t *const xs[Q8_XR],
                                                          const float *const dx[Q8_XR], size_t q, const int nx,
                                                          const int half, __m512 acc[Q8_XR][TILE_O]) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512i xu[Q8_XR];
    __m512 dxv[Q8_XR];
    for (int x = 0; x < nx; x++) {
        const __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)(xs[x] + 64 * q));
        const __m256i hi = half ? _mm256_setzero_si256()
                                : _mm256_loadu_si256((const __m256i *)(const void *)(xs[x] + 64 * q + 32));
        xu[x] = _mm512_xor_si512(join_256(lo, hi), flip);
        const __m256 dl = _mm256_set1_ps(dx[x][2 * q]), dh = half ? _mm256_setzero_ps() : _mm256_set1_ps(dx[x][2 * q + 1]);
        dxv[x] = join_ps(dl, dh);
    }
    for (int i = 0; i < TILE_O; i++) {
        const __m512i wv = tile->w[i * PAIRS + q], cv = tile->corr[i * PAIRS + q];
        const __m512 dwv = tile->dw[i * PAIRS + q];
        for (int x = 0; x < nx; x++) {
            const __m512 isum = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(cv, xu[x], wv));
            const __m512 prod = _mm512_mul_ps(dwv, dxv[x]);
            acc[x][i] = half ? _mm512_mask3_fmadd_ps(prod, isum, acc[x][i], 0x00FF)
                             : _mm512_fmadd_ps(prod, isum, acc[x][i]);
        }
    }
}

static inline __attribute__((always_inline)) void q8_group(const matmul_job *j, const q8_tile *tile, size_t r0,
                                                           size_t xb, size_t kb0, size_t nkb, const int nx,
                                                           pair_acc *accs, int last, size_t o, size_t nr) {
    const int8_t *xs[Q8_XR];
    const float *dx[Q8_XR];
    __m512 acc[Q8_XR][TILE_O];
    for (int x = 0; x < nx; x++) {
        xs[x] = q8_codes(j, r0 + x) + 32 * kb0;
        dx[x] = q8_scales(j, r0 + x) + kb0;
        for (int i = 0; i < TILE_O; i++) acc[x][i] = kb0 ? accs[(r0 + x - xb) * TILE_O + i].q8 : _mm512_setzero_ps();
    }
    const size_t full = nkb / 2;
    for (size_t q = 0; q < full; q++) q8_pair(tile, xs, dx, q, nx, 0, acc);
    if (nkb & 1) q8_pair(tile, xs, dx, full, nx, 1, acc);
    for (int x = 0; x < nx; x++) {
        if (!last) {
            for (int i = 0; i < TILE_O; i++) accs[(r0 + x - xb) * TILE_O + i].q8 = acc[x][i];
            continue;
        }
        float *yr = j->y + (r0 + x) * j->n_out + o;
        for (size_t i = 0; i < nr; i++)
            yr[i] = hsum_ps(_mm256_add_ps(_mm512_castps512_ps256(acc[x][i]),
                                          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[x][i]), 1))));
    }
}

static void q8_tile_rows(const matmul_job *j, size_t o, size_t nr, size_t kb0, size_t nkb, size_t xb, size_t xe,
                         q8_tile *tile, pair_acc *acc, int last) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (size_t i = 0; i < TILE_O; i++) {
        const block_q8_0 *row = (const block_q8_0 *)(const void *)(j->w + (o + (i < nr ? i : 0)) * j->row_bytes) + kb0;
        for (size_t q = 0; 2 * q < nkb; q++) {
            const block_q8_0 *b0 = row + 2 * q, *b1 = b0 + 1;
            const int pair = 2 * q + 1 < nkb;
            const __m512i wv = join_256(load_256(b0->qs), pair ? load_256(b1->qs) : _mm256_setzero_si256());
            tile->w[i * PAIRS + q] = wv;
            /* -128 * (sum of each lane's 4 codes): vpdpbusd of 0x80 bytes, negated */
            tile->corr[i * PAIRS + q] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                                         _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, wv));
            tile->dw[i * PAIRS + q] =
                join_ps(_mm256_set1_ps(load_f16(b0->d)), pair ? _mm256_set1_ps(load_f16(b1->d)) : _mm256_setzero_ps());
        }
    }
    size_t r0 = xb;
    for (; r0 + Q8_XR <= xe; r0 += Q8_XR) q8_group(j, tile, r0, xb, kb0, nkb, Q8_XR, acc, last, o, nr);
    switch (xe - r0) {
    case 1: q8_group(j, tile, r0, xb, kb0, nkb, 1, acc, last, o, nr); break;
    case 2: q8_group(j, tile, r0, xb, kb0, nkb, 2, acc, last, o, nr); break;
    case 3: q8_group(j, tile, r0, xb, kb0, nkb, 3, acc, last, o, nr); break;
    default: break;
    }
}

/* ---- the driver ---- */

void matmul_rows_gemm_avx512(const matmul_job *j, size_t o0, size_t o1) {
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
