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

static void test_matmul_rows(void) { gl_matmul_rows(12, 29, NULL); }

int main(void) {
    if (!quant_avx512_supported()) TEST_SKIP("the CPU lacks AVX-512 VNNI (avx512f/bw/vl/vnni)");
    printf("level: %s\n", quant_simd_level_name());
    if (quant_simd_active()) RUN(test_kernel_levels);
    RUN(test_matmul_rows);
    return TEST_EXIT();
}
