/*
 * test_cpu_attention_split.c: a pass of cpu_attn_forward cut into pieces is
 * the same bits as the pass in one call. The pool splits a non-causal pass
 * (the preview block) over rows as well as heads, each run of rows given the
 * whole block's keys (cpu_attn_forward_keys); a row must not see a different
 * key set, nor its sums a different order, whichever rows and heads share its
 * task. The pass's prepare (norms, RoPE, cache rows) on the pool likewise. Checked for non-causal blocks of 1, 5, 32 and 33 rows (under, at and
 * over the 16-row blocks of the tiled path) and causal passes as before, both
 * over pools of 1..16 threads and over forced row / head chunkings, plus the
 * pool's non-causal result against the two-pass oracle. Runs once at the
 * process's level (tiled AVX2 where the CPU has it) and once under
 * CLOVER_NO_SIMD=1 (the scalar oracle itself split; tests/CMakeLists.txt).
 */
#include "base/threadpool.h"
#include "cpu/attention.h"
#include "cpu/cpu_simd.h"
#include "model/rope_table.h"
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

/* cpu_attn_prepare_pool (q / k norms, RoPE, the cache writes in runs of rows on the pool) writes the bits of one
 * cpu_attn_prepare call: q, gate and the two caches' rows, over pools of 1..16 threads and passes of 1..33 rows (under
 * its 4-row threshold, an uneven last run, more rows than threads), partial and whole rotary dims and none. */
static void prepare_pool_matches_one_call(void) {
    const size_t shapes[][5] = {/* nh, nkv, hd, rot, pos: the 35B-A3B's (64 of 256 rotary dims), whole, none */
                                {16, 2, 256, 64, 200},
                                {6, 3, 40, 40, 63},
                                {3, 1, 8, 0, 9}};
    const size_t rows[] = {1, 3, 4, 5, 17, 32, 33};
    const size_t threads[] = {1, 2, 3, 4, 7, 16};
    threadpool *pools[sizeof threads / sizeof *threads];
    clover_error err;
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
        CHECK(threadpool_create(&pools[t], threads[t], &err) == CLOVER_OK);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (size_t ni = 0; ni < sizeof rows / sizeof *rows; ni++) {
            const size_t nh = shapes[si][0], nkv = shapes[si][1], hd = shapes[si][2], pos = shapes[si][4];
            const size_t n = rows[ni], nq = n * nh * hd, nc = (pos + n) * nkv * hd, rot = shapes[si][3];
            const cpu_attn_dims d = {.n_head = nh, .n_head_kv = nkv, .head_dim = hd, .rot = rot, .eps = 1e-6f};
            rng_state r;
            rng_seed(&r, 4000 + 10 * si + ni);
            float *qg = malloc(2 * nq * 4), *k = malloc(n * nkv * hd * 4), *v = malloc(n * nkv * hd * 4);
            float *qn = malloc(hd * 4), *kn = malloc(hd * 4), *inv = malloc((rot / 2 + 1) * 4);
            float *cs = malloc(16 * (rot + 1) * 4), *out[2][4];
            ops_fill(qg, 2 * nq, &r, 1.0f), ops_fill(k, n * nkv * hd, &r, 1.0f), ops_fill(v, n * nkv * hd, &r, 1.0f);
            ops_fill(qn, hd, &r, 1.0f), ops_fill(kn, hd, &r, 1.0f);
            if (rot) rope_inv_freq(inv, rot, 1e7f);
            for (int o = 0; o < 2; o++) {
                for (int i = 0; i < 2; i++) out[o][i] = malloc(nq * 4);
                for (int i = 2; i < 4; i++) {
                    out[o][i] = malloc(nc * 4);
                    memset(out[o][i], 0, nc * 4);
                }
            }
            cpu_attn_prepare(out[0][0], out[0][1], out[0][2], out[0][3], qg, k, v, qn, kn, inv, &d, (int64_t)pos, n,
                             cs);
            for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
                memset(out[1][0], 0xff, nq * 4), memset(out[1][1], 0xff, nq * 4);
                cpu_attn_prepare_pool(pools[t], out[1][0], out[1][1], out[1][2], out[1][3], qg, k, v, qn, kn, inv, &d,
                                      (int64_t)pos, n, cs);
                for (int i = 0; i < 4; i++)
                    CHECK_MSG(ops_bits_equal(out[0][i], out[1][i], i < 2 ? nq : nc),
                              "prepare: shape %zu, %zu rows, %zu threads, output %d differs", si, n, threads[t], i);
            }
            for (int o = 0; o < 2; o++)
                for (int i = 0; i < 4; i++) free(out[o][i]);
            free(qg), free(k), free(v), free(qn), free(kn), free(inv), free(cs);
        }
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) threadpool_free(pools[t]);
}

int main(void) {
    RUN(split_matches_one_call);
    RUN(prepare_pool_matches_one_call);
    RUN(slice_sees_the_whole_block);
    return TEST_EXIT();
}
