/*
 * act_scalar.c: 8-bit activations (quant.h's quant_act_*), the scalar
 * oracles: the quantisers, and the integer dot products written like the
 * format definitions, one code at a time. Integer sums are exact, so the
 * AVX2 versions can only differ in how the float scales are applied.
 *
 * The quantiser rounds x * (127 / max|x|) to nearest even (nearbyintf in
 * the default rounding mode, which _mm256_round_ps reproduces) and stores
 * d = max|x| / 127. Non-finite inputs make d NaN and the codes 0.
 */
#include <float.h>
#include <math.h>

#include "quant/quant_internal.h"

/* Quantises n (<= 256) values into qs; returns d. */
static float act_quantize_block(const float *x, int8_t *qs, int n) {
    float amax = 0.0f;
    int finite = 1;
    for (int i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        if (!(a <= FLT_MAX))
            finite = 0;
        else if (a > amax)
            amax = a;
    }
    if (!finite || amax == 0.0f) {
        for (int i = 0; i < n; i++) qs[i] = 0;
        return finite ? 0.0f : NAN;
    }
    const float iscale = 127.0f / amax;
    for (int i = 0; i < n; i++) qs[i] = (int8_t)nearbyintf(x[i] * iscale);
    return amax / 127.0f;
}

void quant_act_quantize_32_scalar(const float *x, act_q8_32 *y, size_t n) {
    for (size_t i = 0; i < n / QUANT_QK8_0; i++, y++, x += QUANT_QK8_0)
        y->d = act_quantize_block(x, y->qs, QUANT_QK8_0);
}

void quant_act_quantize_k_scalar(const float *x, act_q8_k *y, size_t n) {
    for (size_t i = 0; i < n / QUANT_QK_K; i++, y++, x += QUANT_QK_K) {
        y->d = act_quantize_block(x, y->qs, QUANT_QK_K);
        for (int s = 0; s < QUANT_QK_K / 16; s++) {
            int sum = 0;
            for (int k = 0; k < 16; k++) sum += y->qs[16 * s + k];
            y->bsums[s] = (int16_t)sum;
        }
    }
}

float quant_act_dot_q8_0_scalar(const void *row, const void *xq, size_t n) {
    const act_q8_32 *x = xq;
    const block_q8_0 *b = row;
    float sum = 0.0f;
    for (size_t i = 0; i < n / QUANT_QK8_0; i++, b++, x++) {
        int isum = 0;
        for (int j = 0; j < QUANT_QK8_0; j++) isum += b->qs[j] * x->qs[j];
        sum += quant_load_f16(b->d) * x->d * (float)isum;
    }
    return sum;
}

/* Q4_K / Q5_K: sum_j (d sc_j sum q x - dmin m_j sum x) over the 8 sub-blocks;
 * code(l, c, hi) is the code of value 64c + 32hi + l. */
static float act_dot_k4(const uint8_t *d, const uint8_t *dmin, const uint8_t *scales, const uint8_t *qs,
                        const uint8_t *qh, const act_q8_k *x) {
    int sum_q = 0, sum_m = 0;
    for (int c = 0; c < 4; c++) {
        for (int hi = 0; hi < 2; hi++) {
            uint8_t sc, m;
            quant_k4_scale_min(2 * c + hi, scales, &sc, &m);
            int qx = 0, xs = 0;
            for (int l = 0; l < 32; l++) {
                int q = hi ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 0x0F;
                if (qh && (qh[l] >> (2 * c + hi)) & 1) q += 16;
                const int xv = x->qs[64 * c + 32 * hi + l];
                qx += q * xv;
                xs += xv;
            }
            sum_q += sc * qx;
            sum_m += m * xs;
        }
    }
    return x->d * (quant_load_f16(d) * (float)sum_q - quant_load_f16(dmin) * (float)sum_m);
}

float quant_act_dot_q4_k_scalar(const void *row, const void *xq, size_t n) {
    const act_q8_k *x = xq;
    const block_q4_k *b = row;
    float sum = 0.0f;
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, x++) sum += act_dot_k4(b->d, b->dmin, b->scales, b->qs, NULL, x);
    return sum;
}

float quant_act_dot_q5_k_scalar(const void *row, const void *xq, size_t n) {
    const act_q8_k *x = xq;
    const block_q5_k *b = row;
    float sum = 0.0f;
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, x++) sum += act_dot_k4(b->d, b->dmin, b->scales, b->qs, b->qh, x);
    return sum;
}

float quant_act_dot_q6_k_scalar(const void *row, const void *xq, size_t n) {
    const act_q8_k *x = xq;
    const block_q6_k *b = row;
    float sum = 0.0f;
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, x++) {
        int isum = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            const int8_t *xh = x->qs + 128 * h;
            for (int k = 0; k < 4; k++) { /* values 128h + 32k + l, sub-blocks 8h + 2k + l/16 */
                for (int half = 0; half < 2; half++) {
                    int s = 0;
                    for (int l = 16 * half; l < 16 * half + 16; l++) {
                        const int lo = ((k & 1 ? ql[l + 32] : ql[l]) >> (k & 2 ? 4 : 0)) & 0x0F;
                        const int q = (lo | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
                        s += q * xh[32 * k + l];
                    }
                    isum += b->scales[8 * h + 2 * k + half] * s;
                }
            }
        }
        sum += quant_load_f16(b->d) * x->d * (float)isum;
    }
    return sum;
}
