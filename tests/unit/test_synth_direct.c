/*
 * test_synth_direct.c: the qwen3.5-35b-a3b preset draws its Q4_K experts
 * as blocks straight from the random stream (no f32 values, no quantiser).
 * The preset is shrunk (1 layer, hidden 256, 4 experts of 256) and the
 * experts are decoded with the scalar oracle: their statistics must be the
 * ones the plan intends (mean 0, standard deviation 1/sqrt(fan_in) for gate
 * and up, 1/sqrt(2 layers)/sqrt(fan_in) for down, worked out here by hand),
 * every field valid, the values bounded, the bytes independent of the
 * thread count and dependent on the seed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clover.h"
#include "model/model.h"
#include "quant/quant.h"
#include "test.h"

static char dir[64];

static clover_model *synth_load(const char *name, uint64_t seed, uint32_t threads) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    clover_synth_options o = {.preset = "qwen3.5-35b-a3b",
                              .seed = seed,
                              .n_layer = 1,
                              .n_embd = 256,
                              .n_expert = 4,
                              .n_ff_exp = 256,
                              .n_threads = threads};
    clover_error err = {0};
    int rc = clover_synth(path, &o, &err);
    CHECK_MSG(rc == CLOVER_OK, "synth: %s", err.message);
    clover_model *m = NULL;
    if (rc == CLOVER_OK) {
        rc = clover_model_load(&m, path, &err);
        CHECK_MSG(rc == CLOVER_OK, "load: %s", err.message);
    }
    unlink(path); /* the mapping keeps the data */
    return m;
}

/* Decodes a Q4_K expert tensor with the scalar oracle and checks its statistics. */
static void check_expert(const model_weight *w, double want_std) {
    CHECK_EQ_INT(w->type, QUANT_Q4_K);
    if (w->type != QUANT_Q4_K) return;
    const size_t n = (size_t)(w->ne[0] * w->ne[1] * w->ne[2]);
    float *v = malloc(n * sizeof *v);
    quant_dequantize_row_scalar(QUANT_Q4_K, w->data, v, n);
    double sum = 0, sq = 0, mx = 0, sub_abs = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) bad++;
        sum += v[i];
        sq += (double)v[i] * v[i];
        if (fabs(v[i]) > mx) mx = fabs(v[i]);
    }
    /* A sub-block's mean over 32 uniform codes has a sampling std of
     * sqrt(21.25 / 32) / 4.61 = 0.18 sigma, so |mean| averages ~0.14 sigma,
     * plus the min's rounding (< 0.02 sigma); a min that failed to cancel
     * the codes' mean 7.5 would leave ~1.6 sigma. */
    for (size_t s = 0; s < n / 32; s++) {
        double m = 0;
        for (int k = 0; k < 32; k++) m += v[s * 32 + k];
        sub_abs += fabs(m / 32);
    }
    sub_abs /= (double)(n / 32);
    double mean = sum / (double)n, std = sqrt(sq / (double)n - mean * mean);
    printf("     %s: mean %.3g, std %.4g (want %.4g), max |v| %.3g sigma, mean |sub-block mean| %.3g sigma\n", w->name,
           mean, std, want_std, mx / want_std, sub_abs / want_std);
    CHECK_EQ_INT(bad, 0);
    CHECK_MSG(fabs(mean) < 0.01 * want_std, "%s: mean %g", w->name, mean);
    CHECK_MSG(fabs(std / want_std - 1.0) < 0.03, "%s: std %g, want %g", w->name, std, want_std);
    /* uniform codes: |v| <= 7.5 * 63 * 1.2 * d0 = 567 d0 = 2.53 sigma (d0 = sigma / 224.5) */
    CHECK_MSG(mx < 2.6 * want_std && mx > 1.5 * want_std, "%s: max |v| %g", w->name, mx);
    CHECK_MSG(sub_abs < 0.25 * want_std, "%s: sub-block means average %g in size", w->name, sub_abs);
    free(v);
}

static void test_direct_experts(void) {
    clover_model *m = synth_load("a.gguf", 5, 2);
    if (!m) return;
    const model_moe_weights *moe = &m->layers[0].moe;
    check_expert(&moe->gate_exps, 1.0 / sqrt(256.0));
    check_expert(&moe->up_exps, 1.0 / sqrt(256.0));
    check_expert(&moe->down_exps, 1.0 / sqrt(2.0) / sqrt(256.0)); /* out gain 1/sqrt(2 * 1 layer) */
    /* the other matrices are still quantised from f32 (Q8_0) */
    CHECK_EQ_INT(moe->gate_shexp.type, QUANT_Q8_0);
    CHECK_EQ_INT(m->layers[0].gdn.qkv.type, QUANT_Q8_0);
    clover_model_free(m);
}

static void test_direct_deterministic(void) {
    clover_model *a = synth_load("t1.gguf", 5, 1), *b = synth_load("t3.gguf", 5, 3), *c = synth_load("s6.gguf", 6, 2);
    if (a && b && c) {
        const model_weight *wa = &a->layers[0].moe.down_exps, *wb = &b->layers[0].moe.down_exps,
                           *wc = &c->layers[0].moe.down_exps;
        CHECK(wa->nbytes == wb->nbytes && wa->nbytes == wc->nbytes);
        CHECK_MSG(!memcmp(wa->data, wb->data, wa->nbytes), "1 and 3 threads drew different experts");
        CHECK_MSG(memcmp(wa->data, wc->data, wa->nbytes) != 0, "another seed drew the same experts");
        CHECK(!memcmp(a->layers[0].moe.gate_exps.data, b->layers[0].moe.gate_exps.data,
                      a->layers[0].moe.gate_exps.nbytes));
    }
    clover_model_free(a);
    clover_model_free(b);
    clover_model_free(c);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/clover-direct-XXXXXX", tmp && strlen(tmp) < 30 ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_direct_experts);
    RUN(test_direct_deterministic);
    rmdir(dir);
    return TEST_EXIT();
}
