/*
 * test_cpu_attention_split.c: a pass of cpu_attn_forward cut into pieces is
 * the same bits as the pass in one call. The pool splits a non-causal pass
 * (the preview block) over rows as well as heads, each run of rows given the
 * whole block's keys (cpu_attn_forward_keys); a row must not see a different
 * key set, nor its sums a different order, whichever rows and heads share its
 * task. Checked for non-causal blocks of 1, 5, 32 and 33 rows (under, at and
 * over the 16-row blocks of the tiled path) and causal passes as before, both
 * over pools of 1..16 threads and over forced row / head chunkings, plus the
 * pool's non-causal result against the two-pass oracle. Runs once at the
 * process's level (tiled AVX2 where the CPU has it) and once under
 * CLOVER_NO_SIMD=1 (the scalar oracle itself split; tests/CMakeLists.txt).
 */
#include "base/threadpool.h"
#include "cpu/attention.h"
#include "cpu/cpu_simd.h"
#include "cpu_ops_test.h"
#include "attn_case.h"


static void split_matches_one_call(void) {
    const size_t shapes[][4] = {/* nh, nkv, hd, pos: the 35B-A3B's heads, GQA 2 with a tail of hd, GQA 3 */
                                {16, 2, 256, 200},
                                {6, 3, 40, 63},
                                {3, 1, 7, 100}};
    const size_t rows[] = {1, 5, 32, 33};
    const size_t threads[] = {1, 2, 3, 4, 7, 16};
    const size_t row_chunks[] = {1, 3, 7, 16, 17};
    const size_t head_chunks[] = {1, 2, 5};
    threadpool *pools[sizeof threads / sizeof *threads];
    clover_error err;
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
        CHECK(threadpool_create(&pools[t], threads[t], &err) == CLOVER_OK);
    OPS_NOTE("level: %s", cpu_simd_active() ? "tiled AVX2" : "scalar");
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        for (size_t ni = 0; ni < sizeof rows / sizeof *rows; ni++) {
            attn_case c;
            attn_case_init(&c, shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3], rows[ni],
                            1000 + 10 * si + ni);
            const size_t nh = c.d.n_head, m = c.n * nh * c.d.head_dim, n_ctx = c.pos + c.n;
            const size_t per = cpu_attn_scratch_floats(&c.d, n_ctx);
            float *one = malloc(m * 4), *b = malloc(m * 4), *ref = malloc(m * 4);
            float *scratch = malloc(16 * per * 4);
            for (int causal = 0; causal < 2; causal++) {
                cpu_attn_forward(one, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, 0, nh, scratch);
                for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
                    memset(b, 0xff, m * 4);
                    cpu_attn_forward_pool(pools[t], b, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal,
                                          n_ctx, scratch);
                    CHECK_MSG(ops_bits_equal(one, b, m), "shape %zu, %zu rows, causal %d, %zu threads: nerr %g", si,
                              c.n, causal, threads[t], ops_nerr(b, one, m));
                }
                for (size_t ri = 0; ri < sizeof row_chunks / sizeof *row_chunks; ri++)
                    for (size_t hi = 0; hi < sizeof head_chunks / sizeof *head_chunks; hi++) {
                        attn_case_chunked(cpu_attn_forward_keys, b, &c, causal, row_chunks[ri], head_chunks[hi],
                                          scratch);
                        CHECK_MSG(ops_bits_equal(one, b, m),
                                  "shape %zu, %zu rows, causal %d, rows by %zu, heads by %zu: nerr %g", si, c.n,
                                  causal, row_chunks[ri], head_chunks[hi], ops_nerr(b, one, m));
                    }
                /* and the split pass is still the attention: within test_cpu_attention's bound for the tiled
                 * path against the two-pass oracle (<= 5 tiles of 64 keys here, sums <= 233 long: 5e-6) */
                cpu_attn_forward_scalar(ref, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, 0, nh,
                                        scratch);
                cpu_attn_forward_pool(pools[3], b, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, n_ctx,
                                      scratch);
                double e = ops_nerr(b, ref, m);
                CHECK_MSG(e < 5e-6, "shape %zu, %zu rows, causal %d vs the oracle: nerr %g", si, c.n, causal, e);
            }
            free(one), free(b), free(ref), free(scratch);
            attn_case_free(&c);
        }
    }
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) threadpool_free(pools[t]);
}

/* A non-causal row in a run of its own sees the whole block: rows r0.. alone
 * at pos + r0 with n_keys = pos + n differ from the same rows as a block of
 * their own (which would see only pos + r0 + rows keys), so the test above
 * would catch a split that lost the key extent. */
static void slice_sees_the_whole_block(void) {
    attn_case c;
    attn_case_init(&c, 4, 2, 16, 9, 32, 77);
    const size_t nh = c.d.n_head, rs = nh * c.d.head_dim, r0 = 8, rows = 8;
    float *whole = malloc(c.n * rs * 4), *slice = malloc(rows * rs * 4), *alone = malloc(rows * rs * 4);
    float *scratch = malloc(cpu_attn_scratch_floats(&c.d, c.pos + c.n) * 4);
    cpu_attn_forward(whole, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, false, 0, nh, scratch);
    cpu_attn_forward_keys(slice, c.q + r0 * rs, c.gate + r0 * rs, c.kc, c.vc, &c.d, (int64_t)(c.pos + r0), rows,
                          false, c.pos + c.n, 0, nh, scratch);
    cpu_attn_forward(alone, c.q + r0 * rs, c.gate + r0 * rs, c.kc, c.vc, &c.d, (int64_t)(c.pos + r0), rows, false, 0,
                     nh, scratch);
    CHECK(ops_bits_equal(whole + r0 * rs, slice, rows * rs));
    CHECK(ops_nerr(alone, slice, rows * rs) > 1e-3);
    free(whole), free(slice), free(alone), free(scratch);
    attn_case_free(&c);
}

int main(void) {
    RUN(split_matches_one_call);
    RUN(slice_sees_the_whole_block);
    return TEST_EXIT();
}
