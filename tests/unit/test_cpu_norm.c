/*
 * test_cpu_norm.c: the RMSNorms against hand-computed values, against
 * transformers' Qwen3_5MoeRMSNorm / Qwen3_5MoeRMSNormGated (tests/data/ops/
 * norm.bin), and the AVX2 path against the scalar oracle on odd sizes.
 */
#include "cpu/cpu_simd.h"
#include "cpu/norm.h"
#include "cpu_ops_test.h"

static void rms_norm_hand_case(void) {
    /* x = (3, 4): mean of squares 12.5, y = x / sqrt(12.5 + 1e-6) * w */
    const float x[2] = {3.0f, 4.0f}, w[2] = {1.0f, 2.0f};
    float y[2];
    cpu_rms_norm_scalar(y, x, w, 1, 2, 1e-6f);
    double inv = 1.0 / sqrt(12.5 + 1e-6);
    CHECK_NEAR(y[0], 3.0 * inv, 1e-6);
    CHECK_NEAR(y[1], 8.0 * inv, 1e-6);
    cpu_rms_norm(y, x, w, 1, 2, 1e-6f);
    CHECK_NEAR(y[1], 8.0 * inv, 1e-6);
    /* eps goes on the mean: an all-zero row stays zero, a tiny row is damped */
    const float tiny[2] = {1e-3f, 1e-3f};
    cpu_rms_norm_scalar(y, tiny, w, 1, 2, 1e-6f);
    CHECK_NEAR(y[0], 1e-3 / sqrt(1e-6 + 1e-6), 1e-6);
}

static void gated_norm_hand_case(void) {
    /* x = (1, -1): rms 1; silu(0) = 0, silu(100) = 100 / (1 + e^-100) = 100 */
    const float x[2] = {1.0f, -1.0f}, z[2] = {0.0f, 100.0f}, w[2] = {2.0f, 3.0f};
    float y[2];
    cpu_rms_norm_gated_scalar(y, x, z, w, 1, 2, 1e-6f);
    CHECK_NEAR(y[0], 0.0, 1e-12);
    CHECK_NEAR(y[1], -300.0 / sqrt(1.0 + 1e-6), 3e-5);
    cpu_rms_norm_gated(y, x, z, w, 1, 2, 1e-6f);
    CHECK_NEAR(y[1], -300.0 / sqrt(1.0 + 1e-6), 3e-5);
}

/* Against torch: the reduction is 67 or 256 long, so the float32 sums (ours
 * sequential or 32-lane, torch's vectorised) agree to a few 1e-7 of the
 * scale; 2e-6 leaves room and still catches any formula slip (eps on the sum
 * instead of the mean, 1 + w added twice, a missing silu). */
static void norm_matches_torch(void) {
    ops_vectors v;
    if (ops_vectors_load(&v, "norm.bin")) return;
    const char *tags[2] = {"a", "b"};
    for (int t = 0; t < 2; t++) {
        char nx[32], nw[32], ny[32];
        snprintf(nx, sizeof nx, "rms_%s_x", tags[t]);
        snprintf(nw, sizeof nw, "rms_%s_w_stored", tags[t]);
        snprintf(ny, sizeof ny, "rms_%s_y", tags[t]);
        size_t nxs, dim;
        const float *x = ops_f32(&v, nx, &nxs), *w = ops_f32(&v, nw, &dim), *ye = ops_f32(&v, ny, NULL);
        if (!x || !w || !ye) break;
        size_t rows = nxs / dim;
        float *y = malloc(nxs * sizeof *y);
        cpu_rms_norm_scalar(y, x, w, rows, dim, 1e-6f);
        CHECK_MSG(ops_nerr(y, ye, nxs) < 2e-6, "scalar %s: %g", tags[t], ops_nerr(y, ye, nxs));
        OPS_NOTE("rms %zu x %zu vs torch: scalar nerr %.2g", rows, dim, ops_nerr(y, ye, nxs));
        /* the small first row alone (scaled 1e-3): relative to its own scale */
        CHECK_MSG(ops_nerr(y, ye, dim) < 2e-6, "scalar %s row 0: %g", tags[t], ops_nerr(y, ye, dim));
        if (cpu_simd_supported()) {
            cpu_rms_norm_avx2(y, x, w, rows, dim, 1e-6f);
            CHECK_MSG(ops_nerr(y, ye, nxs) < 2e-6, "avx2 %s: %g", tags[t], ops_nerr(y, ye, nxs));
        }
        free(y);
    }
    size_t n, hd;
    const float *x = ops_f32(&v, "gated_x", &n), *z = ops_f32(&v, "gated_z", NULL), *w = ops_f32(&v, "gated_w", &hd),
                *ye = ops_f32(&v, "gated_y", NULL);
    if (x && z && w && ye) {
        float *y = malloc(n * sizeof *y);
        cpu_rms_norm_gated_scalar(y, x, z, w, n / hd, hd, 1e-6f);
        CHECK_MSG(ops_nerr(y, ye, n) < 2e-6, "gated scalar: %g", ops_nerr(y, ye, n));
        OPS_NOTE("gated %zu x %zu vs torch: scalar nerr %.2g", n / hd, hd, ops_nerr(y, ye, n));
        if (cpu_simd_supported()) {
            cpu_rms_norm_gated_avx2(y, x, z, w, n / hd, hd, 1e-6f);
            CHECK_MSG(ops_nerr(y, ye, n) < 2e-6, "gated avx2: %g", ops_nerr(y, ye, n));
        }
        free(y);
    }
    ops_vectors_free(&v);
}

/* AVX2 against the oracle on odd sizes, in place too. The sums differ only in
 * order (n <= 2049 terms of x^2 >= 0, so at most n * 2^-24 relative, in
 * practice ~sqrt(n) 2^-24); expf in silu differs by <= 2 ulp. 4e-6 covers
 * n = 2049 with margin. */
static void norm_avx2_matches_scalar(void) {
    if (!cpu_simd_supported()) {
        printf("     (no AVX2+FMA: fast path not tested)\n");
        return;
    }
    const size_t sizes[] = {1, 7, 8, 9, 31, 33, 128, 129, 2048, 2049};
    rng_state r;
    rng_seed(&r, 11);
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si], rows = 3;
        float *x = malloc(rows * n * 4), *z = malloc(rows * n * 4), *w = malloc(n * 4);
        float *ys = malloc(rows * n * 4), *yf = malloc(rows * n * 4);
        ops_fill(x, rows * n, &r, 1.5f);
        ops_fill(z, rows * n, &r, 4.0f);
        for (size_t i = 0; i < n; i++) w[i] = 1.0f + 0.1f * rng_normal(&r);
        cpu_rms_norm_scalar(ys, x, w, rows, n, 1e-6f);
        memcpy(yf, x, rows * n * 4);
        cpu_rms_norm_avx2(yf, yf, w, rows, n, 1e-6f); /* in place */
        CHECK_MSG(ops_nerr(yf, ys, rows * n) < 4e-6, "rms n=%zu: %g", n, ops_nerr(yf, ys, rows * n));
        cpu_rms_norm_gated_scalar(ys, x, z, w, rows, n, 1e-6f);
        cpu_rms_norm_gated_avx2(yf, x, z, w, rows, n, 1e-6f);
        CHECK_MSG(ops_nerr(yf, ys, rows * n) < 4e-6, "gated n=%zu: %g", n, ops_nerr(yf, ys, rows * n));
        free(x), free(z), free(w), free(ys), free(yf);
    }
}

int main(void) {
    RUN(rms_norm_hand_case);
    RUN(gated_norm_hand_case);
    RUN(norm_matches_torch);
    RUN(norm_avx2_matches_scalar);
    return TEST_EXIT();
}
