/*
 * test_cuda_matmul.c: the CUDA weight products (src/cuda/cuda_matmul.h)
 * against the CPU's scalar oracles, in the style of ggml's test-backend-ops:
 * seeded random inputs (never zeros), odd shapes, outputs poisoned with NaN
 * before each run and checked fully written and finite, and a normalised
 * error ||gpu - ref|| / ||ref|| with a bound per path:
 *
 *  - 8-bit activations: the GPU's quantised rows equal quant_act_quantize_scalar's
 *    byte for byte (a block with an infinity included).
 *  - integer path (Q8_0 / K-quants), decode and chunk alike: one canonical
 *    float order of the per-block terms (matmul_igemm.cu), so a row's bits
 *    are the same at every row count 1..64, whatever the neighbours, decode
 *    or chunk (test_row_invariance, bit for bit); the wide-row kernels of
 *    64+ rows (matmul_igemm_wide.cu, off by default) bit for bit the 16 x 32
 *    ones (test_igemm_wide); the few-row form with the weights as the mma A operand (matmul_mma_rows.cu,
 *    CLOVER_CUDA_MMA_ROWS, off by default) bit for bit the chunk and decode forms at rows 1..32 (test_mma_rows);
 *    the K-split cluster form of 1..32 Q8_0 rows (matmul_q8_rows32.cu, CLOVER_CUDA_Q8_ROWS32, off by default)
 *    bit for bit the chunk form (test_q8_rows32); the grouped Q4_K / Q5_K products of few slots an expert on the
 *    persistent grid (matmul_igemm.cu's PERSIST, CLOVER_CUDA_MOE_PERSIST, off by default) bit for bit the WIDE
 *    form, tiles of 8 / 16 / 32 slots, eager and in a graph (test_moe_persist).
 *  - integer path against the CPU: the oracle is the CPU's integer path
 *    (quant_act_quantize_scalar + quant_act_dot_scalar). The integer sums are
 *    exact on both sides; only the order and grouping of the f32 scale
 *    products differ: a few roundings of 2^-24 on partials that can exceed
 *    the result by the scale/min cancellation of the K-quants (a few times),
 *    summed over <= 64 partials: bound 1e-5 (measured ~1e-7).
 *  - decode (F32/F16/BF16): f32 sums against quant_dot_scalar's double sum:
 *    gamma_n for n <= 600 is 3.6e-5 worst case on sum|w x|; random signs make
 *    ||err||/||ref|| about sqrt(n) 2^-24: bound 1e-5.
 *  - chunk GEMM of float weights (TF32): against matmul_scalar (f32 dequantised weights, f32
 *    activations, double sums). Each product carries relative error at most
 *    2u + u^2 with u = 2^-11 (both operands rounded to nearest TF32), so
 *    per element |err| <= (2u + u^2 + n 2^-24) sum_i |w_i x_i| (checked for
 *    every output), and for random-sign data ||err||/||ref|| ~ u sqrt(2/3)
 *    = 4e-4: bound 1.5e-3.
 *  - gate + up fused with SwiGLU (decode form): against silu(g) * u of the
 *    two oracle dots in f32 (cpu_silu's expression). h moves by at most
 *    |silu'(g)| |dg| |u| + |silu(g)| |du| with |silu'| <= 1.1, plus expf's
 *    2 ulp: about the products' own normalised error: bound 1e-5. And bit
 *    for bit the two unfused products followed by cuda_swiglu, with
 *    programmatic dependent launch on and off (cuda_pdl.cuh) on a
 *    non-blocking stream.
 * Rows are independent: a row computed alone equals, bit for bit, the same
 * row computed among others (decode and chunk).
 *
 * With no device the argument checks still run (they need no GPU), then the
 * test skips (TEST_SKIP: "SKIP: no CUDA device (<reason>)", exit 77; a skip
 * after a failed check is a failure).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_device.h"
#include "cuda/cuda_matmul.h"
#include "cuda/cuda_ops.h"
#include "quant/quant.h"
#include "test.h"

#define CUDA_MATMUL_TEST_SEED 0x9E3779B97F4A7C15ull
#include "cuda_matmul_test.h"

static const uint32_t TYPES[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

/* ---- helpers ---- */

static void *dev_upload(const void *h, size_t bytes) {
    void *d = NULL;
    CU(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes) CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}
static float *dev_poisoned(size_t n) { /* 0xFF bytes: every float a NaN */
    void *d = NULL;
    CU(cudaMalloc(&d, n * sizeof(float)));
    CU(cudaMemset(d, 0xFF, n * sizeof(float)));
    return d;
}
static void dev_download(float *h, const float *d, size_t n) {
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
}

/* The decode oracle of one dot: the CPU's integer path for Q8_0/K-quants, the scalar f32 dot otherwise. */
static float decode_ref(uint32_t type, const uint8_t *row, const float *x, size_t n_in) {
    const size_t xb = quant_act_row_bytes(type, n_in);
    if (xb == 0) return quant_dot_scalar(type, row, x, n_in);
    void *xq = malloc(xb);
    quant_act_quantize_scalar(type, x, xq, n_in);
    const float r = quant_act_dot_scalar(type, row, xq, n_in);
    free(xq);
    return r;
}

/* sum_i |w_i x_i| in double (the GEMM's per-element bound). */
static double abs_dot(uint32_t type, const uint8_t *row, const float *x, size_t n_in) {
    float *w = malloc(n_in * sizeof(float));
    quant_dequantize_row_scalar(type, row, w, n_in);
    double s = 0;
    for (size_t i = 0; i < n_in; i++) s += fabs((double)w[i] * x[i]);
    free(w);
    return s;
}

/* Every value finite, and ||got - ref|| / ||ref|| <= bound. */
static void check_close(const char *what, uint32_t type, const float *got, const float *ref, size_t n, double bound) {
    double e2 = 0, r2 = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) bad++;
        e2 += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        r2 += (double)ref[i] * ref[i];
    }
    const double err = sqrt(e2 / (r2 > 0 ? r2 : 1));
    CHECK_MSG(bad == 0, "%s %s: %zu of %zu outputs not finite (unwritten or NaN)", what, quant_type_name(type), bad,
              n);
    CHECK_MSG(r2 > 0, "%s %s: the reference is all zeros", what, quant_type_name(type));
    CHECK_MSG(err <= bound, "%s %s: normalised error %.3g > %.3g", what, quant_type_name(type), err, bound);
    printf("  %-12s %-5s n=%-6zu err %.3g (bound %.3g)\n", what, quant_type_name(type), n, err, bound);
}

static int is_int_type(uint32_t t) {
    return t == QUANT_Q8_0 || t == QUANT_Q4_K || t == QUANT_Q5_K || t == QUANT_Q6_K;
}

/* Variant 0: odd where the type allows it (float weights: the unaligned
 * scalar path). Variant 1: float weights n_in % 8 == 0 (the 16-byte path);
 * 8-bit paths long enough that 8 rows overflow 48 KB of shared memory (the
 * separate quantiser kernel and `work`). Variant 2: 2048 wide, where every
 * type's rows are 16-byte aligned, so the decode products stage their
 * weight rows in shared memory (checked bit for bit against not staging). */
static size_t n_in_variant(uint32_t type, int variant) {
    if (variant == 2) return 2048; /* every row 16-byte aligned: the staged weights (cuda_mmv_stage_set) */
    if (type == QUANT_F32 || type == QUANT_F16 || type == QUANT_BF16) return variant ? 520 : 300 + 13;
    if (type == QUANT_Q8_0) return variant ? 32 * 171 : 32 * 19;
    return variant ? 256 * 22 : 256 * 3;
}
static size_t n_in_for(uint32_t type) { return n_in_variant(type, 0); }

/* ---- argument checks (no device needed) ---- */

static void test_bad_arguments(void) {
    char why[256];
    float dummy = 0.0f;
    why[0] = 0;
    CHECK(cuda_matmul_decode(QUANT_Q4_0, &dummy, 4, 32, &dummy, 1, &dummy, &dummy, NULL, why, sizeof why) == -1);
    CHECK(strstr(why, "type") != NULL);
    CHECK(cuda_matmul_chunk(QUANT_Q4_K, &dummy, 4, 100, &dummy, 1, &dummy, NULL, why, sizeof why) == -1);
    CHECK(strstr(why, "multiple") != NULL);
    CHECK(cuda_matmul_decode(QUANT_Q8_0, &dummy, 4, 32, &dummy, 9, &dummy, &dummy, NULL, why, sizeof why) == -1);
    CHECK(strstr(why, "rows") != NULL);
    cuda_moe_args a = {.type = QUANT_Q8_0, .w = &dummy, .expert_stride = 34 * 4, .n_expert = 2, .n_out = 4,
                       .n_in = 32, .ids = (const int32_t *)&dummy, .n_rows = 1, .k = 17, .x = &dummy, .y = &dummy};
    CHECK(cuda_moe_decode(&a, &dummy, NULL, why, sizeof why) == -1);
    CHECK(strstr(why, "k = 17") != NULL);
    a.k = 2;
    a.expert_stride = 10;
    CHECK(cuda_moe_chunk(&a, &dummy, NULL, why, sizeof why) == -1);
    CHECK(strstr(why, "stride") != NULL);
    /* the scratch form: 8-bit rows for the integer types only, and refused without its scratch */
    CHECK(cuda_matmul_chunk_work_bytes(QUANT_Q8_0, 2048, 32) >= 32 * 2048);
    CHECK(cuda_matmul_chunk_work_bytes(QUANT_F16, 2048, 32) == 0);
    CHECK(cuda_matmul_chunk_ws(QUANT_Q4_K, &dummy, 4, 256, &dummy, 2, &dummy, NULL, NULL, why, sizeof why) == -1);
    CHECK(strstr(why, "NULL") != NULL);
    CHECK(cuda_matmul_supported(QUANT_Q6_K, 512) == 1);
    CHECK(cuda_matmul_supported(QUANT_Q6_K, 500) == 0);
    CHECK(cuda_matmul_supported(QUANT_Q4_0, 512) == 0);
}

/* ---- on the device ---- */

/* n_in 160: one warp per 32-block; 512: one warp per 8 blocks (mm_act_blocks_32x8). */
static void act_quantize_case(size_t n_in) {
    /* The GPU's 8-bit rows are only visible through the products; check them
     * through a one-hot weight: with Q8_0 weights of d = 1 and a single code
     * 1 at position j, the decode dot is exactly x_d * q_j, so every code and
     * scale the GPU chose shows (the CPU's codes times its d must match). */
    const size_t n_out = n_in;
    uint8_t *w = calloc(n_out, 34 * (n_in / 32));
    for (size_t o = 0; o < n_out; o++) {
        uint8_t *b = w + o * 34 * (n_in / 32) + 34 * (o / 32);
        b[0] = 0x00, b[1] = 0x3C; /* f16 1.0 */
        ((int8_t *)(b + 2))[o % 32] = 1;
    }
    float x[512];
    fill(x, n_in, 3.0);
    uint8_t xq[36 * 16];
    quant_act_quantize_scalar(QUANT_Q8_0, x, xq, n_in);
    void *dw = dev_upload(w, n_out * 34 * (n_in / 32));
    float *dx = dev_upload(x, n_in * sizeof(float)), *dy = dev_poisoned(n_out);
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_matmul_decode_work_bytes(QUANT_Q8_0, n_in, 1)));
    char why[256] = "";
    CHECK_MSG(cuda_matmul_decode(QUANT_Q8_0, dw, n_out, n_in, dx, 1, dy, work, NULL, why, sizeof why) == 0, "%s", why);
    float y[512];
    dev_download(y, dy, n_out);
    size_t mism = 0;
    for (size_t o = 0; o < n_out; o++) {
        float d;
        memcpy(&d, xq + 36 * (o / 32), 4);
        const float want = d * (float)((int8_t *)(xq + 36 * (o / 32) + 4))[o % 32];
        if (memcmp(&want, &y[o], 4) != 0) mism++;
    }
    CHECK_MSG(mism == 0, "%zu of %zu 8-bit codes differ from quant_act_quantize_scalar's", mism, n_out);
    /* An infinity makes its block's d NaN, on both backends, so every dot is NaN. */
    x[70] = INFINITY;
    CHECK(isnan(decode_ref(QUANT_Q8_0, w, x, n_in)));
    CU(cudaMemcpy(dx, x, n_in * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMemset(dy, 0, n_out * sizeof(float)));
    CHECK_MSG(cuda_matmul_decode(QUANT_Q8_0, dw, n_out, n_in, dx, 1, dy, work, NULL, why, sizeof why) == 0, "%s", why);
    dev_download(y, dy, n_out);
    size_t nan = 0;
    for (size_t o = 0; o < n_out; o++) nan += isnan(y[o]) != 0;
    CHECK_MSG(nan == n_out, "an infinite activation gave %zu NaN outputs of %zu", nan, n_out);
    free(w);
    cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(work);
}

static void test_act_quantize_bytes(void) {
    act_quantize_case(32 * 5);
    act_quantize_case(512);
}

static void test_decode_types(void) {
    for (int t = 0; t < 3 * N_TYPES; t++) {
        const uint32_t type = TYPES[t % N_TYPES];
        const size_t n_in = n_in_variant(type, t / N_TYPES), n_out = 77, max_rows = CUDA_MATMUL_DECODE_MAX_ROWS;
        size_t rb;
        uint8_t *w = make_weights(type, n_out, n_in, &rb);
        float *x = malloc(max_rows * n_in * sizeof(float));
        fill(x, max_rows * n_in, 2.0);
        float *ref = malloc(max_rows * n_out * sizeof(float)), *got = malloc(max_rows * n_out * sizeof(float));
        for (size_t r = 0; r < max_rows; r++)
            for (size_t o = 0; o < n_out; o++) ref[r * n_out + o] = decode_ref(type, w + o * rb, x + r * n_in, n_in);
        void *dw = dev_upload(w, n_out * rb);
        float *dx = dev_upload(x, max_rows * n_in * sizeof(float));
        void *work = NULL;
        CU(cudaMalloc(&work, cuda_matmul_decode_work_bytes(type, n_in, max_rows) + 256));
        float *all = malloc(max_rows * n_out * sizeof(float));
        const size_t rows_list[] = {8, 1, 3};
        for (size_t ri = 0; ri < 3; ri++) {
            const size_t nr = rows_list[ri];
            const size_t r0 = nr == 8 ? 0 : 5 - nr + 1; /* the small batches end at row 5 */
            float *dy = dev_poisoned(nr * n_out);
            char why[256] = "";
            CHECK_MSG(cuda_matmul_decode(type, dw, n_out, n_in, dx + r0 * n_in, nr, dy, work, NULL, why, sizeof why) ==
                          0,
                      "%s", why);
            dev_download(got, dy, nr * n_out);
            char what[48];
            snprintf(what, sizeof what, "decode x%zu/%zu", nr, n_in);
            if (is_int_type(type))
                check_close(what, type, got, ref + r0 * n_out, nr * n_out, 1e-5);
            else
                check_close(what, type, got, ref + r0 * n_out, nr * n_out, 1e-5);
            if (nr == 8) {
                memcpy(all, got, 8 * n_out * sizeof(float));
                cuda_mmv_stage_set(0); /* the weights read from global memory directly: the same bits */
                CHECK_MSG(cuda_matmul_decode(type, dw, n_out, n_in, dx, nr, dy, work, NULL, why, sizeof why) == 0, "%s",
                          why);
                cuda_mmv_stage_set(1);
                dev_download(got, dy, nr * n_out);
                CHECK_MSG(memcmp(all, got, 8 * n_out * sizeof(float)) == 0,
                          "decode %s x8/%zu: staged and unstaged weights differ", quant_type_name(type), n_in);
            } else /* the same rows alone: the same bits */
                CHECK_MSG(memcmp(all + r0 * n_out, got, nr * n_out * sizeof(float)) == 0,
                          "decode %s: rows computed in a batch of %zu differ from a batch of 8", quant_type_name(type),
                          nr);
            cudaFree(dy);
        }
        free(w), free(x), free(ref), free(got), free(all);
        cudaFree(dw), cudaFree(dx), cudaFree(work);
    }
}

static void test_chunk_types(void) {
    const double u = 1.0 / 2048;
    for (int t = 0; t < N_TYPES; t++) {
        const uint32_t type = TYPES[t];
        const size_t n_in = n_in_for(type), n_out = 77 + 64, n_rows = 77;
        size_t rb;
        uint8_t *w = make_weights(type, n_out, n_in, &rb);
        float *x = malloc(n_rows * n_in * sizeof(float));
        fill(x, n_rows * n_in, 2.0);
        float *ref = malloc(n_rows * n_out * sizeof(float)), *got = malloc(n_rows * n_out * sizeof(float));
        const int ity = is_int_type(type);
        for (size_t r = 0; r < n_rows; r++)
            for (size_t o = 0; o < n_out; o++)
                ref[r * n_out + o] = ity ? decode_ref(type, w + o * rb, x + r * n_in, n_in)
                                         : quant_dot_scalar(type, w + o * rb, x + r * n_in, n_in);
        void *dw = dev_upload(w, n_out * rb);
        float *dx = dev_upload(x, n_rows * n_in * sizeof(float)), *dy = dev_poisoned(n_rows * n_out);
        char why[256] = "";
        CHECK_MSG(cuda_matmul_chunk(type, dw, n_out, n_in, dx, n_rows, dy, NULL, why, sizeof why) == 0, "%s", why);
        dev_download(got, dy, n_rows * n_out);
        if (ity)
            check_close("chunk x77", type, got, ref, n_rows * n_out, 1e-5);
        else
            check_close("chunk x77", type, got, ref, n_rows * n_out, 1.5e-3);
        size_t over = 0;
        for (size_t r = 0; r < n_rows && !ity; r++)
            for (size_t o = 0; o < n_out; o++) {
                const double a = abs_dot(type, w + o * rb, x + r * n_in, n_in);
                const double tol = (2 * u + u * u + (double)n_in * 0x1p-24) * a;
                if (!(fabs((double)got[r * n_out + o] - ref[r * n_out + o]) <= tol)) over++;
            }
        CHECK_MSG(over == 0, "chunk %s: %zu outputs beyond the TF32 element bound", quant_type_name(type), over);
        { /* with scratch (the 8-bit rows made once): the same bits */
            void *cw = NULL;
            const size_t cwb = cuda_matmul_chunk_work_bytes(type, n_in, n_rows);
            CHECK(ity ? cwb > 0 : cwb == 0);
            CU(cudaMalloc(&cw, cwb + 256));
            float *dy3 = dev_poisoned(n_rows * n_out), *got3 = malloc(n_rows * n_out * sizeof(float));
            CHECK_MSG(cuda_matmul_chunk_ws(type, dw, n_out, n_in, dx, n_rows, dy3, cw, NULL, why, sizeof why) == 0, "%s",
                      why);
            dev_download(got3, dy3, n_rows * n_out);
            CHECK_MSG(memcmp(got3, got, n_rows * n_out * sizeof(float)) == 0,
                      "chunk %s: cuda_matmul_chunk_ws differs from cuda_matmul_chunk", quant_type_name(type));
            free(got3);
            cudaFree(dy3), cudaFree(cw);
        }
        /* rows 64..76 alone (the second tile) and row 70 alone: the same bits */
        for (int pass = 0; pass < 2; pass++) {
            const size_t r0 = pass ? 70 : 64, nr = pass ? 1 : 13;
            float *dy2 = dev_poisoned(nr * n_out), *sub = malloc(nr * n_out * sizeof(float));
            CHECK_MSG(cuda_matmul_chunk(type, dw, n_out, n_in, dx + r0 * n_in, nr, dy2, NULL, why, sizeof why) == 0,
                      "%s", why);
            dev_download(sub, dy2, nr * n_out);
            CHECK_MSG(memcmp(sub, got + r0 * n_out, nr * n_out * sizeof(float)) == 0,
                      "chunk %s: %zu rows alone differ from the same rows among 77", quant_type_name(type), nr);
            free(sub);
            cudaFree(dy2);
        }
        free(w), free(x), free(ref), free(got);
        cudaFree(dw), cudaFree(dx), cudaFree(dy);
    }
}

/* Float matrices of <= 64 outputs on the 16-byte path take a warp per (row, output) in f32 at any row count
 * (a shared expert's 1-output gate): within the decode bound of the scalar dot (1e-5), bit for bit the decode
 * product of the same rows (the same arithmetic), and rows alone equal the same rows among 77. */
static void test_chunk_thin(void) {
    const size_t outs[] = {1, 45}, ins[] = {520, 2048};
    for (int t = 0; t < 3; t++)
        for (int c = 0; c < 4; c++) {
            const uint32_t type = TYPES[t];
            const size_t n_out = outs[c & 1], n_in = ins[c >> 1], n_rows = 77;
            size_t rb;
            uint8_t *w = make_weights(type, n_out, n_in, &rb);
            float *x = malloc(n_rows * n_in * sizeof(float));
            fill(x, n_rows * n_in, 2.0);
            float *ref = malloc(n_rows * n_out * sizeof(float)), *got = malloc(n_rows * n_out * sizeof(float));
            for (size_t r = 0; r < n_rows; r++)
                for (size_t o = 0; o < n_out; o++) ref[r * n_out + o] = quant_dot_scalar(type, w + o * rb, x + r * n_in, n_in);
            void *dw = dev_upload(w, n_out * rb);
            float *dx = dev_upload(x, n_rows * n_in * sizeof(float)), *dy = dev_poisoned(n_rows * n_out);
            char why[256] = "", what[48];
            CHECK_MSG(cuda_matmul_chunk(type, dw, n_out, n_in, dx, n_rows, dy, NULL, why, sizeof why) == 0, "%s", why);
            dev_download(got, dy, n_rows * n_out);
            snprintf(what, sizeof what, "thin %zux%zu", n_out, n_in);
            check_close(what, type, got, ref, n_rows * n_out, 1e-5);
            /* rows 64..76 and row 70 alone (chunk); rows 0..7 and row 70 by the decode product (8 rows: the same
             * thin kernel; 1 row: mmv_kernel, whose bits the thin kernel must reproduce) */
            for (int pass = 0; pass < 4; pass++) {
                const size_t r0 = pass == 0 ? 64 : pass == 2 ? 0 : 70, nr = pass == 0 ? 13 : pass == 2 ? 8 : 1;
                float *dy2 = dev_poisoned(nr * n_out), *sub = malloc(nr * n_out * sizeof(float));
                CHECK_MSG((pass < 2 ? cuda_matmul_chunk(type, dw, n_out, n_in, dx + r0 * n_in, nr, dy2, NULL, why, sizeof why)
                                    : cuda_matmul_decode(type, dw, n_out, n_in, dx + r0 * n_in, nr, dy2, NULL, NULL, why,
                                                         sizeof why)) == 0,
                          "%s", why);
                dev_download(sub, dy2, nr * n_out);
                CHECK_MSG(memcmp(sub, got + r0 * n_out, nr * n_out * sizeof(float)) == 0,
                          "thin chunk %s %zux%zu: %zu rows %s differ from the same rows among 77", quant_type_name(type),
                          n_out, n_in, nr, pass < 2 ? "alone" : "by the decode product");
                free(sub);
                cudaFree(dy2);
            }
            free(w), free(x), free(ref), free(got);
            cudaFree(dw), cudaFree(dx), cudaFree(dy);
        }
}

/* cuda_matmul_exact: float weights at 37 rows in one call, each row bit for bit what cuda_matmul_decode gives
 * it in 8-row calls (the 16-byte path: one thin launch; 313 wide: the decode launches), within 1e-5 of the
 * scalar dot; an integer type is refused. */
static void test_exact(void) {
    const size_t ins[] = {520, 2048, 313}, n_out = 77, n_rows = 37;
    for (int t = 0; t < 3; t++)
        for (int v = 0; v < 3; v++) {
            const uint32_t type = TYPES[t];
            const size_t n_in = ins[v];
            size_t rb;
            uint8_t *w = make_weights(type, n_out, n_in, &rb);
            float *x = malloc(n_rows * n_in * sizeof(float));
            fill(x, n_rows * n_in, 2.0);
            float *ref = malloc(n_rows * n_out * sizeof(float)), *got = malloc(n_rows * n_out * sizeof(float));
            float *dec = malloc(n_rows * n_out * sizeof(float));
            for (size_t r = 0; r < n_rows; r++)
                for (size_t o = 0; o < n_out; o++) ref[r * n_out + o] = quant_dot_scalar(type, w + o * rb, x + r * n_in, n_in);
            void *dw = dev_upload(w, n_out * rb);
            float *dx = dev_upload(x, n_rows * n_in * sizeof(float)), *dy = dev_poisoned(n_rows * n_out);
            float *dy2 = dev_poisoned(n_rows * n_out);
            char why[256] = "", what[48];
            CHECK_MSG(cuda_matmul_exact(type, dw, n_out, n_in, dx, n_rows, dy, NULL, why, sizeof why) == 0, "%s", why);
            for (size_t r0 = 0; r0 < n_rows; r0 += 8) {
                const size_t nr = n_rows - r0 < 8 ? n_rows - r0 : 8;
                CHECK_MSG(cuda_matmul_decode(type, dw, n_out, n_in, dx + r0 * n_in, nr, dy2 + r0 * n_out, NULL, NULL, why,
                                             sizeof why) == 0,
                          "%s", why);
            }
            dev_download(got, dy, n_rows * n_out);
            dev_download(dec, dy2, n_rows * n_out);
            snprintf(what, sizeof what, "exact x37/%zu", n_in);
            check_close(what, type, got, ref, n_rows * n_out, 1e-5);
            CHECK_MSG(memcmp(got, dec, n_rows * n_out * sizeof(float)) == 0,
                      "cuda_matmul_exact %s %zu wide differs from the 8-row decode products", quant_type_name(type), n_in);
            free(w), free(x), free(ref), free(got), free(dec);
            cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(dy2);
        }
    char why[256] = "";
    float *dy = dev_poisoned(4);
    CHECK(cuda_matmul_exact(QUANT_Q8_0, dy, 4, 32, dy, 1, dy, NULL, why, sizeof why) == -1 && why[0] != 0);
    cudaFree(dy);
}

/* The products of test_chunk_multi and test_chunk_seg: ns matrices (outs[i] x n_in, type) on the host and the
 * device, x of n_rows rows, the scratch, and each product's output twice, poisoned (seg[i].y: the call under
 * test's; own[i]: the product's own cuda_matmul_chunk_ws call's). */
typedef struct chunk_set {
    uint32_t type;
    size_t n_in, n_rows, ns, rb;
    float *x, *dx, *own[4];
    void *work, *dw[4];
    uint8_t *w[4];
    cuda_matmul_seg seg[4];
} chunk_set;

static void chunk_set_make(chunk_set *c, uint32_t type, const size_t *outs, size_t ns, size_t n_in, size_t n_rows) {
    memset(c, 0, sizeof *c);
    c->type = type, c->n_in = n_in, c->n_rows = n_rows, c->ns = ns;
    c->x = malloc(n_rows * n_in * sizeof(float));
    fill(c->x, n_rows * n_in, 2.0);
    c->dx = dev_upload(c->x, n_rows * n_in * sizeof(float));
    CU(cudaMalloc(&c->work, cuda_matmul_chunk_work_bytes(type, n_in, n_rows) + 256));
    for (size_t i = 0; i < ns; i++) {
        c->w[i] = make_weights(type, outs[i], n_in, &c->rb);
        c->dw[i] = dev_upload(c->w[i], outs[i] * c->rb);
        c->seg[i] = (cuda_matmul_seg){c->dw[i], outs[i], dev_poisoned(n_rows * outs[i])};
        c->own[i] = dev_poisoned(n_rows * outs[i]);
    }
}

/* Every product's output (seg[i].y) fully written and bit for bit its own cuda_matmul_chunk_ws call's, and the
 * output (last row, o_ref(n_out)) within 1e-5 of the CPU's integer oracle (decode_ref); then everything freed. */
static void chunk_set_check_free(chunk_set *c, const char *what, size_t (*o_ref)(size_t n_out)) {
    const size_t n_rows = c->n_rows, n_in = c->n_in;
    char why[256] = "";
    for (size_t i = 0; i < c->ns; i++) {
        const size_t no = c->seg[i].n_out;
        CHECK_MSG(cuda_matmul_chunk_ws(c->type, c->dw[i], no, n_in, c->dx, n_rows, c->own[i], c->work, NULL, why,
                                       sizeof why) == 0,
                  "%s", why);
        float *got = malloc(n_rows * no * sizeof(float)), *one = malloc(n_rows * no * sizeof(float));
        dev_download(got, c->seg[i].y, n_rows * no);
        dev_download(one, c->own[i], n_rows * no);
        size_t nan = 0;
        for (size_t j = 0; j < n_rows * no; j++) nan += isnan(got[j]) != 0;
        CHECK_MSG(nan == 0 && memcmp(got, one, n_rows * no * sizeof(float)) == 0,
                  "%s %s x%zu, n_in %zu, matrix %zu of %zu (%zu outputs): %zu not written, or differs from its own "
                  "call", what, quant_type_name(c->type), n_rows, n_in, i, c->ns, no, nan);
        const size_t r = n_rows - 1, o = o_ref(no);
        const float ref = decode_ref(c->type, c->w[i] + o * c->rb, c->x + r * n_in, n_in);
        CHECK_MSG(fabsf(got[r * no + o] - ref) <= 1e-5f * (fabsf(ref) + 1.0f), "%s %s: %g against the CPU's %g",
                  what, quant_type_name(c->type), got[r * no + o], ref);
        free(got), free(one), free(c->w[i]);
        cudaFree(c->dw[i]), cudaFree(c->seg[i].y), cudaFree(c->own[i]);
    }
    free(c->x), cudaFree(c->dx), cudaFree(c->work);
}

static size_t o_half(size_t n_out) { return n_out / 2; }
static size_t o_last(size_t n_out) { return n_out - 1; }

/* cuda_matmul_chunk_ws_multi: 2..4 integer products of the same rows with the 8-bit rows made once (the sharing
 * switch on in every other case, off in the rest), each output bit for bit the cuda_matmul_chunk_ws call of its
 * matrix alone (which quantises for itself), at 3 / 17 / 32 / 70 rows
 * (the row-tile forms and the wide 64+ tile), Q8_0 and Q4_K; a sampled output within 1e-5 of the CPU's integer
 * oracle (decode_ref); outputs poisoned first. */
static void test_chunk_multi(void) {
    const uint32_t types[2] = {QUANT_Q8_0, QUANT_Q4_K};
    const size_t outs[4] = {300, 45, 16, 130}, rows[4] = {3, 17, 32, 70};
    size_t cases = 0;
    for (int t = 0; t < 2; t++)
        for (int v = 0; v < 4; v++) {
            chunk_set c;
            chunk_set_make(&c, types[t], outs, 2 + (size_t)(v % 3), 2048, rows[v]);
            char why[256] = "";
            cuda_matmul_share_set((int)(cases % 2)); /* the shared copy and the calls one by one, in turn */
            CHECK_MSG(cuda_matmul_chunk_ws_multi(c.type, c.seg, c.ns, c.n_in, c.dx, c.n_rows, c.work, NULL, why,
                                                 sizeof why) == 0,
                      "%s", why);
            cuda_matmul_share_set(-1);
            chunk_set_check_free(&c, "chunk_ws_multi", o_half);
            cases++;
        }
    printf("  chunk_ws_multi: %zu cases (Q8_0 / Q4_K, 2..4 matrices, 3..70 rows) bit-identical to the calls alone\n",
           cases);
}

/* cuda_matmul_chunk_ws_multi / _pair with CLOVER_CUDA_IG_SEG (cuda_ig_seg_set(1)): dense Q8_0 products of the same
 * rows in one igemm_q8_kernel launch, product after product along grid.y. Each product's every output must be the
 * bits of its own cuda_matmul_chunk_ws call (the form off: one launch a product), at 2..32 rows (the 8/16/32-row
 * tiles, a partial last row tile), 2..4 products of 16..12,288 outputs (1 tile and many; 130 and 45: a partial
 * last output tile), n_in 2048 and 2080 (65 blocks: rows of 2,210 bytes, so the products' weight rows lie at every
 * 2-byte alignment, and a last 256-value chunk of one block); outputs poisoned first (all written); one of them
 * within 1e-5 of the CPU's scalar dot; the launch counted (the form was taken) and none past 63 rows. */
static void test_chunk_seg(void) {
    static const size_t sets[4][4] = {{8192, 4096, 32, 32}, {512, 32, 32, 0}, {130, 45, 16, 0}, {12288, 2048, 0, 0}};
    static const size_t rows[] = {2, 5, 8, 9, 16, 17, 31, 32};
    size_t cases = 0;
    for (size_t si = 0; si < 4; si++)
        for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++) {
            size_t ns = 0;
            while (ns < 4 && sets[si][ns]) ns++;
            chunk_set c;
            chunk_set_make(&c, QUANT_Q8_0, sets[si], ns, (si + ri) % 2 ? 2080 : 2048, rows[ri]);
            char why[256] = "";
            const unsigned long long l0 = cuda_ig_seg_launches();
            cuda_ig_seg_set(1);
            const int rc = ns == 2 && cases % 2
                               ? cuda_matmul_chunk_ws_pair(c.type, c.dw[0], c.seg[0].n_out, c.dw[1], c.seg[1].n_out,
                                                           c.n_in, c.dx, c.n_rows, c.seg[0].y, c.seg[1].y, c.work,
                                                           NULL, why, sizeof why)
                               : cuda_matmul_chunk_ws_multi(c.type, c.seg, ns, c.n_in, c.dx, c.n_rows, c.work, NULL,
                                                            why, sizeof why);
            cuda_ig_seg_set(-1);
            CHECK_MSG(rc == 0, "%s", why);
            CHECK_MSG(cuda_ig_seg_launches() == l0 + 1, "%zu products of %zu rows: the segmented launch not taken", ns,
                      c.n_rows);
            chunk_set_check_free(&c, "segmented", o_last);
            cases++;
        }
    /* past the row-tile kernel's rows (the wide form's 64+): never segmented */
    {
        const size_t outs[2] = {64, 64};
        chunk_set c;
        chunk_set_make(&c, QUANT_Q8_0, outs, 2, 2048, 64);
        char why[256] = "";
        const unsigned long long l0 = cuda_ig_seg_launches();
        cuda_ig_seg_set(1);
        CHECK_MSG(cuda_matmul_chunk_ws_multi(c.type, c.seg, 2, c.n_in, c.dx, c.n_rows, c.work, NULL, why,
                                             sizeof why) == 0,
                  "%s", why);
        cuda_ig_seg_set(-1);
        CHECK(cuda_ig_seg_launches() == l0);
        chunk_set_check_free(&c, "64 rows", o_last);
    }
    printf("  segmented Q8_0 launches: %zu cases (2..4 products, 2..32 rows, n_in 2048 / 2080) bit-identical to the "
           "launches one by one\n",
           cases);
}

/* cuda_matmul_exact_multi (matmul_exact.cu): the router (256 outputs) and a 1-output gate logit, or 3 matrices, in
 * one launch at 2..512 rows (4 rows a warp: a partial last group), 520 / 2048 / 4104 wide (a lane past the last element; two
 * slices of the weights in registers, the second partial): every output bit for bit what cuda_matmul_decode gives
 * its row in 8-row calls, and within 1e-5 of the CPU's scalar dot (quant_dot_scalar); bad arguments refused. Each
 * case in three forms: 4 rows a warp, the row blocks of CLOVER_CUDA_EXACT_RB (a partial last row block and a
 * partial last block of 16 outputs at 300 rows and 45 / 3 / 130 outputs), and the register tiles of
 * CLOVER_CUDA_EXACT_TILE at every row count (partial 4-row and 8-output tiles: 9, 17, 100, 300 rows; 257, 45, 3,
 * 130 outputs, a tile across two matrices). */
static void test_exact_multi(void) {
    const size_t ins[] = {520, 2048, 4104}, rows[] = {2, 9, 16, 17, 32, 100, 300, 512};
    const size_t outs[2][3] = {{256, 1, 0}, {45, 3, 130}};
    size_t cases = 0;
    for (int blocks = 0; blocks < 3; blocks++) {
        for (int t = 0; t < 3; t++)
            for (int v = 0; v < 3; v++)
                for (int form = 0; form < 2; form++) {
                    const uint32_t type = TYPES[t];
                    const size_t n_in = ins[v], ns = outs[form][2] ? 3 : 2;
                    const size_t n_rows = rows[(t * 3 + v + form + blocks) % 8];
                    cuda_exact_rb_set(blocks == 1);
                    cuda_exact_tile_set(blocks == 2);
                    size_t rb = 0;
                    uint8_t *w[3];
                    void *dw[3];
                    float *dy[3], *dy2[3];
                    cuda_matmul_seg seg[3];
                    float *x = malloc(n_rows * n_in * sizeof(float));
                    fill(x, n_rows * n_in, 2.0);
                    float *dx = dev_upload(x, n_rows * n_in * sizeof(float));
                    for (size_t i = 0; i < ns; i++) {
                        const size_t no = outs[form][i];
                        w[i] = make_weights(type, no, n_in, &rb);
                        dw[i] = dev_upload(w[i], no * rb);
                        dy[i] = dev_poisoned(n_rows * no), dy2[i] = dev_poisoned(n_rows * no);
                        seg[i] = (cuda_matmul_seg){dw[i], no, dy[i]};
                    }
                    char why[256] = "";
                    CHECK_MSG(cuda_matmul_exact_multi(type, seg, ns, n_in, dx, n_rows, NULL, why, sizeof why) == 0,
                              "%s", why);
                    for (size_t i = 0; i < ns; i++) {
                        const size_t no = outs[form][i];
                        for (size_t r0 = 0; r0 < n_rows; r0 += 8) {
                            const size_t nr = n_rows - r0 < 8 ? n_rows - r0 : 8;
                            CHECK_MSG(cuda_matmul_decode(type, dw[i], no, n_in, dx + r0 * n_in, nr, dy2[i] + r0 * no,
                                                         NULL, NULL, why, sizeof why) == 0,
                                      "%s", why);
                        }
                        float *got = malloc(n_rows * no * sizeof(float)), *dec = malloc(n_rows * no * sizeof(float));
                        float *ref = malloc(n_rows * no * sizeof(float));
                        dev_download(got, dy[i], n_rows * no);
                        dev_download(dec, dy2[i], n_rows * no);
                        for (size_t r = 0; r < n_rows; r++)
                            for (size_t o = 0; o < no; o++)
                                ref[r * no + o] = quant_dot_scalar(type, w[i] + o * rb, x + r * n_in, n_in);
                        char what[64];
                        snprintf(what, sizeof what, "exact_multi %zu/%zu x%zu", i, ns, n_rows);
                        check_close(what, type, got, ref, n_rows * no, 1e-5);
                        CHECK_MSG(memcmp(got, dec, n_rows * no * sizeof(float)) == 0,
                                  "cuda_matmul_exact_multi%s %s %zu wide, %zu rows, matrix %zu of %zu (%zu outputs): "
                                  "differs from the 8-row decode products",
                                  blocks == 2 ? " (register tiles)" : blocks ? " (row blocks)" : "",
                                  quant_type_name(type), n_in, n_rows, i, ns, no);
                        free(got), free(dec), free(ref), free(w[i]);
                        cudaFree(dw[i]), cudaFree(dy[i]), cudaFree(dy2[i]);
                    }
                    free(x), cudaFree(dx);
                    cases++;
                }
    }
    cuda_exact_rb_set(-1);
    cuda_exact_tile_set(-1);
    printf("  exact_multi: %zu cases (F32/F16/BF16, 520/2048/4104 wide, 2..512 rows, three forms) bit-identical to the "
           "decode form\n",
           cases);
    char why[256] = "";
    float *d = dev_poisoned(64);
    cuda_matmul_seg sg = {d, 4, d};
    CHECK(cuda_matmul_exact_multi(QUANT_Q8_0, &sg, 1, 32, d, 1, NULL, why, sizeof why) == -1 && why[0] != 0);
    why[0] = 0;
    CHECK(cuda_matmul_exact_multi(QUANT_F32, &sg, 0, 8, d, 1, NULL, why, sizeof why) == -1 && why[0] != 0);
    why[0] = 0;
    CHECK(cuda_matmul_exact_multi(QUANT_F32, &sg, 1, 8, d, 0, NULL, why, sizeof why) == -1 && why[0] != 0);
    cudaFree(d);
}

/* The integer path at every row count 1..64 and with varied neighbours:
 * rows r0 .. r0 + n - 1 of a 72-row x (r0 = 7n mod 8), one launch each
 * (decode for n <= 8, chunk without and with scratch for every n, so the
 * three meet at 1..8), each row bit for bit the same row computed alone by
 * the 1-row decode product (itself within 1e-5 of the CPU integer oracle);
 * row 5 carries an infinity (its outputs NaN, its neighbours untouched). Also 2048 wide
 * (every type 16-byte aligned; 8 Q8_0 blocks a chunk) and 4096 wide for
 * Q8_0 (the 8-bit rows of 32 rows in shared memory). */
static void invariance_case(uint32_t type, size_t n_in) {
    const size_t n_out = 45, n_x = 72;
    size_t rb;
    uint8_t *w = make_weights(type, n_out, n_in, &rb);
    float *x = malloc(n_x * n_in * sizeof(float));
    fill(x, n_x * n_in, 2.0);
    x[5 * n_in + n_in / 2] = INFINITY;
    float *ref = malloc(n_x * n_out * sizeof(float)), *got = malloc(64 * n_out * sizeof(float));
    float *cpu = malloc(n_x * n_out * sizeof(float));
    for (size_t r = 0; r < n_x; r++)
        for (size_t o = 0; o < n_out; o++) cpu[r * n_out + o] = decode_ref(type, w + o * rb, x + r * n_in, n_in);
    void *dw = dev_upload(w, n_out * rb);
    float *dx = dev_upload(x, n_x * n_in * sizeof(float)), *dy = dev_poisoned(64 * n_out);
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_matmul_decode_work_bytes(type, n_in, 8) + 256));
    size_t bad = 0, nan_rows = 0;
    char why[256] = "";
    /* the reference bits: each row alone through the decode product, close to the CPU's (row 5: NaN on both) */
    for (size_t r = 0; r < n_x; r++) {
        CHECK_MSG(cuda_matmul_decode(type, dw, n_out, n_in, dx + r * n_in, 1, dy, work, NULL, why, sizeof why) == 0,
                  "%s", why);
        dev_download(ref + r * n_out, dy, n_out);
    }
    for (size_t o = 0; o < n_out; o++) CHECK(isnan(ref[5 * n_out + o]) && isnan(cpu[5 * n_out + o]));
    check_close("rows alone", type, ref, cpu, 5 * n_out, 1e-5);
    check_close("rows alone", type, ref + 6 * n_out, cpu + 6 * n_out, (n_x - 6) * n_out, 1e-5);
    void *cwork = NULL; /* cuda_matmul_chunk_ws's 8-bit rows */
    CU(cudaMalloc(&cwork, cuda_matmul_chunk_work_bytes(type, n_in, 64) + 256));
    for (int chunk = 0; chunk < 3; chunk++)
        for (size_t n = 1; n <= (chunk ? 64 : 8); n++) {
            const size_t r0 = (7 * n) % 8;
            CU(cudaMemset(dy, 0xFF, 64 * n_out * sizeof(float)));
            const float *xs = dx + r0 * n_in;
            const int rc = chunk == 2   ? cuda_matmul_chunk_ws(type, dw, n_out, n_in, xs, n, dy, cwork, NULL, why,
                                                               sizeof why)
                           : chunk == 1 ? cuda_matmul_chunk(type, dw, n_out, n_in, xs, n, dy, NULL, why, sizeof why)
                                        : cuda_matmul_decode(type, dw, n_out, n_in, xs, n, dy, work, NULL, why,
                                                             sizeof why);
            CHECK_MSG(rc == 0, "%s", why);
            dev_download(got, dy, n * n_out);
            for (size_t i = 0; i < n * n_out; i++) {
                const float g = got[i], r = ref[r0 * n_out + i];
                if (isnan(g) && isnan(r)) continue;
                if (memcmp(&g, &r, sizeof g) != 0) bad++;
            }
            if (r0 <= 5 && 5 < r0 + n) nan_rows += isnan(got[(5 - r0) * n_out]) != 0;
        }
    CHECK_MSG(bad == 0, "%s n_in %zu: %zu outputs over row counts 1..64 differ from the same rows alone",
              quant_type_name(type), n_in, bad);
    CHECK(nan_rows > 0);
    printf("  rows 1..64   %-5s n_in=%-5zu decode, chunk, chunk_ws: every row bit-identical to itself alone\n",
           quant_type_name(type), n_in);
    free(w), free(x), free(ref), free(got), free(cpu);
    cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(work), cudaFree(cwork);
}

static void test_row_invariance(void) {
    static const uint32_t T[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    for (int t = 0; t < 4; t++) {
        invariance_case(T[t], n_in_for(T[t]));
        invariance_case(T[t], 2048);
    }
    invariance_case(QUANT_Q8_0, 4096);
}

/* ---- the few-row kernel (matmul_igemm_few.cu, CLOVER_CUDA_IGEMM_FEW) against the igemm kernels ---- */

/* The switch as the environment sets it (the other cases run with it: CLOVER_CUDA_IGEMM_FEW=1 runs the whole
 * test through the few-row kernel wherever it applies). */
static void few_restore(void) {
    const char *e = getenv("CLOVER_CUDA_IGEMM_FEW");
    cuda_igemm_few_set(e && strcmp(e, "1") == 0);
}

/* Bit for bit, or both NaN (row 5 of the inputs carries an infinity). */
static size_t few_diff(const float *a, const float *b, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i])) continue;
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) bad++;
    }
    return bad;
}

/* Dense, cuda_matmul_chunk_ws at rows 1..32 (rows r0 .. r0 + n - 1 of a 40-row x, r0 = 5n mod 8): the few-row
 * kernel's outputs equal matmul_igemm.cu's (itself each row's bits alone: test_row_invariance), every output
 * written (poisoned before each call). */
static void few_dense_case(uint32_t type, size_t n_in, size_t n_out) {
    const size_t n_x = 40;
    size_t rb;
    uint8_t *w = make_weights(type, n_out, n_in, &rb);
    float *x = malloc(n_x * n_in * sizeof(float));
    fill(x, n_x * n_in, 2.0);
    x[5 * n_in + n_in / 3] = INFINITY;
    float *old = malloc(32 * n_out * sizeof(float)), *got = malloc(32 * n_out * sizeof(float));
    void *dw = dev_upload(w, n_out * rb);
    float *dx = dev_upload(x, n_x * n_in * sizeof(float)), *dy = dev_poisoned(32 * n_out), *dy2 = dev_poisoned(32 * n_out);
    /* the pair (cuda_matmul_chunk_ws_pair): these weights and the same from row 3 on (n_out - 3 outputs: output o
     * is output o + 3 of the first), in both orders, the switch on and off */
    const void *dw3 = (const uint8_t *)dw + 3 * rb;
    float *p1 = malloc(32 * n_out * sizeof(float)), *p2 = malloc(32 * n_out * sizeof(float));
    size_t bad_pair = 0;
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_matmul_chunk_work_bytes(type, n_in, 32) + 256));
    char why[256] = "";
    size_t bad = 0, unwritten = 0;
    const int small = getenv("CLOVER_TEST_SMALL") != NULL; /* under compute-sanitizer: rows 1, 9, 17, 25 */
    for (size_t n = 1; n <= 32; n += small ? 8 : 1) {
        const size_t r0 = (5 * n) % 8;
        for (int few = 0; few < 2; few++) {
            cuda_igemm_few_set(few);
            CU(cudaMemset(dy, 0xFF, 32 * n_out * sizeof(float)));
            CHECK_MSG(cuda_matmul_chunk_ws(type, dw, n_out, n_in, dx + r0 * n_in, n, dy, work, NULL, why, sizeof why) == 0,
                      "%s", why);
            dev_download(few ? got : old, dy, n * n_out);
        }
        bad += few_diff(got, old, n * n_out);
        for (int few = 0; few < 2; few++)
            for (int order = 0; order < 2; order++) {
                cuda_igemm_few_set(few);
                CU(cudaMemset(dy, 0xFF, 32 * n_out * sizeof(float)));
                CU(cudaMemset(dy2, 0xFF, 32 * n_out * sizeof(float)));
                const float *xs = dx + r0 * n_in;
                const int rc = order ? cuda_matmul_chunk_ws_pair(type, dw3, n_out - 3, dw, n_out, n_in, xs, n, dy2, dy,
                                                                 work, NULL, why, sizeof why)
                                     : cuda_matmul_chunk_ws_pair(type, dw, n_out, dw3, n_out - 3, n_in, xs, n, dy, dy2,
                                                                 work, NULL, why, sizeof why);
                CHECK_MSG(rc == 0, "%s", why);
                dev_download(p1, dy, n * n_out);
                dev_download(p2, dy2, n * (n_out - 3));
                bad_pair += few_diff(p1, old, n * n_out);
                for (size_t r = 0; r < n; r++) bad_pair += few_diff(p2 + r * (n_out - 3), old + r * n_out + 3, n_out - 3);
            }
        few_restore();
        for (size_t r = 0; r < n; r++)
            if (r0 + r != 5) /* the infinity's row is NaN on both */
                for (size_t o = 0; o < n_out; o++) unwritten += isnan(got[r * n_out + o]) != 0;
    }
    few_restore();
    CHECK_MSG(bad == 0 && unwritten == 0, "few dense %s n_in %zu n_out %zu: %zu outputs differ from igemm, %zu NaN",
              quant_type_name(type), n_in, n_out, bad, unwritten);
    CHECK_MSG(bad_pair == 0, "few dense pair %s n_in %zu n_out %zu: %zu outputs differ from igemm",
              quant_type_name(type), n_in, n_out, bad_pair);
    printf("  few dense    %-5s n_in=%-5zu n_out=%-4zu rows 1..32, single and pairs: bit-identical to igemm\n", quant_type_name(type),
           n_in, n_out);
    free(w), free(x), free(old), free(got), free(p1), free(p2);
    cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(dy2), cudaFree(work);
}

/* Grouped experts (and the gate + up pair, cuda_moe_chunk_pair): n_rows rows routed to n_used of n_used + 1 experts (k of them a row, distinct, uneven counts: expert
 * (b_r + j) mod n_used with b_r quadratic in r), x per row or per slot; the few-row kernel's tiles of <= 32
 * slots against matmul_igemm.cu's (wide tiles of 8, or tiles of 8..32), bit for bit. */
static void few_moe_case(uint32_t type, size_t n_in, size_t n_out, size_t n_rows, size_t n_used, int x_per_slot) {
    const size_t n_expert = n_used + 1, k = n_used < 4 ? n_used : 4, n_slots = n_rows * k; /* one expert unused */
    size_t rb;
    uint8_t *w = make_weights(type, (n_expert + 1) * n_out, n_in, &rb); /* + 1: the pair's up starts one on */
    const size_t n_x = x_per_slot ? n_slots : n_rows;
    float *x = malloc(n_x * n_in * sizeof(float));
    fill(x, n_x * n_in, 2.0);
    int32_t *ids = malloc(n_slots * sizeof(int32_t));
    for (size_t r = 0; r < n_rows; r++) {
        const size_t b = (r * r * 7 + r / 3) % n_used;
        for (size_t j = 0; j < k; j++) ids[r * k + j] = (int32_t)((b + j) % n_used);
    }
    float *old = malloc(n_slots * n_out * sizeof(float)), *got = malloc(n_slots * n_out * sizeof(float));
    cuda_moe_args a = {.type = type, .expert_stride = n_out * rb, .n_expert = n_expert, .n_out = n_out, .n_in = n_in,
                       .n_rows = n_rows, .k = k, .x_per_slot = x_per_slot};
    a.w = dev_upload(w, (n_expert + 1) * n_out * rb);
    a.x = dev_upload(x, n_x * n_in * sizeof(float));
    a.ids = dev_upload(ids, n_slots * sizeof(int32_t));
    float *dy = dev_poisoned(n_slots * n_out);
    a.y = dy;
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_moe_chunk_work_bytes(&a) + 256));
    char why[256] = "";
    for (int few = 0; few < 2; few++) {
        cuda_igemm_few_set(few);
        CU(cudaMemset(dy, 0xFF, n_slots * n_out * sizeof(float)));
        CHECK_MSG(cuda_moe_chunk(&a, work, NULL, why, sizeof why) == 0, "%s", why);
        dev_download(few ? got : old, dy, n_slots * n_out);
    }
    /* the K-quant super-block's sums without ig_k_superblock2 (CLOVER_CUDA_IG_K2=0): the same bits */
    cuda_igemm_few_set(0);
    cuda_ig_k2_set(0);
    CU(cudaMemset(dy, 0xFF, n_slots * n_out * sizeof(float)));
    CHECK_MSG(cuda_moe_chunk(&a, work, NULL, why, sizeof why) == 0, "%s", why);
    cuda_ig_k2_set(-1);
    {
        float *k1 = malloc(n_slots * n_out * sizeof(float));
        dev_download(k1, dy, n_slots * n_out);
        const size_t bad_k2 = few_diff(k1, old, n_slots * n_out);
        CHECK_MSG(bad_k2 == 0, "moe %s n_in %zu n_out %zu rows %zu experts %zu: K2 off / on differ at %zu outputs",
                  quant_type_name(type), n_in, n_out, n_rows, n_used, bad_k2);
        free(k1);
    }
    /* the pair (gate = these weights, up = the same bytes one expert on): one launch under the switch, two
     * calls without it; both bit for bit two separate old calls */
    const void *w_up = (const uint8_t *)a.w + n_out * rb;
    float *old_u = malloc(n_slots * n_out * sizeof(float)), *got_g = malloc(n_slots * n_out * sizeof(float));
    float *got_u = malloc(n_slots * n_out * sizeof(float)), *dyu = dev_poisoned(n_slots * n_out);
    cuda_moe_args au = a;
    au.w = w_up;
    au.y = dyu;
    cuda_igemm_few_set(0);
    CHECK_MSG(cuda_moe_chunk(&au, work, NULL, why, sizeof why) == 0, "%s", why);
    dev_download(old_u, dyu, n_slots * n_out);
    size_t bad_pair = 0;
    for (int few = 0; few < 4; few++) { /* the two calls, the few-row kernel's one launch, the shared grouping in
                                          * one launch (grid.z the product) and in two */
        cuda_igemm_few_set(few == 1);
        cuda_matmul_share_set(few >= 2);
        cuda_moe_pair1_set(few == 2);
        CU(cudaMemset(dy, 0xFF, n_slots * n_out * sizeof(float)));
        CU(cudaMemset(dyu, 0xFF, n_slots * n_out * sizeof(float)));
        CHECK_MSG(cuda_moe_chunk_pair(&a, w_up, dyu, work, NULL, why, sizeof why) == 0, "%s", why);
        dev_download(got_g, dy, n_slots * n_out);
        dev_download(got_u, dyu, n_slots * n_out);
        bad_pair += few_diff(got_g, old, n_slots * n_out) + few_diff(got_u, old_u, n_slots * n_out);
    }
    few_restore();
    cuda_matmul_share_set(-1);
    cuda_moe_pair1_set(-1);
    CHECK_MSG(bad_pair == 0, "few moe pair %s n_in %zu n_out %zu rows %zu experts %zu: %zu outputs differ",
              quant_type_name(type), n_in, n_out, n_rows, n_used, bad_pair);
    free(old_u), free(got_g), free(got_u);
    cudaFree(dyu);
    size_t unwritten = 0;
    for (size_t i = 0; i < n_slots * n_out; i++) unwritten += isnan(got[i]) != 0;
    const size_t bad = few_diff(got, old, n_slots * n_out);
    CHECK_MSG(bad == 0 && unwritten == 0,
              "few moe %s n_in %zu n_out %zu rows %zu experts %zu%s: %zu outputs differ from igemm, %zu NaN",
              quant_type_name(type), n_in, n_out, n_rows, n_used, x_per_slot ? " per slot" : "", bad, unwritten);
    free(w), free(x), free(ids), free(old), free(got);
    cudaFree((void *)a.w), cudaFree((void *)a.x), cudaFree((void *)a.ids), cudaFree(dy), cudaFree(work);
}

/* Every integer type; n_in: Q8_0 a partial last chunk (608), 2048, 4096 and 96 (< 8 blocks), and >= 4096 outputs
 * (the 32-output blocks); K-quants 1, 2, 3, 4, 8 and 22
 * super-blocks (2, 4 and 8 slots a round, odd counts, several rounds); odd n_out. */
static void test_few_rows(void) {
    static const uint32_t T[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    static const size_t NQ8[] = {32 * 19, 2048, 4096, 32 * 3}, NK[] = {256, 512, 768, 1024, 2048, 256 * 22};
    for (int t = 0; t < 4; t++) {
        const int q8 = T[t] == QUANT_Q8_0;
        for (int v = 0; v < (q8 ? 4 : 6); v++) few_dense_case(T[t], q8 ? NQ8[v] : NK[v], v & 1 ? 77 : 45);
    }
    few_dense_case(QUANT_Q8_0, 32 * 19, 4096 + 45); /* Q8_0 from 4096 outputs: 2 m-tiles a warp */
    few_dense_case(QUANT_Q8_0, 2048, 4096);
    size_t cases = 0;
    const int small = getenv("CLOVER_TEST_SMALL") != NULL; /* under compute-sanitizer: 1, 3, 5, 13 experts */
    for (int t = 0; t < 4; t++) {
        const int q8 = T[t] == QUANT_Q8_0;
        for (size_t used = 1; used <= 16; used += used < 4 ? (small ? 2 : 1) : (small ? 8 : 4)) {
            static const size_t R[] = {1, 2, 7, 32};
            for (int ri = 0; ri < 4; ri++, cases++) {
                const size_t n_in = q8 ? (ri & 1 ? 2048 : 32 * 19) : NK[(ri + used) % 6];
                few_moe_case(T[t], n_in, ri & 1 ? 77 : 45, R[ri], used, (ri + (int)used) & 1);
            }
        }
    }
    few_moe_case(QUANT_Q4_K, 2048, 512, 32, 8, 0); /* the preview's gate/up shape: 32 rows on 8 experts */
    few_moe_case(QUANT_Q4_K, 512, 2048, 32, 8, 1); /* and its down */
    printf("  few moe      %zu cases (1..16 experts, 1..32 rows, Q8_0/Q4_K/Q5_K/Q6_K), single and gate + up pair: "
           "bit-identical to igemm\n",
           cases + 2);
}

/* ---- the few-row product with the weights as the mma A operand (matmul_mma_rows.cu, CLOVER_CUDA_MMA_ROWS) ---- */

/* Dense Q8_0 through cuda_matmul_chunk_ws at rows 1..32 (rows r0 .. r0 + n - 1 of a 40-row x, r0 = 3n mod 8; row 5
 * carries an infinity): with the switch on, every output bit for bit the chunk form's with it off (matmul_igemm.cu)
 * and, at <= 8 rows, the dp4a decode form's (cuda_matmul_decode); every output written (poisoned before each call);
 * the sampled outputs of the 32-row call within 1e-5 of the CPU's scalar integer oracle (decode_ref:
 * quant_act_quantize_scalar + quant_act_dot_scalar, the independent reference). off: the weights start `off` rows
 * into the upload (a pointer 2-byte aligned only: pieces across the tensor's first bytes), and the pair
 * (cuda_matmul_chunk_ws_pair) at 16 and 32 rows. The shapes pick each of the kernel's layouts: n_out < 4224 (16 outputs a
 * warp, K over 8 warps), < 16896 (32, 8 warps), < 33792 (32, 4 warps), more (32, 2 warps); n_in with a last
 * chunk of 1..7 blocks (some warps idle there) or whole chunks. */
/* Sampled outputs of a 32-row Q8_0 call (got: rows 0..31 of x, row 5 holding an infinity) against the CPU's
 * integer oracle: the normalised error (checked <= 1e-5) and how many outputs it covered (*ns). */
static double q8_rows_vs_cpu(const char *what, const uint8_t *w, size_t off, size_t rb, const float *x, size_t n_in,
                             size_t n_out, const float *got, size_t *ns_out) {
    const size_t step = n_out > 600 ? n_out / 300 : 1;
    size_t ns = 0, nan_ok = 0;
    double e2 = 0, r2 = 0;
    for (size_t r = 0; r < 32; r++)
        for (size_t o = 0; o < n_out; o += step) {
            const float ref = decode_ref(QUANT_Q8_0, w + (off + o) * rb, x + r * n_in, n_in), g = got[r * n_out + o];
            if (r == 5) {
                nan_ok += isnan(ref) && isnan(g);
                continue;
            }
            e2 += ((double)g - ref) * ((double)g - ref), r2 += (double)ref * ref;
            ns++;
        }
    const double err = sqrt(e2 / (r2 > 0 ? r2 : 1));
    CHECK_MSG(err <= 1e-5 && r2 > 0, "%s: normalised error %.3g against the CPU's integer oracle", what, err);
    CHECK_MSG(nan_ok == (n_out + step - 1) / step, "%s: the infinity's row is not NaN (%zu)", what, nan_ok);
    if (ns_out) *ns_out = ns;
    return err;
}

static void mma_rows_case(size_t n_in, size_t n_out, size_t off) {
    const size_t n_x = 40, nr = n_out + off;
    size_t rb;
    uint8_t *w = make_weights(QUANT_Q8_0, nr, n_in, &rb);
    float *x = malloc(n_x * n_in * sizeof(float));
    fill(x, n_x * n_in, 2.0);
    x[5 * n_in + n_in / 3] = INFINITY;
    float *old = malloc(32 * n_out * sizeof(float)), *got = malloc(32 * n_out * sizeof(float));
    float *dec = malloc(32 * n_out * sizeof(float));
    uint8_t *dwall = dev_upload(w, nr * rb);
    const uint8_t *dw = dwall + off * rb;
    float *dx = dev_upload(x, n_x * n_in * sizeof(float)), *dy = dev_poisoned(32 * n_out), *dy2 = dev_poisoned(32 * n_out);
    void *work = NULL, *dwork = NULL;
    CU(cudaMalloc(&work, cuda_matmul_chunk_work_bytes(QUANT_Q8_0, n_in, 32) + 256));
    CU(cudaMalloc(&dwork, cuda_matmul_decode_work_bytes(QUANT_Q8_0, n_in, 8) + 256));
    char why[256] = "", what[64];
    snprintf(what, sizeof what, "mma rows Q8_0 %zux%zu%s", n_in, n_out, off ? " offset" : "");
    size_t bad = 0, bad_dec = 0, unwritten = 0, bad_pair = 0, runs = 0;
    const int small = getenv("CLOVER_TEST_SMALL") != NULL; /* under compute-sanitizer: rows 1, 2, 8, 9, 16, 17, 32 */
    for (size_t n = 1; n <= 32; n++) {
        if (small && n != 1 && n != 2 && n != 8 && n != 9 && n != 16 && n != 17 && n != 32) continue;
        const size_t r0 = (3 * n) % 8;
        const float *xs = dx + r0 * n_in;
        for (int on = 0; on < 2; on++) {
            cuda_mma_rows_set(on ? 32 : 0);
            CHECK_MSG(cuda_mma_rows_takes(QUANT_Q8_0, n) == on, "%s: the switch does not say whether it takes %zu rows",
                      what, n);
            CU(cudaMemset(dy, 0xFF, 32 * n_out * sizeof(float)));
            CHECK_MSG(cuda_matmul_chunk_ws(QUANT_Q8_0, dw, n_out, n_in, xs, n, dy, work, NULL, why, sizeof why) == 0,
                      "%s", why);
            dev_download(on ? got : old, dy, n * n_out);
        }
        bad += few_diff(got, old, n * n_out);
        if (n <= CUDA_MATMUL_DECODE_MAX_ROWS) {
            CU(cudaMemset(dy, 0xFF, 32 * n_out * sizeof(float)));
            CHECK_MSG(cuda_matmul_decode(QUANT_Q8_0, dw, n_out, n_in, xs, n, dy, dwork, NULL, why, sizeof why) == 0,
                      "%s", why);
            dev_download(dec, dy, n * n_out);
            bad_dec += few_diff(got, dec, n * n_out);
        }
        for (size_t r = 0; r < n; r++)
            if (r0 + r != 5) /* the infinity's row is NaN on every form */
                for (size_t o = 0; o < n_out; o++) unwritten += isnan(got[r * n_out + o]) != 0;
        runs++;
    }
    /* the 32-row call's outputs against the CPU (got holds it): rows 0..31 of x from r0 = 0, row 5 NaN */
    {
        size_t ns = 0;
        const double err = q8_rows_vs_cpu(what, w, off, rb, x, n_in, n_out, got, &ns);
        printf("  %-34s rows 1..32 bit-identical to the chunk form (%zu calls), CPU err %.2g (%zu outputs)\n", what,
               runs, err, ns);
    }
    /* the pair: these weights and the same from output 3 on, one quantisation of x, the switch on; 16 rows (two
     * row tiles) against the 16-row single call, 32 rows (four) against the 32-row one */
    for (size_t pr = 16; pr <= 32 && n_out > 3; pr += 16) {
        cuda_mma_rows_set(32);
        float *ref = pr == 32 ? got : old;
        if (pr == 16) { /* old: the 16-row call from r0 = 0 with the switch on (the chunk form's bits, checked above) */
            CU(cudaMemset(dy, 0xFF, 32 * n_out * sizeof(float)));
            CHECK_MSG(cuda_matmul_chunk_ws(QUANT_Q8_0, dw, n_out, n_in, dx, 16, dy, work, NULL, why, sizeof why) == 0,
                      "%s", why);
            dev_download(old, dy, 16 * n_out);
        }
        CU(cudaMemset(dy, 0xFF, 32 * n_out * sizeof(float)));
        CU(cudaMemset(dy2, 0xFF, 32 * n_out * sizeof(float)));
        CHECK_MSG(cuda_matmul_chunk_ws_pair(QUANT_Q8_0, dw, n_out, dw + 3 * rb, n_out - 3, n_in, dx, pr, dy, dy2, work,
                                            NULL, why, sizeof why) == 0,
                  "%s", why);
        dev_download(dec, dy, pr * n_out);
        bad_pair += few_diff(dec, ref, pr * n_out);
        dev_download(dec, dy2, pr * (n_out - 3));
        for (size_t r = 0; r < pr; r++) bad_pair += few_diff(dec + r * (n_out - 3), ref + r * n_out + 3, n_out - 3);
    }
    cuda_mma_rows_set(-1);
    CHECK_MSG(bad == 0 && unwritten == 0, "%s: %zu outputs differ from the chunk form, %zu not written", what, bad,
              unwritten);
    CHECK_MSG(bad_dec == 0, "%s: %zu outputs differ from the decode form", what, bad_dec);
    CHECK_MSG(bad_pair == 0, "%s: %zu outputs of the pair differ", what, bad_pair);
    free(w), free(x), free(old), free(got), free(dec);
    cudaFree(dwall), cudaFree(dx), cudaFree(dy), cudaFree(dy2), cudaFree(work), cudaFree(dwork);
}

static void test_mma_rows(void) {
    cuda_mma_rows_set(32);
    CHECK(cuda_mma_rows_takes(QUANT_Q4_K, 4) == 0); /* Q8_0 only */
    CHECK(cuda_mma_rows_takes(QUANT_Q8_0, 32) == 1 && cuda_mma_rows_takes(QUANT_Q8_0, 33) == 0);
    cuda_mma_rows_set(40); /* past the form's limit: capped at 32 */
    CHECK(cuda_mma_rows_takes(QUANT_Q8_0, 33) == 0);
    cuda_mma_rows_set(4);
    CHECK(cuda_mma_rows_takes(QUANT_Q8_0, 4) == 1 && cuda_mma_rows_takes(QUANT_Q8_0, 5) == 0);
    cuda_mma_rows_set(-1);
    mma_rows_case(32 * 19, 45, 0);     /* a last chunk of 3 blocks, 16 outputs a warp */
    mma_rows_case(32 * 19, 45, 3);     /* the weights 2-byte aligned only */
    mma_rows_case(2048, 4224 + 45, 0); /* 32 outputs a warp, 8 warps a group */
    mma_rows_case(32 * 3, 130, 1);     /* one partial chunk: 5 of 8 warps idle */
    mma_rows_case(32 * 25, 16896 + 7, 0); /* 4 warps a group; a last chunk of 1 block */
    mma_rows_case(64, 33792 + 5, 0);      /* 2 warps a group (the output head's layout), 2 blocks */
    mma_rows_case(32 * 171, 77, 1);       /* long rows, odd everything */
}

/* The K-split cluster form of dense Q8_0 products at 1..32 rows (matmul_q8_rows32.cu, CLOVER_CUDA_Q8_ROWS32; off
 * by default): cuda_matmul_chunk_ws with it on gives bit for bit what it gives with it off (matmul_igemm.cu's
 * igemm_q8_kernel: the canonical order), at the model's shapes (outputs x inputs) and odd ones, rows 1, 8, 16, 17,
 * 31, 32 (every row count 1..32 for the narrow ones), every output written (poisoned before each call; row 5 of x
 * carries an infinity: its outputs NaN on both). The launch counter proves the new kernel ran (a refusal would
 * make the comparison trivial). Then the pair (cuda_matmul_chunk_ws_pair: one 8-bit copy for both), the CPU's
 * integer oracle on the 32-row call (1e-5), every layout forced on odd shapes, one call captured in a graph, and
 * the refusals (unaligned weights, n_in % 256 != 0: the old kernel, same bits). CLOVER_TEST_SMALL: fewer cases. */
static void q8r_restore(void) {
    cuda_q8_rows32_set(-1);
    cuda_q8_rows32_layout_set(-1, 0);
}

/* The product's outputs of rows 0..n-1 of dx into h, switch on or off; 0xFF-poisoned first. */
static void q8r_run(const void *dw, size_t n_out, size_t n_in, const float *dx, size_t n, float *dy, void *work,
                    int on, float *h) {
    char why[256] = "";
    cuda_q8_rows32_set(on);
    CU(cudaMemset(dy, 0xFF, n * n_out * sizeof(float)));
    CHECK_MSG(cuda_matmul_chunk_ws(QUANT_Q8_0, dw, n_out, n_in, dx, n, dy, work, NULL, why, sizeof why) == 0, "%s",
              why);
    dev_download(h, dy, n * n_out);
}

/* Outputs not finite outside row 5 (the infinity's): unwritten. */
static size_t q8r_unwritten(const float *h, size_t n, size_t n_out) {
    size_t bad = 0;
    for (size_t r = 0; r < n; r++)
        if (r != 5)
            for (size_t o = 0; o < n_out; o++) bad += !isfinite(h[r * n_out + o]);
    return bad;
}

static void q8r_case(size_t n_out, size_t n_in, size_t off, int forced) {
    static const size_t ROWS[] = {1, 2, 8, 9, 16, 17, 24, 31, 32};
    const size_t n_x = 32, nr = n_out + off;
    const int small = getenv("CLOVER_TEST_SMALL") != NULL, all = !small && n_out <= 1024 && !forced;
    size_t rb;
    uint8_t *w = make_weights(QUANT_Q8_0, nr, n_in, &rb);
    /* the form takes it: whole 256-value chunks, weights (at off rows in) 16-byte aligned (2026-12-22-on24 on an
     * H100: a 2048-wide offset case, 2,176-byte rows, is aligned and was taken, bit-identical) */
    const int expect = n_in % 256 == 0 && (off * rb) % 16 == 0;
    float *x = malloc(n_x * n_in * sizeof(float));
    fill(x, n_x * n_in, 2.0);
    x[5 * n_in + n_in / 3] = INFINITY;
    float *old = malloc(n_x * n_out * sizeof(float)), *got = malloc(n_x * n_out * sizeof(float));
    uint8_t *dwall = dev_upload(w, nr * rb);
    const uint8_t *dw = dwall + off * rb;
    float *dx = dev_upload(x, n_x * n_in * sizeof(float)), *dy = dev_poisoned(n_x * n_out);
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_matmul_chunk_work_bytes(QUANT_Q8_0, n_in, n_x) + 256));
    char what[64];
    snprintf(what, sizeof what, "q8 rows32 %zux%zu%s", n_out, n_in, off ? " offset" : "");
    static const int LAYOUT[][2] = {{8, 2}, {8, 4}, {8, 8}, {4, 8}, {2, 8}, {1, 8}};
    const size_t n_layouts = forced ? sizeof LAYOUT / sizeof LAYOUT[0] : 1;
    size_t bad = 0, unwritten = 0, calls = 0;
    const unsigned long long launches0 = cuda_q8_rows32_launches();
    for (size_t li = 0; li < n_layouts; li++) {
        cuda_q8_rows32_layout_set(forced ? LAYOUT[li][0] : 0, forced ? LAYOUT[li][1] : 0);
        for (size_t n = 1; n <= 32; n++) {
            int listed = 0;
            for (size_t k = 0; k < sizeof ROWS / sizeof ROWS[0]; k++) listed |= ROWS[k] == n;
            if (!all && !listed) continue;
            if ((small || forced) && n != 1 && n != 9 && n != 17 && n != 32) continue;
            q8r_run(dw, n_out, n_in, dx, n, dy, work, 0, old);
            q8r_run(dw, n_out, n_in, dx, n, dy, work, 1, got);
            bad += few_diff(got, old, n * n_out);
            unwritten += q8r_unwritten(got, n, n_out);
            calls++;
        }
    }
    const unsigned long long launched = cuda_q8_rows32_launches() - launches0;
    CHECK_MSG(bad == 0 && unwritten == 0, "%s: %zu outputs differ from igemm_q8_kernel's bits, %zu not written", what,
              bad, unwritten);
    CHECK_MSG(launched == (expect ? calls : 0), "%s: the form launched %llu times in %zu calls (expected %s)", what,
              launched, calls, expect ? "every call" : "none");
    /* got holds the last 32-row call (switch on): sampled outputs against the CPU's integer oracle */
    const double err = q8_rows_vs_cpu(what, w, off, rb, x, n_in, n_out, got, NULL);
    printf("  %-34s %s bit-identical to igemm_q8_kernel (%zu calls, %llu launches), CPU err %.2g\n", what,
           forced ? "6 layouts" : "by shape", calls, launched, err);
    free(w), free(x), free(old), free(got);
    cudaFree(dwall), cudaFree(dx), cudaFree(dy), cudaFree(work);
    q8r_restore();
}

/* The pair (gate + up of a shared expert: cuda_matmul_chunk_ws_pair, one 8-bit copy of x) with the form on equals
 * the two single calls with it off; and one 32-row call captured in a graph (the backend's passes are graphs: a
 * cluster launch inside a capture) equals the eager call. */
static void q8r_pair_graph(size_t n_out, size_t n_in) {
    const size_t n = 32, ny = n * n_out;
    size_t rb;
    uint8_t *w = make_weights(QUANT_Q8_0, 2 * n_out, n_in, &rb);
    float *x = malloc(n * n_in * sizeof(float));
    fill(x, n * n_in, 2.0);
    float *ref1 = malloc(ny * sizeof(float)), *ref2 = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float));
    uint8_t *dw = dev_upload(w, 2 * n_out * rb);
    float *dx = dev_upload(x, n * n_in * sizeof(float)), *dy = dev_poisoned(ny), *dy2 = dev_poisoned(ny);
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_matmul_chunk_work_bytes(QUANT_Q8_0, n_in, n) + 256));
    char why[256] = "";
    q8r_run(dw, n_out, n_in, dx, n, dy, work, 0, ref1);
    q8r_run(dw + n_out * rb, n_out, n_in, dx, n, dy, work, 0, ref2);
    cuda_q8_rows32_set(1);
    const unsigned long long l0 = cuda_q8_rows32_launches();
    CU(cudaMemset(dy, 0xFF, ny * sizeof(float)));
    CU(cudaMemset(dy2, 0xFF, ny * sizeof(float)));
    CHECK_MSG(cuda_matmul_chunk_ws_pair(QUANT_Q8_0, dw, n_out, dw + n_out * rb, n_out, n_in, dx, n, dy, dy2, work, NULL,
                                        why, sizeof why) == 0,
              "%s", why);
    size_t bad = 0;
    dev_download(got, dy, ny);
    bad += few_diff(got, ref1, ny) + q8r_unwritten(got, n, n_out);
    dev_download(got, dy2, ny);
    bad += few_diff(got, ref2, ny) + q8r_unwritten(got, n, n_out);
    CHECK_MSG(bad == 0 && cuda_q8_rows32_launches() - l0 == 2, "q8 rows32 pair %zux%zu: %zu outputs differ", n_out,
              n_in, bad);
    /* the graph */
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t gr;
    cudaGraphExec_t ge;
    CU(cudaMemset(dy, 0xFF, ny * sizeof(float)));
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    const int rc = cuda_matmul_chunk_ws(QUANT_Q8_0, dw, n_out, n_in, dx, n, dy, work, st, why, sizeof why);
    CU(cudaStreamEndCapture(st, &gr));
    CHECK_MSG(rc == 0, "q8 rows32 graph: %s", why);
    CU(cudaGraphInstantiate(&ge, gr, 0));
    CU(cudaGraphLaunch(ge, st));
    CU(cudaStreamSynchronize(st));
    dev_download(got, dy, ny);
    const size_t bad_graph = few_diff(got, ref1, ny) + q8r_unwritten(got, n, n_out);
    CHECK_MSG(bad_graph == 0, "q8 rows32 graph %zux%zu: %zu outputs differ from the eager call", n_out, n_in,
              bad_graph);
    printf("  q8 rows32 pair + graph %zux%zu: bit-identical\n", n_out, n_in);
    CU(cudaGraphExecDestroy(ge));
    CU(cudaGraphDestroy(gr));
    CU(cudaStreamDestroy(st));
    free(w), free(x), free(ref1), free(ref2), free(got);
    cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(dy2), cudaFree(work);
    q8r_restore();
}

static void test_q8_rows32(void) {
    cuda_q8_rows32_set(1);
    CHECK(cuda_q8_rows32_takes(QUANT_Q8_0, 2048, 32) == 1 && cuda_q8_rows32_takes(QUANT_Q8_0, 2048, 33) == 0);
    CHECK(cuda_q8_rows32_takes(QUANT_Q4_K, 2048, 32) == 0 && cuda_q8_rows32_takes(QUANT_Q8_0, 32 * 19, 8) == 0);
    cuda_q8_rows32_set(0);
    CHECK(cuda_q8_rows32_takes(QUANT_Q8_0, 2048, 32) == 0);
    q8r_restore();
    /* the model's shapes (by shape: 512 1x8, 1024 2x8, 2048 4x8, 4096 8x8, 8192 / 12288 8x4, 16896+ 8x2) */
    static const size_t SHAPES[][2] = {{512, 2048},  {1024, 2048}, {2048, 4096}, {2048, 512},
                                       {4096, 2048}, {8192, 2048}, {12288, 2048}, {32, 2048}};
    const int small = getenv("CLOVER_TEST_SMALL") != NULL;
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        if (small && i != 0 && i != 5) continue;
        q8r_case(SHAPES[i][0], SHAPES[i][1], 0, 0);
    }
    q8r_case(16896 + 7, 256, 0, 0); /* the output head's layout (8 x 2), one chunk, a partial last group */
    q8r_case(1000, 2048, 0, 1);     /* every layout: partial m-tiles and groups */
    if (!small) {
        q8r_case(77, 4096, 0, 1);   /* fewer outputs than one group of any layout */
        q8r_case(512, 2048, 1, 0);  /* weights one row in: Q8_0 rows of whole chunks are 272-byte multiples, so
                                     * still 16-byte aligned and taken (the refusal is the 608-wide case below) */
        q8r_case(45, 32 * 19, 0, 0); /* n_in % 256 != 0: refused */
    }
    q8r_pair_graph(512, 2048);
}

/* The wide-row integer product (matmul_igemm_wide.cu, CLOVER_CUDA_IGEMM_WIDE; on by default): with it on,
 * cuda_matmul_chunk_ws at 64+ rows gives bit for bit what the 16 x 32 kernels of matmul_igemm.cu give with it off
 * (the canonical order), for Q8_0, Q4_K and Q5_K, at row counts that fill the 64-row tile, leave a 1-row or
 * partial tile (65, 100, 1000), output counts that are and are not multiples of its outputs (64 for Q8_0, 128 for
 * the K-quants), n_in 2048 and an odd one (Q8_0 32 x 19: a partial last chunk and rows not 16-byte aligned;
 * K-quants 768: an odd number of super-blocks, so the two partials end on the other parity); row 3 carries an
 * infinity (its outputs NaN on both). With CLOVER_CUDA_IGW_W16 off and on (the K-quant kernel's 8 and 16 warps).
 * Sampled rows against the CPU's integer oracle too (1e-5), and every output written. CLOVER_TEST_SMALL: 2 cases
 * (for compute-sanitizer). */
static void wide_case(uint32_t type, size_t n_rows, size_t n_out, size_t n_in) {
    size_t rb;
    uint8_t *w = make_weights(type, n_out, n_in, &rb);
    float *x = malloc(n_rows * n_in * sizeof(float));
    fill(x, n_rows * n_in, 2.0);
    x[3 * n_in + n_in / 3] = INFINITY;
    const size_t ny = n_rows * n_out;
    float *old = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float)), *got16 = malloc(ny * sizeof(float));
    void *dw = dev_upload(w, n_out * rb);
    float *dx = dev_upload(x, n_rows * n_in * sizeof(float)), *dy = dev_poisoned(ny), *dy2 = dev_poisoned(ny);
    float *dy3 = dev_poisoned(ny);
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_matmul_chunk_work_bytes(type, n_in, n_rows) + 256));
    char why[256] = "", what[48];
    cuda_igemm_wide_set(0);
    CHECK_MSG(cuda_matmul_chunk_ws(type, dw, n_out, n_in, dx, n_rows, dy, work, NULL, why, sizeof why) == 0, "%s", why);
    cuda_igemm_wide_set(1);
    cuda_igw_w16_set(0); /* the K-quant kernel's 8-warp form, then its 16-warp form */
    CHECK_MSG(cuda_matmul_chunk_ws(type, dw, n_out, n_in, dx, n_rows, dy2, work, NULL, why, sizeof why) == 0, "%s",
              why);
    cuda_igw_w16_set(1);
    CHECK_MSG(cuda_matmul_chunk_ws(type, dw, n_out, n_in, dx, n_rows, dy3, work, NULL, why, sizeof why) == 0, "%s",
              why);
    cuda_igw_w16_set(-1);
    const char *env = getenv("CLOVER_CUDA_IGEMM_WIDE"); /* back as the environment set it, for the later cases */
    cuda_igemm_wide_set(!(env && strcmp(env, "0") == 0));
    dev_download(old, dy, ny);
    dev_download(got, dy2, ny);
    dev_download(got16, dy3, ny);
    size_t diff = 0, unwritten = 0, nan_ok = 0;
    for (size_t i = 0; i < ny; i++) {
        const int inf_row = i / n_out == 3;
        if (inf_row) {
            nan_ok += isnan(got[i]) && isnan(old[i]) && isnan(got16[i]);
            continue;
        }
        unwritten += !isfinite(got[i]) + !isfinite(got16[i]);
        diff += (memcmp(&got[i], &old[i], sizeof(float)) != 0) + (memcmp(&got16[i], &old[i], sizeof(float)) != 0);
    }
    snprintf(what, sizeof what, "wide x%zu/%zu/%zu", n_rows, n_out, n_in);
    CHECK_MSG(diff == 0, "%s %s: %zu of %zu outputs (8- and 16-warp forms) differ from the old kernels' bits", what,
              quant_type_name(type), diff, ny);
    CHECK_MSG(unwritten == 0, "%s %s: %zu outputs not finite (unwritten?)", what, quant_type_name(type), unwritten);
    CHECK_MSG(nan_ok == n_out, "%s %s: the row with an infinity gave %zu NaN outputs of %zu", what,
              quant_type_name(type), nan_ok, n_out);
    /* sampled rows (every 37th past the infinity's) against the CPU's integer oracle */
    size_t ns = 0;
    for (size_t r = 4; r < n_rows; r += 37) ns++;
    float *ref = malloc(ns * n_out * sizeof(float)), *sam = malloc(ns * n_out * sizeof(float));
    ns = 0;
    for (size_t r = 4; r < n_rows; r += 37, ns++)
        for (size_t o = 0; o < n_out; o++) {
            ref[ns * n_out + o] = decode_ref(type, w + o * rb, x + r * n_in, n_in);
            sam[ns * n_out + o] = got[r * n_out + o];
        }
    check_close(what, type, sam, ref, ns * n_out, 1e-5);
    printf("  %-24s %-5s bit-identical to the 16x32 kernels (8 and 16 warps)\n", what, quant_type_name(type));
    free(w), free(x), free(old), free(got), free(got16), free(ref), free(sam);
    cudaFree(dw), cudaFree(dx), cudaFree(dy), cudaFree(dy2), cudaFree(dy3), cudaFree(work);
}

static void test_igemm_wide(void) {
    static const uint32_t T[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K};
    static const size_t R[] = {64, 65, 100, 128, 512, 1000};
    const int small = getenv("CLOVER_TEST_SMALL") != NULL;
    for (size_t t = 0; t < sizeof T / sizeof T[0]; t++) {
        const uint32_t type = T[t];
        const size_t n_odd = type == QUANT_Q8_0 ? 32 * 19 : 256 * 3; /* Q8_0: a partial last chunk, unaligned rows */
        if (small) {
            wide_case(type, 65, 77, n_odd);
            wide_case(type, 128, 128, 2048);
            continue;
        }
        for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
            wide_case(type, R[i], 128, 2048);      /* a multiple of the tile's outputs (64 Q8_0, 128 K-quants) */
            wide_case(type, R[i], 64 + 77, n_odd); /* not */
        }
        wide_case(type, 512, 200, 4096);
    }
}

/* Routing: k distinct experts per row, expert 0 in every row (so in the
 * chunk form it needs several tiles) and a random rest. */
static void make_ids(int32_t *ids, size_t n_rows, size_t k, size_t n_expert) {
    for (size_t r = 0; r < n_rows; r++) {
        for (size_t j = 0; j < k; j++) {
            int32_t e;
            int dup;
            do {
                e = j == 0 && r % 4 != 3 ? 0 : (int32_t)(urand() * (double)n_expert);
                dup = 0;
                for (size_t i = 0; i < j; i++) dup |= ids[r * k + i] == e;
            } while (dup);
            ids[r * k + j] = e;
        }
    }
}

/* Experts of moe_case's weights: 9 (the grouping's scan within one warp), or set by a case for more. */
/* The grouped expert products' outputs (got) against their CPU reference (ref; both [n_slots][n_out]): the outputs
 * of slot `bad` (SIZE_MAX: none; an out-of-range id) all NaN, every other output finite (none left poisoned), and
 * over the sampled outputs (every ss-th slot, every os-th output; slot `bad` left out) ||got - ref|| / ||ref||
 * <= bound with a non-zero reference. Returns that error. One check for moe_case and fast_case. */
static double check_moe_outputs(const char *what, const float *got, const float *ref, size_t n_slots, size_t n_out,
                                size_t bad, size_t ss, size_t os, double bound) {
    size_t nan_bad = 0, unfinite = 0;
    for (size_t s = 0; s < n_slots; s++)
        for (size_t o = 0; o < n_out; o++) {
            const float g = got[s * n_out + o];
            if (s == bad)
                nan_bad += isnan(g) != 0;
            else
                unfinite += !isfinite(g);
        }
    if (bad < n_slots)
        CHECK_MSG(nan_bad == n_out, "%s: a bad expert id gave %zu NaN outputs of %zu", what, nan_bad, n_out);
    CHECK_MSG(unfinite == 0, "%s: %zu outputs not finite (unwritten or NaN)", what, unfinite);
    double e2 = 0, r2 = 0;
    for (size_t s = 0; s < n_slots; s += ss) {
        if (s == bad) continue;
        for (size_t o = 0; o < n_out; o += os) {
            const double d = (double)got[s * n_out + o] - ref[s * n_out + o];
            e2 += d * d, r2 += (double)ref[s * n_out + o] * ref[s * n_out + o];
        }
    }
    const double err = sqrt(e2 / (r2 > 0 ? r2 : 1));
    CHECK_MSG(r2 > 0, "%s: the reference is all zeros", what);
    CHECK_MSG(err <= bound, "%s: normalised error %.3g > %.3g against the CPU", what, err, bound);
    return err;
}

static size_t g_moe_experts = 9;

static void moe_case(uint32_t type, size_t n_rows, int x_per_slot, int chunk, int bad_id, int variant) {
    const size_t n_expert = g_moe_experts, k = 4, n_out = 45, n_in = n_in_variant(type, variant), n_slots = n_rows * k;
    size_t rb;
    uint8_t *w = make_weights(type, n_expert * n_out, n_in, &rb);
    const size_t n_x = x_per_slot ? n_slots : n_rows;
    float *x = malloc(n_x * n_in * sizeof(float));
    fill(x, n_x * n_in, 2.0);
    int32_t *ids = malloc(n_slots * sizeof(int32_t));
    make_ids(ids, n_rows, k, n_expert);
    if (bad_id == 2) /* every slot on expert 2 (against the contract): groups split, still exact */
        for (size_t s = 0; s < n_slots; s++) ids[s] = 2;
    if (bad_id == 1) ids[1] = (int32_t)n_expert; /* slot 1: out of range */
    float *ref = malloc(n_slots * n_out * sizeof(float)), *got = malloc(n_slots * n_out * sizeof(float));
    for (size_t s = 0; s < n_slots; s++) {
        const float *xs = x + (x_per_slot ? s : s / k) * n_in;
        for (size_t o = 0; o < n_out; o++) {
            const uint8_t *row = w + ((size_t)ids[s] * n_out + o) * rb;
            ref[s * n_out + o] = (bad_id == 1 && s == 1)      ? 0.0f
                                 : chunk && !is_int_type(type) ? quant_dot_scalar(type, row, xs, n_in)
                                                               : decode_ref(type, row, xs, n_in);
        }
    }
    cuda_moe_args a = {.type = type, .expert_stride = n_out * rb, .n_expert = n_expert, .n_out = n_out, .n_in = n_in,
                       .n_rows = n_rows, .k = k, .x_per_slot = x_per_slot};
    a.w = dev_upload(w, n_expert * n_out * rb);
    a.x = dev_upload(x, n_x * n_in * sizeof(float));
    a.ids = dev_upload(ids, n_slots * sizeof(int32_t));
    float *dy = dev_poisoned(n_slots * n_out);
    a.y = dy;
    const size_t wb = chunk ? cuda_moe_chunk_work_bytes(&a) : cuda_moe_decode_work_bytes(&a);
    void *work = NULL;
    CU(cudaMalloc(&work, wb + 256));
    char why[256] = "";
    const int rc = chunk ? cuda_moe_chunk(&a, work, NULL, why, sizeof why) : cuda_moe_decode(&a, work, NULL, why,
                                                                                               sizeof why);
    CHECK_MSG(rc == 0, "%s", why);
    dev_download(got, dy, n_slots * n_out);
    if (chunk && is_int_type(type) && n_rows <= CUDA_MATMUL_DECODE_MAX_ROWS && bad_id != 1) {
        /* the decode form on the same slots: the same bits (one canonical order for both kernels) */
        float *dy2 = dev_poisoned(n_slots * n_out), *got2 = malloc(n_slots * n_out * sizeof(float));
        void *work2 = NULL;
        CU(cudaMalloc(&work2, cuda_moe_decode_work_bytes(&a) + 256));
        a.y = dy2;
        CHECK_MSG(cuda_moe_decode(&a, work2, NULL, why, sizeof why) == 0, "%s", why);
        a.y = dy;
        dev_download(got2, dy2, n_slots * n_out);
        CHECK_MSG(memcmp(got, got2, n_slots * n_out * sizeof(float)) == 0,
                  "moe %s x%zu: the chunk and decode forms differ", quant_type_name(type), n_rows);
        free(got2);
        cudaFree(dy2), cudaFree(work2);
    }
    char what[64];
    snprintf(what, sizeof what, "moe %s x%zu%s %s", chunk ? "chunk" : "dec", n_rows, x_per_slot ? "s" : "",
             quant_type_name(type));
    const double bound = is_int_type(type) || !chunk ? 1e-5 : 1.5e-3;
    const double err = check_moe_outputs(what, got, ref, n_slots, n_out, bad_id == 1 ? 1 : SIZE_MAX, 1, 1, bound);
    printf("  %-18s n=%-6zu err %.3g (bound %.3g)\n", what, n_slots * n_out, err, bound);
    free(w), free(x), free(ids), free(ref), free(got);
    cudaFree((void *)a.w), cudaFree((void *)a.x), cudaFree((void *)a.ids), cudaFree(dy), cudaFree(work);
}

/* One dense decode product of stream_case / lane_case: form 0 one matrix, 1 gate + up with SwiGLU (w2 the up
 * weights), 2 three matrices of DENSE_SO rows one after another in w (outputs one after another in y). */
static const size_t DENSE_SO[3] = {61, 200, 17};
static int dense_form(uint32_t type, int form, const void *w, const void *w2, size_t rb, size_t n_out, size_t n_in,
                      const float *x, size_t n_rows, float *y, void *work, char *why, size_t why_len) {
    if (form == 0) return cuda_matmul_decode(type, w, n_out, n_in, x, n_rows, y, work, NULL, why, why_len);
    if (form == 1) return cuda_matmul_decode_glu(type, w, w2, n_out, n_in, x, n_rows, y, work, NULL, why, why_len);
    cuda_matmul_seg seg[3];
    size_t o = 0;
    for (int i = 0; i < 3; i++) {
        seg[i] = (cuda_matmul_seg){.w = (const uint8_t *)w + o * rb, .n_out = DENSE_SO[i], .y = y + o * n_rows};
        o += DENSE_SO[i];
    }
    return cuda_matmul_decode_multi(type, seg, 3, n_in, x, n_rows, work, NULL, why, why_len);
}

/* One A/B case of the dense decode forms (stream_case, lane_case): the same product (dense_form) with a switch
 * off, then on, on poisoned outputs; every output must have the same bits, and the "off" ones be finite. lane 0:
 * the switch is the stream form (0, then a grid cap of `cap`); lane 1: the stream form at `cap`, the switch the
 * lane-a-block Q8_0 dot (off, then on), and form 0 also checked against the CPU's decode_ref. Both switches go
 * back as the environment set them. */
static void dense_ab(uint32_t type, size_t n_in, size_t n_rows, int form, int cap, int lane) {
    const size_t n_out = cap == 1 ? 9000 : 61, n_y = form == 2 ? 278 : n_out;
    size_t rb;
    const size_t n_w = n_out > n_y ? n_out : n_y; /* multi: the three matrices' 278 rows one after another */
    uint8_t *w = make_weights(type, n_w, n_in, &rb), *w2 = make_weights(type, n_out, n_in, &rb);
    float *x = malloc(n_rows * n_in * sizeof(float));
    fill(x, n_rows * n_in, 2.0);
    void *dw = dev_upload(w, n_w * rb), *dw2 = dev_upload(w2, n_out * rb);
    float *dx = dev_upload(x, n_rows * n_in * sizeof(float));
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_matmul_decode_work_bytes(type, n_in, n_rows) + 256));
    float *dy[2], *h[2];
    char why[256] = "", what[64];
    static const char *forms[3] = {"decode", "glu", "multi"};
    if (lane)
        snprintf(what, sizeof what, "lane %s x%zu/%zu stream %d", forms[form], n_rows, n_in, cap);
    else
        snprintf(what, sizeof what, "stream %s %s x%zu/%zu cap %d", forms[form], quant_type_name(type), n_rows, n_in,
                 cap);
    if (lane) cuda_mmv_stream_set(cap);
    for (int on = 0; on < 2; on++) {
        if (lane)
            cuda_mmv_lane_set(on);
        else
            cuda_mmv_stream_set(on ? cap : 0);
        dy[on] = dev_poisoned(n_rows * n_y);
        h[on] = malloc(n_rows * n_y * sizeof(float));
        const int rc = dense_form(type, form, dw, dw2, rb, n_out, n_in, dx, n_rows, dy[on], work, why, sizeof why);
        CHECK_MSG(rc == 0, "%s: %s", what, why);
        CU(cudaDeviceSynchronize());
        dev_download(h[on], dy[on], n_rows * n_y);
    }
    const char *env = getenv("CLOVER_CUDA_MMV_STREAM"), *envl = getenv("CLOVER_CUDA_MMV_LANE");
    cuda_mmv_stream_set(env ? atoi(env) : 1);
    cuda_mmv_lane_set(!(envl && strcmp(envl, "0") == 0));
    size_t diff = 0, bad = 0;
    for (size_t i = 0; i < n_rows * n_y; i++) {
        diff += memcmp(&h[0][i], &h[1][i], sizeof(float)) != 0;
        bad += !isfinite(h[0][i]);
    }
    if (lane && form == 0) { /* the new dot against the CPU, a few outputs a row (the rest are equal bits) */
        double worst = 0;
        for (size_t r = 0; r < n_rows; r++)
            for (size_t o = 0; o < n_out; o += 37) {
                const double ref = decode_ref(type, w + o * rb, x + r * n_in, n_in), got = h[1][r * n_out + o];
                const double e = fabs(got - ref) / (1.0 + fabs(ref));
                if (e > worst) worst = e;
            }
        CHECK_MSG(worst <= 1e-5, "%s: the lane form is %.3g from the CPU's decode_ref", what, worst);
    }
    CHECK_MSG(bad == 0, "%s: %zu outputs of the old %s not finite (the test's inputs)", what, bad,
              lane ? "dot" : "kernel");
    CHECK_MSG(diff == 0, "%s: %zu of %zu outputs differ from %s bits", what, diff, n_rows * n_y,
              lane ? "the 4-lanes-a-block dot's" : "mmv_kernel's");
    if (diff == 0 && bad == 0) printf("  %-44s bit-identical (%zu outputs)\n", what, n_rows * n_y);
    for (int on = 0; on < 2; on++) cudaFree(dy[on]), free(h[on]);
    free(w), free(w2), free(x);
    cudaFree(dw), cudaFree(dw2), cudaFree(dx), cudaFree(work);
}

/* The persistent dense decode product (matmul_mmv_stream.cu, CLOVER_CUDA_MMV_STREAM, on by default): with it on, dense
 * decode products (one matrix, gate + up with SwiGLU, several matrices in one launch) give bit for bit what
 * mmv_kernel gives with it off. A grid cap of 3 blocks makes each block walk many groups (the double buffer's
 * every turn, a partial last group, segment boundaries inside a block's walk); "auto" takes every resident
 * block (n_out 9000: more groups than blocks). Rows 1, 3, 8; n_in 2048 (8 rows a warp-group) and 512 (the
 * short rows' 4 a warp). Outputs poisoned first: an output not written differs. CLOVER_TEST_SMALL: Q8_0 and
 * Q4_K only. */
static void stream_case(uint32_t type, size_t n_in, size_t n_rows, int form, int cap) {
    dense_ab(type, n_in, n_rows, form, cap, 0);
}

static void test_mmv_stream(void) {
    const int small = getenv("CLOVER_TEST_SMALL") != NULL;
    const uint32_t types[4] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    for (int t = 0; t < (small ? 2 : 4); t++) {
        const size_t rows[3] = {1, 3, 8};
        for (int r = 0; r < 3; r++) {
            stream_case(types[t], 2048, rows[r], 0, 3);
            stream_case(types[t], 2048, rows[r], 1, 3);
            stream_case(types[t], 2048, rows[r], 2, 3);
        }
        stream_case(types[t], 512, 2, 0, 3); /* short rows: 4 a warp, 32 a group */
        stream_case(types[t], 2048, 1, 0, 1); /* every resident block */
        if (!small) stream_case(types[t], 2048, 8, 1, 1);
    }
}

/* The lane-a-block Q8_0 dot (mmv_row_q8l, CLOVER_CUDA_MMV_LANE, on by default): with it on, Q8_0 decode products
 * with staged weights give bit for bit what the 4-lanes-a-block dot (mmv_row) gives with it off, in both kernels
 * (mmv_kernel: the stream form off; mmvs_kernel: a cap of 3 blocks and every resident block), for one matrix,
 * gate + up with SwiGLU and three matrices in one launch, and the grouped expert form. Row lengths of 8, 24, 40
 * (a partial second 32-block step), 64, 72 and 128 blocks (staging needs 16-byte rows: multiples of 8 blocks);
 * 1, 2, 3 and 8 rows. Outputs poisoned first; the lane form's outputs are also checked against the CPU's
 * decode_ref. */
static void lane_case(size_t n_in, size_t n_rows, int form, int cap) {
    dense_ab(QUANT_Q8_0, n_in, n_rows, form, cap, 1);
}

static void test_mmv_lane(void) {
    const size_t n_ins[6] = {256, 768, 1280, 2048, 2304, 4096}, rows[4] = {1, 2, 3, 8};
    for (int ni = 0; ni < 6; ni++)
        for (int r = 0; r < 4; r++)
            for (int form = 0; form < 3; form++) {
                lane_case(n_ins[ni], rows[r], form, 0);
                lane_case(n_ins[ni], rows[r], form, 3);
            }
    lane_case(2048, 1, 0, 1); /* every resident block, the head's form */
    lane_case(4096, 1, 1, 1);
    for (int on = 1; on >= 0; on--) { /* the grouped expert form, both dots against the CPU (moe_case) */
        cuda_mmv_lane_set(on);
        moe_case(QUANT_Q8_0, 1, 0, 0, 0, 2);
        moe_case(QUANT_Q8_0, 8, 1, 0, 0, 2);
        moe_case(QUANT_Q8_0, 3, 0, 0, 2, 2);
    }
    const char *envl = getenv("CLOVER_CUDA_MMV_LANE");
    cuda_mmv_lane_set(!(envl && strcmp(envl, "0") == 0));
}

static void test_moe_decode(void) {
    for (int t = 0; t < N_TYPES; t++) {
        moe_case(TYPES[t], 1, 0, 0, 0, 0);
        moe_case(TYPES[t], 8, 1, 0, 0, 0);
    }
    moe_case(QUANT_Q4_K, 5, 0, 0, 1, 0);
    moe_case(QUANT_Q6_K, 8, 1, 0, 0, 1); /* 8-bit rows in work, not shared memory */
    moe_case(QUANT_BF16, 8, 0, 0, 0, 1); /* 16-byte float loads */
    moe_case(QUANT_Q4_K, 3, 1, 0, 2, 0); /* a row repeating its expert */
    moe_case(QUANT_Q8_0, 3, 0, 1, 2, 0);
}

static void test_moe_chunk(void) {
    for (int t = 0; t < N_TYPES; t++) {
        moe_case(TYPES[t], 70, 0, 1, 0, 0); /* expert 0 has ~53 slots; 280 slots in all */
        moe_case(TYPES[t], 33, 1, 1, 0, 0);
    }
    moe_case(QUANT_Q8_0, 90, 0, 1, 1, 0); /* expert 0: 68 slots, two tiles */
    for (int t = 3; t < N_TYPES; t++) {   /* few slots per expert: the wide tiles of <= 8 slots, = the decode form */
        moe_case(TYPES[t], 8, 0, 1, 0, 0);
        moe_case(TYPES[t], 5, 1, 1, 0, 2);
    }
    moe_case(QUANT_Q4_K, 8, 1, 1, 2, 0); /* 32 slots on one expert: 4 wide tiles */
}

/* ---- moe_decode.cu: the MoE's own decode form, 1..32 rows (cuda_moe_dec32, CLOVER_CUDA_MOE_DEC32) ----
 * Each case checks the new form bit for bit against the forms it stands in for on the same slots: cuda_moe_decode
 * (and _glu) on groups of <= 8 rows (the backend's calls before it: one call per 8 rows), and cuda_moe_chunk over all
 * rows for the integer types (one canonical order); and each slot against the CPU's integer path (decode_ref, an
 * independent oracle; gate and up checked through silu(g) * u of the reference). Outputs poisoned (NaN) first: an
 * output not written differs. Routings: "spread" (random distinct experts), "dup" (every row's experts from the
 * first k + 1: ~all rows on each), "same" (every slot on one expert, against the contract: several groups of 8),
 * "bad" (slot 1 out of range: NaN outputs). pool: ids are slots of a larger pool with a padded stride (the
 * --gpu-mem path, moe_source's xv). */
static void make_ids_kind(int32_t *ids, size_t n_rows, size_t k, size_t n_expert, int kind) {
    for (size_t r = 0; r < n_rows; r++)
        for (size_t j = 0; j < k; j++) {
            int32_t e;
            int dup;
            do {
                e = kind == 2 ? 2 : kind == 1 ? (int32_t)(urand() * (double)(k + 1)) : (int32_t)(urand() * (double)n_expert);
                dup = 0;
                if (kind != 2)
                    for (size_t i = 0; i < j; i++) dup |= ids[r * k + i] == e;
            } while (dup);
            ids[r * k + j] = e;
        }
    if (kind == 3 && n_rows * k > 1) ids[1] = (int32_t)n_expert; /* a bad id in slot 1 where there is one */
}

static size_t dec32_cases, dec32_fast_cases;

/* make_weights, the last few results kept (the 35B shapes' 129 experts take seconds to quantise on the CPU). */
static uint8_t *dec32_weights(uint32_t type, size_t rows, size_t n_in, size_t *row_bytes) {
    static struct { uint32_t type; size_t rows, n_in, rb; uint8_t *w; } cache[2];
    static int next;
    for (int i = 0; i < 2; i++)
        if (cache[i].w && cache[i].type == type && cache[i].rows == rows && cache[i].n_in == n_in) {
            *row_bytes = cache[i].rb;
            return cache[i].w;
        }
    free(cache[next].w);
    cache[next].w = make_weights(type, rows, n_in, &cache[next].rb);
    cache[next].type = type, cache[next].rows = rows, cache[next].n_in = n_in;
    *row_bytes = cache[next].rb;
    uint8_t *w = cache[next].w;
    next ^= 1;
    return w;
}

static void dec32_case(uint32_t type, size_t n_in, size_t n_out, size_t n_rows, size_t k, size_t n_expert, int kind,
                       int glu, int x_per_slot, int pool) {
    const size_t n_slots = n_rows * k, n_x = x_per_slot ? n_slots : n_rows;
    size_t rb;
    const size_t n_w = glu ? 2 : 1;
    const uint8_t *w = dec32_weights(type, n_w * n_expert * n_out, n_in, &rb);
    const size_t ex = n_out * rb, stride = pool ? ex + 256 : ex; /* pool: padded slots */
    uint8_t *wp = calloc(n_w * n_expert, stride);
    for (size_t m = 0; m < n_w * n_expert; m++) memcpy(wp + m * stride, w + m * ex, ex);
    float *x = malloc(n_x * n_in * sizeof(float));
    fill(x, n_x * n_in, 2.0);
    int32_t *ids = malloc(n_slots * sizeof(int32_t));
    make_ids_kind(ids, n_rows, k, n_expert, kind);
    cuda_moe_args a = {.type = type, .expert_stride = stride, .n_expert = n_expert, .n_out = n_out, .n_in = n_in,
                       .n_rows = n_rows, .k = k, .x_per_slot = x_per_slot};
    uint8_t *dw = dev_upload(wp, n_w * n_expert * stride);
    const uint8_t *dw_up = glu ? dw + n_expert * stride : NULL;
    a.w = dw;
    a.x = dev_upload(x, n_x * n_in * sizeof(float));
    a.ids = dev_upload(ids, n_slots * sizeof(int32_t));
    const size_t ny = n_slots * n_out;
    float *dy = dev_poisoned(ny), *dy_old = dev_poisoned(ny);
    float *got = malloc(ny * sizeof(float)), *old = malloc(ny * sizeof(float));
    void *work = NULL, *work_old = NULL;
    CU(cudaMalloc(&work, cuda_moe_dec32_work_bytes(&a)));
    char why[256] = "", what[96];
    snprintf(what, sizeof what, "dec32 %s %zux%zu r%zu k%zu E%zu %s%s%s%s", quant_type_name(type), n_in, n_out,
             n_rows, k, n_expert, kind == 0 ? "spread" : kind == 1 ? "dup" : kind == 2 ? "same" : "bad",
             glu ? " glu" : "", x_per_slot ? " slot-x" : "", pool ? " pool" : "");
    a.y = dy;
    const unsigned long long fast0 = cuda_moe_fast_launches();
    CHECK_MSG((glu ? cuda_moe_dec32_glu(&a, dw_up, work, NULL, why, sizeof why)
                   : cuda_moe_dec32(&a, work, NULL, why, sizeof why)) == 0,
              "%s: %s", what, why);
    dev_download(got, dy, ny);
    const int fast = cuda_moe_fast_launches() != fast0; /* Q4_K / Q5_K: moe_fast.cu's kernel took it */
    if (fast) {
        /* moe_decode.cu's own kernel (the fast form off) on the same slots: the same bits */
        CHECK_MSG(type == QUANT_Q4_K || type == QUANT_Q5_K, "%s: the fast form took a %s product", what,
                  quant_type_name(type));
        dec32_fast_cases++;
        float *dy_s = dev_poisoned(ny), *slow = malloc(ny * sizeof(float));
        cuda_moe_fast_set(0);
        a.y = dy_s;
        CHECK_MSG((glu ? cuda_moe_dec32_glu(&a, dw_up, work, NULL, why, sizeof why)
                       : cuda_moe_dec32(&a, work, NULL, why, sizeof why)) == 0,
                  "%s (fast form off): %s", what, why);
        cuda_moe_fast_set(-1);
        a.y = dy;
        dev_download(slow, dy_s, ny);
        size_t ds = 0;
        for (size_t i = 0; i < ny; i++)
            ds += memcmp(&got[i], &slow[i], sizeof(float)) != 0 && !(isnan(got[i]) && isnan(slow[i]));
        CHECK_MSG(ds == 0, "%s: %zu of %zu outputs differ from moe_decode.cu's own kernel", what, ds, ny);
        free(slow);
        cudaFree(dy_s);
    }
    /* the old decode form, 8 rows a call */
    for (size_t r0 = 0; r0 < n_rows; r0 += CUDA_MATMUL_DECODE_MAX_ROWS) {
        cuda_moe_args b = a;
        b.n_rows = n_rows - r0 < CUDA_MATMUL_DECODE_MAX_ROWS ? n_rows - r0 : CUDA_MATMUL_DECODE_MAX_ROWS;
        b.ids = a.ids + r0 * k;
        b.x = a.x + (x_per_slot ? r0 * k : r0) * n_in;
        b.y = dy_old + r0 * k * n_out;
        if (!work_old) CU(cudaMalloc(&work_old, cuda_moe_decode_work_bytes(&b) + 256));
        CHECK_MSG((glu ? cuda_moe_decode_glu(&b, dw_up, work_old, NULL, why, sizeof why)
                       : cuda_moe_decode(&b, work_old, NULL, why, sizeof why)) == 0,
                  "%s (old form): %s", what, why);
        CU(cudaDeviceSynchronize());
    }
    dev_download(old, dy_old, ny);
    size_t diff = 0, nan = 0;
    for (size_t i = 0; i < ny; i++) {
        diff += memcmp(&got[i], &old[i], sizeof(float)) != 0 && !(isnan(got[i]) && isnan(old[i]));
        nan += isnan(got[i]) != 0;
    }
    CHECK_MSG(diff == 0, "%s: %zu of %zu outputs differ from cuda_moe_decode%s's bits", what, diff, ny,
              glu ? "_glu" : "");
    const size_t bad = kind == 3 && n_slots > 1 ? n_out : 0; /* slot 1's outputs stay poisoned */
    CHECK_MSG(nan == bad, "%s: %zu NaN outputs (expected %zu)", what, nan, bad);
    if (is_int_type(type) && !glu && kind != 3) { /* the chunk form over all rows */
        float *dy_c = dev_poisoned(ny), *chk = malloc(ny * sizeof(float));
        void *work_c = NULL;
        CU(cudaMalloc(&work_c, cuda_moe_chunk_work_bytes(&a) + 256));
        a.y = dy_c;
        CHECK_MSG(cuda_moe_chunk(&a, work_c, NULL, why, sizeof why) == 0, "%s (chunk): %s", what, why);
        a.y = dy;
        dev_download(chk, dy_c, ny);
        CHECK_MSG(memcmp(chk, got, ny * sizeof(float)) == 0, "%s: the chunk form's bits differ", what);
        free(chk);
        cudaFree(dy_c), cudaFree(work_c);
    }
    /* the CPU oracle, on a sample of slots (every slot of small cases) */
    size_t checked = 0;
    double e2 = 0, r2 = 0;
    for (size_t sl = 0; sl < n_slots; sl += n_slots > 64 ? 7 : 1) {
        if (kind == 3 && sl == 1) continue;
        const float *xs = x + (x_per_slot ? sl : sl / k) * n_in;
        for (size_t o = 0; o < n_out; o += n_out > 256 ? 37 : 1) {
            const uint8_t *row = w + ((size_t)ids[sl] * n_out + o) * rb;
            float ref = decode_ref(type, row, xs, n_in);
            if (glu) {
                const float u = decode_ref(type, row + n_expert * n_out * rb, xs, n_in);
                ref = (ref / (1.0f + expf(-ref))) * u;
            }
            const double d = (double)got[sl * n_out + o] - ref;
            e2 += d * d, r2 += (double)ref * ref;
            checked++;
        }
    }
    const double err = sqrt(e2 / (r2 > 0 ? r2 : 1));
    CHECK_MSG(err <= (is_int_type(type) ? 1e-5 : 1e-4), "%s: normalised error %.3g against the CPU", what, err);
    if (diff == 0)
        printf("  %-60s bit-identical (%zu outputs)%s, CPU err %.2g (%zu)\n", what, ny, fast ? " fast form" : "", err,
               checked);
    dec32_cases++;
    free(wp), free(x), free(ids), free(got), free(old);
    cudaFree(dw), cudaFree((void *)a.x), cudaFree((void *)a.ids), cudaFree(dy), cudaFree(dy_old), cudaFree(work),
        cudaFree(work_old);
}

/* ---- the grouped experts on the wide kernel (matmul_igemm_wide.cu, CLOVER_CUDA_IGW_MOE) ----
 * Many slots an expert (a stacked preview, a prompt): cuda_moe_chunk / _pair with the switch on take tiles of 64
 * slots x 128 outputs (8 or 16 warps) or, with CLOVER_CUDA_IGW_T32, of 32 slots; every output of each form must
 * equal the switch-off kernel's (matmul_igemm.cu) bit for bit, and the CPU's
 * integer path (decode_ref) within 1e-5. Odd output counts (a partial 128-output tile), 3 super-blocks a row (an
 * odd chunk count: the partials' parity), experts with several tiles, x a slot, a bad id (its outputs NaN). */
static void igw_moe_case(uint32_t type, size_t n_in, size_t n_out, size_t n_rows, size_t k, size_t n_expert, int kind,
                         int x_per_slot, int pair) {
    const size_t n_slots = n_rows * k, n_x = x_per_slot ? n_slots : n_rows, ny = n_slots * n_out;
    size_t rb;
    uint8_t *w = make_weights(type, (pair ? 2 : 1) * n_expert * n_out, n_in, &rb);
    const size_t ex = n_out * rb;
    float *x = malloc(n_x * n_in * sizeof(float));
    fill(x, n_x * n_in, 2.0);
    int32_t *ids = malloc(n_slots * sizeof(int32_t));
    make_ids_kind(ids, n_rows, k, n_expert, kind);
    cuda_moe_args a = {.type = type, .expert_stride = ex, .n_expert = n_expert, .n_out = n_out, .n_in = n_in,
                       .n_rows = n_rows, .k = k, .x_per_slot = x_per_slot};
    uint8_t *dw = dev_upload(w, (pair ? 2 : 1) * n_expert * ex);
    a.w = dw;
    a.x = dev_upload(x, n_x * n_in * sizeof(float));
    a.ids = dev_upload(ids, n_slots * sizeof(int32_t));
    float *got[4][2], *dy[4][2]; /* [switch off / on in 8 warps / 16 warps / 32-slot tiles][gate / up] */
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_moe_chunk_work_bytes(&a) + 256));
    char why[256] = "", what[96];
    snprintf(what, sizeof what, "igw moe %s %zux%zu r%zu k%zu E%zu %s%s%s", quant_type_name(type), n_in, n_out, n_rows,
             k, n_expert, kind == 0 ? "spread" : kind == 1 ? "dup" : "bad", x_per_slot ? " slot-x" : "",
             pair ? " pair" : "");
    unsigned long long taken = 0;
    for (int on = 0; on < 4; on++) {
        cuda_igw_moe_set(on != 0);
        cuda_igw_w16_set(on == 2); /* on: the 8-warp form, the 16-warp form, then the 32-slot tiles */
        cuda_igw_t32_set(on == 3);
        for (int u = 0; u < 2; u++) {
            dy[on][u] = dev_poisoned(ny);
            got[on][u] = malloc(ny * sizeof(float));
        }
        a.y = dy[on][0];
        const unsigned long long l0 = cuda_igw_moe_launches();
        const int rc = pair ? cuda_moe_chunk_pair(&a, dw + n_expert * ex, dy[on][1], work, NULL, why, sizeof why)
                            : cuda_moe_chunk(&a, work, NULL, why, sizeof why);
        CHECK_MSG(rc == 0, "%s (switch %d): %s", what, on, why);
        CU(cudaDeviceSynchronize());
        if (on) taken += cuda_igw_moe_launches() - l0;
        for (int u = 0; u < (pair ? 2 : 1); u++) dev_download(got[on][u], dy[on][u], ny);
    }
    cuda_igw_moe_set(-1);
    cuda_igw_w16_set(-1);
    cuda_igw_t32_set(-1);
    CHECK_MSG(taken == (pair ? 6u : 3u), "%s: the wide kernel took %llu launches (expected %d)", what, taken,
              pair ? 6 : 3);
    size_t diff = 0, nan = 0;
    for (int f = 1; f < 4; f++)
        for (int u = 0; u < (pair ? 2 : 1); u++)
            for (size_t i = 0; i < ny; i++) {
                diff += memcmp(&got[f][u][i], &got[0][u][i], sizeof(float)) != 0 &&
                        !(isnan(got[f][u][i]) && isnan(got[0][u][i]));
                nan += f == 1 && isnan(got[1][u][i]) != 0;
            }
    CHECK_MSG(diff == 0, "%s: %zu outputs (8- and 16-warp forms, 32-slot tiles) differ from matmul_igemm.cu's", what,
              diff);
    const size_t bad = kind == 3 ? (pair ? 2 : 1) * n_out : 0; /* slot 1's outputs: NaN */
    CHECK_MSG(nan == bad, "%s: %zu NaN outputs (expected %zu)", what, nan, bad);
    double e2 = 0, r2 = 0;
    size_t checked = 0;
    for (int u = 0; u < (pair ? 2 : 1); u++)
        for (size_t sl = 0; sl < n_slots; sl += 5) {
            if (kind == 3 && sl == 1) continue;
            const float *xs = x + (x_per_slot ? sl : sl / k) * n_in;
            for (size_t o = 0; o < n_out; o += 7) {
                const float ref = decode_ref(type, w + u * n_expert * ex + ((size_t)ids[sl] * n_out + o) * rb, xs, n_in);
                const double d = (double)got[1][u][sl * n_out + o] - ref;
                e2 += d * d, r2 += (double)ref * ref;
                checked++;
            }
        }
    const double err = sqrt(e2 / (r2 > 0 ? r2 : 1));
    CHECK_MSG(err <= 1e-5, "%s: normalised error %.3g against the CPU", what, err);
    printf("  %-62s bit-identical to the old kernel (%zu outputs, 8 / 16 warps, 32-slot tiles), CPU err %.2g (%zu)\n",
           what, (pair ? 2 : 1) * ny, err, checked);
    for (int on = 0; on < 4; on++)
        for (int u = 0; u < 2; u++) free(got[on][u]), cudaFree(dy[on][u]);
    free(w), free(x), free(ids);
    cudaFree(dw), cudaFree((void *)a.x), cudaFree((void *)a.ids), cudaFree(work);
}

static void test_moe_igw(void) {
    const uint32_t types[2] = {QUANT_Q4_K, QUANT_Q5_K};
    for (int t = 0; t < 2; t++) {
        igw_moe_case(types[t], 512, 200, 96, 8, 16, 0, 0, 1);  /* ~48 slots an expert, gate + up */
        igw_moe_case(types[t], 512, 200, 96, 8, 32, 0, 0, 1);  /* ~24: tiles of <= 32 slots (a stacked pass's ~16),
                                                                 * the warps of rows 32.. without rows */
        igw_moe_case(types[t], 768, 130, 512, 8, 64, 1, 0, 0); /* dup: ~450 slots on 9 experts, 3 super-blocks */
        igw_moe_case(types[t], 512, 256, 300, 4, 32, 0, 1, 0); /* x a slot (the down product) */
        igw_moe_case(types[t], 256, 136, 64, 8, 8, 3, 0, 1);   /* a bad id; 1 super-block */
    }
}

/* PERSIST (matmul_igemm.cu's igp_kernel, CLOVER_CUDA_MOE_PERSIST): the grouped Q4_K / Q5_K products of few slots an
 * expert on a fixed grid walking tiles of 8, 16 or 32 slots, against the WIDE form it replaces (the switch off),
 * bit for bit: every output of the pass (poisoned before each run, so an unwritten one differs) for tiles of 8, 16,
 * 32 slots and the size chosen by shape, eagerly and inside a captured graph; the slot layouts of a 35B-A3B
 * preview (32 rows x top-8 all on the same 8 experts: 32 slots each; the down product with x a slot), a decode
 * batch (16 rows x top-8 spread over 100 experts), one slot, no slot at all (every id bad: the kernel sees 0
 * tiles), and a bad id among preview rows; gate + up pairs. Then sampled outputs against the CPU's integer oracle
 * (1e-5, as the other grouped forms), a bad slot's outputs NaN, and the form taken (its launch count). */
enum { PERSIST_PREVIEW, PERSIST_SPREAD, PERSIST_ALL_BAD, PERSIST_PREVIEW_BAD, PERSIST_MIXED };

/* PERSIST_MIXED (k 8, 32 rows, >= 64 experts): slot j of row r on an expert that gives the grouping pass tiles of
 * every size: 32 slots (j < 4), 16 (j 4: experts 40, 41), 20 and ones (j 5), 10-11 (j 6), 6-7 (j 7) */
static int32_t mixed_id(size_t r, size_t j) {
    switch (j) {
    case 0: case 1: case 2: case 3: return (int32_t)(3 + 5 * j);
    case 4: return (int32_t)(40 + r % 2);
    case 5: return r < 20 ? 50 : (int32_t)(51 + r % 12);
    case 6: return (int32_t)(45 + r % 3);
    default: return (int32_t)(32 + r % 5);
    }
}

static void persist_run(const cuda_moe_args *a, const void *w_up, float *y_up, void *work, cudaStream_t st,
                        int graph, const char *what) {
    char why[256] = "";
    cudaGraph_t g = NULL;
    if (graph) CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    const int rc = w_up ? cuda_moe_chunk_pair(a, w_up, y_up, work, st, why, sizeof why)
                        : cuda_moe_chunk(a, work, st, why, sizeof why);
    if (graph) CU(cudaStreamEndCapture(st, &g));
    CHECK_MSG(rc == 0, "%s: %s", what, why);
    if (g) {
        cudaGraphExec_t exec = NULL;
        CU(cudaGraphInstantiate(&exec, g, 0));
        CU(cudaGraphLaunch(exec, st));
        CU(cudaStreamSynchronize(st));
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(g);
    }
    CU(cudaStreamSynchronize(st));
}

/* tall: the forms are TALL's (test_moe_tall) instead of PERSIST's */
static void persist_case(uint32_t type, size_t n_in, size_t n_out, size_t n_rows, size_t k, size_t n_expert, int dist,
                         int x_per_slot, int pair, int tall) {
    const size_t n_slots = n_rows * k, n_x = x_per_slot ? n_slots : n_rows, ny = n_slots * n_out;
    const int hot_only = dist == PERSIST_PREVIEW || dist == PERSIST_PREVIEW_BAD;
    int32_t *ids = malloc(n_slots * sizeof(int32_t));
    if (hot_only) /* row r: the k hot experts 3 + 5h (h < k), rotated by r: each gets n_rows slots */
        for (size_t r = 0; r < n_rows; r++)
            for (size_t j = 0; j < k; j++) ids[r * k + j] = (int32_t)(3 + 5 * ((j + r) % k));
    else if (dist == PERSIST_MIXED)
        for (size_t r = 0; r < n_rows; r++)
            for (size_t j = 0; j < k; j++) ids[r * k + j] = mixed_id(r, j);
    else
        make_ids_kind(ids, n_rows, k, n_expert, 0);
    if (dist == PERSIST_ALL_BAD)
        for (size_t s = 0; s < n_slots; s++) ids[s] = (int32_t)n_expert;
    if (dist == PERSIST_PREVIEW_BAD) ids[1] = (int32_t)n_expert;
    /* the weights: every expert's, or (previews) only the hot experts' quantised, the rest zero blocks (never read) */
    const size_t nm = pair ? 2 : 1, rb = quant_row_bytes(type, n_in), ex = n_out * rb;
    uint8_t *w = calloc(nm * n_expert, ex);
    for (size_t u = 0; u < nm; u++)
        for (size_t e = 0; e < n_expert; e++) {
            if (hot_only && (e < 3 || (e - 3) % 5 != 0 || (e - 3) / 5 >= k)) continue;
            size_t rb2;
            uint8_t *we = make_weights(type, n_out, n_in, &rb2);
            memcpy(w + (u * n_expert + e) * ex, we, ex);
            free(we);
        }
    float *x = malloc(n_x * n_in * sizeof(float));
    fill(x, n_x * n_in, 2.0);
    cuda_moe_args a = {.type = type, .expert_stride = ex, .n_expert = n_expert, .n_out = n_out, .n_in = n_in,
                       .n_rows = n_rows, .k = k, .x_per_slot = x_per_slot};
    uint8_t *dw = dev_upload(w, nm * n_expert * ex);
    a.w = dw;
    a.x = dev_upload(x, n_x * n_in * sizeof(float));
    a.ids = dev_upload(ids, n_slots * sizeof(int32_t));
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_moe_chunk_work_bytes(&a) + 256));
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    char what[128];
    static const char *const DIST[] = {"preview", "spread", "all-bad", "preview+bad", "mixed"};
    snprintf(what, sizeof what, "%s %s %zux%zu r%zu k%zu E%zu %s%s%s", tall ? "tall" : "persist",
             quant_type_name(type), n_in, n_out, n_rows, k, n_expert, DIST[dist], x_per_slot ? " slot-x" : "",
             pair ? " pair" : "");
    /* PERSIST's forms: the switch off (the reference), then on: tiles of 8 / 16 / 32 slots, by shape (BY), by shape
     * and 32 inside a captured graph. TALL's: not narrow (the reference: WIDE), narrow with the switch off (WIDE),
     * narrow and on (BY), on inside a captured graph, not narrow with mode 2 (every WIDE plan), narrow with mode 3
     * (tall only where n_in <= 512). */
    enum { NF = 7 };
    const int f_on[NF] = {0, 1, 1, 1, 1, 1, 1}, f_ts[NF] = {0, 8, 16, 32, 0, 0, 32};
    const int f_graph[NF] = {0, 0, 0, 0, 0, 1, 1};
    const int t_narrow[NF] = {0, 1, 1, 1, 0, 1}, t_on[NF] = {1, 0, 1, 1, 2, 3}, t_graph[NF] = {0, 0, 0, 1, 0, 0};
    const int nf = tall ? 6 : NF, BY = tall ? 2 : 4;
    float *got[NF][2];
    size_t diffs = 0;
    for (int f = 0; f < nf; f++) {
        float *dy[2] = {dev_poisoned(ny), pair ? dev_poisoned(ny) : NULL};
        a.y = dy[0];
        char wf[160];
        unsigned long long l0;
        if (tall) {
            a.narrow = t_narrow[f];
            cuda_moe_tall_set(t_on[f]);
            l0 = cuda_moe_tall_launches();
            snprintf(wf, sizeof wf, "%s, narrow %d mode %d%s", what, t_narrow[f], t_on[f], t_graph[f] ? " graph" : "");
        } else {
            cuda_moe_persist_set(f_on[f]);
            cuda_moe_persist_tile_set(f_ts[f]);
            l0 = cuda_moe_persist_launches();
            snprintf(wf, sizeof wf, "%s, switch %d ts %d%s", what, f_on[f], f_ts[f], f_graph[f] ? " graph" : "");
        }
        persist_run(&a, pair ? dw + n_expert * ex : NULL, dy[1], work, st, tall ? t_graph[f] : f_graph[f], wf);
        if (tall) { /* one launch a product, or one for the pair (igemm_tall_kernel takes it on grid.z) */
            const unsigned long long taken = cuda_moe_tall_launches() - l0;
            const int on = t_on[f] == 2 || (t_narrow[f] && t_on[f] == 1) ||
                           (t_narrow[f] && t_on[f] == 3 && n_in <= 512); /* 3: the narrowed down only */
            CHECK_MSG(on ? taken >= 1 && taken <= nm : taken == 0, "%s: the tall kernel took %llu launches", wf,
                      taken);
        } else {
            const unsigned long long taken = cuda_moe_persist_launches() - l0;
            CHECK_MSG(taken == (f_on[f] ? nm : 0), "%s: the persistent kernel took %llu launches", wf, taken);
        }
        for (size_t u = 0; u < nm; u++) {
            got[f][u] = malloc(ny * sizeof(float));
            dev_download(got[f][u], dy[u], ny);
            cudaFree(dy[u]);
            if (f == 0) continue;
            const size_t d = few_diff(got[f][u], got[0][u], ny);
            CHECK_MSG(d == 0, "%s: %zu of %zu outputs differ from the WIDE form's", wf, d, ny);
            diffs += d;
        }
    }
    cuda_moe_persist_set(-1);
    cuda_moe_persist_tile_set(-1);
    cuda_moe_tall_set(-1);
    /* the form by shape (what a pass runs; the others are its bits): the bad slots' outputs NaN, every other output
     * finite, sampled ones against the CPU */
    size_t nan = 0, unfinite = 0;
    for (size_t u = 0; u < nm; u++)
        for (size_t s = 0; s < n_slots; s++)
            for (size_t o = 0; o < n_out; o++) {
                const float v = got[BY][u][s * n_out + o];
                if (ids[s] < 0 || (size_t)ids[s] >= n_expert)
                    nan += isnan(v) != 0;
                else
                    unfinite += !isfinite(v);
            }
    size_t n_bad = 0;
    for (size_t s = 0; s < n_slots; s++) n_bad += (size_t)ids[s] >= n_expert;
    CHECK_MSG(nan == n_bad * n_out * nm, "%s: %zu NaN outputs of bad slots (expected %zu)", what, nan,
              n_bad * n_out * nm);
    CHECK_MSG(unfinite == 0, "%s: %zu outputs not finite", what, unfinite);
    double e2 = 0, r2 = 0;
    size_t checked = 0;
    for (size_t u = 0; u < nm; u++)
        for (size_t sl = 0; sl < n_slots; sl += 5) {
            if ((size_t)ids[sl] >= n_expert) continue;
            const float *xs = x + (x_per_slot ? sl : sl / k) * n_in;
            for (size_t o = 0; o < n_out; o += 7) {
                const float ref = decode_ref(type, w + (u * n_expert + (size_t)ids[sl]) * ex + o * rb, xs, n_in);
                const double d = (double)got[BY][u][sl * n_out + o] - ref;
                e2 += d * d, r2 += (double)ref * ref;
                checked++;
            }
        }
    const double err = sqrt(e2 / (r2 > 0 ? r2 : 1));
    CHECK_MSG(checked == 0 || r2 > 0, "%s: the reference is all zeros", what);
    CHECK_MSG(err <= 1e-5, "%s: normalised error %.3g against the CPU", what, err);
    printf("  %-66s %s (%zu outputs x %d forms), CPU err %.2g (%zu)\n", what,
           diffs ? "DIFFERS" : "bit-identical to WIDE", nm * ny, nf - 1, err, checked);
    for (int f = 0; f < nf; f++)
        for (size_t u = 0; u < nm; u++) free(got[f][u]);
    cudaStreamDestroy(st);
    free(w), free(x), free(ids);
    cudaFree(dw), cudaFree((void *)a.x), cudaFree((void *)a.ids), cudaFree(work);
}

/* CLOVER_TEST_SMALL (under compute-sanitizer): Q4_K only, the preview pair at n_in 512, the decode batch, no slot */
static void test_moe_persist(void) {
    const int small = getenv("CLOVER_TEST_SMALL") != NULL;
    const uint32_t types[2] = {QUANT_Q4_K, QUANT_Q5_K};
    cuda_igemm_few_set(0); /* the few-row form would take the previews' 32 rows in both runs */
    for (int t = 0; t < (small ? 1 : 2); t++) {
        const uint32_t ty = types[t];
        if (small) {
            persist_case(ty, 512, 200, 32, 8, 64, PERSIST_PREVIEW, 0, 1, 0);
            persist_case(ty, 256, 136, 16, 8, 100, PERSIST_SPREAD, 0, 1, 0);
            persist_case(ty, 256, 130, 4, 2, 8, PERSIST_ALL_BAD, 0, 1, 0);
            continue;
        }
        persist_case(ty, 2048, 512, 32, 8, 64, PERSIST_PREVIEW, 0, 1, 0);     /* the 35B-A3B preview's gate + up */
        persist_case(ty, 512, 2048, 32, 8, 64, PERSIST_PREVIEW, 1, 0, 0);     /* its down: x a slot, 16 output tiles */
        persist_case(ty, 256, 200, 16, 8, 100, PERSIST_SPREAD, 0, 1, 0);      /* a decode batch's 128 slots, 1 chunk */
        persist_case(ty, 768, 136, 1, 1, 5, PERSIST_SPREAD, 0, 0, 0);         /* one slot, 3 chunks */
        persist_case(ty, 256, 130, 4, 2, 8, PERSIST_ALL_BAD, 0, 1, 0);        /* no slot reaches the kernel */
        persist_case(ty, 768, 200, 24, 6, 40, PERSIST_PREVIEW_BAD, 1, 0, 0); /* 24 slots an expert, a bad id */
    }
    few_restore();
}

/* TALL (matmul_igemm.cu's igemm_tall_kernel, CLOVER_CUDA_MOE_TALL=1: narrowed passes; off by default): the grouped
 * Q4_K / Q5_K products of a pass routed inside a coreset on tiles of <= 32 slots, 64 outputs a block, against the WIDE
 * form (not narrowed, and narrowed with the switch off) bit for bit, eagerly and in a graph; the slot layouts of a
 * 35B-A3B coreset preview (every row on the same 8 experts: 32 slots each; its down product with x a slot), tiles of
 * every size in one launch (PERSIST_MIXED: 32, 20, 16, 10-11, 6-7 and 1 slots: the 4-, 2- and 1-n-tile bodies and
 * dead rows in a live n-tile), a bad id among preview rows, no slot at all, an n_out that is no multiple of 64,
 * one super-block; gate + up pairs; then against the CPU as persist_case does. CLOVER_TEST_SMALL: Q4_K, three. */
static void test_moe_tall(void) {
    const int small = getenv("CLOVER_TEST_SMALL") != NULL;
    const uint32_t types[2] = {QUANT_Q4_K, QUANT_Q5_K};
    cuda_igemm_few_set(0); /* the few-row form would take the previews' 32 rows in every run */
    for (int t = 0; t < (small ? 1 : 2); t++) {
        const uint32_t ty = types[t];
        persist_case(ty, 512, 200, 32, 8, 64, PERSIST_PREVIEW, 0, 1, 1);
        persist_case(ty, 768, 136, 32, 8, 64, PERSIST_MIXED, 1, 0, 1);
        persist_case(ty, 256, 130, 4, 2, 8, PERSIST_ALL_BAD, 0, 1, 1);
        if (small) continue;
        persist_case(ty, 2048, 512, 32, 8, 256, PERSIST_PREVIEW, 0, 1, 1);  /* the 35B-A3B preview's gate + up */
        persist_case(ty, 512, 2048, 32, 8, 256, PERSIST_PREVIEW, 1, 0, 1);  /* its down: x a slot */
        persist_case(ty, 2048, 520, 32, 8, 64, PERSIST_MIXED, 0, 1, 1);     /* mixed tiles, a partial m-tile */
        persist_case(ty, 256, 200, 20, 6, 40, PERSIST_PREVIEW_BAD, 1, 0, 1); /* 20 slots an expert, a bad id */
    }
    few_restore();
}

static void test_moe_dec32(void) {
    const int small = getenv("CLOVER_TEST_SMALL") != NULL;
    static const size_t R[] = {1, 2, 3, 7, 8, 9, 16, 17, 31, 32};
    static const size_t K[] = {1, 3, 8};
    const uint32_t T[4] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    for (int t = 0; t < 4; t++)
        for (size_t ri = 0; ri < sizeof R / sizeof R[0]; ri++) {
            const size_t kk = K[(ri + (size_t)t) % 3];
            const int kind = (int)((ri + (size_t)t) % 3); /* spread, dup, same */
            if (small && ri % 3) continue;
            dec32_case(T[t], n_in_for(T[t]), 45, R[ri], kk, 9, kind, (int)(ri & 1), 0, 0);
            dec32_case(T[t], n_in_variant(T[t], 2), 45, R[ri], kk == 1 ? 8 : kk, 9 + 2 * (size_t)t, 0, 0,
                       1, (int)(ri % 2));
        }
    /* the 35B-A3B shapes: gate + up 2048 -> 512, down 512 -> 2048, Q4_K, 129 experts (pooled ids too) */
    static const size_t RB[] = {1, 4, 8, 16, 32};
    for (size_t ri = 0; ri < sizeof RB / sizeof RB[0]; ri++) {
        dec32_case(QUANT_Q4_K, 2048, 512, RB[ri], 8, 129, 0, 1, 0, 0);
        dec32_case(QUANT_Q4_K, 512, 2048, RB[ri], 8, 129, 0, 0, 1, ri == 3);
    }
    dec32_case(QUANT_Q4_K, 2048, 512, 32, 8, 129, 1, 1, 0, 1); /* duplicate-heavy, pooled */
    dec32_case(QUANT_Q6_K, 512, 2048, 16, 8, 33, 0, 0, 1, 0);  /* 420-byte rows: not staged */
    /* the bad id; k 16; float weights (scalar and 16-byte paths) */
    dec32_case(QUANT_Q4_K, n_in_for(QUANT_Q4_K), 45, 12, 4, 9, 3, 0, 0, 0);
    dec32_case(QUANT_Q8_0, n_in_for(QUANT_Q8_0), 45, 20, 4, 9, 3, 1, 0, 0);
    dec32_case(QUANT_Q8_0, n_in_for(QUANT_Q8_0), 45, 32, 16, 19, 0, 0, 1, 0);
    for (int t = 0; t < 3; t++) {
        dec32_case(TYPES[t], n_in_variant(TYPES[t], 0), 45, 13, 4, 9, 0, t == 1, 0, 0);
        dec32_case(TYPES[t], n_in_variant(TYPES[t], 1), 45, 24, 3, 9, 1, t != 1, 1, 0);
    }
    /* bad arguments */
    cuda_moe_args a = {.type = QUANT_Q4_K, .expert_stride = 144 * 4, .n_expert = 2, .n_out = 4, .n_in = 256,
                       .n_rows = 33, .k = 2};
    int dummy = 0;
    a.w = &dummy, a.x = (const float *)&dummy, a.y = (float *)&dummy, a.ids = &dummy;
    char why[256] = "";
    CHECK(cuda_moe_dec32(&a, &dummy, NULL, why, sizeof why) == -1);
    CHECK(strstr(why, "rows") != NULL);
    a.n_rows = 2, a.k = 17;
    CHECK(cuda_moe_dec32(&a, &dummy, NULL, why, sizeof why) == -1);
    a.k = 2;
    CHECK(cuda_moe_dec32_glu(&a, NULL, &dummy, NULL, why, sizeof why) == -1);
    CHECK(cuda_moe_dec32(&a, NULL, NULL, why, sizeof why) == -1);
    /* the fast form took every Q4_K / Q5_K case whose shared memory it fits: at least the 35B shapes' ten */
    CHECK_MSG(!cuda_moe_fast_enabled() || dec32_fast_cases >= 10, "the fast form took %zu cases", dec32_fast_cases);
    printf("  dec32        %zu cases bit-identical to the decode form (and the chunk form for integer types); %zu "
           "through the fast form, bit-identical to moe_decode.cu's own kernel\n",
           dec32_cases, dec32_fast_cases);
}

/* ---- moe_fast.cu: the cheaper Q4_K / Q5_K form of cuda_moe_decode (CLOVER_CUDA_MOE_FAST, cuda_moe_fast_set) ----
 * Each case runs cuda_moe_decode (or _glu) on the same inputs with the fast form off, then on, into outputs
 * poisoned with NaN first, and asks for the same bits; the fast form's launch count says whether it was taken
 * (Q4_K / Q5_K when its shared memory fits; Q6_K and Q8_0 keep the old form, checked unchanged); each slot is
 * checked against the CPU's integer path (decode_ref). Shapes: the 35B-A3B expert products (gate + up
 * 2048 -> 512, down 512 -> 2048), 3 super-blocks (odd: the even / odd order), 22 (too big at 8 rows: old form),
 * 45 outputs (a partial block); rows 1..8; odd expert counts; spread / dup / same / bad-id routings. */
static size_t fast_cases, fast_taken;

static void fast_case(uint32_t type, size_t n_in, size_t n_out, size_t n_rows, size_t k, size_t n_expert, int kind,
                      int glu, int x_per_slot, int pool) {
    const size_t n_slots = n_rows * k, n_x = x_per_slot ? n_slots : n_rows;
    size_t rb;
    const size_t n_w = glu ? 2 : 1;
    const uint8_t *w = dec32_weights(type, n_w * n_expert * n_out, n_in, &rb);
    const size_t ex = n_out * rb, stride = pool ? ex + 256 : ex;
    uint8_t *wp = calloc(n_w * n_expert, stride);
    for (size_t m = 0; m < n_w * n_expert; m++) memcpy(wp + m * stride, w + m * ex, ex);
    float *x = malloc(n_x * n_in * sizeof(float));
    fill(x, n_x * n_in, 2.0);
    if (kind == 3 && n_in >= 512) x[300] = 0.0f, x[301] = -0.0f; /* a few zeros among the codes */
    int32_t *ids = malloc(n_slots * sizeof(int32_t));
    make_ids_kind(ids, n_rows, k, n_expert, kind);
    cuda_moe_args a = {.type = type, .expert_stride = stride, .n_expert = n_expert, .n_out = n_out, .n_in = n_in,
                       .n_rows = n_rows, .k = k, .x_per_slot = x_per_slot};
    uint8_t *dw = dev_upload(wp, n_w * n_expert * stride);
    const uint8_t *dw_up = glu ? dw + n_expert * stride : NULL;
    a.w = dw;
    a.x = dev_upload(x, n_x * n_in * sizeof(float));
    a.ids = dev_upload(ids, n_slots * sizeof(int32_t));
    const size_t ny = n_slots * n_out;
    float *dy_old = dev_poisoned(ny), *dy_new = dev_poisoned(ny);
    float *old = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float));
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_moe_decode_work_bytes(&a) + 256));
    char why[256] = "", what[96];
    snprintf(what, sizeof what, "fast %s %zux%zu r%zu k%zu E%zu %s%s%s%s", quant_type_name(type), n_in, n_out, n_rows,
             k, n_expert, kind == 0 ? "spread" : kind == 1 ? "dup" : kind == 2 ? "same" : "bad", glu ? " glu" : "",
             x_per_slot ? " slot-x" : "", pool ? " pool" : "");
    for (int on = 0; on < 2; on++) {
        cuda_moe_fast_set(on);
        const unsigned long long n0 = cuda_moe_fast_launches();
        a.y = on ? dy_new : dy_old;
        CHECK_MSG((glu ? cuda_moe_decode_glu(&a, dw_up, work, NULL, why, sizeof why)
                       : cuda_moe_decode(&a, work, NULL, why, sizeof why)) == 0,
                  "%s (fast %s): %s", what, on ? "on" : "off", why);
        CU(cudaDeviceSynchronize());
        const unsigned long long took = cuda_moe_fast_launches() - n0;
        if (!on) CHECK_MSG(took == 0, "%s: the fast form ran while off", what);
        if (on) fast_taken += took != 0;
        if (on && (type == QUANT_Q6_K || type == QUANT_Q8_0)) CHECK_MSG(took == 0, "%s: fast form on %s", what,
                                                                         quant_type_name(type));
        if (on && (type == QUANT_Q4_K || type == QUANT_Q5_K) && n_in <= 2048) /* fits 48 KB */
            CHECK_MSG(took == 1, "%s: the fast form was not taken", what);
    }
    cuda_moe_fast_set(-1);
    dev_download(old, dy_old, ny);
    dev_download(got, dy_new, ny);
    size_t diff = 0;
    for (size_t i = 0; i < ny; i++) diff += memcmp(&got[i], &old[i], sizeof(float)) != 0;
    CHECK_MSG(diff == 0, "%s: %zu of %zu outputs differ from the old form's bits", what, diff, ny);
    const size_t bad = kind == 3 && n_slots > 1 ? 1 : SIZE_MAX; /* slot 1's outputs stay poisoned */
    const size_t ss = n_slots > 64 ? 7 : 1, os = n_out > 256 ? 37 : 1; /* the CPU reference on a sample */
    float *ref = calloc(ny, sizeof(float));
    size_t checked = 0;
    for (size_t sl = 0; sl < n_slots; sl += ss) {
        if (sl == bad) continue;
        const float *xs = x + (x_per_slot ? sl : sl / k) * n_in;
        for (size_t o = 0; o < n_out; o += os) {
            const uint8_t *row = w + ((size_t)ids[sl] * n_out + o) * rb;
            float r = decode_ref(type, row, xs, n_in);
            if (glu) {
                const float u = decode_ref(type, row + n_expert * n_out * rb, xs, n_in);
                r = (r / (1.0f + expf(-r))) * u;
            }
            ref[sl * n_out + o] = r;
            checked++;
        }
    }
    const double err = check_moe_outputs(what, got, ref, n_slots, n_out, bad, ss, os, 1e-5);
    free(ref);
    if (diff == 0) printf("  %-60s bit-identical (%zu outputs), CPU err %.2g (%zu)\n", what, ny, err, checked);
    fast_cases++;
    free(wp), free(x), free(ids), free(got), free(old);
    cudaFree(dw), cudaFree((void *)a.x), cudaFree((void *)a.ids), cudaFree(dy_new), cudaFree(dy_old), cudaFree(work);
}

static void test_moe_fast(void) {
    const int small = getenv("CLOVER_TEST_SMALL") != NULL;
    const uint32_t T[4] = {QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_Q8_0};
    static const size_t K[] = {1, 3, 8};
    /* the 35B-A3B shapes, every row count, Q4_K (its experts' type) and Q5_K; 33 experts (129 took > 150 s on the
     * H200 for the whole test: the host's quantising) */
    for (int t = 0; t < 2; t++)
        for (size_t r = 1; r <= 8; r++) {
            if (small && r % 3 != 1) continue;
            fast_case(T[t], 2048, 512, r, 8, 33, r == 5 ? 1 : 0, 1, 0, r == 3);
            fast_case(T[t], 512, 2048, r, 8, 33, r == 6 ? 1 : 0, 0, 1, r == 4);
        }
    /* odd super-block counts, partial blocks, k 1 / 3, dup / same / bad routings, every type */
    for (int t = 0; t < 4; t++)
        for (size_t r = 1; r <= 8; r++) {
            if (small && r % 4 != 1) continue;
            const size_t kk = K[(r + (size_t)t) % 3];
            const int kind = (int)((r + (size_t)t) % 4); /* spread, dup, same, bad */
            fast_case(T[t], n_in_for(T[t]), 45, r, kk, 9 + 2 * (size_t)t, kind, (int)(r & 1), (int)(r % 3 == 0), 0);
            if (!small) fast_case(T[t], n_in_variant(T[t], 1), 45, r, kk, 7, 0, (int)(r % 2 == 0), 0, 0);
        }
    printf("  fast         %zu cases bit-identical to the old decode form (%zu took the fast form)\n", fast_cases,
           fast_taken);
    CHECK(fast_taken > 0);
}

/* The grouping of cuda_moe_chunk at expert counts past one warp (moe_group_fast_kernel's block-wide scans over
 * 100 and 300 experts: warps 0..3 and 0..9 own experts) and past 1024 (the one-thread kernel): the wide tiles
 * (<= 4 slots an expert) bit for bit the decode form, the 32-row tiles (more slots: expert 0 in 3 rows of 4,
 * several tiles) within the oracle's bound, for Q8_0 (its own tile kernel) and Q4_K. */
static void test_moe_many_experts(void) {
    static const size_t E[] = {100, 300, 1100};
    for (int i = 0; i < 3; i++) {
        g_moe_experts = E[i];
        moe_case(QUANT_Q8_0, 8, 0, 1, 0, 0);
        moe_case(QUANT_Q4_K, 7, 1, 1, 0, 0);
        if (E[i] == 100) {
            moe_case(QUANT_Q8_0, 130, 0, 1, 0, 0); /* 520 slots > 4 x 100: tiles of 32 slots, ~98 on expert 0 */
            moe_case(QUANT_Q4_K, 130, 1, 1, 0, 0);
        }
    }
    g_moe_experts = 9;
}

/* Several matrices in one launch: each against the oracle, and bit for bit the separate cuda_matmul_decode calls. */
static void multi_case(uint32_t type, size_t n_rows, int variant) {
    enum { NS = 3 };
    const size_t n_out[NS] = {45, 7, 130}, n_in = n_in_variant(type, variant);
    uint8_t *w[NS];
    void *dw[NS];
    float *dy[NS], *ref[NS], *got[NS], *alone = malloc(130 * n_rows * sizeof(float));
    float *x = malloc(n_rows * n_in * sizeof(float));
    fill(x, n_rows * n_in, 2.0);
    float *dx = dev_upload(x, n_rows * n_in * sizeof(float));
    size_t rb = 0;
    cuda_matmul_seg seg[NS];
    for (int i = 0; i < NS; i++) {
        w[i] = make_weights(type, n_out[i], n_in, &rb);
        dw[i] = dev_upload(w[i], n_out[i] * rb);
        dy[i] = dev_poisoned(n_rows * n_out[i]);
        ref[i] = malloc(n_rows * n_out[i] * sizeof(float));
        got[i] = malloc(n_rows * n_out[i] * sizeof(float));
        for (size_t r = 0; r < n_rows; r++)
            for (size_t o = 0; o < n_out[i]; o++)
                ref[i][r * n_out[i] + o] = decode_ref(type, w[i] + o * rb, x + r * n_in, n_in);
        seg[i] = (cuda_matmul_seg){.w = dw[i], .n_out = n_out[i], .y = dy[i]};
    }
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_matmul_decode_work_bytes(type, n_in, n_rows) + 256));
    char why[256] = "", what[48];
    CHECK_MSG(cuda_matmul_decode_multi(type, seg, NS, n_in, dx, n_rows, work, NULL, why, sizeof why) == 0, "%s", why);
    snprintf(what, sizeof what, "multi x%zu/%zu", n_rows, n_in);
    for (int i = 0; i < NS; i++) {
        dev_download(got[i], dy[i], n_rows * n_out[i]);
        check_close(what, type, got[i], ref[i], n_rows * n_out[i], 1e-5);
        CHECK_MSG(cuda_matmul_decode(type, dw[i], n_out[i], n_in, dx, n_rows, dy[i], work, NULL, why, sizeof why) == 0,
                  "%s", why);
        dev_download(alone, dy[i], n_rows * n_out[i]);
        CHECK_MSG(memcmp(alone, got[i], n_rows * n_out[i] * sizeof(float)) == 0,
                  "%s %s: matrix %d differs from its own launch", what, quant_type_name(type), i);
    }
    for (int i = 0; i < NS; i++) free(w[i]), free(ref[i]), free(got[i]), cudaFree(dw[i]), cudaFree(dy[i]);
    free(x), free(alone), cudaFree(dx), cudaFree(work);
}

static void test_multi(void) {
    for (int t = 0; t < N_TYPES; t++) {
        multi_case(TYPES[t], 1, 0);
        multi_case(TYPES[t], 8, 1);
        multi_case(TYPES[t], 2, 2);
    }
    char why[256] = "";
    cuda_matmul_seg seg[5] = {{0}};
    CHECK(cuda_matmul_decode_multi(QUANT_Q8_0, seg, 5, 64, (const float *)seg, 1, NULL, NULL, why, sizeof why) == -1);
    CHECK_MSG(strstr(why, "5 matrices") != NULL, "%s", why);
}

/* Gate and up fused with SwiGLU, dense (one "expert", every slot its row) or
 * grouped, on a non-blocking stream (so with PDL unless it is switched off). */
static void glu_case(uint32_t type, size_t n_rows, int moe, int variant) {
    const size_t n_expert = moe ? 7 : 1, k = moe ? 3 : 1, n_out = 45, n_in = n_in_variant(type, variant);
    const size_t n_slots = n_rows * k, ny = n_slots * n_out;
    size_t rb;
    uint8_t *wg = make_weights(type, n_expert * n_out, n_in, &rb), *wu = make_weights(type, n_expert * n_out, n_in, &rb);
    float *x = malloc(n_rows * n_in * sizeof(float));
    fill(x, n_rows * n_in, 2.0);
    int32_t *ids = calloc(n_slots, sizeof(int32_t));
    if (moe) make_ids(ids, n_rows, k, n_expert);
    float *ref = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float)), *h = malloc(ny * sizeof(float));
    for (size_t s = 0; s < n_slots; s++)
        for (size_t o = 0; o < n_out; o++) {
            const size_t row = ((size_t)ids[s] * n_out + o) * rb;
            const float g = decode_ref(type, wg + row, x + (s / k) * n_in, n_in);
            const float u = decode_ref(type, wu + row, x + (s / k) * n_in, n_in);
            ref[s * n_out + o] = (g / (1.0f + expf(-g))) * u;
        }
    void *dwg = dev_upload(wg, n_expert * n_out * rb), *dwu = dev_upload(wu, n_expert * n_out * rb);
    float *dx = dev_upload(x, n_rows * n_in * sizeof(float));
    int32_t *dids = dev_upload(ids, n_slots * sizeof(int32_t));
    cuda_moe_args a = {.type = type, .w = dwg, .expert_stride = n_out * rb, .n_expert = n_expert, .n_out = n_out,
                       .n_in = n_in, .ids = dids, .n_rows = n_rows, .k = k, .x = dx};
    const size_t wb = moe ? cuda_moe_decode_work_bytes(&a) : cuda_matmul_decode_work_bytes(type, n_in, n_rows);
    void *work = NULL;
    CU(cudaMalloc(&work, wb + 256));
    float *dy = dev_poisoned(ny), *dg = dev_poisoned(ny), *du = dev_poisoned(ny);
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    char why[256] = "", what[48];
    snprintf(what, sizeof what, "%s x%zu/%zu", moe ? "moe glu" : "glu", n_rows, n_in);
    CU(cudaDeviceSynchronize()); /* the poisoning and uploads (legacy stream) before st's work */
    for (int pass = 0; pass < 4; pass++) { /* 0: fused, PDL on; 1: unfused; 2: fused, PDL off; 3: not staged */
        cuda_pdl_set(pass != 2);
        cuda_mmv_stage_set(pass != 3);
        int rc;
        CU(cudaMemsetAsync(dy, 0xFF, ny * sizeof(float), st));
        if (pass != 1) {
            a.y = dy;
            rc = moe ? cuda_moe_decode_glu(&a, dwu, work, st, why, sizeof why)
                     : cuda_matmul_decode_glu(type, dwg, dwu, n_out, n_in, dx, n_rows, dy, work, st, why, sizeof why);
        } else {
            cuda_moe_args b = a;
            b.y = dg;
            rc = moe ? cuda_moe_decode(&b, work, st, why, sizeof why)
                     : cuda_matmul_decode(type, dwg, n_out, n_in, dx, n_rows, dg, work, st, why, sizeof why);
            b.w = dwu, b.y = du;
            if (rc == 0)
                rc = moe ? cuda_moe_decode(&b, work, st, why, sizeof why)
                         : cuda_matmul_decode(type, dwu, n_out, n_in, dx, n_rows, du, work, st, why, sizeof why);
            if (rc == 0 && cuda_swiglu(dy, dg, du, ny, st) != 0) rc = -1, snprintf(why, sizeof why, "cuda_swiglu");
        }
        CHECK_MSG(rc == 0, "%s: %s", what, why);
        CU(cudaStreamSynchronize(st));
        dev_download(pass == 0 ? got : h, dy, ny);
        if (pass == 0)
            check_close(what, type, got, ref, ny, 1e-5);
        else
            CHECK_MSG(memcmp(got, h, ny * sizeof(float)) == 0, "%s %s: fused differs from %s", what,
                      quant_type_name(type),
                      pass == 1   ? "gate, up, then cuda_swiglu"
                      : pass == 2 ? "the same with PDL off"
                                  : "the same with the weights not staged");
    }
    cuda_pdl_set(1);
    cuda_mmv_stage_set(1);
    cudaStreamDestroy(st);
    free(wg), free(wu), free(x), free(ids), free(ref), free(got), free(h);
    cudaFree(dwg), cudaFree(dwu), cudaFree(dx), cudaFree(dids), cudaFree(work), cudaFree(dy), cudaFree(dg),
        cudaFree(du);
}

static void test_glu(void) {
    for (int t = 0; t < N_TYPES; t++) {
        glu_case(TYPES[t], 1, 0, 0);
        glu_case(TYPES[t], 8, 0, 1);
        glu_case(TYPES[t], 1, 1, 0);
        glu_case(TYPES[t], 5, 1, 0);
        glu_case(TYPES[t], 1, 0, 2); /* staged weights */
        glu_case(TYPES[t], 3, 1, 2);
    }
    glu_case(QUANT_Q4_K, 8, 1, 1); /* 8-bit rows in work, not shared memory */
}

/* ---- the down product's rows formed by its quantiser (cuda_matmul_chunk_ws_glu, cuda_moe_args.x_up) ----
 * Each integer type, dense at 1..40 rows and grouped at 3..32 rows (few and many slots an expert): the product of
 * the rows silu(g) * u made by the quantiser equals, bit for bit, cuda_swiglu(h, g, u) followed by the plain product
 * of h (cuda_matmul_chunk_ws, cuda_moe_chunk: each tested against the CPU oracle above). g and u carry large, tiny,
 * negative and zero values, one row an inf (its outputs NaN both ways). Outputs poisoned first. The grouped form
 * with the grouping and the 8-bit rows in one launch (cuda_group_quant_set, the default) and in two; the reference
 * (cuda_moe_chunk of h) in one, and with the integer kernel's weight copies in their range-checked form
 * (cuda_ig_aligned_set(0)) where the products under test take the aligned form: both forms' bits checked at once.
 * Float weights and no scratch are refused with a reason. */
static int t_group_quant = 1;
static void glu_quant_case(uint32_t type, size_t n_rows, int moe, size_t k, size_t n_expert) {
    const size_t n_in = 512, n_out = moe ? 48 : 72, n_x = moe ? n_rows * k : n_rows;
    size_t rb;
    uint8_t *w = make_weights(type, (moe ? n_expert : 1) * n_out, n_in, &rb);
    float *g = malloc(n_x * n_in * sizeof(float)), *u = malloc(n_x * n_in * sizeof(float));
    fill(g, n_x * n_in, 6.0);
    fill(u, n_x * n_in, 2.0);
    for (size_t i = 0; i < n_x * n_in; i += 97) g[i] = i % 2 ? -30.0f : 1e-6f; /* silu's tails */
    for (size_t i = 5; i < n_x * n_in; i += 131) u[i] = 0.0f;
    if (n_x > 1) g[n_in + 7] = INFINITY; /* row 1: inf * u: a non-finite block */
    const size_t ny = n_x * n_out;
    float *dw = (float *)dev_upload(w, (moe ? n_expert : 1) * n_out * rb);
    float *dg = (float *)dev_upload(g, n_x * n_in * sizeof(float));
    float *du = (float *)dev_upload(u, n_x * n_in * sizeof(float));
    float *dh = dev_poisoned(n_x * n_in), *y0 = dev_poisoned(ny), *y1 = dev_poisoned(ny);
    int32_t *ids = malloc((n_x + 1) * sizeof(int32_t));
    cuda_moe_args a = {.type = type, .expert_stride = n_out * rb, .n_expert = n_expert, .n_out = n_out, .n_in = n_in,
                       .n_rows = n_rows, .k = k, .x_per_slot = 1};
    size_t wb = cuda_matmul_chunk_work_bytes(type, n_in, n_rows);
    if (moe) {
        make_ids(ids, n_rows, k, n_expert);
        a.ids = dev_upload(ids, n_x * sizeof(int32_t));
        a.w = dw;
        wb = cuda_moe_chunk_work_bytes(&a);
    }
    void *work = NULL;
    CU(cudaMalloc(&work, wb + 256));
    char why[256] = "";
    int rc = cuda_swiglu(dh, dg, du, n_x * n_in, NULL);
    cuda_ig_aligned_set(0); /* the reference with the weight copies' range-checked form */
    if (moe) {
        a.x = dh, a.y = y0;
        if (!rc) rc = cuda_moe_chunk(&a, work, NULL, why, sizeof why);
        cuda_ig_aligned_set(-1);
        a.x = dg, a.x_up = du, a.y = y1;
        cuda_group_quant_set(t_group_quant); /* the grouping and the rows in one launch, or two */
        if (!rc) rc = cuda_moe_chunk(&a, work, NULL, why, sizeof why);
        cuda_group_quant_set(-1);
    } else {
        if (!rc) rc = cuda_matmul_chunk_ws(type, dw, n_out, n_in, dh, n_rows, y0, work, NULL, why, sizeof why);
        cuda_ig_aligned_set(-1);
        if (!rc) rc = cuda_matmul_chunk_ws_glu(type, dw, n_out, n_in, dg, du, n_rows, y1, work, NULL, why, sizeof why);
    }
    CHECK_MSG(rc == 0, "glu_quant type %u rows %zu moe %d: %s", (unsigned)type, n_rows, moe, why);
    CU(cudaDeviceSynchronize());
    float *h0 = malloc(ny * sizeof(float)), *h1 = malloc(ny * sizeof(float));
    dev_download(h0, y0, ny);
    dev_download(h1, y1, ny);
    size_t differ = 0, finite = 0;
    for (size_t i = 0; i < ny; i++) {
        differ += memcmp(&h0[i], &h1[i], sizeof(float)) != 0;
        finite += isfinite(h0[i]) != 0;
    }
    CHECK_MSG(differ == 0, "glu_quant type %u rows %zu moe %d: %zu of %zu outputs differ from cuda_swiglu + product",
              (unsigned)type, n_rows, moe, differ, ny);
    CHECK_MSG(finite + (n_x > 1 ? n_out : 0) == ny, "glu_quant type %u rows %zu moe %d: %zu of %zu outputs finite",
              (unsigned)type, n_rows, moe, finite, ny);
    free(h0), free(h1), free(g), free(u), free(w), free(ids);
    cudaFree(work), cudaFree(dw), cudaFree(dg), cudaFree(du), cudaFree(dh), cudaFree(y0), cudaFree(y1);
    if (moe) cudaFree((void *)a.ids);
}

static void test_glu_quant(void) {
    for (int t = 3; t < N_TYPES; t++) { /* the integer types */
        glu_quant_case(TYPES[t], 1, 0, 0, 0);
        glu_quant_case(TYPES[t], 5, 0, 0, 0);
        glu_quant_case(TYPES[t], 32, 0, 0, 0);
        glu_quant_case(TYPES[t], 40, 0, 0, 0);
        glu_quant_case(TYPES[t], 3, 1, 2, 6);   /* few slots an expert: the wide tiles */
        glu_quant_case(TYPES[t], 32, 1, 8, 9);  /* a preview's coreset: ~28 slots an expert */
        glu_quant_case(TYPES[t], 16, 1, 8, 64); /* a stacked step: 1-2 slots an expert */
        t_group_quant = 0;                      /* the grouping and the rows in two launches */
        glu_quant_case(TYPES[t], 32, 1, 8, 9);
        t_group_quant = 1;
    }
    /* refused: float weights (no quantiser), no scratch, a pair with x_up */
    char why[256] = "";
    float *d = dev_poisoned(512 * 4);
    CHECK(cuda_matmul_chunk_ws_glu(QUANT_F32, d, 2, 512, d, d, 1, d, d, NULL, why, sizeof why) != 0 &&
          strstr(why, "integer") != NULL);
    CHECK(cuda_matmul_chunk_ws_glu(QUANT_Q8_0, d, 2, 512, d, d, 1, d, NULL, NULL, why, sizeof why) != 0);
    cudaFree(d);
}

/* The stream and graph rule: every entry point captured into one CUDA graph
 * (a capture fails on any synchronising or host-reading call) and replayed
 * gives the bits the direct calls give. */
static void test_graph_capture(void) {
    const uint32_t type = QUANT_Q4_K;
    const size_t n_in = 512, n_out = 40, n_expert = 6, k = 2, n_rows = 3, n_chunk = 20;
    size_t rb;
    uint8_t *w = make_weights(type, n_expert * n_out, n_in, &rb);
    float *x = malloc(n_chunk * n_in * sizeof(float));
    fill(x, n_chunk * n_in, 1.0);
    int32_t ids[20 * 2];
    make_ids(ids, n_chunk, k, n_expert);
    cuda_moe_args a = {.type = type, .expert_stride = n_out * rb, .n_expert = n_expert, .n_out = n_out,
                       .n_in = n_in, .n_rows = n_rows, .k = k};
    a.w = dev_upload(w, n_expert * n_out * rb);
    a.x = dev_upload(x, n_chunk * n_in * sizeof(float));
    a.ids = dev_upload(ids, sizeof ids);
    cuda_moe_args c = a;
    c.n_rows = n_chunk;
    float *y[4];
    const size_t ny[4] = {n_rows * n_out, n_chunk * n_out, n_rows * k * n_out, n_chunk * k * n_out};
    void *work_d = NULL, *work_c = NULL;
    CU(cudaMalloc(&work_d, cuda_moe_decode_work_bytes(&a) + cuda_matmul_decode_work_bytes(type, n_in, n_rows) + 256));
    CU(cudaMalloc(&work_c, cuda_moe_chunk_work_bytes(&c) + 256));
    float *direct[4];
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    char why[256] = "";
    for (int pass = 0; pass < 2; pass++) { /* 0: direct calls, 1: captured and replayed */
        for (int i = 0; i < 4; i++) y[i] = dev_poisoned(ny[i]);
        CU(cudaDeviceSynchronize());
        cudaGraph_t graph = NULL;
        if (pass) CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        a.y = y[2];
        c.y = y[3];
        CHECK_MSG(cuda_matmul_decode(type, a.w, n_out, n_in, a.x, n_rows, y[0], work_d, st, why, sizeof why) == 0,
                  "%s", why);
        CHECK_MSG(cuda_matmul_chunk(type, a.w, n_out, n_in, a.x, n_chunk, y[1], st, why, sizeof why) == 0, "%s", why);
        CHECK_MSG(cuda_moe_decode(&a, work_d, st, why, sizeof why) == 0, "%s", why);
        CHECK_MSG(cuda_moe_chunk(&c, work_c, st, why, sizeof why) == 0, "%s", why);
        if (pass) {
            CU(cudaStreamEndCapture(st, &graph));
            cudaGraphExec_t exec = NULL;
            CU(cudaGraphInstantiate(&exec, graph, 0));
            CU(cudaGraphLaunch(exec, st));
            CU(cudaStreamSynchronize(st));
            cudaGraphExecDestroy(exec);
            cudaGraphDestroy(graph);
        }
        CU(cudaStreamSynchronize(st));
        for (int i = 0; i < 4; i++) {
            float *h = malloc(ny[i] * sizeof(float));
            dev_download(h, y[i], ny[i]);
            if (pass == 0) {
                direct[i] = h;
                size_t bad = 0;
                for (size_t j = 0; j < ny[i]; j++) bad += !isfinite(h[j]);
                CHECK_MSG(bad == 0, "graph case %d: %zu outputs unwritten", i, bad);
            } else {
                CHECK_MSG(memcmp(h, direct[i], ny[i] * sizeof(float)) == 0,
                          "graph case %d: the replayed graph differs from the direct calls", i);
                free(h);
                free(direct[i]);
            }
            cudaFree(y[i]);
        }
    }
    cudaStreamDestroy(st);
    free(w), free(x);
    cudaFree((void *)a.w), cudaFree((void *)a.x), cudaFree((void *)a.ids), cudaFree(work_d), cudaFree(work_c);
}

/* Programmatic dependent launch of the many-row kernels (cuda_pdl.cuh's pdl_launch_rows): a chain in which every
 * product reads the one before's outputs (dense Q8_0 at 32 and 80 rows: the quantiser, igemm_q8_kernel, the
 * segmented launch, the wide 64-row form; the grouped experts: the grouping, the Q4_K gate and up tiles; a float
 * product of 80 outputs: the TF32 form), with every intermediate poisoned (NaN) before each run. A kernel that
 * read its input before its pdl_wait would read NaN or a stale value. Captured into one graph and replayed 8 times
 * with the row launches' PDL on, it must give the bits of the same chain launched plainly, one kernel after the
 * other (PDL off): the stream order is the reference. */
static void pdl_rows_case(size_t n_rows) {
    enum { N_IN = 256, N1 = 256, N2 = 512, NE = 6, K = 2, NM = 40, NF = 80, REPS = 8 };
    char why[256] = "", what[48];
    snprintf(what, sizeof what, "pdl rows x%zu", n_rows);
    size_t rb1, rb2, rbm, rbf;
    uint8_t *w1 = make_weights(QUANT_Q8_0, N1, N_IN, &rb1), *w2 = make_weights(QUANT_Q8_0, 2 * N2, N1, &rb2);
    uint8_t *wm = make_weights(QUANT_Q4_K, (NE + 1) * NM, N2, &rbm), *wf = make_weights(QUANT_F32, NF, NM, &rbf);
    float *x = malloc(n_rows * N_IN * sizeof(float));
    fill(x, n_rows * N_IN, 1.0);
    int32_t *ids = malloc(n_rows * K * sizeof(int32_t));
    make_ids(ids, n_rows, K, NE);
    void *dw1 = dev_upload(w1, N1 * rb1), *dw2 = dev_upload(w2, 2 * N2 * rb2);
    void *dwm = dev_upload(wm, (NE + 1) * NM * rbm);
    void *dwf = dev_upload(wf, NF * rbf);
    float *dx = dev_upload(x, n_rows * N_IN * sizeof(float));
    int32_t *dids = dev_upload(ids, n_rows * K * sizeof(int32_t));
    const size_t ny[6] = {n_rows * N1, n_rows * N2, n_rows * N2, n_rows * K * NM, n_rows * K * NF, n_rows * K * NM};
    float *dy[6];
    for (int i = 0; i < 6; i++) dy[i] = dev_poisoned(ny[i]);
    cuda_moe_args m = {.type = QUANT_Q4_K, .w = dwm, .expert_stride = NM * rbm, .n_expert = NE, .n_out = NM,
                       .n_in = N2, .x = dy[1], .ids = dids, .y = dy[3], .n_rows = n_rows, .k = K};
    size_t wb = cuda_moe_chunk_work_bytes(&m), wq = cuda_matmul_chunk_work_bytes(QUANT_Q8_0, N2, n_rows);
    if (wq > wb) wb = wq;
    void *work = NULL;
    CU(cudaMalloc(&work, wb + 256));
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    float *ref[6], *got[6];
    for (int i = 0; i < 6; i++) ref[i] = malloc(ny[i] * sizeof(float)), got[i] = malloc(ny[i] * sizeof(float));
    for (int pass = 0; pass < 2; pass++) { /* 0: plain launches, eager; 1: PDL, captured and replayed */
        cuda_pdl_set(pass);
        cuda_pdl_rows_set(pass);
        cudaGraphExec_t exec = NULL;
        cudaGraph_t graph = NULL;
        if (pass) CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        /* the poison, then the chain (in the graph, so every replay starts from NaN) */
        for (int i = 0; i < 6; i++) CU(cudaMemsetAsync(dy[i], 0xFF, ny[i] * sizeof(float), st));
        int rc = cuda_matmul_chunk_ws(QUANT_Q8_0, dw1, N1, N_IN, dx, n_rows, dy[0], work, st, why, sizeof why);
        cuda_matmul_seg seg[2] = {{.w = dw2, .n_out = N2, .y = dy[1]},
                                  {.w = (uint8_t *)dw2 + N2 * rb2, .n_out = N2, .y = dy[2]}};
        if (rc == 0)
            rc = cuda_matmul_chunk_ws_multi(QUANT_Q8_0, seg, 2, N1, dy[0], n_rows, work, st, why, sizeof why);
        if (rc == 0) /* gate and up (the up: the weights one expert on) */
            rc = cuda_moe_chunk_pair(&m, (uint8_t *)dwm + NM * rbm, dy[5], work, st, why, sizeof why);
        if (rc == 0) rc = cuda_matmul_chunk(QUANT_F32, dwf, NF, NM, dy[3], n_rows * K, dy[4], st, why, sizeof why);
        CHECK_MSG(rc == 0, "%s: %s", what, why);
        if (pass) {
            CU(cudaStreamEndCapture(st, &graph));
            CU(cudaGraphInstantiate(&exec, graph, 0));
        }
        for (int r = 0; r < (pass ? REPS : 1); r++) {
            if (pass) CU(cudaGraphLaunch(exec, st));
            CU(cudaStreamSynchronize(st));
            for (int i = 0; i < 6; i++) {
                dev_download(pass ? got[i] : ref[i], dy[i], ny[i]);
                if (pass)
                    CHECK_MSG(memcmp(got[i], ref[i], ny[i] * sizeof(float)) == 0,
                              "%s: product %d of the PDL graph (replay %d) differs from the plain chain", what, i, r);
                else {
                    size_t bad = 0;
                    for (size_t j = 0; j < ny[i]; j++) bad += !isfinite(ref[i][j]);
                    CHECK_MSG(bad == 0, "%s: product %d: %zu outputs not finite in the plain chain", what, i, bad);
                }
            }
        }
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
    }
    cuda_pdl_set(1);
    cuda_pdl_rows_set(-1);
    cudaStreamDestroy(st);
    for (int i = 0; i < 6; i++) free(ref[i]), free(got[i]), cudaFree(dy[i]);
    free(w1), free(w2), free(wm), free(wf), free(x), free(ids);
    cudaFree(dw1), cudaFree(dw2), cudaFree(dwm), cudaFree(dwf), cudaFree(dx), cudaFree(dids), cudaFree(work);
}

static void test_pdl_rows(void) {
    pdl_rows_case(32);
    pdl_rows_case(80);
}

/* cuda_add_rms_norm_q8: the residual add and norm that also writes the normed rows' Q8_0 8-bit copy, and
 * cuda_matmul_chunk_ws_multi_xq told that copy is ready. Against the plain path (cuda_add_rms_norm, then
 * cuda_matmul_chunk_ws_multi quantising x itself into its own scratch): h and x bit for bit, the 8-bit rows byte
 * for byte (every data byte of the chunk-major pieces; the fused scratch poisoned first, so a byte the norm did not
 * write differs), and the three products' outputs bit for bit; at n 2048 / 1024 / 4096 / 96 (the kernel's 2, 1, 4
 * float4 a thread and a last chunk of 3 blocks) and 9 / 32 / 37 rows, one row of zeros (h = -y: d 0) and one with
 * an infinity (its norm 0, so inf * 0 one NaN and zeros: that block's d NaN, codes 0). n 100 (not whole blocks) and the switch off are not taken (1). */
static void norm_q8_case(size_t n, size_t rows) {
    const size_t outs[3] = {300, 45, 16}, nc = (n + 255) / 256;
    char why[256] = "", what[64];
    snprintf(what, sizeof what, "norm_q8 %zu x %zu", rows, n);
    float *h = malloc(rows * n * sizeof(float)), *y = malloc(rows * n * sizeof(float)), *w = malloc(n * sizeof(float));
    fill(h, rows * n, 2.0), fill(y, rows * n, 1.0), fill(w, n, 1.5);
    for (size_t i = 0; i < n; i++) h[1 * n + i] = -y[1 * n + i]; /* row 1: zeros after the add */
    h[(rows - 1) * n + n / 3] = INFINITY;                          /* the last row: NaN after the norm */
    float *dh[2], *dx[2], *dy = dev_upload(y, rows * n * sizeof(float)), *dwn = dev_upload(w, n * sizeof(float));
    const size_t wb = cuda_matmul_chunk_work_bytes(QUANT_Q8_0, n, rows);
    void *work[2];
    uint8_t *wq[3];
    size_t rb = 0;
    void *dw[3];
    cuda_matmul_seg seg[2][3];
    for (int k = 0; k < 2; k++) {
        dh[k] = dev_upload(h, rows * n * sizeof(float));
        dx[k] = dev_poisoned(rows * n);
        CU(cudaMalloc(&work[k], wb + 256));
        CU(cudaMemset(work[k], 0xFF, wb + 256));
    }
    for (int i = 0; i < 3; i++) {
        wq[i] = make_weights(QUANT_Q8_0, outs[i], n, &rb);
        dw[i] = dev_upload(wq[i], outs[i] * rb);
        for (int k = 0; k < 2; k++) seg[k][i] = (cuda_matmul_seg){dw[i], outs[i], dev_poisoned(rows * outs[i])};
    }
    CHECK_MSG(cuda_add_rms_norm(dx[0], dh[0], dy, dwn, rows, n, 1e-6f, NULL) == 0, "%s: the plain norm", what);
    CHECK_MSG(cuda_matmul_chunk_ws_multi(QUANT_Q8_0, seg[0], 3, n, dx[0], rows, work[0], NULL, why, sizeof why) == 0,
              "%s: %s", what, why);
    CHECK_MSG(cuda_add_rms_norm_q8(dx[1], dh[1], dy, dwn, rows, n, 1e-6f, work[1], NULL) == 0, "%s: not taken", what);
    uint8_t *q[2];
    for (int k = 0; k < 2; k++) q[k] = malloc(wb);
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(q[1], work[1], wb, cudaMemcpyDeviceToHost)); /* the norm's bytes, before any product runs */
    CHECK_MSG(cuda_matmul_chunk_ws_multi_xq(QUANT_Q8_0, seg[1], 3, n, dx[1], rows, work[1], 1, NULL, why,
                                            sizeof why) == 0,
              "%s: %s", what, why);
    CU(cudaMemcpy(q[0], work[0], wb, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t c = 0; c < nc; c++)
        for (size_t r = 0; r < rows; r++) {
            const size_t nb = n / 32 - 8 * c < 8 ? n / 32 - 8 * c : 8, o = (c * rows + r) * 304;
            bad += memcmp(q[0] + o, q[1] + o, nb * 36) != 0;
        }
    CHECK_MSG(bad == 0, "%s: %zu (chunk, row) pieces of the 8-bit rows differ from the quantiser's", what, bad);
    float *a = malloc(rows * n * sizeof(float)), *b = malloc(rows * n * sizeof(float));
    dev_download(a, dh[0], rows * n), dev_download(b, dh[1], rows * n);
    CHECK_MSG(memcmp(a, b, rows * n * sizeof(float)) == 0, "%s: h differs", what);
    dev_download(a, dx[0], rows * n), dev_download(b, dx[1], rows * n);
    CHECK_MSG(memcmp(a, b, rows * n * sizeof(float)) == 0, "%s: x differs", what);
    size_t finite = 0;
    for (size_t i = 0; i < n; i++) finite += isfinite(a[(rows - 1) * n + i]) != 0;
    CHECK_MSG(finite == n - 1 && isnan(a[(rows - 1) * n + n / 3]) && a[n] == 0.0f,
              "%s: the infinity's row has %zu finite values (inf * 0: one NaN), the zero row %g", what, finite,
              (double)a[n]);
    for (int i = 0; i < 3; i++) {
        float *ya = malloc(rows * outs[i] * sizeof(float)), *yb = malloc(rows * outs[i] * sizeof(float));
        dev_download(ya, seg[0][i].y, rows * outs[i]), dev_download(yb, seg[1][i].y, rows * outs[i]);
        size_t nan = 0;
        for (size_t j = 0; j < (rows - 1) * outs[i]; j++) nan += isnan(ya[j]) != 0;
        CHECK_MSG(nan == 0 && memcmp(ya, yb, rows * outs[i] * sizeof(float)) == 0,
                  "%s: product %d differs (%zu of the plain path's finite rows' outputs NaN)", what, i, nan);
        free(ya), free(yb);
        for (int k = 0; k < 2; k++) cudaFree(seg[k][i].y);
        cudaFree(dw[i]), free(wq[i]);
    }
    free(a), free(b), free(q[0]), free(q[1]), free(h), free(y), free(w);
    for (int k = 0; k < 2; k++) cudaFree(dh[k]), cudaFree(dx[k]), cudaFree(work[k]);
    cudaFree(dy), cudaFree(dwn);
}

static void test_norm_q8(void) {
    const size_t ns[4] = {2048, 1024, 4096, 96}, rows[3] = {9, 32, 37};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) norm_q8_case(ns[i], rows[j]);
    float *d = dev_poisoned(4 * 100);
    void *work = NULL;
    CU(cudaMalloc(&work, 4096));
    CHECK(cuda_add_rms_norm_q8(d, d, d, d, 4, 100, 1e-6f, work, NULL) == 1); /* 100: not whole Q8_0 blocks */
    cuda_norm_q8_set(0);
    CHECK(cuda_add_rms_norm_q8(d, d, d, d, 1, 96, 1e-6f, work, NULL) == 1);
    cuda_norm_q8_set(-1);
    cudaFree(d), cudaFree(work);
}

/* CLOVER_CUDA_PDL_ROWS against the launches' marks (cuda_pdl_rows_pass: bits 1 a lone coreset preview, 2 a stacked
 * one, 4 the shared expert's side stream, 8 a lone coreset preview's routed experts, so 9 inside that pass): the
 * table the switch's comment states, written out by hand (unset and a bad value, a number or a word: AUTO = 2). */
static void test_pdl_rows_passes(void) {
    enum { NM = 8 };
    static const int marks[NM] = {0, 1, 2, 4, 5, 6, 9, 8};
    static const struct {
        const char *env;
        int on[NM]; /* PDL for the row launches under each of marks */
    } tab[] = {{NULL, {1, 0, 1, 1, 0, 1, 0, 1}}, {"2", {1, 0, 1, 1, 0, 1, 0, 1}}, {"9", {1, 0, 1, 1, 0, 1, 0, 1}},
               {"off", {1, 0, 1, 1, 0, 1, 0, 1}}, {"10", {1, 0, 1, 1, 0, 1, 0, 1}}, {"8", {1, 0, 1, 1, 0, 1, 0, 1}},
               {"3", {1, 0, 0, 1, 0, 0, 0, 1}}, {"4", {1, 1, 1, 0, 0, 0, 1, 1}}, {"5", {1, 0, 1, 0, 0, 0, 0, 1}},
               {"6", {1, 1, 1, 1, 1, 1, 0, 0}}, {"7", {1, 1, 1, 0, 0, 0, 0, 0}},
               {"0", {0, 0, 0, 0, 0, 0, 0, 0}}, {"1", {1, 1, 1, 1, 1, 1, 1, 1}}};
    cuda_pdl_set(1);
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        if (tab[i].env)
            setenv("CLOVER_CUDA_PDL_ROWS", tab[i].env, 1);
        else
            unsetenv("CLOVER_CUDA_PDL_ROWS");
        cuda_pdl_rows_set(-1); /* the environment again */
        for (int j = 0; j < NM; j++) {
            const int before = cuda_pdl_rows_pass(marks[j]);
            CHECK_MSG(cuda_pdl_rows_now() == tab[i].on[j], "CLOVER_CUDA_PDL_ROWS=%s, marks %d: PDL %d, expected %d",
                      tab[i].env ? tab[i].env : "(unset)", marks[j], cuda_pdl_rows_now(), tab[i].on[j]);
            CHECK(cuda_pdl_rows_pass(before) == marks[j]);
        }
    }
    unsetenv("CLOVER_CUDA_PDL_ROWS");
    cuda_pdl_rows_set(0); /* the setter forces every pass: a coreset preview's mark changes nothing */
    cuda_pdl_rows_pass(1);
    CHECK(cuda_pdl_rows_now() == 0);
    cuda_pdl_rows_set(1);
    CHECK(cuda_pdl_rows_now() == 1);
    cuda_pdl_rows_pass(0);
    cuda_pdl_rows_set(-1);
}

/* The stream form at 9..32 rows (matmul_mmv_stream32.cu, cuda_matmul_stream_multi, CLOVER_CUDA_MMV_STREAM32): every
 * output within 1e-5 of the CPU's integer oracle (the independent reference), and bit for bit the chunk form with
 * scratch (cuda_matmul_chunk_ws, one matrix at a time) and the decode form in calls of 8 rows (cuda_matmul_decode),
 * the rule that a row's bits do not depend on the row count. Q8_0, the one type it takes; n_in 2048 (x in shared
 * memory), 256 (one block a partial), 768, 4096 (x read from work past 18 rows); 3 matrices of odd outputs (45,
 * 7, 130: groups of 16, partial groups, segment boundaries inside a block's walk) or one of 9000 (groups of 32,
 * more groups than resident blocks: the double buffer's every turn). Outputs poisoned first: one not written is
 * NaN. */
static void stream32_case(size_t n_in, size_t n_rows, int big) {
    enum { NS = 3 };
    const size_t n_out_small[NS] = {45, 7, 130}, n_out_big[1] = {9000};
    const size_t ns = big ? 1 : NS, *n_out = big ? n_out_big : n_out_small;
    const uint32_t type = QUANT_Q8_0;
    char why[256] = "", what[64];
    snprintf(what, sizeof what, "stream32 x%zu/%zu%s", n_rows, n_in, big ? " 9000 out" : " 3 mats");
    if (n_in <= 2048)
        CHECK_MSG(cuda_matmul_stream_takes(type, n_in, n_rows), "%s: the stream form does not take it", what);
    float *x = malloc(n_rows * n_in * sizeof(float));
    fill(x, n_rows * n_in, 2.0);
    float *dx = dev_upload(x, n_rows * n_in * sizeof(float));
    size_t wb = cuda_matmul_stream_work_bytes(type, n_in, n_rows);
    const size_t cw = cuda_matmul_chunk_work_bytes(type, n_in, n_rows), dwb = cuda_matmul_decode_work_bytes(type, n_in, 8);
    if (cw > wb) wb = cw;
    if (dwb > wb) wb = dwb;
    void *work = NULL;
    CU(cudaMalloc(&work, wb + 256));
    cuda_matmul_seg seg[NS];
    uint8_t *w[NS];
    void *dw[NS];
    float *dy[NS];
    size_t rb = 0;
    for (size_t i = 0; i < ns; i++) {
        w[i] = make_weights(type, n_out[i], n_in, &rb);
        dw[i] = dev_upload(w[i], n_out[i] * rb);
        dy[i] = dev_poisoned(n_rows * n_out[i]);
        seg[i] = (cuda_matmul_seg){.w = dw[i], .n_out = n_out[i], .y = dy[i]};
    }
    CHECK_MSG(cuda_matmul_stream_multi(type, seg, ns, n_in, dx, n_rows, work, NULL, why, sizeof why) == 0, "%s: %s",
              what, why);
    size_t diff_chunk = 0, diff_dec = 0;
    for (size_t i = 0; i < ns; i++) {
        const size_t n = n_rows * n_out[i];
        float *got = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float)), *other = malloc(n * sizeof(float));
        dev_download(got, dy[i], n);
        const size_t step = big ? 37 : 1; /* the oracle on a sample of the 9000 outputs */
        size_t m = 0;
        float *gs = malloc(n * sizeof(float));
        for (size_t r = 0; r < n_rows; r++)
            for (size_t o = 0; o < n_out[i]; o += step, m++) {
                ref[m] = decode_ref(type, w[i] + o * rb, x + r * n_in, n_in);
                gs[m] = got[r * n_out[i] + o];
            }
        check_close(what, type, gs, ref, m, 1e-5);
        float *d2 = dev_poisoned(n);
        CHECK_MSG(cuda_matmul_chunk_ws(type, dw[i], n_out[i], n_in, dx, n_rows, d2, work, NULL, why, sizeof why) == 0,
                  "%s: chunk: %s", what, why);
        dev_download(other, d2, n);
        for (size_t e = 0; e < n; e++) diff_chunk += memcmp(&got[e], &other[e], sizeof(float)) != 0;
        CU(cudaMemset(d2, 0xFF, n * sizeof(float)));
        for (size_t r0 = 0; r0 < n_rows; r0 += 8) {
            const size_t nr = n_rows - r0 < 8 ? n_rows - r0 : 8;
            CHECK_MSG(cuda_matmul_decode(type, dw[i], n_out[i], n_in, dx + r0 * n_in, nr, d2 + r0 * n_out[i], work,
                                         NULL, why, sizeof why) == 0,
                      "%s: decode: %s", what, why);
        }
        dev_download(other, d2, n);
        for (size_t e = 0; e < n; e++) diff_dec += memcmp(&got[e], &other[e], sizeof(float)) != 0;
        cudaFree(d2);
        free(got), free(ref), free(other), free(gs);
    }
    CHECK_MSG(diff_chunk == 0, "%s: %zu outputs differ from the chunk form's bits", what, diff_chunk);
    CHECK_MSG(diff_dec == 0, "%s: %zu outputs differ from the 8-row decode form's bits", what, diff_dec);
    if (!diff_chunk && !diff_dec) printf("  %-36s bit-identical to chunk and decode\n", what);
    for (size_t i = 0; i < ns; i++) free(w[i]), cudaFree(dw[i]), cudaFree(dy[i]);
    free(x), cudaFree(dx), cudaFree(work);
}

static void test_stream32(void) {
    const int small = getenv("CLOVER_TEST_SMALL") != NULL; /* under compute-sanitizer: 4 cases */
    cuda_mmv_stream32_set(1);
    char why[256] = "";
    /* what it does not take: K-quants, n_in not a multiple of 256, rows outside 9..32 */
    CHECK(!cuda_matmul_stream_takes(QUANT_Q4_K, 2048, 16) && !cuda_matmul_stream_takes(QUANT_Q8_0, 2080, 16));
    CHECK(!cuda_matmul_stream_takes(QUANT_Q8_0, 2048, 8) && !cuda_matmul_stream_takes(QUANT_Q8_0, 2048, 33));
    CHECK(cuda_matmul_stream_takes(QUANT_Q8_0, 4096, 16) && !cuda_matmul_stream_takes(QUANT_Q8_0, 4096, 32));
    const cuda_matmul_seg none = {NULL, 8, NULL};
    CHECK(cuda_matmul_stream_multi(QUANT_Q4_K, &none, 1, 2048, NULL, 16, NULL, NULL, why, sizeof why) == -1 &&
          strstr(why, "Q8_0"));
    CHECK(cuda_matmul_stream_multi(QUANT_Q8_0, &none, 1, 2048, NULL, 33, NULL, NULL, why, sizeof why) == -1 &&
          strstr(why, "rows"));
    if (small) {
        stream32_case(2048, 9, 0);
        stream32_case(2048, 32, 1);
        stream32_case(4096, 17, 0);
        stream32_case(256, 31, 0);
    } else {
        static const size_t rows[] = {9, 11, 13, 16, 17, 23, 24, 29, 31, 32};
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
            stream32_case(2048, rows[r], 0);
            stream32_case(4096, rows[r], 0);
        }
        stream32_case(256, 9, 0);
        stream32_case(256, 32, 0);
        stream32_case(768, 21, 0);
        stream32_case(2048, 16, 1);
        stream32_case(2048, 32, 1);
        stream32_case(4096, 32, 1);
    }
    cuda_mmv_stream32_set(0);
    CHECK(!cuda_matmul_stream_takes(QUANT_Q8_0, 2048, 16)); /* off: the backend keeps the chunk form */
    const char *env = getenv("CLOVER_CUDA_MMV_STREAM32"); /* back as the environment set it */
    cuda_mmv_stream32_set(env ? atoi(env) : 0);
}

int main(void) {
    RUN(test_bad_arguments);
    char why[256] = "";
    const int n = cuda_device_count(why, sizeof why);
    if (n <= 0) TEST_SKIP("no CUDA device (%s)", n == 0 ? "the runtime found 0 devices" : why);
    RUN(test_act_quantize_bytes);
    RUN(test_decode_types);
    RUN(test_chunk_types);
    RUN(test_chunk_thin);
    RUN(test_exact);
    RUN(test_exact_multi);
    RUN(test_chunk_multi);
    RUN(test_chunk_seg);
    RUN(test_row_invariance);
    RUN(test_few_rows);
    RUN(test_mma_rows);
    RUN(test_igemm_wide);
    RUN(test_q8_rows32);
    RUN(test_mmv_stream);
    RUN(test_mmv_lane);
    RUN(test_stream32);
    RUN(test_moe_decode);
    RUN(test_moe_chunk);
    RUN(test_moe_igw);
    RUN(test_moe_persist);
    RUN(test_moe_tall);
    RUN(test_moe_many_experts);
    RUN(test_moe_dec32);
    RUN(test_moe_fast);
    RUN(test_glu);
    RUN(test_glu_quant);
    RUN(test_multi);
    RUN(test_graph_capture);
    RUN(test_pdl_rows);
    RUN(test_pdl_rows_passes);
    RUN(test_norm_q8);
    return TEST_EXIT();
}
