/*
 * test_gemm_amx_emu.c: gemm_amx.c's source compiled against amx_emu.h (each
 * tile instruction in C) and avx512_emu.h (its float step's AVX-512
 * intrinsics as AVX2 work on two halves), then checked by amx_levels.h: bit
 * for bit against the scalar oracle of the whole-block order and the AMX
 * level's one-row dot (act_bsum_avx2.c), rows 1..64 and past the kernel's
 * groups and passes, odd block counts, partial weight tiles, with four
 * blocks in flight (the default) and two (CLOVER_AMX_FLIGHT=2), the K-quant
 * forms the switches select (al_forms: chunk sizes, the row-at-a-time
 * unpack, the pipelined panel kernel); the
 * repacked Q4_K panels (gemm_amx_pack.h) against the unpacking kernel and
 * the oracle, bit for bit, rows 1..64 and past the groups, odd shapes,
 * pipelined or not, tasks split on and off a tile boundary, a tile another
 * task is still filling; the packs' bookkeeping; and the one-row dot alone
 * against the oracle. This runs on every AVX2 CPU, so the
 * kernel's tile bookkeeping is checked in CI and on development machines,
 * which have no AMX; the instructions themselves are checked by
 * test_quant_amx where the CPU has them. Compiled with -mavx2 -mfma -mf16c
 * (tests/CMakeLists.txt).
 */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "unit/amx_emu.h"
#include "unit/avx512_emu.h"

#include "quant/simd_level.h"

/* Both kernel variants (CLOVER_AMX_FLIGHT), which must give the same bits. */
static int emu_flight = 4;
#define quant_amx_flight() emu_flight
#define matmul_rows_gemm_amx matmul_rows_gemm_amx_emu
#include "../../src/quant/gemm_amx.c"
#undef matmul_rows_gemm_amx
#undef quant_amx_flight

#include "quant/quant.h"
#include "unit/amx_levels.h"

static void test_one_row_dot(void) { al_one_row(); }

static void emu_set_flight(int flight) { emu_flight = flight; }

/* The full sweep with four blocks in flight, and with two on its cases at the spread's row counts (the quick
 * sweep's cases: one set of inputs and references a case for both), then the K-quant forms with four. */
static void test_emulated_kernel(void) {
    static const al_form flights[] = {{NULL, NULL, 0, 4, 0}, {NULL, NULL, 0, 2, 1}};
    al_set_flight = emu_set_flight;
    al_all(matmul_rows_gemm_amx_emu, flights, 2);
    al_forms(matmul_rows_gemm_amx_emu);
    CHECK_MSG(emu_amx_faults == 0, "%d tile operations would fault (unconfigured, bad shape or released)", emu_amx_faults);
}

static void test_repacked_q4k(void) {
    al_repacked(matmul_rows_gemm_amx_emu);
    CHECK_MSG(emu_amx_faults == 0, "%d tile operations would fault", emu_amx_faults);
}

static void test_repack_bookkeeping(void) { al_repack_bookkeeping(); }

int main(void) {
    setenv("CLOVER_AMX_Q4K_REPACK", "1", 1); /* the panels are off by default (gemm_amx_pack.h) */
    if (!quant_simd_active()) {
        const char *off = getenv("CLOVER_NO_SIMD");
        if (off && *off && strcmp(off, "0") != 0) TEST_SKIP("CLOVER_NO_SIMD is set: no AVX2 kernel to compare with");
        TEST_SKIP("the CPU lacks AVX2, FMA or F16C");
    }
    RUN(test_one_row_dot);
    RUN(test_emulated_kernel);
    RUN(test_repacked_q4k);
    RUN(test_repack_bookkeeping);
    return TEST_EXIT();
}
