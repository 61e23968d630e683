/*
 * simd_level.c: the AVX-512 VNNI and AMX probes (simd_level.h). CPUID leaf
 * 7 names the instructions; XGETBV says whether the OS saves the opmask and
 * ZMM registers (XCR0 bits 1, 2, 5, 6, 7) and the tile state (bits 17, 18),
 * without which they may not be used. Linux also wants each process to ask
 * for the tile data state before its first tile instruction
 * (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); without it the
 * first tile instruction faults): asked here, once, whenever the CPU has
 * AMX, so that a test may call the AMX kernel with the level switched off.
 * Read by hand rather than through __builtin_cpu_supports, whose feature
 * names differ between gcc and clang versions.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* syscall */
#endif
#include "quant/simd_level.h"

#include <pthread.h>
#include <stdlib.h>

#include "quant/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

enum {
    ARCH_REQ_XCOMP_PERM_ = 0x1023, /* <asm/prctl.h>'s ARCH_REQ_XCOMP_PERM (older headers lack it) */
    XFEATURE_XTILEDATA_ = 18,
};

static pthread_once_t level_once = PTHREAD_ONCE_INIT;
static bool avx512_ok, avx512_on, amx_ok, amx_on, bsum512_on;
static int amx_flight = 4;

static bool env_set(const char *name) {
    const char *v = getenv(name);
    return v && v[0] && !(v[0] == '0' && v[1] == '\0');
}

/* The OS's permission for this process to use the tile data state. */
static bool amx_permission(void) {
#if defined(__linux__) && defined(__x86_64__)
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM_, XFEATURE_XTILEDATA_) == 0;
#else
    return false;
#endif
}

static void level_detect(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        const bool isa = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) && (c & (1u << 11));
        const bool amx_isa = (d & (1u << 24)) && (d & (1u << 25)); /* AMX-TILE, AMX-INT8 */
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        (void)hi;
        avx512_ok = isa && (lo & 0xE6u) == 0xE6u;
        amx_ok = avx512_ok && amx_isa && (lo & 0x60000u) == 0x60000u && amx_permission();
    }
#endif
#ifdef CLOVER_SIMD_LEVEL_FAKE_AMX /* test_matmul_amx_emu only: this source with emulated tiles */
    amx_ok = avx512_ok;
#endif
    avx512_on = avx512_ok && quant_simd_active() && !env_set("CLOVER_NO_AVX512");
    amx_on = amx_ok && avx512_on && !env_set("CLOVER_NO_AMX");
    const char *bsum = getenv("CLOVER_BSUM512"); /* on unless "0" */
    bsum512_on = amx_on && !(bsum && bsum[0] == '0' && bsum[1] == '\0');
    const char *flight = getenv("CLOVER_AMX_FLIGHT");
    if (flight && flight[0] == '2' && flight[1] == '\0') amx_flight = 2;
}

bool quant_avx512_supported(void) {
    pthread_once(&level_once, level_detect);
    return avx512_ok;
}

bool quant_avx512_active(void) {
    pthread_once(&level_once, level_detect);
    return avx512_on;
}

bool quant_amx_supported(void) {
    pthread_once(&level_once, level_detect);
    return amx_ok;
}

bool quant_amx_active(void) {
    pthread_once(&level_once, level_detect);
    return amx_on;
}

bool quant_bsum512_active(void) {
    pthread_once(&level_once, level_detect);
    return bsum512_on;
}

int quant_amx_flight(void) {
    pthread_once(&level_once, level_detect);
    return amx_flight;
}

int quant_simd_level(void) {
    if (quant_amx_active()) return QUANT_LEVEL_AMX;
    if (quant_avx512_active()) return QUANT_LEVEL_AVX512;
    return quant_simd_active() ? QUANT_LEVEL_AVX2 : QUANT_LEVEL_SCALAR;
}

const char *quant_simd_level_name(void) {
    static const char *const names[] = {"scalar", "avx2", "avx512-vnni", "amx"};
    return names[quant_simd_level()];
}
