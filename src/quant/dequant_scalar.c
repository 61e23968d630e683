/*
 * dequant_scalar.c: the scalar dequantisers, the oracle of every fast path.
 *
 * Written to read like the format definition (quant_internal.h), one value
 * at a time, and to round exactly like llama.cpp's reference: the scale
 * products are formed in f32 first (d*sc, dmin*m), then value = ds*q - dm,
 * two roundings, no fused multiply-add. The AVX2 dequantisers reproduce this
 * bit for bit, and so does gguf-py's numpy code, which the Python tests use.
 */
#include "quant/quant_internal.h"

void quant_dequant_f32_scalar(const void *src, float *dst, size_t n) { memmove(dst, src, n * sizeof(float)); }

void quant_dequant_f16_scalar(const void *src, float *dst, size_t n) {
    const uint8_t *p = src;
    for (size_t i = 0; i < n; i++) dst[i] = quant_f16_to_f32(quant_load_u16(p + 2 * i));
}

void quant_dequant_bf16_scalar(const void *src, float *dst, size_t n) {
    const uint8_t *p = src;
    for (size_t i = 0; i < n; i++) dst[i] = quant_bf16_to_f32(quant_load_u16(p + 2 * i));
}

void quant_dequant_q8_0_scalar(const void *src, float *dst, size_t n) {
    const block_q8_0 *b = src;
    for (size_t i = 0; i < n / QUANT_QK8_0; i++, b++) {
        const float d = quant_load_f16(b->d);
        for (int j = 0; j < QUANT_QK8_0; j++) *dst++ = b->qs[j] * d;
    }
}

void quant_dequant_q4_k_scalar(const void *src, float *dst, size_t n) {
    const block_q4_k *b = src;
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++) {
        const float d = quant_load_f16(b->d), dmin = quant_load_f16(b->dmin);
        for (int c = 0; c < 4; c++) { /* chunk of 64: sub-blocks 2c (low nibbles), 2c+1 (high) */
            const uint8_t *q = b->qs + 32 * c;
            uint8_t sc, m;
            quant_k4_scale_min(2 * c, b->scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            quant_k4_scale_min(2 * c + 1, b->scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (q[l] & 0x0F) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void quant_dequant_q5_k_scalar(const void *src, float *dst, size_t n) {
    const block_q5_k *b = src;
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++) {
        const float d = quant_load_f16(b->d), dmin = quant_load_f16(b->dmin);
        for (int c = 0; c < 4; c++) {
            const uint8_t *q = b->qs + 32 * c;
            const uint8_t bit_lo = (uint8_t)(1u << (2 * c)), bit_hi = (uint8_t)(2u << (2 * c));
            uint8_t sc, m;
            quant_k4_scale_min(2 * c, b->scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            quant_k4_scale_min(2 * c + 1, b->scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * ((q[l] & 0x0F) + (b->qh[l] & bit_lo ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * ((q[l] >> 4) + (b->qh[l] & bit_hi ? 16 : 0)) - m2;
        }
    }
}

void quant_dequant_q6_k_scalar(const void *src, float *dst, size_t n) {
    const block_q6_k *b = src;
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++) {
        const float d = quant_load_f16(b->d);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            const int8_t *sc = b->scales + 8 * h;
            float *y = dst + 128 * h;
            for (int l = 0; l < 32; l++) {
                const int s = l / 16; /* sub-blocks of 16: value 32k+l uses scale 2k+s */
                const int q1 = ((ql[l] & 0x0F) | ((qh[l] & 0x03) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 0x03) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 0x03) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 0x03) << 4)) - 32;
                y[l] = d * sc[s] * q1;
                y[l + 32] = d * sc[s + 2] * q2;
                y[l + 64] = d * sc[s + 4] * q3;
                y[l + 96] = d * sc[s + 6] * q4;
            }
        }
        dst += QUANT_QK_K;
    }
}
