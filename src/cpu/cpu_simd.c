/* cpu_simd.c: the one-time CPU feature decision of the operators. */
#include "cpu/cpu_simd.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t simd_once = PTHREAD_ONCE_INIT;
static bool simd_supported;
static bool simd_active;

static void simd_decide(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    simd_supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    simd_supported = false;
#endif
    const char *off = getenv("CLOVER_NO_SIMD");
    simd_active = simd_supported && !(off && *off && strcmp(off, "0") != 0);
}

bool cpu_simd_active(void) {
    pthread_once(&simd_once, simd_decide);
    return simd_active;
}

bool cpu_simd_supported(void) {
    pthread_once(&simd_once, simd_decide);
    return simd_supported;
}

bool cpu_grouped(void) {
    const char *e = getenv("CLOVER_CPU_GROUPED");
    return !(e && *e && strcmp(e, "0") == 0);
}
