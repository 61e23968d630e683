/*
 * version.c: `clover --version`: what a bug report needs in one screen: the
 * version, the commit it was built from, and which backends this binary
 * carries (a CPU build and a CUDA build are different programs, and an
 * x86 build carries the AVX2 and AVX-512 VNNI kernels), with which of them
 * this machine's CPU runs (quant/simd_level.h decides, once per process). The commit and the
 * CUDA architecture come from CMake (CLOVER_GIT_COMMIT, CLOVER_CUDA_ARCH).
 */
#include "version.h"

#include <stdio.h>

#include "clover.h"
#include "quant/simd_level.h"

#ifndef CLOVER_GIT_COMMIT
#define CLOVER_GIT_COMMIT "unknown"
#endif

void cli_print_version(FILE *out) {
    fprintf(out, "clover %s (commit %s)\n", clover_version(), CLOVER_GIT_COMMIT);
    fprintf(out, "backends: cpu (avx2, avx512-vnni)");
#ifdef CLOVER_CUDA_ARCH
    fprintf(out, ", cuda (%s)", CLOVER_CUDA_ARCH);
#endif
    fprintf(out, "\n");
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    fprintf(out, "this CPU: %s%s (the %s kernels run)\n", avx2 ? "avx2 + fma" : "no avx2",
            quant_avx512_supported() ? " + avx512 vnni" : "", quant_simd_level_name());
#endif
#ifndef CLOVER_CUDA_ARCH
    fprintf(out, "built without CUDA (configure with a CUDA toolkit for the GPU backend)\n");
#endif
}
