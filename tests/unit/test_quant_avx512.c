/*
 * test_quant_avx512.c: the AVX-512 VNNI level of the integer products
 * (gemm_avx512.c) on a CPU that has it.
 *  1. The kernel itself (gemm_levels.h): every type, rows 1..64 and past
 *     64, odd shapes, bit for bit against the AVX2 kernel and the one-row
 *     decode dot, and against the scalar oracle to float order.
 *  2. Through matmul: the level matmul picks here (simd_level.h: AVX-512
 *     unless CLOVER_NO_AVX512 or CLOVER_NO_SIMD is set) gives each row of
 *     an n-row product the bits of that row's one-row product, with no pool
 *     and with 2 threads.
 * Exits 77 with "SKIP: the CPU lacks AVX-512 VNNI" elsewhere.
 */
#include <math.h>
#include <string.h>

#include "base/threadpool.h"
#include "quant/matmul.h"
#include "quant/simd_level.h"
#include "unit/gemm_levels.h"

static void test_kernel_levels(void) { gl_all(matmul_rows_gemm_avx512, 0); }

static void test_matmul_rows(void) {
    static const uint32_t types[] = {QUANT_Q8_0, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K};
    threadpool *pool = NULL;
    clover_error err;
    CHECK_EQ_INT(threadpool_create(&pool, 2, &err), CLOVER_OK);
    rng_state r;
    rng_seed(&r, 3131);
    for (size_t t = 0; t < 4; t++) {
        const uint32_t type = types[t];
        const size_t n_in = type == QUANT_Q8_0 ? 2080 : 2304, n_out = 37, n_rows = 70;
        const size_t rb = quant_row_bytes(type, n_in);
        uint8_t *w = mem_alloc(rb * n_out);
        float *x = mem_alloc(n_rows * n_in * sizeof(float));
        float *y = mem_alloc(n_rows * n_out * sizeof(float)), *y1 = mem_alloc(n_rows * n_out * sizeof(float));
        if (!w || !x || !y || !y1) {
            CHECK(!"allocation failed");
        } else {
            gl_fill_weights(&r, type, w, n_out, n_in, (int)(t & 1));
            for (size_t i = 0; i < n_rows * n_in; i++) x[i] = rng_normal(&r);
            for (size_t rr = 0; rr < n_rows; rr++) matmul(NULL, type, w, n_out, n_in, x + rr * n_in, 1, y1 + rr * n_out);
            for (int p = 0; p < 2; p++) {
                for (size_t n = 3; n <= n_rows; n += n < 12 ? 1 : 29) {
                    matmul(p ? pool : NULL, type, w, n_out, n_in, x, n, y);
                    CHECK_MSG(memcmp(y, y1, n * n_out * sizeof(float)) == 0, "%s rows=%zu pool=%d: differs from one-row",
                              quant_type_name(type), n, p);
                }
            }
        }
        mem_free(w), mem_free(x), mem_free(y), mem_free(y1);
    }
    threadpool_free(pool);
}

int main(void) {
    if (!quant_avx512_supported()) TEST_SKIP("the CPU lacks AVX-512 VNNI (avx512f/bw/vl/vnni)");
    printf("level: %s\n", quant_simd_level_name());
    if (quant_simd_active()) RUN(test_kernel_levels);
    RUN(test_matmul_rows);
    return TEST_EXIT();
}
