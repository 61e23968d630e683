/*
 * bench_cuda_matmul.c: the CUDA weight products (src/cuda/cuda_matmul.h) at
 * the 35B-A3B model's shapes, each beside its floor: the device-to-device
 * copy bandwidth measured first in the same run (bytes read + written / s).
 * A decode product's floor is its weight bytes at that bandwidth; the sweep
 * rotates over enough weight copies (>= 1 GiB) that L2 (50 MB) holds none.
 * The peer is llama.cpp's end-to-end decode on the same model and machine
 * (issue 13: tg128 229 tok/s x 2.69 GB read per token = 616 GB/s effective):
 * a whole-step figure, so a kernel must be well above it for the step to be.
 * Decode products are timed inside a graph with programmatic dependent
 * launch (cuda_pdl.cuh) on and off: "graph" is with it (as the decode step
 * runs), "no PDL" without.
 * Chunk GEMMs print TFLOP/s (TF32 mma.sync; the dense bf16 wgmma ceiling of
 * the H200 is about 790 TFLOP/s measured, TF32 half that).
 *
 * CLOVER_BENCH_LAYER=1: only the products and routing kernels of one GDN
 * layer of the 35B-A3B model at 32 rows (a preview's and a commit's), each
 * timed inside a CUDA graph over 8 copies of the layer's weights (so they come
 * from memory, not L2), one line each, and their sum: where a 32-row pass goes,
 * op by op, without profiling the whole pass (an ncu of bench_cuda_preview did
 * not finish in 85 s on 2026-12-03). Then a prompt's dense products at 512 rows with
 * matmul_igemm.cu's kernels and with the wide tile (matmul_igemm_wide.cu), one line each.
 *
 * CLOVER_BENCH_MOEFAST=1: only the routed experts' 1 / 4 / 8-row products of the 35B-A3B model, the fast form
 * (CLOVER_CUDA_MOE_FAST) off against on.
 *
 * CLOVER_BENCH_MMAROWS=1: only the dense Q8_0 products of the 35B-A3B model at 1, 2, 4, 8, 16, 32 rows: the decode
 * form, the chunk form, and the few-row form with the weights as the mma A operand (CLOVER_CUDA_MMA_ROWS).
 *
 * CLOVER_BENCH_ROWS32=1: only the dense Q8_0 products at 8, 16 and 32 rows with the K-split cluster form
 * (CLOVER_CUDA_Q8_ROWS32) off and on, alternating, in graphs, GB/s beside the copy bandwidth's floor.
 *
 * CLOVER_BENCH_STREAM32=1: only the dense Q8_0 products of the 35B-A3B model at 8, 12, 16, 24 and 32 rows, the
 * chunk form against the stream form of 9..32 rows (CLOVER_BENCH_STREAM32_ONLY=NAME and _ROWS=N: one of them, for ncu).
 *
 * CLOVER_BENCH_X2=1: only the integer chunk kernels' X2 forms (CLOVER_CUDA_IG_X2: two chunks a ring stage) off against
 * on at the 35B-A3B shapes of a 32-row pass (and the 2048 x 4096 product at 16 / 8 rows): each product in a graph over
 * weight copies (off, on, off, on, then on at 2 and at 3 stages forced), one line each with the best off / on times,
 * GB/s and the share of the copy bandwidth.
 *
 * CLOVER_BENCH_TILES=1: only the grouped Q4_K experts' tile loop (CLOVER_CUDA_MOE_TILE_LOOP) off against on for a
 * preview's routing (32 rows on 8 experts), a commit's (32 rows, ~160 experts) and a 16-row AR step's (~100): the
 * gate + up pair and the down, each in a graph over weight copies, off / on alternating 5 times, the medians and
 * on/off; CLOVER_BENCH_TILES_CAPS=N,M,...: also the loop at those caps on grid.y forced (tuning the cap).
 *
 * CLOVER_BENCH_TILES_SWEEP=1: only the 16-row AR step's grouped Q4_K pair and down at exactly D distinct experts, D
 * from 64 to 128 (D tiles): whether the tile loop's last partial wave of blocks shows as a step in the time.
 *
 * CLOVER_BENCH_EXACT=1: only the router's exact f32 product (256 + 1 outputs x 2048, cuda_matmul_exact_multi) at 4,
 * 8, 16, 32, 64, 128 and 512 rows in its three forms (a warp an output; the row blocks of CLOVER_CUDA_EXACT_RB; the
 * register tiles of CLOVER_CUDA_EXACT_TILE), each in a graph over 40 weight copies (80 MB: not from L2), twice each
 * but the row blocks, one line a row count with the best of each and rows / tiles.
 *
 * Built only with the CUDA backend (bench/CMakeLists.txt); no device: exit 77.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_device.h"
#include "cuda/cuda_gdn.h"
#include "cuda/cuda_matmul.h"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_preview.h"
#include "quant/quant.h"

#include "cuda_bench.h"

static const double PEER_GBS = 229.0 * 2.69; /* llama.cpp tg128 on the H200, issue 13 */

static uint64_t rs = 42;
static uint32_t rnd(void) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rs >> 33);
}

/* Device buffer of random bytes with valid f16 scales (the first bytes of
 * every block get small positive f16 values via a quantised random row). */
static void *dev_weights(uint32_t type, size_t rows, size_t n_in) {
    const size_t rb = quant_row_bytes(type, n_in);
    uint8_t *row = malloc(rb * 64);
    float *f = malloc(n_in * sizeof(float));
    for (int r = 0; r < 64; r++) {
        for (size_t i = 0; i < n_in; i++) f[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-4f;
        quant_quantize_row(type, f, row + r * rb, n_in);
    }
    void *d = NULL;
    CU(cudaMalloc(&d, rows * rb));
    for (size_t r = 0; r < rows; r += 64) {
        const size_t n = rows - r < 64 ? rows - r : 64;
        CU(cudaMemcpy((uint8_t *)d + r * rb, row, n * rb, cudaMemcpyHostToDevice));
    }
    free(row), free(f);
    return d;
}

static float *dev_floats(size_t n) {
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    float *d = NULL;
    CU(cudaMalloc((void **)&d, n * sizeof(float)));
    CU(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    free(h);
    return d;
}

static cudaEvent_t ev0, ev1;
static double elapsed_s(void) {
    float ms = 0;
    CU(cudaEventSynchronize(ev1));
    CU(cudaEventElapsedTime(&ms, ev0, ev1));
    return ms / 1000.0;
}

/* Time of one run of `body` (n launches on stream st) replayed from a CUDA
 * graph, per launch: what a product costs inside the decode step's graph. */
typedef void (*launch_fn)(void *ctx, size_t i, cudaStream_t st);
static double graph_time(launch_fn body, void *ctx, size_t n) {
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (size_t i = 0; i < n; i++) body(ctx, i, st);
    CU(cudaStreamEndCapture(st, &g));
    CU(cudaGraphInstantiate(&ge, g, 0));
    CU(cudaGraphLaunch(ge, st));
    CU(cudaStreamSynchronize(st));
    const int reps = 3;
    CU(cudaEventRecord(ev0, st));
    for (int r = 0; r < reps; r++) CU(cudaGraphLaunch(ge, st));
    CU(cudaEventRecord(ev1, st));
    const double t = elapsed_s() / (reps * (double)n);
    CU(cudaGraphExecDestroy(ge));
    CU(cudaGraphDestroy(g));
    CU(cudaStreamDestroy(st));
    return t;
}

/* The graph time of body in the three launch settings the decode rows print:
 * without PDL, without cp.async staging, and with both (the default). */
typedef struct graph_variants {
    double no_pdl, no_stage, both;
} graph_variants;

static graph_variants graph_time_variants(launch_fn body, void *ctx, size_t n) {
    graph_variants v;
    cuda_pdl_set(0);
    v.no_pdl = graph_time(body, ctx, n);
    cuda_pdl_set(1);
    cuda_mmv_stage_set(0);
    v.no_stage = graph_time(body, ctx, n);
    cuda_mmv_stage_set(1);
    v.both = graph_time(body, ctx, n);
    return v;
}

typedef struct dec_ctx {
    uint32_t type;
    const uint8_t *w;
    size_t mat, n_out, n_in, rows;
    const float *x;
    float *y;
    void *work;
    cuda_moe_args *moe;
    size_t ex, n_expert;
} dec_ctx;

static void dec_body(void *ctx, size_t i, cudaStream_t st) {
    const dec_ctx *c = ctx;
    char why[256];
    if (cuda_matmul_decode(c->type, c->w + i * c->mat, c->n_out, c->n_in, c->x, c->rows, c->y, c->work, st, why,
                           sizeof why))
        fprintf(stderr, "%s\n", why);
}

static void moe_body(void *ctx, size_t i, cudaStream_t st) {
    const dec_ctx *c = ctx;
    cuda_moe_args a = *c->moe;
    a.w = c->w + i * c->n_expert * c->ex;
    char why[256];
    if (cuda_moe_decode(&a, c->work, st, why, sizeof why)) fprintf(stderr, "%s\n", why);
}

/* The experts' gate and up of one layer: layer i's gate stack, layer i+1's as the up stack. */
static void glu_body(void *ctx, size_t i, cudaStream_t st) {
    const dec_ctx *c = ctx;
    cuda_moe_args a = *c->moe;
    a.w = c->w + 2 * i * c->n_expert * c->ex;
    char why[256];
    if (cuda_moe_decode_glu(&a, (const uint8_t *)a.w + c->n_expert * c->ex, c->work, st, why, sizeof why))
        fprintf(stderr, "%s\n", why);
}

/* The same two products unfused: gate, up, then the SwiGLU kernel. */
static void glu2_body(void *ctx, size_t i, cudaStream_t st) {
    const dec_ctx *c = ctx;
    cuda_moe_args a = *c->moe;
    a.w = c->w + 2 * i * c->n_expert * c->ex;
    float *yg = a.y;
    char why[256];
    if (cuda_moe_decode(&a, c->work, st, why, sizeof why)) fprintf(stderr, "%s\n", why);
    a.w = (const uint8_t *)a.w + c->n_expert * c->ex;
    a.y = c->y;
    if (cuda_moe_decode(&a, c->work, st, why, sizeof why)) fprintf(stderr, "%s\n", why);
    cuda_swiglu(yg, yg, c->y, a.n_rows * a.k * a.n_out, st);
}

/* A GDN layer's input products (qkv, z, alpha, beta: Q8_0, 2048 wide, one row), layer i of the copies. */
typedef struct multi_ctx {
    const uint8_t *w;
    size_t layer_bytes;
    const float *x;
    float *y;
    void *work;
} multi_ctx;
static const size_t MULTI_OUT[4] = {8192, 4096, 32, 32};

static void multi_seg(const multi_ctx *c, size_t i, cuda_matmul_seg *seg) {
    const size_t rb = quant_row_bytes(QUANT_Q8_0, 2048);
    size_t off = i * c->layer_bytes, yo = 0;
    for (int j = 0; j < 4; j++) {
        seg[j] = (cuda_matmul_seg){.w = c->w + off, .n_out = MULTI_OUT[j], .y = c->y + yo};
        off += MULTI_OUT[j] * rb;
        yo += MULTI_OUT[j];
    }
}
static void multi_body(void *ctx, size_t i, cudaStream_t st) {
    cuda_matmul_seg seg[4];
    multi_seg(ctx, i, seg);
    char why[256];
    if (cuda_matmul_decode_multi(QUANT_Q8_0, seg, 4, 2048, ((multi_ctx *)ctx)->x, 1, ((multi_ctx *)ctx)->work, st, why,
                                 sizeof why))
        fprintf(stderr, "%s\n", why);
}
static void multi4_body(void *ctx, size_t i, cudaStream_t st) {
    cuda_matmul_seg seg[4];
    multi_seg(ctx, i, seg);
    char why[256];
    for (int j = 0; j < 4; j++)
        if (cuda_matmul_decode(QUANT_Q8_0, seg[j].w, seg[j].n_out, 2048, ((multi_ctx *)ctx)->x, 1, seg[j].y,
                               ((multi_ctx *)ctx)->work, st, why, sizeof why))
            fprintf(stderr, "%s\n", why);
}
static void bench_multi(double bw) {
    const size_t rb = quant_row_bytes(QUANT_Q8_0, 2048), rows = 8192 + 4096 + 32 + 32, layers = 8;
    void *w = dev_weights(QUANT_Q8_0, rows * layers, 2048);
    multi_ctx c = {.w = w, .layer_bytes = rows * rb, .x = dev_floats(2048)};
    CU(cudaMalloc((void **)&c.y, rows * sizeof(float)));
    CU(cudaMalloc(&c.work, cuda_matmul_decode_work_bytes(QUANT_Q8_0, 2048, 1) + 256));
    const double t1 = graph_time(multi_body, &c, layers), t4 = graph_time(multi4_body, &c, layers);
    printf("multi   q8_0  qkv+z+alpha+beta (8192+4096+32+32) x 2048 rows 1: one launch %6.2f us %5.0f GB/s %5.1f%% "
           "of copy bw | 4 launches %6.2f us\n",
           t1 * 1e6, (double)c.layer_bytes / t1 / 1e9, 100.0 * c.layer_bytes / t1 / 1e9 / bw, t4 * 1e6);
    CU(cudaFree(w));
    CU(cudaFree((void *)c.x));
    CU(cudaFree(c.y));
    CU(cudaFree(c.work));
}

static double copy_bandwidth(void) {
    const size_t bytes = (size_t)1 << 30;
    void *a, *b;
    CU(cudaMalloc(&a, bytes));
    CU(cudaMalloc(&b, bytes));
    CU(cudaMemset(a, 1, bytes));
    CU(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    CU(cudaEventRecord(ev0, 0));
    for (int i = 0; i < 10; i++) CU(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    CU(cudaEventRecord(ev1, 0));
    const double gbs = 10.0 * 2.0 * (double)bytes / elapsed_s() / 1e9;
    CU(cudaFree(a));
    CU(cudaFree(b));
    return gbs;
}

static void fail(const char *why) {
    fprintf(stderr, "bench_cuda_matmul: %s\n", why);
    exit(1);
}

/* Dense decode: n_copies matrices of n_out x n_in, rows activation rows. */
static void bench_decode(uint32_t type, size_t n_out, size_t n_in, size_t rows, double bw) {
    const size_t rb = quant_row_bytes(type, n_in), mat = n_out * rb;
    const size_t copies = ((size_t)1 << 30) / mat + 1;
    void *w = dev_weights(type, copies * n_out, n_in);
    float *x = dev_floats(rows * n_in), *y = NULL;
    void *work = NULL;
    CU(cudaMalloc((void **)&y, rows * n_out * sizeof(float)));
    CU(cudaMalloc(&work, cuda_matmul_decode_work_bytes(type, n_in, rows) + 256));
    char why[256];
    for (size_t c = 0; c < copies; c++)
        if (cuda_matmul_decode(type, (uint8_t *)w + c * mat, n_out, n_in, x, rows, y, work, NULL, why, sizeof why))
            fail(why);
    const int reps = 3;
    CU(cudaEventRecord(ev0, 0));
    for (int r = 0; r < reps; r++)
        for (size_t c = 0; c < copies; c++)
            cuda_matmul_decode(type, (uint8_t *)w + c * mat, n_out, n_in, x, rows, y, work, NULL, why, sizeof why);
    CU(cudaEventRecord(ev1, 0));
    const double t = elapsed_s() / (reps * copies);
    dec_ctx c = {.type = type, .w = w, .mat = mat, .n_out = n_out, .n_in = n_in, .rows = rows, .x = x, .y = y,
                 .work = work};
    const graph_variants v = graph_time_variants(dec_body, &c, copies);
    const double tn = v.no_pdl, tu = v.no_stage, tg = v.both, gg = (double)mat / tg / 1e9;
    printf("decode  %-5s %5zu x %-5zu rows %zu: stream %6.2f us | no PDL %6.2f | no stage %6.2f | graph %6.2f us %5.0f "
           "GB/s %5.1f%% of copy bw %4.2fx peer\n",
           quant_type_name(type), n_out, n_in, rows, t * 1e6, tn * 1e6, tu * 1e6, tg * 1e6, gg, 100 * gg / bw,
           gg / PEER_GBS);
    CU(cudaFree(w));
    CU(cudaFree(x));
    CU(cudaFree(y));
    CU(cudaFree(work));
}

/* Each row's k distinct expert ids (random, or the fixed 31 j + 5 of a
 * preview's coreset); returns how many distinct experts all rows touch. */
static size_t pick_expert_ids(int32_t *ids, size_t rows, size_t k, size_t n_expert, int fixed) {
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < k; j++) {
            int32_t e;
            int dup;
            do {
                e = fixed ? (int32_t)(31 * j + 5) : (int32_t)(rnd() % n_expert);
                dup = 0;
                for (size_t i = 0; i < j; i++) dup |= ids[r * k + i] == e;
            } while (dup);
            ids[r * k + j] = e;
        }
    size_t distinct = 0;
    for (size_t s = 0; s < rows * k; s++) {
        int seen = 0;
        for (size_t t = 0; t < s; t++) seen |= ids[t] == ids[s];
        distinct += !seen;
    }
    return distinct;
}

/* MoE decode: n_layers stacks of n_expert experts; bytes = the distinct routed experts' weights. */
static void bench_moe_decode(uint32_t type, size_t n_expert, size_t n_out, size_t n_in, size_t k, size_t rows,
                             double bw) {
    const size_t rb = quant_row_bytes(type, n_in), ex = n_out * rb, layers = 8;
    void *w = dev_weights(type, layers * n_expert * n_out, n_in);
    int32_t *ids_h = malloc(rows * k * sizeof(int32_t));
    const size_t distinct = pick_expert_ids(ids_h, rows, k, n_expert, 0);
    int32_t *ids = NULL;
    CU(cudaMalloc((void **)&ids, rows * k * sizeof(int32_t)));
    CU(cudaMemcpy(ids, ids_h, rows * k * sizeof(int32_t), cudaMemcpyHostToDevice));
    float *x = dev_floats(rows * n_in), *y = NULL;
    CU(cudaMalloc((void **)&y, rows * k * n_out * sizeof(float)));
    cuda_moe_args a = {.type = type, .expert_stride = ex, .n_expert = n_expert, .n_out = n_out, .n_in = n_in,
                       .ids = ids, .n_rows = rows, .k = k, .x = x, .y = y};
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_moe_decode_work_bytes(&a) + 256));
    char why[256];
    const int reps = 20;
    for (int r = -1; r < reps; r++) {
        if (r == 0) CU(cudaEventRecord(ev0, 0));
        for (size_t l = 0; l < layers; l++) {
            a.w = (uint8_t *)w + l * n_expert * ex;
            if (cuda_moe_decode(&a, work, NULL, why, sizeof why)) fail(why);
        }
    }
    CU(cudaEventRecord(ev1, 0));
    const double t = elapsed_s() / (reps * layers), gbs = (double)(distinct * ex) / t / 1e9;
    float *y2 = NULL;
    CU(cudaMalloc((void **)&y2, rows * k * n_out * sizeof(float)));
    dec_ctx c = {.w = w, .work = work, .moe = &a, .ex = ex, .n_expert = n_expert, .y = y2};
    const graph_variants v = graph_time_variants(moe_body, &c, layers);
    const double tn = v.no_pdl, tu = v.no_stage, tg = v.both, gg = (double)(distinct * ex) / tg / 1e9;
    printf("moe dec %-5s %zux%zu x %zu k=%zu rows %zu (%zu experts): stream %6.2f us %5.0f GB/s | no PDL %6.2f | no "
           "stage %6.2f | graph %6.2f us %5.0f GB/s %5.1f%% of copy bw\n",
           quant_type_name(type), n_expert, n_out, n_in, k, rows, distinct, t * 1e6, gbs, tn * 1e6, tu * 1e6,
           tg * 1e6, gg, 100 * gg / bw);
    if (!a.x_per_slot) { /* gate + up of a layer (2 x the bytes): fused vs gate, up, SwiGLU */
        const double t1 = graph_time(glu_body, &c, layers / 2), t2 = graph_time(glu2_body, &c, layers / 2);
        printf("moe glu %-5s %zux%zu x %zu k=%zu rows %zu: fused %7.2f us %5.0f GB/s %5.1f%% of copy bw | unfused "
               "(3 launches) %7.2f us\n",
               quant_type_name(type), n_expert, n_out, n_in, k, rows, t1 * 1e6, 2.0 * distinct * ex / t1 / 1e9,
               100 * 2.0 * distinct * ex / t1 / 1e9 / bw, t2 * 1e6);
    }
    CU(cudaFree(y2));
    free(ids_h);
    CU(cudaFree(w));
    CU(cudaFree(ids));
    CU(cudaFree(x));
    CU(cudaFree(y));
    CU(cudaFree(work));
}

/* CLOVER_BENCH_QUICK=1: only the chunk products, each launched twice (for ncu). */
static int g_quick;

/* Copies of one weight matrix, enough of them (>= 256 MB in all, at most maxw) that a launch rotating among them
 * reads its weights from memory, not from the 50 MB L2; one copy under CLOVER_BENCH_QUICK (ncu). The count. */
static size_t rotated_weights(uint32_t type, size_t n_out, size_t n_in, void **w, size_t maxw) {
    const size_t wbytes = quant_row_bytes(type, n_in) * n_out;
    size_t nw = (256u << 20) / wbytes + 1;
    if (nw > maxw) nw = maxw;
    if (g_quick) nw = 1; /* under ncu: one launch after the first */
    for (size_t i = 0; i < nw; i++) w[i] = dev_weights(type, n_out, n_in);
    return nw;
}

/* Chunk products on rotated weight copies (rotated_weights). */
static void bench_chunk(uint32_t type, size_t n_out, size_t n_in, size_t rows, double bw, int ws) {
    enum { MAXW = 32 };
    const size_t wbytes = quant_row_bytes(type, n_in) * n_out;
    void *w[MAXW];
    const size_t nw = rotated_weights(type, n_out, n_in, w, MAXW);
    float *x = dev_floats(rows * n_in), *y = NULL;
    CU(cudaMalloc((void **)&y, rows * n_out * sizeof(float)));
    void *work = NULL;
    if (ws) CU(cudaMalloc(&work, cuda_matmul_chunk_work_bytes(type, n_in, rows) + 256));
#define CHUNK(W)                                                                                                   \
    (ws ? cuda_matmul_chunk_ws(type, (W), n_out, n_in, x, rows, y, work, NULL, why, sizeof why)                    \
        : cuda_matmul_chunk(type, (W), n_out, n_in, x, rows, y, NULL, why, sizeof why))
    char why[256];
    for (size_t i = 0; i < nw; i++)
        if (CHUNK(w[i])) fail(why);
    const int reps = g_quick ? 1 : 4 * (int)nw;
    CU(cudaEventRecord(ev0, 0));
    for (int r = 0; r < reps; r++) CHUNK(w[r % nw]);
#undef CHUNK
    CU(cudaEventRecord(ev1, 0));
    const double t = elapsed_s() / reps, gbs = (double)wbytes / t / 1e9;
    printf("chunk%s %-5s %5zu x %-5zu rows %3zu: %8.2f us  %6.1f TFLOP/s  weights %5.0f GB/s (%5.1f%% of copy bw)\n",
           ws ? "ws" : "  ", quant_type_name(type), n_out, n_in, rows, t * 1e6, 2.0 * rows * n_out * n_in / t / 1e12, gbs,
           100.0 * gbs / bw);
    for (size_t i = 0; i < nw; i++) CU(cudaFree(w[i]));
    if (work) CU(cudaFree(work));
    CU(cudaFree(x));
    CU(cudaFree(y));
}

static void bench_moe_chunk(uint32_t type, size_t n_expert, size_t n_out, size_t n_in, size_t k, size_t rows,
                            double bw) {
    const size_t rb = quant_row_bytes(type, n_in), ex = n_out * rb;
    void *w = dev_weights(type, n_expert * n_out, n_in);
    int32_t *ids_h = malloc(rows * k * sizeof(int32_t));
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < k; j++) ids_h[r * k + j] = (int32_t)((r * 7 + j * 31 + rnd() % 3 * 97) % n_expert);
    for (size_t r = 0; r < rows; r++) /* make each row's ids distinct */
        for (size_t j = 0; j < k; j++) ids_h[r * k + j] = (int32_t)((ids_h[r * k] + j * 32) % n_expert);
    int32_t *ids = NULL;
    CU(cudaMalloc((void **)&ids, rows * k * sizeof(int32_t)));
    CU(cudaMemcpy(ids, ids_h, rows * k * sizeof(int32_t), cudaMemcpyHostToDevice));
    float *x = dev_floats(rows * n_in), *y = NULL;
    CU(cudaMalloc((void **)&y, rows * k * n_out * sizeof(float)));
    cuda_moe_args a = {.type = type, .w = w, .expert_stride = ex, .n_expert = n_expert, .n_out = n_out,
                       .n_in = n_in, .ids = ids, .n_rows = rows, .k = k, .x = x, .y = y};
    void *work = NULL;
    CU(cudaMalloc(&work, cuda_moe_chunk_work_bytes(&a) + 256));
    char why[256];
    if (cuda_moe_chunk(&a, work, NULL, why, sizeof why)) fail(why);
    const int reps = g_quick ? 1 : 10;
    CU(cudaEventRecord(ev0, 0));
    for (int r = 0; r < reps; r++) cuda_moe_chunk(&a, work, NULL, why, sizeof why);
    CU(cudaEventRecord(ev1, 0));
    const double t = elapsed_s() / reps;
    printf("moe chk %-5s %zux%zu x %zu k=%zu rows %3zu: %8.1f us  %6.1f TFLOP/s  weights %4.0f GB/s (%4.1f%% bw)\n",
           quant_type_name(type), n_expert, n_out, n_in, k, rows, t * 1e6, 2.0 * rows * k * n_out * n_in / t / 1e12,
           (double)(n_expert * ex) / t / 1e9, 100.0 * (double)(n_expert * ex) / t / 1e9 / bw);
    free(ids_h);
    CU(cudaFree(w));
    CU(cudaFree(ids));
    CU(cudaFree(x));
    CU(cudaFree(y));
    CU(cudaFree(work));
}

/* ---- CLOVER_BENCH_MOEFAST: the routed experts' decode products of the 35B-A3B model (Q4_K, 256 experts, k 8),
 * gate + up + SwiGLU (2048 -> 512) and down (512 -> 2048, a row per slot), at 1, 4 and 8 rows, with the fast form
 * (moe_fast.cu, cuda_moe_fast_set) off and on, each timed in a CUDA graph over 8 layers' copies of the weights. */
static void bench_moe_fast(double bw) {
    const size_t n_expert = 256, k = 8, layers = 8, rows_list[] = {1, 4, 8};
    const size_t rb_gu = quant_row_bytes(QUANT_Q4_K, 2048), ex_gu = 512 * rb_gu;
    const size_t rb_dn = quant_row_bytes(QUANT_Q4_K, 512), ex_dn = 2048 * rb_dn;
    void *w_gu = dev_weights(QUANT_Q4_K, 2 * layers * n_expert * 512, 2048);
    void *w_dn = dev_weights(QUANT_Q4_K, layers * n_expert * 2048, 512);
    float *x = dev_floats(8 * k * 2048), *y = NULL, *y2 = NULL;
    CU(cudaMalloc((void **)&y, 8 * k * 2048 * sizeof(float)));
    CU(cudaMalloc((void **)&y2, 8 * k * 2048 * sizeof(float)));
    int32_t *ids = NULL, ids_h[8 * 8];
    CU(cudaMalloc((void **)&ids, sizeof ids_h));
    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
        const size_t rows = rows_list[ri], distinct = pick_expert_ids(ids_h, rows, k, n_expert, 0);
        CU(cudaMemcpy(ids, ids_h, rows * k * sizeof(int32_t), cudaMemcpyHostToDevice));
        cuda_moe_args gu = {.type = QUANT_Q4_K, .expert_stride = ex_gu, .n_expert = n_expert, .n_out = 512,
                            .n_in = 2048, .ids = ids, .n_rows = rows, .k = k, .x = x, .y = y};
        cuda_moe_args dn = {.type = QUANT_Q4_K, .expert_stride = ex_dn, .n_expert = n_expert, .n_out = 2048,
                            .n_in = 512, .ids = ids, .n_rows = rows, .k = k, .x = x, .y = y, .x_per_slot = 1};
        const size_t wb = cuda_moe_decode_work_bytes(&gu) > cuda_moe_decode_work_bytes(&dn)
                              ? cuda_moe_decode_work_bytes(&gu)
                              : cuda_moe_decode_work_bytes(&dn);
        void *work = NULL;
        CU(cudaMalloc(&work, wb + 256));
        dec_ctx cg = {.w = w_gu, .work = work, .moe = &gu, .ex = ex_gu, .n_expert = n_expert, .y = y2};
        dec_ctx cd = {.w = w_dn, .work = work, .moe = &dn, .ex = ex_dn, .n_expert = n_expert, .y = y2};
        double t[2][2];
        for (int on = 0; on < 2; on++) {
            cuda_moe_fast_set(on);
            t[on][0] = graph_time(glu_body, &cg, layers);
            t[on][1] = graph_time(moe_body, &cd, layers);
        }
        cuda_moe_fast_set(-1);
        const double b_gu = 2.0 * distinct * ex_gu, b_dn = (double)distinct * ex_dn;
        printf("moe fast rows %zu (%zu experts): gate+up+swiglu old %6.2f us new %6.2f us (%4.0f GB/s %4.1f%%) | down "
               "old %6.2f new %6.2f (%4.0f GB/s) | both old %6.2f new %6.2f us\n",
               rows, distinct, t[0][0] * 1e6, t[1][0] * 1e6, b_gu / t[1][0] / 1e9, 100 * b_gu / t[1][0] / 1e9 / bw,
               t[0][1] * 1e6, t[1][1] * 1e6, b_dn / t[1][1] / 1e9, (t[0][0] + t[0][1]) * 1e6,
               (t[1][0] + t[1][1]) * 1e6);
        CU(cudaFree(work));
    }
    CU(cudaFree(w_gu));
    CU(cudaFree(w_dn));
    CU(cudaFree(x));
    CU(cudaFree(y));
    CU(cudaFree(y2));
    CU(cudaFree(ids));
}

/* ---- CLOVER_BENCH_LAYER: one GDN layer of a 32-row pass, op by op ---- */
enum { LY_COPIES = 8, LY_ROWS = 32, LY_E = 256, LY_K = 8 };
typedef struct layer_ctx {
    int op;
    uint32_t type;
    const uint8_t *w;
    size_t mat, n_out, n_in, rows;
    const float *x;
    float *y;
    void *work;
    cuda_moe_args moe;
    size_t ex;
    uint8_t *allowed;
    uint32_t *kept;
    int32_t *ridx;
    float *rw;
    float *y2;     /* ops 6, 7: the pair's second output */
    size_t n_out2; /* op 7: the second product's outputs */
} layer_ctx;

static void layer_body(void *ctx, size_t i, cudaStream_t st) {
    const layer_ctx *c = ctx;
    char why[256] = "";
    int rc = 0;
    const uint8_t *w = c->w + i * c->mat;
    switch (c->op) {
    case 0: /* a dense chunk product with its 8-bit rows in scratch (the backend's mm_as) */
        rc = c->work ? cuda_matmul_chunk_ws(c->type, w, c->n_out, c->n_in, c->x, c->rows, c->y, c->work, st, why, sizeof why)
                     : cuda_matmul_chunk(c->type, w, c->n_out, c->n_in, c->x, c->rows, c->y, st, why, sizeof why);
        break;
    case 1: /* the router, exact: decode products of 8 rows (the backend's mm_as with exact) */
        for (size_t r0 = 0; r0 < c->rows && !rc; r0 += 8)
            rc = cuda_matmul_decode(c->type, w, c->n_out, c->n_in, c->x + r0 * c->n_in, 8, c->y + r0 * c->n_out,
                                    c->work, st, why, sizeof why);
        break;
    case 2: { /* a grouped expert product */
        cuda_moe_args a = c->moe;
        a.w = w;
        rc = cuda_moe_chunk(&a, c->work, st, why, sizeof why);
        break;
    }
    case 3: /* the coreset of the block from router logits, then every row routed inside it (the backend's call: one
             * launch with CLOVER_CUDA_CORESET_ROUTE on, else two) */
        rc = cuda_moe_coreset_route(c->allowed, c->kept, c->ridx, c->rw, c->x, c->rows, LY_E, LY_K, 0.9f, c->work, st);
        if (rc) snprintf(why, sizeof why, "coreset: %s", cuda_preview_last_error());
        break;
    case 5: { /* the GDN block operator of a preview (35B dims: 16 key / 32 value heads of 128, K 4) */
        const cuda_gdn_dims d = {16, 32, 128, 128, 4, 1e-6f, 1};
        const float *f = c->x; /* every weight vector a slice of one random buffer (values in [-1, 1]) */
        const cuda_gdn_block_weights bw = {f, f, f, f, f + 1, f, f, f};
        const size_t cdim = (size_t)cuda_gdn_conv_dim(&d);
        float *mixed = c->y, *z = mixed + c->rows * cdim, *a = z + c->rows * 4096, *ring = a + c->rows * 32;
        float *state = ring + 3 * cdim, *out = state + (size_t)32 * 128 * 128, *work = out + c->rows * 4096;
        rc = cuda_gdn_block(out, mixed, z, a, ring, state, &bw, &d, (int)c->rows, -0.5f, work, st);
        if (rc) snprintf(why, sizeof why, "gdn block: %s", cuda_preview_last_error());
        break;
    }
    case 6: { /* the experts' gate and up of one layer as a pair (the up: the next weight copy's experts) */
        cuda_moe_args a = c->moe;
        a.w = w;
        rc = cuda_moe_chunk_pair(&a, c->w + ((i + 1) % LY_COPIES) * c->mat, c->y2, c->work, st, why, sizeof why);
        break;
    }
    case 7: /* two dense products of the same rows as a pair (the second: the next weight copy's first rows) */
        rc = cuda_matmul_chunk_ws_pair(c->type, w, c->n_out, c->w + ((i + 1) % LY_COPIES) * c->mat, c->n_out2, c->n_in,
                                       c->x, c->rows, c->y, c->y2, c->work, st, why, sizeof why);
        break;
    case 8: { /* a GDN layer's input products qkv, z, alpha, beta (MULTI_OUT) of the same rows: one _multi call */
        cuda_matmul_seg seg[4];
        const size_t rb = quant_row_bytes(c->type, c->n_in);
        size_t off = 0, yo = 0;
        for (int j = 0; j < 4; j++) {
            seg[j] = (cuda_matmul_seg){.w = w + off, .n_out = MULTI_OUT[j], .y = c->y + yo};
            off += MULTI_OUT[j] * rb;
            yo += c->rows * MULTI_OUT[j];
        }
        rc = cuda_matmul_chunk_ws_multi(c->type, seg, 4, c->n_in, c->x, c->rows, c->work, st, why, sizeof why);
        break;
    }
    case 4: /* the plain routing */
        rc = cuda_moe_route(c->ridx, c->rw, c->x, c->rows, LY_E, LY_K, st);
        if (rc) snprintf(why, sizeof why, "route: %s", cuda_ops_last_error());
        break;
    default: break;
    }
    if (rc) fail(why);
}

/* The op's graph time (s) over `copies` weight copies, run once outside the capture first (the kernels' one-time
 * attribute and occupancy calls). */
static double layer_time(layer_ctx *c, size_t copies) {
    layer_body(c, 0, NULL);
    CU(cudaDeviceSynchronize());
    return graph_time(layer_body, c, copies);
}

/* The op's graph time (us) over the copies, printed with its weight bytes a launch. */
static double layer_op(const char *name, layer_ctx *c, double bytes, double bw) {
    const double t = layer_time(c, LY_COPIES);
    printf("layer   %-44s %8.2f us", name, t * 1e6);
    if (bytes > 0) printf("  %6.1f MB  %5.0f GB/s (%5.1f%% of copy bw)", bytes * 1e-6, bytes / t / 1e9, 100 * bytes / t / 1e9 / bw);
    printf("\n");
    return t;
}

/* The few-row kernel's time of the last layer_dense / layer_moe (0: not an integer product of <= 32 rows). */
static double g_few_t;

/* Old (matmul_igemm.cu) and, for an integer chunk product of <= 32 rows, a second line "[few]" with the few-row
 * kernel (matmul_igemm_few.cu, cuda_igemm_few_set(1)) in g_few_t; returns the old time. */
static double layer_twice(const char *name, layer_ctx *c, double bytes, double bw, int few_ok) {
    cuda_igemm_few_set(0);
    const double t = layer_op(name, c, bytes, bw);
    g_few_t = 0;
    if (few_ok) {
        char nm[112];
        snprintf(nm, sizeof nm, "[few] %s", name);
        cuda_igemm_few_set(1);
        g_few_t = layer_op(nm, c, bytes, bw);
        cuda_igemm_few_set(0);
    }
    return t;
}

static double layer_dense(const char *name, uint32_t type, size_t n_out, size_t n_in, size_t rows, int op, double bw) {
    const size_t mat = quant_row_bytes(type, n_in) * n_out;
    layer_ctx c = {.op = op, .type = type, .mat = mat, .n_out = n_out, .n_in = n_in, .rows = rows};
    c.w = dev_weights(type, LY_COPIES * n_out, n_in);
    c.x = dev_floats(rows * n_in);
    CU(cudaMalloc((void **)&c.y, rows * n_out * sizeof(float)));
    const size_t wb = op == 0 ? cuda_matmul_chunk_work_bytes(type, n_in, rows) : cuda_matmul_decode_work_bytes(type, n_in, 8);
    if (wb) CU(cudaMalloc(&c.work, wb + 256));
    const int few_ok = op == 0 && type != QUANT_F32 && rows <= 32;
    const double t = layer_twice(name, &c, (double)mat, bw, few_ok);
    CU(cudaFree((void *)c.w));
    CU(cudaFree((void *)c.x));
    CU(cudaFree(c.y));
    if (c.work) CU(cudaFree(c.work));
    return t;
}

/* Experts: preview routing (every row to the same 8 experts, as a first pass's all-mask rows route) or a
 * commit's (distinct random experts a row). */
/* The grouped Q4_K experts of a layer at rows (<= LY_ROWS) rows (LY_E experts, k LY_K) for op (2: one product, 6:
 * the gate + up pair, y2 its second output), preview (every row on the same experts) or commit routing (random:
 * ~160 experts at 32 rows, ~100 at 16); per_slot: x a slot (a down product). Fills *ex with one expert's bytes;
 * returns the distinct experts. moe_ctx_free undoes it. */
static size_t moe_ctx_make(layer_ctx *c, int op, size_t n_out, size_t n_in, int per_slot, int preview, size_t rows,
                           size_t *ex) {
    const uint32_t type = QUANT_Q4_K;
    *ex = quant_row_bytes(type, n_in) * n_out;
    int32_t ids_h[LY_ROWS * LY_K];
    const size_t distinct = pick_expert_ids(ids_h, rows, LY_K, LY_E, preview);
    *c = (layer_ctx){.op = op, .type = type, .mat = LY_E * *ex};
    c->w = dev_weights(type, LY_COPIES * LY_E * n_out, n_in);
    int32_t *ids = NULL;
    CU(cudaMalloc((void **)&ids, rows * LY_K * sizeof(int32_t)));
    CU(cudaMemcpy(ids, ids_h, rows * LY_K * sizeof(int32_t), cudaMemcpyHostToDevice));
    c->x = dev_floats((per_slot ? rows * LY_K : rows) * n_in);
    CU(cudaMalloc((void **)&c->y, rows * LY_K * n_out * sizeof(float)));
    if (op == 6) CU(cudaMalloc((void **)&c->y2, rows * LY_K * n_out * sizeof(float)));
    c->moe = (cuda_moe_args){.type = type, .expert_stride = *ex, .n_expert = LY_E, .n_out = n_out, .n_in = n_in,
                             .ids = ids, .n_rows = rows, .k = LY_K, .x = c->x, .x_per_slot = per_slot, .y = c->y};
    CU(cudaMalloc(&c->work, cuda_moe_chunk_work_bytes(&c->moe) + 256));
    return distinct;
}
static void moe_ctx_free(layer_ctx *c) {
    CU(cudaFree((void *)c->w));
    CU(cudaFree((void *)c->moe.ids));
    CU(cudaFree((void *)c->x));
    CU(cudaFree(c->y));
    if (c->y2) CU(cudaFree(c->y2));
    CU(cudaFree(c->work));
}

static double layer_moe(const char *name, size_t n_out, size_t n_in, int per_slot, int preview, double bw) {
    layer_ctx c;
    size_t ex;
    const size_t distinct = moe_ctx_make(&c, 2, n_out, n_in, per_slot, preview, LY_ROWS, &ex);
    char nm[96];
    snprintf(nm, sizeof nm, "%s (%zu experts)", name, distinct);
    const double t = layer_twice(nm, &c, (double)(distinct * ex), bw, 1);
    moe_ctx_free(&c);
    return t;
}

/* Two dense Q8_0 products of 32 rows through cuda_matmul_chunk_ws_pair (old line: its two calls; [few]: one
 * quantisation, one launch); n_out2 <= n_out. */
static double layer_dense_pair(const char *name, size_t n_out, size_t n_out2, size_t n_in, double bw) {
    const uint32_t type = QUANT_Q8_0;
    const size_t mat = quant_row_bytes(type, n_in) * n_out, rows = LY_ROWS;
    layer_ctx c = {.op = 7, .type = type, .mat = mat, .n_out = n_out, .n_out2 = n_out2, .n_in = n_in, .rows = rows};
    c.w = dev_weights(type, LY_COPIES * n_out, n_in);
    c.x = dev_floats(rows * n_in);
    CU(cudaMalloc((void **)&c.y, rows * n_out * sizeof(float)));
    CU(cudaMalloc((void **)&c.y2, rows * n_out2 * sizeof(float)));
    CU(cudaMalloc(&c.work, cuda_matmul_chunk_work_bytes(type, n_in, rows) + 256));
    const double t = layer_twice(name, &c, (double)quant_row_bytes(type, n_in) * (n_out + n_out2), bw, 1);
    CU(cudaFree((void *)c.w));
    CU(cudaFree((void *)c.x));
    CU(cudaFree(c.y));
    CU(cudaFree(c.y2));
    CU(cudaFree(c.work));
    return t;
}

/* The experts' gate + up of a layer through cuda_moe_chunk_pair (the old line: its two calls; [few]: one
 * grouping, one quantisation, one launch); bytes: both products' distinct experts. */
static double layer_moe_pair(const char *name, int preview, double bw) {
    layer_ctx c;
    size_t ex;
    const size_t distinct = moe_ctx_make(&c, 6, 512, 2048, 0, preview, LY_ROWS, &ex);
    char nm[96];
    snprintf(nm, sizeof nm, "%s (%zu experts)", name, distinct);
    const double t = layer_twice(nm, &c, (double)(2 * distinct * ex), bw, 1);
    moe_ctx_free(&c);
    return t;
}

static double layer_route(const char *name, int coreset) {
    layer_ctx c = {.op = coreset ? 3 : 4, .rows = LY_ROWS};
    c.x = dev_floats(LY_ROWS * LY_E); /* router logits in [-1, 1] */
    CU(cudaMalloc((void **)&c.allowed, LY_E));
    CU(cudaMalloc((void **)&c.kept, sizeof(uint32_t)));
    CU(cudaMemset(c.kept, 0, sizeof(uint32_t)));
    CU(cudaMalloc((void **)&c.ridx, LY_ROWS * LY_K * sizeof(int32_t)));
    CU(cudaMalloc((void **)&c.rw, LY_ROWS * LY_K * sizeof(float)));
    CU(cudaMalloc(&c.work, cuda_moe_coreset_work_bytes(LY_ROWS, LY_K) + 256));
    const double t = layer_op(name, &c, 0, 0);
    CU(cudaFree((void *)c.x));
    CU(cudaFree(c.allowed));
    CU(cudaFree(c.kept));
    CU(cudaFree(c.ridx));
    CU(cudaFree(c.rw));
    CU(cudaFree(c.work));
    return t;
}

static double layer_gdn_block(void) {
    const size_t rows = LY_ROWS, cdim = 8192;
    const size_t n = rows * cdim + rows * 4096 + rows * 32 + 3 * cdim + (size_t)32 * 128 * 128 + rows * 4096 + rows * cdim;
    layer_ctx c = {.op = 5, .rows = rows};
    c.x = dev_floats(cdim * 4); /* the weight vectors */
    c.y = dev_floats(n);        /* inputs, state, output, scratch */
    const double t = layer_op("gdn block operator (conv, l2, heads, norm)", &c, 0, 0);
    CU(cudaFree((void *)c.x));
    CU(cudaFree(c.y));
    return t;
}

static void bench_layer(double bw) {
    const uint32_t q8 = QUANT_Q8_0, f32 = QUANT_F32;
    double dense = 0, rt = 0, pv = 0, cm = 0, df = 0, pf = 0, cf = 0; /* df, pf, cf: the [few] lines */
    double pf_gu = 0, cf_gu = 0, df_pair = 0; /* the [few] lines the pairs replace */
    printf("one GDN layer of the 35B-A3B model at %d rows, each op in a CUDA graph over %d weight copies:\n", LY_ROWS,
           LY_COPIES);
    dense += layer_dense("dense q8_0 qkv 8192x2048 (chunk_ws)", q8, 8192, 2048, LY_ROWS, 0, bw); df += g_few_t;
    df_pair += g_few_t;
    dense += layer_dense("dense q8_0 z 4096x2048", q8, 4096, 2048, LY_ROWS, 0, bw); df += g_few_t;
    df_pair += g_few_t;
    dense += layer_dense("dense q8_0 alpha 32x2048", q8, 32, 2048, LY_ROWS, 0, bw); df += g_few_t;
    dense += layer_dense("dense q8_0 out 2048x4096", q8, 2048, 4096, LY_ROWS, 0, bw); df += g_few_t;
    dense += layer_dense("dense q8_0 shexp gate 512x2048", q8, 512, 2048, LY_ROWS, 0, bw); df += g_few_t;
    df_pair += g_few_t;
    dense += layer_dense("dense q8_0 shexp up 512x2048", q8, 512, 2048, LY_ROWS, 0, bw); df += g_few_t;
    df_pair += g_few_t;
    dense += layer_dense("dense q8_0 shexp down 2048x512", q8, 2048, 512, LY_ROWS, 0, bw); df += g_few_t;
    rt += layer_dense("router f32 256x2048 (4 decode x 8 rows)", f32, 256, 2048, LY_ROWS, 1, bw);
    rt += layer_dense("shexp gate logit f32 1x2048 (chunk)", f32, 1, 2048, LY_ROWS, 0, bw);
    const double tc = layer_route("coreset + routing inside it", 1), tr = layer_route("routing (no coreset)", 0);
    cuda_coreset_route_set(0); /* the two launches the fused form replaces, for the before / after */
    layer_route("coreset + routing inside it, two launches", 1);
    cuda_coreset_route_set(-1);
    const double tg = layer_gdn_block();
    pv += layer_moe("moe q4_K gate 512x2048, preview", 512, 2048, 0, 1, bw); pf += g_few_t; pf_gu += g_few_t;
    pv += layer_moe("moe q4_K up 512x2048, preview", 512, 2048, 0, 1, bw); pf += g_few_t; pf_gu += g_few_t;
    pv += layer_moe("moe q4_K down 2048x512, preview", 2048, 512, 1, 1, bw); pf += g_few_t;
    cm += layer_moe("moe q4_K gate 512x2048, commit", 512, 2048, 0, 0, bw); cf += g_few_t; cf_gu += g_few_t;
    cm += layer_moe("moe q4_K up 512x2048, commit", 512, 2048, 0, 0, bw); cf += g_few_t; cf_gu += g_few_t;
    cm += layer_moe("moe q4_K down 2048x512, commit", 2048, 512, 1, 0, bw); cf += g_few_t;
    printf("layer   sums: dense %.1f us, router + shexp logit %.1f us, coreset %.1f us (plain routing %.1f), gdn block "
           "%.1f us, experts preview %.1f us / commit %.1f us; a preview GDN layer's ops %.1f us (x40 = %.2f ms), a "
           "commit's products %.1f us (x40 = %.2f ms)\n",
           dense * 1e6, rt * 1e6, tc * 1e6, tr * 1e6, tg * 1e6, pv * 1e6, cm * 1e6, (dense + rt + tc + tg + pv) * 1e6,
           40 * (dense + rt + tc + tg + pv) * 1e3, (dense + rt + tr + cm) * 1e6, 40 * (dense + rt + tr + cm) * 1e3);
    double pp = 0, pc = 0, dp = 0; /* the pairs' [few] times */
    layer_dense_pair("dense q8_0 qkv+z pair 8192+4096x2048", 8192, 4096, 2048, bw);
    dp += g_few_t;
    layer_dense_pair("dense q8_0 shexp gate+up pair 512+512x2048", 512, 512, 2048, bw);
    dp += g_few_t;
    layer_moe_pair("moe q4_K gate+up pair, preview", 1, bw);
    pp = g_few_t;
    layer_moe_pair("moe q4_K gate+up pair, commit", 0, bw);
    pc = g_few_t;
    const double dfp = df - df_pair + dp; /* [few] dense with qkv+z and shexp gate+up as pairs */
    printf("layer   [few] with the pairs: dense %.1f us, experts preview %.1f us / commit %.1f us; a preview GDN "
           "layer's ops %.1f us (x40 = %.2f ms)\n",
           dfp * 1e6, (pf - pf_gu + pp) * 1e6, (cf - cf_gu + pc) * 1e6, (dfp + rt + tc + tg + pf - pf_gu + pp) * 1e6,
           40 * (dfp + rt + tc + tg + pf - pf_gu + pp) * 1e3);
    printf("layer   [few] sums: dense %.1f us, experts preview %.1f us / commit %.1f us; a preview GDN layer's ops "
           "%.1f us (x40 = %.2f ms), a commit's products %.1f us (x40 = %.2f ms)\n",
           df * 1e6, pf * 1e6, cf * 1e6, (df + rt + tc + tg + pf) * 1e6, 40 * (df + rt + tc + tg + pf) * 1e3,
           (df + rt + tr + cf) * 1e6, 40 * (df + rt + tr + cf) * 1e3);
    /* a prompt's products at 512 rows: matmul_igemm.cu's 16 x 32 kernels, then the wide 64 x 64 tile
     * (matmul_igemm_wide.cu, CLOVER_CUDA_IGEMM_WIDE), same bits; the switch is back as the environment set it */
    cuda_igemm_wide_set(0);
    layer_dense("dense q8_0 qkv 8192x2048 at 512 rows (prompt)", q8, 8192, 2048, 512, 0, bw);
    cuda_igemm_wide_set(1);
    layer_dense("dense q8_0 qkv 8192x2048 at 512 rows, WIDE", q8, 8192, 2048, 512, 0, bw);
    cuda_igemm_wide_set(0);
    layer_dense("dense q8_0 out 2048x4096 at 512 rows (prompt)", q8, 2048, 4096, 512, 0, bw);
    cuda_igemm_wide_set(1);
    layer_dense("dense q8_0 out 2048x4096 at 512 rows, WIDE", q8, 2048, 4096, 512, 0, bw);
    cuda_igemm_wide_set(0);
    layer_dense("dense q4_K 8192x2048 at 512 rows (prompt)", QUANT_Q4_K, 8192, 2048, 512, 0, bw);
    cuda_igemm_wide_set(1);
    cuda_igw_w16_set(0); /* the K-quant kernel in its 8-warp form, then its 16-warp one (the default), same bits */
    layer_dense("dense q4_K 8192x2048 at 512 rows, WIDE", QUANT_Q4_K, 8192, 2048, 512, 0, bw);
    cuda_igw_w16_set(1);
    layer_dense("dense q4_K 8192x2048 at 512 rows, WIDE w16", QUANT_Q4_K, 8192, 2048, 512, 0, bw);
    const char *wide_env = getenv("CLOVER_CUDA_IGEMM_WIDE");
    cuda_igemm_wide_set(!(wide_env && strcmp(wide_env, "0") == 0));
    cuda_igw_w16_set(-1);
    layer_dense("dense q8_0 z 4096x2048 at 2 rows", q8, 4096, 2048, 2, 0, bw);
}

/* ---- CLOVER_BENCH_X2: the X2 forms (cuda_ig_x2_set) off / on ---- */

/* The op's graph time over `copies` weight copies in each form: off, on, off, on, on at 2 and 3 stages; one line. */
static void x2_line(const char *name, layer_ctx *c, double bytes, double bw, size_t copies) {
    static const int forms[6] = {0, 1, 0, 1, 2, 3};
    double t[6];
    for (int f = 0; f < 6; f++) {
        cuda_ig_x2_set(forms[f]);
        t[f] = layer_time(c, copies);
    }
    cuda_ig_x2_set(-1);
    const double off = t[0] < t[2] ? t[0] : t[2], on = t[1] < t[3] ? t[1] : t[3];
    printf("x2   %-42s off %8.2f %8.2f | on %8.2f %8.2f | 2st %8.2f 3st %8.2f us | %7.1f MB off %5.0f GB/s "
           "(%4.1f%%) on %5.0f GB/s (%4.1f%%) | on/off %.3f\n",
           name, t[0] * 1e6, t[2] * 1e6, t[1] * 1e6, t[3] * 1e6, t[4] * 1e6, t[5] * 1e6, bytes * 1e-6,
           bytes / off / 1e9, 100 * bytes / off / 1e9 / bw, bytes / on / 1e9, 100 * bytes / on / 1e9 / bw, on / off);
}

/* A dense Q8_0 product (op 0), the shared expert's gate + up pair (op 7, n_out2) or the GDN inputs (op 8). */
static void x2_dense(const char *name, int op, size_t n_out, size_t n_out2, size_t n_in, size_t rows, size_t copies,
                     double bw) {
    const uint32_t type = QUANT_Q8_0;
    const size_t rb = quant_row_bytes(type, n_in), nw = op == 8 ? 8192 + 4096 + 32 + 32 : n_out, mat = rb * nw;
    layer_ctx c = {.op = op, .type = type, .mat = mat, .n_out = n_out, .n_out2 = n_out2, .n_in = n_in, .rows = rows};
    c.w = dev_weights(type, copies * nw, n_in);
    c.x = dev_floats(rows * n_in);
    CU(cudaMalloc((void **)&c.y, rows * nw * sizeof(float)));
    if (op == 7) CU(cudaMalloc((void **)&c.y2, rows * n_out2 * sizeof(float)));
    CU(cudaMalloc(&c.work, cuda_matmul_chunk_work_bytes(type, n_in, rows) + 256));
    x2_line(name, &c, (double)rb * (op == 7 ? n_out + n_out2 : nw), bw, copies);
    CU(cudaFree((void *)c.w));
    CU(cudaFree((void *)c.x));
    CU(cudaFree(c.y));
    if (c.y2) CU(cudaFree(c.y2));
    CU(cudaFree(c.work));
}

/* The grouped Q4_K experts of 32 rows (256 experts, k 8; a preview's routing: every row on the same 8, or a
 * commit's): the gate + up pair (op 6) or one product (op 2; the down: x a slot) */
static void x2_moe(const char *name, int op, size_t n_out, size_t n_in, int per_slot, int preview, double bw) {
    layer_ctx c;
    size_t ex;
    const size_t distinct = moe_ctx_make(&c, op, n_out, n_in, per_slot, preview, LY_ROWS, &ex);
    char nm[96];
    snprintf(nm, sizeof nm, "%s (%zu experts)", name, distinct);
    x2_line(nm, &c, (double)((op == 6 ? 2 : 1) * distinct * ex), bw, LY_COPIES);
    moe_ctx_free(&c);
}

static void bench_x2(double bw) {
    printf("X2 forms (two chunks a ring stage) off / on, 35B-A3B shapes at %d rows unless said, graphs over weight "
           "copies:\n",
           LY_ROWS);
    x2_dense("dense q8_0 out 2048x4096", 0, 2048, 0, 4096, 32, LY_COPIES, bw);
    x2_dense("dense q8_0 out 2048x4096, 16 rows", 0, 2048, 0, 4096, 16, LY_COPIES, bw);
    x2_dense("dense q8_0 out 2048x4096, 8 rows", 0, 2048, 0, 4096, 8, LY_COPIES, bw);
    x2_dense("gdn qkv+z+alpha+beta (8192+4096+32+32)x2048", 8, 0, 0, 2048, 32, LY_COPIES, bw);
    x2_dense("shexp gate+up pair 512+512x2048", 7, 512, 512, 2048, 32, LY_COPIES, bw);
    x2_dense("shexp down 2048x512", 0, 2048, 0, 512, 32, LY_COPIES, bw);
    x2_moe("moe q4_K gate+up pair, preview", 6, 512, 2048, 0, 1, bw);
    x2_moe("moe q4_K gate+up pair, commit", 6, 512, 2048, 0, 0, bw);
    x2_moe("moe q4_K down 2048x512, preview", 2, 2048, 512, 1, 1, bw);
    x2_moe("moe q4_K down 2048x512, commit", 2, 2048, 512, 1, 0, bw);
    x2_dense("head 248320x2048 (2 copies)", 0, 248320, 0, 2048, 32, 2, bw);
}

/* ---- CLOVER_BENCH_TILES: the grouped experts' tile loop (cuda_moe_tile_loop_set) off / on ---- */

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The grouped Q4_K experts at rows rows (preview: every row on the same 8 of 256; else random, ~160 experts at 32
 * rows, ~100 at 16), op 6 (the gate + up pair, 512 x 2048 each) or 2 (the down 2048 x 512, x a slot): graph times
 * over the weight copies with the loop off and on alternating TILES_REPS times, the medians and on/off; then, if
 * CLOVER_BENCH_TILES_CAPS=N,M,... is set, the loop at each cap forced (cuda_moe_tile_cap_set), medians of 3. */
static void tiles_line(const char *name, int op, int preview, size_t rows, double bw) {
    enum { TILES_REPS = 5 };
    layer_ctx c;
    size_t ex;
    const int down = op == 2;
    const size_t distinct = moe_ctx_make(&c, op, down ? 2048 : 512, down ? 512 : 2048, down, preview, rows, &ex);
    const double bytes = (double)((down ? 1 : 2) * distinct * ex);
    double t[2][TILES_REPS];
    for (int r = 0; r < TILES_REPS; r++)
        for (int on = 0; on < 2; on++) {
            cuda_moe_tile_loop_set(on);
            t[on][r] = layer_time(&c, LY_COPIES);
        }
    const double off = median(t[0], TILES_REPS), on = median(t[1], TILES_REPS);
    char nm[96];
    snprintf(nm, sizeof nm, "%s (%zu rows, %zu experts)", name, rows, distinct);
    printf("tiles %-46s off %8.2f | on %8.2f us (medians of %d) | %6.1f MB off %5.0f GB/s on %5.0f GB/s (%4.1f%% of "
           "copy bw) | on/off %.3f\n",
           nm, off * 1e6, on * 1e6, TILES_REPS, bytes * 1e-6, bytes / off / 1e9, bytes / on / 1e9,
           100 * bytes / on / 1e9 / bw, on / off);
    const char *caps = getenv("CLOVER_BENCH_TILES_CAPS");
    for (const char *q = caps; q && *q;) {
        const int cap = atoi(q);
        if (cap > 0) {
            double tc[3];
            cuda_moe_tile_loop_set(1);
            cuda_moe_tile_cap_set(cap);
            for (int r = 0; r < 3; r++) tc[r] = layer_time(&c, LY_COPIES);
            const double m = median(tc, 3);
            printf("tiles %-46s cap %4d  %8.2f us | on/off %.3f\n", nm, cap, m * 1e6, m / off);
        }
        q = strchr(q, ',');
        if (q) q++;
    }
    cuda_moe_tile_cap_set(-1);
    cuda_moe_tile_loop_set(-1);
    moe_ctx_free(&c);
}

/* CLOVER_BENCH_TILES_SWEEP=1: the 16-row AR step's grouped experts at exactly D distinct experts (slot s of the
 * 128 on the D-list's entry s % D: each row's 8 ids distinct, every expert <= 8 slots, so D tiles), D across the
 * tile loop's grid (3 blocks an SM on 132 SMs: the pair's grid.y 99, 8 blocks a tile; the down's 50, 16 a tile):
 * the time at each D, its step from the D before, and the time a tile. Why: wr45's AR step ran ~100-110 tiles a
 * layer, so ~2.1 waves of the pair's blocks; if the last partial wave runs at a lone block's latency-bound pace,
 * the time steps up just past 99 (a staircase), where a bandwidth-bound product grows in proportion to D. */
static void bench_tiles_sweep(double bw) {
    static const size_t ds[] = {64, 80, 90, 96, 98, 99, 100, 101, 102, 104, 108, 112, 120, 128};
    enum { ROWS = 16, REPS = 5 };
    printf("grouped experts at exactly D experts, 16 rows x top-%d, graphs over %d weight copies, medians of %d:\n",
           LY_K, LY_COPIES, REPS);
    for (int down = 0; down < 2; down++) {
        layer_ctx c;
        size_t ex;
        const int op = down ? 2 : 6;
        (void)moe_ctx_make(&c, op, down ? 2048 : 512, down ? 512 : 2048, down, 0, ROWS, &ex);
        double prev = 0;
        for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
            const size_t D = ds[i];
            int32_t ids_h[ROWS * LY_K];
            for (size_t sl = 0; sl < ROWS * LY_K; sl++) ids_h[sl] = (int32_t)((37 * (sl % D) + 11) % LY_E);
            CU(cudaMemcpy((void *)c.moe.ids, ids_h, sizeof ids_h, cudaMemcpyHostToDevice));
            double t[REPS];
            for (int r = 0; r < REPS; r++) t[r] = layer_time(&c, LY_COPIES);
            const double m = median(t, REPS), bytes = (double)((down ? 1 : 2) * D * ex);
            printf("sweep %-5s D %3zu  %8.2f us  step %+7.2f us  %6.3f us a tile | %6.1f MB %5.0f GB/s (%4.1f%% of "
                   "copy bw)\n",
                   down ? "down" : "pair", D, m * 1e6, prev > 0 ? (m - prev) * 1e6 : 0.0, m * 1e6 / (double)D,
                   bytes * 1e-6, bytes / m / 1e9, 100 * bytes / m / 1e9 / bw);
            prev = m;
        }
        moe_ctx_free(&c);
    }
}

static void bench_tiles(double bw) {
    printf("grouped experts' tile loop off / on (grid.y the worst-case tile count / ~2 waves of blocks), 35B-A3B "
           "shapes, graphs over %d weight copies:\n",
           LY_COPIES);
    tiles_line("moe q4_K gate+up pair, preview", 6, 1, LY_ROWS, bw);
    tiles_line("moe q4_K down 2048x512, preview", 2, 1, LY_ROWS, bw);
    tiles_line("moe q4_K gate+up pair, commit", 6, 0, LY_ROWS, bw);
    tiles_line("moe q4_K down 2048x512, commit", 2, 0, LY_ROWS, bw);
    tiles_line("moe q4_K gate+up pair, AR step", 6, 0, 16, bw);
    tiles_line("moe q4_K down 2048x512, AR step", 2, 0, 16, bw);
}

/* CLOVER_BENCH_STREAM32=1: the dense Q8_0 products of the 35B-A3B model at 8..32 rows in the chunk form (with
 * scratch) and the stream form of 9..32 rows (matmul_mmv_stream32.cu), the weights rotated among copies as in
 * bench_chunk; at 8 rows the decode form (the 1..8-row stream) instead of the stream32 figure. One line a
 * (product, rows): both times and the stream form's weight bandwidth. */
static void bench_stream32_one(const char *name, size_t n_out, size_t n_in, size_t rows, double bw) {
    enum { MAXW = 32 };
    const uint32_t type = QUANT_Q8_0;
    const size_t wbytes = quant_row_bytes(type, n_in) * n_out;
    void *w[MAXW];
    const size_t nw = rotated_weights(type, n_out, n_in, w, MAXW);
    float *x = dev_floats(rows * n_in), *y = NULL;
    CU(cudaMalloc((void **)&y, rows * n_out * sizeof(float)));
    size_t wb = cuda_matmul_chunk_work_bytes(type, n_in, rows), sb = cuda_matmul_stream_work_bytes(type, n_in, rows),
           db = cuda_matmul_decode_work_bytes(type, n_in, 8);
    if (sb > wb) wb = sb;
    if (db > wb) wb = db;
    void *work = NULL;
    CU(cudaMalloc(&work, wb + 256));
    char why[256];
    double t[2] = {0, 0};
    for (int form = 0; form < 2; form++) {
#define S32(W)                                                                                                     \
    (form == 0 ? cuda_matmul_chunk_ws(type, (W), n_out, n_in, x, rows, y, work, NULL, why, sizeof why)             \
     : rows <= 8 ? cuda_matmul_decode(type, (W), n_out, n_in, x, rows, y, work, NULL, why, sizeof why)            \
                 : cuda_matmul_stream(type, (W), n_out, n_in, x, rows, y, work, NULL, why, sizeof why))
        for (size_t i = 0; i < nw; i++)
            if (S32(w[i])) fail(why);
        const int reps = g_quick ? 1 : 4 * (int)nw;
        CU(cudaEventRecord(ev0, 0));
        for (int r = 0; r < reps; r++) S32(w[r % nw]);
#undef S32
        CU(cudaEventRecord(ev1, 0));
        t[form] = elapsed_s() / reps;
    }
    const double gbs = (double)wbytes / t[1] / 1e9;
    printf("s32 %-10s %6zu x %-5zu rows %2zu: chunk %8.2f us | %s %8.2f us  %5.0f GB/s (%5.1f%% of copy)%s\n", name,
           n_out, n_in, rows, t[0] * 1e6, rows <= 8 ? "decode  " : "stream32", t[1] * 1e6, gbs, 100.0 * gbs / bw,
           rows > 8 && !cuda_matmul_stream_takes(type, n_in, rows) ? " (backend: chunk)" : "");
    for (size_t i = 0; i < nw; i++) CU(cudaFree(w[i]));
    CU(cudaFree(work));
    CU(cudaFree(x));
    CU(cudaFree(y));
}

static void bench_stream32(double bw) {
    static const struct {
        const char *name;
        size_t n_out, n_in;
    } P[] = {{"gdn qkv", 8192, 2048}, {"gdn z", 4096, 2048}, {"gdn out", 2048, 4096}, {"attn q", 8192, 2048},
             {"attn k", 512, 2048},   {"attn o", 2048, 4096}, {"shexp up", 512, 2048}, {"shexp down", 2048, 512},
             {"head", 248320, 2048}};
    static const size_t R[] = {8, 12, 16, 24, 32};
    const char *only = getenv("CLOVER_BENCH_STREAM32_ONLY"); /* a product's name: that one (ncu) */
    const char *only_rows = getenv("CLOVER_BENCH_STREAM32_ROWS");
    cuda_mmv_stream32_set(1);
    for (size_t p = 0; p < sizeof P / sizeof P[0]; p++) {
        if (only && strcmp(only, P[p].name) != 0) continue;
        for (size_t r = 0; r < sizeof R / sizeof R[0]; r++) {
            if (only && only_rows && (size_t)atoi(only_rows) != R[r]) continue;
            bench_stream32_one(P[p].name, P[p].n_out, P[p].n_in, R[r], bw);
        }
    }
}

/* CLOVER_BENCH_MMAROWS=1: the dense Q8_0 products of the 35B-A3B model at 1, 2, 4, 8, 16 and 32 rows in three forms:
 * the dp4a decode form (<= 8 rows), the chunk form (cuda_matmul_chunk_ws, matmul_igemm.cu) and the same call with
 * the few-row form of the weights as the mma A operand on (matmul_mma_rows.cu, cuda_mma_rows_set(32)); each
 * launch on a weight copy of its own (>= 256 MB rotated: none from L2), back to back on one stream.
 * CLOVER_BENCH_MMAROWS_ONLY=NAME and _ROWS=N: one product at one row count (ncu). */
static void bench_mma_rows_one(const char *name, size_t n_out, size_t n_in, size_t rows, double bw) {
    enum { MAXW = 64 };
    const uint32_t type = QUANT_Q8_0;
    const size_t wbytes = quant_row_bytes(type, n_in) * n_out;
    void *w[MAXW];
    const size_t nw = rotated_weights(type, n_out, n_in, w, MAXW);
    float *x = dev_floats(rows * n_in), *y = NULL;
    CU(cudaMalloc((void **)&y, rows * n_out * sizeof(float)));
    size_t wb = cuda_matmul_chunk_work_bytes(type, n_in, rows), db = cuda_matmul_decode_work_bytes(type, n_in, 8);
    if (db > wb) wb = db;
    void *work = NULL;
    CU(cudaMalloc(&work, wb + 256));
    char why[256];
    double t[3] = {0, 0, 0}; /* decode, chunk, mma */
    for (int form = 0; form < 3; form++) {
        if (form == 0 && rows > 8) continue;
        cuda_mma_rows_set(form == 2 ? 32 : 0);
#define MR(W)                                                                                                      \
    (form == 0 ? cuda_matmul_decode(type, (W), n_out, n_in, x, rows, y, work, NULL, why, sizeof why)              \
               : cuda_matmul_chunk_ws(type, (W), n_out, n_in, x, rows, y, work, NULL, why, sizeof why))
        for (size_t i = 0; i < nw; i++)
            if (MR(w[i])) fail(why);
        const int reps = g_quick ? 1 : 4 * (int)nw;
        CU(cudaEventRecord(ev0, 0));
        for (int r = 0; r < reps; r++) MR(w[r % nw]);
#undef MR
        CU(cudaEventRecord(ev1, 0));
        t[form] = elapsed_s() / reps;
    }
    cuda_mma_rows_set(-1);
    const double gbs = (double)wbytes / t[2] / 1e9;
    char dec[32] = "       -";
    if (rows <= 8) snprintf(dec, sizeof dec, "%8.2f", t[0] * 1e6);
    printf("mma %-10s %6zu x %-5zu rows %2zu: decode %s us | chunk %8.2f us | mma %8.2f us  %5.0f GB/s (%5.1f%% of "
           "copy)\n",
           name, n_out, n_in, rows, dec, t[1] * 1e6, t[2] * 1e6, gbs, 100.0 * gbs / bw);
    for (size_t i = 0; i < nw; i++) CU(cudaFree(w[i]));
    CU(cudaFree(work));
    CU(cudaFree(x));
    CU(cudaFree(y));
}

static void bench_mma_rows(double bw) {
    static const struct {
        const char *name;
        size_t n_out, n_in;
    } P[] = {{"gdn qkv", 8192, 2048}, {"gdn z", 4096, 2048}, {"gdn out", 2048, 4096}, {"attn k", 512, 2048},
             {"shexp up", 512, 2048}, {"shexp down", 2048, 512}, {"head", 248320, 2048}};
    static const size_t R[] = {1, 2, 4, 8, 16, 32};
    const char *only = getenv("CLOVER_BENCH_MMAROWS_ONLY");
    const char *only_rows = getenv("CLOVER_BENCH_MMAROWS_ROWS");
    for (size_t p = 0; p < sizeof P / sizeof P[0]; p++) {
        if (only && strcmp(only, P[p].name) != 0) continue;
        for (size_t r = 0; r < sizeof R / sizeof R[0]; r++) {
            if (only_rows && (size_t)atoi(only_rows) != R[r]) continue;
            bench_mma_rows_one(P[p].name, P[p].n_out, P[p].n_in, R[r], bw);
        }
    }
}

/* CLOVER_BENCH_ROWS32=1: the dense Q8_0 products of the 35B-A3B model (and the 1024 / 12288 shapes) at 8, 16
 * and 32 rows, cuda_matmul_chunk_ws (its quantiser launch + the product) with the K-split cluster form
 * (matmul_q8_rows32.cu, CLOVER_CUDA_Q8_ROWS32) off and on, alternating twice; each timed in a CUDA graph over >= 64 MB
 * of rotated weight copies (none from L2), the best of the two runs of each form. GB/s: the weight bytes over the
 * time; the floor: those bytes at the copy bandwidth. CLOVER_BENCH_ROWS32_ONLY=NAME and _ROWS=N: one (ncu). */
typedef struct r32_ctx {
    size_t n_out, n_in, rows, nw;
    void **w;
    const float *x;
    float *y;
    void *work;
} r32_ctx;

static void r32_body(void *ctx, size_t i, cudaStream_t st) {
    const r32_ctx *c = ctx;
    char why[256];
    if (cuda_matmul_chunk_ws(QUANT_Q8_0, c->w[i % c->nw], c->n_out, c->n_in, c->x, c->rows, c->y, c->work, st, why,
                             sizeof why))
        fail(why);
}

static void bench_rows32_one(const char *name, size_t n_out, size_t n_in, size_t rows, double bw) {
    enum { MAXW = 64 };
    const size_t wbytes = quant_row_bytes(QUANT_Q8_0, n_in) * n_out;
    void *w[MAXW];
    size_t nw = (64u << 20) / wbytes + 1;
    if (nw > MAXW) nw = MAXW;
    if (g_quick) nw = 1;
    for (size_t i = 0; i < nw; i++) w[i] = dev_weights(QUANT_Q8_0, n_out, n_in);
    r32_ctx c = {n_out, n_in, rows, nw, w, dev_floats(rows * n_in), NULL, NULL};
    CU(cudaMalloc((void **)&c.y, rows * n_out * sizeof(float)));
    CU(cudaMalloc(&c.work, cuda_matmul_chunk_work_bytes(QUANT_Q8_0, n_in, rows) + 256));
    double t[2] = {1e30, 1e30};
    const size_t n = nw < 8 ? 8 : nw;
    for (int rep = 0; rep < 2; rep++)
        for (int on = 0; on < 2; on++) {
            cuda_q8_rows32_set(on);
            const double v = graph_time(r32_body, &c, n);
            if (v < t[on]) t[on] = v;
        }
    cuda_q8_rows32_set(-1);
    const double g0 = (double)wbytes / t[0] / 1e9, g1 = (double)wbytes / t[1] / 1e9;
    printf("r32 %-10s %6zu x %-5zu rows %2zu: off %8.2f us %5.0f GB/s (%4.1f%%) | on %8.2f us %5.0f GB/s (%4.1f%%) | "
           "floor %7.2f us | on/off %.2fx\n",
           name, n_out, n_in, rows, t[0] * 1e6, g0, 100.0 * g0 / bw, t[1] * 1e6, g1, 100.0 * g1 / bw,
           (double)wbytes / bw / 1e3, t[0] / t[1]);
    for (size_t i = 0; i < nw; i++) CU(cudaFree(w[i]));
    CU(cudaFree(c.work));
    CU(cudaFree((void *)c.x));
    CU(cudaFree(c.y));
}

static void bench_rows32(double bw) {
    static const struct {
        const char *name;
        size_t n_out, n_in;
    } P[] = {{"gdn qkv", 8192, 2048},    {"gdn z", 4096, 2048},   {"gdn out", 2048, 4096}, {"attn k", 512, 2048},
             {"shexp up", 512, 2048},    {"shexp down", 2048, 512}, {"n1024", 1024, 2048}, {"n12288", 12288, 2048},
             {"head", 248320, 2048}};
    static const size_t R[] = {8, 16, 32};
    const char *only = getenv("CLOVER_BENCH_ROWS32_ONLY");
    const char *only_rows = getenv("CLOVER_BENCH_ROWS32_ROWS");
    for (size_t p = 0; p < sizeof P / sizeof P[0]; p++) {
        if (only && strcmp(only, P[p].name) != 0) continue;
        for (size_t r = 0; r < sizeof R / sizeof R[0]; r++) {
            if (only_rows && (size_t)atoi(only_rows) != R[r]) continue;
            bench_rows32_one(P[p].name, P[p].n_out, P[p].n_in, R[r], bw);
        }
    }
}

typedef struct exact_ctx {
    const float *w, *x;
    float *y, *y2;
    size_t rows;
} exact_ctx;
enum { EXACT_COPIES = 40, EXACT_OUT = 256, EXACT_IN = 2048 };

static void exact_body(void *ctx, size_t i, cudaStream_t st) {
    const exact_ctx *c = ctx;
    const float *w = c->w + (i % EXACT_COPIES) * (size_t)(EXACT_OUT + 1) * EXACT_IN;
    const cuda_matmul_seg seg[2] = {{w, EXACT_OUT, c->y}, {w + (size_t)EXACT_OUT * EXACT_IN, 1, c->y2}};
    char why[256] = "";
    if (cuda_matmul_exact_multi(QUANT_F32, seg, 2, EXACT_IN, c->x, c->rows, st, why, sizeof why))
        fprintf(stderr, "%s\n", why);
}

static void bench_exact(void) {
    const size_t rows[] = {4, 8, 16, 32, 64, 128, 512};
    exact_ctx c = {.w = dev_floats((size_t)EXACT_COPIES * (EXACT_OUT + 1) * EXACT_IN), .x = dev_floats(512 * EXACT_IN)};
    CU(cudaMalloc((void **)&c.y, 512 * EXACT_OUT * sizeof(float)));
    CU(cudaMalloc((void **)&c.y2, 512 * sizeof(float)));
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        c.rows = rows[i];
        double best[3] = {1e9, 1e9, 1e9};
        const int order[5] = {0, 2, 0, 2, 1}; /* rows, tiles, again, row blocks */
        for (int k = 0; k < 5; k++) {
            const int f = order[k];
            cuda_exact_tile_set(f == 2);
            cuda_exact_rb_set(f == 1);
            const double t = graph_time(exact_body, &c, EXACT_COPIES);
            if (t < best[f]) best[f] = t;
        }
        printf("exact   f32 router 257x2048 rows %3zu: warp an output %7.2f us | row blocks %7.2f us | register tiles "
               "%7.2f us | rows / tiles %.2fx\n",
               rows[i], best[0] * 1e6, best[1] * 1e6, best[2] * 1e6, best[0] / best[2]);
    }
    cuda_exact_tile_set(-1);
    cuda_exact_rb_set(-1);
    CU(cudaFree((void *)c.w));
    CU(cudaFree((void *)c.x));
    CU(cudaFree(c.y));
    CU(cudaFree(c.y2));
}

int main(void) {
    cuda_device_info info;
    const int found = bench_cuda_device("bench_cuda_matmul", &info);
    if (found) return found;
    CU(cudaEventCreate(&ev0));
    CU(cudaEventCreate(&ev1));
    const double bw = copy_bandwidth();
    printf("device: %s, %d SMs, %.1f GiB; copy bandwidth %.0f GB/s (floor); peer llama.cpp tg %.0f GB/s eff.\n",
           info.name, info.sm_count, info.total_bytes / 1073741824.0, bw, PEER_GBS);
    const char *qe = getenv("CLOVER_BENCH_QUICK");
    g_quick = qe && strcmp(qe, "1") == 0;
    const char *s32 = getenv("CLOVER_BENCH_STREAM32");
    if (s32 && strcmp(s32, "1") == 0) {
        bench_stream32(bw);
        return 0;
    }
    const char *r32 = getenv("CLOVER_BENCH_ROWS32");
    if (r32 && strcmp(r32, "1") == 0) {
        bench_rows32(bw);
        return 0;
    }
    const char *mr = getenv("CLOVER_BENCH_MMAROWS");
    if (mr && strcmp(mr, "1") == 0) {
        bench_mma_rows(bw);
        return 0;
    }
    const char *mf = getenv("CLOVER_BENCH_MOEFAST");
    if (mf && strcmp(mf, "1") == 0) {
        bench_moe_fast(bw);
        return 0;
    }
    const char *x2 = getenv("CLOVER_BENCH_X2");
    if (x2 && strcmp(x2, "1") == 0) {
        bench_x2(bw);
        return 0;
    }
    const char *tsw = getenv("CLOVER_BENCH_TILES_SWEEP");
    if (tsw && strcmp(tsw, "1") == 0) {
        bench_tiles_sweep(bw);
        return 0;
    }
    const char *ti = getenv("CLOVER_BENCH_TILES");
    if (ti && strcmp(ti, "1") == 0) {
        bench_tiles(bw);
        return 0;
    }
    const char *ex = getenv("CLOVER_BENCH_EXACT");
    if (ex && strcmp(ex, "1") == 0) {
        bench_exact();
        return 0;
    }
    const char *le = getenv("CLOVER_BENCH_LAYER");
    if (le && strcmp(le, "1") == 0) {
        bench_layer(bw);
        return 0;
    }
    const uint32_t types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_F16, QUANT_BF16, QUANT_F32};
    for (size_t i = 0; i < sizeof types / sizeof types[0] && !g_quick; i++) {
        bench_decode(types[i], 4096, 2048, 1, bw);
        bench_decode(types[i], 4096, 2048, 8, bw);
    }
    if (!g_quick) {
        bench_decode(QUANT_Q8_0, 248320 / 4, 2048, 1, bw); /* a quarter of the output head */
        bench_multi(bw);
        bench_moe_decode(QUANT_Q4_K, 256, 512, 2048, 8, 1, bw);
        bench_moe_decode(QUANT_Q4_K, 256, 2048, 512, 8, 1, bw);
        bench_moe_decode(QUANT_Q4_K, 256, 512, 2048, 8, 8, bw);
    }
    const size_t chunk_rows[] = {2, 8, 32, 128, 512};
    for (size_t i = 0; i < sizeof chunk_rows / sizeof chunk_rows[0]; i++) {
        bench_chunk(QUANT_Q8_0, 4096, 2048, chunk_rows[i], bw, 1);
        bench_chunk(QUANT_Q4_K, 4096, 2048, chunk_rows[i], bw, 1);
    }
    bench_chunk(QUANT_Q8_0, 4096, 2048, 32, bw, 0); /* no scratch: rows made in each block */
    bench_chunk(QUANT_Q5_K, 4096, 2048, 32, bw, 1);
    bench_chunk(QUANT_Q6_K, 4096, 2048, 32, bw, 1);
    bench_chunk(QUANT_Q8_0, 2048, 4096, 32, bw, 1);
    bench_chunk(QUANT_Q8_0, 12288, 2048, 32, bw, 1);
    bench_chunk(QUANT_F16, 4096, 2048, 512, bw, 0);
    bench_moe_chunk(QUANT_Q4_K, 256, 512, 2048, 8, 32, bw);
    bench_moe_chunk(QUANT_Q4_K, 256, 512, 2048, 8, 512, bw);
    return 0;
}
