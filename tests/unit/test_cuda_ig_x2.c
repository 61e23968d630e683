/*
 * test_cuda_ig_x2.c: the integer chunk kernels' X2 forms (matmul_igemm.cu, CLOVER_CUDA_IG_X2 / cuda_ig_x2_set:
 * two 256-value chunks a cp.async ring stage, 2 or 3 such stages) against the one-chunk forms, bit for bit (memcmp),
 * and against the CPU's integer oracle (quant_act_quantize_scalar + quant_act_dot_scalar, <= 1e-5 normalised):
 *  - dense Q8_0 (igemm_q8_kernel) at 1, 7, 8, 16, 31, 32 rows (the 8 / 16 / 32-row tiles), n_in 2048, 4096, 2304 (9
 *    chunks: an odd count) and 2080 (65 blocks: a last chunk of one block, rows at every 2-byte alignment, the
 *    range-checked copies), 45 and 2056 outputs (a partial last tile), weights at offset 0 and 2 bytes;
 *  - the segmented launch of several dense products (ig_launch_seg, cuda_matmul_chunk_ws_multi);
 *  - the grouped Q4_K / Q5_K experts on WIDE tiles (<= 8 slots, few slots an expert), single (cuda_moe_chunk) and
 *    the gate + up pair (cuda_moe_chunk_pair: one launch, grid.z the product, and two), n_in of 1, 2, 3, 5 and 8
 *    super-blocks, 200 / 512 outputs;
 *  - a dense and a grouped product captured into a CUDA graph with the form on (its first launch of that shape:
 *    the stage choice's occupancy query inside the capture) replayed: the eager bits.
 * Each X2 case runs at 2 and 3 stages (forced), at the form's own choice and under AUTO (the default: dense 32-row
 * grids of one wave only; a many-wave grid and every grouped tile kept one-chunk), the launches counted.
 * Outputs poisoned (NaN) before every run and checked fully written. CLOVER_TEST_SMALL=1: a few cases of each
 * (for compute-sanitizer). No device: exit 77 (skip).
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_device.h"
#include "cuda/cuda_matmul.h"
#include "quant/quant.h"
#include "test.h"

#define CUDA_MATMUL_TEST_SEED 0x2545F4914F6CDD1Dull
#include "cuda_matmul_test.h"

static void *dev_upload(const void *h, size_t bytes, size_t off) { /* at byte off of a fresh buffer */
    uint8_t *d = NULL;
    CU(cudaMalloc((void **)&d, bytes + off + 16));
    if (bytes) CU(cudaMemcpy(d + off, h, bytes, cudaMemcpyHostToDevice));
    return d + off;
}
/* The CPU's integer oracle of one dot, the 8-bit row made once per row (xq: quant_act_row_bytes). */
static float oracle(uint32_t type, const uint8_t *row, const void *xq, size_t n_in) {
    return quant_act_dot_scalar(type, row, xq, n_in);
}

static int g_small; /* CLOVER_TEST_SMALL=1 */

/* the forms: 0 off (the reference bits), 2 / 3 forced stages, 1 the form's own choice, 4 AUTO (the default: X2 only
 * where it measured faster) */
static const int FORMS[] = {2, 3, 1, 4};
enum { N_FORMS = 4, AUTO = 4 };
static unsigned long long x2_count(void) { return cuda_ig_x2_launches(2) + cuda_ig_x2_launches(3); }
/* AUTO's X2 launches for a dense Q8_0 grid of `blocks` 16-output blocks: 32-row tiles (> 16 rows) whose grid is one
 * wave at 3 stages (<= 2 blocks an SM by shared memory: 1 when the grid is within the SMs, 0 past 3 a SM); -1: either
 * (the occupancy query decides) */
static int auto_dense(size_t n_rows, size_t blocks) {
    const size_t sms = (size_t)cuda_sm_count();
    if (n_rows <= 16 || blocks > 3 * sms) return 0;
    return blocks <= sms ? 1 : -1;
}

/* ---- dense Q8_0 ---- */

static size_t dense_cases;
static void dense_case(size_t n_rows, size_t n_in, size_t n_out, size_t off) {
    const uint32_t type = QUANT_Q8_0;
    size_t rb;
    uint8_t *w = make_weights(type, n_out, n_in, &rb);
    float *x = malloc(n_rows * n_in * sizeof(float));
    fill(x, n_rows * n_in, 2.0);
    const size_t ny = n_rows * n_out;
    void *dw = dev_upload(w, n_out * rb, off);
    float *dx = dev_upload(x, n_rows * n_in * sizeof(float), 0), *dy = NULL;
    CU(cudaMalloc((void **)&dy, ny * sizeof(float)));
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_matmul_chunk_work_bytes(type, n_in, n_rows) + 256));
    float *ref = malloc(ny * sizeof(float)), *got = malloc(ny * sizeof(float));
    char why[256] = "";
    for (int f = -1; f < N_FORMS; f++) {
        cuda_ig_x2_set(f < 0 ? 0 : FORMS[f]);
        const unsigned long long l0 = x2_count();
        CU(cudaMemset(dy, 0xFF, ny * sizeof(float)));
        CHECK_MSG(cuda_matmul_chunk_ws(type, dw, n_out, n_in, dx, n_rows, dy, work, NULL, why, sizeof why) == 0, "%s",
                  why);
        CU(cudaDeviceSynchronize());
        CU(cudaMemcpy(f < 0 ? ref : got, dy, ny * sizeof(float), cudaMemcpyDeviceToHost));
        if (f < 0) {
            CHECK_MSG(x2_count() == l0, "Q8_0 x%zu n_in %zu: an X2 launch with the form off", n_rows, n_in);
            continue;
        }
        const int want = FORMS[f] == AUTO ? auto_dense(n_rows, (n_out + 15) / 16) : 1;
        CHECK_MSG(want < 0 || x2_count() == l0 + (unsigned)want, "Q8_0 x%zu n_in %zu n_out %zu form %d: %llu X2 launches",
                  n_rows, n_in, n_out, FORMS[f], x2_count() - l0);
        CHECK_MSG(n_nan(got, ny) == 0 && memcmp(got, ref, ny * sizeof(float)) == 0,
                  "Q8_0 x%zu n_in %zu n_out %zu off %zu form %d: %zu unwritten, or differs from the one-chunk form",
                  n_rows, n_in, n_out, off, FORMS[f], n_nan(got, ny));
    }
    cuda_ig_x2_set(-1);
    /* the one-chunk bits against the CPU (every 5th output of every row) */
    void *xq = act_rows(type, x, n_rows, n_in);
    const size_t xb = quant_act_row_bytes(type, n_in);
    size_t ns = 0;
    float *a = malloc(ny * sizeof(float)), *b = malloc(ny * sizeof(float));
    for (size_t r = 0; r < n_rows; r++)
        for (size_t o = r % 5; o < n_out; o += 5)
            a[ns] = ref[r * n_out + o], b[ns++] = oracle(type, w + o * rb, (uint8_t *)xq + r * xb, n_in);
    const double e = rel_err(a, b, ns);
    CHECK_MSG(n_nan(ref, ny) == 0 && e <= 1e-5, "Q8_0 x%zu n_in %zu: error %.3g against the CPU", n_rows, n_in, e);
    free(a), free(b), free(xq), free(w), free(x), free(ref), free(got);
    cudaFree((uint8_t *)dw - off), cudaFree(dx), cudaFree(dy), cudaFree(work);
    dense_cases++;
}

static void test_dense_q8(void) {
    static const size_t rows[] = {1, 7, 8, 16, 31, 32}, ins[] = {2048, 4096, 2304, 2080}, outs[] = {45, 2056};
    for (size_t r = 0; r < 6; r++)
        for (size_t i = 0; i < 4; i++)
            for (size_t o = 0; o < 2; o++)
                if (!g_small || ((r == 0 || r == 4) && i >= 2 && o == 0))
                    dense_case(rows[r], ins[i], outs[o], (r + i + o) % 2 ? 2 : 0);
    /* the weight copies' range-checked form (CLOVER_CUDA_IG_ALIGNED=0) where the aligned one applies */
    cuda_ig_aligned_set(0);
    dense_case(32, 2048, g_small ? 45 : 2056, 0);
    dense_case(8, 4096, 45, 0);
    cuda_ig_aligned_set(-1);
    /* a grid of many waves at 32 rows (the head's kind): AUTO keeps the one-chunk form */
    if (!g_small) dense_case(32, 2048, 16 * 4 * (size_t)cuda_sm_count() + 5, 0);
    printf("  dense Q8_0: %zu cases (1..32 rows, n_in 2048 / 4096 / 2304 / 2080), X2 at 2 / 3 / auto stages "
           "bit-identical to the one-chunk form\n",
           dense_cases);
}

/* ---- the segmented launch (several dense Q8_0 products of the same rows in one grid) ---- */

static void test_seg(void) {
    static const size_t outs[3] = {4096, 200, 45}, rows[] = {3, 16, 32};
    size_t cases = 0;
    for (size_t ri = g_small ? 2 : 0; ri < 3; ri++)
        for (int v = 0; v < 2; v++) {
            const size_t n_rows = rows[ri], n_in = v ? 2080 : 4096, ns = 3;
            float *x = malloc(n_rows * n_in * sizeof(float));
            fill(x, n_rows * n_in, 2.0);
            float *dx = dev_upload(x, n_rows * n_in * sizeof(float), 0);
            void *work = NULL;
            CU(cudaMalloc(&work, cuda_matmul_chunk_work_bytes(QUANT_Q8_0, n_in, n_rows) + 256));
            cuda_matmul_seg seg[3];
            uint8_t *w[3];
            float *ref[3];
            size_t rb;
            for (size_t i = 0; i < ns; i++) {
                w[i] = make_weights(QUANT_Q8_0, outs[i], n_in, &rb);
                seg[i].w = dev_upload(w[i], outs[i] * rb, 0);
                seg[i].n_out = outs[i];
                CU(cudaMalloc((void **)&seg[i].y, n_rows * outs[i] * sizeof(float)));
                ref[i] = malloc(n_rows * outs[i] * sizeof(float));
            }
            char why[256] = "";
            cuda_ig_seg_set(1);
            for (int f = -1; f < N_FORMS; f++) {
                cuda_ig_x2_set(f < 0 ? 0 : FORMS[f]);
                const unsigned long long s0 = cuda_ig_seg_launches(), l0 = x2_count();
                for (size_t i = 0; i < ns; i++) CU(cudaMemset(seg[i].y, 0xFF, n_rows * outs[i] * sizeof(float)));
                CHECK_MSG(cuda_matmul_chunk_ws_multi(QUANT_Q8_0, seg, ns, n_in, dx, n_rows, work, NULL, why,
                                                     sizeof why) == 0,
                          "%s", why);
                CU(cudaDeviceSynchronize());
                size_t blocks = 0;
                for (size_t i = 0; i < ns; i++) blocks += (outs[i] + 15) / 16;
                const int want = f < 0 ? 0 : FORMS[f] == AUTO ? auto_dense(n_rows, blocks) : 1;
                CHECK_MSG(cuda_ig_seg_launches() == s0 + 1 && (want < 0 || x2_count() == l0 + (unsigned)want),
                          "segmented x%zu form %d: the launch not taken as asked", n_rows, f < 0 ? 0 : FORMS[f]);
                for (size_t i = 0; i < ns; i++) {
                    const size_t ny = n_rows * outs[i];
                    float *got = f < 0 ? ref[i] : malloc(ny * sizeof(float));
                    CU(cudaMemcpy(got, seg[i].y, ny * sizeof(float), cudaMemcpyDeviceToHost));
                    CHECK_MSG(n_nan(got, ny) == 0 && (f < 0 || memcmp(got, ref[i], ny * sizeof(float)) == 0),
                              "segmented x%zu n_in %zu product %zu form %d: unwritten or differs", n_rows, n_in, i,
                              f < 0 ? 0 : FORMS[f]);
                    if (f >= 0) free(got);
                }
            }
            cuda_ig_x2_set(-1);
            cuda_ig_seg_set(-1);
            /* one output of each product against the CPU */
            void *xq = act_rows(QUANT_Q8_0, x + (n_rows - 1) * n_in, 1, n_in);
            for (size_t i = 0; i < ns; i++) {
                const size_t o = outs[i] - 1;
                const float c = oracle(QUANT_Q8_0, w[i] + o * rb, xq, n_in), g = ref[i][(n_rows - 1) * outs[i] + o];
                CHECK_MSG(fabsf(g - c) <= 1e-5f * (fabsf(c) + 1.0f), "segmented: %g against the CPU's %g", g, c);
                free(w[i]), free(ref[i]);
                cudaFree((void *)seg[i].w), cudaFree(seg[i].y);
            }
            free(xq), free(x);
            cudaFree(dx), cudaFree(work);
            cases++;
        }
    printf("  segmented Q8_0: %zu cases (3 products, 3..32 rows, n_in 4096 / 2080) bit-identical X2 off / on\n",
           cases);
}

/* ---- the grouped Q4_K / Q5_K experts on WIDE tiles ---- */

static size_t moe_cases;
/* n_rows rows, k experts a row of n_expert (few slots an expert: n_rows * k <= 4 * n_expert, the WIDE tiles) */
static void moe_case(uint32_t type, size_t n_in, size_t n_out, size_t n_rows, size_t k, size_t n_expert) {
    const size_t n_slots = n_rows * k, ny = n_slots * n_out;
    size_t rb;
    uint8_t *w = make_weights(type, (n_expert + 1) * n_out, n_in, &rb); /* + 1: the up starts one expert on */
    float *x = malloc(n_rows * n_in * sizeof(float));
    fill(x, n_rows * n_in, 2.0);
    int32_t *ids = malloc(n_slots * sizeof(int32_t));
    for (size_t r = 0; r < n_rows; r++) { /* distinct experts a row, uneven counts */
        const size_t b = (r * r * 7 + r / 3) % n_expert;
        for (size_t j = 0; j < k; j++) ids[r * k + j] = (int32_t)((b + 5 * j) % n_expert);
    }
    cuda_moe_args a = {.type = type, .expert_stride = n_out * rb, .n_expert = n_expert, .n_out = n_out, .n_in = n_in,
                       .n_rows = n_rows, .k = k};
    a.w = dev_upload(w, (n_expert + 1) * n_out * rb, 0);
    a.x = dev_upload(x, n_rows * n_in * sizeof(float), 0);
    a.ids = dev_upload(ids, n_slots * sizeof(int32_t), 0);
    float *dy = NULL, *dyu = NULL;
    CU(cudaMalloc((void **)&dy, ny * sizeof(float)));
    CU(cudaMalloc((void **)&dyu, ny * sizeof(float)));
    a.y = dy;
    const void *w_up = (const uint8_t *)a.w + n_out * rb;
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_moe_chunk_work_bytes(&a) + 256));
    float *ref = malloc(ny * sizeof(float)), *ref_u = malloc(ny * sizeof(float));
    float *got = malloc(ny * sizeof(float)), *got_u = malloc(ny * sizeof(float));
    char why[256] = "";
    /* mode 0: single; 1: the pair in one launch; 2: the pair as two launches on the shared tiles */
    for (int mode = 0; mode < 3; mode++) {
        cuda_matmul_share_set(1);
        cuda_moe_pair1_set(mode == 1);
        for (int f = -1; f < N_FORMS; f++) {
            cuda_ig_x2_set(f < 0 ? 0 : FORMS[f]);
            const unsigned long long l0 = x2_count();
            CU(cudaMemset(dy, 0xFF, ny * sizeof(float)));
            CU(cudaMemset(dyu, 0xFF, ny * sizeof(float)));
            const int rc = mode ? cuda_moe_chunk_pair(&a, w_up, dyu, work, NULL, why, sizeof why)
                                : cuda_moe_chunk(&a, work, NULL, why, sizeof why);
            CHECK_MSG(rc == 0, "%s", why);
            CU(cudaDeviceSynchronize());
            const unsigned long long launches = x2_count() - l0;
            CU(cudaMemcpy(f < 0 ? ref : got, dy, ny * sizeof(float), cudaMemcpyDeviceToHost));
            if (mode) CU(cudaMemcpy(f < 0 ? ref_u : got_u, dyu, ny * sizeof(float), cudaMemcpyDeviceToHost));
            if (f < 0) {
                CHECK(launches == 0);
                continue;
            }
            const unsigned want = FORMS[f] == AUTO ? 0u : mode == 2 ? 2u : 1u; /* AUTO: no grouped X2 */
            CHECK_MSG(launches == want, "moe %s n_in %zu x%zu mode %d form %d: %llu X2 launches",
                      quant_type_name(type), n_in, n_rows, mode, FORMS[f], launches);
            CHECK_MSG(n_nan(got, ny) == 0 && memcmp(got, ref, ny * sizeof(float)) == 0 &&
                          (!mode || (n_nan(got_u, ny) == 0 && memcmp(got_u, ref_u, ny * sizeof(float)) == 0)),
                      "moe %s n_in %zu n_out %zu x%zu k %zu of %zu experts, mode %d form %d: unwritten, or differs "
                      "from the one-chunk form",
                      quant_type_name(type), n_in, n_out, n_rows, k, n_expert, mode, FORMS[f]);
        }
    }
    cuda_ig_x2_set(-1);
    cuda_matmul_share_set(-1);
    cuda_moe_pair1_set(-1);
    /* the one-chunk bits (the pair's, gate and up) against the CPU: every 3rd output of every 4th slot */
    void *xq = act_rows(type, x, n_rows, n_in);
    const size_t xb = quant_act_row_bytes(type, n_in);
    float *a1 = malloc(2 * ny * sizeof(float)), *b1 = malloc(2 * ny * sizeof(float));
    size_t ns = 0;
    for (size_t s = 0; s < n_slots; s += 4)
        for (size_t o = s % 3; o < n_out; o += 3) {
            const uint8_t *row = w + ((size_t)ids[s] * n_out + o) * rb, *xr = (uint8_t *)xq + (s / k) * xb;
            a1[ns] = ref[s * n_out + o], b1[ns++] = oracle(type, row, xr, n_in);
            a1[ns] = ref_u[s * n_out + o], b1[ns++] = oracle(type, row + n_out * rb, xr, n_in);
        }
    const double e = rel_err(a1, b1, ns);
    CHECK_MSG(e <= 1e-5, "moe %s n_in %zu x%zu: error %.3g against the CPU", quant_type_name(type), n_in, n_rows, e);
    free(a1), free(b1), free(xq), free(w), free(x), free(ids), free(ref), free(ref_u), free(got), free(got_u);
    cudaFree((void *)a.w), cudaFree((void *)a.x), cudaFree((void *)a.ids), cudaFree(dy), cudaFree(dyu),
        cudaFree(work);
    moe_cases++;
}

static void test_moe_wide(void) {
    static const uint32_t T[] = {QUANT_Q4_K, QUANT_Q5_K};
    static const size_t ins[] = {2048, 512, 768, 256, 1280};
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < (g_small ? 3u : 5u); i++) {
            if (g_small && i == 1) continue;
            moe_case(T[t], ins[i], i % 2 ? 200 : 512, 32, 8, 64); /* a preview's 32 rows on 64 experts */
            moe_case(T[t], ins[i], 200, 3, 2, 6);                  /* 1..2 slots an expert */
        }
    if (!g_small) moe_case(QUANT_Q4_K, 2048, 512, 16, 8, 128); /* a stacked step: ~1 slot an expert */
    printf("  grouped Q4_K / Q5_K (WIDE tiles): %zu cases (1..8 super-blocks, single and pair) bit-identical X2 off "
           "/ on\n",
           moe_cases);
}

/* ---- a graph capture with the form on: the stage choice of a first launch inside the capture ---- */

static void test_graph(void) {
    const size_t n_in = 2048, n_out = 200, n_rows = 20, k = 4, n_expert = 32, n_slots = n_rows * k;
    size_t rbq, rbk;
    uint8_t *wq = make_weights(QUANT_Q8_0, n_out, n_in, &rbq);
    uint8_t *wk = make_weights(QUANT_Q4_K, n_expert * n_out, n_in, &rbk);
    float *x = malloc(n_rows * n_in * sizeof(float));
    fill(x, n_rows * n_in, 2.0);
    int32_t *ids = malloc(n_slots * sizeof(int32_t));
    for (size_t s = 0; s < n_slots; s++) ids[s] = (int32_t)((s * 7 + s / k) % n_expert);
    void *dwq = dev_upload(wq, n_out * rbq, 0);
    cuda_moe_args a = {.type = QUANT_Q4_K, .expert_stride = n_out * rbk, .n_expert = n_expert, .n_out = n_out,
                       .n_in = n_in, .n_rows = n_rows, .k = k};
    a.w = dev_upload(wk, n_expert * n_out * rbk, 0);
    a.x = dev_upload(x, n_rows * n_in * sizeof(float), 0);
    a.ids = dev_upload(ids, n_slots * sizeof(int32_t), 0);
    float *dyq = NULL, *dyk = NULL;
    CU(cudaMalloc((void **)&dyq, n_rows * n_out * sizeof(float)));
    CU(cudaMalloc((void **)&dyk, n_slots * n_out * sizeof(float)));
    a.y = dyk;
    void *wsq = NULL, *wsk = NULL;
    CU(cudaMalloc(&wsq, cuda_matmul_chunk_work_bytes(QUANT_Q8_0, n_in, n_rows) + 256));
    CU(cudaMalloc(&wsk, cuda_moe_chunk_work_bytes(&a) + 256));
    float *rq = malloc(n_rows * n_out * sizeof(float)), *rk = malloc(n_slots * n_out * sizeof(float));
    float *gq = malloc(n_rows * n_out * sizeof(float)), *gk = malloc(n_slots * n_out * sizeof(float));
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    char why[256] = "";
    for (int pass = 0; pass < 2; pass++) { /* 0: eager, the form off; 1: captured with it on, replayed */
        cuda_ig_x2_set(pass);
        CU(cudaMemsetAsync(dyq, 0xFF, n_rows * n_out * sizeof(float), st));
        CU(cudaMemsetAsync(dyk, 0xFF, n_slots * n_out * sizeof(float), st));
        CU(cudaStreamSynchronize(st));
        const unsigned long long l0 = x2_count();
        cudaGraph_t g = NULL;
        cudaGraphExec_t ge = NULL;
        if (pass) CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        CHECK_MSG(cuda_matmul_chunk_ws(QUANT_Q8_0, dwq, n_out, n_in, a.x, n_rows, dyq, wsq, st, why, sizeof why) == 0,
                  "%s", why);
        CHECK_MSG(cuda_moe_chunk(&a, wsk, st, why, sizeof why) == 0, "%s", why);
        if (pass) {
            CU(cudaStreamEndCapture(st, &g));
            CU(cudaGraphInstantiate(&ge, g, 0));
            CU(cudaGraphLaunch(ge, st));
        }
        CU(cudaStreamSynchronize(st));
        CHECK_MSG(x2_count() == l0 + 2 * (unsigned)pass, "graph: %llu X2 launches", x2_count() - l0);
        CU(cudaMemcpy(pass ? gq : rq, dyq, n_rows * n_out * sizeof(float), cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(pass ? gk : rk, dyk, n_slots * n_out * sizeof(float), cudaMemcpyDeviceToHost));
        if (ge) cudaGraphExecDestroy(ge);
        if (g) cudaGraphDestroy(g);
    }
    cuda_ig_x2_set(-1);
    CHECK_MSG(n_nan(gq, n_rows * n_out) == 0 && memcmp(gq, rq, n_rows * n_out * sizeof(float)) == 0,
              "graph: the dense Q8_0 product differs from the eager one-chunk form");
    CHECK_MSG(n_nan(gk, n_slots * n_out) == 0 && memcmp(gk, rk, n_slots * n_out * sizeof(float)) == 0,
              "graph: the grouped Q4_K product differs from the eager one-chunk form");
    printf("  graph capture with X2 on (first launches inside the capture): bit-identical\n");
    cudaStreamDestroy(st);
    free(wq), free(wk), free(x), free(ids), free(rq), free(rk), free(gq), free(gk);
    cudaFree(dwq), cudaFree((void *)a.w), cudaFree((void *)a.x), cudaFree((void *)a.ids), cudaFree(dyq),
        cudaFree(dyk), cudaFree(wsq), cudaFree(wsk);
}

int main(void) {
    char why[256] = "";
    const int n = cuda_device_count(why, sizeof why);
    if (n <= 0) TEST_SKIP("no CUDA device (%s)", n == 0 ? "the runtime found 0 devices" : why);
    const char *sm = getenv("CLOVER_TEST_SMALL");
    g_small = sm && strcmp(sm, "1") == 0;
    RUN(test_graph); /* first: no stage choice cached yet */
    RUN(test_dense_q8);
    RUN(test_seg);
    RUN(test_moe_wide);
    return TEST_EXIT();
}
