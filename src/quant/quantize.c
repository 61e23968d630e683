/*
 * quantize.c: f32 -> each supported type, for the converter and the tests.
 *
 * Q8_0 is llama.cpp's reference quantiser exactly (scale amax/127, values
 * rounded half away from zero), so it matches gguf-py bit for bit. The
 * K-quants follow the approach of llama.cpp's reference quantisers (no
 * importance matrix): for Q4_K/Q5_K each 32-value sub-block gets a scale and
 * a min from a weighted least-squares search over candidate grid spacings
 * (weights |x| + rms, favouring large values); for Q6_K each 16-value
 * sub-block gets a symmetric scale from a search weighted by x^2. The
 * sub-block scales are then themselves quantised to 6 or 8 bits under an f16
 * super-scale, and every value is re-rounded against the scale actually
 * stored. Quality matches llama.cpp; bits need not.
 *
 * The Q4_K/Q5_K search has an AVX2 twin (quantize_avx2.c) that gives the
 * same bytes; quant_quantize_row_scalar always takes this file's path, the
 * oracle the twin is tested against.
 */
#include <math.h>

#include "quant/quant_internal.h"

/* Round to nearest, ties to even; saturating, NaN -> 0. */
static int round_nearest(float v) {
    if (!(v == v)) return 0;
    if (v > 4194303.f) v = 4194303.f;
    if (v < -4194303.f) v = -4194303.f;
    return (int)lrintf(v);
}

static int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

void quant_quantize_f32(const float *src, void *dst, size_t n) { memmove(dst, src, n * sizeof(float)); }

void quant_quantize_f16(const float *src, void *dst, size_t n) {
    uint8_t *p = dst;
    for (size_t i = 0; i < n; i++) quant_store_u16(p + 2 * i, quant_f32_to_f16(src[i]));
}

void quant_quantize_bf16(const float *src, void *dst, size_t n) {
    uint8_t *p = dst;
    for (size_t i = 0; i < n; i++) quant_store_u16(p + 2 * i, quant_f32_to_bf16(src[i]));
}

void quant_quantize_q8_0(const float *src, void *dst, size_t n) {
    block_q8_0 *b = dst;
    for (size_t i = 0; i < n / QUANT_QK8_0; i++, b++, src += QUANT_QK8_0) {
        float amax = 0;
        for (int j = 0; j < QUANT_QK8_0; j++) amax = fmaxf(amax, fabsf(src[j]));
        const float d = amax / 127;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        quant_store_u16(b->d, quant_f32_to_f16(d));
        for (int j = 0; j < QUANT_QK8_0; j++) b->qs[j] = (int8_t)clamp_int((int)roundf(src[j] * id), -127, 127);
    }
}

/* Fits x[i] ~ scale * L[i] + min (min <= 0, L in 0..nmax) minimising the
 * weighted squared error: starts from the plain min/max grid, then tries
 * nstep+1 grid spacings (nmax + rmin + rdelta*k over the range) and, for each
 * resulting assignment, the least-squares scale and min. Returns the scale,
 * *neg_min = -min. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min, float rmin,
                           float rdelta, int nstep) {
    uint8_t trial[32];
    float lo = x[0], hi = x[0], sum_w = 0, sum_x = 0;
    for (int i = 0; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0;
    }
    float iscale = nmax / (hi - lo);
    float scale = 1 / iscale, min = lo, best_err = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(round_nearest(iscale * (x[i] - lo)), 0, nmax);
        float diff = scale * L[i] + lo - x[i];
        best_err += w[i] * diff * diff;
    }
    for (int k = 0; k <= nstep; k++) {
        float is = (rmin + rdelta * k + nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(round_nearest(is * (x[i] - lo)), 0, nmax);
            trial[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (det <= 0) continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / det;
        float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (m > 0) { /* the min must not be positive: refit the scale alone */
            m = 0;
            s = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = s * trial[i] + m - x[i];
            err += w[i] * diff * diff;
        }
        if (err < best_err) {
            memcpy(L, trial, (size_t)n);
            best_err = err;
            scale = s;
            min = m;
        }
    }
    *neg_min = -min;
    return scale;
}

/* Packs the 6-bit scale and min of sub-block j (see quant_k4_scale_min). */
static void k4_pack_scale_min(uint8_t *scales, int j, int sc, int m) {
    if (j < 4) {
        scales[j] = (uint8_t)sc;
        scales[j + 4] = (uint8_t)m;
    } else {
        scales[j + 4] = (uint8_t)((sc & 0x0F) | ((m & 0x0F) << 4));
        scales[j - 4] |= (uint8_t)((sc >> 4) << 6);
        scales[j] |= (uint8_t)((m >> 4) << 6);
    }
}

/* The shared part of Q4_K and Q5_K: scales, mins and the values L (0..nmax)
 * of one super-block. Writes d, dmin and scales through the pointers. */
static void fit_k4_scalar(const float *x, int nmax, float rmin, int nstep, uint8_t *L, float *sub_scale,
                          float *sub_min) {
    float w[32];
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float rms = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = rms + fabsf(xs[l]);
        sub_scale[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &sub_min[j], rmin, 0.1f, nstep);
    }
}

/* The AVX2 search (quantize_avx2.c) matches the scalar one bit for bit on
 * finite values other than -0 (where fminf/fmaxf may pick either zero and
 * min_ps/max_ps pick by position); any other block takes the scalar path. */
static bool k4_block_plain(const float *x) {
    for (int i = 0; i < QUANT_QK_K; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        if ((u & 0x7f800000u) == 0x7f800000u || u == 0x80000000u) return false;
    }
    return true;
}

static void quantize_k4_block(const float *x, int nmax, float rmin, int nstep, bool simd, uint8_t *d_out,
                              uint8_t *dmin_out, uint8_t *scales, uint8_t *L) {
    float sub_scale[8], sub_min[8];
    float max_scale = 0, max_min = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (simd && k4_block_plain(x))
        quant_fit_k4_avx2(x, nmax, rmin, nstep, L, sub_scale, sub_min);
    else
#endif
        fit_k4_scalar(x, nmax, rmin, nstep, L, sub_scale, sub_min);
    (void)simd;
    for (int j = 0; j < 8; j++) {
        max_scale = fmaxf(max_scale, sub_scale[j]);
        max_min = fmaxf(max_min, sub_min[j]);
    }
    const float inv_scale = max_scale > 0 ? 63 / max_scale : 0;
    const float inv_min = max_min > 0 ? 63 / max_min : 0;
    memset(scales, 0, QUANT_K_SCALE_BYTES);
    for (int j = 0; j < 8; j++) {
        int ls = clamp_int(round_nearest(inv_scale * sub_scale[j]), 0, 63);
        int lm = clamp_int(round_nearest(inv_min * sub_min[j]), 0, 63);
        k4_pack_scale_min(scales, j, ls, lm);
    }
    quant_store_u16(d_out, quant_f32_to_f16(max_scale / 63));
    quant_store_u16(dmin_out, quant_f32_to_f16(max_min / 63));

    /* Re-round every value against the scales as stored. */
    const float d = quant_load_f16(d_out), dmin = quant_load_f16(dmin_out);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        quant_k4_scale_min(j, scales, &sc, &m);
        const float ds = d * sc, dm = dmin * m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = ds != 0 ? (uint8_t)clamp_int(round_nearest((x[32 * j + l] + dm) / ds), 0, nmax) : 0;
    }
}

static void quantize_q4_k(const float *src, void *dst, size_t n, bool simd) {
    block_q4_k *b = dst;
    uint8_t L[QUANT_QK_K];
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, src += QUANT_QK_K) {
        quantize_k4_block(src, 15, -1.0f, 20, simd, b->d, b->dmin, b->scales, L);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) b->qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

static void quantize_q5_k(const float *src, void *dst, size_t n, bool simd) {
    block_q5_k *b = dst;
    uint8_t L[QUANT_QK_K];
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, src += QUANT_QK_K) {
        quantize_k4_block(src, 31, -0.5f, 15, simd, b->d, b->dmin, b->scales, L);
        memset(b->qh, 0, sizeof b->qh);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                b->qs[32 * c + l] = (uint8_t)((lo & 0x0F) | ((hi & 0x0F) << 4));
                b->qh[l] |= (uint8_t)(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
            }
        }
    }
}

void quant_quantize_q4_k(const float *src, void *dst, size_t n) { quantize_q4_k(src, dst, n, quant_simd_active()); }
void quant_quantize_q4_k_scalar(const float *src, void *dst, size_t n) { quantize_q4_k(src, dst, n, false); }
void quant_quantize_q5_k(const float *src, void *dst, size_t n) { quantize_q5_k(src, dst, n, quant_simd_active()); }
void quant_quantize_q5_k_scalar(const float *src, void *dst, size_t n) { quantize_q5_k(src, dst, n, false); }

/* Symmetric fit x[i] ~ scale * l[i], l in -nmax..nmax-1, minimising the
 * x^2-weighted squared error over 19 grid spacings around nmax/amax.
 * Writes l + nmax to L; returns the scale (signed like the largest |x|). */
static float fit_scale_symmetric(int n, int nmax, const float *x, uint8_t *L) {
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < 1e-15f) {
        memset(L, (uint8_t)nmax, (size_t)n);
        return 0;
    }
    float best_scale = 0, best = 0;
    for (int k = 0; k <= 18; k++) {
        const int step = k == 0 ? 0 : k <= 9 ? k - 10 : k - 9; /* 0, then -9..-1, 1..9 */
        const float is = -(nmax + 0.1f * step) / max;
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(round_nearest(is * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        /* The error at the least-squares scale is sum w x^2 - sumlx^2/suml2: maximise sumlx^2/suml2. */
        if (suml2 > 0 && (k == 0 || sumlx * sumlx > best * suml2)) {
            best_scale = sumlx / suml2;
            best = best_scale * sumlx;
            for (int i = 0; i < n; i++) L[i] = (uint8_t)(clamp_int(round_nearest(is * x[i]), -nmax, nmax - 1) + nmax);
        }
    }
    return best_scale;
}

void quant_quantize_q6_k(const float *src, void *dst, size_t n) {
    block_q6_k *b = dst;
    uint8_t L[QUANT_QK_K];
    float sub_scale[16];
    for (size_t i = 0; i < n / QUANT_QK_K; i++, b++, src += QUANT_QK_K) {
        float max_scale = 0, max_abs = 0;
        for (int s = 0; s < 16; s++) {
            sub_scale[s] = fit_scale_symmetric(16, 32, src + 16 * s, L + 16 * s);
            if (fabsf(sub_scale[s]) > max_abs) {
                max_abs = fabsf(sub_scale[s]);
                max_scale = sub_scale[s];
            }
        }
        memset(b, 0, sizeof *b);
        if (max_abs < 1e-15f) continue; /* all zero: d = 0, every q = 0 */
        const float iscale = -128.0f / max_scale;
        quant_store_u16(b->d, quant_f32_to_f16(1 / iscale));
        for (int s = 0; s < 16; s++) b->scales[s] = (int8_t)clamp_int(round_nearest(iscale * sub_scale[s]), -128, 127);
        const float d = quant_load_f16(b->d);
        for (int s = 0; s < 16; s++) {
            const float ds = d * b->scales[s];
            for (int l = 0; l < 16; l++)
                L[16 * s + l] = ds != 0 ? (uint8_t)(clamp_int(round_nearest(src[16 * s + l] / ds), -32, 31) + 32) : 32;
        }
        for (int h = 0; h < 2; h++) {
            uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            const uint8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0x0F) | ((Lh[l + 64] & 0x0F) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0x0F) | ((Lh[l + 96] & 0x0F) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                  ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}
