/*
 * test_act_stage.c: the staging of 8-bit activation rows as pool tasks
 * (src/quant/act_stage.c) writes the bytes the calling thread's staging
 * wrote before it (the expected bytes come from this file's copies of the
 * old serial stagers: matmul.c's planar Q8_0 one, gemm_amx_stage.c's whole
 * tile layout, quant_act_quantize row by row), every byte of the buffer,
 * for rows 1..512, every layout, every type, whatever the split (the pool's
 * plan, the finest split run backwards on one thread); and products through
 * matmul and matmul_batch keep every row's bits (equal to the row's one-row
 * product) with the pool staging, the serial staging
 * (CLOVER_SERIAL_STAGE=1) and no pool. The AMX layout is plain C and is
 * checked here on every CPU; products at the AMX level are
 * test_matmul_amx_emu's (emulated tiles, pools of 2, 3 and 16).
 *
 * The staging and the product in one run of the pool (act_stage_run_then,
 * issue 30): every task of the product, whenever it starts, finds every
 * staged byte already equal to the old serial staging's (the product's
 * tasks here compare the buffers themselves), with pools of 2, 3 and 16
 * threads (more threads than this machine has cores: the waits then depend
 * on the scheduler) and several stagings a run; and products through it,
 * split as matmul now splits them (whole 16-row runs, a minimum of work)
 * and as before (CLOVER_OLD_SPLIT=1), the staging in its own run
 * (CLOVER_STAGE_SEPARATE=1) or on the calling thread, equal each row's
 * one-row product bit for bit.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/threadpool.h"
#include "quant/act_stage.h"
#include "quant/gemm_amx.h"
#include "quant/matmul.h"
#include "quant/quant.h"
#include "quant/quant_internal.h"
#include "quant/simd_level.h"
#include "test.h"

enum { N_IN = 1024, MAX_ROWS = 512, N_OUT = 40 };

/* ---- the old serial stagers, as they were before act_stage.c ---- */

static void old_planar(const float *x, size_t n_rows, size_t n_in, uint8_t *dst) {
    enum { CHUNK = 64 };
    const size_t nb = n_in / QUANT_QK8_0;
    float *d = (float *)(void *)(dst + n_rows * nb * QUANT_QK8_0);
    act_q8_32 chunk[CHUNK];
    for (size_t r = 0; r < n_rows; r++)
        for (size_t c0 = 0; c0 < nb; c0 += CHUNK) {
            const size_t n = nb - c0 < CHUNK ? nb - c0 : CHUNK;
            quant_act_quantize(QUANT_Q8_0, x + r * n_in + c0 * QUANT_QK8_0, chunk, n * QUANT_QK8_0);
            for (size_t k = 0; k < n; k++) {
                memcpy(dst + (r * nb + c0 + k) * QUANT_QK8_0, chunk[k].qs, QUANT_QK8_0);
                d[r * nb + c0 + k] = chunk[k].d;
            }
        }
}

static void old_place(uint8_t *dst, size_t nb, size_t r, size_t b, const int8_t *qs) {
    uint8_t *t = dst + ((r / GEMM_AMX_ROWS) * nb + b) * GEMM_AMX_TILE_BYTES + 4 * (r % GEMM_AMX_ROWS);
    for (size_t k = 0; k < QUANT_QK8_0 / 4; k++) memcpy(t + 64 * k, qs + 4 * k, 4);
}

static void old_amx(uint32_t type, const float *x, size_t n_rows, size_t n_in, uint8_t *dst) {
    const size_t nb = n_in / QUANT_QK8_0, nbk = n_in / QUANT_QK_K, ng = gemm_amx_groups(n_rows);
    float *d = (float *)(void *)(dst + ng * nb * GEMM_AMX_TILE_BYTES);
    if (type == QUANT_Q8_0) {
        act_q8_32 blk[1];
        for (size_t r = 0; r < ng * GEMM_AMX_ROWS; r++)
            for (size_t b = 0; b < nb; b++) {
                if (r < n_rows)
                    quant_act_quantize(QUANT_Q8_0, x + r * n_in + b * QUANT_QK8_0, blk, QUANT_QK8_0);
                else
                    memset(blk, 0, sizeof blk);
                old_place(dst, nb, r, b, blk[0].qs);
                d[((r / GEMM_AMX_ROWS) * nb + b) * GEMM_AMX_ROWS + r % GEMM_AMX_ROWS] = blk[0].d;
            }
        return;
    }
    int32_t *sums = (int32_t *)(void *)(d + ng * nbk * GEMM_AMX_ROWS);
    act_q8_k blk[1];
    for (size_t r = 0; r < ng * GEMM_AMX_ROWS; r++) {
        const size_t g = r / GEMM_AMX_ROWS, rr = r % GEMM_AMX_ROWS;
        for (size_t B = 0; B < nbk; B++) {
            if (r < n_rows)
                quant_act_quantize(type, x + r * n_in + B * QUANT_QK_K, blk, QUANT_QK_K);
            else
                memset(blk, 0, sizeof blk);
            for (size_t s = 0; s < GEMM_AMX_SUB; s++) old_place(dst, nb, r, GEMM_AMX_SUB * B + s, blk[0].qs + 32 * s);
            d[(g * nbk + B) * GEMM_AMX_ROWS + rr] = blk[0].d;
            for (size_t p = 0; p < 4; p++) {
                const int lo = blk[0].bsums[4 * p] + blk[0].bsums[4 * p + 1];
                const int hi = blk[0].bsums[4 * p + 2] + blk[0].bsums[4 * p + 3];
                sums[((g * nbk + B) * 4 + p) * GEMM_AMX_ROWS + rr] =
                    (int32_t)((uint32_t)(uint16_t)(int16_t)lo | (uint32_t)(uint16_t)(int16_t)hi << 16);
            }
        }
    }
}

static size_t staged_bytes(uint32_t type, int layout, size_t n_rows) {
    return layout == ACT_STAGE_AMX ? gemm_amx_stage_bytes(type, n_rows, N_IN) : n_rows * quant_act_row_bytes(type, N_IN);
}

static void old_stage(uint32_t type, int layout, const float *x, size_t n_rows, uint8_t *dst) {
    if (layout == ACT_STAGE_AMX)
        old_amx(type, x, n_rows, N_IN, dst);
    else if (layout == ACT_STAGE_PLANAR)
        old_planar(x, n_rows, N_IN, dst);
    else if (layout == ACT_STAGE_PLANAR_U8) { /* the planar bytes with each code + 128 */
        old_planar(x, n_rows, N_IN, dst);
        for (size_t i = 0; i < n_rows * N_IN; i++) dst[i] = (uint8_t)((int8_t)dst[i] + 128);
    }
    else
        for (size_t r = 0; r < n_rows; r++)
            quant_act_quantize(type, x + r * N_IN, dst + r * quant_act_row_bytes(type, N_IN), N_IN);
    if (layout == ACT_STAGE_ROWS_KPERM) /* each block's codes: out dword 32h + 16v + i = in dword 32h + perm(i) + 2v */
        for (size_t r = 0; r < n_rows; r++)
            for (size_t b = 0; b < N_IN / QUANT_QK_K; b++) {
                act_q8_k *blk = (act_q8_k *)(void *)(dst + r * quant_act_row_bytes(type, N_IN)) + b;
                int8_t in[QUANT_QK_K];
                memcpy(in, blk->qs, sizeof in);
                for (size_t h = 0; h < 2; h++)
                    for (size_t v = 0; v < 2; v++)
                        for (size_t i = 0; i < 16; i++) {
                            const size_t dw = 32 * h + 16 * (i / 8) + 4 * ((i % 8) / 4) + (i % 2 ? 8 : 0) + (i % 4) / 2 + 2 * v;
                            memcpy(blk->qs + 4 * (32 * h + 16 * v + i), in + 4 * dw, 4);
                        }
            }
}

static float *make_x(rng_state *r) {
    float *x = mem_alloc(MAX_ROWS * N_IN * sizeof(float));
    if (!x) return NULL;
    for (size_t i = 0; i < MAX_ROWS * N_IN; i++) x[i] = rng_normal(r);
    memset(x + 1 * N_IN, 0, N_IN * sizeof(float));                  /* an all-zero row */
    for (size_t k = 0; k < N_IN; k++) x[2 * N_IN + k] *= 1e4f;       /* a large one */
    for (size_t k = 0; k < N_IN; k += 37) x[5 * N_IN + k] = -0.0f;   /* signed zeros */
    x[17 * N_IN + 100] = 1e30f;                                       /* one huge value in a block */
    return x;
}

static void test_bytes(void) {
    static const struct {
        uint32_t type;
        int layout;
    } cases[] = {{QUANT_Q8_0, ACT_STAGE_ROWS},  {QUANT_Q8_0, ACT_STAGE_PLANAR}, {QUANT_Q8_0, ACT_STAGE_PLANAR_U8},
                 {QUANT_Q8_0, ACT_STAGE_AMX},
                 {QUANT_Q4_K, ACT_STAGE_ROWS},  {QUANT_Q4_K, ACT_STAGE_AMX},    {QUANT_Q5_K, ACT_STAGE_AMX},
                 {QUANT_Q6_K, ACT_STAGE_ROWS},  {QUANT_Q4_K, ACT_STAGE_ROWS_KPERM}, {QUANT_Q6_K, ACT_STAGE_ROWS_KPERM}};
    threadpool *pool = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool, 4, &err), CLOVER_OK);
    rng_state r;
    rng_seed(&r, 3030);
    float *x = make_x(&r);
    const size_t cap = gemm_amx_stage_bytes(QUANT_Q4_K, MAX_ROWS, N_IN) + MAX_ROWS * sizeof(act_q8_32) * (N_IN / 32);
    uint8_t *want = mem_alloc(cap), *got = mem_alloc(cap);
    if (!x || !want || !got) {
        CHECK(!"allocation failed");
        goto out;
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const uint32_t type = cases[c].type;
        const int layout = cases[c].layout;
        int bad = 0;
        size_t split_seen = 0;
        for (size_t n = 1; n <= MAX_ROWS; n++) {
            const size_t bytes = staged_bytes(type, layout, n);
            memset(want, 0xA5, bytes);
            old_stage(type, layout, x, n, want);
            /* three splits: the pool's (4 threads x 4), a fine one run backwards on
             * this thread, and the serial plan */
            static const size_t hints[] = {16, 100000, 1};
            for (int h = 0; h < 3; h++) {
                if (h == 1 && n % 5 != 1 && n > 40) continue; /* the finest split at a fifth of the sizes */
                act_stage s;
                memset(got, 0x5A, bytes);
                act_stage_plan(&s, type, layout, x, n, N_IN, got, hints[h]);
                split_seen += s.n_chunks > 1;
                if (h == 0)
                    act_stage_run(pool, &s, 1);
                else
                    for (size_t t = act_stage_tasks(&s); t-- > 0;) act_stage_task(&s, t);
                if (memcmp(got, want, bytes) != 0 && bad++ < 3) {
                    size_t i = 0;
                    while (got[i] == want[i]) i++;
                    fprintf(stderr, "  %s layout %d rows %zu hint %zu: byte %zu of %zu differs (%02x, serial %02x)\n",
                            quant_type_name(type), layout, n, hints[h], i, bytes, got[i], want[i]);
                }
            }
        }
        CHECK_MSG(bad == 0, "%s layout %d: %d stagings differ from the serial one", quant_type_name(type), layout, bad);
        CHECK_MSG(split_seen > 0, "%s layout %d: no plan split a unit's blocks", quant_type_name(type), layout);
    }
out:
    mem_free(x), mem_free(want), mem_free(got);
    threadpool_free(pool);
}

/* Products: with the pool's staging, the serial staging and no pool, each
 * row equals its one-row product bit for bit; matmul_batch (items sharing
 * x) equals matmul. */
static void test_products(void) {
    static const uint32_t types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    static const size_t rows[] = {3, 8, 16, 17, 32, 33, 64, 100, 512};
    threadpool *pool = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool, 4, &err), CLOVER_OK);
    rng_state r;
    rng_seed(&r, 3131);
    float *x = make_x(&r);
    float *y = mem_alloc(MAX_ROWS * N_OUT * sizeof(float)), *y1 = mem_alloc(MAX_ROWS * N_OUT * sizeof(float));
    float *yb = mem_alloc(3 * MAX_ROWS * N_OUT * sizeof(float));
    uint8_t *w[4] = {0};
    float *src = mem_alloc(N_IN * sizeof(float));
    for (size_t t = 0; t < 4; t++) {
        const size_t rb = quant_row_bytes(types[t], N_IN);
        w[t] = mem_alloc(N_OUT * rb);
        for (size_t o = 0; o < N_OUT && w[t] && src; o++) {
            for (size_t k = 0; k < N_IN; k++) src[k] = rng_normal(&r) * 0.05f;
            quant_quantize_row(types[t], src, w[t] + o * rb, N_IN);
        }
    }
    if (!x || !y || !y1 || !yb || !src || !w[0] || !w[1] || !w[2] || !w[3]) {
        CHECK(!"allocation failed");
        goto out;
    }
    for (size_t t = 0; t < 4; t++) {
        const uint32_t type = types[t];
        for (size_t rr = 0; rr < MAX_ROWS; rr++) matmul(NULL, type, w[t], N_OUT, N_IN, x + rr * N_IN, 1, y1 + rr * N_OUT);
        int bad = 0;
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            const size_t n = rows[i];
            for (int mode = 0; mode < 3; mode++) { /* pool; pool with CLOVER_SERIAL_STAGE=1; no pool */
                if (mode == 1) setenv("CLOVER_SERIAL_STAGE", "1", 1);
                memset(y, 0xFF, n * N_OUT * sizeof(float));
                matmul(mode == 2 ? NULL : pool, type, w[t], N_OUT, N_IN, x, n, y);
                unsetenv("CLOVER_SERIAL_STAGE");
                if (memcmp(y, y1, n * N_OUT * sizeof(float)) != 0 && bad++ < 3)
                    fprintf(stderr, "  %s rows %zu mode %d: differs from the one-row products\n", quant_type_name(type), n,
                            mode);
            }
            /* a batch: this type and Q6_K on one x (shared or not by format), then another type */
            const uint32_t t2 = types[(t + 1) % 4];
            matmul_item items[3] = {{type, w[t], N_OUT, N_IN, x, n, yb},
                                    {QUANT_Q6_K, w[3], N_OUT, N_IN, x, n, yb + n * N_OUT},
                                    {t2, w[(t + 1) % 4], N_OUT, N_IN, x, n, yb + 2 * n * N_OUT}};
            matmul_batch(pool, items, 3);
            if (memcmp(yb, y1, n * N_OUT * sizeof(float)) != 0 && bad++ < 3)
                fprintf(stderr, "  %s rows %zu: batch item differs from the one-row products\n", quant_type_name(type), n);
            float *yc = yb + n * N_OUT;
            matmul(NULL, QUANT_Q6_K, w[3], N_OUT, N_IN, x, n, y);
            if (memcmp(yc, y, n * N_OUT * sizeof(float)) != 0 && bad++ < 3)
                fprintf(stderr, "  %s rows %zu: batch Q6_K item differs from matmul\n", quant_type_name(type), n);
            matmul(NULL, t2, w[(t + 1) % 4], N_OUT, N_IN, x, n, y);
            if (memcmp(yc + n * N_OUT, y, n * N_OUT * sizeof(float)) != 0 && bad++ < 3)
                fprintf(stderr, "  %s rows %zu: batch third item differs from matmul\n", quant_type_name(type), n);
        }
        CHECK_MSG(bad == 0, "%s: %d products differ", quant_type_name(type), bad);
    }
out:
    for (size_t t = 0; t < 4; t++) mem_free(w[t]);
    mem_free(x), mem_free(y), mem_free(y1), mem_free(yb), mem_free(src);
    threadpool_free(pool);
}

/* ---- the staging and a product in one run ---- */

enum { FUSED_SETS = 3, FUSED_PRODUCT_TASKS = 37 };

typedef struct fused_check {
    const uint8_t *want[FUSED_SETS], *got[FUSED_SETS];
    size_t bytes[FUSED_SETS], n;
    atomic_int ran, early; /* product tasks run; those that found a byte not yet staged */
    atomic_int bad_index;
} fused_check;

static void fused_product_task(void *ctx, size_t task, size_t thread) {
    (void)thread;
    fused_check *c = ctx;
    if (task >= FUSED_PRODUCT_TASKS) atomic_fetch_add(&c->bad_index, 1);
    for (size_t i = 0; i < c->n; i++)
        if (memcmp(c->got[i], c->want[i], c->bytes[i]) != 0) {
            atomic_fetch_add(&c->early, 1);
            break;
        }
    atomic_fetch_add(&c->ran, 1);
}

static void test_fused(void) {
    static const struct {
        uint32_t type;
        int layout;
    } sets[][FUSED_SETS] = {
        {{QUANT_Q8_0, ACT_STAGE_PLANAR_U8}, {QUANT_Q4_K, ACT_STAGE_ROWS_KPERM}, {QUANT_Q6_K, ACT_STAGE_ROWS}},
        {{QUANT_Q8_0, ACT_STAGE_AMX}, {QUANT_Q4_K, ACT_STAGE_AMX}, {QUANT_Q8_0, ACT_STAGE_PLANAR}},
    };
    static const size_t pools[] = {2, 3, 16}, rows[] = {3, 17, 33, 100, 512};
    rng_state r;
    rng_seed(&r, 3232);
    float *x = make_x(&r);
    const size_t cap = gemm_amx_stage_bytes(QUANT_Q4_K, MAX_ROWS, N_IN) + MAX_ROWS * sizeof(act_q8_32) * (N_IN / 32);
    uint8_t *want[FUSED_SETS] = {0}, *got[FUSED_SETS] = {0};
    int alloc_ok = x != NULL;
    for (size_t i = 0; i < FUSED_SETS; i++) {
        want[i] = mem_alloc(cap), got[i] = mem_alloc(cap);
        alloc_ok &= want[i] && got[i];
    }
    if (!alloc_ok) {
        CHECK(!"allocation failed");
        goto out;
    }
    int bad = 0, fused_runs = 0;
    for (size_t pi = 0; pi < sizeof pools / sizeof pools[0]; pi++) {
        threadpool *pool = NULL;
        clover_error err;
        CHECK_EQ_INT(threadpool_create(&pool, pools[pi], &err), CLOVER_OK);
        for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++)
            for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
                for (size_t n = 1; n <= FUSED_SETS; n++) {
                    const size_t nr = rows[ri];
                    act_stage st[FUSED_SETS];
                    fused_check c;
                    memset(&c, 0, sizeof c);
                    c.n = n;
                    for (size_t i = 0; i < n; i++) {
                        const uint32_t type = sets[si][i].type;
                        const int layout = sets[si][i].layout;
                        /* each staging its own rows of x (the last ones when they run out) */
                        const float *xi = x + (i * nr + nr <= MAX_ROWS ? i * nr : MAX_ROWS - nr) * N_IN;
                        c.bytes[i] = staged_bytes(type, layout, nr);
                        old_stage(type, layout, xi, nr, want[i]);
                        memset(got[i], 0x5A, c.bytes[i]);
                        c.want[i] = want[i], c.got[i] = got[i];
                        act_stage_plan(&st[i], type, layout, xi, nr, N_IN, got[i], pools[pi] * 4);
                    }
                    fused_runs += nr * N_IN * n >= 32768; /* act_stage.c's TASKS_MIN_FLOATS: fused, else staged first */
                    act_stage_run_then(pool, st, n, 0, FUSED_PRODUCT_TASKS, fused_product_task, &c);
                    int bytes_ok = 1;
                    for (size_t i = 0; i < n; i++) bytes_ok &= memcmp(got[i], want[i], c.bytes[i]) == 0;
                    const int wrong = atomic_load(&c.ran) != FUSED_PRODUCT_TASKS || atomic_load(&c.early) != 0 ||
                                      atomic_load(&c.bad_index) != 0 || !bytes_ok;
                    if (wrong && bad++ < 3)
                        fprintf(stderr, "  pool %zu set %zu rows %zu stagings %zu: ran %d of %d, %d early, bytes %s\n",
                                pools[pi], si, nr, n, atomic_load(&c.ran), FUSED_PRODUCT_TASKS, atomic_load(&c.early),
                                bytes_ok ? "equal" : "differ");
                }
        threadpool_free(pool);
    }
    CHECK_MSG(bad == 0, "%d fused runs went wrong", bad);
    CHECK_MSG(fused_runs > 0, "no case was large enough to go to the pool");
out:
    for (size_t i = 0; i < FUSED_SETS; i++) mem_free(want[i]), mem_free(got[i]);
    mem_free(x);
}

/* Products of 520 outputs (past a 16-row run: a partial last task) split
 * for pools of 2, 3 and 16 threads, the new split fused and separate, the
 * old split, the serial staging: each row equals its one-row product. */
static void test_products_split(void) {
    enum { OUT2 = 520 };
    static const uint32_t types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    static const size_t rows[] = {3, 16, 33, 100, 512}, pools[] = {2, 3, 16};
    static const char *const modes[][2] = {{NULL, NULL},
                                            {"CLOVER_STAGE_SEPARATE", "1"},
                                            {"CLOVER_OLD_SPLIT", "1"},
                                            {"CLOVER_SERIAL_STAGE", "1"}};
    rng_state r;
    rng_seed(&r, 3333);
    float *x = make_x(&r);
    float *y = mem_alloc(MAX_ROWS * OUT2 * sizeof(float)), *y1 = mem_alloc(MAX_ROWS * OUT2 * sizeof(float));
    float *src = mem_alloc(N_IN * sizeof(float));
    uint8_t *w = mem_alloc(OUT2 * quant_row_bytes(QUANT_Q6_K, N_IN) * 2);
    threadpool *pool[3] = {0};
    clover_error err;
    for (size_t p = 0; p < 3; p++) CHECK_EQ_INT(threadpool_create(&pool[p], pools[p], &err), CLOVER_OK);
    if (!x || !y || !y1 || !src || !w) {
        CHECK(!"allocation failed");
        goto out;
    }
    for (size_t t = 0; t < 4; t++) {
        const uint32_t type = types[t];
        const size_t rb = quant_row_bytes(type, N_IN);
        for (size_t o = 0; o < OUT2; o++) {
            for (size_t k = 0; k < N_IN; k++) src[k] = rng_normal(&r) * 0.05f;
            quant_quantize_row(type, src, w + o * rb, N_IN);
        }
        for (size_t rr = 0; rr < MAX_ROWS; rr++) matmul(NULL, type, w, OUT2, N_IN, x + rr * N_IN, 1, y1 + rr * OUT2);
        int bad = 0;
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            for (size_t p = 0; p < 3; p++)
                for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
                    const size_t n = rows[i];
                    if (modes[m][0]) setenv(modes[m][0], modes[m][1], 1);
                    memset(y, 0xFF, n * OUT2 * sizeof(float));
                    matmul(pool[p], type, w, OUT2, N_IN, x, n, y);
                    if (modes[m][0]) unsetenv(modes[m][0]);
                    if (memcmp(y, y1, n * OUT2 * sizeof(float)) != 0 && bad++ < 3)
                        fprintf(stderr, "  %s rows %zu pool %zu %s: differs from the one-row products\n",
                                quant_type_name(type), n, pools[p], modes[m][0] ? modes[m][0] : "(new split, fused)");
                }
        CHECK_MSG(bad == 0, "%s: %d split products differ", quant_type_name(type), bad);
    }
out:
    for (size_t p = 0; p < 3; p++) threadpool_free(pool[p]);
    mem_free(x), mem_free(y), mem_free(y1), mem_free(src), mem_free(w);
}

int main(void) {
    printf("level: %s\n", quant_simd_level_name());
    RUN(test_bytes);
    RUN(test_products);
    RUN(test_fused);
    RUN(test_products_split);
    return TEST_EXIT();
}
