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
#include "cuda/cuda_device.h"
#include "cuda/cuda_matmul.h"
#include "cuda/cuda_moe_router.h"
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

/* ---- the fused router (cuda_moe_router.h, moe_router.cu) ----
 * One launch for the router product, a second matrix's product (the shared expert's gate) and the routing. It
 * must write what the two launches it replaces write, bit for bit (up to 8 rows cuda_matmul_decode, or
 * cuda_matmul_decode_multi with the second matrix; past 8 cuda_matmul_exact_multi; then cuda_moe_route: the
 * logits, the second outputs, ids and weights), and both must
 * agree with the CPU: the logits within 1e-5 (normalised) of double dots (f32 sums of n_in <= 4096 products:
 * sqrt(n) 2^-24 typical, as test_cuda_matmul's decode bound), non-finite exactly where the CPU's are, and the
 * routing of those logits as cpu_moe_route's (route_case's rule: ids exact, weights within 1e-6, NaN where the
 * CPU's are). */
typedef struct router_bufs {
    float *w, *w2, *x;                 /* device inputs */
    float *y, *y2, *wts;               /* device outputs, poisoned */
    int32_t *idx;
    uint32_t *ctr;
} router_bufs;

typedef struct router_host {
    float *y, *y2, *wts;
    int32_t *idx;
} router_host;

static void router_host_get(router_host *h, const router_bufs *b, size_t n, size_t E, size_t n2, size_t k) {
    h->y = malloc(n * E * 4), h->y2 = malloc((n * n2 + 1) * 4), h->wts = malloc(n * k * 4);
    h->idx = malloc(n * k * 4);
    cuda_test_download(h->y, b->y, n * E * 4);
    if (n2) cuda_test_download(h->y2, b->y2, n * n2 * 4);
    cuda_test_download(h->wts, b->wts, n * k * 4);
    cuda_test_download(h->idx, b->idx, n * k * 4);
}

static void router_host_free(router_host *h) { free(h->y), free(h->y2), free(h->wts), free(h->idx); }

static void router_poison(router_bufs *b, size_t n, size_t E, size_t n2, size_t k) {
    char why[CUDA_WHY];
    CHECK_MSG(cuda_fill_nan(b->y, n * E, why) == 0 && cuda_fill_nan(b->wts, n * k, why) == 0 &&
                  cuda_fill_nan((float *)b->idx, n * k, why) == 0 && (!n2 || cuda_fill_nan(b->y2, n * n2, why) == 0),
              "%s", why);
}

static cuda_router_args router_args_of(const router_bufs *b, size_t n, size_t E, size_t n_in, size_t n2, size_t k) {
    cuda_router_args a = {.type = QUANT_F32, .w = b->w, .n_expert = E, .n_in = n_in, .w2 = n2 ? b->w2 : NULL,
                          .n_out2 = n2, .y2 = n2 ? b->y2 : NULL, .x = b->x, .n_rows = n, .logits = b->y,
                          .idx = b->idx, .wts = b->wts, .k = k, .counter = b->ctr};
    return a;
}

/* The two launches the fused one replaces, as backend_cuda_pass.c runs them (mm_multi: past 8 rows one exact launch). */
static void router_two_launches(const router_bufs *b, size_t n, size_t E, size_t n_in, size_t n2, size_t k, void *st) {
    char why[256] = "";
    if (n > CUDA_MATMUL_DECODE_MAX_ROWS) {
        const cuda_matmul_seg seg[2] = {{b->w, E, b->y}, {b->w2, n2, b->y2}};
        CHECK_MSG(cuda_matmul_exact_multi(QUANT_F32, seg, n2 ? 2 : 1, n_in, b->x, n, st, why, sizeof why) == 0, "%s",
                  why);
    } else if (n2) {
        const cuda_matmul_seg seg[2] = {{b->w, E, b->y}, {b->w2, n2, b->y2}};
        CHECK_MSG(cuda_matmul_decode_multi(QUANT_F32, seg, 2, n_in, b->x, n, NULL, st, why, sizeof why) == 0, "%s",
                  why);
    } else {
        CHECK_MSG(cuda_matmul_decode(QUANT_F32, b->w, E, n_in, b->x, n, b->y, NULL, st, why, sizeof why) == 0, "%s",
                  why);
    }
    CHECK(cuda_moe_route(b->idx, b->wts, b->y, n, E, k, st) == 0);
}

static void router_fused_call(const router_bufs *b, size_t n, size_t E, size_t n_in, size_t n2, size_t k,
                              int no_stage, void *st) {
    cuda_router_args a = router_args_of(b, n, E, n_in, n2, k);
    a.no_stage = no_stage;
    char why[256] = "";
    CHECK_MSG(cuda_moe_router_ok(&a), "E %zu n_in %zu rows %zu k %zu: not taken", E, n_in, n, k);
    CHECK_MSG(cuda_moe_router(&a, st, why, sizeof why) == 0, "%s", why);
}

static bool router_same(const router_host *a, const router_host *b, size_t n, size_t E, size_t n2, size_t k) {
    return memcmp(a->y, b->y, n * E * 4) == 0 && (!n2 || memcmp(a->y2, b->y2, n * n2 * 4) == 0) &&
           memcmp(a->idx, b->idx, n * k * 4) == 0 && memcmp(a->wts, b->wts, n * k * 4) == 0;
}

static uint32_t router_counter(const router_bufs *b) {
    uint32_t c = 0xdeadbeef;
    cuda_test_download(&c, b->ctr, 4);
    return c;
}

/* The CPU's side: double dots for the logits (and the second outputs), cpu_moe_route on the device's logits. */
static void router_oracle(const router_host *h, const float *w, const float *w2, const float *x, size_t n, size_t E,
                          size_t n_in, size_t n2, size_t k, const char *what) {
    const size_t no = n * (E + n2);
    float *ref = malloc(no * 4), *got = malloc(no * 4);
    for (size_t r = 0; r < n; r++)
        for (size_t o = 0; o < E + n2; o++) {
            const float *wr = o < E ? w + o * n_in : w2 + (o - E) * n_in;
            double acc = 0.0;
            for (size_t i = 0; i < n_in; i++) acc += (double)wr[i] * (double)x[r * n_in + i];
            const size_t j = r * (E + n2) + o;
            ref[j] = (float)acc;
            got[j] = o < E ? h->y[r * E + o] : h->y2[r * n2 + (o - E)];
            if (!isfinite(ref[j]) || !isfinite(got[j])) { /* NaN and inf exactly where the CPU has them */
                CHECK_MSG(isnan(ref[j]) == isnan(got[j]) && isinf(ref[j]) == isinf(got[j]) &&
                              (!isinf(ref[j]) || (ref[j] > 0) == (got[j] > 0)),
                          "%s row %zu output %zu: device %g, CPU %g", what, r, o, (double)got[j], (double)ref[j]);
                ref[j] = got[j] = 0.25f;
            }
        }
    CHECK_NERR(got, ref, no, 1e-5);
    float *probs = malloc(E * 4), *rw = malloc(n * k * 4), *ow = malloc(n * k * 4);
    int32_t *ri = malloc(n * k * 4);
    for (size_t r = 0; r < n; r++) {
        const size_t m = cpu_moe_route(ri + r * k, rw + r * k, h->y + r * E, E, k, NULL, probs);
        CHECK(m == k);
    }
    for (size_t i = 0; i < n * k; i++) {
        ow[i] = h->wts[i];
        CHECK_MSG(h->idx[i] == ri[i], "%s row %zu slot %zu: device id %d, CPU %d", what, i / k, i % k, h->idx[i],
                  ri[i]);
        CHECK_MSG(isnan(ow[i]) == isnan(rw[i]), "%s row %zu slot %zu: weight %g, CPU %g", what, i / k, i % k,
                  (double)ow[i], (double)rw[i]);
        if (isnan(ow[i]) && isnan(rw[i])) ow[i] = rw[i] = 0.125f;
    }
    CHECK_NERR(ow, rw, n * k, 1e-6);
    free(ow);
    free(probs), free(rw), free(ri), free(ref), free(got);
}

/* Inputs on the device: w [E][n_in], w2 [n2][n_in], x [CUDA_ROUTER_MAX_ROWS][n_in]; special 1: a NaN in x row 1 (that row's logits
 * all NaN: every probability NaN, ids 0..k-1), 2: +inf in weight row E/2 (every row's logit there +inf, every
 * probability NaN, or -inf, that expert's probability 0, by the sign of x[5]), 0: none. */
static void router_make(router_bufs *b, float **hw, float **hw2, float **hx, size_t E, size_t n_in, size_t n2,
                        int special, uint64_t seed) {
    const size_t R = CUDA_ROUTER_MAX_ROWS;
    *hw = malloc(E * n_in * 4), *hw2 = malloc((n2 ? n2 : 1) * n_in * 4), *hx = malloc(R * n_in * 4);
    cuda_test_fill(*hw, E * n_in, seed, 1.0f / sqrtf((float)n_in) * 4.0f);
    cuda_test_fill(*hw2, (n2 ? n2 : 1) * n_in, seed + 1, 1.0f / sqrtf((float)n_in));
    cuda_test_fill(*hx, R * n_in, seed + 2, 1.0f);
    if (special == 1) (*hx)[1 * n_in + 3] = NAN;
    if (special == 2) (*hw)[(E / 2) * n_in + 5] = INFINITY;
    b->w = cuda_test_upload(*hw, E * n_in * 4);
    b->w2 = cuda_test_upload(*hw2, (n2 ? n2 : 1) * n_in * 4);
    b->x = cuda_test_upload(*hx, R * n_in * 4);
    b->y = cuda_test_poisoned(R * E), b->y2 = cuda_test_poisoned(R * (n2 ? n2 : 1));
    b->wts = cuda_test_poisoned(R * CUDA_ROUTE_MAX_K);
    b->idx = (int32_t *)cuda_test_poisoned(R * CUDA_ROUTE_MAX_K);
    b->ctr = cuda_test_upload((const uint32_t[1]){0}, 4);
}

static void router_bufs_free(router_bufs *b) {
    cuda_free(b->w), cuda_free(b->w2), cuda_free(b->x), cuda_free(b->y), cuda_free(b->y2), cuda_free(b->wts);
    cuda_free(b->idx), cuda_free(b->ctr);
}

/* The row counts the shapes below run, up to their rows_max: every count of the decode form (1..8), then the rows
 * form's edges (one row group of 4 past 8, a block's 8 routed rows once and twice, a grid just past one of 4 rows). */
static const size_t router_rows_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 31, 32, 33, 63, 64};
enum { ROUTER_NROWS = sizeof router_rows_list / sizeof router_rows_list[0] };

/* One shape at the rows of router_rows_list up to rows_max, k = 8 (or E when smaller) and 1: the fused launch
 * against the two launches bit for bit, staged and unstaged, PDL on and off, on a non-blocking stream; the CPU
 * oracle; the counter back to 0. */
static void router_shape(size_t E, size_t n_in, size_t n2, int special, size_t rows_max, uint64_t seed) {
    router_bufs b;
    float *hw, *hw2, *hx;
    router_make(&b, &hw, &hw2, &hx, E, n_in, n2, special, seed);
    void *st = NULL;
    char why[CUDA_WHY];
    CHECK_MSG(cuda_stream_create(&st, why) == 0, "%s", why);
    const size_t ks[2] = {E < 8 ? E : 8, 1};
    for (size_t ni = 0; ni < ROUTER_NROWS && router_rows_list[ni] <= rows_max; ni++)
        for (int ki = 0; ki < 2; ki++) {
            const size_t n = router_rows_list[ni];
            const size_t k = ks[ki];
            char what[96];
            snprintf(what, sizeof what, "fused router E %zu n_in %zu n2 %zu rows %zu k %zu special %d", E, n_in, n2,
                     n, k, special);
            router_poison(&b, n, E, n2, k);
            router_two_launches(&b, n, E, n_in, n2, k, st);
            sync_or_fail();
            CHECK_MSG(cuda_stream_sync(st, why) == 0, "%s", why);
            router_host two;
            router_host_get(&two, &b, n, E, n2, k);
            for (int form = 0; form < 3; form++) { /* staged, unstaged, staged with PDL off */
                cuda_pdl_set(form != 2);
                router_poison(&b, n, E, n2, k);
                router_fused_call(&b, n, E, n_in, n2, k, form == 1, st);
                CHECK_MSG(cuda_stream_sync(st, why) == 0, "%s", why);
                router_host one;
                router_host_get(&one, &b, n, E, n2, k);
                CHECK_MSG(router_same(&one, &two, n, E, n2, k), "%s form %d: differs from the two launches", what,
                          form);
                CHECK_MSG(router_counter(&b) == 0, "%s form %d: the counter was left at %u", what, form,
                          router_counter(&b));
                if (form == 0) router_oracle(&one, hw, hw2, hx, n, E, n_in, n2, k, what);
                router_host_free(&one);
            }
            cuda_pdl_set(1);
            router_host_free(&two);
        }
    cuda_stream_destroy(st);
    router_bufs_free(&b);
    free(hw), free(hw2), free(hx);
}

/* The 35B-A3B's router (256 x 2048 and the 1-output shared expert gate), odd expert counts (200: 7 lanes' worth,
 * 33: two register widths' boundary) and widths (1000: a partial last 256-value step; 264), 8192 wide (a block's
 * staged rows past 48 KB: the opt-in), 16384 wide (past 96 KB: L2 prefetch instead); NaN and inf rows; past 8 rows
 * (the rows form, k_router_rows) to 64 on the 35B shape, 33 at 200 x 1000 with an inf weight row, 17 with a NaN
 * row and 9000 wide (the exact product's second 2048-value slice). */
static void test_router_fused(void) {
    router_shape(256, 2048, 1, 0, 64, 71);
    router_shape(200, 1000, 0, 0, 8, 72);
    router_shape(33, 264, 1, 0, 8, 73);
    router_shape(64, 8192, 0, 0, 3, 74);
    router_shape(16, 16384, 1, 0, 2, 78);
    router_shape(256, 2048, 1, 1, 8, 75);
    router_shape(200, 1000, 0, 2, 33, 76);
    router_shape(33, 264, 1, 1, 17, 79);
    router_shape(16, 9000, 1, 0, 12, 80);
    /* outside the fused form: refused without a launch (the caller keeps the two launches) */
    router_bufs b;
    float *hw, *hw2, *hx;
    router_make(&b, &hw, &hw2, &hx, 33, 264, 1, 0, 77);
    cuda_router_args a = router_args_of(&b, 3, 33, 264, 1, 4);
    char why[256] = "";
    CHECK(cuda_moe_router_ok(&a));
    a.k = 0;
    CHECK(!cuda_moe_router_ok(&a) && cuda_moe_router(&a, NULL, why, sizeof why) == -1 && why[0]);
    a.k = 4, a.n_rows = 9; /* past 8 rows: the rows form */
    CHECK(cuda_moe_router_ok(&a));
    a.n_rows = CUDA_ROUTER_MAX_ROWS + 1;
    CHECK(!cuda_moe_router_ok(&a));
    a.n_rows = 9, a.n_expert = 300; /* past 8 rows, past 256 experts: the two launches (no launch here) */
    CHECK(!cuda_moe_router_ok(&a));
    a.n_rows = 8;
    CHECK(cuda_moe_router_ok(&a));
    a.n_expert = 33;
    a.n_rows = 3, a.x = b.x + 1; /* 4-byte aligned only */
    CHECK(!cuda_moe_router_ok(&a));
    a.x = b.x, a.n_in = 260; /* not a multiple of 8 */
    CHECK(!cuda_moe_router_ok(&a));
    a.n_in = 264, a.type = QUANT_F16;
    CHECK(!cuda_moe_router_ok(&a));
    router_bufs_free(&b);
    free(hw), free(hw2), free(hx);
}

/* Graphs: two fused launches on one counter (nb rows k kb, then nc rows k kc on other rows) captured once and
 * replayed twice, outputs poisoned before each replay: every replay's bits are the direct calls', the counter 0
 * after. */
static void router_graph_case(size_t nb, size_t kb, size_t nc, size_t kc) {
    const size_t E = 256, n_in = 2048, n2 = 1;
    router_bufs b, c;
    float *hw, *hw2, *hx, *cw, *cw2, *cx;
    router_make(&b, &hw, &hw2, &hx, E, n_in, n2, 0, 81);
    router_make(&c, &cw, &cw2, &cx, E, n_in, n2, 0, 82);
    cuda_free(c.ctr);
    c.ctr = b.ctr; /* one word for both launches, as a session's 40 layers share theirs */
    void *st = NULL, *exec = NULL;
    char why[CUDA_WHY];
    CHECK_MSG(cuda_stream_create(&st, why) == 0, "%s", why);
    router_fused_call(&b, nb, E, n_in, n2, kb, 0, st);
    router_fused_call(&c, nc, E, n_in, n2, kc, 0, st);
    CHECK_MSG(cuda_stream_sync(st, why) == 0, "%s", why);
    router_host db, dc;
    router_host_get(&db, &b, nb, E, n2, kb);
    router_host_get(&dc, &c, nc, E, n2, kc);
    router_oracle(&db, hw, hw2, hx, nb, E, n_in, n2, kb, "graph, direct, first");
    router_oracle(&dc, cw, cw2, cx, nc, E, n_in, n2, kc, "graph, direct, second");
    CHECK_MSG(cuda_graph_begin(st, why) == 0, "%s", why);
    router_fused_call(&b, nb, E, n_in, n2, kb, 0, st);
    router_fused_call(&c, nc, E, n_in, n2, kc, 0, st);
    CHECK_MSG(cuda_graph_end(st, &exec, why) == 0, "%s", why);
    for (int rep = 0; rep < 2; rep++) {
        router_poison(&b, nb, E, n2, kb);
        router_poison(&c, nc, E, n2, kc);
        CHECK_MSG(cuda_graph_launch(exec, st, why) == 0 && cuda_stream_sync(st, why) == 0, "%s", why);
        router_host gb, gc;
        router_host_get(&gb, &b, nb, E, n2, kb);
        router_host_get(&gc, &c, nc, E, n2, kc);
        CHECK_MSG(router_same(&gb, &db, nb, E, n2, kb) && router_same(&gc, &dc, nc, E, n2, kc),
                  "graph (%zu, %zu rows) replay %d differs from the direct calls", nb, nc, rep);
        CHECK_MSG(router_counter(&b) == 0, "graph (%zu, %zu rows) replay %d: the counter was left at %u", nb, nc, rep,
                  router_counter(&b));
        router_host_free(&gb), router_host_free(&gc);
    }
    cuda_graph_destroy(exec);
    cuda_stream_destroy(st);
    router_host_free(&db), router_host_free(&dc);
    c.ctr = NULL;
    router_bufs_free(&b), router_bufs_free(&c);
    free(hw), free(hw2), free(hx), free(cw), free(cw2), free(cx);
}

/* The decode form's rows (8 then 3) and the rows form's (16 then 12: a 16-sequence step's, then a router launch of
 * fewer rows on the same word), and one of each on one word. */
static void test_router_fused_graph(void) {
    router_graph_case(8, 8, 3, 1);
    router_graph_case(16, 8, 12, 1);
    router_graph_case(33, 8, 5, 4);
}

/* Small cases for compute-sanitizer (memcheck, racecheck, synccheck): 3 rows (the decode form) and 12 (the rows
 * form), 33 experts, 64 wide, k 4, a 1-output second matrix; against the two launches and the CPU. */
static void test_router_small(void) {
    const size_t E = 33, n_in = 64, n2 = 1, k = 4, ns[2] = {3, 12};
    router_bufs b;
    float *hw, *hw2, *hx;
    router_make(&b, &hw, &hw2, &hx, E, n_in, n2, 0, 91);
    for (int i = 0; i < 2; i++) {
        const size_t n = ns[i];
        router_two_launches(&b, n, E, n_in, n2, k, NULL);
        sync_or_fail();
        router_host two, one;
        router_host_get(&two, &b, n, E, n2, k);
        router_poison(&b, n, E, n2, k);
        router_fused_call(&b, n, E, n_in, n2, k, 0, NULL);
        sync_or_fail();
        router_host_get(&one, &b, n, E, n2, k);
        CHECK_MSG(router_same(&one, &two, n, E, n2, k), "small fused router, %zu rows: differs from the two launches",
                  n);
        CHECK(router_counter(&b) == 0);
        router_oracle(&one, hw, hw2, hx, n, E, n_in, n2, k, "small");
        router_host_free(&one), router_host_free(&two);
    }
    router_bufs_free(&b);
    free(hw), free(hw2), free(hx);
}

/* ---- the routing's fast form (CLOVER_CUDA_ROUTE_FAST, cuda_route_fast_set; moe_route.cuh's FAST) ----
 * It must write the other form's ids and weights bit for bit (memcmp: NaN weights' bits too, and the poison of
 * slots neither writes), in k_route (cuda_moe_route, cuda_moe_route_allowed) and in the fused router: random rows;
 * exact ties (a grid of values; the top logit duplicated in the next lane and in its own lane's next slot, so the
 * lanes' maxima tie and the lower id must win); rows where most probabilities are 0 (the picks past the non-zero
 * ones tie at 0); NaN, inf and -inf rows; a zero max of either sign; coresets of k or more, fewer than k
 * and no allowed experts. The fast form is also held to the CPU (route_case, router_oracle). */

static void route_fast_case(const float *lg, const uint8_t *allowed, size_t n, size_t E, size_t k, int cpu,
                            const char *what) {
    float *dl = cuda_test_upload(lg, n * E * 4);
    uint8_t *da = allowed ? cuda_test_upload(allowed, E) : NULL;
    int32_t *ids[2];
    uint32_t *wb[2]; /* the weights' bits */
    for (int f = 0; f < 2; f++) {
        cuda_route_fast_set(f);
        float *dw = cuda_test_poisoned(n * k);
        int32_t *di = (int32_t *)cuda_test_poisoned(n * k);
        CHECK(allowed ? cuda_moe_route_allowed(di, dw, dl, da, n, E, k, NULL) == 0
                      : cuda_moe_route(di, dw, dl, n, E, k, NULL) == 0);
        sync_or_fail();
        ids[f] = malloc(n * k * 4), wb[f] = malloc(n * k * 4);
        cuda_test_download(ids[f], di, n * k * 4);
        cuda_test_download(wb[f], dw, n * k * 4);
        cuda_free(dw), cuda_free(di);
    }
    size_t bad = n * k;
    for (size_t i = 0; i < n * k && bad == n * k; i++)
        if (ids[0][i] != ids[1][i] || wb[0][i] != wb[1][i]) bad = i;
    CHECK_MSG(bad == n * k, "%s E %zu k %zu row %zu slot %zu: fast id %d weight %08x, the other form's %d %08x", what,
              E, k, bad / k, bad % k, ids[1][bad], wb[1][bad], ids[0][bad], wb[0][bad]); /* read on failure only */
    if (cpu) {
        cuda_route_fast_set(1);
        route_case(lg, allowed, n, E, k, what);
    }
    cuda_route_fast_set(-1);
    cuda_free(dl);
    if (da) cuda_free(da);
    free(ids[0]), free(ids[1]), free(wb[0]), free(wb[1]);
}

/* Row r's largest logit copied to the next lane and to its own lane's next slot (and that slot's next lane). */
static void route_dup_top(float *lg, size_t n, size_t E) {
    for (size_t r = 0; r < n; r++) {
        float *x = lg + r * E;
        size_t t = 0;
        for (size_t e = 1; e < E; e++)
            if (x[e] > x[t]) t = e;
        x[(t + 1) % E] = x[(t + 32) % E] = x[(t + 33) % E] = x[t];
    }
}

/* One shape: random rows, duplicated tops, a grid of ties, rows of mostly zero probabilities (no denormal ones: the
 * CPU's expf and the device's may round those apart). */
static void route_fast_shape(size_t n, size_t E, size_t k, uint64_t seed) {
    float *lg = malloc(n * E * 4);
    cuda_test_fill(lg, n * E, seed, 2.0f);
    route_fast_case(lg, NULL, n, E, k, 1, "fast: random");
    route_dup_top(lg, n, E);
    route_fast_case(lg, NULL, n, E, k, 1, "fast: duplicated top");
    for (size_t i = 0; i < n * E; i++) lg[i] = roundf(lg[i]) * 0.5f;
    route_fast_case(lg, NULL, n, E, k, 1, "fast: ties");
    for (size_t i = 0; i < n * E; i++) /* every 9th expert; the rest e^-200 below: probability 0 exactly */
        lg[i] = (i % E) % 9 == 0 ? lg[i] : -200.0f - fabsf(lg[i]);
    route_fast_case(lg, NULL, n, E, k, 1, "fast: zeros");
    route_dup_top(lg, n, E);
    route_fast_case(lg, NULL, n, E, k, 1, "fast: zeros, duplicated top");
    free(lg);
}

/* The special rows at E experts, k picks, without and with coresets. */
static void route_fast_special(size_t E, size_t k, uint64_t seed) {
    const size_t n = 10;
    float *lg = malloc(n * E * 4);
    cuda_test_fill(lg, n * E, seed, 2.0f);
    for (size_t e = 0; e < E; e++) lg[0 * E + e] = 1.5f;                 /* all equal: ids 0..k-1 */
    lg[1 * E + 77 % E] = NAN;                                            /* every probability NaN */
    lg[2 * E + 200 % E] = INFINITY;                                      /* every probability NaN */
    for (size_t e = 0; e < E; e++) lg[3 * E + e] = -INFINITY;            /* every probability NaN */
    for (size_t e = 0; e < E; e++)                                       /* 3 picks, then ties at 0 */
        lg[4 * E + e] = (e == 9 || e == 100 % E || e == E - 1) ? (float)e * 0.01f : -INFINITY;
    for (size_t e = 0; e < E; e++) lg[5 * E + e] = -1.0f - (float)(e % 13); /* the max -0 */
    lg[5 * E + 5] = -0.0f;
    for (size_t e = 0; e < E; e++) lg[6 * E + e] = -1.0f - (float)(e % 11); /* -0 and +0 tie at the top */
    lg[6 * E + 5] = -0.0f, lg[6 * E + 40 % E] = 0.0f;
    for (size_t e = 0; e < E; e++) lg[7 * E + e] = -INFINITY;            /* a NaN among -inf */
    lg[7 * E + 3] = NAN;
    lg[8 * E + 1] = lg[8 * E + 66 % E] = INFINITY;                       /* two +inf */
    route_dup_top(lg + 9 * E, 1, E);
    route_fast_case(lg, NULL, n, E, k, 1, "fast: special");
    uint8_t *allowed = malloc(E);
    for (size_t e = 0; e < E; e++) allowed[e] = (uint8_t)(e % 7 == 3 || e == 0);
    route_fast_case(lg, allowed, n, E, k, 1, "fast: allowed");
    for (size_t e = 0; e < E; e++) allowed[e] = (uint8_t)(e == 1 || e == 100 % E || e == E - 2); /* 3 < k */
    route_fast_case(lg, allowed, n, E, k, 1, "fast: allowed, padded");
    memset(allowed, 0, E);
    for (size_t e = 0, c = 0; e < E && c < k; e += 3, c++) allowed[e] = 1;
    route_fast_case(lg, allowed, n, E, k, 1, "fast: allowed, exactly k");
    memset(allowed, 0, E);
    route_fast_case(lg, allowed, n, E, k, 1, "fast: none allowed");
    free(allowed), free(lg);
}

/* k_route's forms: every register width (E 5 .. 1024), the 35B's 256 x 8 and a 128 x 4 at rows 1..8 (and 9: past
 * a block's 4), k = 1 and k = 16; k > E without a coreset (the slots past E unwritten by both: no CPU rule). */
static void test_route_fast(void) {
    for (size_t n = 1; n <= 9; n++) {
        route_fast_shape(n, 256, 8, 300 + n);
        route_fast_shape(n, 128, 4, 320 + n);
    }
    const size_t shapes[9][3] = {{3, 5, 5},  {6, 33, 4},  {9, 37, 5},  {5, 64, 6},   {4, 1000, 16},
                                 {2, 1024, 8}, {7, 256, 1}, {3, 32, 16}, {8, 512, 16}};
    for (size_t s = 0; s < 9; s++) route_fast_shape(shapes[s][0], shapes[s][1], shapes[s][2], 340 + s);
    route_fast_special(256, 8, 361);
    route_fast_special(128, 4, 362);
    route_fast_special(1024, 16, 363);
    route_fast_special(48, 8, 364);
    float *lg = malloc(3 * 5 * 4);
    cuda_test_fill(lg, 15, 365, 1.0f);
    route_fast_case(lg, NULL, 3, 5, 8, 0, "fast: k > E");
    free(lg);
}

/* The fused router's forms on one shape, rows 1..rows_max, k = min(E, 8), min(E, 4) and 1: the fast form's fused
 * launch bit for bit the other form's, its unstaged launch and its two launches (cuda_moe_route in the fast form)
 * too, the CPU oracle, the counter back to 0. dup: weight rows copied (e to e + 1 at e % 8 == 0, to e + 32 at
 * e % 8 == 2), so logits tie exactly across lanes and within a lane. */
static void router_fast_shape(size_t E, size_t n_in, size_t n2, int special, int dup, size_t rows_max,
                              uint64_t seed) {
    router_bufs b;
    float *hw, *hw2, *hx;
    router_make(&b, &hw, &hw2, &hx, E, n_in, n2, special, seed);
    char why[CUDA_WHY];
    if (dup) {
        for (size_t e = 0; e < E; e++) {
            if (e % 8 == 0 && e + 1 < E) memcpy(hw + (e + 1) * n_in, hw + e * n_in, n_in * 4);
            if (e % 8 == 2 && e + 32 < E) memcpy(hw + (e + 32) * n_in, hw + e * n_in, n_in * 4);
        }
        CHECK_MSG(cuda_h2d(b.w, hw, E * n_in * 4, why) == 0, "%s", why);
    }
    void *st = NULL;
    CHECK_MSG(cuda_stream_create(&st, why) == 0, "%s", why);
    const size_t ks[3] = {E < 8 ? E : 8, E < 4 ? E : 4, 1};
    for (size_t ni = 0; ni < ROUTER_NROWS && router_rows_list[ni] <= rows_max; ni++)
        for (int ki = 0; ki < 3; ki++) {
            const size_t n = router_rows_list[ni];
            const size_t k = ks[ki];
            char what[112];
            snprintf(what, sizeof what, "fast fused router E %zu n_in %zu n2 %zu rows %zu k %zu special %d dup %d",
                     E, n_in, n2, n, k, special, dup);
            router_host h[4]; /* the other form fused, the fast form fused, unstaged, two launches */
            for (int f = 0; f < 4; f++) {
                cuda_route_fast_set(f > 0);
                router_poison(&b, n, E, n2, k);
                if (f < 3)
                    router_fused_call(&b, n, E, n_in, n2, k, f == 2, st);
                else
                    router_two_launches(&b, n, E, n_in, n2, k, st);
                CHECK_MSG(cuda_stream_sync(st, why) == 0, "%s", why);
                router_host_get(&h[f], &b, n, E, n2, k);
                CHECK_MSG(router_counter(&b) == 0, "%s form %d: the counter was left at %u", what, f,
                          router_counter(&b));
            }
            CHECK_MSG(router_same(&h[1], &h[0], n, E, n2, k), "%s: the fast form differs from the other", what);
            CHECK_MSG(router_same(&h[2], &h[0], n, E, n2, k), "%s: the fast form unstaged differs", what);
            CHECK_MSG(router_same(&h[3], &h[0], n, E, n2, k), "%s: the fast form's two launches differ", what);
            router_oracle(&h[1], hw, hw2, hx, n, E, n_in, n2, k, what);
            for (int f = 0; f < 4; f++) router_host_free(&h[f]);
        }
    cuda_route_fast_set(-1);
    cuda_stream_destroy(st);
    router_bufs_free(&b);
    free(hw), free(hw2), free(hx);
}

/* The fused router's fast form: the 35B-A3B's router at rows 1..8 (and to 33: the rows form), with and without ties, its NaN and inf rows, odd
 * expert counts and widths, a staged block past 48 KB; then the graph and small cases under the fast form (a
 * captured replay of its counter, and the case compute-sanitizer runs). */
static void test_router_fast(void) {
    router_fast_shape(256, 2048, 1, 0, 0, 8, 371);
    router_fast_shape(256, 2048, 1, 0, 1, 8, 372);
    router_fast_shape(128, 2048, 0, 0, 1, 8, 373);
    router_fast_shape(256, 2048, 1, 1, 0, 8, 374);
    router_fast_shape(200, 1000, 0, 2, 1, 8, 375);
    router_fast_shape(33, 264, 1, 0, 1, 8, 376);
    router_fast_shape(64, 8192, 0, 0, 1, 3, 377);
    router_fast_shape(256, 2048, 1, 0, 1, 33, 378); /* past 8 rows (the rows form), with ties */
    router_fast_shape(200, 1000, 0, 2, 1, 17, 379);
    cuda_route_fast_set(1);
    test_router_fused_graph();
    test_router_small();
    cuda_route_fast_set(-1);
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

/* The split greedy pick (k_pick_greedy: a cluster of 8 blocks a row, CLOVER_CUDA_PICK_SPLIT) against the one-block
 * kernel on the same rows: id and confidence bit for bit, through cuda_pick (greedy) and cuda_pick_each (greedy
 * rows beside sampled ones, which both runs give to the one-block kernel). Rows: random at two spreads, a NaN, a
 * forbidden id, every id forbidden (id -1), a +inf, a flat row (first maximum), +0 / -0 ties at the top, the
 * vocabulary of the 35B-A3B (248320). And the greedy ids against the CPU's sampler. */
static void split_rows(size_t V, float *lg, size_t n) {
    cuda_test_fill(lg, n * V, 91 + V, 3.0f);
    if (n > 1) cuda_test_fill(lg + V, V, 92 + V, 16.0f);
    if (n > 2) lg[2 * V + 7] = NAN, lg[2 * V + 5] = -INFINITY;
    if (n > 3)
        for (size_t i = 0; i < V; i++) lg[3 * V + i] = -INFINITY;
    if (n > 4) lg[4 * V + V / 2] = INFINITY;
    if (n > 5)
        for (size_t i = 0; i < V; i++) lg[5 * V + i] = 0.25f;
    if (n > 6) {
        for (size_t i = 0; i < V; i++) lg[6 * V + i] = -1.0f - (float)(i % 7);
        lg[6 * V + V - 3] = 0.0f, lg[6 * V + 1029 % V] = -0.0f, lg[6 * V + 5000 % V] = 0.0f;
    }
}

static void split_compare(const char *what, size_t n, size_t V, const float *dl, const double *du,
                          const cuda_pick_params *cp, const cuda_pick_params *dpar, int32_t *id_out) {
    int32_t id[2][8];
    float conf[2][8];
    for (int on = 0; on < 2; on++) {
        int32_t *di = (int32_t *)cuda_test_poisoned(n);
        float *dc = cuda_test_poisoned(n);
        cuda_pick_split_set(on);
        CHECK(dpar ? cuda_pick_each(di, dc, dl, du, dpar, n, V, NULL) == 0
                   : cuda_pick(di, dc, dl, du, n, V, cp, NULL) == 0);
        sync_or_fail();
        cuda_test_download(id[on], di, n * 4);
        cuda_test_download(conf[on], dc, n * 4);
        cuda_free(di), cuda_free(dc);
    }
    cuda_pick_split_set(-1);
    for (size_t r = 0; r < n; r++)
        CHECK_MSG(id[0][r] == id[1][r] && memcmp(&conf[0][r], &conf[1][r], 4) == 0,
                  "%s V %zu row %zu: one block id %d conf %a, split id %d conf %a", what, V, r, id[0][r],
                  (double)conf[0][r], id[1][r], (double)conf[1][r]);
    if (id_out) memcpy(id_out, id[1], n * sizeof(int32_t));
}

static void test_pick_split(void) {
    const size_t n = 7;
    static const size_t Vs[] = {20011, 1000, 248320};
    sampler_scratch sc;
    clover_error err = {0};
    CHECK(sampler_scratch_init(&sc, 248320, &err) == 0);
    for (size_t vi = 0; vi < sizeof Vs / sizeof Vs[0]; vi++) {
        const size_t V = Vs[vi];
        float *lg = malloc(n * V * 4);
        split_rows(V, lg, n);
        double u[8];
        for (size_t r = 0; r < n; r++) u[r] = 0.1 + 0.11 * (double)r;
        float *dl = cuda_test_upload(lg, n * V * 4);
        double *du = cuda_test_upload(u, n * sizeof(double));
        const cuda_pick_params greedy = {0.0f, 0, 1.0f};
        int32_t ids[8];
        split_compare("cuda_pick greedy", n, V, dl, du, &greedy, NULL, ids);
        const sampler_params sp = {0.0f, 0, 1.0f};
        for (size_t r = 0; r < n; r++) {
            int32_t ref = -9;
            float rc = 0;
            clover_error e2 = {0};
            const int rrc = sampler_pick(&sp, lg + r * V, V, 0.0, &sc, &ref, &rc, &e2);
            CHECK_MSG(rrc != 0 ? ids[r] == -1 : ids[r] == ref, "greedy V %zu row %zu: split %d, CPU %d (rc %d)", V, r,
                      ids[r], ref, rrc);
        }
        /* per-row parameters: greedy rows beside sampled ones */
        cuda_pick_params par[8];
        for (size_t r = 0; r < n; r++)
            par[r] = r % 3 == 1 ? (cuda_pick_params){0.7f, 40, 1.0f}
                                : r % 3 == 2 ? (cuda_pick_params){1e-7f, 0, 1.0f} : greedy;
        cuda_pick_params *dpar = cuda_test_upload(par, n * sizeof par[0]);
        split_compare("cuda_pick_each mixed", n, V, dl, du, NULL, dpar, NULL);
        cuda_free(dpar), cuda_free(dl), cuda_free(du);
        free(lg);
    }
    sampler_scratch_free(&sc);
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

/* cuda_moe_combine_add_rms_norm (the expert sum, the residual add and the next norm in one launch, the Q8_0 8-bit
 * rows too when asked): h, x and the 8-bit rows bit and byte for byte what cuda_moe_combine(_shexp) then
 * cuda_add_rms_norm(_q8) give (the 8-bit buffers poisoned alike first, so a byte only one path wrote differs), and
 * without the shared expert h exactly the CPU's h + sum (test_combine's order, bound 0). Row widths 2048 / 1024 /
 * 4096 (2, 1, 4 float4 a thread) and 96; 300 (not whole Q8_0 blocks: done without the rows, 2); k 8 with repeated
 * ids, k 1, k 16; 1, 5 and 32 rows. Not taken (1): k 0 or 17, a row of 4100, a shared expert without its gate logit, the switch off. */
static void cmb_norm_case(size_t n, size_t k, size_t rows, bool shexp, bool q8) {
    char what[96];
    snprintf(what, sizeof what, "combine + norm n %zu k %zu rows %zu%s%s", n, k, rows, shexp ? " shexp" : "",
             q8 ? " q8" : "");
    rng_state r;
    rng_seed(&r, (uint64_t)(n * 131 + k * 7 + rows));
    int32_t *idx = malloc(rows * k * sizeof(int32_t));
    float *wts = malloc(rows * k * sizeof(float));
    for (size_t i = 0; i < rows * k; i++) idx[i] = (int32_t)(rng_next(&r) % 40), wts[i] = rng_uniform(&r);
    if (k > 2) idx[k - 1] = idx[0]; /* a repeated id in row 0: slot order decides */
    float *ye = malloc(rows * k * n * 4), *h = malloc(rows * n * 4), *sh = malloc(rows * n * 4), *g = malloc(rows * 4);
    float *w = malloc(n * 4);
    cuda_test_fill(ye, rows * k * n, 91, 1.0f);
    cuda_test_fill(h, rows * n, 92, 2.0f);
    cuda_test_fill(sh, rows * n, 93, 1.0f);
    cuda_test_fill(g, rows, 94, 2.0f);
    cuda_test_fill(w, n, 95, 1.5f);
    float *dye = cuda_test_upload(ye, rows * k * n * 4), *dsh = cuda_test_upload(sh, rows * n * 4);
    float *dg = cuda_test_upload(g, rows * 4), *dw = cuda_test_upload(w, n * 4), *dwt = cuda_test_upload(wts, rows * k * 4);
    int32_t *di = cuda_test_upload(idx, rows * k * sizeof(int32_t));
    float *dh[2], *dx[2], *dy = cuda_test_poisoned(rows * n);
    const size_t wb = cuda_matmul_chunk_work_bytes(QUANT_Q8_0, n, rows) + 256;
    void *work[2];
    for (int i = 0; i < 2; i++) {
        dh[i] = cuda_test_upload(h, rows * n * 4), dx[i] = cuda_test_poisoned(rows * n);
        char why[CUDA_WHY];
        CHECK_MSG(cuda_alloc(&work[i], wb, why) == 0 && cuda_memset(work[i], 0xA5, wb, NULL, why) == 0, "%s", why);
    }
    /* the two launches (three without the fused norm's rows) */
    if (shexp)
        CHECK(cuda_moe_combine_shexp(dy, dye, di, dwt, rows, k, n, dsh, dg, NULL) == 0);
    else
        CHECK(cuda_moe_combine(dy, dye, di, dwt, rows, k, n, NULL) == 0);
    int plain_q8 = 1;
    if (q8) plain_q8 = cuda_add_rms_norm_q8(dx[0], dh[0], dy, dw, rows, n, 1e-6f, work[0], NULL);
    if (plain_q8) CHECK(cuda_add_rms_norm(dx[0], dh[0], dy, dw, rows, n, 1e-6f, NULL) == 0);
    const int t = cuda_moe_combine_add_rms_norm(dx[1], dh[1], dye, di, dwt, k, shexp ? dsh : NULL, shexp ? dg : NULL,
                                                dw, rows, n, 1e-6f, q8 ? work[1] : NULL, NULL);
    CHECK_MSG(t == (q8 && plain_q8 ? 2 : 0), "%s: returned %d (the plain norm's rows: %d)", what, t, plain_q8);
    sync_or_fail();
    float *a = malloc(rows * n * 4), *b = malloc(rows * n * 4);
    cuda_test_download(a, dh[0], rows * n * 4), cuda_test_download(b, dh[1], rows * n * 4);
    CHECK_MSG(memcmp(a, b, rows * n * 4) == 0, "%s: h differs from the combine + add", what);
    if (!shexp) { /* h + the CPU's sum (test_combine's expression), exactly */
        size_t bad = 0;
        for (size_t i = 0; i < rows; i++) {
            int32_t ord[16];
            for (size_t j = 0; j < k; j++) ord[j] = (int32_t)j;
            for (size_t x = 1; x < k; x++)
                for (size_t y = x; y > 0 && idx[i * k + ord[y - 1]] > idx[i * k + ord[y]]; y--) {
                    const int32_t tt = ord[y];
                    ord[y] = ord[y - 1], ord[y - 1] = tt;
                }
            for (size_t c = 0; c < n; c++) {
                float o = 0.0f;
                for (size_t j = 0; j < k; j++) {
                    volatile float prod = ye[(i * k + (size_t)ord[j]) * n + c] * wts[i * k + (size_t)ord[j]];
                    o += prod;
                }
                volatile float v = h[i * n + c] + o;
                bad += memcmp((const void *)&v, b + i * n + c, 4) != 0;
            }
        }
        CHECK_MSG(bad == 0, "%s: %zu values of h differ from the CPU's h + sum", what, bad);
    }
    cuda_test_download(a, dx[0], rows * n * 4), cuda_test_download(b, dx[1], rows * n * 4);
    CHECK_MSG(memcmp(a, b, rows * n * 4) == 0, "%s: x differs from the norm's", what);
    if (q8) {
        uint8_t *qa = malloc(wb), *qb = malloc(wb);
        cuda_test_download(qa, work[0], wb), cuda_test_download(qb, work[1], wb);
        CHECK_MSG(memcmp(qa, qb, wb) == 0, "%s: the 8-bit rows differ from cuda_add_rms_norm_q8's", what);
        free(qa), free(qb);
    }
    free(a), free(b), free(idx), free(wts), free(ye), free(h), free(sh), free(g), free(w);
    for (int i = 0; i < 2; i++) cuda_free(dh[i]), cuda_free(dx[i]), cuda_free(work[i]);
    cuda_free(dy), cuda_free(dye), cuda_free(dsh), cuda_free(dg), cuda_free(dw), cuda_free(dwt), cuda_free(di);
}

static void test_combine_norm(void) {
    const size_t ns[5] = {2048, 1024, 4096, 96, 300}, ks[3] = {8, 1, 16}, rows[3] = {1, 5, 32};
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++)
            for (int q = 0; q < 4; q++) cmb_norm_case(ns[i], ks[(i + j + q) % 3], rows[j], q & 1, q >> 1);
    float *d = cuda_test_poisoned(4 * 4098);
    int32_t *di = cuda_test_upload((int32_t[4]){0, 1, 2, 3}, 16);
    CHECK(cuda_moe_combine_add_rms_norm(d, d, d, di, d, 0, NULL, NULL, d, 1, 96, 1e-6f, NULL, NULL) == 1);
    CHECK(cuda_moe_combine_add_rms_norm(d, d, d, di, d, 17, NULL, NULL, d, 1, 96, 1e-6f, NULL, NULL) == 1);
    CHECK(cuda_moe_combine_add_rms_norm(d, d, d, di, d, 1, NULL, NULL, d, 1, 4100, 1e-6f, NULL, NULL) == 1);
    CHECK(cuda_moe_combine_add_rms_norm(d, d, d, di, d, 1, d, NULL, d, 1, 96, 1e-6f, NULL, NULL) == 1);
    cuda_combine_norm_set(0);
    CHECK(cuda_moe_combine_add_rms_norm(d, d, d, di, d, 1, NULL, NULL, d, 1, 96, 1e-6f, NULL, NULL) == 1);
    cuda_combine_norm_set(-1);
    sync_or_fail();
    cuda_free(d), cuda_free(di);
}

int main(void) {
    cuda_test_require_device();
    RUN(test_embed);
    RUN(test_rms_norm);
    RUN(test_add_swiglu);
    RUN(test_route);
    RUN(test_router_fused);
    RUN(test_router_fused_graph);
    RUN(test_router_small);
    RUN(test_route_fast);
    RUN(test_router_fast);
    RUN(test_shexp);
    RUN(test_nll);
    RUN(test_pick);
    RUN(test_pick_split);
    RUN(test_combine);
    RUN(test_combine_norm);
    return TEST_EXIT();
}
