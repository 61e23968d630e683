/*
 * simd_level.h: which instruction-set level the quantised products run at,
 * decided once per process from CPUID and the environment.
 *
 * Levels: scalar (no AVX2, or CLOVER_NO_SIMD=1), AVX2 (quant_simd_active),
 * and AVX-512 VNNI (avx512f + bw + vl + vnni with the OS saving ZMM state;
 * CLOVER_NO_AVX512=1 keeps such a CPU at the AVX2 level). Each level gives
 * the integer products the same bits (gemm_avx512.c's header), so the
 * switches exist for tests and benchmarks, not for correctness.
 */
#ifndef CLOVER_QUANT_SIMD_LEVEL_H
#define CLOVER_QUANT_SIMD_LEVEL_H

#include <stdbool.h>

enum { QUANT_LEVEL_SCALAR = 0, QUANT_LEVEL_AVX2 = 1, QUANT_LEVEL_AVX512 = 2 };

/* True when the CPU and OS support the AVX-512 VNNI kernels (ignores the
 * environment): tests use it to decide whether *_avx512 may be called. */
bool quant_avx512_supported(void);
/* True when the AVX-512 VNNI kernels are in use: supported, the AVX2 level
 * active, and neither CLOVER_NO_AVX512 nor CLOVER_NO_SIMD set. */
bool quant_avx512_active(void);
/* The active level (QUANT_LEVEL_*), and its name for logs and benches. */
int quant_simd_level(void);
const char *quant_simd_level_name(void);

#endif
