/*
 * act.c: the dispatch of quant.h's 8-bit activation path: which activation
 * block goes with which weight type, and the scalar or AVX2 kernels (the
 * same run-time choice as quant.c's; at the AMX level, simd_level.h, Q8_0,
 * Q4_K and Q5_K take the whole-block dots of act_bsum_avx512.c, or of
 * act_bsum_avx2.c with CLOVER_BSUM512=0: the same bits). Like quant.c, these trust their
 * preconditions (a type with an integer path, n a multiple of its block):
 * a broken one asserts in debug builds and yields NaN in release builds.
 */
#include <assert.h>
#include <math.h>

#include "quant/quant_internal.h"
#include "quant/simd_level.h"

/* The activation block of a weight type: 32 (Q8_0), 256 (K-quants), 0 (none). */
static size_t act_block(uint32_t type) {
    switch (type) {
    case QUANT_Q8_0: return QUANT_QK8_0;
    case QUANT_Q4_K:
    case QUANT_Q5_K:
    case QUANT_Q6_K: return QUANT_QK_K;
    default: return 0;
    }
}

size_t quant_act_row_bytes(uint32_t weight_type, size_t n) {
    const size_t be = act_block(weight_type);
    if (be == 0 || n % be) return 0;
    return n / be * (be == QUANT_QK8_0 ? sizeof(act_q8_32) : sizeof(act_q8_k));
}

static bool act_ok(uint32_t type, size_t n) {
    bool ok = quant_act_row_bytes(type, n) != 0 || n == 0;
    assert(ok && "no integer path for the type, or n not a multiple of its block");
    return ok;
}

static void act_quantize(uint32_t type, const float *x, void *xq, size_t n, bool simd) {
    if (!act_ok(type, n)) return;
    if (act_block(type) == QUANT_QK8_0)
        (simd ? quant_act_quantize_32_avx2 : quant_act_quantize_32_scalar)(x, xq, n);
    else
        (simd ? quant_act_quantize_k_avx2 : quant_act_quantize_k_scalar)(x, xq, n);
}

void quant_act_quantize_scalar(uint32_t weight_type, const float *x, void *xq, size_t n) {
    act_quantize(weight_type, x, xq, n, false);
}

void quant_act_quantize(uint32_t weight_type, const float *x, void *xq, size_t n) {
    act_quantize(weight_type, x, xq, n, quant_simd_active());
}

static quant_act_dot_fn act_kernel(uint32_t type, bool simd) {
    switch (type) {
    case QUANT_Q8_0: return simd ? quant_act_dot_q8_0_avx2 : quant_act_dot_q8_0_scalar;
    case QUANT_Q4_K: return simd ? quant_act_dot_q4_k_avx2 : quant_act_dot_q4_k_scalar;
    case QUANT_Q5_K: return simd ? quant_act_dot_q5_k_avx2 : quant_act_dot_q5_k_scalar;
    case QUANT_Q6_K: return simd ? quant_act_dot_q6_k_avx2 : quant_act_dot_q6_k_scalar;
    default: return NULL;
    }
}

/* The dot of the active level: the AMX level's Q8_0 / Q4_K / Q5_K dots sum
 * whole blocks or sub-blocks (act_bsum_avx512.c, or act_bsum_avx2.c with
 * CLOVER_BSUM512=0: the same bits), as its tile kernel does; every other
 * case is act_kernel's. */
static quant_act_dot_fn act_kernel_active(uint32_t type) {
    if (quant_bsum512_active()) { /* the same bits on AVX-512 VNNI (act_bsum_avx512.c); CLOVER_BSUM512=0: off */
        if (type == QUANT_Q8_0) return quant_act_dot_q8_0_bsum_avx512;
        if (type == QUANT_Q4_K) return quant_act_dot_q4_k_bsum_avx512;
        if (type == QUANT_Q5_K) return quant_act_dot_q5_k_bsum_avx512;
    }
    if (quant_amx_active()) {
        if (type == QUANT_Q8_0) return quant_act_dot_q8_0_bsum_avx2;
        if (type == QUANT_Q4_K) return quant_act_dot_q4_k_bsum_avx2;
        if (type == QUANT_Q5_K) return quant_act_dot_q5_k_bsum_avx2;
    }
    return act_kernel(type, quant_simd_active());
}

quant_act_dot_fn quant_act_dot_kernel(uint32_t weight_type) { return act_kernel_active(weight_type); }

quant_act_dot4_fn quant_act_dot4_kernel(uint32_t weight_type) {
    if (!quant_bsum512_active()) return NULL;
    switch (weight_type) {
    case QUANT_Q8_0: return quant_act_dot4_q8_0_bsum_avx512;
    case QUANT_Q4_K: return quant_act_dot4_q4_k_bsum_avx512;
    case QUANT_Q5_K: return quant_act_dot4_q5_k_bsum_avx512;
    default: return NULL;
    }
}

float quant_act_dot_scalar(uint32_t weight_type, const void *row, const void *xq, size_t n) {
    return act_ok(weight_type, n) ? act_kernel(weight_type, false)(row, xq, n) : NAN;
}

float quant_act_dot(uint32_t weight_type, const void *row, const void *xq, size_t n) {
    return act_ok(weight_type, n) ? act_kernel_active(weight_type)(row, xq, n) : NAN;
}
