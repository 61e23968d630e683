/*
 * test_matmul.c: matmul against the scalar oracle (quant_dot_scalar per
 * output) for every supported type, odd shapes, 1..9 activation rows, and no
 * pool, a pool of 1 and of 2 threads; plus shapes that cross the kernel's
 * tile and activation-block boundaries. The oracle itself is checked against
 * a double sum over the scalar dequantised weights.
 *
 * Tolerance: outputs differ from the oracle only by summation order, so
 * |y - oracle| <= 1e-5 * sum_k |w_k x_k| + tiny; except that with AVX2,
 * Q8_0 or K-quant weights go through the 8-bit activation path (any row
 * count: matmul.h, quant.h's quant_act_*; test_gemm checks it exactly), which adds the
 * activation rounding: at most sum over activation blocks b (32 values for
 * Q8_0, 256 for K-quants) of max|x_b| / 254 * sum_b |w|. Results must also be
 * identical whatever the pool (each output is computed by one task, in one
 * order), and nothing outside y may be written.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/threadpool.h"
#include "base/timer.h"
#include "quant/matmul.h"
#include "quant/matmul_group.h"
#include "quant/quant.h"
#include "test.h"

static const uint32_t all_types[] = {QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};

enum { CANARY = 16 };

typedef struct problem {
    uint32_t type;
    size_t n_out, n_in, n_rows;
    uint8_t *w;
    float *x;
    float *mag; /* [n_rows][n_out] sum |w x| */
    float *ref; /* [n_rows][n_out] oracle */
    float *act; /* [n_rows][n_out] the 8-bit activation rounding bound (0 for float types) */
} problem;

static int problem_init(problem *p, rng_state *r, uint32_t type, size_t n_out, size_t n_in, size_t n_rows) {
    memset(p, 0, sizeof *p);
    p->type = type, p->n_out = n_out, p->n_in = n_in, p->n_rows = n_rows;
    const size_t rb = quant_row_bytes(type, n_in);
    p->w = mem_alloc(rb * n_out + 1);
    p->x = mem_alloc(n_rows * n_in * sizeof(float));
    p->mag = mem_alloc(n_rows * n_out * sizeof(float));
    p->ref = mem_alloc(n_rows * n_out * sizeof(float));
    p->act = mem_alloc(n_rows * n_out * sizeof(float));
    float *src = mem_alloc(n_in * sizeof(float));
    float *deq = mem_alloc(n_out * n_in * sizeof(float));
    if (!p->w || !p->x || !p->mag || !p->ref || !p->act || !src || !deq) {
        mem_free(src);
        mem_free(deq);
        return -1;
    }
    for (size_t o = 0; o < n_out; o++) {
        for (size_t k = 0; k < n_in; k++) src[k] = rng_normal(r) * 0.1f;
        quant_quantize_row(type, src, p->w + o * rb, n_in);
        quant_dequantize_row_scalar(type, p->w + o * rb, deq + o * n_in, n_in);
    }
    for (size_t i = 0; i < n_rows * n_in; i++) p->x[i] = rng_normal(r);
    matmul_scalar(type, p->w, n_out, n_in, p->x, n_rows, p->ref);
    int bad_oracle = 0;
    for (size_t rr = 0; rr < n_rows; rr++) {
        for (size_t o = 0; o < n_out; o++) {
            double s = 0, m = 0;
            for (size_t k = 0; k < n_in; k++) {
                const double t = (double)deq[o * n_in + k] * p->x[rr * n_in + k];
                s += t;
                m += fabs(t);
            }
            p->mag[rr * n_out + o] = (float)m;
            const size_t ab = type == QUANT_Q8_0 ? 32 : quant_block_elems(type) == 256 ? 256 : 0;
            double bound = 0;
            for (size_t b0 = 0; ab && b0 < n_in; b0 += ab) {
                double amax = 0, wsum = 0;
                for (size_t k = b0; k < b0 + ab; k++) {
                    amax = fmax(amax, fabs(p->x[rr * n_in + k]));
                    wsum += fabs(deq[o * n_in + k]);
                }
                bound += amax / 254.0 * wsum * (1 + 1e-4);
            }
            p->act[rr * n_out + o] = (float)bound;
            if (!(fabs(s - p->ref[rr * n_out + o]) <= 1e-6 * m + 1e-30)) bad_oracle++;
        }
    }
    CHECK_MSG(bad_oracle == 0, "%s: %d oracle outputs off", quant_type_name(type), bad_oracle);
    mem_free(src);
    mem_free(deq);
    return 0;
}

static void problem_free(problem *p) {
    mem_free(p->w);
    mem_free(p->x);
    mem_free(p->mag);
    mem_free(p->ref);
    mem_free(p->act);
}

/* Runs matmul on pool into a buffer with canaries on both sides; checks
 * against the oracle and returns the result in out (n_rows * n_out). */
static void run_and_check(const problem *p, threadpool *pool, const char *pool_name, float *out) {
    const size_t n = p->n_rows * p->n_out;
    float *buf = mem_alloc((n + 2 * CANARY) * sizeof(float));
    if (!buf) {
        CHECK(buf != NULL);
        return;
    }
    for (size_t i = 0; i < n + 2 * CANARY; i++) buf[i] = -12345.0f;
    float *y = buf + CANARY;
    matmul(pool, p->type, p->w, p->n_out, p->n_in, p->x, p->n_rows, y);
    int bad = 0, canary = 0;
    for (size_t i = 0; i < CANARY; i++) canary += (buf[i] != -12345.0f) + (y[n + i] != -12345.0f);
    for (size_t i = 0; i < n; i++) {
        const double tol = 1e-5 * p->mag[i] + (quant_simd_active() ? p->act[i] : 0.0) + 1e-30;
        if (!(fabs((double)y[i] - p->ref[i]) <= tol)) {
            if (bad < 3)
                fprintf(stderr, "  %s %s out=%zu in=%zu rows=%zu: y[%zu] = %.9g, oracle %.9g\n",
                        quant_type_name(p->type), pool_name, p->n_out, p->n_in, p->n_rows, i, y[i], p->ref[i]);
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "%s %s out=%zu in=%zu rows=%zu: %d outputs off", quant_type_name(p->type), pool_name, p->n_out,
              p->n_in, p->n_rows, bad);
    CHECK_MSG(canary == 0, "%s: matmul wrote outside y", quant_type_name(p->type));
    memcpy(out, y, n * sizeof(float));
    mem_free(buf);
}

static size_t inner_sizes(uint32_t type, size_t *out) {
    size_t n = 0;
    if (quant_block_elems(type) == 1) {
        out[n++] = 1, out[n++] = 7, out[n++] = 13, out[n++] = 33, out[n++] = 520;
    } else if (type == QUANT_Q8_0) {
        out[n++] = 32, out[n++] = 96, out[n++] = 544; /* 1, 3, 17 blocks; 544 crosses a 512 tile */
    } else {
        out[n++] = 256, out[n++] = 768; /* 1 and 3 blocks; 768 crosses a tile */
    }
    return n;
}

static void test_matmul_small_shapes(void) {
    threadpool *pool1 = NULL, *pool2 = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool1, 1, &err), CLOVER_OK);
    CHECK_EQ_INT(threadpool_create(&pool2, 2, &err), CLOVER_OK);
    static const size_t outs[] = {1, 3, 5, 13, 37};
    rng_state r;
    rng_seed(&r, 7);
    static float y0[9 * 37], y1[9 * 37], y2[9 * 37];
    for (size_t t = 0; t < sizeof all_types / sizeof all_types[0]; t++) {
        size_t ins[8];
        const size_t n_ins = inner_sizes(all_types[t], ins);
        for (size_t ii = 0; ii < n_ins; ii++) {
            for (size_t oi = 0; oi < sizeof outs / sizeof outs[0]; oi++) {
                problem p;
                if (problem_init(&p, &r, all_types[t], outs[oi], ins[ii], 9) != 0) {
                    CHECK(!"allocation failed");
                    continue;
                }
                const size_t n_out = outs[oi];
                for (size_t rows = 1; rows <= 9; rows++) {
                    problem q = p; /* the first `rows` activation rows of the same problem */
                    q.n_rows = rows;
                    float *mag = mem_alloc(rows * n_out * sizeof(float));
                    float *ref = mem_alloc(rows * n_out * sizeof(float));
                    float *act = mem_alloc(rows * n_out * sizeof(float));
                    for (size_t rr = 0; rr < rows; rr++) {
                        memcpy(mag + rr * n_out, p.mag + rr * n_out, n_out * sizeof(float));
                        memcpy(ref + rr * n_out, p.ref + rr * n_out, n_out * sizeof(float));
                        memcpy(act + rr * n_out, p.act + rr * n_out, n_out * sizeof(float));
                    }
                    q.mag = mag, q.ref = ref, q.act = act;
                    run_and_check(&q, NULL, "no pool", y0);
                    run_and_check(&q, pool1, "pool of 1", y1);
                    run_and_check(&q, pool2, "pool of 2", y2);
                    CHECK_MSG(memcmp(y0, y1, rows * n_out * sizeof(float)) == 0 &&
                                  memcmp(y0, y2, rows * n_out * sizeof(float)) == 0,
                              "%s: results depend on the pool", quant_type_name(all_types[t]));
                    mem_free(mag);
                    mem_free(ref);
                    mem_free(act);
                }
                problem_free(&p);
            }
        }
    }
    threadpool_free(pool1);
    threadpool_free(pool2);
}

/* More rows than one activation block (64), more columns than one tile
 * (512), an output count that leaves a partial tile. */
static void test_matmul_block_boundaries(void) {
    threadpool *pool2 = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool2, 2, &err), CLOVER_OK);
    rng_state r;
    rng_seed(&r, 99);
    for (size_t t = 0; t < sizeof all_types / sizeof all_types[0]; t++) {
        const uint32_t type = all_types[t];
        const size_t n_in = quant_block_elems(type) == 1 ? 1283 : 1280; /* 5 K-blocks, 40 Q8_0 blocks */
        problem p;
        if (problem_init(&p, &r, type, 67, n_in, 70) != 0) {
            CHECK(!"allocation failed");
            continue;
        }
        float *out = mem_alloc(70 * 67 * sizeof(float));
        run_and_check(&p, pool2, "pool of 2", out);
        run_and_check(&p, NULL, "no pool", out);
        mem_free(out);
        problem_free(&p);
    }
    threadpool_free(pool2);
}

/* Degenerate shapes: no inputs gives zeros; no outputs or no rows touches nothing. */
static void test_matmul_empty(void) {
    threadpool *pool2 = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool2, 2, &err), CLOVER_OK);
    float y[5 * 7], x[5] = {1, 2, 3, 4, 5};
    const uint8_t w[1] = {0};
    for (size_t t = 0; t < sizeof all_types / sizeof all_types[0]; t++) {
        for (size_t i = 0; i < 5 * 7; i++) y[i] = -1.0f;
        matmul(pool2, all_types[t], w, 7, 0, x, 5, y);
        for (size_t i = 0; i < 5 * 7; i++) CHECK(y[i] == 0.0f);
        for (size_t i = 0; i < 5 * 7; i++) y[i] = -1.0f;
        matmul(pool2, all_types[t], w, 0, 256, x, 5, y);
        matmul(pool2, all_types[t], w, 7, 256, x, 0, y);
        for (size_t i = 0; i < 5 * 7; i++) CHECK(y[i] == -1.0f);
    }
    threadpool_free(pool2);
}

/* matmul_thread_seconds: a product adds its wall time to the calling thread's count, once however its entry
 * points nest (matmul_grouped runs through matmul_grouped_batch_after and matmul_batch_after), and a product of
 * another thread adds nothing to this one's. */
static void *other_thread_product(void *arg) {
    const float *x = arg;
    float *y = malloc(32 * 512 * sizeof *y);
    uint8_t *w = calloc(512, quant_row_bytes(QUANT_Q8_0, 1024));
    if (y && w) matmul(NULL, QUANT_Q8_0, w, 512, 1024, x, 32, y);
    free(y), free(w);
    return NULL;
}

static void test_matmul_thread_seconds(void) {
    threadpool *pool2 = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool2, 2, &err), CLOVER_OK);
    const size_t n_out = 512, n_in = 1024, rows = 32, rb = quant_row_bytes(QUANT_Q8_0, n_in);
    uint8_t *w = calloc(n_out, rb);
    float *x = malloc(rows * n_in * sizeof *x), *y = malloc(rows * n_out * sizeof *y);
    CHECK(w && x && y);
    if (!w || !x || !y) goto done;
    for (size_t i = 0; i < rows * n_in; i++) x[i] = (float)((i * 7919) % 97) / 97.0f - 0.5f;
    for (int form = 0; form < 2; form++) {
        const double s0 = matmul_thread_seconds(), t0 = timer_now();
        for (int rep = 0; rep < 20; rep++)
            if (form == 0)
                matmul(pool2, QUANT_Q8_0, w, n_out, n_in, x, rows, y);
            else
                matmul_grouped(pool2, QUANT_Q8_0, w, n_out, n_in, x, rows, y, NULL);
        const double wall = timer_now() - t0, in = matmul_thread_seconds() - s0;
        printf("     %s: %.3f ms counted of %.3f ms\n", form ? "matmul_grouped" : "matmul", 1e3 * in, 1e3 * wall);
        CHECK_MSG(in > 0 && in <= wall, "counted %.9f s of a %.9f s wall", in, wall);
    }
    pthread_t th;
    const double s0 = matmul_thread_seconds();
    CHECK_EQ_INT(pthread_create(&th, NULL, other_thread_product, x), 0);
    pthread_join(th, NULL);
    CHECK(matmul_thread_seconds() == s0);
done:
    free(w), free(x), free(y);
    threadpool_free(pool2);
}

int main(void) {
    if (!quant_simd_active()) printf("     (no SIMD on this CPU or CLOVER_NO_SIMD set: testing the portable path)\n");
    RUN(test_matmul_small_shapes);
    RUN(test_matmul_block_boundaries);
    RUN(test_matmul_empty);
    RUN(test_matmul_thread_seconds);
    return TEST_EXIT();
}
