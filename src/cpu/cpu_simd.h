/*
 * cpu_simd.h: whether the operators of src/cpu/ take their AVX2+FMA paths.
 * Decided once per process (CPU support, and CLOVER_NO_SIMD=1 turns the fast
 * paths off to diagnose a suspected SIMD bug against the scalar oracles).
 * Every operator keeps its *_scalar oracle callable directly, so tests can
 * compare the two on the same machine.
 */
#ifndef CLOVER_CPU_SIMD_H
#define CLOVER_CPU_SIMD_H

#include <stdbool.h>

/* True when the CPU has AVX2 and FMA and CLOVER_NO_SIMD is not set. */
bool cpu_simd_active(void);
/* True when the CPU has AVX2 and FMA (ignores CLOVER_NO_SIMD): tests use it
 * to decide whether the *_avx2 functions may be called at all. */
bool cpu_simd_supported(void);

#endif
