/*
 * quant.h: tensor element types with llama.cpp's exact byte layouts, so GGUF
 * files move between the two engines: F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K.
 *
 * Each type has a plain scalar implementation (the oracle, *_scalar) and,
 * where the CPU has AVX2+FMA+F16C, a fast path chosen once at run time; the
 * unsuffixed functions dispatch. quant_dot keeps activations f32: a
 * quantised row is dotted with an f32 vector by dequantising on the fly,
 * block by block. The quant_act_* functions are the integer fast path of
 * the matrix-vector product (llama.cpp's): the activation row is quantised
 * once to 8-bit blocks and dotted with integer multiply-adds.
 */
#ifndef CLOVER_QUANT_H
#define CLOVER_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml type codes (the values stored in GGUF tensor infos). */
typedef enum quant_type {
    QUANT_F32 = 0,
    QUANT_F16 = 1,
    QUANT_Q4_0 = 2, /* known to GGUF, not supported */
    QUANT_Q4_1 = 3,
    QUANT_Q5_0 = 6,
    QUANT_Q5_1 = 7,
    QUANT_Q8_0 = 8,
    QUANT_Q8_1 = 9,
    QUANT_Q2_K = 10,
    QUANT_Q3_K = 11,
    QUANT_Q4_K = 12,
    QUANT_Q5_K = 13,
    QUANT_Q6_K = 14,
    QUANT_Q8_K = 15,
    QUANT_BF16 = 30,
    QUANT_TYPE_LIMIT = 64 /* codes at or above this are invalid */
} quant_type;

/* Name of any ggml type code ("q4_K", "bf16", ...); "?" when unknown. */
const char *quant_type_name(uint32_t type);
/* Parses a name as the CLI spells it ("f32", "bf16", "q8_0", "q4_k", ...); -1 when unknown. */
int quant_type_from_name(const char *name);
/* True for a type code GGUF knows (block geometry defined), whether or not
 * clover computes with it. */
bool quant_type_known(uint32_t type);
/* True for the types clover dequantises, quantises and dots. */
bool quant_type_supported(uint32_t type);
/* Elements per block (1 for float types, 32 for Q8_0, 256 for K-quants) and bytes per block. */
size_t quant_block_elems(uint32_t type);
size_t quant_block_bytes(uint32_t type);
/* Bytes of a row of n elements; 0 when n is not a multiple of the block or the type is unknown. */
size_t quant_row_bytes(uint32_t type, size_t n);

/* Half-precision conversions (IEEE binary16 and bfloat16, round to nearest even). */
float quant_f16_to_f32(uint16_t h);
uint16_t quant_f32_to_f16(float f);
float quant_bf16_to_f32(uint16_t h);
uint16_t quant_f32_to_bf16(float f);

/* n must be a multiple of quant_block_elems(type); types must be supported. */
void quant_dequantize_row(uint32_t type, const void *src, float *dst, size_t n);
void quant_quantize_row(uint32_t type, const float *src, void *dst, size_t n);
float quant_dot(uint32_t type, const void *row, const float *x, size_t n);

/* The scalar oracles of the above. */
void quant_dequantize_row_scalar(uint32_t type, const void *src, float *dst, size_t n);
void quant_quantize_row_scalar(uint32_t type, const float *src, void *dst, size_t n);
float quant_dot_scalar(uint32_t type, const void *row, const float *x, size_t n);

/* ---- 8-bit activations: the integer dot products ----
 * For Q8_0 weights the activations are quantised in blocks of 32 (an f32
 * scale and 32 int8), for the K-quants in blocks of 256 (llama.cpp's Q8_K:
 * an f32 scale, 256 int8 and the sums of each 16). In each block
 * d = max|x| / 127 and q = round-to-nearest-even(x * 127 / max|x|), so
 * |x - d q| <= d / 2: the dot product then differs from quant_dot's by at
 * most sum over blocks of (max|x_b| / 254) * sum_b |w| (plus float
 * rounding). A block holding a NaN or an infinity gets d = NaN, so the dot
 * is NaN as the f32 one would be. The scalar and AVX2 quantisers agree bit
 * for bit; the dots differ only in the order of the float scale products. */

/* Bytes of the quantised form of n activations for dotting with weights of
 * type; 0 when the type has no integer path (float types) or n is not a
 * multiple of its block. */
size_t quant_act_row_bytes(uint32_t weight_type, size_t n);
/* xq: quant_act_row_bytes(weight_type, n) bytes, 4-byte aligned. */
void quant_act_quantize(uint32_t weight_type, const float *x, void *xq, size_t n);
float quant_act_dot(uint32_t weight_type, const void *row, const void *xq, size_t n);
void quant_act_quantize_scalar(uint32_t weight_type, const float *x, void *xq, size_t n);
float quant_act_dot_scalar(uint32_t weight_type, const void *row, const void *xq, size_t n);
/* The dot quant_act_dot dispatches to for a type (NULL when it has no
 * integer path): a matrix product looks it up once, not once per row.
 * n must be a multiple of the type's activation block. */
typedef float (*quant_act_dot_fn)(const void *row, const void *xq, size_t n);
quant_act_dot_fn quant_act_dot_kernel(uint32_t weight_type);
/* Four weight rows (row + r * row_bytes, r = 0..3) against one activation
 * row: y[r] gets exactly the bits of the dispatched one-row dot of row r,
 * the four computed side by side. NULL where the active level has no such
 * form (only the AMX level's AVX-512 dots do: act_bsum_avx512.c). */
typedef void (*quant_act_dot4_fn)(const void *row, size_t row_bytes, const void *xq, size_t n, float *y);
quant_act_dot4_fn quant_act_dot4_kernel(uint32_t weight_type);

/* Whether the AVX2 fast paths are in use (CPU support; CLOVER_NO_SIMD=1 turns them off for diagnosis). */
bool quant_simd_active(void);

#endif
