/*
 * gemm_avx512.c: the integer multi-row kernel of gemm_avx2.c (three or more
 * 8-bit activation rows against Q8_0 / Q4_K / Q5_K / Q6_K weights) on
 * AVX-512 VNNI: the same tiles, decoded into 512-bit vectors, with
 * vpdpbusd doing the integer work of 64 bytes in one instruction.
 *
 * Why it is bit-identical to the AVX2 level and to the one-row decode dot
 * (act_avx2.c): decode forms, per weight block, 8 int32 lanes (lane k sums
 * the products of bytes 4k..4k+3 of each 32-byte vector, times its scale)
 * and then does float work on those 8 lanes. Integer sums are exact (no
 * int16 step saturates: |4-byte sum| <= 4 * 63 * 127 < 2^15; the 32-bit
 * sums stay far below 2^31), so any instruction sequence that gives each
 * lane the same set of integer terms gives the same lane values. Here:
 *  - Q8_0: a 512-bit vector holds one block of two weight rows (row 2p in
 *    the low half, 2p + 1 in the high) against the activation block
 *    broadcast to both halves: each half's lanes are decode's 8 lanes of
 *    its row, kept in decode's two accumulators (even and odd blocks), the
 *    per-block scale product d_w * d_x is the same IEEE product (formed in
 *    a vector with each half's d_w broadcast), and the FMA is the same per
 *    lane; the end is decode's hsum(acc0 + acc1) of each half.
 *    vpdpbusd multiplies unsigned by signed bytes, so x is staged as
 *    unsigned (x + 128, an XOR of the sign bit) and each lane starts from
 *    -128 * (sum of its 4 weight codes), computed once per tile: lane =
 *    sum (x + 128) w - 128 sum w = sum x w, exactly decode's lane.
 *  - K-quants: vpdpbusd forms each 4-byte product sum of decode's lanes
 *    unscaled, vpackssdw pairs those of two sub-blocks, and vpmaddwd /
 *    vpdpwssd apply the sub-block scales (the layout comment below says
 *    how codes and activations are permuted so that each pair shares its
 *    lane); adding the high half to the low gives decode's 8 lanes of the
 *    block, two weight rows' at once (fold_pair). The float work (the
 *    d * d_x and dmin * d_x products, the FMAs, the min sums, the final
 *    horizontal sums) is decode's per lane, in the same order, two rows a
 *    512-bit instruction (the mins four: kq_quad).
 * test_quant_avx512 checks every type, rows 1..64, odd shapes, bit for bit
 * against the AVX2 kernel and the one-row dot (test_gemm_avx512_emu the same
 * source on emulated intrinsics, on any AVX2 CPU).
 *
 * Why not AMX: tdpbusd sums a whole 64-byte tile row into one int32, but
 * decode applies its float scale to each 4-byte lane separately, so AMX
 * cannot give decode's bits; it would need decode itself to change its
 * arithmetic (one integer sum per block), a numerics change of its own.
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
    K_XR = 2,    /* K-quant activation rows per register block */
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

/* ---- K-quants: the layout ----
 *
 * A block's 256 codes are 64 dwords, dword 8s + k holding bytes 4k..4k+3 of
 * sub-block s (Q4_K / Q5_K: the 32 values of scale s; Q6_K: the 32-byte
 * group s, whose dwords k < 4 take scale 2s and k >= 4 scale 2s + 1), the
 * same for the activation codes. Decode's lane k is
 * L[k] = sum_s scale(s, k) * P[s][k], P[s][k] the 4-byte dot of dword 8s + k.
 *
 * vpdpbusd gives the 16 P of a 512-bit vector in one instruction; |P| <=
 * 4 * 63 * 127 < 2^15, so vpackssdw packs two such vectors into int16
 * without saturating, and vpmaddwd / vpdpwssd then apply two scales per
 * int32 lane. For that, each int32 lane after the pack must hold P[s][k]
 * and P[s'][k] of the same k: the codes (vpermt2d, once per weight block
 * and row, when a tile is decoded) and the activations (at staging,
 * act_stage.h's ACT_STAGE_ROWS_KPERM) are permuted into four vectors
 * A1 B1 A2 B2 such
 * that vpackssdw(A1, B1) holds in int32 lane i the pair (P[0][i], P[1][i])
 * for i < 8 and (P[2][i-8], P[3][i-8]) above; vpackssdw(A2, B2) the same
 * for sub-blocks 4..7. With the scale pairs arranged alike, lane i of the
 * sum is the part of L[i mod 8] of four sub-blocks, and adding the high
 * half to the low gives decode's 8 lanes, exactly (integer sums). Per
 * block and row pair: 4 vpdpbusd, 2 vpackssdw, vpmaddwd, vpdpwssd, the
 * fold (the AVX2 level: 8 vpmaddubsw, 8 vpmaddwd, 7 vpaddd).
 * A1 takes dwords {0,8,1,9,4,12,5,13} of each 16 of sub-blocks (0,1) and
 * (2,3); B1 the same + 2 (derived by enumerating the 64 dwords; the
 * tests check every output against the AVX2 kernel bit for bit). */
static inline __m512i kperm_idx(int b) {
    return _mm512_setr_epi32(0 + b, 8 + b, 1 + b, 9 + b, 4 + b, 12 + b, 5 + b, 13 + b, 16 + b, 24 + b, 17 + b, 25 + b,
                             20 + b, 28 + b, 21 + b, 29 + b);
}

/* v[c] = dwords 16c..16c+15 of a block (sub-blocks 2c, 2c+1) -> A1 B1 A2 B2. */
static inline void kperm(const __m512i v[4], __m512i out[4], __m512i ia, __m512i ib) {
    out[0] = _mm512_permutex2var_epi32(v[0], ia, v[1]);
    out[1] = _mm512_permutex2var_epi32(v[0], ib, v[1]);
    out[2] = _mm512_permutex2var_epi32(v[2], ia, v[3]);
    out[3] = _mm512_permutex2var_epi32(v[2], ib, v[3]);
}

typedef struct kq_tile { /* one decoded block of one weight row, K-quants */
    __m512i codes[4];    /* A1 B1 A2 B2 */
    __m512i sc[2];       /* the int16 scale pairs of vpackssdw(A1, B1) and (A2, B2) */
    __m256i sc16n;       /* Q6_K: the 16 scales times -32 (the bias term) */
    __m128i mins;        /* Q4_K / Q5_K: the 8 mins as int16 */
    float d, dmin;
} kq_tile;

/* One block of the tile's 4 weight rows, gathered for the float step, which
 * runs on two weight rows per 512-bit vector (and the mins on all four):
 * lanes 0..7 row 2p and 8..15 row 2p + 1, or 128-bit lane i row i. Each
 * lane does decode's float operation on decode's operands (d * d_x is the
 * same IEEE product in a vector as in a scalar), so the bits are the same;
 * what changes is that one instruction does two or four rows' work. */
typedef struct kq_quad {
    __m512 d2[2];       /* row 2p's d in lanes 0..7, row 2p + 1's in 8..15 */
    __m512 dmin4;       /* Q4_K / Q5_K: row i's dmin in 128-bit lane i */
    __m512i mins4;      /* Q4_K / Q5_K: row i's 8 mins (int16) in 128-bit lane i */
    __m512i sc16n2[2];  /* Q6_K: rows 2p and 2p + 1's sc16n, low and high half */
} kq_quad;

typedef struct kq_tiles {
    kq_tile t[TILE_O * KB_K]; /* row i, block b at [i * KB_K + b] */
    kq_quad q[KB_K];
} kq_tiles;

/* scale(s, k) -> the two scale vectors (pair (s, s + 1) per int32 lane, as
 * laid out above), as one vpermw each from the block's int16 scales
 * (Q4_K / Q5_K: k4_scales_mins' vector, scales in elements 0..7; Q6_K: its
 * 16). Row q6, vector pk, int16 element 2i / 2i + 1 (s = 4 pk + 2 (i / 8),
 * k = i % 8): Q4_K s / s + 1; Q6_K 2s + (k >= 4) / 2(s + 1) + (k >= 4). */
static const int16_t kq_sc_idx[2][2][32] __attribute__((aligned(64))) = {
    {{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
     {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7}},
    {{0, 2, 0, 2, 0, 2, 0, 2, 1, 3, 1, 3, 1, 3, 1, 3, 4, 6, 4, 6, 4, 6, 4, 6, 5, 7, 5, 7, 5, 7, 5, 7},
     {8, 10, 8, 10, 8, 10, 8, 10, 9, 11, 9, 11, 9, 11, 9, 11, 12, 14, 12, 14, 12, 14, 12, 14, 13, 15, 13, 15, 13, 15,
      13, 15}},
};

static inline void kq_scales(__m256i sc16, int q6, kq_tile *t) {
    const __m512i v = _mm512_castsi256_si512(sc16);
    t->sc[0] = _mm512_permutexvar_epi16(_mm512_load_si512(kq_sc_idx[q6][0]), v);
    t->sc[1] = _mm512_permutexvar_epi16(_mm512_load_si512(kq_sc_idx[q6][1]), v);
}

/* Decode's lanes of one block against the permuted activation vectors,
 * before the fold: lane i + 8h (h = 0, 1) holds part h of decode's lane i. */
static inline __m512i kq_isum(const kq_tile *t, const __m512i xp[4]) {
    const __m512i z = _mm512_setzero_si512();
    const __m512i p1 = _mm512_packs_epi32(_mm512_dpbusd_epi32(z, t->codes[0], xp[0]), _mm512_dpbusd_epi32(z, t->codes[1], xp[1]));
    const __m512i p2 = _mm512_packs_epi32(_mm512_dpbusd_epi32(z, t->codes[2], xp[2]), _mm512_dpbusd_epi32(z, t->codes[3], xp[3]));
    return _mm512_dpwssd_epi32(_mm512_madd_epi16(p1, t->sc[0]), p2, t->sc[1]);
}

/* The fold of two rows at once: decode's 8 lanes of row a's block (lo + hi
 * of sa) in lanes 0..7, row b's in 8..15; the same integer sums as
 * fold_512 on each. */
static inline __m512i fold_pair(__m512i sa, __m512i sb) {
    return _mm512_add_epi32(_mm512_shuffle_i64x2(sa, sb, 0x44), _mm512_shuffle_i64x2(sa, sb, 0xEE));
}

/* Gathers block b's kq_quad from the tile's 4 decoded rows. */
static void kq_gather(kq_tiles *tl, size_t b) {
    _Alignas(64) float dm[16];
    _Alignas(64) int16_t mn[32];
    kq_quad *q = &tl->q[b];
    for (int i = 0; i < TILE_O; i++) {
        const kq_tile *t = &tl->t[i * KB_K + b];
        for (int l = 0; l < 4; l++) dm[4 * i + l] = t->dmin;
        _mm_store_si128((__m128i *)(void *)(mn + 8 * i), t->mins);
    }
    q->dmin4 = _mm512_loadu_ps(dm);
    q->mins4 = _mm512_loadu_si512(mn);
    for (int p = 0; p < 2; p++) {
        const kq_tile *ta = &tl->t[2 * p * KB_K + b], *tb = &tl->t[(2 * p + 1) * KB_K + b];
        q->d2[p] = join_ps(_mm256_set1_ps(ta->d), _mm256_set1_ps(tb->d));
        q->sc16n2[p] = join_256(ta->sc16n, tb->sc16n);
    }
}

/* ---- Q4_K / Q5_K ---- */

static void k4_decode(const uint8_t *blk, size_t qs_off, ptrdiff_t qh_off, kq_tile *t, __m512i ia, __m512i ib) {
    t->d = load_f16(blk);
    t->dmin = load_f16(blk + 2);
    const __m256i sm = k4_scales_mins(blk + 4);
    t->mins = _mm256_extracti128_si256(sm, 1);
    t->sc16n = _mm256_setzero_si256();
    kq_scales(sm, 0, t);
    const __m256i h = qh_off >= 0 ? load_256(blk + qh_off) : _mm256_setzero_si256();
    __m512i v[4];
    for (int c = 0; c < 4; c++) {
        __m256i lo, hi;
        k4_codes(blk + qs_off, h, c, qh_off >= 0, &lo, &hi);
        v[c] = join_256(lo, hi); /* sub-blocks 2c (low nibbles) and 2c + 1 (high) */
    }
    kperm(v, t->codes, ia, ib);
}

/* Activation rows r0 .. r0 + nx (nx <= K_XR, a constant at each call)
 * against the decoded tile of 4 weight rows: each weight block's vectors are
 * loaded once for the nx rows, and the float step runs on row pairs
 * (kq_quad). Accumulators kept between column tiles: per activation row,
 * acc[0], acc[1] the row pairs' sums, acc[2] the 4 rows' min sums.
 * q6: Q6_K (the bias term, no mins). */
static inline __attribute__((always_inline)) void kq_rows(const matmul_job *j, const kq_tiles *tl, size_t r0,
                                                          const int nx, size_t kb0, size_t nkb, size_t xb,
                                                          pair_acc *acc, int last, size_t o, size_t nr, const int q6) {
    const act_q8_k *x[K_XR];
    __m512 a[K_XR][2], m[K_XR];
    for (int xx = 0; xx < nx; xx++) {
        x[xx] = (const act_q8_k *)(const void *)(j->xq + (r0 + xx) * j->xq_bytes) + kb0;
        const pair_acc *pa = acc + (r0 + xx - xb) * TILE_O;
        a[xx][0] = kb0 ? pa[0].q8 : _mm512_setzero_ps();
        a[xx][1] = kb0 ? pa[1].q8 : _mm512_setzero_ps();
        m[xx] = kb0 && !q6 ? pa[2].q8 : _mm512_setzero_ps();
    }
    for (size_t b = 0; b < nkb; b++) {
        __m512i xp[K_XR][4], bsx[K_XR];
        __m512 dxv[K_XR];
        for (int xx = 0; xx < nx; xx++) {
            const act_q8_k *xb_ = x[xx] + b;
            dxv[xx] = _mm512_set1_ps(xb_->d);
            if (q6) {
                const __m256i bs = load_256(xb_->bsums);
                bsx[xx] = join_256(bs, bs);
            } else {
                bsx[xx] = _mm512_broadcast_i32x4(_mm_hadd_epi16(_mm_loadu_si128((const __m128i *)xb_->bsums),
                                                                _mm_loadu_si128((const __m128i *)(xb_->bsums + 8))));
            }
            for (int c = 0; c < 4; c++) xp[xx][c] = _mm512_loadu_si512(xb_->qs + 64 * c); /* staged permuted */
        }
        const kq_quad *q = &tl->q[b];
        for (int p = 0; p < 2; p++) {
            const kq_tile *ta = &tl->t[2 * p * KB_K + b], *tb = &tl->t[(2 * p + 1) * KB_K + b];
            for (int xx = 0; xx < nx; xx++) {
                __m512i isum = fold_pair(kq_isum(ta, xp[xx]), kq_isum(tb, xp[xx]));
                if (q6) isum = _mm512_add_epi32(_mm512_madd_epi16(q->sc16n2[p], bsx[xx]), isum);
                a[xx][p] = _mm512_fmadd_ps(_mm512_mul_ps(q->d2[p], dxv[xx]), _mm512_cvtepi32_ps(isum), a[xx][p]);
            }
        }
        if (!q6)
            for (int xx = 0; xx < nx; xx++)
                m[xx] = _mm512_fmadd_ps(_mm512_mul_ps(q->dmin4, dxv[xx]),
                                        _mm512_cvtepi32_ps(_mm512_madd_epi16(q->mins4, bsx[xx])), m[xx]);
    }
    for (int xx = 0; xx < nx; xx++) {
        pair_acc *pa = acc + (r0 + xx - xb) * TILE_O;
        if (!last) {
            pa[0].q8 = a[xx][0], pa[1].q8 = a[xx][1], pa[2].q8 = m[xx];
            continue;
        }
        _Alignas(64) float ms[16];
        _mm512_store_ps(ms, m[xx]);
        float *yr = j->y + (r0 + xx) * j->n_out + o;
        for (size_t i = 0; i < nr; i++) {
            const __m512 ap = a[xx][i / 2];
            const __m256 ai = i & 1 ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(ap), 1))
                                    : _mm512_castps512_ps256(ap);
            if (q6) {
                yr[i] = hsum_ps(ai);
                continue;
            }
            const __m128 mi = _mm_load_ps(ms + 4 * i);
            __m128 m4s = _mm_add_ps(mi, _mm_movehl_ps(mi, mi));
            m4s = _mm_add_ss(m4s, _mm_movehdup_ps(m4s));
            yr[i] = hsum_ps(ai) - _mm_cvtss_f32(m4s);
        }
    }
}

static void kq_tile_rows_x(const matmul_job *j, const kq_tiles *tl, size_t o, size_t nr, size_t kb0, size_t nkb,
                           size_t xb, size_t xe, pair_acc *acc, int last, const int q6) {
    size_t r = xb;
    for (; r + K_XR <= xe; r += K_XR) kq_rows(j, tl, r, K_XR, kb0, nkb, xb, acc, last, o, nr, q6);
    if (r < xe) kq_rows(j, tl, r, 1, kb0, nkb, xb, acc, last, o, nr, q6);
}

/* Prefetches the next tile's weight bytes (the 4 rows after o, this column
 * tile's blocks) while this tile's products run: a tile's rows are short
 * runs (a few KB), too short for the hardware prefetcher to get ahead, and
 * the routed experts' weights come from memory. */
static inline void prefetch_next_tile(const matmul_job *j, size_t o, size_t kb0, size_t nkb, size_t bsz) {
    for (size_t i = TILE_O; i < 2 * TILE_O && o + i < j->n_out; i++) {
        const uint8_t *p = j->w + (o + i) * j->row_bytes + kb0 * bsz;
        for (size_t off = 0; off < nkb * bsz; off += 64) _mm_prefetch((const char *)(p + off), _MM_HINT_T0);
    }
}

static void k4_tile_rows(const matmul_job *j, size_t o, size_t nr, size_t kb0, size_t nkb, size_t xb, size_t xe,
                         kq_tiles *tl, pair_acc *acc, int last, size_t qs_off, ptrdiff_t qh_off, size_t bsz) {
    const __m512i ia = kperm_idx(0), ib = kperm_idx(2);
    for (size_t i = 0; i < TILE_O; i++) {
        const uint8_t *row = j->w + (o + (i < nr ? i : 0)) * j->row_bytes + kb0 * bsz;
        for (size_t b = 0; b < nkb; b++) k4_decode(row + b * bsz, qs_off, qh_off, &tl->t[i * KB_K + b], ia, ib);
    }
    for (size_t b = 0; b < nkb; b++) kq_gather(tl, b);
    prefetch_next_tile(j, o, kb0, nkb, bsz);
    kq_tile_rows_x(j, tl, o, nr, kb0, nkb, xb, xe, acc, last, 0);
}

/* ---- Q6_K ---- */

static void q6_decode(const block_q6_k *b, kq_tile *t, __m512i ia, __m512i ib) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    t->d = load_f16(b->d);
    t->dmin = 0.0f;
    t->mins = _mm_setzero_si128();
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->scales));
    kq_scales(sc16, 1, t);
    /* |scale| <= 128, so -32 * scale fits int16; madd's products are then exactly -32 times decode's */
    t->sc16n = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
    __m256i codes[8];
    for (int h = 0; h < 2; h++) {
        const __m256i a = load_256(b->ql + 64 * h), c = load_256(b->ql + 64 * h + 32), hb = load_256(b->qh + 32 * h);
        codes[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2));
        codes[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2));
        codes[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(hb, m2));
        codes[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
                                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2));
    }
    __m512i v[4];
    for (int p = 0; p < 4; p++) v[p] = join_256(codes[2 * p], codes[2 * p + 1]); /* groups 2p, 2p + 1 */
    kperm(v, t->codes, ia, ib);
}

static void q6_tile_rows(const matmul_job *j, size_t o, size_t nr, size_t kb0, size_t nkb, size_t xb, size_t xe,
                         kq_tiles *tl, pair_acc *acc, int last) {
    const __m512i ia = kperm_idx(0), ib = kperm_idx(2);
    for (size_t i = 0; i < TILE_O; i++) {
        const block_q6_k *row = (const block_q6_k *)(const void *)(j->w + (o + (i < nr ? i : 0)) * j->row_bytes) + kb0;
        for (size_t b = 0; b < nkb; b++) q6_decode(row + b, &tl->t[i * KB_K + b], ia, ib);
    }
    for (size_t b = 0; b < nkb; b++) kq_gather(tl, b);
    prefetch_next_tile(j, o, kb0, nkb, sizeof(block_q6_k));
    kq_tile_rows_x(j, tl, o, nr, kb0, nkb, xb, xe, acc, last, 1);
}

/* ---- Q8_0 ---- */

/* The activation rows arrive planar (act_stage.h's ACT_STAGE_PLANAR_U8):
 * every row's codes + 128 as 32-byte blocks of unsigned bytes, then every
 * row's scales as floats. A tile holds
 * the 4 weight rows as two row pairs: per pair p and block b, one 512-bit
 * vector with row 2p's 32 codes in the low half and row 2p + 1's in the
 * high half, the lane corrections -128 * (sum of 4 codes), and d_w of each
 * row broadcast over its half. An activation block is broadcast to both
 * halves with one load, so the activation side costs a load a block and
 * no vector instruction (two blocks of one row per vector paid an insert
 * for the codes and one for the scales per block pair and row, and an
 * XOR per block before the staging flipped the codes). Decode's two accumulators (even and
 * odd blocks) stay two accumulators: per (activation row, pair) one for
 * even blocks and one for odd, each lane doing decode's FMA with decode's
 * product d_w * d_x; the end sums them lane by lane and takes decode's
 * hsum of each half. */
typedef struct q8_tile {
    __m512i w[2 * KB_8]; /* [p * KB_8 + b] */
    __m512i corr[2 * KB_8];
    __m512 dw[2 * KB_8];
} q8_tile;

static inline const int8_t *q8_codes(const matmul_job *j, size_t r) {
    return (const int8_t *)j->xq + r * (j->n_in / QUANT_QK8_0) * QUANT_QK8_0;
}
static inline const float *q8_scales(const matmul_job *j, size_t r) {
    const size_t nb = j->n_in / QUANT_QK8_0;
    return (const float *)(const void *)(j->xq + j->n_rows * nb * QUANT_QK8_0) + r * nb;
}

/* Block b (of parity par, a constant) of nx (<= Q8_XR, a constant at each
 * call) activation rows against the tile's two row pairs. */
static inline __attribute__((always_inline)) void q8_block(const q8_tile *tile, const int8_t *const xs[Q8_XR],
                                                           const float *const dx[Q8_XR], size_t b, const int nx,
                                                           const int par, __m512 acc[Q8_XR][2][2]) {
    __m512i xu[Q8_XR];
    for (int x = 0; x < nx; x++)
        xu[x] = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(xs[x] + 32 * b)));
    for (int p = 0; p < 2; p++) {
        const __m512i wv = tile->w[p * KB_8 + b], cv = tile->corr[p * KB_8 + b];
        const __m512 dwv = tile->dw[p * KB_8 + b];
        for (int x = 0; x < nx; x++) {
            const __m512 isum = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(cv, xu[x], wv));
            acc[x][p][par] = _mm512_fmadd_ps(_mm512_mul_ps(dwv, _mm512_set1_ps(dx[x][b])), isum, acc[x][p][par]);
        }
    }
}

static inline __attribute__((always_inline)) void q8_group(const matmul_job *j, const q8_tile *tile, size_t r0,
                                                           size_t xb, size_t kb0, size_t nkb, const int nx,
                                                           pair_acc *accs, int last, size_t o, size_t nr) {
    const int8_t *xs[Q8_XR];
    const float *dx[Q8_XR];
    __m512 acc[Q8_XR][2][2];
    for (int x = 0; x < nx; x++) {
        xs[x] = q8_codes(j, r0 + x) + 32 * kb0;
        dx[x] = q8_scales(j, r0 + x) + kb0;
        for (int i = 0; i < TILE_O; i++)
            acc[x][i / 2][i % 2] = kb0 ? accs[(r0 + x - xb) * TILE_O + i].q8 : _mm512_setzero_ps();
    }
    size_t b = 0;
    for (; b + 2 <= nkb; b += 2) {
        q8_block(tile, xs, dx, b, nx, 0, acc);
        q8_block(tile, xs, dx, b + 1, nx, 1, acc);
    }
    if (b < nkb) q8_block(tile, xs, dx, b, nx, 0, acc); /* an odd last block: even, as decode's */
    for (int x = 0; x < nx; x++) {
        if (!last) {
            for (int i = 0; i < TILE_O; i++) accs[(r0 + x - xb) * TILE_O + i].q8 = acc[x][i / 2][i % 2];
            continue;
        }
        float *yr = j->y + (r0 + x) * j->n_out + o;
        for (size_t i = 0; i < nr; i++) {
            const __m512 s = _mm512_add_ps(acc[x][i / 2][0], acc[x][i / 2][1]);
            yr[i] = hsum_ps(i & 1 ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1))
                                  : _mm512_castps512_ps256(s));
        }
    }
}

static void q8_tile_rows(const matmul_job *j, size_t o, size_t nr, size_t kb0, size_t nkb, size_t xb, size_t xe,
                         q8_tile *tile, pair_acc *acc, int last) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (size_t p = 0; p < 2; p++) {
        const size_t ra = 2 * p < nr ? 2 * p : 0, rb = 2 * p + 1 < nr ? 2 * p + 1 : 0;
        const block_q8_0 *wa = (const block_q8_0 *)(const void *)(j->w + (o + ra) * j->row_bytes) + kb0;
        const block_q8_0 *wb = (const block_q8_0 *)(const void *)(j->w + (o + rb) * j->row_bytes) + kb0;
        for (size_t b = 0; b < nkb; b++) {
            const __m512i wv = join_256(load_256(wa[b].qs), load_256(wb[b].qs));
            tile->w[p * KB_8 + b] = wv;
            /* -128 * (sum of each lane's 4 codes): vpdpbusd of 0x80 bytes, negated */
            tile->corr[p * KB_8 + b] =
                _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, wv));
            tile->dw[p * KB_8 + b] = join_ps(_mm256_set1_ps(load_f16(wa[b].d)), _mm256_set1_ps(load_f16(wb[b].d)));
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
        kq_tiles kq;
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
                    k4_tile_rows(j, o, nr, kb0, nkb, xb, xe, &tile.kq, acc, last, offsetof(block_q4_k, qs), -1,
                                 sizeof(block_q4_k));
                    break;
                case QUANT_Q5_K:
                    k4_tile_rows(j, o, nr, kb0, nkb, xb, xe, &tile.kq, acc, last, offsetof(block_q5_k, qs),
                                 (ptrdiff_t)offsetof(block_q5_k, qh), sizeof(block_q5_k));
                    break;
                case QUANT_Q6_K: q6_tile_rows(j, o, nr, kb0, nkb, xb, xe, &tile.kq, acc, last); break;
                default: break;
                }
            }
        }
    }
}
