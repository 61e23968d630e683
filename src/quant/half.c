/*
 * half.c: IEEE binary16 and bfloat16 conversions in portable integer code.
 *
 * They are the oracle for the F16C instructions used by the fast paths, so
 * they handle every class exactly: subnormals both ways, infinities, NaN
 * (quietened, sign and top payload bits kept) and round-to-nearest-even on
 * the way down, ties included (ggml's rounding, so files match bit for bit).
 */
#include <string.h>

#include "quant/quant.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float quant_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (man << 13)); /* inf, NaN */
    if (exp != 0) return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
    if (man == 0) return f32_from_bits(sign); /* signed zero */
    /* Subnormal: man * 2^-24, exact in f32 (normalise the mantissa). */
    int e = 113; /* biased f32 exponent of 2^-14 */
    while (!(man & 0x400)) {
        man <<= 1;
        e--;
    }
    return f32_from_bits(sign | ((uint32_t)e << 23) | ((man & 0x3ff) << 13));
}

/* Rounds m >> shift to nearest, ties to even. shift is 1..31. */
static uint32_t shift_round_even(uint32_t m, unsigned shift) {
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return q;
}

uint16_t quant_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((x >> 13) & 0x3ff)); /* NaN, quiet */
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);                      /* >= 65520 (and inf) -> inf */
    if (x >= 0x38800000u) {                                                      /* normal half: >= 2^-14 */
        uint32_t rebased = x - (112u << 23);                                     /* exponent 127 -> 15 */
        return (uint16_t)(sign | shift_round_even(rebased, 13));
    }
    if (x < 0x33000000u) return sign; /* below 2^-25: rounds to zero */
    /* Subnormal half: value = m * 2^(e-150); in units of 2^-24 that is m >> (126-e). */
    uint32_t e = x >> 23;
    uint32_t m = (x & 0x7fffffu) | 0x800000u;
    return (uint16_t)(sign | shift_round_even(m, 126 - e)); /* may round up to 0x0400: fine */
}

float quant_bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

uint16_t quant_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* NaN, quiet */
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}
