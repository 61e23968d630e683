/*
 * test_gemm_avx512_emu.c: gemm_avx512.c's source compiled against
 * avx512_emu.h (each AVX-512 intrinsic written as AVX2 work on two halves),
 * then checked by gemm_levels.h: bit for bit against the AVX2 kernel and the
 * one-row dot, and against the scalar oracle (the spread of row counts:
 * the emulation is slow, and the lanes do not depend on the row count
 * beyond the blocking the spread covers). This runs on every AVX2 CPU,
 * so the kernel's lane bookkeeping is checked in CI, which has no AVX-512;
 * the instructions themselves are checked by test_quant_avx512 where the
 * CPU has them. Compiled with -mavx2 -mfma -mf16c (tests/CMakeLists.txt).
 */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "unit/avx512_emu.h"

#define matmul_rows_gemm_avx512 matmul_rows_gemm_avx512_emu
#include "../../src/quant/gemm_avx512.c"
#undef matmul_rows_gemm_avx512

#include "quant/quant.h"
#include "unit/gemm_levels.h"

static void test_emulated_kernel(void) { gl_all(matmul_rows_gemm_avx512_emu, 1); }

int main(void) {
    if (!quant_simd_active()) {
        const char *off = getenv("CLOVER_NO_SIMD");
        if (off && *off && strcmp(off, "0") != 0) TEST_SKIP("CLOVER_NO_SIMD is set: no AVX2 kernel to compare with");
        TEST_SKIP("the CPU lacks AVX2, FMA or F16C");
    }
    RUN(test_emulated_kernel);
    return TEST_EXIT();
}
