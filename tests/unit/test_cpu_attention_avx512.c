/*
 * test_cpu_attention_avx512.c: the AVX-512 level of the attention core (src/cpu/attention_avx512.c) on a CPU that
 * has it:
 *  1. against the two-pass oracle: head sizes with and without a 16-lane tail, GQA groups 1..8, 1..40 rows over
 *     1..600 keys, causal and not;
 *  2. a row's bits whatever shares its call: row runs and head ranges cut any way (memcmp), a decode row against
 *     the same row inside causal passes of several sizes, a non-causal row against the causal row that sees the
 *     same keys, and the 3-thread pool;
 *  3. NaN and inf in K/V: the rows that see them give NaN, the rows that do not are unchanged bit for bit;
 *  4. cpu_attn_forward_keys runs this kernel at the AVX-512 level and the AVX2 kernel otherwise, bit for bit
 *     (run again under CLOVER_NO_AVX512=1 by tests/CMakeLists.txt: the AVX2 level keeps the old kernel's bits).
 * Exits 77 with "SKIP: the CPU lacks AVX-512" elsewhere.
 */
#include "base/threadpool.h"
#include "cpu/attention.h"
#include "cpu/cpu_simd.h"
#include "cpu_ops_test.h"
#include "quant/simd_level.h"
#include "attn_case.h"

static float *scratch_for(const cpu_attn_dims *d, size_t n_ctx) {
    return malloc(cpu_attn_scratch_floats(d, n_ctx) * sizeof(float));
}

/* 1. The online softmax over <= 10 tiles of 64 keys and sums <= 600 long, against the two-pass oracle: the AVX2
 * level's 5e-6 at <= 5 tiles; 1e-5 over 600 keys. */
static void avx512_matches_scalar(void) {
    const size_t shapes[][5] = {/* nh, nkv, hd, pos, n */
                                {1, 1, 8, 0, 1},     {6, 2, 40, 100, 37},  {4, 4, 33, 5, 17},  {8, 1, 64, 200, 3},
                                {3, 1, 7, 63, 66},   {16, 2, 256, 70, 20}, {16, 2, 256, 512, 32},
                                {5, 5, 100, 560, 40}, {8, 8, 17, 0, 40},   {24, 3, 48, 591, 9}, {2, 1, 1, 0, 2},
                                {16, 2, 256, 4, 1}};
    double worst = 0.0;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        attn_case c;
        attn_case_init(&c, shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3], shapes[si][4], 500 + si);
        const size_t nh = c.d.n_head, m = c.n * nh * c.d.head_dim, keys = c.pos + c.n;
        float *a = malloc(m * 4), *b = malloc(m * 4), *scratch = scratch_for(&c.d, keys);
        for (int causal = 0; causal < 2; causal++) {
            cpu_attn_forward_scalar(a, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, 0, nh, scratch);
            cpu_attn_forward_keys_avx512(b, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, keys, 0, nh,
                                         scratch);
            double e = ops_nerr(b, a, m);
            if (e > worst) worst = e;
            CHECK_MSG(e < 1e-5, "shape %zu causal %d: nerr %g", si, causal, e);
        }
        free(a), free(b), free(scratch);
        attn_case_free(&c);
    }
    OPS_NOTE("worst nerr vs the oracle: %.2g", worst);
}

/* 2. Bits of a row across row counts, slices and head ranges (memcmp). */
static void avx512_rows_are_batch_invariant(void) {
    const size_t shapes[][4] = {/* nh, nkv, hd, pos */
                                {16, 2, 256, 200}, {6, 3, 40, 63}, {3, 1, 7, 100}, {8, 1, 20, 0}};
    const size_t rows[] = {1, 5, 32, 33, 40};
    const size_t row_chunks[] = {1, 3, 7, 16, 17};
    const size_t head_chunks[] = {1, 2, 3, 5};
    threadpool *pool = NULL;
    clover_error err;
    CHECK(threadpool_create(&pool, 3, &err) == CLOVER_OK);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (size_t ni = 0; ni < sizeof rows / sizeof *rows; ni++) {
            attn_case c;
            attn_case_init(&c, shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3], rows[ni],
                           700 + 10 * si + ni);
            const size_t nh = c.d.n_head, rs = nh * c.d.head_dim, m = c.n * rs, keys = c.pos + c.n;
            float *one = malloc(m * 4), *b = malloc(m * 4);
            float *scratch = malloc(3 * cpu_attn_scratch_floats(&c.d, keys) * 4);
            for (int causal = 0; causal < 2; causal++) {
                cpu_attn_forward_keys_avx512(one, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, keys,
                                             0, nh, scratch);
                for (size_t ri = 0; ri < sizeof row_chunks / sizeof *row_chunks; ri++)
                    for (size_t hi = 0; hi < sizeof head_chunks / sizeof *head_chunks; hi++) {
                        attn_case_chunked(cpu_attn_forward_keys_avx512, b, &c, causal, row_chunks[ri], head_chunks[hi],
                                          scratch);
                        CHECK_MSG(ops_bits_equal(one, b, m),
                                  "shape %zu, %zu rows, causal %d, rows by %zu, heads by %zu", si, c.n, causal,
                                  row_chunks[ri], head_chunks[hi]);
                    }
                /* the dispatching pool, where it runs this kernel (test 4) */
                if (!quant_avx512_active()) continue;
                memset(b, 0xff, m * 4);
                cpu_attn_forward_pool(pool, b, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, keys,
                                      scratch);
                CHECK_MSG(ops_bits_equal(one, b, m), "shape %zu, %zu rows, causal %d: pool", si, c.n, causal);
            }
            free(one), free(b), free(scratch);
            attn_case_free(&c);
        }
    threadpool_free(pool);
}

/* 2. A decode row (1 row at its position, causal) is the same row inside causal passes (a commit) of any size
 * that contain it, and a non-causal row over K keys is the causal row at position K - 1 with its query. */
static void avx512_decode_row_equals_commit_row(void) {
    const size_t shapes[][4] = {/* nh, nkv, hd, pos */
                                {16, 2, 256, 480}, {6, 3, 40, 1}, {4, 1, 33, 127}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        attn_case c;
        attn_case_init(&c, shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3], 32, 900 + si);
        const size_t nh = c.d.n_head, rs = nh * c.d.head_dim, keys = c.pos + c.n;
        float *commit = malloc(c.n * rs * 4), *part = malloc(c.n * rs * 4), *dec = malloc(rs * 4);
        float *q2 = malloc(rs * 4), *g2 = malloc(rs * 4), *scratch = scratch_for(&c.d, keys);
        cpu_attn_forward_keys_avx512(commit, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, true, keys, 0, nh,
                                     scratch);
        for (size_t r = 0; r < c.n; r++) {
            cpu_attn_forward_keys_avx512(dec, c.q + r * rs, c.gate + r * rs, c.kc, c.vc, &c.d, (int64_t)(c.pos + r), 1,
                                         true, c.pos + r + 1, 0, nh, scratch);
            CHECK_MSG(ops_bits_equal(dec, commit + r * rs, rs), "shape %zu: decode row %zu vs the 32-row commit", si,
                      r);
        }
        /* commits of the first k rows (k = 1, 9, 17, 31): a causal row ignores the rows after it */
        const size_t firsts[] = {1, 9, 17, 31};
        for (size_t fi = 0; fi < 4; fi++) {
            cpu_attn_forward_keys_avx512(part, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, firsts[fi], true,
                                         c.pos + firsts[fi], 0, nh, scratch);
            CHECK_MSG(ops_bits_equal(part, commit, firsts[fi] * rs), "shape %zu: %zu-row commit", si, firsts[fi]);
        }
        /* non-causal row r over all keys == the causal row at keys - 1 with row r's query and gate */
        cpu_attn_forward_keys_avx512(part, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, false, keys, 0, nh,
                                     scratch);
        for (size_t r = 0; r < c.n; r += 5) {
            memcpy(q2, c.q + r * rs, rs * 4);
            memcpy(g2, c.gate + r * rs, rs * 4);
            cpu_attn_forward_keys_avx512(dec, q2, g2, c.kc, c.vc, &c.d, (int64_t)(keys - 1), 1, true, keys, 0, nh,
                                         scratch);
            CHECK_MSG(ops_bits_equal(dec, part + r * rs, rs), "shape %zu: non-causal row %zu vs causal last", si, r);
        }
        free(commit), free(part), free(dec), free(q2), free(g2), free(scratch);
        attn_case_free(&c);
    }
}

/* 3. NaN in K and inf in V at the last row's own key: a causal pass's earlier rows never see it (same bits as
 * without), the last row and every non-causal row give NaN; no crash. inf in q: NaN (inf * 0 or inf - inf). */
static void avx512_nan_inf(void) {
    attn_case c;
    attn_case_init(&c, 8, 2, 40, 70, 20, 31);
    const size_t nh = c.d.n_head, hd = c.d.head_dim, rs = nh * hd, m = c.n * rs, keys = c.pos + c.n;
    float *clean = malloc(m * 4), *dirty = malloc(m * 4), *scratch = scratch_for(&c.d, keys);
    cpu_attn_forward_keys_avx512(clean, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, true, keys, 0, nh,
                                 scratch);
    for (size_t kvh = 0; kvh < 2; kvh++) {
        c.kc[((keys - 1) * 2 + kvh) * hd + 3] = NAN;
        c.vc[((keys - 1) * 2 + kvh) * hd + 5] = INFINITY;
    }
    cpu_attn_forward_keys_avx512(dirty, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, true, keys, 0, nh,
                                 scratch);
    CHECK(ops_bits_equal(clean, dirty, (c.n - 1) * rs));
    size_t nans = 0;
    for (size_t i = (c.n - 1) * rs; i < m; i++) nans += isnan(dirty[i]) != 0;
    CHECK_MSG(nans == rs, "last row: %zu NaN of %zu", nans, rs);
    cpu_attn_forward_keys_avx512(dirty, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, false, keys, 0, nh,
                                 scratch);
    nans = 0;
    for (size_t i = 0; i < m; i++) nans += isnan(dirty[i]) != 0;
    CHECK_MSG(nans == m, "non-causal: %zu NaN of %zu", nans, m);
    /* inf in one query: that query's scores are +-inf or NaN; its output must not be finite garbage */
    attn_case_free(&c);
    attn_case_init(&c, 8, 2, 40, 70, 20, 31);
    c.q[7 * rs + 2 * hd + 1] = INFINITY;
    cpu_attn_forward_keys_avx512(dirty, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, true, keys, 0, nh,
                                 scratch);
    size_t bad = 0;
    for (size_t i = 0; i < hd; i++) bad += isnan(dirty[7 * rs + 2 * hd + i]) != 0;
    CHECK_MSG(bad > 0, "an inf query gave a finite row");
    for (size_t r = 0; r < c.n; r++)
        if (r != 7) CHECK(ops_bits_equal(clean + r * rs, dirty + r * rs, rs));
    free(clean), free(dirty), free(scratch);
    attn_case_free(&c);
}

/* 4. The dispatcher runs the level's kernel: AVX-512 here, the unchanged AVX2 kernel under CLOVER_NO_AVX512=1. */
static void dispatch_is_the_level_kernel(void) {
    attn_case c;
    attn_case_init(&c, 16, 2, 256, 300, 32, 41);
    const size_t nh = c.d.n_head, m = c.n * nh * c.d.head_dim, keys = c.pos + c.n;
    float *a = malloc(m * 4), *b = malloc(m * 4), *scratch = scratch_for(&c.d, keys);
    for (int causal = 0; causal < 2; causal++) {
        cpu_attn_forward_keys(a, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, keys, 0, nh, scratch);
        if (quant_avx512_active())
            cpu_attn_forward_keys_avx512(b, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, keys, 0, nh,
                                         scratch);
        else
            cpu_attn_forward_keys_avx2(b, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, keys, 0, nh,
                                       scratch);
        CHECK_MSG(ops_bits_equal(a, b, m), "causal %d: the dispatcher is not the %s kernel", causal,
                  quant_avx512_active() ? "AVX-512" : "AVX2");
        /* and the two levels differ (so the check above can tell them apart) only by float order */
        cpu_attn_forward_keys_avx2(b, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, keys, 0, nh,
                                   scratch);
        CHECK(ops_nerr(a, b, m) < 1e-5);
        if (quant_avx512_active()) CHECK(!ops_bits_equal(a, b, m));
    }
    free(a), free(b), free(scratch);
    attn_case_free(&c);
}

int main(void) {
    if (!quant_avx512_supported() || !cpu_simd_supported())
        TEST_SKIP("the CPU lacks AVX-512 (avx512f/bw/vl/vnni) or AVX2+FMA");
    printf("level: %s\n", quant_simd_level_name());
    RUN(avx512_matches_scalar);
    RUN(avx512_rows_are_batch_invariant);
    RUN(avx512_decode_row_equals_commit_row);
    RUN(avx512_nan_inf);
    RUN(dispatch_is_the_level_kernel);
    return TEST_EXIT();
}
