/*
 * simd_level.h: which instruction-set level the quantised products run at,
 * decided once per process from CPUID and the environment.
 *
 * Levels: scalar (no AVX2, or CLOVER_NO_SIMD=1), AVX2 (quant_simd_active),
 * AVX-512 VNNI (avx512f + bw + vl + vnni with the OS saving ZMM state;
 * CLOVER_NO_AVX512=1 keeps such a CPU at the AVX2 level), and AMX (the
 * AVX-512 level plus amx_tile + amx_int8, the OS enabling the tile state in
 * XCR0 and granting this process its use, arch_prctl(ARCH_REQ_XCOMP_PERM);
 * CLOVER_NO_AMX=1 keeps such a CPU at the AVX-512 level, and either switch
 * above turns it off too).
 *
 * The AVX2 and AVX-512 levels give the integer products the same bits
 * (gemm_avx512.c's header), so their switch exists for tests and
 * benchmarks. The AMX level changes the Q8_0, Q4_K and Q5_K arithmetic
 * (act_bsum_avx2.c's header: each block's or sub-block's whole integer sum,
 * then one float FMA each, in its one-row dots as in its tile kernel,
 * gemm_amx.c): at that level one row still gives the bits of any row count,
 * but those types' results differ from the other levels' by float
 * summation order (bounded like the scalar oracle's). Q6_K keeps the
 * AVX-512 level's kernel and bits there.
 */
#ifndef CLOVER_QUANT_SIMD_LEVEL_H
#define CLOVER_QUANT_SIMD_LEVEL_H

#include <stdbool.h>

enum { QUANT_LEVEL_SCALAR = 0, QUANT_LEVEL_AVX2 = 1, QUANT_LEVEL_AVX512 = 2, QUANT_LEVEL_AMX = 3 };

/* True when the CPU and OS support the AVX-512 VNNI kernels (ignores the
 * environment): tests use it to decide whether *_avx512 may be called. */
bool quant_avx512_supported(void);
/* True when the AVX-512 VNNI kernels are in use: supported, the AVX2 level
 * active, and neither CLOVER_NO_AVX512 nor CLOVER_NO_SIMD set. */
bool quant_avx512_active(void);
/* True when the CPU has AMX int8 and AVX-512 VNNI, the OS enables the tile
 * state and granted this process its use (ignores the environment): tests
 * use it to decide whether *_amx may be called. */
bool quant_amx_supported(void);
/* True when the AMX level is in use: supported, the AVX-512 level active,
 * and CLOVER_NO_AMX not set. */
bool quant_amx_active(void);
/* True when the AMX level's one-row dots run on AVX-512 VNNI
 * (act_bsum_avx512.c, the same bits as act_bsum_avx2.c's): the AMX level
 * active and CLOVER_BSUM512=0 not set. */
bool quant_bsum512_active(void);
/* The AMX kernel's blocks in flight (gemm_amx.c): 4, or 2 with
 * CLOVER_AMX_FLIGHT=2 (a benchmark knob: the bits are the same). */
int quant_amx_flight(void);
/* The active level (QUANT_LEVEL_*), and its name for logs and benches. */
int quant_simd_level(void);
const char *quant_simd_level_name(void);

#endif
