/*
 * test_cuda_ops.c: every kernel of src/cuda/cuda_ops.h against the CPU's
 * scalar oracle, on seeded random inputs (never zeros), odd shapes, outputs
 * poisoned with NaN, with the normalised error bound of each stated beside
 * it. Without a CUDA device: "SKIP: no CUDA device (...)" and exit 77.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/rng.h"
#include "cpu/act.h"
#include "cpu/backend_cpu_internal.h"
#include "cpu/moe.h"
#include "cpu/norm.h"
#include "cuda/cuda_ops.h"
#include "cuda_test.h"
#include "backend/sampler.h"
#include "quant/quant.h"


static void sync_or_fail(void) {
    char why[CUDA_WHY];
    CHECK_MSG(cuda_stream_sync(NULL, why) == 0, "%s", why);
}

/* Embedding rows of each file type: dequantisation is exact arithmetic
 * (a copy, a half/bf16 widening, or one f32 product d * q), so the bound is 0. */
static void test_embed(void) {
    const size_t V = 301, H = 992, n = 7; /* H: 31 Q8_0 blocks */
    const uint32_t types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0};
    float *src = malloc(V * H * sizeof *src);
    cuda_test_fill(src, V * H, 11, 1.0f);
    int32_t ids[7] = {0, 300, 17, 17, 150, 299, 1};
    for (size_t t = 0; t < 4; t++) {
        uint32_t ty = types[t];
        size_t rb = quant_row_bytes(ty, H);
        char *tab = malloc(V * rb);
        for (size_t v = 0; v < V; v++) quant_quantize_row(ty, src + v * H, tab + v * rb, H);
        float *ref = malloc(n * H * sizeof *ref), *out = malloc(n * H * sizeof *out);
        for (size_t r = 0; r < n; r++) quant_dequantize_row_scalar(ty, tab + (size_t)ids[r] * rb, ref + r * H, H);
        void *dt = cuda_test_upload(tab, V * rb);
        int32_t *di = cuda_test_upload(ids, sizeof ids);
        float *dout = cuda_test_poisoned(n * H);
        CHECK(cuda_embed_type_ok(ty));
        CHECK(cuda_embed_rows(dout, dt, ty, di, n, H, NULL) == 0);
        sync_or_fail();
        cuda_test_download(out, dout, n * H * sizeof *out);
        CHECK_NERR(out, ref, n * H, 0.0);
        cuda_free(dt), cuda_free(di), cuda_free(dout);
        free(tab), free(ref), free(out);
    }
    CHECK(!cuda_embed_type_ok(QUANT_Q4_K));
    free(src);
}

/* RMS norm: the only difference is the order of the float32 sum of squares
 * (a 256-thread tree against a left-to-right loop). Its relative error is at
 * most ~n u for either order (u = 2^-24) and ~sqrt(n) u typically; 1/sqrt
 * halves it. n = 1027: a bound of 1e-5 sits between the typical 2e-6 and
 * the worst-case 6e-5, and the elementwise steps are identical. */
static void norm_case(size_t rows, size_t n) {
    float *x = malloc(rows * n * 4), *w = malloc(n * 4), *ref = malloc(rows * n * 4), *out = malloc(rows * n * 4);
    cuda_test_fill(x, rows * n, 21, 3.0f);
    cuda_test_fill(w, n, 22, 1.0f);
    cpu_rms_norm_scalar(ref, x, w, rows, n, 1e-6f);
    float *dx = cuda_test_upload(x, rows * n * 4), *dw = cuda_test_upload(w, n * 4), *dy = cuda_test_poisoned(rows * n);
    CHECK(cuda_rms_norm(dy, dx, dw, rows, n, 1e-6f, NULL) == 0);
    sync_or_fail();
    cuda_test_download(out, dy, rows * n * 4);
    CHECK_NERR(out, ref, rows * n, 1e-5);
    /* in place (y == x), as the header allows */
    CHECK(cuda_rms_norm(dx, dx, dw, rows, n, 1e-6f, NULL) == 0);
    sync_or_fail();
    cuda_test_download(out, dx, rows * n * 4);
    CHECK_NERR(out, ref, rows * n, 1e-5);
    cuda_free(dx), cuda_free(dw), cuda_free(dy);
    /* the fused residual add + norm: h + y exactly (bound 0), then the norm's bound */
    float *y = malloc(rows * n * 4), *href = malloc(rows * n * 4);
    cuda_test_fill(x, rows * n, 23, 3.0f);
    cuda_test_fill(y, rows * n, 24, 1.0f);
    for (size_t i = 0; i < rows * n; i++) href[i] = x[i] + y[i];
    cpu_rms_norm_scalar(ref, href, w, rows, n, 1e-6f);
    float *dh = cuda_test_upload(x, rows * n * 4), *dyy = cuda_test_upload(y, rows * n * 4);
    float *dxo = cuda_test_poisoned(rows * n);
    dw = cuda_test_upload(w, n * 4);
    CHECK(cuda_add_rms_norm(dxo, dh, dyy, dw, rows, n, 1e-6f, NULL) == 0);
    sync_or_fail();
    cuda_test_download(out, dh, rows * n * 4);
    CHECK_NERR(out, href, rows * n, 0.0);
    cuda_test_download(out, dxo, rows * n * 4);
    CHECK_NERR(out, ref, rows * n, 1e-5);
    cuda_free(dh), cuda_free(dyy), cuda_free(dxo), cuda_free(dw);
    free(y), free(href);
    free(x), free(w), free(ref), free(out);
}

/* n = 1027 and 4100: the general kernel; 516, 2048 (the 35B's hidden size)
 * and 4096: the float4 register kernel at each of its widths (516: threads
 * past the row's end). The bound grows as sqrt(n) typically: 1e-5 still sits
 * well above the typical ~3e-6 at n = 4100. */
static void test_rms_norm(void) {
    const size_t ns[] = {1027, 516, 2048, 4096, 4100};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) norm_case(5, ns[i]);
    norm_case(1, 2048); /* a decode row */
}

/* Residual add: one IEEE addition per element, bound 0. SwiGLU: the GPU's
 * expf is within 2 ulp of glibc's, then one division and one product
 * (correctly rounded): a few ulp per element, bound 1e-6. */
static void test_add_swiglu(void) {
    const size_t n = 100003;
    float *a = malloc(n * 4), *b = malloc(n * 4), *ref = malloc(n * 4), *out = malloc(n * 4);
    cuda_test_fill(a, n, 31, 2.0f);
    cuda_test_fill(b, n, 32, 2.0f);
    for (size_t i = 0; i < n; i++) ref[i] = a[i] + b[i];
    float *da = cuda_test_upload(a, n * 4), *db = cuda_test_upload(b, n * 4);
    CHECK(cuda_add(da, db, n, NULL) == 0);
    sync_or_fail();
    cuda_test_download(out, da, n * 4);
    CHECK_NERR(out, ref, n, 0.0);
    cpu_swiglu_scalar(ref, a, b, n);
    cuda_free(da);
    da = cuda_test_upload(a, n * 4);
    float *dh = cuda_test_poisoned(n);
    CHECK(cuda_swiglu(dh, da, db, n, NULL) == 0);
    sync_or_fail();
    cuda_test_download(out, dh, n * 4);
    CHECK_NERR(out, ref, n, 1e-6);
    cuda_free(da), cuda_free(db), cuda_free(dh);
    free(a), free(b), free(ref), free(out);
}

/* One routing case against cpu_moe_route (allowed may be NULL): the ids must
 * be the CPU's exactly (random logits, so the probability gaps dwarf the
 * few-ulp differences of expf and the summation order; ties are exact
 * equalities of equal logits, so both take the lower id); the weights agree
 * to a few ulp (bound 1e-6), NaN exactly where the CPU's are. A row with
 * m < k allowed experts: the CPU gives m, the device pads with the lowest ids
 * outside the set at weight 0 (cuda_ops.h). */
static void route_case(const float *lg, const uint8_t *allowed, size_t n, size_t E, size_t k, const char *what) {
    float *probs = malloc(E * 4), *rw = malloc(n * k * 4), *ow = malloc(n * k * 4);
    int32_t *ri = malloc(n * k * 4), *oi = malloc(n * k * 4);
    for (size_t r = 0; r < n; r++) {
        size_t m = cpu_moe_route(ri + r * k, rw + r * k, lg + r * E, E, k, allowed, probs);
        CHECK(m == k || allowed); /* every shape here has k <= E */
        for (size_t j = m, e = 0; allowed && j < k && e < E; e++) /* the padding cuda_ops.h documents */
            if (!allowed[e]) ri[r * k + j] = (int32_t)e, rw[r * k + j] = 0.0f, j++;
    }
    float *dl = cuda_test_upload(lg, n * E * 4), *dw = cuda_test_poisoned(n * k);
    int32_t *di = (int32_t *)cuda_test_poisoned(n * k);
    uint8_t *da = allowed ? cuda_test_upload(allowed, E) : NULL;
    CHECK(allowed ? cuda_moe_route_allowed(di, dw, dl, da, n, E, k, NULL) == 0 : cuda_moe_route(di, dw, dl, n, E, k, NULL) == 0);
    sync_or_fail();
    cuda_test_download(oi, di, n * k * 4);
    cuda_test_download(ow, dw, n * k * 4);
    for (size_t i = 0; i < n * k; i++) {
        CHECK_MSG(oi[i] == ri[i], "%s E %zu k %zu row %zu slot %zu: device id %d, CPU %d", what, E, k, i / k, i % k,
                  oi[i], ri[i]);
        CHECK_MSG(isnan(ow[i]) == isnan(rw[i]), "%s row %zu slot %zu: weight %g, CPU %g", what, i / k, i % k,
                  (double)ow[i], (double)rw[i]);
        if (isnan(ow[i]) && isnan(rw[i])) ow[i] = rw[i] = 0.125f;
    }
    CHECK_NERR(ow, rw, n * k, 1e-6);
    cuda_free(dl), cuda_free(dw), cuda_free(di);
    if (da) cuda_free(da);
    free(probs), free(rw), free(ow), free(ri), free(oi);
}

/* E = 5, 33, 37, 256 (the 35B's), 1000 and 1024: every register width of the
 * kernel, rows past a block's 4; ties, -inf, NaN and inf rows; the coreset form. */
static void test_route(void) {
    const size_t shapes[6][3] = {{3, 5, 5}, {6, 33, 4}, {9, 37, 5}, {8, 256, 8}, {5, 1000, 16}, {2, 1024, 8}};
    for (size_t s = 0; s < 6; s++) {
        const size_t n = shapes[s][0], E = shapes[s][1], k = shapes[s][2];
        float *lg = malloc(n * E * 4);
        cuda_test_fill(lg, n * E, 41 + s, 2.0f);
        route_case(lg, NULL, n, E, k, "random");
        /* ties: logits on a grid of 0.5, so the top-k crosses runs of equal probabilities */
        for (size_t i = 0; i < n * E; i++) lg[i] = roundf(lg[i]) * 0.5f;
        route_case(lg, NULL, n, E, k, "ties");
        free(lg);
    }
    /* special rows, E = 256, k = 8: all equal (ids 0..7); a NaN, a +inf, all -inf (every probability NaN on
     * the CPU: its first k ids, NaN weights); 3 finite logits (3 picks, then 0-probability ties: lowest ids) */
    const size_t n = 6, E = 256, k = 8;
    float *lg = malloc(n * E * 4);
    cuda_test_fill(lg, n * E, 49, 2.0f);
    for (size_t e = 0; e < E; e++) lg[0 * E + e] = 1.5f;
    lg[1 * E + 77] = NAN;
    lg[2 * E + 200] = INFINITY;
    for (size_t e = 0; e < E; e++) lg[3 * E + e] = -INFINITY;
    for (size_t e = 0; e < E; e++) lg[4 * E + e] = (e == 9 || e == 100 || e == 255) ? (float)e * 0.01f : -INFINITY;
    route_case(lg, NULL, n, E, k, "special");
    /* the coreset form: 40 allowed (k of them or more per row), then 5 allowed (padding), on the same rows */
    uint8_t *allowed = malloc(E);
    for (size_t e = 0; e < E; e++) allowed[e] = (uint8_t)(e % 7 == 3 || e == 0);
    route_case(lg, allowed, n, E, k, "allowed");
    for (size_t e = 0; e < E; e++) allowed[e] = (uint8_t)(e == 1 || e == 2 || e == 100 || e == 254 || e == 255);
    route_case(lg, allowed, n, E, k, "allowed, padded");
    free(allowed), free(lg);
}

/* Gated shared expert: out + sigmoid(g) * sh, sigmoid's expf within 2 ulp: bound 1e-6. */
static void test_shexp(void) {
    const size_t n = 3, H = 515;
    float *o = malloc(n * H * 4), *sh = malloc(n * H * 4), *g = malloc(n * 4), *ref = malloc(n * H * 4),
          *out = malloc(n * H * 4);
    cuda_test_fill(o, n * H, 51, 1.0f);
    cuda_test_fill(sh, n * H, 52, 1.0f);
    cuda_test_fill(g, n, 53, 2.0f);
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < H; c++) ref[r * H + c] = o[r * H + c] + cpu_sigmoid(g[r]) * sh[r * H + c];
    float *dout = cuda_test_upload(o, n * H * 4), *dsh = cuda_test_upload(sh, n * H * 4), *dg = cuda_test_upload(g, n * 4);
    CHECK(cuda_shexp_add(dout, dsh, dg, n, H, NULL) == 0);
    sync_or_fail();
    cuda_test_download(out, dout, n * H * 4);
    CHECK_NERR(out, ref, n * H, 1e-6);
    cuda_free(dout), cuda_free(dsh), cuda_free(dg);
    free(o), free(sh), free(g), free(ref), free(out);
}

/* NLL: float64 max and log-sum-exp in both, only the sum's order differs
 * (relative 1e-15), then one rounding to float32: bound 1e-6 relative. */
static void test_nll(void) {
    const size_t n = 4, V = 12345;
    float *lg = malloc(n * V * 4), ref[4], out[4];
    int32_t tg[4] = {0, 12344, 777, 4242};
    cuda_test_fill(lg, n * V, 61, 4.0f);
    for (size_t r = 0; r < n; r++) ref[r] = cpu_head_nll(lg + r * V, V, tg[r]);
    float *dl = cuda_test_upload(lg, n * V * 4), *dn = cuda_test_poisoned(n);
    int32_t *dt = cuda_test_upload(tg, sizeof tg);
    CHECK(cuda_nll(dn, dl, dt, n, V, NULL) == 0);
    sync_or_fail();
    cuda_test_download(out, dn, sizeof out);
    CHECK_NERR(out, ref, n, 1e-6);
    cuda_free(dl), cuda_free(dn), cuda_free(dt);
    free(lg);
}

/* The pick: the same ids as sampler_pick with the same draws, greedy and
 * sampled (temperature, top-k, top-p, combined), confidences to 1e-6
 * relative (float64 sums in another order, then float32). The device sorts
 * a head of at most CUDA_PICK_MAX_HEAD candidates: rows whose head is wider
 * (a flat row, or temperature / top-p sampling over logits spread less than
 * ln(1e12) ~ 28 around the top) give -2 and the host picks them; that is
 * checked too. */
static void pick_case(const float *lg, size_t n, size_t V, const cuda_pick_params *cp, uint64_t seed, int expect_host,
                      sampler_scratch *sc) {
    sampler_params sp = {cp->temperature, cp->top_k, cp->top_p};
    rng_state rng;
    rng_seed(&rng, seed);
    double u[8];
    int32_t ref_id[8], out_id[8];
    float ref_conf[8], out_conf[8];
    clover_error err = {0};
    for (size_t r = 0; r < n; r++) u[r] = sampler_draw(&sp, &rng);
    for (size_t r = 0; r < n; r++) CHECK(sampler_pick(&sp, lg + r * V, V, u[r], sc, &ref_id[r], &ref_conf[r], &err) == 0);
    float *dl = cuda_test_upload(lg, n * V * 4);
    double *du = cuda_test_upload(u, n * sizeof(double));
    int32_t *di = (int32_t *)cuda_test_poisoned(n);
    float *dc = cuda_test_poisoned(n);
    CHECK(cuda_pick(di, dc, dl, du, n, V, cp, NULL) == 0);
    sync_or_fail();
    cuda_test_download(out_id, di, n * 4);
    cuda_test_download(out_conf, dc, n * 4);
    for (size_t r = 0; r < n; r++) {
        if (expect_host)
            CHECK_MSG(out_id[r] == -2, "T %g k %d p %g row %zu: device %d, expected -2 (host)", cp->temperature,
                      cp->top_k, cp->top_p, r, out_id[r]);
        else
            CHECK_MSG(out_id[r] == ref_id[r], "T %g k %d p %g row %zu: device %d, CPU %d", cp->temperature, cp->top_k,
                      cp->top_p, r, out_id[r], ref_id[r]);
    }
    /* a row holding a NaN logit has a NaN confidence on both (the T = 1 sum runs over every entry) */
    for (size_t r = 0; r < n; r++) {
        CHECK_MSG(isnan(out_conf[r]) == isnan(ref_conf[r]) || expect_host, "row %zu: confidence %g, CPU %g", r,
                  (double)out_conf[r], (double)ref_conf[r]);
        if (isnan(out_conf[r]) && isnan(ref_conf[r])) out_conf[r] = ref_conf[r] = 0.5f;
    }
    if (!expect_host) CHECK_NERR(out_conf, ref_conf, n, 1e-6);
    cuda_free(dl), cuda_free(du), cuda_free(di), cuda_free(dc);
}

static void test_pick(void) {
    const size_t n = 6, V = 20011;
    float *lg3 = malloc(n * V * 4), *lg16 = malloc(n * V * 4);
    cuda_test_fill(lg3, n * V, 71, 3.0f);
    cuda_test_fill(lg16, n * V, 72, 16.0f);
    lg3[2 * V + 5] = -INFINITY, lg16[2 * V + 5] = -INFINITY; /* a forbidden id: never a candidate */
    lg3[3 * V + 100] = NAN, lg16[3 * V + 100] = NAN;         /* NaN is ignored, as the CPU's compares do */
    sampler_scratch sc;
    clover_error err = {0};
    CHECK(sampler_scratch_init(&sc, V, &err) == 0);
    const cuda_pick_params greedy = {0.0f, 0, 1.0f}, k40 = {0.7f, 40, 1.0f}, k50p = {0.9f, 50, 0.8f},
                           k3000 = {2.0f, 3000, 1.0f}, t1 = {1.0f, 0, 1.0f}, t13p = {1.3f, 0, 0.9f};
    pick_case(lg3, n, V, &greedy, 1, 0, &sc);
    pick_case(lg3, n, V, &k40, 2, 0, &sc);
    pick_case(lg3, n, V, &k50p, 3, 0, &sc);
    pick_case(lg3, n, V, &k3000, 4, 0, &sc);
    pick_case(lg16, n, V, &t1, 5, 0, &sc);   /* spread logits: the head fits */
    pick_case(lg16, n, V, &t13p, 6, 0, &sc);
    pick_case(lg16, n, V, &greedy, 7, 0, &sc);
    pick_case(lg3, n, V, &t1, 8, 1, &sc);    /* every candidate within 28 of the top: the host's */
    /* a flat row: greedy takes the first maximum, id 0 */
    float *flat = malloc(V * 4);
    for (size_t i = 0; i < V; i++) flat[i] = 0.25f;
    pick_case(flat, 1, V, &greedy, 9, 0, &sc);
    pick_case(flat, 1, V, &t1, 10, 1, &sc);
    free(flat);
    sampler_scratch_free(&sc);
    free(lg3), free(lg16);
}

/* The routed experts' sum: ascending expert id (equal ids in slot order, a
 * stable sort), one rounding per product and per sum, exactly as the CPU's
 * loop: bound 0. */
static void test_combine(void) {
    const size_t n = 5, k = 8, H = 300;
    int32_t idx[40];
    float wts[40];
    rng_state r;
    rng_seed(&r, 81);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k; j++) {
            idx[i * k + j] = (int32_t)((i * 31 + (k - j) * 7) % 64);
            wts[i * k + j] = rng_uniform(&r);
        }
    idx[1 * k + 3] = idx[1 * k + 5]; /* a repeated id: the stable order (slot 3 first) decides the rounding */
    idx[2 * k + 0] = idx[2 * k + 7];
    float *ye = malloc(n * k * H * 4), *ref = malloc(n * H * 4), *out = malloc(n * H * 4);
    cuda_test_fill(ye, n * k * H, 82, 1.0f);
    for (size_t i = 0; i < n; i++) {
        int32_t ord[8];
        for (size_t j = 0; j < k; j++) ord[j] = (int32_t)j;
        for (size_t a = 1; a < k; a++)
            for (size_t b = a; b > 0 && idx[i * k + ord[b - 1]] > idx[i * k + ord[b]]; b--) {
                int32_t t = ord[b];
                ord[b] = ord[b - 1], ord[b - 1] = t;
            }
        for (size_t c = 0; c < H; c++) {
            float o = 0.0f;
            for (size_t j = 0; j < k; j++) {
                volatile float prod = ye[(i * k + (size_t)ord[j]) * H + c] * wts[i * k + (size_t)ord[j]];
                o += prod;
            }
            ref[i * H + c] = o;
        }
    }
    float *dye = cuda_test_upload(ye, n * k * H * 4), *dw = cuda_test_upload(wts, sizeof wts), *dout = cuda_test_poisoned(n * H);
    int32_t *di = cuda_test_upload(idx, sizeof idx);
    CHECK(cuda_moe_combine(dout, dye, di, dw, n, k, H, NULL) == 0);
    sync_or_fail();
    cuda_test_download(out, dout, n * H * 4);
    CHECK_NERR(out, ref, n * H, 0.0);
    /* with the gated shared expert: against the CPU's o + sigmoid(g) * sh (test_shexp's bound, 1e-6: expf), and
     * bit for bit cuda_moe_combine then cuda_shexp_add */
    float *sh = malloc(n * H * 4), *g = malloc(n * 4), *ref2 = malloc(n * H * 4), *two = malloc(n * H * 4);
    cuda_test_fill(sh, n * H, 83, 1.0f);
    cuda_test_fill(g, n, 84, 2.0f);
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < H; c++) ref2[i * H + c] = ref[i * H + c] + cpu_sigmoid(g[i]) * sh[i * H + c];
    float *dsh = cuda_test_upload(sh, n * H * 4), *dg = cuda_test_upload(g, n * 4), *dout2 = cuda_test_poisoned(n * H);
    CHECK(cuda_moe_combine_shexp(dout2, dye, di, dw, n, k, H, dsh, dg, NULL) == 0);
    CHECK(cuda_shexp_add(dout, dsh, dg, n, H, NULL) == 0);
    sync_or_fail();
    cuda_test_download(out, dout2, n * H * 4);
    cuda_test_download(two, dout, n * H * 4);
    CHECK_NERR(out, ref2, n * H, 1e-6);
    CHECK_MSG(memcmp(out, two, n * H * 4) == 0, "cuda_moe_combine_shexp differs from combine + shexp_add");
    cuda_free(dsh), cuda_free(dg), cuda_free(dout2);
    free(sh), free(g), free(ref2), free(two);
    cuda_free(dye), cuda_free(dw), cuda_free(dout), cuda_free(di);
    free(ye), free(ref), free(out);
}

int main(void) {
    cuda_test_require_device();
    RUN(test_embed);
    RUN(test_rms_norm);
    RUN(test_add_swiglu);
    RUN(test_route);
    RUN(test_shexp);
    RUN(test_nll);
    RUN(test_pick);
    RUN(test_combine);
    return TEST_EXIT();
}
