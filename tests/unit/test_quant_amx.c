/*
 * test_quant_amx.c: the AMX level of the Q8_0 integer products
 * (gemm_amx.c, act_bsum_avx2.c) on a CPU that has it.
 *  1. The kernel itself on real tiles (amx_levels.h): rows 1..64 and past,
 *     odd shapes, partial tiles, bit for bit against the scalar oracle of
 *     the whole-block order and the AMX level's one-row decode dot.
 *  2. Through matmul at the level it picks here (AMX unless CLOVER_NO_AMX,
 *     CLOVER_NO_AVX512 or CLOVER_NO_SIMD is set): each row of an n-row
 *     Q8_0 product has the bits of that row's one-row product, with no pool
 *     and with 2 threads; at the AMX level those bits are the oracle's.
 * Exits 77 with "SKIP: the CPU lacks AMX ..." elsewhere (the CPU, or the
 * OS's permission for the tile state).
 */
#include <math.h>
#include <string.h>

#include "base/threadpool.h"
#include "quant/matmul.h"
#include "quant/simd_level.h"
#include "unit/amx_levels.h"

static void test_kernel(void) { al_all(matmul_rows_gemm_amx, 0); }

static void test_matmul_rows(void) {
    threadpool *pool = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool, 2, &err), CLOVER_OK);
    rng_state r;
    rng_seed(&r, 3131);
    const int amx = quant_simd_level() == QUANT_LEVEL_AMX;
    const size_t n_in = 2080, n_out = 37, n_rows = 70, nb = n_in / QUANT_QK8_0;
    const size_t rb = quant_row_bytes(QUANT_Q8_0, n_in), xqb = quant_act_row_bytes(QUANT_Q8_0, n_in);
    uint8_t *w = mem_alloc(rb * n_out), *xq = mem_alloc(xqb);
    float *x = mem_alloc(n_rows * n_in * sizeof(float));
    float *y = mem_alloc(n_rows * n_out * sizeof(float)), *y1 = mem_alloc(n_rows * n_out * sizeof(float));
    if (!w || !xq || !x || !y || !y1) {
        CHECK(!"allocation failed");
    } else {
        gl_fill_weights(&r, QUANT_Q8_0, w, n_out, n_in, 1);
        for (size_t i = 0; i < n_rows * n_in; i++) x[i] = rng_normal(&r);
        for (size_t rr = 0; rr < n_rows; rr++) matmul(NULL, QUANT_Q8_0, w, n_out, n_in, x + rr * n_in, 1, y1 + rr * n_out);
        int bad_oracle = 0;
        for (size_t rr = 0; rr < n_rows && amx; rr++) {
            quant_act_quantize(QUANT_Q8_0, x + rr * n_in, xq, n_in);
            for (size_t o = 0; o < n_out; o++)
                bad_oracle += !al_same(y1[rr * n_out + o], al_oracle(w + o * rb, (const act_q8_32 *)(const void *)xq, nb));
        }
        CHECK_MSG(bad_oracle == 0, "%d one-row outputs differ from the whole-block oracle", bad_oracle);
        for (int p = 0; p < 2; p++)
            for (size_t n = 3; n <= n_rows; n += n < 20 ? 1 : 25) {
                matmul(p ? pool : NULL, QUANT_Q8_0, w, n_out, n_in, x, n, y);
                CHECK_MSG(memcmp(y, y1, n * n_out * sizeof(float)) == 0, "rows=%zu pool=%d: differs from one-row", n, p);
            }
    }
    mem_free(w), mem_free(xq), mem_free(x), mem_free(y), mem_free(y1);
    threadpool_free(pool);
}

int main(void) {
    if (!quant_amx_supported())
        TEST_SKIP("the CPU lacks AMX (amx_tile, amx_int8 with AVX-512 VNNI) or the OS does not grant its tile state");
    printf("level: %s\n", quant_simd_level_name());
    if (quant_simd_active()) RUN(test_kernel);
    RUN(test_matmul_rows);
    return TEST_EXIT();
}
