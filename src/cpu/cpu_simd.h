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

/* Whether the passes spread their row-wise work between the products over
 * the pool (the preview's GDN block conv, the coreset's row softmaxes and
 * top-k, the MoE's routing, gather, SwiGLU and weighted sum; 16 experts a
 * product batch instead of 8). At 16 threads
 * that work, done on the calling thread, weighed ~0.4-0.7 ms a layer while
 * the pool's threads waited. CLOVER_CPU_GROUPED=0 (read at each call, for
 * A/B timing in one process) keeps the old order: the same bits either way. */
bool cpu_grouped(void);

#endif
