/*
 * test_quant_bsum512.c: the AMX level's whole-block dots on AVX-512 VNNI
 * (act_bsum_avx512.c), one row and four, for Q8_0, Q4_K and Q5_K, bit for
 * bit (memcmp of the float) against
 *  1. the AVX2 bsum dots (act_bsum_avx2.c), which the dispatch replaces;
 *  2. the scalar oracle of the whole-block order (amx_levels.h's al_oracle);
 *  3. for the 4-row forms, the one-row dot of each row (row strides equal to
 *     and past the row's bytes; a packed read spans the gaps between the
 *     rows written, so any bytes: NaN results need only both be NaN).
 * Rows: raw random bytes (every code, scale and min, finite f16 scales with
 * subnormals and zeros), then extremes: every code at its maximum (Q8_0
 * also all -128), zero scales, activations at +-127 and, for the K-quants,
 * -128 (Q8_0's AVX2 dot takes |x| <= 127, the quantiser's range: there
 * -128 is checked against the oracle only). Q8_0 at 1..67 blocks (tails
 * that are not a multiple of 8), K-quants at 1..5 super-blocks; 96 rows
 * each. Exits 77 with "SKIP: the CPU lacks AVX-512 VNNI" elsewhere.
 */
#include <math.h>
#include <string.h>

#include "quant/simd_level.h"
#include "unit/amx_levels.h"

enum { ROWS = 96, MAX_BLOCKS = 67, PAD = 64 };

typedef float (*one_fn)(const void *, const void *, size_t);
typedef void (*four_fn)(const void *, size_t, const void *, size_t, float *);

static one_fn dot512(uint32_t t) {
    return t == QUANT_Q8_0   ? quant_act_dot_q8_0_bsum_avx512
           : t == QUANT_Q4_K ? quant_act_dot_q4_k_bsum_avx512
                             : quant_act_dot_q5_k_bsum_avx512;
}

static four_fn dot4_512(uint32_t t) {
    return t == QUANT_Q8_0   ? quant_act_dot4_q8_0_bsum_avx512
           : t == QUANT_Q4_K ? quant_act_dot4_q4_k_bsum_avx512
                             : quant_act_dot4_q5_k_bsum_avx512;
}

static int same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* A finite f16 (sign, exponent below 31: zeros and subnormals included). */
static uint16_t finite_f16(rng_state *r) {
    uint16_t h = (uint16_t)rng_next(r);
    if (((h >> 10) & 31) == 31) h &= (uint16_t)~(1u << 14);
    return h;
}

/* nrows weight rows of nb blocks, row j at w + j * stride + 1: mode 0 raw random (finite scales), 1 every code at
 * its maximum and scales at theirs, 2 zero scales, 3 Q8_0 all -128 (K-quants: raw again). */
static void fill_w(rng_state *r, uint32_t t, uint8_t *w, size_t nb, size_t stride, size_t nrows, int mode) {
    const size_t bsz = quant_block_bytes(t);
    for (size_t i = 0; i < stride * nrows; i++) w[i] = (uint8_t)rng_next(r);
    for (size_t k = 0; k < nb * nrows; k++) {
        uint8_t *b = w + k / nb * stride + 1 + k % nb * bsz;
        const int nd = t == QUANT_Q8_0 ? 1 : 2; /* d (and dmin) first in every layout */
        for (int j = 0; j < nd; j++) quant_store_u16(b + 2 * j, mode == 2 ? 0 : finite_f16(r));
        if (mode == 1) memset(b + 2 * nd, t == QUANT_Q8_0 ? 0x7F : 0xFF, bsz - 2 * (size_t)nd);
        if (mode == 3 && t == QUANT_Q8_0) memset(b + 2, 0x80, bsz - 2);
    }
}

/* An activation row of nb blocks: mode 0 random codes in -127..127, 1 all 127, 2 all -127, 3 all -128 (K-quants)
 * or alternating -128 / 127 (Q8_0), with consistent bsums; d random finite, some zero. */
static void fill_x(rng_state *r, uint32_t t, uint8_t *xq, size_t nb, int mode) {
    for (size_t b = 0; b < nb; b++) {
        int8_t *qs;
        float *d;
        size_t len;
        if (t == QUANT_Q8_0) {
            act_q8_32 *x = (act_q8_32 *)(void *)xq + b;
            d = &x->d, qs = x->qs, len = QUANT_QK8_0;
        } else {
            act_q8_k *x = (act_q8_k *)(void *)xq + b;
            d = &x->d, qs = x->qs, len = QUANT_QK_K;
        }
        *d = rng_next(r) % 7 == 0 ? 0.0f : rng_normal(r) * 0.05f;
        for (size_t k = 0; k < len; k++) {
            const int v = mode == 0 ? (int)(rng_next(r) % 255) - 127 : mode == 1 ? 127 : mode == 2 ? -127
                          : t == QUANT_Q8_0 && (k & 1) ? 127 : -128;
            qs[k] = (int8_t)v;
        }
        if (t != QUANT_Q8_0) {
            act_q8_k *x = (act_q8_k *)(void *)xq + b;
            for (int s = 0; s < 16; s++) {
                int sum = 0;
                for (int k = 0; k < 16; k++) sum += x->qs[16 * s + k];
                x->bsums[s] = (int16_t)sum;
            }
        }
    }
}

/* One (type, blocks, weight mode, activation mode) case over ROWS rows; returns the failures. */
static int run_case(rng_state *r, uint32_t t, size_t nb, int wmode, int xmode, uint8_t *w, uint8_t *xq) {
    const size_t be = t == QUANT_Q8_0 ? QUANT_QK8_0 : QUANT_QK_K, n = nb * be;
    const size_t rb = quant_row_bytes(t, n), stride = rb + 3; /* the 4-row forms' rows past each other */
    fill_w(r, t, w, nb, stride, ROWS, wmode);
    fill_x(r, t, xq, nb, xmode);
    const int vs_avx2 = !(t == QUANT_Q8_0 && xmode == 3); /* the AVX2 dot's domain: |x| <= 127 */
    const quant_act_dot_fn avx2 = al_one_row_dot(t);
    int bad = 0;
    for (size_t o = 0; o < ROWS; o++) {
        const uint8_t *row = w + o * stride + 1; /* odd addresses */
        const float v = dot512(t)(row, xq, n), want = al_oracle(t, row, xq, n);
        const float v2 = vs_avx2 ? avx2(row, xq, n) : want;
        if (!same(v, want) || !same(v, v2)) {
            if (bad++ < 3)
                fprintf(stderr, "  %s n=%zu w%d x%d row %zu: avx512 %.9g, avx2 %.9g, oracle %.9g\n", quant_type_name(t),
                        n, wmode, xmode, o, v, v2, want);
        }
    }
    for (size_t o = 0; o + 4 <= ROWS; o += 4) {
        float y[4];
        const size_t st = o % 8 ? stride : rb; /* both packed rows and rows with a gap */
        const uint8_t *row0 = w + o * stride + 1;
        dot4_512(t)(row0, st, xq, n, y);
        for (int k = 0; k < 4; k++) {
            const float v = dot512(t)(row0 + k * st, xq, n);
            if (!al_same(y[k], v) && bad++ < 3) /* packed reads take rows across the gaps: any bytes, NaN too */
                fprintf(stderr, "  %s n=%zu w%d x%d 4-row %zu+%d: %.9g, one-row %.9g\n", quant_type_name(t), n, wmode,
                        xmode, o, k, y[k], v);
        }
    }
    return bad;
}

static void test_dots(void) {
    static const size_t q8_blocks[] = {1, 3, 8, 9, 16, 21, MAX_BLOCKS};
    static const size_t k_blocks[] = {1, 2, 5};
    static const uint32_t types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K};
    const size_t wbytes = (quant_row_bytes(QUANT_Q8_0, MAX_BLOCKS * QUANT_QK8_0) + 3) * ROWS + PAD; /* the most */
    uint8_t *w = mem_alloc(wbytes);
    void *xq = mem_alloc(quant_act_row_bytes(QUANT_Q8_0, MAX_BLOCKS * QUANT_QK8_0) + 5 * sizeof(act_q8_k));
    if (!w || !xq) {
        CHECK(!"allocation failed");
        return;
    }
    rng_state r;
    rng_seed(&r, 512);
    int total = 0;
    for (size_t ti = 0; ti < 3; ti++) {
        const uint32_t t = types[ti];
        const size_t *nbs = t == QUANT_Q8_0 ? q8_blocks : k_blocks;
        const size_t nn = t == QUANT_Q8_0 ? sizeof q8_blocks / sizeof *q8_blocks : sizeof k_blocks / sizeof *k_blocks;
        for (size_t i = 0; i < nn; i++) {
            total += run_case(&r, t, nbs[i], 0, 0, w, xq);
            if (i % 2 == 0 || nbs[i] == MAX_BLOCKS) /* the extremes on every other size */
                for (int wm = 1; wm < 4; wm++)
                    for (int xm = 1; xm < 4; xm++) total += run_case(&r, t, nbs[i], wm, xm, w, xq);
        }
    }
    CHECK_EQ_INT(total, 0);
    mem_free(w);
    mem_free(xq);
}

/* The dispatch: the AMX level takes these dots unless CLOVER_BSUM512=0 (read once: the value at start). */
static void test_dispatch(void) {
    const char *e = getenv("CLOVER_BSUM512");
    const int off = e && strcmp(e, "0") == 0;
    CHECK_EQ_INT(quant_bsum512_active(), quant_amx_active() && !off);
    const quant_act_dot_fn k = quant_act_dot_kernel(QUANT_Q4_K);
    if (quant_bsum512_active()) {
        CHECK(k == quant_act_dot_q4_k_bsum_avx512);
        CHECK(quant_act_dot4_kernel(QUANT_Q8_0) == quant_act_dot4_q8_0_bsum_avx512);
        CHECK(quant_act_dot4_kernel(QUANT_Q6_K) == NULL);
    } else {
        CHECK(quant_act_dot4_kernel(QUANT_Q4_K) == NULL);
        if (quant_amx_active()) CHECK(k == quant_act_dot_q4_k_bsum_avx2);
    }
}

int main(void) {
    if (!quant_avx512_supported()) TEST_SKIP("the CPU lacks AVX-512 VNNI (avx512f/bw/vl/vnni)");
    printf("level: %s, bsum512 %s\n", quant_simd_level_name(), quant_bsum512_active() ? "on" : "off");
    RUN(test_dots);
    RUN(test_dispatch);
    return TEST_EXIT();
}
