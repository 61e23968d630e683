/*
 * bench_ops.c: timings of the CPU operators of the causal trunk at the
 * shipped model's sizes (Qwen3.5-35B-A3B: attention 16 x 256 with 2 KV heads,
 * GDN 16 key / 32 value heads of 128, hidden 2048), scalar oracle against the
 * fast path, and the GDN recurrence against the chunked form by row count
 * (which form the CPU backend should use), and a preview's GDN block operator
 * on one thread against the pool (how far the mixers' own work scales: what
 * a preview keeps outside its products on a many-core host). Prints one line
 * per measurement. Attention prints the AVX-512 level's kernel beside the
 * AVX2 one where the CPU has it (and their ratio); its pool runs the
 * process's level (CLOVER_NO_AVX512=1 keeps it at AVX2).
 *
 *   bench_ops [threads [norm|attention|gdn]]   (default 1 thread, every section)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "base/threadpool.h"
#include "base/timer.h"
#include "cpu/attention.h"
#include "cpu/cpu_simd.h"
#include "cpu/gdn.h"
#include "cpu/gdn_block.h"
#include "cpu/norm.h"
#include "quant/simd_level.h"

static float *bench_random(size_t n, uint64_t seed, float scale) {
    float *x = malloc(n * sizeof *x);
    rng_state r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = scale * rng_normal(&r);
    return x;
}

/* Seconds per call: repeats until 0.3 s have passed (at least once). */
#define BENCH_TIME(out, stmt)                               \
    do {                                                    \
        double t0_ = timer_now(), t_;                       \
        size_t reps_ = 0;                                   \
        do {                                                \
            stmt;                                           \
            reps_++;                                        \
            t_ = timer_now() - t0_;                         \
        } while (t_ < 0.3);                                 \
        (out) = t_ / (double)reps_;                         \
    } while (0)

static void bench_norm(void) {
    const size_t rows = 512, n = 2048;
    float *x = bench_random(rows * n, 1, 1.0f), *w = bench_random(n, 2, 1.0f), *y = malloc(rows * n * 4);
    double ts, tf = 0;
    BENCH_TIME(ts, cpu_rms_norm_scalar(y, x, w, rows, n, 1e-6f));
    if (cpu_simd_supported()) BENCH_TIME(tf, cpu_rms_norm_avx2(y, x, w, rows, n, 1e-6f));
    printf("rms_norm        512 x 2048          scalar %8.3f ms   avx2 %8.3f ms\n", ts * 1e3, tf * 1e3);
    free(x), free(w), free(y);
}

static void bench_attention(threadpool *pool) {
    cpu_attn_dims d = {.n_head = 16, .n_head_kv = 2, .head_dim = 256, .rot = 64, .eps = 1e-6f};
    /* pos, n, causal: the last is a block-diffusion preview (32 rows seeing all 544 keys) */
    const size_t cases[][3] = {{0, 512, 1}, {4095, 1, 1}, {4064, 32, 1}, {512, 32, 0}};
    const char *names[4] = {"prompt 512 rows at 0", "decode 1 row at 4095", "32 rows at 4064", "preview 32 nc/544"};
    for (int c = 0; c < 4; c++) {
        size_t pos = cases[c][0], n = cases[c][1], ctx = pos + n, rs = d.n_head * d.head_dim;
        bool causal = cases[c][2] != 0;
        float *q = bench_random(n * rs, 3, 0.1f), *gate = bench_random(n * rs, 4, 1.0f);
        float *kc = bench_random(ctx * 2 * 256, 5, 1.0f), *vc = bench_random(ctx * 2 * 256, 6, 1.0f);
        float *out = malloc(n * rs * 4);
        size_t per = cpu_attn_scratch_floats(&d, ctx);
        float *scratch = malloc(threadpool_size(pool) * per * 4);
        double ts, tf = 0, t5 = 0, tp;
        BENCH_TIME(ts, cpu_attn_forward_scalar(out, q, gate, kc, vc, &d, (int64_t)pos, n, causal, 0, 16, scratch));
        if (cpu_simd_supported())
            BENCH_TIME(tf, cpu_attn_forward_avx2(out, q, gate, kc, vc, &d, (int64_t)pos, n, causal, 0, 16, scratch));
        if (cpu_simd_supported() && quant_avx512_supported())
            BENCH_TIME(t5, cpu_attn_forward_keys_avx512(out, q, gate, kc, vc, &d, (int64_t)pos, n, causal, ctx, 0, 16,
                                                        scratch));
        BENCH_TIME(tp, cpu_attn_forward_pool(pool, out, q, gate, kc, vc, &d, (int64_t)pos, n, causal, ctx, scratch));
        printf("attention       %-20s scalar %8.2f ms   avx2 %8.2f ms   avx512 %8.2f ms (%.2fx)   "
               "pool(%zu, %s) %8.2f ms\n",
               names[c], ts * 1e3, tf * 1e3, t5 * 1e3, t5 > 0 ? tf / t5 : 0.0, threadpool_size(pool),
               quant_simd_level_name(), tp * 1e3);
        free(q), free(gate), free(kc), free(vc), free(out), free(scratch);
    }
}

static void bench_gdn(threadpool *pool) {
    cpu_gdn_dims d = {.n_k_heads = 16, .n_v_heads = 32, .k_dim = 128, .v_dim = 128, .conv_k = 4, .eps = 1e-6f};
    const size_t cd = cpu_gdn_conv_dim(&d), nv = d.n_v_heads, ns = nv * 128 * 128;
    const size_t max_n = 512;
    float *x = bench_random(max_n * cd, 7, 1.0f), *w = bench_random(cd * 4, 8, 0.5f);
    float *qkv = malloc(max_n * cd * 4), *ring = calloc(3 * cd, 4);
    double ts, tf = 0;
    BENCH_TIME(ts, cpu_gdn_conv_scalar(qkv, x, ring, w, cd, 4, max_n));
    if (cpu_simd_supported()) BENCH_TIME(tf, cpu_gdn_conv_avx2(qkv, x, ring, w, cd, 4, max_n));
    printf("gdn conv        512 rows x 8192     scalar %8.2f ms   avx2 %8.2f ms\n", ts * 1e3, tf * 1e3);
    cpu_gdn_qk_norm(qkv, &d, max_n);
    float *g = malloc(max_n * nv * 4), *beta = malloc(max_n * nv * 4);
    rng_state r;
    rng_seed(&r, 9);
    /* decays as the model's: -A softplus(a + dt), A in (0.01, 16) (HF's init range), a + dt ~ N(0, 2) */
    for (size_t i = 0; i < max_n * nv; i++) {
        float A = 0.01f + 16.0f * rng_uniform(&r), u = 1.41f * rng_normal(&r);
        g[i] = -A * (u > 20.0f ? u : log1pf(expf(u)));
        beta[i] = rng_uniform(&r);
    }
    float *S = calloc(ns, 4), *o = malloc(max_n * nv * 128 * 4);
    float *scratch = malloc(cpu_gdn_chunked_scratch_floats(&d) * 4);
    const size_t rows[] = {1, 8, 32, 64, 128, 512};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        size_t n = rows[i];
        double rs = 0, rf = 0, cs = 0, cf = 0;
        BENCH_TIME(rs, cpu_gdn_recurrent_scalar(o, S, qkv, g, beta, &d, n, 0, nv));
        BENCH_TIME(cs, cpu_gdn_chunked_scalar(o, S, qkv, g, beta, &d, n, 0, nv, scratch));
        if (cpu_simd_supported()) {
            BENCH_TIME(rf, cpu_gdn_recurrent_avx2(o, S, qkv, g, beta, &d, n, 0, nv));
            BENCH_TIME(cf, cpu_gdn_chunked_avx2(o, S, qkv, g, beta, &d, n, 0, nv, scratch));
        }
        printf("gdn state %4zu rows  recurrent: scalar %8.2f ms avx2 %8.2f ms   chunked: scalar %8.2f ms avx2 %8.2f ms\n",
               n, rs * 1e3, rf * 1e3, cs * 1e3, cf * 1e3);
    }
    /* the whole mixer (after the projections) on the pool */
    float *z = bench_random(max_n * nv * 128, 10, 1.0f), *b = bench_random(max_n * nv, 11, 1.0f),
          *a = bench_random(max_n * nv, 12, 1.0f), *ssm_a = bench_random(nv, 13, 1.0f), *dt = bench_random(nv, 14, 1.0f),
          *nw = bench_random(128, 15, 1.0f);
    for (size_t i = 0; i < nv; i++) ssm_a[i] = -(0.01f + 16.0f * rng_uniform(&r)); /* -A, A as HF initialises it */
    cpu_gdn_weights gw = {.conv_w = w, .ssm_a = ssm_a, .dt_bias = dt, .norm_w = nw};
    float *mix_scratch = malloc(cpu_gdn_mix_scratch_floats(&d, max_n, threadpool_size(pool)) * 4);
    const size_t mix_rows[] = {1, 512};
    for (int i = 0; i < 2; i++) {
        double tr, tc;
        BENCH_TIME(tr, cpu_gdn_mix(o, x, z, b, a, &gw, ring, S, &d, mix_rows[i], CPU_GDN_RECURRENT, pool, mix_scratch));
        BENCH_TIME(tc, cpu_gdn_mix(o, x, z, b, a, &gw, ring, S, &d, mix_rows[i], CPU_GDN_CHUNKED, pool, mix_scratch));
        printf("gdn mix   %4zu rows  pool(%zu)  recurrent %8.2f ms   chunked %8.2f ms\n", mix_rows[i],
               threadpool_size(pool), tr * 1e3, tc * 1e3);
    }
    /* a preview's block operator (conv, norms, every value head, the gated norm), 32 rows: one thread, the pool */
    float *wr = bench_random(cd * 3, 16, 0.5f), *ls = bench_random(nv, 17, 0.3f), *hb = bench_random(nv, 18, 1.0f);
    float *hc = bench_random(nv, 19, 1.0f);
    const gdn_block_weights bw = {.conv_w = w, .conv_right = wr, .ssm_a = ssm_a, .dt_bias = dt, .norm_w = nw,
                                  .logit_scale = ls, .history_bias = hb, .history_c = hc};
    threadpool *one = NULL;
    clover_error err;
    float *blk_scratch = malloc(gdn_block_scratch_floats(&d, 32, threadpool_size(pool)) * 4);
    if (blk_scratch && threadpool_create(&one, 1, &err) == CLOVER_OK) {
        /* the AVX2 level (what `--simd avx2` runs) and the AVX-512 level (gdn_block's choice where
         * quant_avx512_active(), issue 30) side by side, whatever the process's own level is */
        const float lr = gdn_block_ln_ratio(32, 32);
        double a1, ap, v1 = 0, vp = 0;
        BENCH_TIME(a1, gdn_block_avx2(o, x, z, a, ring, S, &bw, &d, 32, lr, one, blk_scratch));
        BENCH_TIME(ap, gdn_block_avx2(o, x, z, a, ring, S, &bw, &d, 32, lr, pool, blk_scratch));
        printf("gdn block   32 rows  avx2    pool(1) %8.3f ms   pool(%zu) %8.3f ms   (%.2fx)\n", a1 * 1e3,
               threadpool_size(pool), ap * 1e3, a1 / ap);
        if (quant_avx512_supported()) {
            BENCH_TIME(v1, gdn_block_avx512(o, x, z, a, ring, S, &bw, &d, 32, lr, one, blk_scratch));
            BENCH_TIME(vp, gdn_block_avx512(o, x, z, a, ring, S, &bw, &d, 32, lr, pool, blk_scratch));
            printf("gdn block   32 rows  avx512  pool(1) %8.3f ms   pool(%zu) %8.3f ms   (%.2fx; %.2fx / %.2fx the "
                   "avx2 level)\n",
                   v1 * 1e3, threadpool_size(pool), vp * 1e3, v1 / vp, a1 / v1, ap / vp);
        }
    }
    threadpool_free(one);
    free(x), free(w), free(qkv), free(ring), free(g), free(beta), free(S), free(o), free(scratch);
    free(z), free(b), free(a), free(ssm_a), free(dt), free(nw), free(mix_scratch);
    free(wr), free(ls), free(hb), free(hc), free(blk_scratch);
}

int main(int argc, char **argv) {
    size_t threads = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 1;
    threadpool *pool = NULL;
    clover_error err;
    if (threadpool_create(&pool, threads ? threads : 1, &err) != CLOVER_OK) {
        fprintf(stderr, "bench_ops: %s\n", err.message);
        return 1;
    }
    printf("bench_ops: AVX2+FMA %s, %zu thread(s)\n", cpu_simd_supported() ? "yes" : "no", threadpool_size(pool));
    const char *only = argc > 2 ? argv[2] : "";
    if (!*only || !strcmp(only, "norm")) bench_norm();
    if (!*only || !strcmp(only, "attention")) bench_attention(pool);
    if (!*only || !strcmp(only, "gdn")) bench_gdn(pool);
    threadpool_free(pool);
    return 0;
}
