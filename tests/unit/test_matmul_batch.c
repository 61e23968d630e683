/*
 * test_matmul_batch.c: matmul_batch computes each item exactly as matmul
 * does (bit for bit: the same kernels, each output from one task), whatever
 * the pool, the item mix (every type, 1..5 rows, items sharing x and items
 * that do not, more 8-bit copies than one buffer holds, a full batch of the
 * MoE's shape with 1..64 rows an item) or degenerate items;
 * and matmul_oracle, the scalar twin of matmul's arithmetic, agrees with
 * matmul to float summation order (1e-5 of sum |w x|) on every path,
 * including the 8-bit activation one.
 */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/threadpool.h"
#include "quant/matmul.h"
#include "quant/quant.h"
#include "test.h"

static const uint32_t types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
enum { N_TYPES = sizeof types / sizeof types[0], N_IN = 512, MAX_OUT = 40, MAX_ROWS = 5 };

typedef struct case_data {
    uint8_t *w[N_TYPES]; /* [MAX_OUT] rows of N_IN */
    float *x;            /* [MAX_ROWS][N_IN] */
    float *x2;           /* another activation block */
} case_data;

static void make_case(case_data *c, rng_state *r) {
    float *src = mem_alloc(N_IN * sizeof(float));
    for (size_t t = 0; t < N_TYPES; t++) {
        const size_t rb = quant_row_bytes(types[t], N_IN);
        c->w[t] = mem_alloc(MAX_OUT * rb);
        for (size_t o = 0; o < MAX_OUT; o++) {
            for (size_t k = 0; k < N_IN; k++) src[k] = rng_normal(r) * 0.05f;
            quant_quantize_row(types[t], src, c->w[t] + o * rb, N_IN);
        }
    }
    c->x = mem_alloc(MAX_ROWS * N_IN * sizeof(float));
    c->x2 = mem_alloc(MAX_ROWS * N_IN * sizeof(float));
    for (size_t i = 0; i < MAX_ROWS * N_IN; i++) c->x[i] = rng_normal(r), c->x2[i] = rng_normal(r);
    mem_free(src);
}

static void free_case(case_data *c) {
    for (size_t t = 0; t < N_TYPES; t++) mem_free(c->w[t]);
    mem_free(c->x), mem_free(c->x2);
}

/* n items cycling through the types, rows 1..5, x shared by every other item. */
static void run_batch(const case_data *c, threadpool *pool, size_t n, size_t n_out) {
    matmul_item items[MATMUL_BATCH_MAX];
    float *yb = mem_alloc(n * MAX_ROWS * MAX_OUT * sizeof(float)), *ym = mem_alloc(MAX_ROWS * MAX_OUT * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        const size_t t = i % N_TYPES, rows = 1 + (i / 2) % MAX_ROWS;
        items[i] = (matmul_item){.type = types[t],
                                 .w = c->w[t],
                                 .n_out = n_out - i % 3,
                                 .n_in = N_IN,
                                 .x = i % 2 ? c->x2 : c->x,
                                 .n_rows = rows,
                                 .y = yb + i * MAX_ROWS * MAX_OUT};
    }
    matmul_batch(pool, items, n);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const matmul_item *it = &items[i];
        matmul(pool, it->type, it->w, it->n_out, it->n_in, it->x, it->n_rows, ym);
        if (memcmp(ym, it->y, it->n_out * it->n_rows * sizeof(float)) != 0) {
            if (bad++ < 3)
                fprintf(stderr, "  item %zu (%s, %zu rows): batch and matmul differ\n", i, quant_type_name(it->type),
                        it->n_rows);
        }
    }
    CHECK_MSG(bad == 0, "%zu items, pool of %zu: %d items differ", n, threadpool_size(pool), bad);
    mem_free(yb), mem_free(ym);
}

static void test_batch_equals_matmul(void) {
    rng_state r;
    rng_seed(&r, 31);
    case_data c;
    make_case(&c, &r);
    threadpool *pool2 = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool2, 2, &err), CLOVER_OK);
    const size_t counts[] = {1, 2, 7, 16, MATMUL_BATCH_MAX};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        run_batch(&c, NULL, counts[k], MAX_OUT);
        run_batch(&c, pool2, counts[k], MAX_OUT);
        run_batch(&c, pool2, counts[k], 5); /* small products: below the pool's threshold */
    }
    threadpool_free(pool2);
    free_case(&c);
}

/* More distinct 8-bit copies than one buffer holds: 32 one-row K-quant items of 16384
 * values, each with its own x (32 x 18.7 KB), so the batch must run in parts. */
static void test_batch_many_copies(void) {
    enum { N = 16384, OUT = 3, ITEMS = MATMUL_BATCH_MAX };
    rng_state r;
    rng_seed(&r, 5);
    const size_t rb = quant_row_bytes(QUANT_Q4_K, N);
    uint8_t *w = mem_alloc(OUT * rb);
    float *src = mem_alloc(N * sizeof(float)), *x = mem_alloc(ITEMS * N * sizeof(float));
    float *yb = mem_alloc(ITEMS * OUT * sizeof(float)), ym[OUT];
    for (size_t o = 0; o < OUT; o++) {
        for (size_t k = 0; k < N; k++) src[k] = rng_normal(&r) * 0.05f;
        quant_quantize_row(QUANT_Q4_K, src, w + o * rb, N);
    }
    for (size_t i = 0; i < ITEMS * N; i++) x[i] = rng_normal(&r);
    matmul_item items[ITEMS];
    for (size_t i = 0; i < ITEMS; i++) items[i] = (matmul_item){QUANT_Q4_K, w, OUT, N, x + i * N, 1, yb + i * OUT};
    threadpool *pool2 = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool2, 2, &err), CLOVER_OK);
    matmul_batch(pool2, items, ITEMS);
    int bad = 0;
    for (size_t i = 0; i < ITEMS; i++) {
        matmul(NULL, QUANT_Q4_K, w, OUT, N, x + i * N, 1, ym);
        bad += memcmp(ym, yb + i * OUT, sizeof ym) != 0;
    }
    CHECK_EQ_INT(bad, 0);
    threadpool_free(pool2);
    mem_free(w), mem_free(src), mem_free(x), mem_free(yb);
}

/* A full batch of the MoE's shape (moe.c: 16 experts' gate and up, each
 * pair on its own gathered rows, then the shared expert's gate, up and
 * gate logit on the layer's rows): 1..64 rows an item (the one-row dots,
 * the multi-row kernels, 16-row AMX groups with a partial last one), odd
 * output counts, K-quant and Q8_0 experts; every item bit for bit what
 * matmul gives it alone, on pools of 1..3 threads. */
static void test_batch_moe_shape(void) {
    enum { IN = 512, OUTS = 53, EXPERTS = 16, ITEMS = 2 * EXPERTS + 3, MAXR = 64 };
    _Static_assert((int)ITEMS <= (int)MATMUL_BATCH_MAX, "the MoE's batch fits");
    static const uint32_t et[] = {QUANT_Q4_K, QUANT_Q8_0, QUANT_Q5_K, QUANT_Q6_K};
    static const size_t rows_of[] = {1, 2, 3, 4, 7, 15, 16, 17, 31, 32, 33, 48, 63, 64, 5, 9};
    rng_state r;
    rng_seed(&r, 64);
    uint8_t *w[4];
    float *src = mem_alloc(IN * sizeof(float));
    for (size_t t = 0; t < 4; t++) {
        const size_t rb = quant_row_bytes(et[t], IN);
        w[t] = mem_alloc(OUTS * rb);
        for (size_t o = 0; o < OUTS; o++) {
            for (size_t k = 0; k < IN; k++) src[k] = rng_normal(&r) * 0.05f;
            quant_quantize_row(et[t], src, w[t] + o * rb, IN);
        }
    }
    float *x = mem_alloc((EXPERTS + 1) * MAXR * IN * sizeof(float));
    for (size_t i = 0; i < (EXPERTS + 1) * MAXR * IN; i++) x[i] = rng_normal(&r);
    float *yb = mem_alloc(ITEMS * MAXR * OUTS * sizeof(float)), *ym = mem_alloc(MAXR * OUTS * sizeof(float));
    threadpool *pools[3] = {NULL, NULL, NULL};
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pools[1], 2, &err), CLOVER_OK);
    CHECK_EQ_INT(threadpool_create(&pools[2], 3, &err), CLOVER_OK);
    int bad = 0;
    for (size_t shift = 0; shift < 3; shift++) /* rotates the row counts over the experts */
        for (int p = 0; p < 3; p++) {
            matmul_item items[ITEMS];
            size_t n = 0;
            for (size_t e = 0; e < EXPERTS; e++) {
                const size_t rows = rows_of[(e + 5 * shift) % EXPERTS], t = (e + shift) % 4;
                const float *xe = x + e * MAXR * IN;
                items[n] = (matmul_item){et[t], w[t], OUTS - e % 5, IN, xe, rows, yb + n * MAXR * OUTS};
                n++;
                items[n] = (matmul_item){et[t], w[t], OUTS - 2 * (e % 3), IN, xe, rows, yb + n * MAXR * OUTS};
                n++;
            }
            const size_t rs = shift == 0 ? 32 : shift == 1 ? 1 : 61; /* the shared expert's rows */
            const float *xs = x + EXPERTS * MAXR * IN;
            items[n] = (matmul_item){QUANT_Q8_0, w[1], OUTS, IN, xs, rs, yb + n * MAXR * OUTS};
            n++;
            items[n] = (matmul_item){QUANT_Q6_K, w[3], OUTS - 1, IN, xs, rs, yb + n * MAXR * OUTS};
            n++;
            items[n] = (matmul_item){QUANT_Q8_0, w[1], 1, IN, xs, rs, yb + n * MAXR * OUTS};
            n++;
            matmul_batch(pools[p], items, n);
            for (size_t i = 0; i < n; i++) {
                const matmul_item *it = &items[i];
                matmul(pools[p], it->type, it->w, it->n_out, it->n_in, it->x, it->n_rows, ym);
                if (memcmp(ym, it->y, it->n_out * it->n_rows * sizeof(float)) != 0 && bad++ < 3)
                    fprintf(stderr, "  pool %d, item %zu (%s, %zu rows): batch and matmul differ\n", p, i,
                            quant_type_name(it->type), it->n_rows);
            }
        }
    CHECK_MSG(bad == 0, "%d items differ", bad);
    threadpool_free(pools[1]);
    threadpool_free(pools[2]);
    for (size_t t = 0; t < 4; t++) mem_free(w[t]);
    mem_free(src), mem_free(x), mem_free(yb), mem_free(ym);
}

/* Degenerate items do what matmul does: zeros for n_in 0, nothing for no rows or outputs. */
static void test_batch_degenerate(void) {
    float x[4] = {1, 2, 3, 4}, y0[6], y1[6];
    const uint8_t w[4] = {0};
    for (int i = 0; i < 6; i++) y0[i] = -1.0f, y1[i] = -1.0f;
    matmul_item items[3] = {
        {QUANT_F32, w, 3, 0, x, 2, y0}, {QUANT_Q8_0, w, 0, 32, x, 1, y1}, {QUANT_Q8_0, w, 3, 32, x, 0, y1}};
    matmul_batch(NULL, items, 3);
    for (int i = 0; i < 6; i++) CHECK(y0[i] == 0.0f && y1[i] == -1.0f);
}

/* matmul against matmul_oracle, every type and 1..5 rows. */
static void test_oracle_agrees(void) {
    rng_state r;
    rng_seed(&r, 17);
    case_data c;
    make_case(&c, &r);
    float y[MAX_ROWS * MAX_OUT], ref[MAX_ROWS * MAX_OUT];
    for (size_t t = 0; t < N_TYPES; t++) {
        const size_t rb = quant_row_bytes(types[t], N_IN);
        float *deq = mem_alloc(MAX_OUT * N_IN * sizeof(float));
        for (size_t o = 0; o < MAX_OUT; o++)
            quant_dequantize_row_scalar(types[t], c.w[t] + o * rb, deq + o * N_IN, N_IN);
        for (size_t rows = 1; rows <= MAX_ROWS; rows++) {
            matmul(NULL, types[t], c.w[t], MAX_OUT, N_IN, c.x, rows, y);
            matmul_oracle(types[t], c.w[t], MAX_OUT, N_IN, c.x, rows, ref);
            int bad = 0;
            for (size_t rr = 0; rr < rows; rr++)
                for (size_t o = 0; o < MAX_OUT; o++) {
                    double mag = 0;
                    for (size_t k = 0; k < N_IN; k++) mag += fabs((double)deq[o * N_IN + k] * c.x[rr * N_IN + k]);
                    bad += !(fabs((double)y[rr * MAX_OUT + o] - ref[rr * MAX_OUT + o]) <= 1e-5 * mag);
                }
            CHECK_MSG(bad == 0, "%s, %zu rows: %d outputs off the oracle", quant_type_name(types[t]), rows, bad);
        }
        mem_free(deq);
    }
    free_case(&c);
}

int main(void) {
    RUN(test_batch_equals_matmul);
    RUN(test_batch_many_copies);
    RUN(test_batch_moe_shape);
    RUN(test_batch_degenerate);
    RUN(test_oracle_agrees);
    return TEST_EXIT();
}
