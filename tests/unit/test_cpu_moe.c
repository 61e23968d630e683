/*
 * test_cpu_moe.c: the sparse MoE block and the coreset.
 *  - routing (softmax, top-k with lower-index ties, renormalisation, the
 *    allowed-expert restriction) on hand-computed cases and against
 *    transformers' Qwen3_5MoeTopKRouter;
 *  - the block (F32 weights in the GGUF layout, fused gate_up) against
 *    Qwen3_5MoeSparseMoeBlock (tests/data/ops/moe.bin), and, restricted to
 *    allowed experts, against a float64 reference written out below;
 *  - the coreset on seed 000's hand-checked case
 *    `coreset_keeps_the_prefix_that_holds_top_p` and on ties;
 *  - the threaded, SIMD form against the scalar oracle with quantised experts;
 *  - the row-wise work on the pool and 16 experts a batch (cpu_grouped)
 *    against the old order (CLOVER_CPU_GROUPED=0), bit for bit;
 *  - cpu_moe_experts (the routing given): cpu_moe_forward's bits on its own
 *    routing, a masked routing against a hand loop, the shared expert ignored.
 */
#include <stdlib.h>

#include "base/threadpool.h"
#include "cpu/cpu_simd.h"
#include "cpu/moe.h"
#include "cpu_ops_test.h"
#include "moe_test.h"
#include "quant/matmul_group.h"
#include "quant/quant.h"

static void topk_ties_take_the_lower_index(void) {
    const float v[5] = {1, 3, 3, 2, 3};
    int32_t idx[5];
    CHECK_EQ_INT(cpu_moe_topk(idx, v, 5, 2, NULL), 2);
    CHECK(idx[0] == 1 && idx[1] == 2);
    CHECK_EQ_INT(cpu_moe_topk(idx, v, 5, 4, NULL), 4);
    CHECK(idx[0] == 1 && idx[1] == 2 && idx[2] == 4 && idx[3] == 3);
    const uint8_t allowed[5] = {1, 0, 1, 1, 0};
    CHECK_EQ_INT(cpu_moe_topk(idx, v, 5, 2, allowed), 2);
    CHECK(idx[0] == 2 && idx[1] == 3);
    CHECK_EQ_INT(cpu_moe_topk(idx, v, 5, 5, allowed), 3);
    CHECK(idx[0] == 2 && idx[1] == 3 && idx[2] == 0);
}

/* p = (0.5, 0.3, 0.1, 0.1) from logits ln p: top-2 = {0, 1}, weights 5/8, 3/8.
 * Restricted to {1, 2, 3}: 1 then 2 (the tie with 3 goes to the lower
 * index), weights 0.3/0.4, 0.1/0.4. Restricted to {3}: one expert, weight 1. */
static void route_hand_cases(void) {
    float logits[4], probs[4], w[4];
    const double p[4] = {0.5, 0.3, 0.1, 0.1};
    for (int i = 0; i < 4; i++) logits[i] = (float)log(p[i]);
    int32_t idx[4];
    CHECK_EQ_INT(cpu_moe_route(idx, w, logits, 4, 2, NULL, probs), 2);
    CHECK(idx[0] == 0 && idx[1] == 1);
    CHECK_NEAR(w[0], 0.625, 1e-6);
    CHECK_NEAR(w[1], 0.375, 1e-6);
    const uint8_t a123[4] = {0, 1, 1, 1}, a3[4] = {0, 0, 0, 1}, none[4] = {0, 0, 0, 0};
    CHECK_EQ_INT(cpu_moe_route(idx, w, logits, 4, 2, a123, probs), 2);
    CHECK(idx[0] == 1 && idx[1] == 2);
    CHECK_NEAR(w[0], 0.75, 1e-6);
    CHECK_NEAR(w[1], 0.25, 1e-6);
    CHECK_EQ_INT(cpu_moe_route(idx, w, logits, 4, 2, a3, probs), 1);
    CHECK(idx[0] == 3 && w[0] == 1.0f);
    CHECK_EQ_INT(cpu_moe_route(idx, w, logits, 4, 2, none, probs), 0);
}

/* Seed 000, coreset_keeps_the_prefix_that_holds_top_p: two rows, top-2 of four
 * experts. Row 0 puts .5/.3 on experts 0/1, row 1 .6/.2 on 2/0, so the
 * totals are e0 .7, e1 .3, e2 .6, e3 0, normalised .4375/.1875/.375/0.
 * Descending: e0 (mass before 0), e2 (.4375), e1 (.8125). At top_p 0.8 e0 and
 * e2 are kept (.8125 >= .8 stops e1); at 0.9 e1 joins; at 0 only the first. */
static void coreset_keeps_the_prefix_that_holds_top_p(void) {
    const float p[2][4] = {{0.5f, 0.3f, 0.1f, 0.1f}, {0.2f, 0.1f, 0.6f, 0.1f}};
    float l[8];
    for (int i = 0; i < 8; i++) l[i] = logf(p[i / 4][i % 4]);
    const float top_p[3] = {0.8f, 0.9f, 0.0f};
    const uint8_t want[3][4] = {{1, 0, 1, 0}, {1, 1, 1, 0}, {1, 0, 0, 0}};
    double totals[4];
    int32_t order[4];
    uint8_t allowed[4];
    for (int c = 0; c < 3; c++) {
        cpu_moe_coreset(allowed, l, 2, 4, 2, top_p[c], totals, order);
        CHECK_MSG(memcmp(allowed, want[c], 4) == 0, "top_p %g: %d%d%d%d", top_p[c], allowed[0], allowed[1],
                  allowed[2], allowed[3]);
        CHECK_NEAR(totals[0], 0.7, 1e-6);
        CHECK_NEAR(totals[2], 0.6, 1e-6);
        const double t[4] = {0.7, 0.3, 0.6, 0.0};
        cpu_moe_coreset_from_totals(allowed, t, 4, top_p[c], order);
        CHECK(memcmp(allowed, want[c], 4) == 0);
    }
}

/* Equal totals sort by index: with four quarters, top_p 0.5 keeps e0 (before
 * 0) and e1 (before .25), stops at e2 (before .5, not below .5). Totals are
 * normalised before the cut. Zero totals
 * (normalised by 1e-9): nothing before any expert, so all are kept. */
static void coreset_ties_and_zeros(void) {
    const double q[6] = {0.25, 0.25, 0.25, 0.25, 0.0, 0.0};
    int32_t order[6];
    uint8_t allowed[6];
    cpu_moe_coreset_from_totals(allowed, q, 4, 0.5f, order);
    CHECK(allowed[0] && allowed[1] && !allowed[2] && !allowed[3]);
    cpu_moe_coreset_from_totals(allowed, q, 4, 0.2f, order);
    CHECK(allowed[0] && !allowed[1] && !allowed[2] && !allowed[3]);
    const double reversed[4] = {0.1, 0.2, 0.3, 0.4};
    cpu_moe_coreset_from_totals(allowed, reversed, 4, 0.5f, order); /* e3 (0), e2 (.4) kept; e1 at .7 stops */
    CHECK(!allowed[0] && !allowed[1] && allowed[2] && allowed[3]);
    cpu_moe_coreset_from_totals(allowed, q + 2, 4, 0.5f, order); /* .25 .25 0 0 -> .5 .5 0 0: e1 starts at .5 */
    CHECK(allowed[0] && !allowed[1] && !allowed[2] && !allowed[3]);
    cpu_moe_coreset_from_totals(allowed, q + 2, 4, 0.6f, order); /* e1 joins; e2 starts at 1 */
    CHECK(allowed[0] && allowed[1] && !allowed[2] && !allowed[3]);
    const double zeros[3] = {0, 0, 0};
    cpu_moe_coreset_from_totals(allowed, zeros, 3, 0.5f, order);
    CHECK(allowed[0] && allowed[1] && allowed[2]);
}

typedef struct moe_f32 { /* the torch block's weights, F32, in the GGUF layout */
    size_t H, E, k, F, Fs;
    const float *router, *gate_up, *down, *sh_gate, *sh_up, *sh_down, *sh_inp;
} moe_f32;

static cpu_moe_weights moe_bind_f32(const moe_f32 *m) {
    cpu_moe_weights w = {
        .n_embd = m->H, .n_ff = m->F, .n_expert = m->E, .n_used = m->k, .n_ff_shexp = m->Fs,
        .router_type = QUANT_F32, .router = m->router,
        /* fused gate_up [E][2F][H]: gate rows first, then up */
        .gate_type = QUANT_F32, .gate_exps = m->gate_up, .gate_stride = 2 * m->F * m->H * 4,
        .up_type = QUANT_F32, .up_exps = m->gate_up + m->F * m->H, .up_stride = 2 * m->F * m->H * 4,
        .down_type = QUANT_F32, .down_exps = m->down, .down_stride = m->H * m->F * 4,
        .sh_gate_type = QUANT_F32, .sh_gate = m->sh_gate, .sh_up_type = QUANT_F32, .sh_up = m->sh_up,
        .sh_down_type = QUANT_F32, .sh_down = m->sh_down, .sh_inp_type = QUANT_F32, .sh_inp = m->sh_inp,
    };
    return w;
}

/* A float64 MoE straight from the formulas of TRUNK.md 5 (an independent
 * reference for the restricted routing, which torch has no module for). */
static void moe_reference_f64(double *out, const float *x, size_t n, const moe_f32 *m, const uint8_t *allowed) {
    size_t H = m->H, E = m->E, F = m->F, Fs = m->Fs;
    double p[64], h[512];
    for (size_t r = 0; r < n; r++) {
        const float *xr = x + r * H;
        double *o = out + r * H, mx = -INFINITY, sum = 0;
        for (size_t e = 0; e < E; e++) {
            p[e] = 0;
            for (size_t c = 0; c < H; c++) p[e] += (double)m->router[e * H + c] * xr[c];
            if (p[e] > mx) mx = p[e];
        }
        for (size_t e = 0; e < E; e++) sum += (p[e] = exp(p[e] - mx));
        for (size_t e = 0; e < E; e++) p[e] /= sum;
        size_t chosen[64], nc = 0;
        uint8_t taken[64] = {0};
        for (size_t s = 0; s < m->k; s++) {
            size_t best = E;
            for (size_t e = 0; e < E; e++)
                if (!taken[e] && (!allowed || allowed[e]) && (best == E || p[e] > p[best])) best = e;
            if (best == E) break;
            taken[best] = 1;
            chosen[nc++] = best;
        }
        double top = 0;
        for (size_t i = 0; i < nc; i++) top += p[chosen[i]];
        for (size_t c = 0; c < H; c++) o[c] = 0;
        for (size_t i = 0; i < nc; i++) {
            size_t e = chosen[i];
            const float *gw = m->gate_up + e * 2 * F * H, *uw = gw + F * H, *dw = m->down + e * H * F;
            for (size_t f = 0; f < F; f++) {
                double g = 0, u = 0;
                for (size_t c = 0; c < H; c++) g += (double)gw[f * H + c] * xr[c], u += (double)uw[f * H + c] * xr[c];
                h[f] = g / (1 + exp(-g)) * u;
            }
            for (size_t c = 0; c < H; c++) {
                double y = 0;
                for (size_t f = 0; f < F; f++) y += (double)dw[c * F + f] * h[f];
                o[c] += p[e] / top * y;
            }
        }
        double gs = 0;
        for (size_t c = 0; c < H; c++) gs += (double)m->sh_inp[c] * xr[c];
        gs = 1 / (1 + exp(-gs));
        for (size_t f = 0; f < Fs; f++) {
            double g = 0, u = 0;
            for (size_t c = 0; c < H; c++) g += (double)m->sh_gate[f * H + c] * xr[c], u += (double)m->sh_up[f * H + c] * xr[c];
            h[f] = g / (1 + exp(-g)) * u;
        }
        for (size_t c = 0; c < H; c++) {
            double y = 0;
            for (size_t f = 0; f < Fs; f++) y += (double)m->sh_down[c * Fs + f] * h[f];
            o[c] += gs * y;
        }
    }
}

static double nerr_f64(const float *a, const double *b, size_t n) {
    double md = 0, mb = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (isnan(d)) return INFINITY;
        md = d > md ? d : md;
        mb = fabs(b[i]) > mb ? fabs(b[i]) : mb;
    }
    return md / mb;
}

/* Router and block against torch (H 24, 8 experts, top-3, widths 12 / 10):
 * the routing must pick torch's experts in torch's order with its weights
 * (1e-6), and the block's output agree to 2e-6 of its scale (reductions of
 * 24 and 12 terms: float32 reordering is ~1e-7). Then the restricted routing
 * against the float64 reference, with 5 of 8 experts allowed and with only 2
 * (fewer than k). */
static void moe_matches_torch(void) {
    ops_vectors v;
    if (ops_vectors_load(&v, "moe.bin")) return;
    const int32_t *dims = ops_i32(&v, "dims", NULL);
    moe_f32 m = {0};
    const float *x = ops_f32(&v, "x", NULL), *logits = ops_f32(&v, "router_logits", NULL),
                *rw = ops_f32(&v, "route_w", NULL), *want = ops_f32(&v, "y", NULL);
    const int32_t *ridx = ops_i32(&v, "route_idx", NULL);
    m.router = ops_f32(&v, "router_w", NULL);
    m.gate_up = ops_f32(&v, "gate_up", NULL);
    m.down = ops_f32(&v, "down", NULL);
    m.sh_gate = ops_f32(&v, "sh_gate", NULL);
    m.sh_up = ops_f32(&v, "sh_up", NULL);
    m.sh_down = ops_f32(&v, "sh_down", NULL);
    m.sh_inp = ops_f32(&v, "sh_gate_inp", NULL);
    if (!dims || !x || !logits || !rw || !want || !ridx || !m.router || !m.gate_up || !m.down || !m.sh_gate ||
        !m.sh_up || !m.sh_down || !m.sh_inp) {
        ops_vectors_free(&v);
        return;
    }
    m.H = (size_t)dims[0], m.E = (size_t)dims[1], m.k = (size_t)dims[2], m.F = (size_t)dims[3], m.Fs = (size_t)dims[4];
    size_t n = (size_t)dims[5], H = m.H;
    float probs[64], w[8];
    int32_t idx[8];
    for (size_t r = 0; r < n; r++) {
        CHECK_EQ_INT(cpu_moe_route(idx, w, logits + r * m.E, m.E, m.k, NULL, probs), m.k);
        for (size_t i = 0; i < m.k; i++) {
            CHECK_EQ_INT(idx[i], ridx[r * m.k + i]);
            CHECK_NEAR(w[i], rw[r * m.k + i], 1e-6);
        }
    }
    cpu_moe_weights cw = moe_bind_f32(&m);
    void *scratch = malloc(cpu_moe_scratch_bytes(&cw, n));
    float *out = malloc(n * H * 4);
    cpu_moe_forward_scalar(out, x, n, &cw, NULL, scratch);
    CHECK_MSG(ops_nerr(out, want, n * H) < 2e-6, "scalar: %g", ops_nerr(out, want, n * H));
    cpu_moe_forward(out, x, n, &cw, NULL, NULL, scratch);
    CHECK_MSG(ops_nerr(out, want, n * H) < 2e-6, "fast: %g", ops_nerr(out, want, n * H));
    OPS_NOTE("block vs torch: fast nerr %.2g", ops_nerr(out, want, n * H));

    double *ref = malloc(n * H * sizeof *ref);
    moe_reference_f64(ref, x, n, &m, NULL);
    CHECK_MSG(nerr_f64(out, ref, n * H) < 2e-6, "f64 reference vs fast: %g", nerr_f64(out, ref, n * H));
    const uint8_t five[8] = {1, 0, 1, 1, 0, 1, 0, 1}, two[8] = {0, 0, 0, 1, 0, 0, 1, 0};
    const uint8_t *sets[2] = {five, two};
    for (int s = 0; s < 2; s++) {
        moe_reference_f64(ref, x, n, &m, sets[s]);
        cpu_moe_forward_scalar(out, x, n, &cw, sets[s], scratch);
        CHECK_MSG(nerr_f64(out, ref, n * H) < 2e-6, "allowed set %d scalar: %g", s, nerr_f64(out, ref, n * H));
        cpu_moe_forward(out, x, n, &cw, sets[s], NULL, scratch);
        CHECK_MSG(nerr_f64(out, ref, n * H) < 2e-6, "allowed set %d fast: %g", s, nerr_f64(out, ref, n * H));
    }
    free(ref), free(out), free(scratch);
    ops_vectors_free(&v);
}

/* Quantised MoE weights for w (its shapes set): gate and up experts Q4_K interleaved per expert, down Q8_0, the
 * shared expert's gate / up / down of the given types; bufs[5] owns the bytes (free them). */
static void quant_moe_weights(cpu_moe_weights *w, const uint32_t sh_types[3], rng_state *r, uint8_t *bufs[5]) {
    const size_t H = w->n_embd, E = w->n_expert, F = w->n_ff, Fs = w->n_ff_shexp;
    const uint32_t types[5] = {QUANT_Q4_K, QUANT_Q8_0, sh_types[0], sh_types[1], sh_types[2]};
    const size_t rows[5] = {E * 2 * F, E * H, Fs, Fs, H}, n_in[5] = {H, F, H, H, Fs};
    float *tmp = malloc(E * 2 * F * H * 4);
    for (int t = 0; t < 5; t++) {
        const size_t rb = quant_row_bytes(types[t], n_in[t]);
        bufs[t] = malloc(rows[t] * rb);
        ops_fill(tmp, rows[t] * n_in[t], r, 1.0f / sqrtf((float)n_in[t]));
        for (size_t i = 0; i < rows[t]; i++) quant_quantize_row(types[t], tmp + i * n_in[t], bufs[t] + i * rb, n_in[t]);
    }
    free(tmp);
    const size_t gu_row = quant_row_bytes(QUANT_Q4_K, H);
    w->gate_type = w->up_type = QUANT_Q4_K;
    w->gate_exps = bufs[0], w->up_exps = bufs[0] + F * gu_row, w->gate_stride = w->up_stride = 2 * F * gu_row;
    w->down_type = QUANT_Q8_0, w->down_exps = bufs[1], w->down_stride = H * quant_row_bytes(QUANT_Q8_0, F);
    w->sh_gate_type = types[2], w->sh_gate = bufs[2], w->sh_up_type = types[3], w->sh_up = bufs[3];
    w->sh_down_type = types[4], w->sh_down = bufs[4];
}

/* Quantised experts (gate/up Q4_K, down Q8_0, shared Q8_0 / Q6_K, router
 * F32), 11 rows: cpu_moe_forward on a 2-thread pool (tiled AVX2 matmul) against
 * cpu_moe_forward_scalar (matmul_oracle: quant_dot_scalar, or for the one-
 * and two-row products matmul sends through 8-bit activations the scalar
 * integer dots). Both decode the same blocks exactly and differ only in the
 * order of float32 sums (and 2-ulp expf in SwiGLU): 1e-5 of the scale. The rows route to several
 * experts each, so gathering, bucketing and accumulation are all exercised. */
static void moe_fast_matches_scalar_quantised(void) {
    const size_t H = 256, E = 6, k = 2, F = 64, Fs = 256, n = 11;
    rng_state r;
    rng_seed(&r, 77);
    cpu_moe_weights w = {.n_embd = H, .n_ff = F, .n_expert = E, .n_used = k, .n_ff_shexp = Fs};
    float *router = malloc(E * H * 4), *sh_inp = malloc(H * 4);
    ops_fill(router, E * H, &r, 0.1f);
    ops_fill(sh_inp, H, &r, 0.1f);
    w.router_type = QUANT_F32, w.router = router, w.sh_inp_type = QUANT_F32, w.sh_inp = sh_inp;
    uint8_t *bufs[5];
    quant_moe_weights(&w, (const uint32_t[3]){QUANT_Q8_0, QUANT_Q8_0, QUANT_Q6_K}, &r, bufs);

    float *x = malloc(n * H * 4), *a = malloc(n * H * 4), *b = malloc(n * H * 4);
    ops_fill(x, n * H, &r, 1.0f);
    void *scratch = malloc(cpu_moe_scratch_bytes(&w, n));
    threadpool *pool = NULL;
    clover_error err;
    CHECK(threadpool_create(&pool, 2, &err) == CLOVER_OK);
    cpu_moe_forward_scalar(a, x, n, &w, NULL, scratch);
    cpu_moe_forward(b, x, n, &w, NULL, pool, scratch);
    CHECK_MSG(ops_nerr(b, a, n * H) < 1e-5, "pool: %g", ops_nerr(b, a, n * H));
    OPS_NOTE("quantised experts, pool vs scalar: nerr %.2g", ops_nerr(b, a, n * H));
    /* one row: the decode path of matmul (8-bit activations for one or two rows, which the
     * oracle's matmul_oracle mirrors, so the one-row oracle is computed on its own) */
    cpu_moe_forward_scalar(a, x, 1, &w, NULL, scratch);
    cpu_moe_forward(b, x, 1, &w, NULL, pool, scratch);
    CHECK_MSG(ops_nerr(b, a, H) < 1e-5, "one row: %g", ops_nerr(b, a, H));
    const uint8_t allowed[6] = {0, 1, 1, 0, 0, 1};
    cpu_moe_forward_scalar(a, x, n, &w, allowed, scratch);
    cpu_moe_forward(b, x, n, &w, allowed, pool, scratch);
    CHECK_MSG(ops_nerr(b, a, n * H) < 1e-5, "allowed: %g", ops_nerr(b, a, n * H));
    threadpool_free(pool);
    for (int t = 0; t < 5; t++) free(bufs[t]);
    free(router), free(sh_inp), free(x), free(a), free(b), free(scratch);
}

/* cpu_grouped's MoE (the gather, SwiGLU and weighted sum as pool tasks, 16
 * experts a product batch) against the old order (CLOVER_CPU_GROUPED=0) on
 * the same pool: bit for bit, 1..64 rows, 40 experts (several batches),
 * with and without the shared expert, an allowed set, and two sequences'
 * rows in one pass (cpu_moe_forward_groups, each with its own allowed set;
 * and with the router's logits passed in, as a preview's coreset has them:
 * the old order computes them again). */
static void moe_grouped_matches_old_order(void) {
    const size_t H = 256, E = 40, k = 8, F = 96, Fs = 160;
    enum { MAXN = 64 };
    rng_state r;
    rng_seed(&r, 303);
    cpu_moe_weights w = {.n_embd = H, .n_ff = F, .n_expert = E, .n_used = k, .n_ff_shexp = Fs};
    float *router = malloc(E * H * 4), *sh_inp = malloc(H * 4);
    ops_fill(router, E * H, &r, 0.3f);
    ops_fill(sh_inp, H, &r, 0.1f);
    w.router_type = QUANT_F32, w.router = router, w.sh_inp_type = QUANT_F32, w.sh_inp = sh_inp;
    uint8_t *bufs[5];
    quant_moe_weights(&w, (const uint32_t[3]){QUANT_Q8_0, QUANT_Q5_K, QUANT_Q8_0}, &r, bufs);
    float *x = malloc(MAXN * H * 4), *a = malloc(MAXN * H * 4), *b = malloc(MAXN * H * 4);
    ops_fill(x, MAXN * H, &r, 1.0f);
    void *scratch = malloc(cpu_moe_scratch_bytes(&w, MAXN));
    uint8_t allowed[40], allowed2[40];
    for (size_t e = 0; e < E; e++) allowed[e] = e % 3 != 1, allowed2[e] = e % 5 < 3;
    const uint8_t *allowed_of[2] = {allowed, allowed2};
    uint32_t group[MAXN], own[MAXN];
    float *logits = malloc(MAXN * E * sizeof *logits);
    const size_t ns[] = {1, 2, 3, 5, 17, 32, 33, 64};
    clover_error err;
    for (size_t threads = 2; threads <= 3; threads++) {
        threadpool *pool = NULL;
        CHECK(threadpool_create(&pool, threads, &err) == CLOVER_OK);
        int bad = 0;
        for (size_t shared = 0; shared < 2; shared++) {
            w.n_ff_shexp = shared ? Fs : 0;
            for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
                const size_t n = ns[in];
                for (int mode = 0; mode < 4; mode++) { /* all experts, an allowed set, two groups, with logits */
                    for (size_t i = 0; i < n; i++) group[i] = i < n / 3 ? 0 : 1;
                    for (size_t i = 0; i < n; i++) own[i] = (uint32_t)(group[i] == 0 ? n / 3 : n - n / 3);
                    if (mode == 3)
                        matmul_grouped(pool, QUANT_F32, router, E, H, x, n, logits, own);
                    for (int old = 1; old >= 0; old--) {
                        if (old) setenv("CLOVER_CPU_GROUPED", "0", 1);
                        float *out = old ? a : b;
                        if (mode >= 2)
                            cpu_moe_forward_groups(out, x, n, &w, group, allowed_of, mode == 3 ? logits : NULL, pool,
                                                   scratch);
                        else
                            cpu_moe_forward(out, x, n, &w, mode ? allowed : NULL, pool, scratch);
                        if (old) unsetenv("CLOVER_CPU_GROUPED");
                    }
                    if (memcmp(a, b, n * H * sizeof *a) != 0 && bad++ < 3)
                        fprintf(stderr, "  %zu threads, shared %zu, %zu rows, mode %d: grouped and old differ\n",
                                threads, shared, n, mode);
                }
            }
        }
        CHECK_MSG(bad == 0, "%zu threads: %d cases differ", threads, bad);
        threadpool_free(pool);
    }
    for (int t = 0; t < 5; t++) free(bufs[t]);
    free(router), free(sh_inp), free(x), free(a), free(b), free(scratch), free(logits);
}

/* ---- cpu_moe_experts: the routed experts with the routing given ---- */

/* Experts for the cpu_moe_experts tests: H 256, 40 experts (three batches of 16), top-8, F 96, and a shared
 * expert of 160 (the n_ff_shexp = 0 copy is the model without one). gate / up Q4_K, down as asked: Q8_0 (the
 * routed experts of quant_moe_weights) or F32. */
typedef struct moe_experts_fixture {
    cpu_moe_weights w; /* with the shared expert */
    uint8_t *bufs[5];
    float *router, *sh_inp, *down_f32;
} moe_experts_fixture;

static void moe_experts_fixture_make(moe_experts_fixture *fx, int down_f32, uint64_t seed) {
    const size_t H = 256, E = 40, k = 8, F = 96, Fs = 160;
    rng_state r;
    rng_seed(&r, seed);
    memset(fx, 0, sizeof *fx);
    fx->w = (cpu_moe_weights){.n_embd = H, .n_ff = F, .n_expert = E, .n_used = k, .n_ff_shexp = Fs};
    fx->router = malloc(E * H * 4), fx->sh_inp = malloc(H * 4);
    ops_fill(fx->router, E * H, &r, 0.3f);
    ops_fill(fx->sh_inp, H, &r, 0.5f);
    fx->w.router_type = QUANT_F32, fx->w.router = fx->router, fx->w.sh_inp_type = QUANT_F32,
    fx->w.sh_inp = fx->sh_inp;
    quant_moe_weights(&fx->w, (const uint32_t[3]){QUANT_Q8_0, QUANT_Q8_0, QUANT_Q8_0}, &r, fx->bufs);
    if (down_f32) { /* [E][H][F] */
        fx->down_f32 = malloc(E * H * F * 4);
        ops_fill(fx->down_f32, E * H * F, &r, 1.0f / sqrtf((float)F));
        fx->w.down_type = QUANT_F32, fx->w.down_exps = fx->down_f32, fx->w.down_stride = H * F * 4;
    }
}

static void moe_experts_fixture_free(moe_experts_fixture *fx) {
    for (int t = 0; t < 5; t++) free(fx->bufs[t]);
    free(fx->router), free(fx->sh_inp), free(fx->down_f32);
}

/* (a) cpu_moe_experts given exactly the routing cpu_moe_forward computes (the router's logits by the same
 * product, cpu_moe_route on them, -1 past the m it returns), on weights without a shared expert, is
 * cpu_moe_forward bit for bit: the same driver with the routing step replaced. Pools of 1 and 3 threads (the
 * serial sum and the pool's), 1, 5 and 40 rows (one-row products, tiled ones, several experts a batch), every
 * expert allowed and a coreset of 5 of the 40 (fewer than k: rows with -1 slots, ids in descending
 * probability, not ascending). */
static void moe_experts_match_forward_on_its_routing(void) {
    moe_experts_fixture fx;
    moe_experts_fixture_make(&fx, 0, 404);
    cpu_moe_weights w = fx.w;
    w.n_ff_shexp = 0;
    const size_t H = w.n_embd, E = w.n_expert, k = w.n_used, MAXN = 40;
    rng_state r;
    rng_seed(&r, 405);
    float *x = malloc(MAXN * H * 4), *a = malloc(MAXN * H * 4), *b = malloc(MAXN * H * 4);
    float *logits = malloc(MAXN * E * 4), *wts = malloc(MAXN * k * 4), probs[40];
    int32_t *ids = malloc(MAXN * k * sizeof *ids);
    ops_fill(x, MAXN * H, &r, 1.0f);
    void *scratch = malloc(cpu_moe_scratch_bytes(&w, MAXN));
    uint8_t few[40] = {0};
    few[3] = few[11] = few[12] = few[30] = few[39] = 1;
    const size_t ns[3] = {1, 5, 40};
    clover_error err;
    for (size_t threads = 1; threads <= 3; threads += 2) {
        threadpool *pool = NULL;
        CHECK(threadpool_create(&pool, threads, &err) == CLOVER_OK);
        for (int restricted = 0; restricted < 2; restricted++) {
            const uint8_t *allowed = restricted ? few : NULL;
            for (size_t in = 0; in < 3; in++) {
                const size_t n = ns[in];
                cpu_moe_forward(a, x, n, &w, allowed, pool, scratch);
                matmul_grouped(pool, w.router_type, w.router, E, H, x, n, logits, NULL);
                size_t masked = 0;
                for (size_t i = 0; i < n; i++) {
                    size_t m = cpu_moe_route(ids + i * k, wts + i * k, logits + i * E, E, k, allowed, probs);
                    for (size_t j = m; j < k; j++) ids[i * k + j] = -1, wts[i * k + j] = 0.0f, masked++;
                }
                CHECK(restricted ? masked == n * (k - 5) : masked == 0);
                memset(b, 0xff, n * H * 4); /* NaNs: every element must be written */
                cpu_moe_experts(b, x, n, &w, ids, wts, pool, scratch);
                CHECK_MSG(memcmp(a, b, n * H * 4) == 0, "%zu threads, %zu rows, restricted %d: nerr %g", threads, n,
                          restricted, ops_nerr(b, a, n * H));
            }
        }
        threadpool_free(pool);
    }
    free(x), free(a), free(b), free(logits), free(wts), free(ids), free(scratch);
    moe_experts_fixture_free(&fx);
}

/* The oracle of cpu_moe_experts, written out: per row its pairs with ids >= 0 in ascending expert id, each
 * expert's gate and up by matmul_oracle on the row alone, cpu_swiglu_scalar, the down product, then
 * out += y * wt in that order (0 for a row without pairs). */
static void moe_experts_hand(float *out, const float *x, size_t n, const cpu_moe_weights *w, const int32_t *ids,
                             const float *wts) {
    const size_t H = w->n_embd, F = w->n_ff, k = w->n_used;
    float *g = malloc(F * 4), *u = malloc(F * 4), *y = malloc(H * 4);
    for (size_t i = 0; i < n; i++) {
        float *o = out + i * H;
        for (size_t c = 0; c < H; c++) o[c] = 0.0f;
        for (int32_t e = 0; e < (int32_t)w->n_expert; e++) {
            for (size_t j = 0; j < k; j++) {
                if (ids[i * k + j] != e) continue;
                matmul_oracle(w->gate_type, (const char *)w->gate_exps + (size_t)e * w->gate_stride, F, H, x + i * H,
                              1, g);
                matmul_oracle(w->up_type, (const char *)w->up_exps + (size_t)e * w->up_stride, F, H, x + i * H, 1, u);
                cpu_swiglu_scalar(g, g, u, F);
                matmul_oracle(w->down_type, (const char *)w->down_exps + (size_t)e * w->down_stride, H, F, g, 1, y);
                for (size_t c = 0; c < H; c++) o[c] += y[c] * wts[i * k + j];
            }
        }
    }
    free(g), free(u), free(y);
}

/* (b) A masked routing (a third of the pairs -1, one row with all of them -1) against the hand loop above,
 * 1 and 24 rows on a 3-thread pool. The down experts are F32 here: with 8-bit down activations (Q8_0 down)
 * an ulp of difference in h can move one of its 8-bit codes by one, a 1/127-of-the-block step no
 * summation bound covers. Then the two differ only by float order: gate / up are Q4_K x 8-bit integer
 * sums with the 8 sub-block scales applied in another order (~8 ulps of the sum of |terms|), the AVX2
 * SwiGLU's exp is within 2 ulps of expf (swiglu_avx2_matches_scalar: 4e-7 relative), and the F32 down
 * product is a 96-term reduction reordered (at most 96 * 2^-24 = 5.7e-6 of its sum of |terms|, ~sqrt(96) *
 * 2^-24 = 6e-7 in practice); the weighted sums are the same operations in the same order. 1e-5 of the
 * output's scale holds the worst of these with a margin. The all-masked row is exactly +0. */
static void moe_experts_masked_match_hand_loop(void) {
    moe_experts_fixture fx;
    moe_experts_fixture_make(&fx, 1, 505);
    const cpu_moe_weights *w = &fx.w; /* with its shared expert: cpu_moe_experts ignores it */
    const size_t H = w->n_embd, E = w->n_expert, k = w->n_used, MAXN = 24, empty = 2;
    rng_state r;
    rng_seed(&r, 506);
    float *x = malloc(MAXN * H * 4), *a = malloc(MAXN * H * 4), *b = malloc(MAXN * H * 4), *wts = malloc(MAXN * k * 4);
    int32_t *ids = malloc(MAXN * k * sizeof *ids);
    ops_fill(x, MAXN * H, &r, 1.0f);
    void *scratch = malloc(cpu_moe_scratch_bytes(w, MAXN));
    threadpool *pool = NULL;
    clover_error err;
    CHECK(threadpool_create(&pool, 3, &err) == CLOVER_OK);
    const size_t ns[2] = {1, MAXN};
    for (size_t in = 0; in < 2; in++) {
        const size_t n = ns[in];
        moe_test_routing(ids, wts, n, E, k, empty, &r);
        moe_experts_hand(a, x, n, w, ids, wts);
        memset(b, 0xff, n * H * 4);
        cpu_moe_experts(b, x, n, w, ids, wts, pool, scratch);
        const double e = ops_nerr(b, a, n * H);
        CHECK_MSG(e < 1e-5, "%zu rows: nerr %g", n, e);
        OPS_NOTE("cpu_moe_experts vs the hand loop, %zu rows: nerr %.2g", n, e);
        if (n > empty) {
            int zero = 1;
            for (size_t c = 0; c < H; c++) zero &= memcmp(&b[empty * H + c], &(float){0.0f}, 4) == 0;
            CHECK_MSG(zero, "the row with every pair masked is not +0");
        }
    }
    threadpool_free(pool);
    free(x), free(a), free(b), free(wts), free(ids), free(scratch);
    moe_experts_fixture_free(&fx);
}

/* (c) The shared expert is not cpu_moe_experts's: weights with one (n_ff_shexp 160), the same without (0),
 * and with another shared expert altogether (other tensors, a gate that would open it fully) give the same
 * bits, 1 and 17 rows, pools of 1 and 2. */
static void moe_experts_ignore_the_shared_expert(void) {
    moe_experts_fixture fx, other;
    moe_experts_fixture_make(&fx, 0, 606);
    moe_experts_fixture_make(&other, 0, 607);
    cpu_moe_weights none = fx.w, alt = fx.w;
    none.n_ff_shexp = 0;
    alt.sh_gate = other.w.sh_gate, alt.sh_up = other.w.sh_up, alt.sh_down = other.w.sh_down;
    float *big = malloc(alt.n_embd * 4);
    for (size_t c = 0; c < alt.n_embd; c++) big[c] = 50.0f;
    alt.sh_inp = big;
    const size_t H = fx.w.n_embd, E = fx.w.n_expert, k = fx.w.n_used, MAXN = 17;
    rng_state r;
    rng_seed(&r, 608);
    float *x = malloc(MAXN * H * 4), *wts = malloc(MAXN * k * 4), *out[3];
    int32_t *ids = malloc(MAXN * k * sizeof *ids);
    for (int i = 0; i < 3; i++) out[i] = malloc(MAXN * H * 4);
    ops_fill(x, MAXN * H, &r, 1.0f);
    void *scratch = malloc(cpu_moe_scratch_bytes(&fx.w, MAXN));
    const cpu_moe_weights *ws[3] = {&fx.w, &none, &alt};
    clover_error err;
    for (size_t threads = 1; threads <= 2; threads++) {
        threadpool *pool = NULL;
        CHECK(threadpool_create(&pool, threads, &err) == CLOVER_OK);
        for (size_t n = 1; n <= MAXN; n += MAXN - 1) {
            moe_test_routing(ids, wts, n, E, k, MAXN, &r);
            for (int i = 0; i < 3; i++) cpu_moe_experts(out[i], x, n, ws[i], ids, wts, pool, scratch);
            CHECK_MSG(memcmp(out[0], out[1], n * H * 4) == 0, "%zu threads, %zu rows: with / without", threads, n);
            CHECK_MSG(memcmp(out[0], out[2], n * H * 4) == 0, "%zu threads, %zu rows: another shared expert",
                      threads, n);
        }
        threadpool_free(pool);
    }
    for (int i = 0; i < 3; i++) free(out[i]);
    free(x), free(wts), free(ids), free(scratch), free(big);
    moe_experts_fixture_free(&fx);
    moe_experts_fixture_free(&other);
}

/* (d) Experts routed every row (a preview's coreset of fewer experts than k: every row takes each of them), whose
 * products then read x itself and share one 8-bit staging of it (moe_run), against each row run alone (one-row
 * products: the batch-invariance rule makes a row's bits its own whatever the row count) and against
 * CLOVER_MOE_GATHER=1 (every expert on its own gathered copy, as before): bit for bit. Three routings: all of a
 * coreset of 5 for every row (every expert full), the same plus a sixth expert for the even rows (full and
 * partial experts in one batch), and the coreset in another slot order per row. 3, 16, 32 and 33 rows (the AMX
 * level's one and two groups of 16, and a partial third), pools of 1, 2 and 3 threads. */
static void moe_experts_full_rows_match_rows_alone(void) {
    moe_experts_fixture fx;
    moe_experts_fixture_make(&fx, 0, 707);
    cpu_moe_weights w = fx.w;
    w.n_ff_shexp = 0;
    const size_t H = w.n_embd, k = w.n_used, MAXN = 33;
    rng_state r;
    rng_seed(&r, 708);
    float *x = malloc(MAXN * H * 4), *a = malloc(MAXN * H * 4), *b = malloc(MAXN * H * 4), *c = malloc(MAXN * H * 4);
    float *wts = malloc(MAXN * k * 4);
    int32_t *ids = malloc(MAXN * k * sizeof *ids);
    ops_fill(x, MAXN * H, &r, 1.0f);
    void *scratch = malloc(cpu_moe_scratch_bytes(&w, MAXN));
    const int32_t coreset[6] = {3, 11, 12, 30, 39, 17};
    const size_t ns[4] = {3, 16, 32, 33};
    clover_error err;
    int bad = 0;
    for (size_t threads = 1; threads <= 3; threads++) {
        threadpool *pool = NULL;
        CHECK(threadpool_create(&pool, threads, &err) == CLOVER_OK);
        for (int kind = 0; kind < 3; kind++)
            for (size_t in = 0; in < 4; in++) {
                const size_t n = ns[in];
                for (size_t i = 0; i < n; i++)
                    for (size_t j = 0; j < k; j++) {
                        const size_t used = kind == 1 && i % 2 == 0 ? 6 : 5, jj = kind == 2 ? (j + i) % used : j;
                        ids[i * k + j] = j < used ? coreset[jj] : -1;
                        wts[i * k + j] = j < used ? 0.1f + 0.05f * (float)((i + j) % 7) : 0.0f;
                    }
                cpu_moe_experts(a, x, n, &w, ids, wts, pool, scratch);
                for (size_t i = 0; i < n; i++) /* each row alone */
                    cpu_moe_experts(b + i * H, x + i * H, 1, &w, ids + i * k, wts + i * k, pool, scratch);
                setenv("CLOVER_MOE_GATHER", "1", 1);
                cpu_moe_experts(c, x, n, &w, ids, wts, pool, scratch);
                unsetenv("CLOVER_MOE_GATHER");
                const int alone = memcmp(a, b, n * H * 4) == 0, gathered = memcmp(a, c, n * H * 4) == 0;
                if ((!alone || !gathered) && bad++ < 3)
                    fprintf(stderr, "  %zu threads, routing %d, %zu rows: rows alone %s, gathered %s\n", threads,
                            kind, n, alone ? "same" : "differ", gathered ? "same" : "differ");
            }
        threadpool_free(pool);
    }
    CHECK_MSG(bad == 0, "%d cases differ", bad);
    free(x), free(a), free(b), free(c), free(wts), free(ids), free(scratch);
    moe_experts_fixture_free(&fx);
}

static void weights_check_names_the_tensor(void) {
    static float f[4096];
    cpu_moe_weights w = {.n_embd = 64, .n_ff = 32, .n_expert = 4, .n_used = 2, .n_ff_shexp = 0,
                         .router_type = QUANT_F32, .router = f, .gate_type = QUANT_F32, .gate_exps = f,
                         .gate_stride = 32 * 64 * 4, .up_type = QUANT_F32, .up_exps = f, .up_stride = 32 * 64 * 4,
                         .down_type = QUANT_Q8_0, .down_exps = f, .down_stride = 64 * 34};
    clover_error err = {0};
    CHECK_EQ_INT(cpu_moe_weights_check(&w, &err), CLOVER_OK);
    w.n_used = 5;
    CHECK_EQ_INT(cpu_moe_weights_check(&w, &err), CLOVER_E_FORMAT);
    w.n_used = 2, w.down_type = QUANT_Q4_K; /* rows of 32 are not whole 256-blocks */
    CHECK_EQ_INT(cpu_moe_weights_check(&w, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "ffn_down_exps") != NULL, "%s", err.message);
    w.down_type = QUANT_Q4_0; /* known to GGUF, not computed by clover */
    CHECK_EQ_INT(cpu_moe_weights_check(&w, &err), CLOVER_E_UNSUPPORTED);
    w.down_type = QUANT_Q8_0, w.gate_stride = 100;
    CHECK_EQ_INT(cpu_moe_weights_check(&w, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "ffn_gate_exps") != NULL, "%s", err.message);
    w.gate_stride = 32 * 64 * 4, w.n_ff_shexp = 16; /* shared expert declared but absent */
    CHECK_EQ_INT(cpu_moe_weights_check(&w, &err), CLOVER_E_FORMAT);
    CHECK_MSG(strstr(err.message, "ffn_gate_shexp") != NULL, "%s", err.message);
}

static void swiglu_avx2_matches_scalar(void) {
    if (!cpu_simd_supported()) {
        printf("     (no AVX2+FMA: fast path not tested)\n");
        return;
    }
    rng_state r;
    rng_seed(&r, 5);
    float g[203], u[203], a[203], b[203];
    ops_fill(g, 203, &r, 6.0f); /* into both tails of silu */
    ops_fill(u, 203, &r, 1.0f);
    g[0] = -100.0f, g[1] = 100.0f, g[2] = 0.0f;
    cpu_swiglu_scalar(a, g, u, 203);
    cpu_swiglu_avx2(b, g, u, 203);
    for (int i = 0; i < 203; i++) CHECK_MSG(fabsf(a[i] - b[i]) <= 4e-7f * (fabsf(a[i]) + 1e-30f) || a[i] == b[i], "i=%d", i);
}

int main(void) {
    RUN(topk_ties_take_the_lower_index);
    RUN(route_hand_cases);
    RUN(coreset_keeps_the_prefix_that_holds_top_p);
    RUN(coreset_ties_and_zeros);
    RUN(moe_matches_torch);
    RUN(moe_fast_matches_scalar_quantised);
    RUN(moe_grouped_matches_old_order);
    RUN(swiglu_avx2_matches_scalar);
    RUN(weights_check_names_the_tensor);
    RUN(moe_experts_match_forward_on_its_routing);
    RUN(moe_experts_masked_match_hand_loop);
    RUN(moe_experts_ignore_the_shared_expert);
    RUN(moe_experts_full_rows_match_rows_alone);
    return TEST_EXIT();
}
