/*
 * quant_internal.h: the block layouts of the supported types and the
 * functions the dispatcher (quant.c) chooses between.
 *
 * The layouts are llama.cpp's (ggml-common.h) byte for byte. The structs are
 * made of bytes only, so they have alignment 1 and can overlay any pointer
 * into a mapped file: a block at an odd address is legal and UBSan-clean.
 * Multi-byte fields are little-endian and read with quant_load_f16.
 */
#ifndef CLOVER_QUANT_INTERNAL_H
#define CLOVER_QUANT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant.h"

enum {
    QUANT_QK8_0 = 32, /* values per Q8_0 block */
    QUANT_QK_K = 256, /* values per K-quant super-block */
    QUANT_K_SCALE_BYTES = 12,
};

/* Q8_0: value i = d * qs[i]. */
typedef struct block_q8_0 {
    uint8_t d[2]; /* f16 */
    int8_t qs[QUANT_QK8_0];
} block_q8_0;

/* Q4_K: 8 sub-blocks of 32; value = d*sc[j]*q - dmin*m[j], q in 0..15.
 * scales: 6-bit sc and m of the 8 sub-blocks (see quant_k4_scale_min).
 * qs: 4 chunks of 32 bytes; chunk c holds sub-block 2c in the low nibbles
 * and sub-block 2c+1 in the high nibbles. */
typedef struct block_q4_k {
    uint8_t d[2];    /* f16, super-block scale of the scales */
    uint8_t dmin[2]; /* f16, super-block scale of the mins */
    uint8_t scales[QUANT_K_SCALE_BYTES];
    uint8_t qs[QUANT_QK_K / 2];
} block_q4_k;

/* Q5_K: Q4_K plus a fifth bit: for chunk c, bit 2c of qh[l] is the high bit
 * of value 64c+l and bit 2c+1 the high bit of value 64c+32+l. */
typedef struct block_q5_k {
    uint8_t d[2];
    uint8_t dmin[2];
    uint8_t scales[QUANT_K_SCALE_BYTES];
    uint8_t qh[QUANT_QK_K / 8];
    uint8_t qs[QUANT_QK_K / 2];
} block_q5_k;

/* Q6_K: 16 sub-blocks of 16; value = d*scales[s]*(q - 32), q in 0..63.
 * Two halves of 128 values; in half h (ql += 64h, qh += 32h), for l < 32:
 * value 128h+l    = low nibble  of ql[l]    | bits 0-1 of qh[l] << 4
 * value 128h+32+l = low nibble  of ql[32+l] | bits 2-3 of qh[l] << 4
 * value 128h+64+l = high nibble of ql[l]    | bits 4-5 of qh[l] << 4
 * value 128h+96+l = high nibble of ql[32+l] | bits 6-7 of qh[l] << 4 */
typedef struct block_q6_k {
    uint8_t ql[QUANT_QK_K / 2];
    uint8_t qh[QUANT_QK_K / 4];
    int8_t scales[QUANT_QK_K / 16];
    uint8_t d[2]; /* f16 */
} block_q6_k;

/* 8-bit activations (quant.h's quant_act_*): our own layouts, never in a
 * file, so they hold an f32 scale and are 4-byte aligned. */
typedef struct act_q8_32 { /* for Q8_0 weights */
    float d;
    int8_t qs[QUANT_QK8_0];
} act_q8_32;

typedef struct act_q8_k { /* for K-quant weights (llama.cpp's block_q8_K) */
    float d;
    int8_t qs[QUANT_QK_K];
    int16_t bsums[QUANT_QK_K / 16]; /* sum of qs[16 s .. 16 s + 15] */
} act_q8_k;

_Static_assert(sizeof(act_q8_32) == 36, "act_q8_32 layout");
_Static_assert(sizeof(act_q8_k) == 292, "act_q8_k layout");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q4_k) == 144, "block_q4_k layout");
_Static_assert(sizeof(block_q5_k) == 176, "block_q5_k layout");
_Static_assert(sizeof(block_q6_k) == 210, "block_q6_k layout");

static inline uint16_t quant_load_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static inline void quant_store_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v & 0xff);
    p[1] = (uint8_t)(v >> 8);
}

static inline float quant_load_f16(const uint8_t *p) { return quant_f16_to_f32(quant_load_u16(p)); }

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block:
 * j < 4: sc = scales[j] & 63, m = scales[j+4] & 63;
 * j >= 4: low 4 bits in scales[j+4] (sc low nibble, m high nibble), high 2
 * bits in the top bits of scales[j-4] (sc) and scales[j] (m). */
static inline void quant_k4_scale_min(int j, const uint8_t *scales, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = scales[j] & 63;
        *m = scales[j + 4] & 63;
    } else {
        *sc = (uint8_t)((scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4));
        *m = (uint8_t)((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
}

/* Scalar oracles, one per type (n in elements, a multiple of the block). */
void quant_dequant_f32_scalar(const void *src, float *dst, size_t n);
void quant_dequant_f16_scalar(const void *src, float *dst, size_t n);
void quant_dequant_bf16_scalar(const void *src, float *dst, size_t n);
void quant_dequant_q8_0_scalar(const void *src, float *dst, size_t n);
void quant_dequant_q4_k_scalar(const void *src, float *dst, size_t n);
void quant_dequant_q5_k_scalar(const void *src, float *dst, size_t n);
void quant_dequant_q6_k_scalar(const void *src, float *dst, size_t n);

/* Quantisers from f32 (scalar only: they run at conversion time). */
void quant_quantize_f32(const float *src, void *dst, size_t n);
void quant_quantize_f16(const float *src, void *dst, size_t n);
void quant_quantize_bf16(const float *src, void *dst, size_t n);
void quant_quantize_q8_0(const float *src, void *dst, size_t n);
void quant_quantize_q4_k(const float *src, void *dst, size_t n);
void quant_quantize_q5_k(const float *src, void *dst, size_t n);
void quant_quantize_q6_k(const float *src, void *dst, size_t n);
/* Q4_K/Q5_K without the AVX2 search: the oracle for quantize_avx2.c. */
void quant_quantize_q4_k_scalar(const float *src, void *dst, size_t n);
void quant_quantize_q5_k_scalar(const float *src, void *dst, size_t n);
/* The scale/min search of the 8 sub-blocks of one Q4_K/Q5_K super-block
 * (quantize_avx2.c): finite values without -0 only; after the CPU check. */
void quant_fit_k4_avx2(const float *x, int nmax, float rmin, int nstep, uint8_t *L, float *sub_scale,
                       float *sub_min);

/* 8-bit activations: scalar oracles (act_scalar.c) and AVX2 (act_avx2.c).
 * The quantisers of the two agree bit for bit. The dots take the
 * activation row as void (act_q8_32 or act_q8_k blocks) so that they share
 * quant_act_dot_fn's type. */
void quant_act_quantize_32_scalar(const float *x, act_q8_32 *y, size_t n);
void quant_act_quantize_k_scalar(const float *x, act_q8_k *y, size_t n);
float quant_act_dot_q8_0_scalar(const void *row, const void *xq, size_t n);
float quant_act_dot_q4_k_scalar(const void *row, const void *xq, size_t n);
float quant_act_dot_q5_k_scalar(const void *row, const void *xq, size_t n);
float quant_act_dot_q6_k_scalar(const void *row, const void *xq, size_t n);
void quant_act_quantize_32_avx2(const float *x, act_q8_32 *y, size_t n);
void quant_act_quantize_k_avx2(const float *x, act_q8_k *y, size_t n);
float quant_act_dot_q8_0_avx2(const void *row, const void *xq, size_t n);
/* The AMX level's dots: each block's (Q8_0) or sub-block's (Q4_K, Q5_K)
 * whole integer sum, then one FMA each (act_bsum_avx2.c; AVX2 CPUs only). */
float quant_act_dot_q8_0_bsum_avx2(const void *row, const void *xq, size_t n);
float quant_act_dot_q4_k_bsum_avx2(const void *row, const void *xq, size_t n);
float quant_act_dot_q5_k_bsum_avx2(const void *row, const void *xq, size_t n);
/* The same dots on AVX-512 VNNI, the same bits (act_bsum_avx512.c; quant_avx512_supported CPUs only), and their
 * 4-row forms (quant_act_dot4_fn). */
float quant_act_dot_q8_0_bsum_avx512(const void *row, const void *xq, size_t n);
float quant_act_dot_q4_k_bsum_avx512(const void *row, const void *xq, size_t n);
float quant_act_dot_q5_k_bsum_avx512(const void *row, const void *xq, size_t n);
void quant_act_dot4_q8_0_bsum_avx512(const void *row, size_t row_bytes, const void *xq, size_t n, float *y);
void quant_act_dot4_q4_k_bsum_avx512(const void *row, size_t row_bytes, const void *xq, size_t n, float *y);
void quant_act_dot4_q5_k_bsum_avx512(const void *row, size_t row_bytes, const void *xq, size_t n, float *y);
float quant_act_dot_q4_k_avx2(const void *row, const void *xq, size_t n);
float quant_act_dot_q5_k_avx2(const void *row, const void *xq, size_t n);
float quant_act_dot_q6_k_avx2(const void *row, const void *xq, size_t n);

/* AVX2+FMA+F16C fast paths (quant_avx2.c); only called after the CPU check.
 * Dequantisation is bit-identical to the scalar oracle; dot products differ
 * only by summation order. */
void quant_dequant_f16_avx2(const void *src, float *dst, size_t n);
void quant_dequant_bf16_avx2(const void *src, float *dst, size_t n);
void quant_dequant_q8_0_avx2(const void *src, float *dst, size_t n);
void quant_dequant_q4_k_avx2(const void *src, float *dst, size_t n);
void quant_dequant_q5_k_avx2(const void *src, float *dst, size_t n);
void quant_dequant_q6_k_avx2(const void *src, float *dst, size_t n);

float quant_dot_f32_avx2(const void *row, const float *x, size_t n);
float quant_dot_f16_avx2(const void *row, const float *x, size_t n);
float quant_dot_bf16_avx2(const void *row, const float *x, size_t n);
float quant_dot_q8_0_avx2(const void *row, const float *x, size_t n);
float quant_dot_q4_k_avx2(const void *row, const float *x, size_t n);
float quant_dot_q5_k_avx2(const void *row, const float *x, size_t n);
float quant_dot_q6_k_avx2(const void *row, const float *x, size_t n);

#endif
