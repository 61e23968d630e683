/*
 * test_matmul_amx_emu.c: the AMX level through matmul and matmul_batch
 * (matmul.c's staging, buffer sizes and dispatch, act.c's one-row dots,
 * matmul_batch's shared 8-bit copies) on a CPU without AMX. This file
 * brings its own copies of the two library parts a real AMX CPU would run
 * differently: gemm_amx.c compiled against amx_emu.h / avx512_emu.h
 * (emulated tiles), and simd_level.c with CLOVER_SIMD_LEVEL_FAKE_AMX (the
 * AMX level on wherever the AVX-512 VNNI level is); linked against the
 * static library, they take the place of its members. Then amx_levels.h's
 * matmul checks: n rows against one row bit for bit, the one-row products
 * against the whole-block oracle, batches against products alone. (The
 * fake level found a real bug on its first run: a Q6_K item shared a
 * Q5_K item's 8-bit copy, which the AMX level stages in another layout.)
 * Needs AVX-512 VNNI (the level's Q6_K products and the fake level sit on
 * it); skips elsewhere. Compiled with -mavx2 -mfma -mf16c.
 */
#include <immintrin.h>

#include "unit/amx_emu.h"
#include "unit/avx512_emu.h"

#include "../../src/quant/gemm_amx.c"
#define CLOVER_SIMD_LEVEL_FAKE_AMX 1
#include "../../src/quant/simd_level.c"

#include "unit/amx_levels.h"

static void test_matmul_rows(void) { al_matmul_rows(); }

static void test_batch(void) { al_batch(); }

static void test_batch_moe(void) { al_batch_moe(); }

static void test_split(void) { al_split(); }

static void test_matmul_repacked(void) { al_matmul_repacked(); }

int main(void) {
    setenv("CLOVER_AMX_Q4K_REPACK", "1", 1); /* the panels are off by default (gemm_amx_pack.h) */
    if (!quant_avx512_supported()) TEST_SKIP("the CPU lacks AVX-512 VNNI (the fake AMX level sits on it)");
    if (!quant_amx_active()) TEST_SKIP("a level switch is set (CLOVER_NO_AMX, CLOVER_NO_AVX512 or CLOVER_NO_SIMD)");
    printf("level: %s (emulated tiles)\n", quant_simd_level_name());
    RUN(test_matmul_rows);
    RUN(test_batch);
    RUN(test_batch_moe);
    RUN(test_split);
    RUN(test_matmul_repacked);
    CHECK_MSG(emu_amx_faults == 0, "%d tile operations would fault", emu_amx_faults);
    return TEST_EXIT();
}
