/*
 * test_quant_amx.c: the AMX level of the Q8_0 / Q4_K / Q5_K integer
 * products (gemm_amx.c, act_bsum_avx2.c) on a CPU that has it.
 *  1. The kernel itself on real tiles (amx_levels.h): rows 1..64 and past,
 *     odd shapes, partial tiles, bit for bit against the scalar oracle of
 *     the whole-block order and the AMX level's one-row decode dot; again
 *     for each K-quant form the switches select (al_forms). Not under the
 *     sanitizers' ctest, where test_gemm_amx_emu runs this sweep (main).
 *  2. Through matmul at the level it picks here (AMX unless CLOVER_NO_AMX,
 *     CLOVER_NO_AVX512 or CLOVER_NO_SIMD is set): each row of an n-row
 *     product (Q8_0, Q4_K, Q5_K, and Q6_K, which stays on the AVX-512
 *     kernels) has the bits of that row's one-row product, with no pool and
 *     with 2 threads; at the AMX level those bits are the oracle's.
 *  3. matmul_batch with items of every type on one x (shared 8-bit copies)
 *     against each product alone.
 * Exits 77 with "SKIP: the CPU lacks AMX ..." elsewhere (the CPU, or the
 * OS's permission for the tile state).
 */
#include <math.h>
#include <string.h>

#include "quant/simd_level.h"
#include "unit/amx_levels.h"

static void test_kernel(void) {
    al_all(matmul_rows_gemm_amx, NULL, 0);
    al_forms(matmul_rows_gemm_amx);
}

static void test_matmul_rows(void) { al_matmul_rows(); }

static void test_batch(void) { al_batch(); }

static void test_batch_moe(void) { al_batch_moe(); }

static void test_split(void) { al_split(); }

static void test_repacked_q4k(void) { al_repacked(matmul_rows_gemm_amx); }

static void test_matmul_repacked(void) { al_matmul_repacked(); }

int main(void) {
    setenv("CLOVER_AMX_Q4K_REPACK", "1", 1); /* the panels are off by default (gemm_amx_pack.h) */
    if (!quant_amx_supported())
        TEST_SKIP("the CPU lacks AMX (amx_tile, amx_int8 with AVX-512 VNNI) or the OS does not grant its tile state");
    printf("level: %s\n", quant_simd_level_name());
    /* The sanitizer build's ctest sets CLOVER_TEST_KERNEL_SWEEP_EMU=1 (tests/CMakeLists.txt): there the sweep of
     * test_kernel runs in test_gemm_amx_emu (the same seeds, cases and forms, on gemm_amx.c's source with every tile
     * access in C, where ASan sees it), and this binary's other cases still run the library's kernel through matmul */
    const char *emu = getenv("CLOVER_TEST_KERNEL_SWEEP_EMU");
    if (quant_simd_active() && !(emu && strcmp(emu, "1") == 0)) RUN(test_kernel);
    RUN(test_matmul_rows);
    RUN(test_batch);
    RUN(test_batch_moe);
    RUN(test_split);
    if (quant_simd_active()) RUN(test_repacked_q4k);
    RUN(test_matmul_repacked);
    return TEST_EXIT();
}
