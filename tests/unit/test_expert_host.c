/*
 * test_expert_host.c: the host CPU's side of backend/expert_host.h
 * (offload/expert_host_cpu.c), on synthetic models (clover_synth's tiny
 * preset: 4 layers, H 64, 8 experts of 32, top-2).
 *  - every layer, 1 and 9 rows, a random masked routing: against a hand loop
 *    built from the layer's own tensors (their shapes give the strides) with
 *    matmul_oracle, cpu_swiglu_scalar and the sum in ascending expert id; a row
 *    with every pair masked is +0; the counts are the hand-counted ones;
 *  - 1 and 2 threads give the same bits, and on a q8_0 model (whose products
 *    give a row the same bits at any row count) each row alone gives its bits
 *    in the 9-row call;
 *  - the refusals (bad layer, too many rows, an id out of range, max_rows 0,
 *    a model without routed experts) each with a message naming the problem.
 */
#include <stdlib.h>
#include <unistd.h>

#include "base/rng.h"
#include "clover.h"
#include "cpu/moe.h"
#include "model/model.h"
#include "offload/expert_host_cpu.h"
#include "quant/matmul.h"
#include "quant/quant.h"
#include "moe_test.h"
#include "test.h"

enum { MAX_ROWS = 9, EMPTY_ROW = 4 };

static clover_model *synth(const char *type, char *path, size_t n) {
    snprintf(path, n, "/tmp/clover_expert_host_%s_%d.gguf", type, (int)getpid());
    clover_synth_options o = {.preset = "tiny", .type = type, .seed = 21, .n_threads = 2};
    clover_error err = {0};
    int rc = clover_synth(path, &o, &err);
    CHECK_MSG(rc == 0, "synth %s: %s", type, err.message);
    clover_model *m = NULL;
    if (!rc) CHECK_MSG(clover_model_load(&m, path, &err) == 0, "%s: %s", path, err.message);
    return m;
}

static void fill(float *a, size_t n, rng_state *r) {
    for (size_t i = 0; i < n; i++) a[i] = 2.0f * rng_uniform(r) - 1.0f;
}

/* Expert e's matrix of a stacked tensor {n_in, n_out, E}: ne[0] n_in, ne[1] n_out, from the tensor itself. */
static const void *expert_of(const model_weight *t, size_t e) {
    return (const char *)t->data + e * quant_row_bytes(t->type, (size_t)t->ne[0]) * (size_t)t->ne[1];
}

/* The oracle: each row's pairs in ascending expert id, gate / up / down by matmul_oracle on the row alone,
 * cpu_swiglu_scalar between, out += y * wt in that order; 0 for a row without pairs. */
static void hand_loop(float *out, const float *x, size_t n, const model_layer *ml, const int32_t *ids,
                      const float *wts, size_t E, size_t k) {
    const model_moe_weights *mw = &ml->moe;
    const size_t H = (size_t)mw->gate_exps.ne[0], F = (size_t)mw->gate_exps.ne[1];
    float *g = malloc(F * 4), *u = malloc(F * 4), *y = malloc(H * 4);
    for (size_t i = 0; i < n; i++) {
        float *o = out + i * H;
        for (size_t c = 0; c < H; c++) o[c] = 0.0f;
        for (size_t e = 0; e < E; e++)
            for (size_t j = 0; j < k; j++) {
                if (ids[i * k + j] != (int32_t)e) continue;
                matmul_oracle(mw->gate_exps.type, expert_of(&mw->gate_exps, e), F, H, x + i * H, 1, g);
                matmul_oracle(mw->up_exps.type, expert_of(&mw->up_exps, e), F, H, x + i * H, 1, u);
                cpu_swiglu_scalar(g, g, u, F);
                matmul_oracle(mw->down_exps.type, expert_of(&mw->down_exps, e), H, F, g, 1, y);
                for (size_t c = 0; c < H; c++) o[c] += y[c] * wts[i * k + j];
            }
    }
    free(g), free(u), free(y);
}

/* max |a - b| / max |b| (NaN: infinity) */
static double nerr(const float *a, const float *b, size_t n) {
    double md = 0, mb = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d)) return INFINITY;
        md = d > md ? d : md;
        mb = fabs((double)b[i]) > mb ? fabs((double)b[i]) : mb;
    }
    return md / mb;
}

/* Every layer of the f32 tiny model, 1 and 9 rows, on 2 threads, against the hand loop. The two differ only
 * in float order: the fast products (SIMD dots for one or two rows, the tiled kernel for more) against
 * scalar dots, reductions of H = 64 (gate, up) and F = 32 (down) terms, at most 64 * 2^-24 = 3.8e-6 of
 * their sums of |terms| (~sqrt(64) * 2^-24 = 5e-7 in practice), and the AVX2 SwiGLU's exp within 2 ulps of
 * expf (4e-7 relative, test_cpu_moe's swiglu_avx2_matches_scalar); the weighted sums are the same
 * operations in the same order. 1e-5 of the output's scale holds that with a margin. The row with every
 * pair masked is +0, and the counts are those of the calls made. */
static void hook_matches_hand_loop_every_layer(void) {
    char path[128];
    clover_model *m = synth("f32", path, sizeof path);
    if (!m) return;
    const model_hparams *hp = &m->hp;
    const size_t H = hp->n_embd, E = hp->n_expert, k = hp->n_expert_used;
    expert_host h;
    clover_error err = {0};
    int rc = expert_host_cpu_open(m, 2, MAX_ROWS, &h, &err);
    CHECK_MSG(rc == 0, "open: %s", err.message);
    if (rc) goto done;
    rng_state r;
    rng_seed(&r, 31);
    float x[MAX_ROWS * 64], got[MAX_ROWS * 64], want[MAX_ROWS * 64], wts[MAX_ROWS * 8];
    int32_t ids[MAX_ROWS * 8];
    CHECK(H <= 64 && k <= 8);
    expert_host_cpu_counts want_counts = {0};
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        for (size_t n = 1; n <= MAX_ROWS; n += MAX_ROWS - 1) {
            fill(x, n * H, &r);
            moe_test_routing(ids, wts, n, E, k, EMPTY_ROW, &r);
            hand_loop(want, x, n, &m->layers[l], ids, wts, E, k);
            memset(got, 0xff, sizeof got); /* NaNs: every element must be written */
            rc = h.compute(h.ctx, l, got, x, n, ids, wts, &err);
            CHECK_MSG(rc == 0, "layer %u, %zu rows: %s", l, n, err.message);
            const double e = nerr(got, want, n * H);
            CHECK_MSG(e < 1e-5, "layer %u, %zu rows: nerr %g", l, n, e);
            if (l == 0) printf("     layer 0, %zu rows: nerr %.2g against the hand loop\n", n, e);
            if (n > EMPTY_ROW) {
                int zero = 1;
                for (size_t c = 0; c < H; c++) zero &= memcmp(&got[EMPTY_ROW * H + c], &(float){0.0f}, 4) == 0;
                CHECK_MSG(zero, "layer %u: the row with every pair masked is not +0", l);
            }
            uint8_t seen[256] = {0};
            want_counts.calls++, want_counts.rows += n;
            for (size_t i = 0; i < n * k; i++) {
                if (ids[i] < 0) continue;
                want_counts.pairs++;
                want_counts.experts += !seen[ids[i]];
                seen[ids[i]] = 1;
            }
        }
    }
    expert_host_cpu_counts c;
    CHECK(expert_host_cpu_get_counts(&h, &c));
    CHECK_EQ_INT(c.calls, want_counts.calls);
    CHECK_EQ_INT(c.rows, want_counts.rows);
    CHECK_EQ_INT(c.pairs, want_counts.pairs);
    CHECK_EQ_INT(c.experts, want_counts.experts);
    h.close(h.ctx);
done:
    clover_model_free(m);
    unlink(path);
}

/* 1 and 2 threads: the same bits, f32 and q8_0, every layer, 9 rows. On q8_0 also each row alone (the
 * one-row 8-bit dot) against its row of the 9-row call (the tiled kernel, which gives each output that dot's
 * bits): the same bits, so the device's batching cannot change a pair's result. */
static void hook_threads_and_rows_give_the_same_bits(void) {
    const char *types[2] = {"f32", "q8_0"};
    for (int t = 0; t < 2; t++) {
        char path[128];
        clover_model *m = synth(types[t], path, sizeof path);
        if (!m) return;
        const model_hparams *hp = &m->hp;
        const size_t H = hp->n_embd, E = hp->n_expert, k = hp->n_expert_used;
        expert_host h1, h2;
        clover_error err = {0};
        int rc1 = expert_host_cpu_open(m, 1, MAX_ROWS, &h1, &err);
        CHECK_MSG(rc1 == 0, "open 1 thread: %s", err.message);
        int rc2 = expert_host_cpu_open(m, 2, MAX_ROWS, &h2, &err);
        CHECK_MSG(rc2 == 0, "open 2 threads: %s", err.message);
        rng_state r;
        rng_seed(&r, 41);
        float x[MAX_ROWS * 64], a[MAX_ROWS * 64], b[MAX_ROWS * 64], wts[MAX_ROWS * 8];
        int32_t ids[MAX_ROWS * 8];
        for (uint32_t l = 0; !rc1 && !rc2 && l < hp->n_layer; l++) {
            fill(x, MAX_ROWS * H, &r);
            moe_test_routing(ids, wts, MAX_ROWS, E, k, EMPTY_ROW, &r);
            CHECK(h1.compute(h1.ctx, l, a, x, MAX_ROWS, ids, wts, &err) == 0);
            CHECK(h2.compute(h2.ctx, l, b, x, MAX_ROWS, ids, wts, &err) == 0);
            CHECK_MSG(memcmp(a, b, MAX_ROWS * H * 4) == 0, "%s layer %u: 1 and 2 threads differ", types[t], l);
            if (t == 0) continue;
            for (size_t i = 0; i < MAX_ROWS; i++) {
                CHECK(h2.compute(h2.ctx, l, b, x + i * H, 1, ids + i * k, wts + i * k, &err) == 0);
                CHECK_MSG(memcmp(a + i * H, b, H * 4) == 0, "q8_0 layer %u: row %zu alone differs", l, i);
            }
        }
        if (!rc1) h1.close(h1.ctx);
        if (!rc2) h2.close(h2.ctx);
        clover_model_free(m);
        unlink(path);
    }
}

/* A refused call or open: a status, and a message that names the problem. */
static void check_refused(int rc, const clover_error *err, const char *needle, const char *what) {
    CHECK_MSG(rc != 0, "%s: accepted", what);
    CHECK_MSG(err->message[0] != '\0', "%s: no message", what);
    CHECK_MSG(strstr(err->message, needle) != NULL, "%s: \"%s\" does not mention %s", what, err->message, needle);
}

static void hook_refuses_bad_calls(void) {
    char path[128];
    clover_model *m = synth("f32", path, sizeof path);
    if (!m) return;
    const model_hparams *hp = &m->hp;
    const size_t H = hp->n_embd, k = hp->n_expert_used;
    expert_host h;
    clover_error err = {0};
    int rc = expert_host_cpu_open(m, 1, MAX_ROWS, &h, &err);
    CHECK_MSG(rc == 0, "open: %s", err.message);
    if (rc) goto done;
    float x[(MAX_ROWS + 1) * 64] = {0}, out[(MAX_ROWS + 1) * 64], wts[(MAX_ROWS + 1) * 8] = {0};
    int32_t ids[(MAX_ROWS + 1) * 8];
    for (size_t i = 0; i < (MAX_ROWS + 1) * k; i++) ids[i] = -1;
    CHECK(H <= 64 && k <= 8);
    err.message[0] = '\0';
    check_refused(h.compute(h.ctx, hp->n_layer, out, x, 1, ids, wts, &err), &err, "layer", "layer n_layer");
    err.message[0] = '\0';
    check_refused(h.compute(h.ctx, 0, out, x, MAX_ROWS + 1, ids, wts, &err), &err, "max_rows", "max_rows + 1 rows");
    ids[k + 1] = (int32_t)hp->n_expert; /* row 1, slot 1 */
    err.message[0] = '\0';
    check_refused(h.compute(h.ctx, 1, out, x, 2, ids, wts, &err), &err, "expert id", "id n_expert");
    CHECK_MSG(strstr(err.message, "row 1") && strstr(err.message, "slot 1"), "%s", err.message);
    ids[k + 1] = -2;
    err.message[0] = '\0';
    check_refused(h.compute(h.ctx, 1, out, x, 2, ids, wts, &err), &err, "expert id", "id -2");
    ids[k + 1] = -1; /* every pair masked: accepted, zeros */
    CHECK(h.compute(h.ctx, 1, out, x, 2, ids, wts, &err) == 0);
    for (size_t c = 0; c < 2 * H; c++) CHECK(out[c] == 0.0f);
    expert_host_cpu_counts c;
    CHECK(expert_host_cpu_get_counts(&h, &c));
    CHECK(c.calls == 1 && c.rows == 2 && c.pairs == 0 && c.experts == 0); /* the refused calls count nothing */
    h.close(h.ctx);
    const expert_host other = {0};
    CHECK(!expert_host_cpu_get_counts(&other, &c));

    expert_host z;
    err.message[0] = '\0';
    check_refused(expert_host_cpu_open(m, 1, 0, &z, &err), &err, "max_rows", "max_rows 0");
    CHECK(z.ctx == NULL && z.compute == NULL);
    err.message[0] = '\0';
    check_refused(expert_host_cpu_open(NULL, 1, MAX_ROWS, &z, &err), &err, "model", "no model");
    /* A loaded model always has routed experts (expert_count >= 1 at load), so the models without them are
     * made by hand: no experts in the hyper-parameters, then experts declared but no layer holding any. */
    model_layer bare[2];
    memset(bare, 0, sizeof bare);
    clover_model fake;
    memset(&fake, 0, sizeof fake);
    fake.hp = *hp;
    fake.hp.n_layer = 2, fake.hp.n_expert = 0, fake.hp.n_expert_used = 0;
    fake.layers = bare;
    err.message[0] = '\0';
    check_refused(expert_host_cpu_open(&fake, 1, MAX_ROWS, &z, &err), &err, "routed experts", "0 experts");
    fake.hp.n_expert = hp->n_expert, fake.hp.n_expert_used = hp->n_expert_used;
    err.message[0] = '\0';
    check_refused(expert_host_cpu_open(&fake, 1, MAX_ROWS, &z, &err), &err, "routed experts", "no expert tensors");
    /* a layer with a broken expert tensor: refused naming the layer and the tensor */
    bare[1] = m->layers[1];
    bare[1].moe.down_exps.data = NULL;
    fake.layers = bare;
    err.message[0] = '\0';
    check_refused(expert_host_cpu_open(&fake, 1, MAX_ROWS, &z, &err), &err, "ffn_down_exps", "missing down");
    CHECK_MSG(strstr(err.message, "layer 1") != NULL, "%s", err.message);
    /* layer 0 without experts, layer 1 whole: opened, and a call for layer 0 refused */
    bare[1] = m->layers[1];
    err.message[0] = '\0';
    rc = expert_host_cpu_open(&fake, 1, MAX_ROWS, &z, &err);
    CHECK_MSG(rc == 0, "one MoE layer of two: %s", err.message);
    if (!rc) {
        check_refused(z.compute(z.ctx, 0, out, x, 1, ids, wts, &err), &err, "layer 0", "a layer without experts");
        CHECK(z.compute(z.ctx, 1, out, x, 1, ids, wts, &err) == 0);
        z.close(z.ctx);
    }
done:
    clover_model_free(m);
    unlink(path);
}

int main(void) {
    RUN(hook_matches_hand_loop_every_layer);
    RUN(hook_threads_and_rows_give_the_same_bits);
    RUN(hook_refuses_bad_calls);
    return TEST_EXIT();
}
