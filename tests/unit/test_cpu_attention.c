/*
 * test_cpu_attention.c: the gated attention layer (between its projections)
 * against transformers' Qwen3_5MoeAttention over a DynamicCache (tests/data/
 * ops/attention.bin: a 5-row prompt, then 3 rows over the cache), a
 * hand-computed two-key case, the non-causal (preview) mask, and the tiled
 * AVX2 path against the two-pass oracle on sizes that cross its tiles.
 */
#include "base/threadpool.h"
#include "cpu/attention.h"
#include "cpu/cpu_simd.h"
#include "cpu/rope.h"
#include "cpu_ops_test.h"
#include "attn_case.h"

/* One query head of 4 dims (scale 1/2) over two cached keys:
 * scores (2 * 1) / 2 = 1 and 0, p = (e, 1) / (e + 1); gate 0 -> x 1/2. */
static void attention_hand_case(void) {
    cpu_attn_dims d = {.n_head = 1, .n_head_kv = 1, .head_dim = 4, .rot = 0, .eps = 1e-6f};
    const float q[4] = {2, 0, 0, 0}, gate[4] = {0, 0, 0, 0};
    const float kc[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    const float vc[8] = {1, 2, 3, 4, -1, 0, 1, 0};
    float out[4], scratch[4096];
    double p0 = exp(1.0) / (exp(1.0) + 1.0), p1 = 1.0 / (exp(1.0) + 1.0);
    for (int fast = 0; fast < 2; fast++) {
        if (fast && !cpu_simd_supported()) break;
        /* the row is at position 1 over a cache of 2 rows */
        if (fast)
            cpu_attn_forward_avx2(out, q, gate, kc, vc, &d, 1, 1, true, 0, 1, scratch);
        else
            cpu_attn_forward_scalar(out, q, gate, kc, vc, &d, 1, 1, true, 0, 1, scratch);
        CHECK_NEAR(out[0], 0.5 * (p0 - p1), 1e-6);
        CHECK_NEAR(out[1], 0.5 * (2 * p0), 1e-6);
        CHECK_NEAR(out[2], 0.5 * (3 * p0 + p1), 1e-6);
        CHECK_NEAR(out[3], 0.5 * (4 * p0), 1e-6);
    }
}

/* The torch case: 4 query heads, 2 KV heads (GQA 2), head 32, rot 8, theta
 * 1e4, eps 1e-6. Reductions are 32 long (norms, dots) and at most 8 long
 * (softmax, weighted sum), so float32 reorderings stay within ~1e-6 of the
 * scale; a wrong GQA mapping, q/gate split, norm or RoPE order is O(1). */
static void attention_matches_torch(void) {
    ops_vectors v;
    if (ops_vectors_load(&v, "attention.bin")) return;
    const int32_t *dims = ops_i32(&v, "dims", NULL);
    const float *theta = ops_f32(&v, "theta", NULL);
    const float *qg = ops_f32(&v, "q_proj_out", NULL), *kp = ops_f32(&v, "k_proj_out", NULL),
                *vp = ops_f32(&v, "v_proj_out", NULL);
    const float *qn = ops_f32(&v, "q_norm_stored", NULL), *kn = ops_f32(&v, "k_norm_stored", NULL);
    const float *want = ops_f32(&v, "out", NULL);
    if (!dims || !theta || !qg || !kp || !vp || !qn || !kn || !want) {
        ops_vectors_free(&v);
        return;
    }
    cpu_attn_dims d = {.n_head = (size_t)dims[0], .n_head_kv = (size_t)dims[1], .head_dim = (size_t)dims[2],
                       .rot = (size_t)dims[3], .eps = 1e-6f};
    size_t runs[2] = {(size_t)dims[4], (size_t)dims[5]}, n_all = runs[0] + runs[1];
    size_t nh = d.n_head, nkv = d.n_head_kv, hd = d.head_dim;
    float inv[64], cs[128];
    rope_inv_freq(inv, d.rot, theta[0]);
    for (int fast = 0; fast < 2; fast++) {
        if (fast && !cpu_simd_supported()) break;
        float *kc = calloc(n_all * nkv * hd, 4), *vc = calloc(n_all * nkv * hd, 4);
        float *q = malloc(n_all * nh * hd * 4), *gate = malloc(n_all * nh * hd * 4), *out = malloc(n_all * nh * hd * 4);
        float *scratch = malloc(cpu_attn_scratch_floats(&d, n_all) * 4);
        size_t pos = 0;
        for (int c = 0; c < 2; c++) {
            size_t n = runs[c];
            cpu_attn_prepare(q + pos * nh * hd, gate + pos * nh * hd, kc, vc, qg + pos * nh * 2 * hd,
                             kp + pos * nkv * hd, vp + pos * nkv * hd, qn, kn, inv, &d, (int64_t)pos, n, cs);
            if (fast)
                cpu_attn_forward_avx2(out + pos * nh * hd, q + pos * nh * hd, gate + pos * nh * hd, kc, vc, &d,
                                      (int64_t)pos, n, true, 0, nh, scratch);
            else
                cpu_attn_forward_scalar(out + pos * nh * hd, q + pos * nh * hd, gate + pos * nh * hd, kc, vc, &d,
                                        (int64_t)pos, n, true, 0, nh, scratch);
            pos += n;
        }
        double e = ops_nerr(out, want, n_all * nh * hd);
        CHECK_MSG(e < 2e-6, "%s: nerr %g", fast ? "avx2" : "scalar", e);
        OPS_NOTE("%s vs torch: nerr %.2g", fast ? "avx2" : "scalar", e);
        free(kc), free(vc), free(q), free(gate), free(out), free(scratch);
    }
    ops_vectors_free(&v);
}


/* Tiled one-pass (AVX2) against two-pass (scalar) on shapes that cross the
 * 16-row blocks and 64-key tiles, GQA groups of 1, 3 and 8, head sizes with
 * a vector tail, both masks, and a split of the heads into two ranges (what
 * a thread pool does). The online softmax rescales partial sums, so the two
 * differ by a few ulp per tile (<= 4 tiles here) plus the reordered 300-long
 * sums: 5e-6 of the scale. */
static void attention_avx2_matches_scalar(void) {
    if (!cpu_simd_supported()) {
        printf("     (no AVX2+FMA: fast path not tested)\n");
        return;
    }
    const size_t shapes[][5] = {/* nh, nkv, hd, pos, n */
                                {1, 1, 8, 0, 1},    {6, 2, 40, 100, 37}, {4, 4, 33, 5, 17},
                                {8, 1, 64, 200, 3}, {3, 1, 7, 63, 66},   {16, 2, 256, 70, 20}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        attn_case c;
        attn_case_init(&c, shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3], shapes[si][4], 100 + si);
        size_t nh = c.d.n_head, hd = c.d.head_dim, m = c.n * nh * hd;
        float *a = malloc(m * 4), *b = malloc(m * 4);
        float *scratch = malloc(cpu_attn_scratch_floats(&c.d, c.pos + c.n) * 4);
        for (int causal = 0; causal < 2; causal++) {
            cpu_attn_forward_scalar(a, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, 0, nh, scratch);
            size_t split = nh / 2;
            cpu_attn_forward_avx2(b, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, 0, split, scratch);
            cpu_attn_forward_avx2(b, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, split, nh, scratch);
            double e = ops_nerr(b, a, m);
            CHECK_MSG(e < 5e-6, "shape %zu causal %d: nerr %g", si, causal, e);
        }
        free(a), free(b), free(scratch);
        attn_case_free(&c);
    }
}

/* The preview mask: with causal = false every row sees rows 0..pos+n-1, so
 * row r must equal what the causal pass gives the LAST row (which sees the
 * same keys) when row r's query and gate are put there. */
static void attention_noncausal_sees_the_block(void) {
    attn_case c;
    attn_case_init(&c, 4, 2, 16, 9, 6, 7);
    size_t nh = c.d.n_head, hd = c.d.head_dim, rs = nh * hd, last = c.n - 1;
    float *all = malloc(c.n * rs * 4), *one = malloc(c.n * rs * 4);
    float *q2 = malloc(c.n * rs * 4), *g2 = malloc(c.n * rs * 4);
    float *scratch = malloc(cpu_attn_scratch_floats(&c.d, c.pos + c.n) * 4);
    cpu_attn_forward(all, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, false, 0, nh, scratch);
    for (size_t r = 0; r < c.n; r++) {
        memcpy(q2, c.q, c.n * rs * 4);
        memcpy(g2, c.gate, c.n * rs * 4);
        memcpy(q2 + last * rs, c.q + r * rs, rs * 4);
        memcpy(g2 + last * rs, c.gate + r * rs, rs * 4);
        cpu_attn_forward_scalar(one, q2, g2, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, true, 0, nh, scratch);
        CHECK_MSG(ops_nerr(all + r * rs, one + last * rs, rs) < 5e-6, "row %zu", r);
    }
    /* and the causal first row differs from the non-causal one (it sees fewer keys) */
    cpu_attn_forward_scalar(one, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, true, 0, nh, scratch);
    CHECK(ops_nerr(all, one, rs) > 1e-3);
    free(all), free(one), free(q2), free(g2), free(scratch);
    attn_case_free(&c);
}

/* The pool form splits heads and rows into tasks; each task is the
 * same computation on a sub-range, so with a 3-thread pool it must equal the
 * one-call result of the dispatching function bit for bit: a decode row, a
 * prompt of 70 rows, and a non-causal block. */
static void attention_pool_matches_single_call(void) {
    threadpool *pool = NULL;
    clover_error err;
    CHECK(threadpool_create(&pool, 3, &err) == CLOVER_OK);
    const size_t shapes[][6] = {/* nh, nkv, hd, pos, n, causal */
                                {16, 2, 64, 300, 1, 1}, {8, 2, 32, 10, 70, 1}, {6, 3, 24, 40, 32, 0}};
    for (size_t si = 0; si < 3; si++) {
        attn_case c;
        attn_case_init(&c, shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3], shapes[si][4], 300 + si);
        bool causal = shapes[si][5] != 0;
        size_t m = c.n * c.d.n_head * c.d.head_dim, n_ctx = c.pos + c.n, per = cpu_attn_scratch_floats(&c.d, n_ctx);
        float *a = malloc(m * 4), *b = malloc(m * 4), *scratch = malloc(threadpool_size(pool) * per * 4);
        cpu_attn_forward(a, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, 0, c.d.n_head, scratch);
        cpu_attn_forward_pool(pool, b, c.q, c.gate, c.kc, c.vc, &c.d, (int64_t)c.pos, c.n, causal, n_ctx, scratch);
        CHECK_MSG(ops_bits_equal(a, b, m), "shape %zu: nerr %g", si, ops_nerr(b, a, m));
        free(a), free(b), free(scratch);
        attn_case_free(&c);
    }
    threadpool_free(pool);
}

static void dims_check_names_the_field(void) {
    clover_error err = {0};
    cpu_attn_dims d = {.n_head = 16, .n_head_kv = 2, .head_dim = 256, .rot = 64, .eps = 1e-6f};
    CHECK_EQ_INT(cpu_attn_dims_check(&d, &err), CLOVER_OK);
    d.n_head_kv = 3;
    CHECK_EQ_INT(cpu_attn_dims_check(&d, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "n_head_kv 3") != NULL, "%s", err.message);
    d.n_head_kv = 2, d.rot = 258;
    CHECK_EQ_INT(cpu_attn_dims_check(&d, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "rotary dims 258") != NULL, "%s", err.message);
    d.rot = 63;
    CHECK_EQ_INT(cpu_attn_dims_check(&d, &err), CLOVER_E_FORMAT);
    d.rot = 0, d.head_dim = 0;
    CHECK_EQ_INT(cpu_attn_dims_check(&d, &err), CLOVER_E_FORMAT);
}

int main(void) {
    RUN(dims_check_names_the_field);
    RUN(attention_hand_case);
    RUN(attention_matches_torch);
    RUN(attention_avx2_matches_scalar);
    RUN(attention_noncausal_sees_the_block);
    RUN(attention_pool_matches_single_call);
    return TEST_EXIT();
}
