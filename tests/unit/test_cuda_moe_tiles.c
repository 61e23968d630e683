/*
 * test_cuda_moe_tiles.c: the tile loop of the grouped integer kernel's WIDE tiles (matmul_igemm.cu's igemm_kernel;
 * CLOVER_CUDA_MOE_TILE_LOOP / cuda_moe_tile_loop_set, the cap on grid.y cuda_moe_tile_cap_set) against the full grid
 * of one tile a block, bit for bit (memcmp), and the full grid's bits against the CPU's integer oracle
 * (quant_act_quantize_scalar + quant_act_dot_scalar, <= 1e-5 normalised):
 *  - Q4_K and Q5_K experts through cuda_moe_chunk and cuda_moe_chunk_pair (the pair in one launch, grid.z the
 *    product, and as two launches); Q8_0 and Q6_K WIDE tiles once each;
 *  - 32 rows x top-8 routed to only 4, 6 or 8 of 256 experts (a preview's coreset: few real tiles of 288), 32 rows
 *    routed uniformly over 256 experts (~200 tiles: more than the cap, so blocks walk 2+ tiles), 16 rows x top-8 over
 *    100 experts (the stacked AR step), 1 and 3 rows; n_in 512 / 2048, n_out 512 / 2048 / 200, x a row or a slot;
 *  - each against the loop at the cap by shape, at caps 3 and 1 forced (every block walks several tiles, or one
 *    block row all of them), with the X2 forms (the form's own stages at cap 3; 3 stages at the cap by shape), with
 *    the K2 sums off (cap 2), and with W3 (cuda_ig_w3_set: Q4_K's tiles at three blocks an SM on a 3-stage ring; at
 *    the cap by shape and at cap 3, and AUTO, which leaves a preview's launches alone: the preview routing's cases
 *    are flagged preview), and with WR (cuda_ig_wr_set: a ring per warp in place of W3's launch; at the cap by shape,
 *    at cap 1, and under W3's AUTO at cap 3); the launches with a cut grid counted
 *    (cuda_moe_tile_loop_launches), and W3's (cuda_ig_w3_launches: every Q4_K launch of a W3 form takes it, AUTO
 *    only outside a preview, no other type's, none where WR takes them), and WR's (cuda_ig_wr_launches);
 *  - a CUDA graph captured with the loop on (its first launches, the occupancy query inside the capture) replayed on
 *    two routings of different tile counts: the eager full grid's bits for each (a fixed grid whatever the tiles).
 * Outputs poisoned (NaN) before every run and checked fully written. CLOVER_TEST_SMALL=1: a few cases (for
 * compute-sanitizer). No device: exit 77 (skip).
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

#define CUDA_MATMUL_TEST_SEED 0x5851F42D4C957F2Dull
#include "cuda_matmul_test.h"

static int g_small; /* CLOVER_TEST_SMALL=1 */
enum { POOL = 13, WIDE_TILE = 8, BO = 128 }; /* distinct weight matrices; a WIDE tile's slots; a block's outputs */

/* the forms against the full grid (loop off, X2 off, K2 on, W3 off, WR off): loop on/off, the cap forced (0: by
 * shape), X2 as cuda_ig_x2_set takes it, K2, W3 as cuda_ig_w3_set takes it (0 off, 1 all, 2 AUTO), WR */
typedef struct form {
    const char *name;
    int loop, cap, x2, k2, w3, wr;
} form;
static const form FORMS[] = {
    {"loop", 1, 0, 0, 1, 0, 0},
    {"loop cap 3", 1, 3, 0, 1, 0, 0},
    {"loop cap 1", 1, 1, 0, 1, 0, 0},
    {"loop cap 3, X2", 1, 3, 1, 1, 0, 0},
    {"loop, X2 3 stages", 1, 0, 3, 1, 0, 0},
    {"loop cap 2, K2 off", 1, 2, 0, 0, 0, 0},
    {"loop, W3", 1, 0, 0, 1, 1, 0},
    {"loop cap 3, W3", 1, 3, 0, 1, 1, 0},
    {"loop, W3 auto", 1, 0, 0, 1, 2, 0},
    {"loop, WR", 1, 0, 0, 1, 1, 1},
    {"loop cap 1, WR", 1, 1, 0, 1, 1, 1},
    {"loop cap 3, W3 auto, WR", 1, 3, 0, 1, 2, 1},
};
enum { N_FORMS = sizeof FORMS / sizeof FORMS[0] };
static const form REF = {"full grid", 0, 0, 0, 1, 0, 0};
static void form_set(const form *f) {
    cuda_moe_tile_loop_set(f->loop);
    cuda_moe_tile_cap_set(f->cap);
    cuda_ig_x2_set(f->x2);
    cuda_ig_k2_set(f->k2);
    cuda_ig_w3_set(f->w3);
    cuda_ig_wr_set(f->wr);
}
static void forms_reset(void) {
    cuda_moe_tile_loop_set(-1);
    cuda_moe_tile_cap_set(-1);
    cuda_ig_x2_set(-1);
    cuda_ig_k2_set(-1);
    cuda_ig_w3_set(-1);
    cuda_ig_wr_set(-1);
}

/* Whether a launch of the grouping pass's worst case of max_tiles tiles on per = grid.x * grid.z blocks a tile row
 * gets a cut grid under form f: 1 yes, 0 no, -1 either (by shape: ceil(2 * SMs * blocks an SM / per), blocks an SM
 * 1 or 2 at ~100-170 KB of shared memory a block, 3 under W3). */
static int cut(const form *f, size_t max_tiles, size_t per) {
    if (!f->loop) return 0;
    if (f->cap > 0) return (size_t)f->cap < max_tiles;
    const size_t sms = (size_t)cuda_sm_count(), hi = ((f->w3 ? 6 : 4) * sms + per - 1) / per,
                 lo = (2 * sms + per - 1) / per;
    return hi < max_tiles ? 1 : lo >= max_tiles ? 0 : -1;
}

/* One case's buffers: POOL weight matrices of n_out rows as experts e % POOL (the up's expert e: e + 1's), routing,
 * rows, outputs. */
typedef struct moe_set {
    uint32_t type;
    size_t n_rows, k, n_expert, n_in, n_out, n_slots, n_x, rb, ex;
    uint8_t *w;   /* host: POOL matrices */
    float *x;     /* host: n_x rows */
    int32_t *ids; /* host: n_slots */
    cuda_moe_args a;
    const void *w_up;
    float *dy, *dyu;
    void *work;
} moe_set;

/* ids of n_rows rows x k: nd > 0, the pool of nd experts 37 i + 5 (mod n_expert), row r's slot j on pool[(r + j) %
 * nd] (nd < k: a row's slots repeat an expert, as the grouping allows); nd == 0, k distinct random experts a row */
static void make_routing(int32_t *ids, size_t n_rows, size_t k, size_t n_expert, size_t nd) {
    for (size_t r = 0; r < n_rows; r++)
        for (size_t j = 0; j < k; j++) {
            if (nd) {
                ids[r * k + j] = (int32_t)((37 * ((r + j) % nd) + 5) % n_expert);
                continue;
            }
            int dup;
            do {
                ids[r * k + j] = (int32_t)(urand() * (double)n_expert) % (int32_t)n_expert;
                dup = 0;
                for (size_t i = 0; i < j; i++) dup |= ids[r * k + i] == ids[r * k + j];
            } while (dup);
        }
}

static void set_make(moe_set *m, uint32_t type, size_t n_rows, size_t k, size_t n_expert, size_t nd, size_t n_in,
                     size_t n_out, int x_per_slot) {
    *m = (moe_set){.type = type, .n_rows = n_rows, .k = k, .n_expert = n_expert, .n_in = n_in, .n_out = n_out};
    m->n_slots = n_rows * k;
    m->n_x = x_per_slot ? m->n_slots : n_rows;
    m->w = make_weights(type, POOL * n_out, n_in, &m->rb);
    m->ex = n_out * m->rb;
    m->x = malloc(m->n_x * n_in * sizeof(float));
    fill(m->x, m->n_x * n_in, 2.0);
    m->ids = malloc(m->n_slots * sizeof(int32_t));
    make_routing(m->ids, n_rows, k, n_expert, nd);
    uint8_t *dw = NULL;
    float *dx = NULL;
    int32_t *dids = NULL;
    CU(cudaMalloc((void **)&dw, (n_expert + 1) * m->ex)); /* + 1: the up starts one expert on */
    for (size_t e = 0; e <= n_expert; e++)
        CU(cudaMemcpy(dw + e * m->ex, m->w + (e % POOL) * m->ex, m->ex, cudaMemcpyHostToDevice));
    CU(cudaMalloc((void **)&dx, m->n_x * n_in * sizeof(float)));
    CU(cudaMemcpy(dx, m->x, m->n_x * n_in * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMalloc((void **)&dids, m->n_slots * sizeof(int32_t)));
    CU(cudaMemcpy(dids, m->ids, m->n_slots * sizeof(int32_t), cudaMemcpyHostToDevice));
    m->a = (cuda_moe_args){.type = type, .w = dw, .expert_stride = m->ex, .n_expert = n_expert, .n_out = n_out,
                           .n_in = n_in, .ids = dids, .n_rows = n_rows, .k = k, .x = dx, .x_per_slot = x_per_slot};
    m->w_up = dw + m->ex;
    CU(cudaMalloc((void **)&m->dy, m->n_slots * n_out * sizeof(float)));
    CU(cudaMalloc((void **)&m->dyu, m->n_slots * n_out * sizeof(float)));
    m->a.y = m->dy;
    CU(cudaMalloc(&m->work, cuda_moe_chunk_work_bytes(&m->a) + 256));
}
static void set_free(moe_set *m) {
    free(m->w), free(m->x), free(m->ids);
    cudaFree((void *)m->a.w), cudaFree((void *)m->a.x), cudaFree((void *)m->a.ids), cudaFree(m->dy),
        cudaFree(m->dyu), cudaFree(m->work);
}
/* the grouping pass's worst case (matmul_gemm.cu's moe_max_tiles for WIDE tiles of 8) */
static size_t max_tiles(const moe_set *m) {
    return (m->n_slots + WIDE_TILE - 1) / WIDE_TILE + (m->n_expert < m->n_slots ? m->n_expert : m->n_slots);
}

/* mode 0: cuda_moe_chunk; 1: cuda_moe_chunk_pair in one launch; 2: the pair as two launches on the shared tiles.
 * Poisons the outputs, runs on stream st (NULL: the default), copies y (and y_up) to the host. */
static void set_run(moe_set *m, int mode, cudaStream_t st, float *y, float *yu) {
    const size_t ny = m->n_slots * m->n_out;
    char why[256] = "";
    cuda_matmul_share_set(1);
    cuda_moe_pair1_set(mode == 1);
    CU(cudaMemset(m->dy, 0xFF, ny * sizeof(float)));
    CU(cudaMemset(m->dyu, 0xFF, ny * sizeof(float)));
    const int rc = mode ? cuda_moe_chunk_pair(&m->a, m->w_up, m->dyu, m->work, st, why, sizeof why)
                        : cuda_moe_chunk(&m->a, m->work, st, why, sizeof why);
    CHECK_MSG(rc == 0, "%s", why);
    CU(cudaStreamSynchronize(st));
    CU(cudaMemcpy(y, m->dy, ny * sizeof(float), cudaMemcpyDeviceToHost));
    if (mode) CU(cudaMemcpy(yu, m->dyu, ny * sizeof(float), cudaMemcpyDeviceToHost));
    cuda_matmul_share_set(-1);
    cuda_moe_pair1_set(-1);
}

/* The full grid's gate (y) and up (yu, the pair's) against the CPU: every 3rd output of every 5th slot (all slots
 * of a few-slot case). */
static void set_oracle(const moe_set *m, const float *y, const float *yu, const char *what) {
    void *xq = act_rows(m->type, m->x, m->n_x, m->n_in);
    const size_t xb = quant_act_row_bytes(m->type, m->n_in), step = m->n_slots > 32 ? 5 : 1;
    float *got = malloc(2 * m->n_slots * m->n_out * sizeof(float)), *want = malloc(2 * m->n_slots * m->n_out *
                                                                                    sizeof(float));
    size_t ns = 0;
    for (size_t s = 0; s < m->n_slots; s += step)
        for (size_t o = s % 3; o < m->n_out; o += 3) {
            const size_t e = (size_t)m->ids[s], xr = m->a.x_per_slot ? s : s / m->k;
            const uint8_t *xrow = (const uint8_t *)xq + xr * xb;
            got[ns] = y[s * m->n_out + o];
            want[ns++] = quant_act_dot_scalar(m->type, m->w + ((e % POOL) * m->n_out + o) * m->rb, xrow, m->n_in);
            got[ns] = yu[s * m->n_out + o];
            want[ns++] =
                quant_act_dot_scalar(m->type, m->w + (((e + 1) % POOL) * m->n_out + o) * m->rb, xrow, m->n_in);
        }
    const double err = rel_err(got, want, ns);
    CHECK_MSG(err <= 1e-5, "%s: error %.3g against the CPU's integer oracle (%zu outputs)", what, err, ns);
    free(got), free(want), free(xq);
}

static size_t n_cases, n_runs;
/* One case: each mode's full-grid bits, then every form's against them. */
static void tiles_case(uint32_t type, size_t n_rows, size_t k, size_t n_expert, size_t nd, size_t n_in, size_t n_out,
                       int x_per_slot, int preview) {
    moe_set m;
    set_make(&m, type, n_rows, k, n_expert, nd, n_in, n_out, x_per_slot);
    m.a.preview = preview;
    const size_t ny = m.n_slots * n_out, mt = max_tiles(&m), ot = (n_out + BO - 1) / BO;
    float *ref = malloc(ny * sizeof(float)), *ref_u = malloc(ny * sizeof(float));
    float *got = malloc(ny * sizeof(float)), *got_u = malloc(ny * sizeof(float));
    char what[200];
    for (int mode = 0; mode < 3; mode++) {
        snprintf(what, sizeof what, "%s x%zu k %zu of %zu experts (%s), n_in %zu n_out %zu%s, mode %d",
                 quant_type_name(type), n_rows, k, n_expert, nd ? "few" : "random", n_in, n_out,
                 x_per_slot ? " x a slot" : "", mode);
        form_set(&REF);
        unsigned long long l0 = cuda_moe_tile_loop_launches();
        set_run(&m, mode, NULL, ref, ref_u);
        CHECK_MSG(cuda_moe_tile_loop_launches() == l0, "%s: a cut grid with the loop off", what);
        CHECK_MSG(n_nan(ref, ny) == 0 && (!mode || n_nan(ref_u, ny) == 0), "%s: the full grid left %zu / %zu unwritten",
                  what, n_nan(ref, ny), mode ? n_nan(ref_u, ny) : 0);
        if (mode == 1) set_oracle(&m, ref, ref_u, what);
        for (int f = 0; f < N_FORMS; f++) {
            form_set(&FORMS[f]);
            l0 = cuda_moe_tile_loop_launches();
            const unsigned long long w0 = cuda_ig_w3_launches(), wr0 = cuda_ig_wr_launches();
            set_run(&m, mode, NULL, got, got_u);
            /* W3: every launch of Q4_K's WIDE tiles (one, or two for the pair as two launches), AUTO's outside a
             * preview only, no other type's */
            const int w3 = FORMS[f].w3 == 1 || (FORMS[f].w3 == 2 && !preview);
            const unsigned long long w3_want = w3 && !FORMS[f].wr && type == QUANT_Q4_K ? (mode == 2 ? 2u : 1u) : 0u;
            const unsigned long long wr_want = w3 && FORMS[f].wr && type == QUANT_Q4_K ? (mode == 2 ? 2u : 1u) : 0u;
            CHECK_MSG(cuda_ig_w3_launches() - w0 == w3_want, "%s, %s: %llu W3 launches, not %llu", what,
                      FORMS[f].name, cuda_ig_w3_launches() - w0, w3_want);
            CHECK_MSG(cuda_ig_wr_launches() - wr0 == wr_want, "%s, %s: %llu WR launches, not %llu", what,
                      FORMS[f].name, cuda_ig_wr_launches() - wr0, wr_want);
            const int c = cut(&FORMS[f], mt, ot * (mode == 1 ? 2 : 1));
            const unsigned long long want = c > 0 ? (mode == 2 ? 2u : 1u) : 0u, n = cuda_moe_tile_loop_launches() - l0;
            CHECK_MSG(c < 0 || n == want, "%s, %s: %llu launches with a cut grid, not %llu (%zu tiles at most)", what,
                      FORMS[f].name, n, want, mt);
            CHECK_MSG(n_nan(got, ny) == 0 && memcmp(got, ref, ny * sizeof(float)) == 0 &&
                          (!mode || (n_nan(got_u, ny) == 0 && memcmp(got_u, ref_u, ny * sizeof(float)) == 0)),
                      "%s, %s: %zu / %zu unwritten, or differs from the full grid", what, FORMS[f].name,
                      n_nan(got, ny), mode ? n_nan(got_u, ny) : 0);
            n_runs++;
        }
    }
    forms_reset();
    free(ref), free(ref_u), free(got), free(got_u);
    set_free(&m);
    n_cases++;
}

/* 32 rows x top-8 on a few of 256 experts: the preview's shape, ~32 real tiles of 288 */
static void test_preview(void) {
    static const uint32_t T[] = {QUANT_Q4_K, QUANT_Q5_K};
    for (int t = 0; t < 2; t++) {
        tiles_case(T[t], 32, 8, 256, 8, 2048, 512, 0, 1); /* the gate / up (a coreset preview's) */
        if (g_small) continue;
        tiles_case(T[t], 32, 8, 256, 4, 512, 2048, 1, 1); /* the down, x a slot */
        tiles_case(T[t], 32, 8, 256, 6, 2048, 200, 0, 1);
    }
    printf("  preview routing (32 rows on 4..8 experts): %zu cases so far, %zu runs bit-identical to the full grid\n",
           n_cases, n_runs);
}

/* 32 rows uniformly over 256 experts (~200 tiles: blocks walk 2+ at the cap by shape), 16 rows over 100 */
static void test_many(void) {
    static const uint32_t T[] = {QUANT_Q4_K, QUANT_Q5_K};
    for (int t = 0; t < 2; t++) {
        tiles_case(T[t], 32, 8, 256, 0, g_small ? 512 : 2048, g_small ? 200 : 512, 0, 0);
        if (g_small) continue;
        tiles_case(T[t], 32, 8, 256, 0, 512, 2048, 1, 0);
        tiles_case(T[t], 16, 8, 100, 0, 2048, 512, 0, 0);
        tiles_case(T[t], 16, 8, 100, 0, 512, 2048, 1, 0);
    }
    printf("  many tiles (32 rows over 256 experts, 16 over 100): %zu cases so far, %zu runs bit-identical\n", n_cases,
           n_runs);
}

/* 1 and 3 rows (decode-batch sizes on the chunk form: a tile a slot) */
static void test_few_rows(void) {
    static const uint32_t T[] = {QUANT_Q4_K, QUANT_Q5_K};
    for (int t = 0; t < 2; t++) {
        tiles_case(T[t], 3, 8, 256, 0, 512, 200, 0, 0);
        if (g_small) continue;
        tiles_case(T[t], 1, 8, 256, 0, 2048, 512, 0, 0);
        tiles_case(T[t], 3, 8, 256, 0, 2048, 2048, 1, 0);
    }
    printf("  1 and 3 rows: %zu cases so far, %zu runs bit-identical\n", n_cases, n_runs);
}

/* the other WIDE instantiations: Q8_0 and Q6_K experts */
static void test_other_types(void) {
    tiles_case(QUANT_Q8_0, 32, 8, 256, 0, 512, 200, 0, 0);
    tiles_case(QUANT_Q6_K, 32, 8, 256, 0, 512, 200, 1, 0);
    printf("  Q8_0 and Q6_K WIDE tiles: %zu cases in all, %zu runs bit-identical\n", n_cases, n_runs);
}

/* test_graph's routing ids into the device's (the same buffer the graph reads) and its three outputs poisoned, in
 * stream order on st */
static void poison_ids(moe_set *m, const int32_t *ids, float *dy1, cudaStream_t st) {
    const size_t ny = m->n_slots * m->n_out;
    CU(cudaMemcpyAsync((void *)m->a.ids, ids, m->n_slots * sizeof(int32_t), cudaMemcpyHostToDevice, st));
    CU(cudaMemsetAsync(m->dy, 0xFF, ny * sizeof(float), st));
    CU(cudaMemsetAsync(m->dyu, 0xFF, ny * sizeof(float), st));
    CU(cudaMemsetAsync(dy1, 0xFF, ny * sizeof(float), st));
    CU(cudaStreamSynchronize(st)); /* ids: a pageable host buffer */
}

/* A graph captured with the loop on (the kernels' first launches: the occupancy query inside the capture), the pair
 * in one launch and a single product, replayed on routing A (a preview's 8 experts) and B (uniform over 256, ~200
 * tiles) through the same ids buffer: each the eager full grid's bits. */
static void test_graph(void) {
    moe_set m;
    set_make(&m, QUANT_Q4_K, 32, 8, 256, 8, 1024, 384, 0);
    CU(cudaDeviceSynchronize()); /* the uploads, before the non-blocking stream reads them */
    const size_t ny = m.n_slots * m.n_out, mt = max_tiles(&m), ot = (m.n_out + BO - 1) / BO;
    int32_t *ids_b = malloc(m.n_slots * sizeof(int32_t));
    make_routing(ids_b, 32, 8, 256, 0);
    float *ref[2][3], *got[3];
    for (int i = 0; i < 3; i++) {
        got[i] = malloc(ny * sizeof(float));
        for (int r = 0; r < 2; r++) ref[r][i] = malloc(ny * sizeof(float));
    }
    cudaStream_t st;
    CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    float *dy1 = NULL; /* the single product's outputs */
    CU(cudaMalloc((void **)&dy1, ny * sizeof(float)));
    char why[256] = "";
    /* eager, the full grid: A then B (y, y_up of the pair; y1 the single product of the up's weights) */
    form_set(&REF);
    cuda_matmul_share_set(1);
    cuda_moe_pair1_set(1);
    for (int r = 0; r < 2; r++) {
        poison_ids(&m, r ? ids_b : m.ids, dy1, st);
        cuda_moe_args b = m.a;
        b.w = m.w_up;
        b.y = dy1;
        CHECK_MSG(cuda_moe_chunk_pair(&m.a, m.w_up, m.dyu, m.work, st, why, sizeof why) == 0, "%s", why);
        CHECK_MSG(cuda_moe_chunk(&b, m.work, st, why, sizeof why) == 0, "%s", why);
        CU(cudaStreamSynchronize(st));
        CU(cudaMemcpy(ref[r][0], m.dy, ny * sizeof(float), cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(ref[r][1], m.dyu, ny * sizeof(float), cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(ref[r][2], dy1, ny * sizeof(float), cudaMemcpyDeviceToHost));
    }
    /* captured with the loop on at the cap by shape */
    const form on = {"loop", 1, 0, 0, 1, 0, 0};
    form_set(&on);
    const unsigned long long l0 = cuda_moe_tile_loop_launches();
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    cuda_moe_args b = m.a;
    b.w = m.w_up;
    b.y = dy1;
    CHECK_MSG(cuda_moe_chunk_pair(&m.a, m.w_up, m.dyu, m.work, st, why, sizeof why) == 0, "%s", why);
    CHECK_MSG(cuda_moe_chunk(&b, m.work, st, why, sizeof why) == 0, "%s", why);
    CU(cudaStreamEndCapture(st, &g));
    CU(cudaGraphInstantiate(&ge, g, 0));
    const int c2 = cut(&on, mt, 2 * ot), c1 = cut(&on, mt, ot);
    const unsigned long long n = cuda_moe_tile_loop_launches() - l0;
    CHECK_MSG(c2 < 0 || c1 < 0 || n == (unsigned)(c2 + c1), "graph: %llu launches with a cut grid", n);
    for (int r = 0; r < 2; r++) {
        poison_ids(&m, r ? ids_b : m.ids, dy1, st);
        CU(cudaGraphLaunch(ge, st));
        CU(cudaStreamSynchronize(st));
        CU(cudaMemcpy(got[0], m.dy, ny * sizeof(float), cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(got[1], m.dyu, ny * sizeof(float), cudaMemcpyDeviceToHost));
        CU(cudaMemcpy(got[2], dy1, ny * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < 3; i++)
            CHECK_MSG(n_nan(ref[r][i], ny) == 0 && n_nan(got[i], ny) == 0 &&
                          memcmp(got[i], ref[r][i], ny * sizeof(float)) == 0,
                      "graph, routing %c, output %d (gate, up, single): unwritten or differs from the eager full grid",
                      r ? 'B' : 'A', i);
    }
    forms_reset();
    cuda_matmul_share_set(-1);
    cuda_moe_pair1_set(-1);
    printf("  graph capture with the loop on, replayed on two routings: the eager full grid's bits\n");
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    cudaStreamDestroy(st);
    cudaFree(dy1);
    for (int i = 0; i < 3; i++) {
        free(got[i]);
        for (int r = 0; r < 2; r++) free(ref[r][i]);
    }
    free(ids_b);
    set_free(&m);
}

int main(void) {
    char why[256] = "";
    const int n = cuda_device_count(why, sizeof why);
    if (n <= 0) TEST_SKIP("no CUDA device (%s)", n == 0 ? "the runtime found 0 devices" : why);
    const char *sm = getenv("CLOVER_TEST_SMALL");
    g_small = sm && strcmp(sm, "1") == 0;
    cuda_igemm_few_set(0); /* the WIDE tiles of matmul_igemm.cu, not the few-row or PERSIST forms */
    cuda_moe_persist_set(0);
    RUN(test_graph); /* first: no occupancy answer cached yet */
    RUN(test_preview);
    RUN(test_many);
    RUN(test_few_rows);
    RUN(test_other_types);
    cuda_igemm_few_set(-1);
    cuda_moe_persist_set(-1);
    return TEST_EXIT();
}
