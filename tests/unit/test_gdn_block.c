/*
 * test_gdn_block.c: the GDN block operator of a preview (SPEC.md 2.1).
 *  - the oracle against a float64 implementation written here from the SPEC
 *    text (odd sizes, b = 1..9, both value-head orders, B != b);
 *  - the history-only limit: conv_right = 0, history_bias = 1e4,
 *    logit_scale = 0 puts all the mass on the history slot, so the output
 *    must be the causal read-out S^T q of the causal path's own operators
 *    (cpu_gdn_conv, cpu_gdn_qk_norm, a recurrence step with beta = 0, g = 0,
 *    which leaves S as it is, and the gated norm);
 *  - b = 1 by hand: the softmax over two slots is the logistic of their
 *    difference, o = sigma(d) v + (1 - sigma(d)) u, and the right taps
 *    only ever see X[j >= 1] = 0, so they cannot matter;
 *  - ln(b/B) is a shift of the history bias;
 *  - the fast form (AVX2 kernels, heads over a pool) against the oracle;
 *  - the fast form with its conv, L2 norms and gated norm as pool tasks
 *    (cpu_grouped) against the old order (CLOVER_CPU_GROUPED=0), bit for bit.
 */
#include "base/threadpool.h"
#include "cpu/cpu_simd.h"
#include "cpu/gdn_block.h"
#include "cpu/norm.h"
#include "cpu_ops_test.h"
#include "gdn_block_case.h"

#include <stdlib.h>

static float urand(rng_state *r, float lo, float hi) { return lo + (hi - lo) * rng_uniform(r); }

static float *run_oracle(const block_case *c, uint32_t B) {
    float *out = malloc(c->b * c->d.n_v_heads * c->d.v_dim * sizeof *out);
    float *scratch = malloc(gdn_block_scratch_floats(&c->d, c->b, 1) * sizeof *scratch);
    gdn_block_scalar(out, c->mixed, c->z, c->a, c->ring, c->state, &c->w, &c->d, c->b,
                     gdn_block_ln_ratio(c->b, B), scratch);
    free(scratch);
    return out;
}

static double silu_d(double x) { return x / (1.0 + exp(-x)); }

/* SPEC.md 2.1 in float64, step by step as the text states it. */
static double *spec_block(const block_case *c, uint32_t B) {
    const cpu_gdn_dims *d = &c->d;
    const size_t b = c->b, cd = c->cd, K = c->K, nk = d->n_k_heads, nv = d->n_v_heads, dk = d->k_dim, dv = d->v_dim;
    double *Y = calloc(b * cd, sizeof *Y), *g = calloc(b * nv, sizeof *g), *o = calloc(b * nv * dv, sizeof *o);
    /* 2. conv: E = [R; X], left taps t = 0..K-1 over E[i+t], right taps t = 1..K-1 over X[i+t] (0 past b) */
    for (size_t i = 0; i < b; i++)
        for (size_t ch = 0; ch < cd; ch++) {
            double acc = 0;
            for (size_t t = 0; t < K; t++) {
                size_t e = i + t;
                double E = e < K - 1 ? c->ring[e * cd + ch] : c->mixed[(e - (K - 1)) * cd + ch];
                acc += (double)c->conv_w[ch * K + t] * E;
            }
            for (size_t t = 1; t < K; t++) {
                double X = i + t < b ? c->mixed[(i + t) * cd + ch] : 0.0;
                acc += (double)c->conv_right[ch * (K - 1) + t - 1] * X;
            }
            Y[i * cd + ch] = silu_d(acc);
        }
    /* 3. L2 norm of q and k per key head (eps on the sum of squares) */
    for (size_t i = 0; i < b; i++)
        for (size_t hh = 0; hh < 2 * nk; hh++) {
            double *v = Y + i * cd + hh * dk, ss = 0;
            for (size_t t = 0; t < dk; t++) ss += v[t] * v[t];
            for (size_t t = 0; t < dk; t++) v[t] /= sqrt(ss + 1e-6);
        }
    /* 4. decay */
    for (size_t i = 0; i < b; i++)
        for (size_t h = 0; h < nv; h++) {
            double u = (double)c->a[i * nv + h] + c->dt_bias[h];
            g[i * nv + h] = c->ssm_a[h] * (u > 20 ? u : log1p(exp(u)));
        }
    /* 5-6. scores, softmax, mix */
    double *s = calloc(b + 1, sizeof *s);
    for (size_t h = 0; h < nv; h++) {
        size_t kh = d->order == CPU_GDN_TILED ? h % nk : h / (nv / nk);
        for (size_t i = 0; i < b; i++) {
            const double *q = Y + i * cd + kh * dk;
            for (size_t j = 0; j < b; j++) {
                const double *k = Y + j * cd + nk * dk + kh * dk;
                double dot = 0;
                for (size_t t = 0; t < dk; t++) dot += q[t] * k[t];
                s[j] = c->ls[h] * dot;
            }
            s[b] = c->hb[h] + c->hc[h] * g[i * nv + h] + log((double)b / B);
            double mx = s[0], sum = 0;
            for (size_t j = 1; j <= b; j++) mx = fmax(mx, s[j]);
            for (size_t j = 0; j <= b; j++) sum += exp(s[j] - mx);
            for (size_t col = 0; col < dv; col++) {
                double u = 0, acc = 0;
                for (size_t t = 0; t < dk; t++) u += c->state[(h * dk + t) * dv + col] * q[t] / sqrt((double)dk);
                for (size_t j = 0; j < b; j++) acc += exp(s[j] - mx) / sum * Y[j * cd + 2 * nk * dk + h * dv + col];
                o[(i * nv + h) * dv + col] = acc + exp(s[b] - mx) / sum * u;
            }
        }
    }
    /* 7. gated RMSNorm */
    for (size_t v = 0; v < b * nv; v++) {
        double ms = 0;
        for (size_t t = 0; t < dv; t++) ms += o[v * dv + t] * o[v * dv + t];
        double inv = 1 / sqrt(ms / dv + d->eps);
        for (size_t t = 0; t < dv; t++) o[v * dv + t] *= inv * c->norm_w[t] * silu_d(c->z[v * dv + t]);
    }
    free(Y), free(g), free(s);
    return o;
}

static double rel_err_d(const float *x, const double *ref, size_t n) {
    double scale = 1e-30, diff = 0;
    for (size_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs(ref[i]));
        double e = fabs((double)x[i] - ref[i]);
        if (!(e <= diff)) diff = e;
    }
    return diff / scale;
}

static void oracle_matches_spec_in_float64(void) {
    double worst = 0;
    for (int order = 0; order < 2; order++)
        for (size_t b = 1; b <= 9; b += 2) {
            block_case c;
            block_case_make(&c, 100 + b + 10 * (size_t)order, 3, 6, 13, 11, 4, b, (cpu_gdn_head_order)order);
            uint32_t B = 8;
            float *got = run_oracle(&c, B);
            double *want = spec_block(&c, B);
            double e = rel_err_d(got, want, b * 6 * 11);
            worst = fmax(worst, e);
            /* float32 sums of at most dk + b terms of O(1) values, then a norm */
            CHECK_MSG(e <= 5e-6, "order %d, b %zu: rel err %.3g", order, b, e);
            free(got), free(want);
            block_case_free(&c);
        }
    /* K = 2 (one right tap) and K = 5 */
    for (size_t K = 2; K <= 5; K += 3) {
        block_case c;
        block_case_make(&c, 7 + K, 2, 2, 8, 5, K, 6, CPU_GDN_TILED);
        float *got = run_oracle(&c, 32);
        double *want = spec_block(&c, 32);
        double e = rel_err_d(got, want, 6 * 2 * 5);
        worst = fmax(worst, e);
        CHECK_MSG(e <= 5e-6, "K %zu: rel err %.3g", K, e);
        free(got), free(want);
        block_case_free(&c);
    }
    printf("     oracle vs float64 SPEC: worst rel err %.3g\n", worst);
}

static void history_only_limit_is_the_causal_readout(void) {
    for (int order = 0; order < 2; order++) {
        block_case c;
        const size_t b = 5, nv = 4, dv = 7;
        block_case_make(&c, 31 + (uint64_t)order, 2, nv, 6, dv, 4, b, (cpu_gdn_head_order)order);
        for (size_t i = 0; i < c.cd * (c.K - 1); i++) c.conv_right[i] = 0;
        for (size_t h = 0; h < nv; h++) c.ls[h] = 0, c.hb[h] = 1e4f;
        float *got = run_oracle(&c, 8);

        /* the causal path: conv over [ring; X], q/k norm (q scaled), a step with beta = g = 0, gated norm */
        float *ring = malloc((c.K - 1) * c.cd * sizeof *ring), *qkv = malloc(b * c.cd * sizeof *qkv);
        float *S = malloc(nv * c.d.k_dim * dv * sizeof *S), *o = malloc(b * nv * dv * sizeof *o);
        float *zero = calloc(b * nv, sizeof *zero);
        memcpy(ring, c.ring, (c.K - 1) * c.cd * sizeof *ring);
        memcpy(S, c.state, nv * c.d.k_dim * dv * sizeof *S);
        cpu_gdn_conv_scalar(qkv, c.mixed, ring, c.conv_w, c.cd, c.K, b);
        cpu_gdn_qk_norm_scalar(qkv, &c.d, b);
        for (size_t i = 0; i < b; i++) /* each row reads the committed S (beta = 0 writes nothing) */
            cpu_gdn_recurrent_scalar(o + i * nv * dv, S, qkv + i * c.cd, zero, zero, &c.d, 1, 0, nv);
        cpu_rms_norm_gated_scalar(o, o, c.z, c.norm_w, b * nv, dv, c.d.eps);
        CHECK(memcmp(S, c.state, nv * c.d.k_dim * dv * sizeof *S) == 0);
        double e = block_case_rel_err(got, o, b * nv * dv);
        printf("     history-only limit (order %d): rel err %.3g against the causal read-out\n", order, e);
        CHECK_MSG(e <= 1e-6, "order %d: %.3g", order, e);
        free(got), free(ring), free(qkv), free(S), free(o), free(zero);
        block_case_free(&c);
    }
}

static void one_row_by_hand(void) {
    /* nk = nv = 1, dk = 3, dv = 2, K = 3, a fresh-looking ring of zeros but for one row */
    block_case c;
    block_case_make(&c, 77, 1, 1, 3, 2, 3, 1, CPU_GDN_TILED);
    const size_t cd = c.cd; /* 3 + 3 + 2 */
    float *got = run_oracle(&c, 4);
    /* the right taps multiply X[1], X[2] = 0: any values give the same bits */
    for (size_t i = 0; i < cd * 2; i++) c.conv_right[i] = 1e3f * (float)(i + 1);
    float *again = run_oracle(&c, 4);
    CHECK(memcmp(got, again, 2 * sizeof *got) == 0);

    double y[8];
    for (size_t ch = 0; ch < cd; ch++) /* left taps: ring rows 0, 1, then x */
        y[ch] = silu_d((double)c.conv_w[ch * 3] * c.ring[ch] + (double)c.conv_w[ch * 3 + 1] * c.ring[cd + ch] +
                       (double)c.conv_w[ch * 3 + 2] * c.mixed[ch]);
    double nq = sqrt(y[0] * y[0] + y[1] * y[1] + y[2] * y[2] + 1e-6);
    double nk = sqrt(y[3] * y[3] + y[4] * y[4] + y[5] * y[5] + 1e-6);
    double qk = (y[0] * y[3] + y[1] * y[4] + y[2] * y[5]) / (nq * nk);
    double ua = (double)c.a[0] + c.dt_bias[0];
    double g = c.ssm_a[0] * log1p(exp(ua));
    double diff = c.ls[0] * qk - (c.hb[0] + c.hc[0] * g + log(1.0 / 4.0));
    double p = 1 / (1 + exp(-diff)); /* the block slot's share */
    double o[2];
    for (size_t col = 0; col < 2; col++) {
        double u = 0;
        for (size_t t = 0; t < 3; t++) u += c.state[t * 2 + col] * y[t] / nq / sqrt(3.0);
        o[col] = p * y[6 + col] + (1 - p) * u;
    }
    double inv = 1 / sqrt((o[0] * o[0] + o[1] * o[1]) / 2 + 1e-6);
    for (size_t col = 0; col < 2; col++) {
        double want = o[col] * inv * c.norm_w[col] * silu_d(c.z[col]);
        CHECK_NEAR(got[col], want, 1e-5 * fmax(1, fabs(want)));
    }
    free(got), free(again);
    block_case_free(&c);
}

static void ln_ratio_shifts_the_history_bias(void) {
    block_case c;
    block_case_make(&c, 5, 2, 4, 8, 8, 4, 4, CPU_GDN_TILED);
    float *smaller = run_oracle(&c, 32); /* b = 4 of B = 32: ln(1/8) */
    for (size_t h = 0; h < 4; h++) c.hb[h] += (float)log(4.0 / 32.0);
    float *shifted = run_oracle(&c, 4); /* ln(4/4) = 0 */
    double e = block_case_rel_err(shifted, smaller, 4 * 4 * 8);
    CHECK_MSG(e <= 1e-5, "%.3g", e);
    CHECK(gdn_block_ln_ratio(32, 32) == 0.0f);
    CHECK(gdn_block_ln_ratio(4, 8) == (float)log(0.5));
    free(smaller), free(shifted);
    block_case_free(&c);
}

static void fast_matches_oracle(void) {
    threadpool *pool = NULL;
    clover_error err;
    CHECK(threadpool_create(&pool, 3, &err) == 0);
    double worst = 0;
    const size_t shapes[][6] = {/* nk, nv, dk, dv, K, b */
                                {3, 6, 13, 11, 4, 1}, {3, 6, 13, 11, 4, 7}, {2, 4, 16, 12, 4, 8},
                                {1, 3, 33, 17, 2, 5}, {4, 8, 128, 128, 4, 9}, {2, 6, 8, 40, 5, 3}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int order = 0; order < 2; order++) {
            const size_t *sh = shapes[si];
            block_case c;
            block_case_make(&c, 1000 + si * 2 + (size_t)order, sh[0], sh[1], sh[2], sh[3], sh[4], sh[5],
                      (cpu_gdn_head_order)order);
            size_t n = sh[5] * sh[1] * sh[3];
            float *want = run_oracle(&c, 8), *got = malloc(n * sizeof *got);
            float *scratch = malloc(gdn_block_scratch_floats(&c.d, c.b, threadpool_size(pool)) * sizeof *scratch);
            for (int pooled = 0; pooled < 2; pooled++) {
                gdn_block(got, c.mixed, c.z, c.a, c.ring, c.state, &c.w, &c.d, c.b, gdn_block_ln_ratio(c.b, 8),
                          pooled ? pool : NULL, scratch);
                double e = block_case_rel_err(got, want, n);
                worst = fmax(worst, e);
                CHECK_MSG(e <= 5e-6, "shape %zu order %d pooled %d: %.3g", si, order, pooled, e);
            }
            if (cpu_simd_supported()) { /* the AVX2 conv alone, against the oracle's conv via the limit above */
                size_t cd = c.cd, K = c.K;
                float *wt = malloc((2 * K - 1) * cd * sizeof *wt), *y = malloc(c.b * cd * sizeof *y);
                for (size_t ch = 0; ch < cd; ch++) {
                    for (size_t t = 0; t < K; t++) wt[t * cd + ch] = c.conv_w[ch * K + t];
                    for (size_t t = 0; t + 1 < K; t++) wt[(K + t) * cd + ch] = c.conv_right[ch * (K - 1) + t];
                }
                gdn_block_conv_avx2(y, c.mixed, c.ring, wt, cd, K, c.b);
                for (size_t i = 0; i < c.b; i++)
                    for (size_t ch = 0; ch < cd; ch++) {
                        double acc = 0;
                        for (size_t t = 0; t < K; t++) {
                            size_t e = i + t;
                            acc += (double)c.conv_w[ch * K + t] *
                                   (e < K - 1 ? c.ring[e * cd + ch] : c.mixed[(e - (K - 1)) * cd + ch]);
                        }
                        for (size_t t = 1; t < K && i + t < c.b; t++)
                            acc += (double)c.conv_right[ch * (K - 1) + t - 1] * c.mixed[(i + t) * cd + ch];
                        CHECK_NEAR(y[i * cd + ch], silu_d(acc), 1e-5 * fmax(1, fabs(acc)));
                    }
                free(wt), free(y);
            }
            free(want), free(got), free(scratch);
            block_case_free(&c);
        }
    printf("     fast vs oracle: worst rel err %.3g (simd %s)\n", worst, cpu_simd_active() ? "on" : "off");
    threadpool_free(pool);
}

/* cpu_grouped: the conv in runs of channels on the pool, the key heads'
 * L2 norms in the same tasks, the gated norm in each head's task: the same
 * bits as the old order (conv and norms on the calling thread), for rows
 * 1..64, odd value widths (a channel tail past the last 8-vector), run
 * lengths that do not divide the value channels, and pools of 1..3 threads. */
static void grouped_matches_old_order(void) {
    const size_t shapes[][5] = {/* nk, nv, dk, dv, K */
                                {2, 4, 16, 12, 4}, {4, 8, 128, 136, 4}, {2, 6, 8, 40, 5}, {3, 6, 24, 13, 4},
                                {3, 6, 13, 11, 4}};
    const size_t bs[] = {1, 2, 5, 17, 32, 33, 64};
    threadpool *pools[3] = {NULL, NULL, NULL};
    clover_error err;
    CHECK(threadpool_create(&pools[1], 2, &err) == 0);
    CHECK(threadpool_create(&pools[2], 3, &err) == 0);
    int bad = 0, cases = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (size_t bi = 0; bi < sizeof bs / sizeof *bs; bi++) {
            const size_t *sh = shapes[si];
            block_case c;
            block_case_make(&c, 5000 + si * 16 + bi, sh[0], sh[1], sh[2], sh[3], sh[4], bs[bi],
                            (cpu_gdn_head_order)(bi % 2));
            const size_t n = c.b * sh[1] * sh[3];
            float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
            float *scratch = malloc(gdn_block_scratch_floats(&c.d, c.b, 3) * sizeof *scratch);
            for (int p = 0; p < 3; p++) {
                setenv("CLOVER_CPU_GROUPED", "0", 1);
                gdn_block(a, c.mixed, c.z, c.a, c.ring, c.state, &c.w, &c.d, c.b, gdn_block_ln_ratio(c.b, 32), pools[p],
                          scratch);
                unsetenv("CLOVER_CPU_GROUPED");
                gdn_block(b, c.mixed, c.z, c.a, c.ring, c.state, &c.w, &c.d, c.b, gdn_block_ln_ratio(c.b, 32), pools[p],
                          scratch);
                cases++;
                if (memcmp(a, b, n * sizeof *a) != 0 && bad++ < 3)
                    fprintf(stderr, "  shape %zu, b %zu, pool %d: grouped and old differ\n", si, c.b, p);
            }
            free(a), free(b), free(scratch);
            block_case_free(&c);
        }
    CHECK_MSG(bad == 0, "%d of %d cases differ", bad, cases);
    threadpool_free(pools[1]);
    threadpool_free(pools[2]);
}

/* The head's two register-blocked parts (gdn_block_readout_avx2, gdn_block_mix_avx2: rows of a group share each
 * load of S, accumulators in registers) against scalar chains of fmaf in the order the per-row axpys used (t, then
 * j, ascending, from +0): bit for bit, for every group size 1..4 and widths on and off their blocks (dv a multiple
 * of 8: every element an FMA). So a row's read-out and mix do not depend on the rows grouped with it. */
static void head_parts_match_fma_chains(void) {
    if (!cpu_simd_active()) {
        printf("     (no AVX2: the parts are not used)\n");
        return;
    }
    const size_t dks[] = {8, 128}, dvs[] = {8, 16, 48, 64, 128, 136}, cd_pad = 5;
    rng_state st;
    rng_seed(&st, 99);
    size_t bad = 0, n = 0;
    for (size_t a = 0; a < sizeof dks / sizeof *dks; a++)
        for (size_t e = 0; e < sizeof dvs / sizeof *dvs; e++) {
            const size_t dk = dks[a], dv = dvs[e], b = 7, cd = dv + cd_pad;
            float *S = malloc(dk * dv * sizeof *S), *qs = malloc(GDN_HEAD_ROWS * dk * sizeof *qs);
            float *u = malloc(GDN_HEAD_ROWS * dv * sizeof *u), *v = malloc(b * cd * sizeof *v);
            float *o = malloc(dv * sizeof *o), p[8];
            for (size_t i = 0; i < dk * dv; i++) S[i] = urand(&st, -1.0f, 1.0f);
            for (size_t i = 0; i < GDN_HEAD_ROWS * dk; i++) qs[i] = urand(&st, -1.1f, 1.1f);
            for (size_t i = 0; i < b * cd; i++) v[i] = urand(&st, -1.0f, 1.0f);
            for (size_t j = 0; j <= b; j++) p[j] = urand(&st, 0.001f, 1.0f);
            for (size_t R = 1; R <= GDN_HEAD_ROWS; R++) {
                gdn_block_readout_avx2(u, qs, S, R, dk, dv);
                for (size_t r = 0; r < R; r++)
                    for (size_t c = 0; c < dv; c++) {
                        float want = 0.0f;
                        for (size_t t = 0; t < dk; t++) want = fmaf(qs[r * dk + t], S[t * dv + c], want);
                        bad += memcmp(&want, &u[r * dv + c], sizeof want) != 0, n++;
                    }
            }
            const float inv = 0.37f;
            gdn_block_mix_avx2(o, p, inv, v, cd, u, b, dv);
            for (size_t c = 0; c < dv; c++) {
                float want = 0.0f;
                for (size_t j = 0; j < b; j++) want = fmaf(p[j] * inv, v[j * cd + c], want);
                want = fmaf(p[b] * inv, u[c], want);
                bad += memcmp(&want, &o[c], sizeof want) != 0, n++;
            }
            free(S), free(qs), free(u), free(v), free(o);
        }
    printf("     %zu of %zu outputs differ from the fmaf chains\n", bad, n);
    CHECK_MSG(bad == 0, "%zu of %zu outputs differ from the scalar fmaf chains", bad, n);
}

int main(void) {
    RUN(oracle_matches_spec_in_float64);
    RUN(history_only_limit_is_the_causal_readout);
    RUN(one_row_by_hand);
    RUN(ln_ratio_shifts_the_history_bias);
    RUN(fast_matches_oracle);
    RUN(grouped_matches_old_order);
    RUN(head_parts_match_fma_chains);
    return TEST_EXIT();
}
