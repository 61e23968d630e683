/*
 * simd_level.c: the AVX-512 VNNI probe (simd_level.h). CPUID leaf 7 names
 * the instructions; XGETBV says whether the OS saves the opmask and ZMM
 * registers (XCR0 bits 1, 2, 5, 6, 7), without which they may not be used.
 * Read by hand rather than through __builtin_cpu_supports, whose feature
 * names differ between gcc and clang versions.
 */
#include "quant/simd_level.h"

#include <pthread.h>
#include <stdlib.h>

#include "quant/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static pthread_once_t level_once = PTHREAD_ONCE_INIT;
static bool avx512_ok, avx512_on;

static bool env_set(const char *name) {
    const char *v = getenv(name);
    return v && v[0] && !(v[0] == '0' && v[1] == '\0');
}

static void level_detect(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        const bool isa = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) && (c & (1u << 11));
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        (void)hi;
        avx512_ok = isa && (lo & 0xE6u) == 0xE6u;
    }
#endif
    avx512_on = avx512_ok && quant_simd_active() && !env_set("CLOVER_NO_AVX512");
}

bool quant_avx512_supported(void) {
    pthread_once(&level_once, level_detect);
    return avx512_ok;
}

bool quant_avx512_active(void) {
    pthread_once(&level_once, level_detect);
    return avx512_on;
}

int quant_simd_level(void) {
    if (quant_avx512_active()) return QUANT_LEVEL_AVX512;
    return quant_simd_active() ? QUANT_LEVEL_AVX2 : QUANT_LEVEL_SCALAR;
}

const char *quant_simd_level_name(void) {
    static const char *const names[] = {"scalar", "avx2", "avx512-vnni"};
    return names[quant_simd_level()];
}
